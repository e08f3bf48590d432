"""Cache policies: `createpolicy`, `.L2::cache_hint`, `.L1::no_allocate` / `.L1::evict_*`,
L2 fetch sizes, `discard` / `applypriority` (isa.semantics.cache_policy), the policy rows
the trace keeps per pc, and what the cached memory does with them.

Every form below was given to `ptxas -arch=sm_90a` (CUDA 13.0) in a one-instruction kernel;
the accepted ones assemble, the refused ones fail with the message quoted beside them.
"""

import itertools

import numpy as np
import pandas as pd
import pytest

import isa
import models
from isa.errors import PtxError
from isa.trace_format import (
    KIND_LOAD,
    KIND_LOAD_CG,
    L1_EVICT_FIRST,
    L1_NO_ALLOCATE,
    L2_FIRST,
    L2_LAST,
    L2_NORMAL,
    L2_UNCHANGED,
    OP_APPLY_PRIORITY,
    OP_DISCARD,
    POLICY_CODE,
    POLICY_HI,
    POLICY_LO,
    POLICY_MID,
    policy_row,
)
from models import cached_memory_layout as layout
from models.cached_memory import COUNT_NAMES, CachedMemory
from models.link_memory import LinkMemory, LinkWindow
from simulator import simulate_kernel
from simulator.runner.trace import TraceRecorder
from workloads.kernels.microbench import load_ptx as load_microbench_ptx

