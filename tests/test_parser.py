"""Every construct nvcc emits for sm_90 parses and runs with the meaning PTX gives it.

Small hand-written kernels cover one construct each and check the result of running
them; `fixtures/constructs.ptx` is real `nvcc -lineinfo` output (command in
`fixtures/constructs.cu`) with `.loc`, `.file`, `.section .debug_str`, a by-value struct
parameter, `.const`/`.global` initializers, dynamic shared memory, inline asm in a
nested scope, `.pragma "nounroll"`, `.maxntid` and a `call.uni` with a return value.
"""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import isa
from isa.ast import Label

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
AFFINE = "_Z6affine6AffinePKfPfi"


def entry(body: str, params: str = ".param .u64 out", decls: str = "", name: str = "k",
          attrs: str = "") -> str:
    """PTX text of one kernel `name(params)` with module declarations `decls`."""
    return f"{HEADER}{decls}\n.visible .entry {name}({params}){attrs}\n{{\n{body}\n}}\n"


def store_prologue(regs: str = "") -> str:
    """Registers %r0 = global thread index and %rd0 = &out[%r0] (u32 elements)."""
    return f"""
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<8>;
    .reg .pred %p<4>;
    {regs}
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r0, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd0, %rd1, %rd2;
    """


def run(ptx: str, n: int, args=(), dtype=np.uint32, block=None, **kw) -> np.ndarray:
    out = np.zeros(n, dtype=dtype)
    isa.run_kernel(ptx, kw.pop("entry", "k"), 1, block or n, [out, *args], **kw)
    return out


# -- module directives and declarations ---------------------------------------------------
def test_module_directives_are_recorded():
    """`.version`, `.target` and `.address_size` land in the Module record."""
    mod = isa.parse(entry("ret;", params=""))
    assert (mod.version, mod.target, mod.address_size) == ("9.0", ("sm_90",), 64)


def test_visible_entry_with_scalar_params_reads_each_param():
    """`.param .u32/.f32/.u64` scalars of a `.visible .entry` are read by `ld.param`."""
    body = store_prologue() + """
    ld.param.u32 %r4, [n];
    ld.param.f32 %f1, [scale];
    cvt.rn.f32.u32 %f2, %r4;
    mul.f32 %f3, %f1, %f2;
    cvt.rzi.u32.f32 %r5, %f3;
    add.s32 %r5, %r5, %r0;
    st.global.u32 [%rd0], %r5;
    ret;"""
    ptx = entry(body, params=".param .u64 out, .param .u32 n, .param .f32 scale")
    assert run(ptx, 8, [7, 2.5]).tolist() == [17 + i for i in range(8)]


def test_ptr_global_align_attributes_on_pointer_params_parse():
    """`.param .u64 .ptr .global .align 16 p` is a plain pointer parameter; the `.align`
    belongs to the pointee, so the parameter keeps its natural 8-byte alignment."""
    body = store_prologue() + "st.global.u32 [%rd0], %r0;\nret;"
    ptx = entry(body, params=".param .u32 n, .param .u64 .ptr .global .align 16 out")
    n, param = isa.parse(ptx).functions["k"].params
    assert (param.type, param.align) == ("u64", 8)
    assert isa.compile_kernel(ptx, "k").kparams[1][1] == 8
    out = np.zeros(5, dtype=np.uint32)
    isa.run_kernel(ptx, "k", 1, 5, [5, out])
    assert out.tolist() == [0, 1, 2, 3, 4]


def test_reg_ranges_and_comma_lists_declare_each_name():
    """`.reg .b32 %r<3>` declares %r0..%r2; `.reg .f32 a, b;` declares both names."""
    ptx = entry(".reg .b32 %r<3>;\n.reg .f32 a, b;\n.reg .b64 %SP, %SPL;\nret;", params="")
    names = [r.name for r in isa.parse(ptx).functions["k"].regs]
    assert names == ["%r0", "%r1", "%r2", "a", "b", "%SP", "%SPL"]


