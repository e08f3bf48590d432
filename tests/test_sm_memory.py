"""The compiled loop's own service of global accesses and TMA messages (`models.sm_memory`)
and timing mode's data-only instructions (`isa.dataflow`) change no figure: stats,
timelines and kernel times equal those of the Python path and of executing everything."""

from __future__ import annotations

import pandas as pd
import pytest

import isa.launch
import models
import models.cached_memory
import models.kernel_image
import workloads.ops.attention
import workloads.ops.elementwise
import workloads.ops.gemm
from isa.dataflow import data_only_pcs
from isa.launch import compile_kernel
from models.cached_memory import CachedMemory
from workloads.ops import build_op, simulate_op

CASES = [
    ("gemm", dict(m=256, n=512, k=512, dtype="fp8", scaling="deepseek")),   # TMA + scales
    ("rmsnorm", dict(rows=256, cols=2048, shape_only=True)),                # ld/st.global
    ("attention", dict(batch=1, heads=2, seqlen_q=256, seqlen_k=256, headdim=64,
                       causal=True, dtype="bf16")),
]


@pytest.fixture(autouse=True)
def _timing_mode(monkeypatch):
    """The small cases run in timing mode, as the large shapes of a layer do."""
    for module in (workloads.ops.gemm, workloads.ops.attention, workloads.ops.elementwise):
        monkeypatch.setattr(module, "FUNCTIONAL_ELEMENTS", 0)


def _run(kind, kw):
    config = models.load_preset("h800_sxm")
    stats, timelines = [], []
    res = simulate_op(build_op(kind, config, **kw), config, "full", stats=stats,
                      timelines=timelines)
    frames = [x for entry in stats for x in entry if isinstance(x, pd.DataFrame)]
    lines = [x for entry in timelines for x in entry if isinstance(x, pd.DataFrame)]
    return res["time_us"], frames, lines


def _same(a, b):
    assert a[0] == b[0]
    assert len(a[1]) == len(b[1]) > 0 and len(a[2]) == len(b[2])
    for x, y in zip(a[1] + a[2], b[1] + b[2], strict=True):
        pd.testing.assert_frame_equal(x, y, check_exact=True)


@pytest.mark.parametrize("kind,kw", CASES, ids=[c[0] for c in CASES])
def test_loop_serves_requests_as_the_python_path_does(kind, kw, monkeypatch):
    inline = _run(kind, kw)
    monkeypatch.setattr(CachedMemory, "inline_state", None)   # SMs ask Python per request
    _same(inline, _run(kind, kw))


def test_requests_larger_than_the_scratch_arrays_grow_them(monkeypatch):
    kind, kw = CASES[0]
    inline = _run(kind, kw)
    monkeypatch.setattr(models.cached_memory, "_SCRATCH_SECTORS", 1)
    monkeypatch.setattr(models.kernel_image, "SECTOR_KINDS", frozenset())   # no size known ahead
    _same(inline, _run(kind, kw))


@pytest.mark.parametrize("kind,kw", CASES, ids=[c[0] for c in CASES])
def test_timing_mode_skips_data_only_instructions_without_changing_figures(kind, kw,
                                                                          monkeypatch):
    config = models.load_preset("h800_sxm")
    plan = build_op(kind, config, **kw)
    assert all(launch.timing_only for launch in plan.launches)
    skipped = sum(int(data_only_pcs(compile_kernel(launch.ptx, launch.entry)).sum())
                  for launch in plan.launches)
    assert skipped > 0
    skipping = _run(kind, kw)
    monkeypatch.setattr(isa.launch, "data_only_pcs", lambda program: None)
    _same(skipping, _run(kind, kw))


PTX = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 x, .param .u64 y)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    mul.f32 %f2, %f1, %f1;
    add.f32 %f3, %f2, 0f3F800000;
    setp.gt.f32 %p1, %f1, 0f00000000;
    cvt.rzi.s32.f32 %r2, %f3;
    add.s64 %rd5, %rd2, %rd3;
    @%p1 st.global.f32 [%rd5], %f3;
    st.global.u32 [%rd5+1024], %r2;
    ret;
}
"""


def test_data_only_marks_what_reaches_no_address_guard_or_branch():
    program = compile_kernel(PTX, "k")
    skip = data_only_pcs(program)
    text = {ins.loc.text.strip().rstrip(";"): bool(skip[pc])
            for pc, ins in enumerate(program.instrs)}
    assert text["mul.f32 %f2, %f1, %f1"] and text["add.f32 %f3, %f2, 0f3F800000"]
    assert text["cvt.rzi.s32.f32 %r2, %f3"]              # its value is only stored
    assert not text["setp.gt.f32 %p1, %f1, 0f00000000"]  # a guard
    assert not text["mul.wide.u32 %rd3, %r1, 4"]         # an address
    assert not text["add.s64 %rd5, %rd2, %rd3"]
    assert not text["ld.global.f32 %f1, [%rd4]"]         # memory is never skipped