HEAD = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 src, .param .u64 dst)
{
    .reg .b32 %r<16>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<16>;
    .shared .align 128 .b8 sm[1024];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    createpolicy.fractional.L2::evict_first.b64 %rd3, 1.0;
    mov.u64 %rd9, sm;
    mov.u64 %rd10, bar;
    LINE
    ret;
}
"""

ACCEPTED = [
    "ld.global.L2::cache_hint.b32 %r1, [%rd1], %rd3;",
    "ld.global.nc.L1::no_allocate.L2::256B.b32 %r2, [%rd1];",
    "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.b32 {%r3,%r4,%r5,%r6}, [%rd1], "
    "%rd3;",
    "ld.global.L1::evict_first.b32 %r7, [%rd1];",
    "ld.global.L1::evict_last.b32 %r7, [%rd1];",
    "ld.global.L1::evict_normal.b32 %r7, [%rd1];",
    "ld.global.L1::evict_unchanged.b32 %r7, [%rd1];",
    "ld.L1::no_allocate.b32 %r1, [%rd1];",
    "ld.global.relaxed.gpu.L1::no_allocate.b32 %r1, [%rd1];",
    "ld.global.L2::64B.b32 %r7, [%rd1];",
    "ld.global.L1::evict_last.L2::cache_hint.L2::128B.b32 %r7, [%rd1], %rd3;",
    "ld.global.L2::cache_hint.b32 %r1, [%rd1], 0x12F0000000000000;",
    "st.global.L1::no_allocate.b32 [%rd2], %r1;",
    "st.global.L2::cache_hint.b32 [%rd2], %r1, %rd3;",
    "st.global.L1::evict_last.b32 [%rd1], %r1;",
    "st.global.L1::no_allocate.L2::cache_hint.v4.b32 [%rd2], {%r3,%r4,%r5,%r6}, %rd3;",
    "red.global.add.L2::cache_hint.u32 [%rd1], %r1, %rd3;",
    "atom.global.add.L2::cache_hint.u32 %r2, [%rd1], %r1, %rd3;",
    "prefetch.global.L2::evict_last [%rd1];",
    "prefetch.global.L2 [%rd1];",
    "discard.global.L2 [%rd1], 128;",
    "applypriority.global.L2::evict_normal [%rd1], 128;",
    "createpolicy.fractional.L2::evict_last.L2::evict_first.b64 %rd5, 0.25;",
    "createpolicy.fractional.L2::evict_normal.b64 %rd6;",
    "createpolicy.fractional.L2::evict_first.b64 %rd4, %f1;",
    "createpolicy.range.L2::evict_last.L2::evict_first.b64 %rd8, [%rd1], 4096, 8192;",
    "createpolicy.range.global.L2::evict_last.b64 %rd8, [%rd1], 4096, 4096;",
    "createpolicy.range.L2::evict_first.b64 %rd4, [%rd1], %r1, %r2;",
    "cp.async.ca.shared.global.L2::cache_hint [%rd9], [%rd1], 16, %rd3;",
    "cp.async.cg.shared.global.L2::cache_hint.L2::128B [%rd9], [%rd1], 16, %rd3;",
    "cp.async.cg.shared.global.L2::cache_hint [%rd9], [%rd1], 16, 8, %rd3;",
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
    "[%rd9], [%rd1], 256, [%rd10], %rd3;",
    "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%rd1], [%rd9], 256, %rd3;",
    "cp.async.bulk.prefetch.L2.global.L2::cache_hint [%rd1], 256, %rd3;",
    "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ".L2::cache_hint [%rd9], [%rd1, {%r1}], [%rd10], %rd3;",
    "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.L2::cache_hint "
    "[%rd1, {%r1, %r2}], [%rd9], %rd3;",
]

REFUSED = [   # (form, what ptxas -arch=sm_90a says)
    ("prefetch.global.L2::cache_hint [%rd1], %rd3;",
     "Illegal modifier '.L2::cache_hint' for instruction 'prefetch'"),
    ("prefetch.global.L2::evict_first [%rd1];",
     "Illegal modifier '.evict_first' for instruction 'prefetch'"),
    ("ld.global.L2::evict_first.b32 %r1, [%rd1];",
     "Instruction 'ld' requires '.v8.b32/.v4.b64' type with '.L2::evict_first' modifier."),
    ("st.global.L2::evict_first.b32 [%rd1], %r1;",
     "Instruction 'st' requires '.v8.b32/.v4.b64' type with '.L2::evict_first' modifier."),
    ("ld.global.L2::cache_hint.b32 %r1, [%rd1];", "Arguments mismatch for instruction 'ld'"),
    ("ld.global.L2::cache_hint.b32 %r1, [%rd1], %r3;", "Arguments mismatch for instruction 'ld'"),
    ("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
     "[%rd9], [%rd1, {%r1}], [%rd10], %rd3;",
     "Arguments mismatch for instruction 'cp.async.bulk.tensor'"),
    ("ld.global.b32 %r1, [%rd1], %rd3;",
     ".L2::cache_hint modifier required for instruction 'ld' with 3 arguments"),
    ("ld.shared.L1::no_allocate.b32 %r1, [%rd9];",
     "Modifier '.no_allocate' cannot be applied to '.shared' space for instruction 'ld'"),
    ("ld.shared.L2::cache_hint.b32 %r1, [%rd9], %rd3;",
     "Modifier '.L2::cache_hint' cannot be applied to '.shared' space for instruction 'ld'"),
    ("ld.global.cg.L1::no_allocate.b32 %r1, [%rd1];",
     "Modifier '.no_allocate' cannot be combined with modifier '.cg'"),
    ("ld.global.cs.L1::evict_last.b32 %r1, [%rd1];",
     "Modifier '.evict_last' cannot be combined with modifier '.cs'"),
    ("st.global.wb.L1::evict_first.b32 [%rd1], %r1;",
     "Modifier '.evict_first' cannot be combined with modifier '.wb'"),
    ("ld.global.L1::no_allocate.L1::evict_last.b32 %r1, [%rd1];",
     "Duplicate '.L1::eviction_priority' modifier specified for instruction 'ld'"),
    ("ld.volatile.global.L2::cache_hint.b32 %r1, [%rd1], %rd3;",
     "Modifier '.L2::cache_hint' cannot be combined with modifier '.volatile'"),
    ("ld.global.L2::64B.L2::128B.b32 %r1, [%rd1];",
     "Multiple cache prefetching modifiers specified"),
    ("st.global.L2::256B.b32 [%rd1], %r1;", "Illegal modifier '.L2::256B' for instruction 'st'"),
    ("atom.global.add.L1::no_allocate.u32 %r2, [%rd1], %r1;",
     "Illegal modifier '.no_allocate' for instruction 'atom'"),
    ("atom.global.cas.L2::cache_hint.b32 %r2, [%rd1], %r1, %r3, %rd3;",
     "Illegal modifier '.L2::cache_hint' for instruction 'atom'"),
    ("createpolicy.fractional.L2::evict_first.b64 %rd4, 0.0;",
     "value '0.000000' out of range, expected to be in range (0.000000 .. 1.000000]"),
    ("createpolicy.fractional.L2::evict_first.b64 %rd4, 1.5;",
     "value '1.500000' out of range, expected to be in range (0.000000 .. 1.000000]"),
    ("createpolicy.fractional.L2::evict_first.L2::evict_last.b64 %rd4, 0.5;",
     "Unsupported modifier '.evict_last' as secondary_priority"),
    ("createpolicy.fractional.L2::evict_first.b32 %r4, 0.5;",
     "Unexpected instruction types specified for 'createpolicy.fractional'"),
    ("createpolicy.range.L2::evict_first.b64 %rd4, [%rd1], 8192, 4096;",
     "value '8192' must be less than or equal to the value '4096' of argument 4"),
    ("createpolicy.range.L2::evict_first.b64 %rd4, [%rd1], %rd5, %rd6;",
     "Arguments mismatch for instruction 'createpolicy.range'"),
    ("createpolicy.range.L2::evict_first.b64 %rd4, [src], 128, 256;",
     "State space mismatch between instruction and address"),
    ("discard.global.L2 [%rd1], 64;", "unexpected value '64', expected to be 128"),
    ("discard.global.L1 [%rd1], 128;", "Illegal modifier '.L1' for instruction 'discard'"),
    ("applypriority.global.L2::evict_first [%rd1], 128;",
     "Unsupported modifier '.evict_first' for instruction 'applypriority'"),
]


@pytest.mark.parametrize("line", ACCEPTED)
def test_forms_ptxas_accepts_decode_and_verify(line):
    """Every cache-policy form ptxas -arch=sm_90a assembles compiles here."""
    isa.compile_kernel(HEAD.replace("LINE", line), "k")


@pytest.mark.parametrize(("line", "ptxas_says"), REFUSED)
def test_forms_ptxas_refuses_are_refused_at_their_line(line, ptxas_says):
    """Every form ptxas refuses (its message beside it) is refused, at its line."""
    with pytest.raises(PtxError) as err:
        isa.compile_kernel(HEAD.replace("LINE", line), "k")
    assert err.value.line == HEAD.replace("LINE", line).splitlines().index("    " + line) + 1


COPY = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry copy(.param .u64 src, .param .u64 dst)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    POLICY
    LOAD {%r2, %r3, %r4, %r5}, [%rd4]HINT;
    STORE [%rd5], {%r2, %r3, %r4, %r5}HINT;
    ret;
}
"""


