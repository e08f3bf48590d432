"""Which kernel template an op runs on which ISA target, and the refusal where none exists.

What it models
--------------
Every generated template is PTX for one target (`isa.targets.TARGETS`): the Hopper templates
use TMA, mbarrier transaction counts, `wgmma.mma_async` and `setmaxnreg`, so they are
`sm_90a` programs that an `sm_80` chip (A100) cannot run. `TEMPLATES` lists, per op, the
templates that exist with their target; `pick_template(op, target)` returns the newest one a
chip of `target` runs, or raises an `InputError` naming the op, the chip's target and the
templates that exist, so an op never runs another generation's program. Ops record the
template's name in their launches' `detail["template"]`, which the kernels tables show.

Left out: sm_80 templates of the attention backward (`attention-backward`) and of MLA
decode (`mla-decode`): on an sm_80 chip those ops are refused by `pick_template`; kernels the
catalog compiles with nvcc (element-wise, norms) carry their own `.target` (an sm_80 build
beside the sm_90 one, chosen by `workloads.kernels.case.load_ptx`; none for the FP8 kernels)
and are checked against the chip's by `isa.targets.verify_target` like any program.
"""

from __future__ import annotations

from dataclasses import dataclass

from isa.errors import InputError
from isa.targets import has_target, target_rank


@dataclass(frozen=True, slots=True)
class Template:
    """One generated kernel template: the op it serves, its name, the target of its PTX, its
    generator module and what it is."""

    op: str
    name: str
    target: str
    source: str
    what: str


TEMPLATES: tuple[Template, ...] = (
    Template("gemm", "gemm_sm80_cpasync_mma", "sm_80",
             "workloads/kernels/templates/gemm_sm80.py",
             "multistage cp.async + ldmatrix + mma.sync m16n8k16, 128x128 CTA tiles 32 or 64 "
             "deep in K"),
    Template("gemm", "gemm_sm90a_tma_wgmma", "sm_90a", "workloads/kernels/templates/gemm.py",
             "warp-specialized TMA + wgmma, persistent, cluster multicast"),
    Template("attention", "attention_sm80_cpasync_mma", "sm_80",
             "workloads/kernels/templates/attention_sm80.py",
             "FlashAttention-2 style forward and split-KV decode, cp.async + ldmatrix + "
             "mma.sync m16n8k16"),
    Template("attention", "attention_sm90a_tma_wgmma", "sm_90a",
             "workloads/kernels/templates/attention.py",
             "FlashAttention-3 style forward and split-KV decode, TMA + wgmma"),
    Template("attention-backward", "attention_bwd_sm90a_tma_wgmma", "sm_90a",
             "workloads/kernels/templates/attention_bwd.py",
             "FlashAttention-3 style backward, TMA + wgmma"),
    Template("mla-decode", "mla_decode_sm90a_tma_wgmma", "sm_90a",
             "workloads/kernels/templates/mla.py",
             "DeepSeek-V3 MLA decode (absorbed), FlashMLA style, TMA + wgmma"),
)
"""Every generated template, by op (`pick_template` takes the newest a target runs).
`attention-backward` and `mla-decode` have sm_90a templates only, so an sm_80 chip (a100_sxm)
is refused there."""


def templates_of(op: str) -> tuple[Template, ...]:
    """The templates of `op`, oldest target first."""
    return tuple(sorted((t for t in TEMPLATES if t.op == op),
                        key=lambda t: target_rank(t.target)))


def pick_template(op: str, target: str) -> Template:
    """The newest template of `op` that a chip of ISA `target` runs; an `InputError` naming
    the op, the target and the templates that exist when there is none."""
    known = templates_of(op)
    if not known:
        raise ValueError(f"no template of op {op!r} is listed; listed ops: "
                         f"{', '.join(sorted({t.op for t in TEMPLATES}))}")
    runnable = [t for t in known if has_target(target, t.target)]
    if runnable:
        return runnable[-1]
    exist = "; ".join(f"{t.name} for {t.target} ({t.what}, {t.source})" for t in known)
    raise InputError(f"op {op} has no kernel template for ISA target {target} "
                     f"(chip.isa_target of this config): templates exist only as {exist}; "
                     f"accepted: a preset whose chip.isa_target is {known[0].target} or newer "
                     "(ptxsim models lists them)")
