"""ISA targets: each preset names the PTX target its chip runs, the verifier refuses what that
target lacks, and ops pick (or refuse) their templates by it.

The rules were checked against ptxas of CUDA 13.0; every case with ptxas's message is listed
in `tests/fixtures/ptxas_targets.md` (commands: `ptxas -arch=sm_80 case.ptx -o /dev/null`,
and `-arch=sm_90` / `-arch=sm_90a`). A few of them, as ptxas words them:

    wgmma.fence.sync.aligned;          Instruction 'wgmma.fence' not supported on .target 'sm_80'
    setmaxnreg.inc.sync.aligned.u32 232;   (sm_90 too) Instruction 'setmaxnreg.inc' not
                                       supported on .target 'sm_90'
    cp.async.bulk.tensor.2d...         Feature 'cp.async.bulk.tensor' requires .target sm_90
                                       or higher
    mov.u32 %r2, %clusterid.x;         Feature '%clusterid' requires .target sm_90 or higher
    cvt.rn.satfinite.e4m3x2.f32 ...    Feature 'cvt with .e4m3x2/.e5m2x2' requires .target
                                       sm_89 or higher
    .target sm_90a (at -arch=sm_80)    ptxas fatal : SM version specified by .target is
                                       higher than default SM version assumed

These tests need no ptxas.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import isa
import models
import simulator
import workloads.ops as ops_pkg
from isa.targets import TARGETS, verify_target
from simulator.app.cli import main
from workloads.graph import KernelGraph
from workloads.kernels.case import load_ptx
from workloads.kernels.templates.targets import pick_template
from workloads.layers import ops as L
from workloads.ops.registry import build_op, simulate_op

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "workloads" / "kernels"
LINE = 15                     # the line of the case's instruction (as in the fixture note)

BODY = """.version 8.7
.target {target}
.address_size 64