def test_global_array_initializer_is_visible_to_the_kernel():
    """A module `.global .u32 tab[4] = {1,2,3}` holds 1,2,3 then zero fill."""
    body = store_prologue() + """
    mov.u64 %rd3, tab;
    mul.wide.u32 %rd4, %r0, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.u32 %r4, [%rd5];
    st.global.u32 [%rd0], %r4;
    ret;"""
    ptx = entry(body, decls=".global .align 4 .u32 tab[4] = {1, 2, 3};")
    assert run(ptx, 4).tolist() == [1, 2, 3, 0]


def test_const_float_table_is_read_with_ld_const():
    """A `.const .f32` table with an initializer is read by `ld.const.f32` [symbol+offset]."""
    body = store_prologue() + """
    ld.const.f32 %f1, [ctab+4];
    ld.const.f32 %f2, [ctab+8];
    add.f32 %f3, %f1, %f2;
    cvt.rzi.u32.f32 %r4, %f3;
    st.global.u32 [%rd0], %r4;
    ret;"""
    ptx = entry(body, decls=".const .align 4 .f32 ctab[3] = {0.5, 1.25, 0f40100000};")
    assert run(ptx, 2).tolist() == [3, 3]


def test_shared_local_declarations_with_alignment_and_arrays_run():
    """`.shared .align 16 .b8 s[64]` and `.local .align 8 .b8 d[16]` hold per-CTA/thread data."""
    body = store_prologue() + """
    .shared .align 16 .b8 sbuf[64];
    .local .align 8 .b8 depot[16];
    shl.b32 %r4, %r1, 2;
    mov.u32 %r5, sbuf;
    add.s32 %r6, %r5, %r4;
    st.shared.u32 [%r6], %r1;
    bar.sync 0;
    xor.b32 %r4, %r4, 4;
    add.s32 %r6, %r5, %r4;
    ld.shared.u32 %r7, [%r6];
    st.local.u32 [depot+8], %r7;
    ld.local.u32 %r7, [depot+8];
    st.global.u32 [%rd0], %r7;
    ret;"""
    assert run(entry(body), 16).tolist() == [i ^ 1 for i in range(16)]


def test_extern_dynamic_shared_array_uses_the_launch_shared_bytes():
    """`.extern .shared .align 16 .b8 sh[]` spans the launch's `shared_bytes`."""
    body = store_prologue() + """
    mov.u32 %r5, sh;
    shl.b32 %r4, %r1, 2;
    add.s32 %r6, %r5, %r4;
    st.shared.u32 [%r6], %r0;
    bar.sync 0;
    ld.shared.u32 %r7, [%r5+124];
    st.global.u32 [%rd0], %r7;
    ret;"""
    ptx = entry(body, decls=".extern .shared .align 16 .b8 sh[];")
    assert run(ptx, 32, shared_bytes=128).tolist() == [31] * 32
    with pytest.raises(isa.PtxError, match="out-of-bounds shared access"):
        run(ptx, 32, shared_bytes=64)


# -- bodies: scopes, labels, guards, operands ---------------------------------------------
def test_nested_scopes_redeclare_and_shadow_registers():
    """Sibling `{ }` scopes may each declare `t`; an inner `%r4` shadows the outer one."""
    body = store_prologue() + """
    mov.u32 %r4, 10;
    { .reg .b32 t; add.s32 t, %r4, 1; mov.u32 %r5, t; }
    { .reg .b32 t; add.s32 t, %r5, 100; mov.u32 %r5, t; }
    { .reg .b32 %r4; mov.u32 %r4, 1000; add.s32 %r5, %r5, %r4; }
    add.s32 %r5, %r5, %r4;
    st.global.u32 [%rd0], %r5;
    ret;"""
    assert run(entry(body), 2).tolist() == [1121, 1121]


def test_half_unpack_in_inline_asm_scope_reads_low_half_first():
    """`{.reg .f16 low,high; mov.b32 {low,high}, %r; ...}` as cuda_fp16.h emits it."""
    body = store_prologue(".reg .b16 %rs<2>;") + """
    mov.b32 %r4, 0x40003C00;
    {.reg .f16 low,high;
      mov.b32 {low,high},%r4;
      cvt.f32.f16 %f1, low;
      cvt.f32.f16 %f2, high;}
    mul.f32 %f3, %f2, 10.0;
    add.f32 %f3, %f3, %f1;
    cvt.rzi.u32.f32 %r5, %f3;
    st.global.u32 [%rd0], %r5;
    ret;"""
    assert run(entry(body), 1).tolist() == [21]


