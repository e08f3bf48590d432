"""PTX emitters the warp-specialized Hopper templates (GEMM, attention forward and backward)
share: the shared-memory stage ring and wgmma shared-memory matrix descriptors.

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


def smem_desc(reg: str, base: str, const: int) -> list[str]:
    """The descriptor of the shared-memory address in `base` into `reg`, layout bits
    `const`."""
    return [f"    cvt.u64.u32 {reg}, {base};", f"    shr.u64 {reg}, {reg}, 4;",
            f"    or.b64 {reg}, {reg}, {const:#x};"]
