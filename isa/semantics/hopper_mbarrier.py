"""`mbarrier.*`: shared-memory transaction barriers, and the proxy fences beside them.

Modelled (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier"):
an mbarrier object is 8 bytes of shared memory holding the current phase's pending
arrival count, the expected count that each new phase starts with, a signed tx-count
and the phase parity. A phase completes when pending count and tx-count are both zero;
the parity then flips, pending is reset to the expected count and tx-count to zero. The
real encoding is opaque; ours (so `ld.shared.b64` of a barrier shows it) is

    bits 0-19 expected count, 20-39 pending count, 40-61 tx-count (two's complement),
    bit 63 phase parity.

`arrive` returns a state word holding the parity of the phase it arrived on (bit 63).
Every lane of the instruction arrives (in lane order, which is a legal order);
arriving on a phase with no pending arrivals left is a fault. `arrive_drop` also lowers
the expected count of later phases. `expect_tx` adds to the tx-count, `complete_tx`
(and a TMA copy, through `complete_tx`) subtracts.

Waiting (`try_wait`, `test_wait`, with a state or a `.parity` operand): a wait on a
completed phase returns true. A wait on an incomplete phase suspends the lane (`pc =
BLOCKED`, as `bar.sync` does) until that phase completes; the wait then returns true
and the lane resumes after it. So a polling loop `L: mbarrier.try_wait... p ...; @!p bra L;`
costs one pass and cannot starve, under min-PC scheduling, a producer sitting at a
higher pc. For `try_wait` this is its specified behaviour (a suspend until the phase
completes or a time limit); for the non-blocking `test_wait` it is a legal schedule
(the thread is simply not run until then), but a program whose own later work would
complete the phase it tests deadlocks, and is reported as a barrier deadlock at the
test. Suspended lanes carry `bar_id = -2` so that `bar.sync` never releases them.

A `.shared::cluster` address from `mapa` names another CTA's barrier of the cluster
(`isa.cluster`): arrivals and tx changes then reach that CTA's barrier (a remote arrive,
`mbarrier.arrive.release.cluster.shared::cluster.b64 _, [addr]`).

Left out: `.noComplete`, `mbarrier.pending_count`, and memory-ordering effects of
`.release/.acquire` (the functional model is sequentially consistent). Fences
`fence.proxy.async` and `fence.mbarrier_init` have no functional effect.
"""

from __future__ import annotations

import numpy as np

from isa.machine import BLOCKED
from isa.memory import SHARED_WINDOW, WINDOW_SIZE
from isa.semantics.common import PRED, U32, as_array
from isa.semantics.registry import semantics
from isa.types import TYPES

U64 = TYPES["u64"]
MAX_COUNT = (1 << 20) - 1
WAIT_BAR_ID = -2
_F20 = np.uint64(MAX_COUNT)
_TX_BITS = 22
_TX_MASK = np.uint64((1 << _TX_BITS) - 1)
_PHASE = np.uint64(1 << 63)


def decode_state(word) -> tuple[int, int, int, int]:
    """(expected, pending, tx-count, parity) of one mbarrier word."""
    w = int(word)
    tx = (w >> 40) & ((1 << _TX_BITS) - 1)
    if tx >= 1 << (_TX_BITS - 1):
        tx -= 1 << _TX_BITS
    return w & MAX_COUNT, (w >> 20) & MAX_COUNT, tx, w >> 63


def encode_state(expected: int, pending: int, tx: int, parity: int) -> np.uint64:
    return np.uint64(expected | (pending << 20) | ((tx & ((1 << _TX_BITS) - 1)) << 40)
                     | (parity << 63))


def barrier_words(m, ins, op, lanes) -> tuple[np.ndarray, np.ndarray]:
    """Shared memory as u64 words, and the word index of each lane's barrier (a shared
    address, or a generic one in the shared window)."""
    addr = op.address(m, lanes)
    inside = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_SIZE)
    if ins.space is None and not inside.all():
        raise m.fault(ins, f"mbarrier address {int(addr[~inside][0]):#x} is not in shared "
                      "memory", lanes, inside, expected="a shared-memory address")
    addr = np.where(inside, addr - SHARED_WINDOW, addr)
    buf, off = m.locate("shared", addr, lanes, 8, ins)
    return buf.view(np.uint64), off // 8


def _waits(m) -> np.ndarray:
    """Per thread: the word index of the barrier it is suspended on, -1 if none."""
    w = getattr(m, "mbarrier_wait_word", None)
    if w is None:
        w = m.mbarrier_wait_word = np.full(m.T, -1, dtype=np.int64)
    return w