.visible .entry k(.param .u64 p)
{{
  .reg .pred %p<4>;
  .reg .b16 %h<8>;
  .reg .b32 %r<40>;
  .reg .f32 %f<40>;
  .reg .b64 %rd<8>;
  .shared .align 128 .b8 sm[4096];
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, sm;
  {instruction}
  ret;
}}
"""


def case(instruction: str, target: str = "sm_80") -> str:
    """A one-instruction kernel (the instruction on line 15), as the ptxas cases were."""
    return BODY.format(target=target, instruction=instruction)


def program(instruction: str, target: str = "sm_80"):
    return isa.compile_kernel(case(instruction, target), "k", "case.ptx")


REFUSED_ON_SM80 = [
    # (instruction, the feature named, the target it needs, the word the column points at)
    ("wgmma.fence.sync.aligned;", "'wgmma.fence'", "sm_90a", "wgmma"),
    ("wgmma.commit_group.sync.aligned;", "'wgmma.commit_group'", "sm_90a", "wgmma"),
    ("wgmma.wait_group.sync.aligned 0;", "'wgmma.wait_group'", "sm_90a", "wgmma"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1,%f2,%f3,%f4}, %rd2, %rd3, "
     "1, 1, 1, 0, 0;", "'wgmma.mma_async'", "sm_90a", "wgmma"),
    ("setmaxnreg.inc.sync.aligned.u32 232;", "'setmaxnreg'", "sm_90a", "setmaxnreg"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], "
     "[%rd1, {%r2, %r3}], [%r1];", "'cp.async.bulk.tensor'", "sm_90", "cp"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 256, "
     "[%r1];", "'cp.async.bulk'", "sm_90", "cp"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%r1], "
     "[%rd1], 256, [%r1], %rd2;", "'cp.async.bulk'", "sm_90", "cp"),
    ("cp.async.bulk.prefetch.L2.global [%rd1], 256;", "'cp.async.bulk.prefetch'", "sm_90",
     "cp"),
    ("cp.async.bulk.commit_group;", "'cp.async.bulk.commit_group'", "sm_90", "cp"),
    ("cp.async.bulk.wait_group 0;", "'cp.async.bulk.wait_group'", "sm_90", "cp"),
    ("mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r1], 256;", "'.expect_tx'", "sm_90",
     ".expect_tx"),
    ("mbarrier.arrive_drop.expect_tx.shared::cta.b64 %rd2, [%r1], 256;", "'.expect_tx'",
     "sm_90", ".expect_tx"),
    ("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], 256;", "'mbarrier.expect_tx'",
     "sm_90", "mbarrier"),
    ("mbarrier.complete_tx.shared::cta.b64 [%r1], 256;", "'mbarrier.complete_tx'", "sm_90",
     "mbarrier"),
    ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;", "'mbarrier.try_wait'",
     "sm_90", "mbarrier"),
    ("mbarrier.arrive.shared::cta.b64 %rd2, [%r1], 2;",
     "'mbarrier.arrive with count argument'", "sm_90", "mbarrier"),
    ("mbarrier.arrive.release.cluster.shared::cta.b64 %rd2, [%r1];", "'.cluster'", "sm_90",
     ".cluster"),
    ("fence.acq_rel.cluster;", "'.cluster'", "sm_90", ".cluster"),
    ("ld.shared::cluster.u32 %r2, [%r1];", "'.shared::cluster'", "sm_90", ".shared::cluster"),
    ("mapa.shared::cluster.u32 %r2, %r1, 0;", "'mapa'", "sm_90", "mapa"),
    ("getctarank.shared::cluster.u32 %r2, %r1;", "'getctarank'", "sm_90", "getctarank"),
    ("barrier.cluster.arrive;", "'barrier.cluster.arrive'", "sm_90", "barrier"),
    ("barrier.cluster.wait;", "'barrier.cluster.wait'", "sm_90", "barrier"),
    ("mov.u32 %r2, %clusterid.x;", "'%clusterid'", "sm_90", "%clusterid"),
    ("mov.u32 %r2, %nclusterid.x;", "'%nclusterid'", "sm_90", "%nclusterid"),
    ("mov.u32 %r2, %cluster_ctarank;", "'%cluster_ctarank'", "sm_90", "%cluster_ctarank"),
    ("mov.u32 %r2, %cluster_ctaid.x;", "'%cluster_ctaid'", "sm_90", "%cluster_ctaid"),
    ("mov.pred %p1, %is_explicit_cluster;", "'%is_explicit_cluster'", "sm_90",
     "%is_explicit_cluster"),
    ("fence.proxy.async.shared::cta;", "'fence.proxy.async'", "sm_90", "fence"),
    ("fence.mbarrier_init.release.cluster;", "'fence.mbarrier_init'", "sm_90", "fence"),
    ("elect.sync %r2|%p1, 0xffffffff;", "'elect'", "sm_90", "elect"),
    ("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};", "'stmatrix'", "sm_90",
     "stmatrix"),
    ("cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2;", "'cvt with .e4m3x2/.e5m2x2'", "sm_89",
     "cvt"),
    ("cvt.rn.f16x2.e5m2x2 %r2, %h1;", "'cvt with .e4m3x2/.e5m2x2'", "sm_89", "cvt"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f1,%f2,%f3,%f4}, "
     "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};", "'mma with FP8 floating point type'",
     "sm_89", "mma"),
    ("cvt.rn.bf16.f64 %h1, %rd2;", "'cvt with .bf16.f64'", "sm_90", "cvt"),
    ("cvt.rni.s32.bf16 %r2, %h1;", "'cvt with .s32.bf16'", "sm_90", "cvt"),
    ("add.rn.bf16 %h1, %h2, %h3;", "'add.bf16'", "sm_90", "add"),
    ("mul.rn.bf16x2 %r2, %r3, %r4;", "'mul.bf16x2'", "sm_90", "mul"),
    ("setp.lt.bf16 %p1, %h1, %h2;", "'setp.bf16'", "sm_90", "setp"),
    ("ex2.approx.ftz.bf16 %h1, %h2;", "'ex2.bf16'", "sm_90", "ex2"),
    ("tanh.approx.bf16 %h1, %h2;", "'tanh.bf16'", "sm_90", "tanh"),
    ("red.global.add.noftz.bf16x2 [%rd1], %r2;", "'red.bf16x2'", "sm_90", "red"),
    ("atom.global.add.noftz.bf16 %h1, [%rd1], %h2;", "'atom.bf16'", "sm_90", "atom"),
    ("min.relu.s32 %r2, %r3, %r4;", "'min.relu'", "sm_90", ".relu"),
]

ACCEPTED_ON_SM80 = [
    "cp.async.cg.shared.global [%r1], [%rd1], 16;",
    "cp.async.ca.shared.global [%r1], [%rd1], 16, 8;",
    "cp.async.commit_group;",
    "cp.async.wait_group 0;",
    "cp.async.cg.shared.global.L2::cache_hint [%r1], [%rd1], 16, %rd2;",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2,%r3,%r4,%r5}, [%r1];",
    "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r2,%r3}, [%r1];",
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4}, "
    "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1,%f2,%f3,%f4}, "
    "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 "
    "{%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6,%r7,%r8}, {%f5,%f6,%f7,%f8}, %r9, 0;",
    "redux.sync.add.u32 %r2, %r3, 0xffffffff;",
    "mbarrier.init.shared::cta.b64 [%r1], 1;",
    "mbarrier.arrive.shared::cta.b64 %rd2, [%r1];",
    "mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;",
    "createpolicy.fractional.L2::evict_last.b64 %rd2, 1.0;",
    "ld.global.L2::cache_hint.f32 %f1, [%rd1], %rd2;",
    "cvt.rn.bf16x2.f32 %r2, %f1, %f2;",
    "cvt.f32.bf16 %f1, %h1;",
    "fma.rn.bf16 %h1, %h2, %h3, %h4;",
    "max.bf16x2 %r2, %r3, %r4;",
    "cvt.rna.tf32.f32 %r2, %f1;",
]


# -- the presets ----------------------------------------------------------------------------
@pytest.mark.parametrize("preset, target", [("a100_sxm", "sm_80"), ("h100_sxm", "sm_90a"),
                                            ("h800_sxm", "sm_90a"),
                                            ("deepseek_codesign", "sm_90a")])
def test_each_preset_runs_its_generations_target(preset, target):
    """a100_sxm runs sm_80; the Hopper presets (h800 and co-design by their base) sm_90a."""
    assert models.load_preset(preset).chip.isa_target == target


def test_every_preset_lists_its_target():
    """Every preset resolves an isa_target of the accepted ones."""
    for name in models.list_presets():
        assert models.load_preset(name).chip.isa_target in TARGETS


def test_an_unknown_target_is_refused_with_the_accepted_ones():
    """A bad chip.isa_target names the key and lists every accepted target."""
    with pytest.raises(models.ConfigError, match="chip.isa_target") as err:
        models.load_preset("h100_sxm", {"chip.isa_target": "sm_70"})
    assert all(t in str(err.value) for t in TARGETS)


# -- the verifier rules ------------------------------------------------------------------------
@pytest.mark.parametrize("instruction, feature, needed, word", REFUSED_ON_SM80,
                         ids=[row[1] + " " + row[0][:24] for row in REFUSED_ON_SM80])
def test_instruction_sm80_lacks_is_refused_at_its_line_with_the_target(instruction, feature,
                                                                        needed, word):
    """Refused on sm_80 at line:column of the word, naming the feature, the target it needs
    and the chip's; accepted on sm_90a."""
    with pytest.raises(isa.PtxError) as err:
        verify_target(program(instruction), "sm_80")
    e = err.value
    assert (e.file, e.line) == ("case.ptx", LINE)
    assert e.col == e.text.index(word) + 1
    assert f"{feature} requires .target {needed} or higher" in e.message
    assert "the chip's target is sm_80" in e.message
    assert instruction in str(e)
    verify_target(program(instruction, "sm_90a"), "sm_90a")


