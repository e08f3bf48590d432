"""PTX emitters the warp-specialized Hopper templates (GEMM, attention forward and backward)
share: the shared-memory stage ring, wgmma shared-memory matrix descriptors and the
generic addresses of tensor-map parameters.

The ring: `%stage` in [0, stages) and its mbarrier phase parity `%phase`, flipped each time
the ring wraps; `%p1` and `%r0` are scratch. A descriptor packs a shared-memory address
(>> 4, bits 0-13) with the layout bits of its constant (swizzle mode, leading and stride
byte offsets).
Units: bytes.
"""

from __future__ import annotations

DESC_SWIZZLE128 = 0x4000004000010000   # K-major, 128B swizzle, SBO 1024 B (8 rows), LBO 16 B


def advance_stage(cfg) -> list[str]:
    """stage = (stage + 1) % cfg.stages, flipping the phase parity on wrap."""
    return ["    add.u32 %stage, %stage, 1;", f"    setp.eq.u32 %p1, %stage, {cfg.stages};",
            "    selp.u32 %stage, 0, %stage, %p1;", "    xor.b32 %r0, %phase, 1;",
            "    selp.u32 %phase, %r0, %phase, %p1;"]


WARPS_PER_GROUP = 4


def warp_leader() -> list[str]:
    """%plead: lane 0 of each warp, which releases a stage for its warp (one arrival per
    consumer warp, as CUTLASS's pipelines and FlashAttention-3 do; on an H100 a phase of
    32-lane arrivals took as long as one of 1-lane arrivals, `workloads/reference/h100/
    mbarrier_hw.csv`, so this saves instructions, not barrier time). Used after a
    `.sync.aligned` wgmma wait (and a warp barrier where lanes read the stage), so the
    whole warp is done with the stage. Needs `.reg .b32 %lane` and `.reg .pred %plead`."""
    return ["    and.b32 %lane, %thr, 31;", "    setp.eq.u32 %plead, %lane, 0;"]


def release_stage(barrier: str, scratch: str = "%rd3", warp_sync: bool = True,
                  lead: str = "%plead") -> list[str]:
    """One arrival per warp (by the lane where predicate `lead` holds) on the stage's empty
    mbarrier at shared address `barrier`; `warp_sync` first joins the warp's lanes (needed
    where lanes read the stage with `ld.shared`; a stage read only by wgmma is done for
    the whole warp at its `.sync.aligned` wait)."""
    return [*(["    bar.warp.sync 0xffffffff;"] if warp_sync else []),
            f"    @{lead} mbarrier.arrive.shared::cta.b64 {scratch}, [{barrier}];"]


def param_addresses(maps: dict[str, str]) -> list[str]:
    """Generic addresses of by-value tensor-map parameters ({register: parameter}): what a
    TMA copy's tensor-map operand must be on hardware (`mov` gives the .param address,
    `cvta.param` the generic one, as nvcc emits for a `__grid_constant__ CUtensorMap`)."""
    return [line for reg, name in maps.items()
            for line in (f"    mov.u64 {reg}, {name};", f"    cvta.param.u64 {reg}, {reg};")]


def smem_desc(reg: str, base: str, const: int) -> list[str]:
    """The descriptor of the shared-memory address in `base` into `reg`, layout bits
    `const`."""
    return [f"    cvt.u64.u32 {reg}, {base};", f"    shr.u64 {reg}, {reg}, 4;",
            f"    or.b64 {reg}, {reg}, {const:#x};"]