def test_labels_and_guards_branch_per_lane():
    """`@%p bra` and `@!%p bra` jump only in lanes whose guard holds."""
    body = store_prologue() + """
    setp.lt.u32 %p1, %r0, 3;
    mov.u32 %r4, 0;
    @%p1 bra $L__BB0_1;
    add.s32 %r4, %r4, 1;
$L__BB0_1:
    @!%p1 bra $L__BB0_2;
    add.s32 %r4, %r4, 10;
$L__BB0_2:
    st.global.u32 [%rd0], %r4;
    ret;"""
    assert run(entry(body), 6).tolist() == [10, 10, 10, 1, 1, 1]


def test_vector_operands_load_and_store_four_elements():
    """`ld.global.v4.f32 {a,b,c,d}` and `st.global.v4.f32` move 16 bytes per thread."""
    body = """
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    .reg .f32 %f<5>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];
    st.global.v4.f32 [%rd5], {%f4, %f3, %f2, %f1};
    ret;"""
    ptx = entry(body, params=".param .u64 src, .param .u64 dst")
    src = np.arange(16, dtype=np.float32)
    dst = np.zeros(16, dtype=np.float32)
    isa.run_kernel(ptx, "k", 1, 4, [src, dst])
    assert dst.reshape(4, 4).tolist() == src.reshape(4, 4)[:, ::-1].tolist()


def test_pipe_destination_writes_value_and_predicate():
    """`shfl.sync.up.b32 d|p, ...` writes the value and whether the source lane was valid."""
    body = store_prologue() + """
    shfl.sync.up.b32 %r4|%p1, %r0, 2, 0, -1;
    selp.u32 %r5, 1000, 0, %p1;
    add.s32 %r4, %r4, %r5;
    st.global.u32 [%rd0], %r4;
    ret;"""
    assert run(entry(body), 32).tolist()[:4] == [0, 1, 1000, 1001]


def test_register_plus_offset_addresses_including_negative_offsets():
    """`[%rd+8]` and nvcc's `[%rd+-256]` address relative to a register."""
    body = """
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [src];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [dst];
    cvta.to.global.u64 %rd2, %rd2;
    add.s64 %rd3, %rd1, 256;
    ld.global.u32 %r1, [%rd3+-256];
    ld.global.u32 %r2, [%rd1+8];
    ld.global.u32 %r3, [%rd3+-4];
    st.global.u32 [%rd2], %r1;
    st.global.u32 [%rd2+4], %r2;
    st.global.u32 [%rd2+8], %r3;
    ret;"""
    ptx = entry(body, params=".param .u64 src, .param .u64 dst")
    src = np.arange(64, dtype=np.uint32) * 3
    dst = np.zeros(3, dtype=np.uint32)
    isa.run_kernel(ptx, "k", 1, 1, [src, dst])
    assert dst.tolist() == [0, 6, 63 * 3]


def test_hex_and_float_bit_pattern_immediates():
    """`0x` integers, `0f` f32 and `0d` f64 bit patterns and negative integers parse exactly."""
    body = store_prologue(".reg .f64 %fd<3>;") + """
    mov.u32 %r4, 0xFF;
    add.s32 %r4, %r4, -5;
    mov.f32 %f1, 0f3FC00000;
    mov.f64 %fd1, 0d4004000000000000;
    cvt.rn.f32.f64 %f2, %fd1;
    add.f32 %f3, %f1, %f2;
    mul.f32 %f3, %f3, 0f41200000;
    cvt.rzi.u32.f32 %r5, %f3;
    add.s32 %r4, %r4, %r5;
    st.global.u32 [%rd0], %r4;
    ret;"""
    assert run(entry(body), 1).tolist() == [250 + 40]