def _copy(policy: str, load: str, store: str, hint: str) -> np.ndarray:
    src = np.arange(1024, dtype=np.uint32)
    dst = np.zeros(1024, np.uint32)
    ptx = COPY.replace("POLICY", policy).replace("LOAD", load).replace("STORE", store)
    isa.run_kernel(ptx.replace("HINT", hint), "copy", (1, 1, 1), (256, 1, 1), [src, dst])
    return dst


def test_policies_change_no_result():
    """A copy with DeepEP's qualifiers and an L2 policy writes what the plain copy writes."""
    plain = _copy("", "ld.global.v4.u32", "st.global.v4.u32", "")
    hinted = _copy("createpolicy.fractional.L2::evict_first.b64 %rd6, 0.5;",
                   "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32",
                   "st.global.L1::no_allocate.L2::cache_hint.v4.u32", ", %rd6")
    assert (plain == np.arange(1024)).all()
    assert (hinted == plain).all()


POLICY_VALUES = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry values(.param .u64 out)
{
    .reg .b64 %rd<12>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    createpolicy.fractional.L2::evict_first.b64 %rd2, 1.0;
    createpolicy.fractional.L2::evict_last.b64 %rd3;
    createpolicy.fractional.L2::evict_last.L2::evict_first.b64 %rd4, 0.25;
    createpolicy.range.L2::evict_last.b64 %rd5, [%rd1], 64, 128;
    st.global.u64 [%rd1], %rd2;
    st.global.u64 [%rd1+8], %rd3;
    st.global.u64 [%rd1+16], %rd4;
    st.global.u64 [%rd1+24], %rd5;
    ret;
}
"""


def test_createpolicy_writes_cutlass_constants_for_a_whole_fraction():
    """createpolicy with fraction 1.0 writes CUTLASS's CacheHintSm90 EVICT_FIRST/EVICT_LAST;
    a quarter is 4/16 in bits 55..52; the range form indexes the launch's range table."""
    out = np.zeros(4, np.uint64)
    isa.run_kernel(POLICY_VALUES, "values", (1, 1, 1), (1, 1, 1), [out])
    assert out[0] == 0x12F0000000000000
    assert out[1] == 0x14F0000000000000
    assert out[2] == 0x1432000000000000      # evict_last, 4/16 - 1 = 3, secondary first
    assert out[3] == 0x24F0000000000000      # range form, first entry of the table


