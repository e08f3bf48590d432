"""The catalog's CUDA kernels on an sm_80 chip: nvcc's -arch=sm_80 builds, chosen by target.

Each catalogued `.cu` but the FP8 ones has `X.sm_80.ptx` beside `X.ptx`; `load_ptx(file,
target)` picks the newest build a chip runs, so a100_sxm (`chip.isa_target = sm_80`) runs
the Ampere PTX and the Hopper presets keep theirs. The sm_80 builds match numpy as the sm_90
ones do; FP8 kernels (quantize) are refused on sm_80 naming the op and the kernel, and a dense
layer runs end to end on a100_sxm with sm_80 programs only.
"""

import contextlib
import io

import numpy as np
import pandas as pd
import pytest

import isa
import models
from isa.errors import InputError
from isa.targets import program_target, verify_target
from simulator.app.cli import main
from workloads.kernels.case import load_ptx, ptx_builds
from workloads.kernels.catalog import KERNELS
from workloads.ops.registry import build_op, ptx_target

SM80_ENTRIES = sorted(e for e, spec in KERNELS.items() if "sm_80" in ptx_builds(spec.file))
FP8_FILES = {"fp8_convert.cu", "mma_fp8.cu", "quantize_block.cu"}


@pytest.fixture(scope="module")
def a100():
    return models.load_preset("a100_sxm")


def test_every_kernel_but_fp8_has_an_sm80_build():
    """The FP8 files are the only catalogued sources without an sm_80 build."""
    without = {spec.file for spec in KERNELS.values() if "sm_80" not in ptx_builds(spec.file)}
    assert without == FP8_FILES


@pytest.mark.parametrize("target, build", [("sm_80", "sm_80"), ("sm_86", "sm_80"),
                                           ("sm_90", "sm_90"), ("sm_90a", "sm_90"),
                                           (None, "sm_90")])
def test_load_ptx_takes_the_newest_build_the_target_runs(target, build):
    """sm_80/sm_86 chips get X.sm_80.ptx, sm_90[a] chips and no target X.ptx."""
    text = load_ptx("rmsnorm_rows.cu", target)
    assert program_target(isa.compile_kernel(text, "rmsnorm_bf16_rows")) == build


@pytest.mark.parametrize("entry", SM80_ENTRIES)
def test_sm80_build_verifies_on_sm80_and_matches_numpy(entry):
    """Each kernel's sm_80 build passes the sm_80 target check and its first catalog case
    equals the numpy reference within the tolerance the sm_90 build is held to."""
    spec = KERNELS[entry]
    program = isa.compile_kernel(load_ptx(spec.file, "sm_80"), entry)
    assert program_target(program) == "sm_80"
    verify_target(program, "sm_80")
    case = spec.build(np.random.default_rng(80), **spec.variants[0])
    case.run("sm_80")
    case.check()


LAYER_OPS = [
    ("rmsnorm", {"rows": 3, "cols": 1040}), ("rmsnorm", {"rows": 3, "cols": 130}),
    ("rmsnorm", {"rows": 3, "cols": 136, "kernel": "vllm"}),
    ("layernorm", {"rows": 3, "cols": 300}), ("softmax", {"rows": 5, "cols": 77}),
    ("swiglu", {"rows": 3, "cols": 72}), ("swiglu", {"rows": 3, "cols": 72, "backward": True}),
    ("swiglu", {"rows": 3, "cols": 200, "kernel": "vllm"}),
    ("gelu", {"rows": 3, "cols": 96}), ("gelu", {"rows": 3, "cols": 96, "backward": True}),
    ("rope", {"rows": 4, "cols": 128}), ("residual-add", {"rows": 3, "cols": 72}),
    ("rmsnorm-bwd", {"rows": 3, "cols": 130}), ("layernorm-bwd", {"rows": 3, "cols": 130}),
    ("moe-gating", {"tokens": 7, "hidden": 256, "experts": 64, "topk": 4}),
    ("elementwise", {"shape": "5,37", "functor": "add"}),
    ("copy", {"shape": "5,37"}), ("cat", {"shapes": "4x8;4x8"}),
    ("index-select", {"rows": 5, "cols": 64}),
]


@pytest.mark.parametrize("kind, sizes", LAYER_OPS, ids=lambda v: str(v))
def test_layer_ops_on_a100_run_sm80_programs(a100, kind, sizes):
    """On a100_sxm every launch of a layer op is an sm_80 program (the plan passes the
    chip's ISA target check in build_op)."""
    plan = build_op(kind, a100, **sizes)
    assert {ptx_target(launch) for launch in plan.launches} == {"sm_80"}


def test_hopper_presets_keep_their_sm90_builds():
    """h100_sxm runs the sm_90 build of the same ops."""
    plan = build_op("rmsnorm", models.load_preset("h100_sxm"), rows=3, cols=1040)
    assert ptx_target(plan.launches[0]) == "sm_90"


def test_fp8_quantize_is_refused_on_a100_naming_op_and_kernel(a100):
    """quantize has FP8 builds only: on sm_80 the error names the op, the kernel and both
    targets."""
    with pytest.raises(InputError, match=r"op quantize \(rows=4, cols=128.*kernel "
                                         r"quantize_e4m3_1x128 cannot run on this chip.*"
                                         r"\.target sm_90 is higher than the chip's target "
                                         r"sm_80"):
        build_op("quantize", a100, rows=4, cols=128)


def test_dense_layer_runs_on_a100_with_sm80_programs_throughout(tmp_path):
    """`ptxsim run --model a100_sxm` on a 32-token BERT-base layer: every kernel, GEMMs and
    attention included, ran an sm_80 program."""
    out = tmp_path / "bert"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", "--model", "a100_sxm", "--workload", "bert-base", "--tokens", "32",
                     "--out", str(out), "--no-cache", "--quiet"])
    assert code == 0
    kernels = pd.read_csv(out / "kernels.csv")
    assert len(kernels) == 10
    assert all(t.endswith("(sm_80)") for t in kernels["template"]), list(kernels["template"])
    assert {"gemm_sm80_cpasync_mma (sm_80)", "attention_sm80_cpasync_mma (sm_80)",
            "layernorm_rows (sm_80)", "gelu_bf16 (sm_80)"} <= set(kernels["template"])


def test_training_layer_on_a100_is_refused_naming_attention_backward(capsys, tmp_path):
    """No sm_80 attention backward: a training run on a100_sxm stops with the op named."""
    code = main(["run", "--model", "a100_sxm", "--workload", "bert-base", "--tokens", "32",
                 "--phase", "train", "--out", str(tmp_path / "t"), "--no-cache", "--quiet"])
    assert code == 2
    assert ("op attention-backward has no kernel template for ISA target sm_80"
            in capsys.readouterr().err)