@pytest.mark.parametrize("instruction", ACCEPTED_ON_SM80, ids=lambda s: s[:40])
def test_ampere_instructions_are_accepted_on_sm80(instruction):
    """cp.async, ldmatrix, mma.sync bf16/tf32, redux.sync, the sm_80 mbarrier forms: sm_80."""
    verify_target(program(instruction), "sm_80")


@pytest.mark.parametrize("instruction", ["wgmma.fence.sync.aligned;",
                                         "setmaxnreg.dec.sync.aligned.u32 40;"])
def test_arch_specific_instructions_need_sm90a_not_sm90(instruction):
    """wgmma and setmaxnreg: refused on sm_90 (as ptxas -arch=sm_90), run on sm_90a."""
    with pytest.raises(isa.PtxError, match=r"requires \.target sm_90a or higher; the chip's "
                       r"target is sm_90"):
        verify_target(program(instruction, "sm_90"), "sm_90")
    verify_target(program(instruction, "sm_90a"), "sm_90a")


def test_program_target_above_the_chips_is_refused_at_the_directive():
    """`.target sm_90a` on an sm_80 chip: refused at line 2, the column of `sm_90a`, as
    ptxas's 'SM version specified by .target is higher'; an older .target runs on newer."""
    with pytest.raises(isa.PtxError) as err:
        verify_target(program("mov.u32 %r2, %ctaid.x;", "sm_90a"), "sm_80")
    e = err.value
    assert (e.line, e.col) == (2, len(".target ") + 1)
    assert "the program's .target sm_90a is higher than the chip's target sm_80" in e.message
    with pytest.raises(isa.PtxError, match="sm_90a is higher than the chip's target sm_90"):
        verify_target(program("mov.u32 %r2, %ctaid.x;", "sm_90a"), "sm_90")
    verify_target(program("mov.u32 %r2, %ctaid.x;", "sm_80"), "sm_90a")
    verify_target(program("mov.u32 %r2, %ctaid.x;", "sm_90"), "sm_90a")