def test_pragma_nounroll_inside_a_loop_is_ignored():
    """`.pragma "nounroll";` in a loop header changes nothing."""
    body = store_prologue() + """
    mov.u32 %r4, 0;
    mov.u32 %r5, 0;
$L__BB0_1:
    .pragma "nounroll";
    add.s32 %r5, %r5, %r4;
    add.s32 %r4, %r4, 1;
    setp.lt.u32 %p1, %r4, 5;
    @%p1 bra $L__BB0_1;
    st.global.u32 [%rd0], %r5;
    ret;"""
    assert run(entry(body, decls='.pragma "nounroll";'), 1).tolist() == [10]


def test_call_uni_sequence_passes_params_and_returns_a_value():
    """A `{ // callseq }` block with `.param` args, `call.uni (retval0), f, (...)` and the
    `ld.param [retval0+0]` of the result, as nvcc emits for a `__noinline__` function."""
    func = """
.func  (.param .b32 func_retval0) madd(
    .param .b32 madd_param_0,
    .param .b32 madd_param_1
)
{
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [madd_param_0];
    ld.param.u32 %r2, [madd_param_1];
    mad.lo.s32 %r3, %r1, 10, %r2;
    st.param.b32 [func_retval0+0], %r3;
    ret;
}
"""
    body = store_prologue() + """
    { // callseq 0, 0
    .reg .b32 temp_param_reg;
    .param .b32 param0;
    st.param.b32 [param0+0], %r0;
    .param .b32 param1;
    st.param.b32 [param1+0], 7;
    .param .b32 retval0;
    call.uni (retval0),
    madd,
    (
    param0,
    param1
    );
    ld.param.b32 %r4, [retval0+0];
    } // callseq 0
    st.global.u32 [%rd0], %r4;
    ret;"""
    assert run(entry(body, decls=func), 4).tolist() == [7, 17, 27, 37]


# -- launch directives ---------------------------------------------------------------------
def test_maxntid_bounds_the_block_size():
    """`.maxntid 64, 1, 1` accepts 64 threads per block and rejects 65."""
    body = store_prologue() + "st.global.u32 [%rd0], %r0;\nret;"
    ptx = entry(body, attrs="\n.maxntid 64, 1, 1")
    assert run(ptx, 64)[63] == 63
    with pytest.raises(isa.LaunchError, match=r"at most 64 threads per block \(.maxntid 64, "
                                              r"1, 1\), got block \(65, 1, 1\)"):
        run(ptx, 65)


def test_reqntid_requires_the_exact_block_shape():
    """`.reqntid 32, 2` runs only with block (32, 2, 1)."""
    body = store_prologue() + "st.global.u32 [%rd0], %r0;\nret;"
    ptx = entry(body, attrs="\n.reqntid 32, 2")
    out = np.zeros(64, dtype=np.uint32)
    isa.run_kernel(ptx, "k", 1, (32, 2), [out])
    with pytest.raises(isa.LaunchError, match=r"requires block \(32, 2, 1\) \(.reqntid\), got "
                                              r"block \(64, 1, 1\)"):
        isa.run_kernel(ptx, "k", 1, 64, [out])


# -- real nvcc -lineinfo output --------------------------------------------------------
def affine_args(n: int, scale=2.0, shift=1.0, stride=5):
    """The by-value `Affine {float scale, shift; int n, stride;}` as a 16-byte record."""
    rec = np.zeros(1, dtype=[("scale", "<f4"), ("shift", "<f4"), ("n", "<i4"),
                             ("stride", "<i4")])
    rec[0] = (scale, shift, n, stride)
    return rec


def affine_expected(x, reps, scale=2.0, shift=1.0, stride=5):
    i = np.arange(x.size)
    v = x * scale + shift + np.array([0.5, 1.5, 2.5, 3.5])[i & 3] + np.array([1, 2, 3])[i % 3]
    return (2.0 * (reps * v) + stride).astype(np.float32)