def update(m, ins, words, idx: np.ndarray, arrivals: np.ndarray, tx_delta: np.ndarray,
           drops: np.ndarray | None = None) -> None:
    """Apply arrivals and tx changes per barrier word (in lane order), completing phases;
    the lanes' changes summed per word and applied at once unless one would fault."""
    if idx.size > 1:
        order, starts = _groups(idx)
        sums = [None if a is None else np.add.reduceat(a[order], starts)
                for a in (arrivals, tx_delta, drops)]
        if update_distinct(m, words, idx[order][starts], *sums):
            return
    if idx.size == 1:
        groups = [(int(idx[0]), slice(None))]
    else:
        groups = [(w, idx == w) for w in np.unique(idx).tolist()]
    for w, sel in groups:
        expected, pending, tx, parity = decode_state(words[w])
        if expected == 0:
            raise m.fault(ins, f"mbarrier at shared offset {w * 8 % m.mem.shared_bytes:#x} "
                          "used before mbarrier.init", expected="mbarrier.init first")
        n = int(arrivals[sel].sum())
        tx += int(tx_delta[sel].sum())
        if drops is not None:
            expected -= int(drops[sel].sum())
        if n > pending:
            raise m.fault(ins, f"{n} arrivals on an mbarrier phase with {pending} pending",
                          expected="no more arrivals per phase than the barrier's count")
        pending -= n
        if abs(tx) > MAX_COUNT:
            raise m.fault(ins, f"mbarrier tx-count {tx} out of range",
                          expected=f"a tx-count within +-{MAX_COUNT}")
        if pending == 0 and tx == 0:
            parity ^= 1
            pending, tx = expected, 0
            words[w] = encode_state(expected, pending, tx, parity)
            _release(m, [w])
        else:
            words[w] = encode_state(expected, pending, tx, parity)


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stable order sorting `keys`, start of each run of equal keys in that order)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    return order, np.flatnonzero(np.append(True, ordered[1:] != ordered[:-1]))


def update_distinct(m, words, idx: np.ndarray, arrivals: np.ndarray, tx_delta: np.ndarray,
                    drops: np.ndarray | None = None) -> bool:
    """`update` of lanes that each change a barrier word of their own, all at once (so the
    same as lane by lane); False, with nothing changed, when two lanes share a word or some
    lane's change would fault (the caller then goes lane by lane, faulting in its turn)."""
    order = np.sort(idx)
    if (order[1:] == order[:-1]).any():
        return False
    w = words[idx]
    before = (w & _F20).astype(np.int64)
    pending = ((w >> np.uint64(20)) & _F20).astype(np.int64) - arrivals
    tx = ((w >> np.uint64(40)) & _TX_MASK).astype(np.int64)
    tx = np.where(tx >= 1 << (_TX_BITS - 1), tx - (1 << _TX_BITS), tx) + tx_delta
    expected = before - drops if drops is not None else before
    if ((before == 0) | (pending < 0) | (np.abs(tx) > MAX_COUNT) | (expected < 0)).any():
        return False
    done = (pending == 0) & (tx == 0)
    parity = (w >> np.uint64(63)) ^ done.astype(np.uint64)
    pending = np.where(done, expected, pending)
    tx = np.where(done, 0, tx)
    words[idx] = (expected.astype(np.uint64) | (pending.astype(np.uint64) << np.uint64(20))
                  | ((tx & ((1 << _TX_BITS) - 1)).astype(np.uint64) << np.uint64(40))
                  | (parity << np.uint64(63)))
    _release(m, idx[done].tolist())
    return True


def _waiters(m) -> dict[int, list[np.ndarray]]:
    """Per barrier word some lane was suspended on since its last release, the lanes that
    were (one array per wait step)."""
    waiters = getattr(m, "mbarrier_waiters", None)
    if waiters is None:
        waiters = m.mbarrier_waiters = {}
    return waiters


def _release(m, words: list[int]) -> None:
    """Resume the lanes suspended on the barrier words `words`; their wait returns true."""
    waiters = _waiters(m)
    parts = [(word, lanes) for word in words for lanes in waiters.pop(word, ())]
    if not parts:
        return
    waits = _waits(m)
    lanes = np.concatenate([lanes for _, lanes in parts]) if len(parts) > 1 else parts[0][1]
    word_of = np.repeat([word for word, _ in parts], [lanes.size for _, lanes in parts])
    lanes = lanes[(waits[lanes] == word_of) & (m.pc[lanes] == BLOCKED)]
    if len(parts) > 1:  # sorted and distinct (np.unique hashes: slower on many lanes)
        order, starts = _groups(lanes)
        lanes = lanes[order][starts]
    if not lanes.size:
        return
    for resume in np.unique(m.resume[lanes]).tolist():
        sel = lanes[m.resume[lanes] == resume]
        wait_ins = m.program.instrs[resume - 1]
        wait_ins.ops[0].write(m, np.ones(sel.size, dtype=bool), PRED, sel)
        m.pc[sel] = resume
    m.bar_id[lanes] = -1
    waits[lanes] = -1