def test_cluster_directive_of_the_entry_needs_sm90():
    """`.reqnctapercluster` is refused on sm_80 at the entry's line."""
    text = case("mov.u32 %r2, %ctaid.x;").replace(".visible .entry k(.param .u64 p)\n",
                                                  ".visible .entry k(.param .u64 p)\n"
                                                  ".reqnctapercluster 2, 1, 1\n")
    prog = isa.compile_kernel(text, "k", "case.ptx")
    with pytest.raises(isa.PtxError, match=r"'\.reqnctapercluster' requires \.target sm_90"):
        verify_target(prog, "sm_80")
    verify_target(isa.compile_kernel(text.replace("sm_80", "sm_90a"), "k", "c"), "sm_90a")


def test_unknown_chip_target_lists_the_accepted_ones():
    """verify_target refuses a target name it does not know, listing TARGETS."""
    with pytest.raises(isa.InputError, match="sm_80, sm_86, sm_89, sm_90, sm_90a"):
        verify_target(program("ret;"), "sm_75")


VMMA = ("vmma.sync.aligned.m16n8k16.row.col.f32.dyn.dyn.f32 {%f1,%f2,%f3,%f4}, "
        "{%r1,%r2,%r3,%r4,%r5,%r6,%r7,%r8}, {%r9,%r10,%r11,%r12}, {%f5,%f6,%f7,%f8}, %r13;")
ZMMA = ("zmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1,%f2,%f3,%f4}, "
        "{%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};")


@pytest.mark.parametrize("instruction, unit", [(VMMA, "vpcu"), ("vpcu.setprec.b32 %r2, 3;",
                                                                "vpcu"), (ZMMA, "zce")])
def test_extension_opcodes_need_their_co_design_unit(instruction, unit):
    """vmma/vpcu.setprec need the VPCU, zmma the ZCE, on any target; the message names the
    config key that enables it."""
    prog = program(instruction, "sm_90a")
    with pytest.raises(isa.PtxError, match=rf"units\.{unit}\.enabled") as err:
        verify_target(prog, "sm_90a")
    assert err.value.line == LINE
    verify_target(prog, "sm_90a", frozenset({unit}))


# -- honoured where programs run ------------------------------------------------------------
def test_run_kernel_with_a_target_refuses_before_running():
    """isa.run_kernel(target="sm_80") refuses a Hopper instruction and leaves the arrays."""
    text = case("fence.proxy.async.shared::cta;\n  st.global.u32 [%rd1], 7;")
    out = np.zeros(4, np.uint32)
    with pytest.raises(isa.PtxError, match="fence.proxy.async"):
        isa.run_kernel(text, "k", 1, 32, [out], target="sm_80")
    assert not out.any()
    isa.run_kernel(text.replace("sm_80", "sm_90a"), "k", 1, 32, [out], target="sm_90a")
    assert out[0] == 7