def test_createpolicy_refuses_a_fraction_register_out_of_range():
    """A fraction read from a register outside (0, 1] faults at run time, at its line."""
    ptx = HEAD.replace("LINE", "mov.f32 %f1, 0f00000000;\n"
                       "    createpolicy.fractional.L2::evict_first.b64 %rd4, %f1;")
    with pytest.raises(PtxError, match="fraction"):
        isa.run_kernel(ptx, "k", (1, 1, 1), (1, 1, 1), [np.zeros(4, np.uint32),
                                                         np.zeros(4, np.uint32)])


# -- the trace: one policy row per pc -----------------------------------------------------------
def _trace(ptx: str, entry: str, threads: int, args):
    recorder = TraceRecorder((1, 1, 1), threads)
    isa.run_kernel(ptx, entry, (1, 1, 1), (threads, 1, 1), args, observer=recorder)
    program = isa.compile_kernel(ptx, entry)
    return recorder.finish(), program


def _pc_of(program, opname: str) -> int:
    return next(ins.pc for ins in program.instrs if ins.text.startswith(opname))


def test_trace_keeps_the_policy_row_of_each_hinted_instruction():
    """The load's row holds the policy register's fraction (8/16 evict_first), no_allocate and
    the 256-byte fetch; the store's the same L2 class; other pcs have code 0."""
    ptx = COPY.replace("POLICY", "createpolicy.fractional.L2::evict_first.b64 %rd6, 0.5;")
    ptx = ptx.replace("LOAD", "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32")
    ptx = ptx.replace("STORE", "st.global.L2::cache_hint.v4.u32").replace("HINT", ", %rd6")
    trace, program = _trace(ptx, "copy", 64, [np.zeros(1024, np.uint32),
                                              np.zeros(1024, np.uint32)])
    load, store = _pc_of(program, "ld.global.nc"), _pc_of(program, "st.global")
    assert (trace.pc_policy[load] == policy_row(L2_FIRST, L2_UNCHANGED, 8, L1_NO_ALLOCATE, 0,
                                                256)).all()
    assert (trace.pc_policy[store] == policy_row(L2_FIRST, L2_UNCHANGED, 8, 0, 0, 0)).all()
    others = np.ones(len(program.instrs), bool)
    others[[load, store]] = False
    assert (trace.pc_policy[others, POLICY_CODE] == 0).all()


def test_trace_without_policies_has_no_policy_table():
    """A kernel with plain loads and stores records no policy rows (the default caches)."""
    ptx = COPY.replace("POLICY", "").replace("LOAD", "ld.global.v4.u32")
    ptx = ptx.replace("STORE", "st.global.v4.u32").replace("HINT", "")
    trace, _ = _trace(ptx, "copy", 32, [np.zeros(512, np.uint32), np.zeros(512, np.uint32)])
    assert trace.pc_policy is None


