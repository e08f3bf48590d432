"""Op-level sampled fidelity for the attention kernels (`attention`, `mla-decode`).

What is modeled. An attention launch is a list of CTAs, each doing n_c KV blocks (all
of them, a causal prefix ending at its diagonal, or one split's share). A CTA costs
a + b n_c cycles on its SM: a its prologue and epilogue (Q load, pipeline fill, O store),
b one KV block in the steady state of a full chip (all SMs streaming, so shared L2/HBM
bandwidth is loaded as in the real run); the launch adds o once (the first loads' latency
and the drain of the last stores). The launch time is the makespan of the CTAs
dispatched in grid order onto W = compute SMs x CTAs/SM slots, each taking the slot that
frees first (`critical_slot`): with A CTAs and B KV blocks on the critical slot,
T = o + A a + B b.

Three reduced launches of the same kernel measure o, a and b: k waves of W CTAs (the
rows of one m-block, heads spread over the wave) whose KV length is n blocks, seeing the
same masks as a real CTA's last block(s) (causal: the diagonal), at (k, n) = (1, n1),
(2, n1), (1, n2), so T(k, n) = o + k (a + b n). The weights w solve
w . [1, k_i, k_i n_i] = [1, A, B] (`sample_weights`), and T = sum w_i T_i.

The assignment of CTAs to slots is computed with a nominal a = `NOMINAL_PROLOGUE_BLOCKS`
blocks (the makespan's dependence on a / b is weak once there are several waves). K/V
reuse through L2 is kept: as many sample CTAs share one kv head as real CTAs read at once
(m-blocks x q heads per kv head); causal samples share one kv head in all (a causal CTA
after the first wave finds most of its blocks in L2, read by the earlier m-blocks of its
head; cold reads in the samples made them some 5 % slow). Left out: the sample CTAs start
in step where the real ones drift apart; launches too small to gain (`worth_sampling`)
are simulated whole. Units: cycles, KV blocks, CTAs.
"""

from __future__ import annotations

import heapq

import numpy as np

SAMPLE_POINTS = ((1, 2), (2, 2), (1, 6))   # (waves, KV blocks per CTA) per launch
NOMINAL_PROLOGUE_BLOCKS = 2.0     # a / b used only to assign CTAs to slots
MIN_GAIN = 2.0                    # sample only when the op has this many times the work


def blocks_per_cta(m_blocks: int, rows_per_block: int, pack: int, seqlen_q: int,
                   seqlen_k: int, kv_block: int, causal: bool, splits: int,
                   blocks_per_split: int) -> np.ndarray:
    """KV blocks of each (m-block, split) CTA, indexed [split, m_block], as the kernel
    computes its range (causal bottom-right aligned)."""
    nb = -(-seqlen_k // kv_block)
    mb = np.arange(m_blocks)
    last_row = np.minimum(mb * rows_per_block + rows_per_block - 1,
                          seqlen_q * max(pack, 1) - 1)
    s_hi = np.minimum(last_row // max(pack, 1), seqlen_q - 1)
    end = np.full(m_blocks, nb)
    if causal:
        end = np.minimum(end, (s_hi + 1 + seqlen_k - seqlen_q + kv_block - 1) // kv_block)
    begin = np.arange(splits)[:, None] * blocks_per_split
    stop = np.minimum(end[None, :], begin + blocks_per_split)
    return np.maximum(stop - begin, 0)


def cta_blocks(per_cta: np.ndarray, grid_y: int, batch: int) -> np.ndarray:
    """Blocks of every CTA in dispatch order (x fastest, then y, then z = b x splits + z)."""
    splits, m_blocks = per_cta.shape
    z_rows = np.tile(per_cta, (batch, 1))                 # [batch * splits, m_blocks]
    return np.repeat(z_rows[:, None, :], grid_y, axis=1).reshape(-1)


def critical_slot(blocks: np.ndarray, slots: int) -> tuple[int, int]:
    """(CTAs, KV blocks) on the slot that finishes last when CTAs take the earliest-free
    of `slots` slots in order, each costing NOMINAL_PROLOGUE_BLOCKS + its blocks."""
    heap = [(0.0, i) for i in range(slots)]
    count = [0] * slots
    total = [0] * slots
    for n in blocks.tolist():
        t, i = heapq.heappop(heap)
        count[i] += 1
        total[i] += n
        heapq.heappush(heap, (t + NOMINAL_PROLOGUE_BLOCKS + n, i))
    finish = [NOMINAL_PROLOGUE_BLOCKS * c + b for c, b in zip(count, total, strict=True)]
    i = int(np.argmax(finish))
    return count[i], total[i]


def worth_sampling(blocks: np.ndarray, slots: int) -> bool:
    """True when the op's KV-block work exceeds MIN_GAIN x that of the samples."""
    sample = sum(k * n for k, n in SAMPLE_POINTS)
    return float(blocks.sum()) >= MIN_GAIN * slots * sample


def sample_weights(basis: list[tuple[int, int]], target: tuple[int, int]) -> tuple:
    """Weights w with sum w_i [1, A_i, B_i] = [1, A, B]: `basis` the critical slots (A_i,
    B_i) of the SAMPLE_POINTS launches, `target` (A, B) the op's."""
    m = np.array([[1.0, a, b] for a, b in basis]).T
    return tuple(float(w) for w in np.linalg.solve(m, [1.0, *target]))
