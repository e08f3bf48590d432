"""Cache policies: `createpolicy`, `.L2::cache_hint`, `.L1::no_allocate` / `.L1::evict_*`,
L2 fetch sizes, `discard` / `applypriority` (isa.semantics.cache_policy), the policy rows
the trace keeps per pc, and what the cached memory does with them.

Every form below was given to `ptxas -arch=sm_90a` (CUDA 13.0) in a one-instruction kernel;
the accepted ones assemble, the refused ones fail with the message quoted beside them.
"""

import numpy as np
import pytest

import isa
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
from simulator.trace import TraceRecorder

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