def test_trace_reads_cutlass_constants_and_range_bounds_in_sectors():
    """An immediate EVICT_LAST constant is evict_last on every line; a range policy's rows
    hold its bounds in 32-byte sectors (a, a + primary, a + total)."""
    src = np.zeros(1024, np.uint32)
    ptx = COPY.replace("POLICY", "").replace("LOAD", "ld.global.L2::cache_hint.v4.u32")
    ptx = ptx.replace("STORE", "st.global.v4.u32")
    trace, program = _trace(ptx.replace("[%rd4]HINT", "[%rd4], 0x14F0000000000000")
                            .replace("HINT", ""), "copy", 32, [src, np.zeros(1024, np.uint32)])
    row = trace.pc_policy[_pc_of(program, "ld.global")]
    assert (row == policy_row(L2_LAST, L2_UNCHANGED, 16, 0, 0, 0)).all()
    ranged = ptx.replace("POLICY", "").replace(
        "mov.u32 %r1, %tid.x;", "createpolicy.range.L2::evict_last.L2::evict_first.b64 %rd6, "
        "[%rd1], 1024, 4096;\n    mov.u32 %r1, %tid.x;").replace("HINT", ", %rd6", 1)
    trace, program = _trace(ranged.replace("HINT", ""), "copy", 32,
                            [src, np.zeros(1024, np.uint32)])
    load = _pc_of(program, "ld.global")
    row = trace.pc_policy[load]
    base = trace.sectors[trace.sector_start[int(np.flatnonzero(trace.pc == load)[0])]]
    assert (row[POLICY_LO], row[POLICY_MID], row[POLICY_HI]) == (base, base + 32, base + 128)
    assert row[POLICY_CODE] & 3 == L2_LAST


LINE_OPS_PTX = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry lines(.param .u64 src)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [src];
    add.s64 %rd2, %rd1, 200;
    prefetch.global.L2::evict_last [%rd2];
    prefetch.global.L1 [%rd2];
    discard.global.L2 [%rd1], 128;
    applypriority.global.L2::evict_normal [%rd1], 128;
    ld.global.L1::evict_first.u64 %rd3, [%rd1];
    ret;
}
"""


def test_line_ops_are_events_of_their_128_byte_line():
    """prefetch to L2, discard and applypriority are L2-only loads of the 4 sectors of their
    line (a prefetch to L1 a load); their rows say evict_last, discard, normal."""
    trace, program = _trace(LINE_OPS_PTX, "lines", 1, [np.zeros(64, np.uint64)])
    events = {int(pc): e for e, pc in enumerate(trace.pc)}
    pcs = [_pc_of(program, name) for name in ("prefetch.global.L2", "prefetch.global.L1",
                                                "discard", "applypriority", "ld.global")]
    kinds = [int(trace.kind[events[pc]]) for pc in pcs]
    assert kinds == [KIND_LOAD_CG, KIND_LOAD, KIND_LOAD_CG, KIND_LOAD_CG, KIND_LOAD]
    for pc in pcs[:4]:
        e = events[pc]
        first = trace.sectors[trace.sector_start[e]]
        assert trace.detail[e] == 4 and first % 4 == 0
    rows = trace.pc_policy
    assert rows[pcs[0], POLICY_CODE] & 3 == L2_LAST
    assert rows[pcs[1], POLICY_CODE] == 0
    assert (rows[pcs[2]] == policy_row(L2_UNCHANGED, L2_UNCHANGED, 16, 0, OP_DISCARD, 0)).all()
    assert (rows[pcs[3]] == policy_row(L2_NORMAL, L2_UNCHANGED, 16, 0, OP_APPLY_PRIORITY,
                                       0)).all()
    assert (rows[pcs[4]] == policy_row(L2_UNCHANGED, L2_UNCHANGED, 16, L1_EVICT_FIRST, 0,
                                       0)).all()


# -- the cached memory: eviction classes, set-aside, L1 modes (closed forms) ---------------------
SETS, WAYS = 16, 4
"""A one-slice, one-partition L2 of 16 sets x 4 ways: line L (< 256) sits in set L % 16, and
each aligned run of 16 lines from 256 on covers every set once (`l2_set_of_line`)."""
EVICT_FIRST = policy_row(L2_FIRST, L2_UNCHANGED, 16, 0, 0, 0)
EVICT_LAST = policy_row(L2_LAST, L2_UNCHANGED, 16, 0, 0, 0)
NO_ALLOCATE = policy_row(L2_UNCHANGED, L2_UNCHANGED, 16, L1_NO_ALLOCATE, 0, 0)


def _config(fraction: float = 0.75):
    return models.load_preset("h100_sxm", overrides={
        "l2.partitions": 1, "l2.slices": 1, "l2.associativity": WAYS,
        "l2.size_bytes": SETS * WAYS * 128, "l2.persisting_max_fraction": fraction})


def _memory(fraction: float = 0.75):
    return CachedMemory(_config(fraction), 1)


_ISSUE_PS = itertools.count(1000, 1000)
"""Issue times of `_read`'s requests: one ns apart, never decreasing."""