def test_nvcc_lineinfo_fixture_parses_with_debug_directives_skipped():
    """`.loc` (with `inlined_at`), `.file` and `.section .debug_str { }` leave no trace."""
    text = (FIXTURES / "constructs.ptx").read_text()
    assert ".section\t.debug_str" in text and "inlined_at" in text
    mod = isa.parse(text, "constructs.ptx")
    assert set(mod.functions) == {"_Z10twice_plusfi", AFFINE}
    fn = mod.functions[AFFINE]
    assert fn.directives[".maxntid"] == (128, 1, 1)
    assert [g.name for g in mod.globals] == ["ctable", "gcounts", "sbuf"]
    labels = [x.name for x in fn.body if isinstance(x, Label)]
    assert labels == ["$L__BB1_2", "$L__BB1_5", "$L__BB1_6", "$L__BB1_7"]


def test_nvcc_fixture_struct_param_const_table_and_call_compute_the_formula():
    """The fixture kernel gives y = 2*(reps*v) + stride, v = x*scale + shift + ctable + gcounts."""
    ptx = (FIXTURES / "constructs.ptx").read_text()
    n, reps = 200, 3
    x = np.linspace(-4, 4, n).astype(np.float32)
    y = np.zeros(n, dtype=np.float32)
    isa.run_kernel(ptx, AFFINE, 2, 128, [affine_args(n), x, y, reps], shared_bytes=512,
                   file="constructs.ptx")
    np.testing.assert_allclose(y, affine_expected(x, reps), rtol=1e-6, atol=1e-5)


def test_struct_param_accepts_bytes_of_its_size_only():
    """A `.b8 p[16]` by-value parameter takes 16 bytes (bytes or any numpy array)."""
    ptx = (FIXTURES / "constructs.ptx").read_text()
    x = np.ones(8, dtype=np.float32)
    y = np.zeros(8, dtype=np.float32)
    raw = affine_args(8, stride=0).tobytes()
    isa.run_kernel(ptx, AFFINE, 1, 8, [raw, x, y, 1], shared_bytes=64)
    np.testing.assert_allclose(y, affine_expected(x, 1, stride=0), rtol=1e-6)
    with pytest.raises(isa.LaunchError, match=r"argument 0 \('_Z6affine6AffinePKfPfi_param_0'"
                                              r", .b8\[16\]\) needs exactly 16 bytes, got 12"):
        isa.run_kernel(ptx, AFFINE, 1, 8, [raw[:12], x, y, 1], shared_bytes=64)
    with pytest.raises(isa.LaunchError, match="passed by value; give bytes or a numpy array"):
        isa.run_kernel(ptx, AFFINE, 1, 8, [3, x, y, 1], shared_bytes=64)


def test_nvcc_fixture_launch_respects_maxntid():
    """The fixture's `__launch_bounds__(128)` (`.maxntid 128, 1, 1`) rejects 256 threads."""
    ptx = (FIXTURES / "constructs.ptx").read_text()
    x = np.ones(256, dtype=np.float32)
    with pytest.raises(isa.LaunchError, match="at most 128 threads"):
        isa.run_kernel(ptx, AFFINE, 1, 256, [affine_args(256), x, x.copy(), 1])


def _without_file_lines(text: str) -> str:
    """Drop what depends on the checkout path: `.file` lines and the debug string table
    (its anonymous-namespace names carry a hash of the source path)."""
    text = re.sub(r"^\s*\.file\s.*$", "", text, flags=re.M)
    return re.sub(r"\.section\s+\.debug_str\s*\{.*?\n\s*\}", "", text, flags=re.S)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_fixture_ptx_is_what_nvcc_makes_from_its_source(tmp_path):
    """Recompiling fixtures/constructs.cu with its header command reproduces the fixture
    (up to the `.file` lines and debug strings, which depend on the source path)."""
    source = FIXTURES / "constructs.cu"
    command = re.search(r"^// ptx: (nvcc .*)$", source.read_text(), re.M).group(1).split()
    command[-1] = str(tmp_path / "constructs.ptx")
    subprocess.run(command, cwd=FIXTURES, check=True, capture_output=True, timeout=300)
    fresh = (tmp_path / "constructs.ptx").read_text()
    assert _without_file_lines(fresh) == _without_file_lines(
        (FIXTURES / "constructs.ptx").read_text())