def test_clusters_of_several_ctas_need_sm90():
    """A launch with clusters of 2 CTAs is refused on sm_80 (a LaunchError naming sm_90)."""
    with pytest.raises(isa.LaunchError, match="needs sm_90 or newer; the chip's target is "
                       "sm_80"):
        isa.run_kernel(case("ret;"), "k", 2, 32, [np.zeros(1, np.uint32)], cluster=2,
                       target="sm_80")


def test_simulate_kernel_refuses_a_hopper_program_on_a100():
    """simulate_kernel verifies against the config's chip.isa_target before it runs."""
    text = case("wgmma.fence.sync.aligned;", "sm_80")
    with pytest.raises(isa.PtxError, match=r"'wgmma.fence' requires \.target sm_90a"):
        simulator.simulate_kernel(text, "k", 1, 32, [np.zeros(1, np.uint32)],
                                  config=models.load_preset("a100_sxm"))


def test_kernel_command_refuses_before_running(tmp_path, capsys):
    """`ptxsim kernel --model a100_sxm` on a Hopper file: exit 2, file:line:col and target."""
    path = tmp_path / "hopper.ptx"
    path.write_text(case("setmaxnreg.inc.sync.aligned.u32 232;", "sm_80"))
    assert main(["kernel", str(path), "--grid", "1", "--block", "32",
                 "--model", "a100_sxm"]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"hopper\.ptx:{LINE}:3: 'setmaxnreg' requires \.target sm_90a or "
                     r"higher; the chip's target is sm_80", err)
    assert main(["kernel", str(path), "--grid", "1", "--block", "32"]) == 0


def test_catalog_and_templates_run_on_sm90a():
    """No false refusal: every catalog kernel and the Hopper presets' templates verify on
    sm_90a with the co-design units."""
    units = frozenset({"vpcu", "zce"})
    for path in sorted(KERNELS.rglob("*.ptx")):
        text = path.read_text()
        for entry in re.findall(r"^\.visible \.entry (\w+)\(", text, re.M):
            verify_target(isa.compile_kernel(text, entry, str(path)), "sm_90a", units)
    codesign = models.load_preset("deepseek_codesign")
    for kind, sizes in (("gemm", {"m": 256, "n": 256, "k": 256}),
                        ("gemm", {"m": 256, "n": 256, "k": 256, "dtype": "fp8",
                                  "scaling": "deepseek"}),
                        ("attention", {"batch": 1, "heads": 2, "seqlen": 256}),
                        ("attention", {"batch": 1, "heads": 2, "seqlen": 256,
                                       "backward": True}),
                        ("mla-decode", {"batch": 2, "heads": 16, "kv_len": 256})):
        build_op(kind, codesign, **sizes)       # checks every launch (check_plan_target)


# -- ops pick their template by target --------------------------------------------------------
@pytest.mark.parametrize("preset, template", [("a100_sxm", "gemm_sm80_cpasync_mma"),
                                              ("h100_sxm", "gemm_sm90a_tma_wgmma"),
                                              ("deepseek_codesign", "gemm_sm90a_tma_wgmma")])
def test_gemm_op_picks_its_template_by_target(preset, template):
    """The GEMM runs the Ampere template on sm_80 and the Hopper one on sm_90a."""
    plan = build_op("gemm", models.load_preset(preset), m=2048, n=4096, k=8192)
    assert plan.launches[0].detail["template"] == template


@pytest.mark.parametrize("preset, template", [("a100_sxm", "attention_sm80_cpasync_mma"),
                                              ("h100_sxm", "attention_sm90a_tma_wgmma")])
def test_attention_op_picks_its_template_by_target(preset, template):
    """The attention forward runs the Ampere template on sm_80 and the Hopper one on sm_90a."""
    plan = build_op("attention", models.load_preset(preset), batch=1, heads=16, seqlen=1024,
                    headdim=128)
    assert {launch.detail["template"] for launch in plan.launches} == {template}