@semantics("mbarrier.init")
def mbarrier_init(m, ins, lanes):
    words, idx = barrier_words(m, ins, ins.ops[0], lanes)
    count = as_array(ins.ops[1].read(m, U32, lanes), m.nlanes(lanes)).astype(np.int64)
    if ((count < 1) | (count > MAX_COUNT)).any():
        raise m.fault(ins, f"mbarrier count {int(count.max())}", expected=f"1..{MAX_COUNT}")
    words[idx] = (count.astype(np.uint64) << np.uint64(20)) | count.astype(np.uint64)


@semantics("mbarrier.inval")
def mbarrier_inval(m, ins, lanes):
    words, idx = barrier_words(m, ins, ins.ops[0], lanes)
    words[idx] = 0


def _arrive(m, ins, lanes, drop: bool):
    n = m.nlanes(lanes)
    words, idx = barrier_words(m, ins, ins.ops[1], lanes)
    state = (words[idx] & _PHASE)
    third = as_array(ins.ops[2].read(m, U32, lanes), n).astype(np.int64) \
        if len(ins.ops) > 2 else None
    if "expect_tx" in ins.flags:
        if third is None:
            raise m.fault(ins, "mbarrier.arrive.expect_tx without a tx count",
                          expected="mbarrier.arrive.expect_tx.shared::cta.b64 state, [addr], tx")
        arrivals, tx = np.ones(n, dtype=np.int64), third
    else:
        arrivals = third if third is not None else np.ones(n, dtype=np.int64)
        tx = np.zeros(n, dtype=np.int64)
    update(m, ins, words, idx, arrivals, tx, arrivals if drop else None)
    ins.ops[0].write(m, state, U64, lanes)


@semantics("mbarrier.arrive")
def mbarrier_arrive(m, ins, lanes):
    _arrive(m, ins, lanes, drop=False)


@semantics("mbarrier.arrive_drop")
def mbarrier_arrive_drop(m, ins, lanes):
    _arrive(m, ins, lanes, drop=True)


def _tx(m, ins, lanes, sign: int):
    n = m.nlanes(lanes)
    words, idx = barrier_words(m, ins, ins.ops[0], lanes)
    tx = as_array(ins.ops[1].read(m, U32, lanes), n).astype(np.int64) * sign
    update(m, ins, words, idx, np.zeros(n, dtype=np.int64), tx)


@semantics("mbarrier.expect_tx")
def mbarrier_expect_tx(m, ins, lanes):
    _tx(m, ins, lanes, +1)


@semantics("mbarrier.complete_tx")
def mbarrier_complete_tx(m, ins, lanes):
    _tx(m, ins, lanes, -1)


@semantics("mbarrier.try_wait", "mbarrier.test_wait")
def mbarrier_wait(m, ins, lanes):
    n = m.nlanes(lanes)
    words, idx = barrier_words(m, ins, ins.ops[1], lanes)
    if "parity" in ins.flags:
        want = as_array(ins.ops[2].read(m, U32, lanes), n).astype(np.uint64) & np.uint64(1)
    else:
        want = as_array(ins.ops[2].read(m, U64, lanes), n) >> np.uint64(63)
    done = (words[idx] >> np.uint64(63)) != want
    ins.ops[0].write(m, done, PRED, lanes)
    if done.all():
        return
    ids = m.lane_ids(lanes)[~done]
    m.resume[ids] = ins.pc + 1
    m.bar_id[ids] = WAIT_BAR_ID
    m.bar_count[ids] = np.iinfo(np.int32).max
    m.pc[ids] = BLOCKED
    words_of = idx[~done]
    _waits(m)[ids] = words_of
    waiters = _waiters(m)
    order, starts = _groups(words_of)
    for word, lanes in zip(words_of[order][starts].tolist(), np.split(ids[order], starts[1:]),
                           strict=True):
        waiters.setdefault(word, []).append(lanes)


@semantics("fence.proxy.async", "fence.mbarrier_init")
def proxy_fence(m, ins, lanes):
    return None