def _read(mem, lines, kind="load_cg", policy=None, sm=0) -> dict:
    """Read whole lines one request each; the summed counts (`COUNT_NAMES`)."""
    total = np.zeros(layout.N_COUNTS, np.int64)
    for line in lines:
        mem.access(sm, kind, np.arange(4 * line, 4 * line + 4, dtype=np.int64),
                   next(_ISSUE_PS), 1, policy)
        total += mem.counts
    return dict(zip(COUNT_NAMES, total.tolist(), strict=True))


RESIDENT = range(SETS * (WAYS - 1))          # 3 lines in every set
STREAM = range(256, 256 + 64 * SETS)          # 64 lines in every set: 16 x the L2


@pytest.mark.parametrize("policy", [
    EVICT_FIRST,
    policy_row(L2_FIRST, L2_UNCHANGED, 16, 0, 0, 0, 4 * 256, 4 * (256 + 64 * SETS),
               4 * (256 + 64 * SETS)),
], ids=["fractional", "range"])
def test_evict_first_stream_leaves_the_resident_set_untouched(policy):
    """A stream of 16 L2 capacities under evict_first takes one way per set: the resident
    set (ways - 1 per set) hits every sector afterwards; without the policy none."""
    for stream_policy, resident_hits in ((policy, 4 * len(RESIDENT)), (None, 0)):
        mem = _memory()
        _read(mem, RESIDENT)
        _read(mem, STREAM, policy=stream_policy)
        again = _read(mem, RESIDENT)
        assert again["l2_hit_sectors"] == resident_hits
    mem = _memory()
    _read(mem, RESIDENT)
    _read(mem, STREAM, policy=policy)
    assert _read(mem, STREAM[-SETS:])["l2_hit_sectors"] == 4 * SETS   # its last line per set


@pytest.mark.parametrize(("fraction", "per_set"), [(0.75, 2), (0.75, 4), (0.5, 4), (0.0, 2)])
def test_evict_last_lines_survive_a_flood_up_to_the_set_aside(fraction, per_set):
    """`per_set` evict_last lines in every set, then a flood of 16 capacities of plain
    loads: min(per_set, floor(ways x fraction)) lines per set still hit."""
    mem = _memory(fraction)
    persisting = range(SETS * per_set)
    _read(mem, persisting, policy=EVICT_LAST)
    _read(mem, STREAM)
    survivors = min(per_set, int(WAYS * fraction)) * SETS
    assert _read(mem, persisting)["l2_hit_sectors"] == 4 * survivors


def test_applypriority_makes_persisting_lines_normal_again():
    """applypriority.global.L2::evict_normal on evict_last lines: a flood evicts them."""
    mem = _memory()
    persisting = range(2 * SETS)
    _read(mem, persisting, policy=EVICT_LAST)
    _read(mem, persisting, policy=policy_row(L2_NORMAL, L2_UNCHANGED, 16, 0,
                                             OP_APPLY_PRIORITY, 0))
    _read(mem, STREAM)
    assert _read(mem, persisting)["l2_hit_sectors"] == 0


def test_discarded_dirty_lines_are_never_written_back():
    """Stored lines written back when a flood evicts them: 4 sectors each; discarded first:
    none, and a later read misses them."""
    discard = policy_row(L2_UNCHANGED, L2_UNCHANGED, 16, 0, OP_DISCARD, 0)
    for policy, written in ((None, 4 * SETS), (discard, 0)):
        mem = _memory()
        stored = _read(mem, range(SETS), kind="store")
        assert stored["l2_writeback_sectors"] == 0
        if policy is not None:
            _read(mem, range(SETS), policy=policy)
            assert _read(mem, range(SETS))["l2_hit_sectors"] == 0
        assert _read(mem, STREAM)["l2_writeback_sectors"] == written