@pytest.mark.parametrize("kind, sizes, template", [
    ("attention", {"batch": 1, "heads": 2, "seqlen": 256, "backward": True},
     "attention_bwd_sm90a_tma_wgmma"),
    ("mla-decode", {"batch": 2, "heads": 16, "kv_len": 256}, "mla_decode_sm90a_tma_wgmma"),
])
def test_op_without_a_template_for_the_target_is_refused(kind, sizes, template):
    """On a100_sxm (sm_80) the attention backward and MLA decode refuse, naming the op, the
    chip's target and the sm_90a template that exists; on h100_sxm that template is chosen."""
    op = "attention-backward" if sizes.get("backward") else kind
    with pytest.raises(isa.InputError) as err:
        build_op(kind, models.load_preset("a100_sxm"), **sizes)
    text = str(err.value)
    assert f"op {op} has no kernel template for ISA target sm_80" in text
    assert f"{template} for sm_90a" in text
    plan = build_op(kind, models.load_preset("h100_sxm"), **sizes)
    assert {launch.detail["template"] for launch in plan.launches} == {template}


def test_pick_template_takes_the_newest_the_target_runs():
    """sm_90a gets the Hopper GEMM and attention; sm_80, sm_89 and sm_90 (no wgmma) the
    Ampere ones; no MLA decode template runs on sm_90."""
    for op in ("gemm", "attention"):
        assert pick_template(op, "sm_90a").target == "sm_90a"
        for target in ("sm_80", "sm_89", "sm_90"):
            assert pick_template(op, target).target == "sm_80"
    with pytest.raises(isa.InputError, match="ISA target sm_90 "):
        pick_template("mla-decode", "sm_90")


def test_catalog_kernel_built_for_a_newer_target_is_refused_by_the_op():
    """A catalog kernel with no sm_80 build (FP8 quantize, quantize_block.ptx for sm_90) is
    refused on a100_sxm by the op, naming the op, the kernel and the .target line."""
    with pytest.raises(isa.InputError, match=r"op quantize \(rows=64, cols=256, "
                       r"transpose=False\): kernel quantize_e4m3_1x128 cannot run on this "
                       r"chip: .*:\d+:\d+: the program's \.target sm_90 is higher than the "
                       r"chip's target sm_80"):
        build_op("quantize", models.load_preset("a100_sxm"), rows=64, cols=256)


def test_op_result_says_which_template_ran():
    """Each kernel entry of an op result names its template and its PTX's .target."""
    h100 = models.load_preset("h100_sxm")
    res = simulate_op(build_op("softmax", h100, rows=64, cols=256), h100, "full")
    written = re.search(r"^\.target (\S+)", load_ptx("softmax.cu"), re.M).group(1)
    assert (res["kernel"]["template"], res["kernel"]["ptx_target"]) == ("softmax_rows",
                                                                        written)


def test_layer_kernels_table_has_a_template_column_and_a100_refuses_before_running(
        monkeypatch):
    """The kernels table says which template ran (`name (target)`): the Hopper GEMM and the
    sm_90 norm build on h800_sxm, their sm_80 programs on a100_sxm; a node with no sm_80
    program (FP8 quantize) is refused while the plans are built, before any op is simulated."""
    graph = KernelGraph("t", (
        L.elementwise("norm", "rmsnorm", rows=64, cols=256, dtype="bf16"),
        L.gemm("up", m=64, n=256, k=256, dtype="bf16", out_dtype="bf16", deps=("norm",))),
        {"model": "llama3-8b", "phase": "prefill"})
    for preset, up, norm in (("h800_sxm", "gemm_sm90a_tma_wgmma (sm_90a)",
                              "rmsnorm_bf16_rows (sm_90)"),
                             ("a100_sxm", "gemm_sm80_cpasync_mma (sm_80)",
                              "rmsnorm_bf16_rows (sm_80)")):
        res = simulator.simulate_workload(graph, config=models.load_preset(preset),
                                          fidelity="sampled")
        templates = res.kernels.set_index("name")["template"]
        assert (templates["up"], templates["norm"]) == (up, norm)
    fp8 = KernelGraph("t", (
        L.elementwise("norm", "rmsnorm", rows=64, cols=256, dtype="bf16"),
        L.quantize("quant", rows=64, cols=256, dtype="bf16", out_dtype="fp8", deps=("norm",))),
        {"model": "llama3-8b", "phase": "prefill"})
    monkeypatch.setattr(ops_pkg, "simulate_op", lambda *a, **k: pytest.fail("simulated"))
    with pytest.raises(isa.InputError, match=r"node 'quant' \(quantize -> op quantize\): op "
                       r"quantize .* \.target sm_90 is higher than the chip's target sm_80"):
        simulator.simulate_workload(fp8, config=models.load_preset("a100_sxm"))
