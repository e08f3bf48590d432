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

Three reduced launches of the same kernel measure o, a and b: batch 1, heads spread over k
waves of W CTA slots, n KV blocks per CTA, and
* non-causal (and packed decode), at (k, n) = (1, lo), (NONCAUSAL_WAVES = 4, lo), (1, hi)
  with lo = min(2, the fewest blocks a real CTA does), hi = min(6, its most), at least
  lo + 1 (`sample_points`): CTAs of the real m-blocks, as many sharing one kv head as real
  CTAs read at once (m-blocks x q heads per kv head), so T(k, n) = o + k (a + b n); an
  unsplit launch's samples keep the real CTAs' last-block fill (seqlen_k = (n - 1)
  kv_block + the real last block's keys) and query rows (up to m_tile);
* causal, at SAMPLE_POINTS (k, n) = (1, 2), (2, 2), (1, 6): a causal attention of n
  m-blocks per head (seqlen = n m_tile), whose CTAs end at their diagonals and drift apart
  like the real ones, and read K/V that earlier m-blocks of their head brought into L2
  (lock-step samples reading cold K/V were some 5 % slow).
Why the non-causal points (h100_sxm, decode with head dim 128 on 132 SMs against full
runs; 32/8 heads x 1024 requests over 5 keys, 32/32 x 512 over 9, 32/8 x 256 over 129,
32/32 x 128 over 300, 64/8 x 64 over 1025, 32/32 x 16 over 2049): with full kv_block boxes
and m_tile query rows in every sample they read +16.5, +36.5, +24.9, +24.5, +9.7, +6.0 %;
with the real fill and rows +3.6, +4.4, -0.2, +6.8, +0.4, +2.4 %; reading a paged KV cache
(`kernels.attention_kv_page_keys`) -7.2, +16.1, +5.4, +8.1, +2.2, +2.1 %, as one wave
transition of lock-step CTAs overstates a CTA's cost (worst with the block-table load
before the copies) and CTAs of one block were extrapolated from two- to six-block samples;
with the points above -0.6, -0.1, -2.0, +2.7, +0.8, +1.7 %. On 4 SMs (`tests/
test_attention_op.py`) decode rows read +0.4 ... +2.0 %, one-block MHA CTAs over 9 keys
+3.0 %; with one stage release per warp the MHA rows over 9 and 300 keys read +1.2 and
+2.7 %.
Each sample's own critical slot (A_i, B_i) gives T_i = o + A_i a + B_i b; the weights w
solve sum w_i [1, A_i, B_i] = [1, A, B] (`sample_weights`) and T = sum w_i T_i. The
largest sample has 6 blocks per CTA because the per-block cost falls along a CTA (the
two-stage K/V ring starts cold): CTAs of at most 4 blocks read 5-10 % high for long
causal CTAs.

The assignment of CTAs to slots is computed with a nominal a = `NOMINAL_PROLOGUE_BLOCKS`
blocks (the makespan's dependence on a / b is weak once there are several waves). Measured
against full runs: within 1 % on the tests' 4-SM suite; DeepSeek-V3 dims (192/128,
causal, 8 heads x 2048 tokens) on 16 SMs +4.3 %, causal with seqlen_k = 2 x seqlen_q on 4
SMs -3.2 %, MLA decode of 4 x 128 heads over 4096 keys on 16 SMs -0.04 %, 2 x 16 on 4 SMs
-0.10 %.
Left out: what moves causal CTAs' cost beyond this model (the per-block cost still falls
past 6 blocks; a 12-block sample did not remove the +4 %); launches too small to gain
(`worth_sampling`) are simulated whole.
Units: cycles, KV blocks, CTAs.
"""

from __future__ import annotations

import heapq

import numpy as np

SAMPLE_POINTS = ((1, 2), (2, 2), (1, 6))   # (waves, KV blocks per CTA) per launch
NONCAUSAL_WAVES = 4               # waves of the second sample of a non-causal launch
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


def sample_points(blocks: np.ndarray, causal: bool) -> tuple[tuple[int, int], ...]:
    """The (waves, KV blocks per CTA) of the three samples: SAMPLE_POINTS for a causal
    launch; for a non-causal one (1, lo), (NONCAUSAL_WAVES, lo), (1, hi), lo = min(2, the
    fewest blocks a CTA does), hi = min(6, its most), at least lo + 1 (module docstring)."""
    if causal or not blocks.size:
        return SAMPLE_POINTS
    lo = min(max(int(blocks.min()), 1), 2)
    hi = max(lo + 1, min(SAMPLE_POINTS[2][1], int(blocks.max())))
    return ((1, lo), (NONCAUSAL_WAVES, lo), (1, hi))


def worth_sampling(blocks: np.ndarray, slots: int,
                   points: tuple[tuple[int, int], ...] = SAMPLE_POINTS) -> bool:
    """True when the op's KV-block work exceeds MIN_GAIN x that of the samples."""
    sample = sum(k * n for k, n in points)
    return float(blocks.sum()) >= MIN_GAIN * slots * sample


def sample_weights(basis: list[tuple[int, int]], target: tuple[int, int]) -> tuple:
    """Weights w with sum w_i [1, A_i, B_i] = [1, A, B]: `basis` the critical slots (A_i,
    B_i) of the SAMPLE_POINTS launches, `target` (A, B) the op's."""
    m = np.array([[1.0, a, b] for a, b in basis]).T
    return tuple(float(w) for w in np.linalg.solve(m, [1.0, *target]))