def test_fetch_sizes_widen_a_miss():
    """A one-sector miss reads 1 sector from HBM; with .L2::64B 2, .L2::128B 4, .L2::256B
    4 and the pair line's 4 (which then hits)."""
    for fetch, read in ((0, 1), (64, 2), (128, 4), (256, 8)):
        mem = _memory()
        row = policy_row(L2_UNCHANGED, L2_UNCHANGED, 16, 0, 0, fetch)
        mem.access(0, "load_cg", np.array([4 * 40], np.int64), 1000, 1, row)
        assert mem.counts[layout.C_HBM_READ] == read
        if fetch == 256:
            assert _read(mem, [41])["l2_hit_sectors"] == 4


def test_no_allocate_loads_leave_the_l1_unchanged():
    """Loads with .L1::no_allocate, hits and misses, leave every L1 tag, stamp and sector
    mask as they were; the same loads without it fill the L1."""
    mem = _memory()
    held = range(0, 64)
    _read(mem, held, kind="load")
    meta, flags = mem.meta[layout.LEVEL_L1].copy(), mem.flags[layout.LEVEL_L1].copy()
    hits = _read(mem, held, kind="load", policy=NO_ALLOCATE)
    _read(mem, range(1000, 1064), kind="load", policy=NO_ALLOCATE)
    assert hits["l1_hit_sectors"] == 4 * len(held)
    assert (mem.meta[layout.LEVEL_L1] == meta).all()
    assert (mem.flags[layout.LEVEL_L1] == flags).all()
    assert _read(mem, range(1000, 1064), kind="load")["l1_hit_sectors"] == 0
    assert _read(mem, range(1000, 1064), kind="load")["l1_hit_sectors"] == 4 * 64


def test_l1_evict_first_lines_are_the_l1s_first_victims():
    """An L1 set of W ways holding W - 1 lines and one .L1::evict_first line: the next line
    evicts the evict_first one and every other line still hits."""
    mem = _memory()
    l1_sets, l1_ways = mem.meta[layout.LEVEL_L1].shape[1], mem.meta[layout.LEVEL_L1].shape[3]
    older = [k * l1_sets for k in range(l1_ways - 1)]
    first, newer = l1_ways * l1_sets, (l1_ways + 1) * l1_sets
    _read(mem, older, kind="load")
    _read(mem, [first], kind="load",
          policy=policy_row(L2_UNCHANGED, L2_UNCHANGED, 16, L1_EVICT_FIRST, 0, 0))
    _read(mem, [newer], kind="load")
    assert _read(mem, older, kind="load")["l1_hit_sectors"] == 4 * len(older)
    assert _read(mem, [first], kind="load")["l1_hit_sectors"] == 0


# -- the issue's check: a 12 MiB hot buffer beside a 64 MiB stream on h100_sxm -------------------
MIB = 1 << 20
LAPS = 3


def _hot_stream(entry: str):
    """Run `workloads/kernels/microbench/l2_policy.cu`'s `entry`: LAPS laps, each reading the
    12 MiB hot buffer (ld.global.cg, "load_cg") and the 64 MiB stream ("load")."""
    hot, stream = np.zeros(12 * MIB // 4, np.uint32), np.zeros(64 * MIB // 4, np.uint32)
    out = np.zeros(132 * 1024, np.uint32)
    res = simulate_kernel(load_microbench_ptx(entry), entry, (132, 1, 1), (1024, 1, 1),
                          [hot, hot.size // 4, stream, stream.size // 4, LAPS, out],
                          config=models.load_preset("h100_sxm"))
    return res, res.stats.set_index(["component", "stat"]).value


@pytest.mark.parametrize(("entry", "later_lap_hit_rate", "hot_hbm_laps"),
                         [("hot_stream_evict_first", 1.0, 1), ("hot_stream_plain", 0.0, LAPS)])
def test_evict_first_stream_keeps_a_12_mib_hot_buffer_resident_on_h100(
        entry, later_lap_hit_rate, hot_hbm_laps):
    """Streaming 64 MiB per lap under evict_first, the 12 MiB hot buffer (24 MiB with its
    near copies, of the 50 MiB L2) hits on every lap after the first and is read from HBM
    once; without the policy LRU evicts it each lap: no hits, read LAPS times. The stream
    itself misses every lap either way (64 MiB > L2)."""
    res, stats = _hot_stream(entry)
    hot_sectors = stats[("memory.l2.load_cg", "sectors")]
    assert hot_sectors == LAPS * 12 * MIB // 32
    later = stats[("memory.l2.load_cg", "hit_sectors")] / (hot_sectors * (LAPS - 1) / LAPS)
    assert later == pytest.approx(later_lap_hit_rate, abs=0.01)
    assert stats[("memory.hbm.load_cg", "bytes")] == pytest.approx(hot_hbm_laps * 12 * MIB,
                                                                   rel=0.01)
    assert stats[("memory.hbm.load", "bytes")] == LAPS * 64 * MIB
    assert stats[("memory.l1.load", "hit_sectors")] == 0          # .L1::no_allocate stream


# -- policies through a memory wrapping the cached one (link windows) ---------------------------
def _linked(fraction: float = 0.75):
    """`_memory()` inside a `LinkMemory` whose one data window (far above the lines used
    here) mirrors into lines 256 on, as a peer's chunks land in rank 0's receive buffer."""
    config = _config(fraction)
    window = LinkWindow(1 << 40, (1 << 40) + 64 * SETS * 128, "nvlink", mirror_start=256 * 128)
    return LinkMemory(config, CachedMemory(config, 1), (window,))


@pytest.mark.parametrize("through", ["local", "mirrored"])
def test_a_link_memory_applies_the_policy_of_local_and_mirrored_accesses(through):
    """Around the cached memory, an evict_first stream keeps the resident set as the bare
    cached memory does: read locally (lines 256 on), or stored into the peer window, whose
    symmetric peer's writes land on those lines with the same instruction's policy."""
    for policy, resident_hits in ((EVICT_FIRST, 4 * len(RESIDENT)), (None, 0)):
        mem = _linked()
        _read(mem.inner, RESIDENT)
        for k, line in enumerate(STREAM):
            first = 4 * line if through == "local" else ((1 << 40) >> 5) + 4 * k
            mem.access(0, "load_cg" if through == "local" else "store",
                       np.arange(first, first + 4, dtype=np.int64), next(_ISSUE_PS), 1, policy)
        assert _read(mem.inner, RESIDENT)["l2_hit_sectors"] == resident_hits


@pytest.mark.parametrize("entry", ["hot_stream_evict_first", "hot_stream_plain"])
def test_sms_in_front_of_a_wrapping_memory_send_the_same_policies(entry):
    """An SM in front of a `LinkMemory` asks Python for each request (no compiled service);
    the request carries its instruction's policy row, so the kernel's figures equal those of
    the SMs that serve the cached memory inside their loop."""
    mib = MIB // 8
    config = models.load_preset("h100_sxm", {"l2.size_bytes": 4096000})
    far = (LinkWindow(1 << 44, (1 << 44) + 4096, "nvlink"),)
    results = []
    for memory in ("cached", LinkMemory.factory(far)):
        hot, stream = np.zeros(mib // 4, np.uint32), np.zeros(16 * mib // 4, np.uint32)
        out = np.zeros(16 * 256, np.uint32)
        results.append(simulate_kernel(
            load_microbench_ptx(entry), entry, (16, 1, 1), (256, 1, 1),
            [hot, hot.size // 4, stream, stream.size // 4, 2, out], config=config,
            memory=memory))
    inline, python = results
    assert python.cycles == inline.cycles
    link_rows = python.stats.component.str.startswith("link.")
    pd.testing.assert_frame_equal(python.stats[~link_rows].reset_index(drop=True),
                                  inline.stats.reset_index(drop=True))
