"""Zero-skipping MMA of the zero-compression engine (ZCE): `zmma` (our ISA extension).

    zmma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3};

Spelled, laid out and computed exactly like `mma.sync.aligned` (`tensor_mma`: same forms,
fragments and numerics, so results equal the dense computation); the engine skips zero
operands, which only changes timing (`models.zce`). Accepted forms: those of `mma` except
`.f64` (m8n8k4).

`event_detail` reports, per executing warp, what the timing needs about the operands' zeros,
independent of the configured granularity, packed in one int64:
bits 0-12 the non-zero products a[m, k] * b[k, n] (at most 16 * 8 * 32 = 4096), bits 13-23
the (m, 4-wide K group, n) units with a non-zero product (at most 1024), bits 24-55 the mask of
K indices k with a non-zero product (A column k and B row k both non-zero somewhere).
An element is zero when its bits other than the sign are zero (tf32: the 13 low mantissa
bits are ignored, as the tensor core does). Left out: NaN operands count as non-zero.
"""

from __future__ import annotations

import numpy as np

from isa.semantics import tensor_mma
from isa.semantics.registry import semantics
from isa.semantics.tensor_frame import converged_warps, read_fragment, unpack
from isa.types import TYPES

GROUP_K = 4
ELEMENT_BITS, GROUP_BITS = 13, 11
_U32 = TYPES["u32"]
_MAGNITUDE = {8: 0x7F, 16: 0x7FFF, 32: 0x7FFFE000}
_INT = ("s8", "u8")
_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "f32": 32,
         "s32": 32}


def form_problem(ins) -> tuple[str, str] | None:
    """Why this `zmma` cannot run (message, accepted forms); None when it is supported."""
    if len(ins.types) == 4 and ins.types[1].name == "f64":
        return "zmma has no .f64 form", "zmma.sync.aligned.<shape>.row.col.<d.a.b.c> of mma " \
            "with 8-, 16- or 32-bit (tf32) inputs"
    return tensor_mma.form_problem(ins)


@semantics("zmma")
def zmma(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    tensor_mma.mma(m, ins, lanes)


def _nonzero(raw: np.ndarray, name: str, bits: int) -> np.ndarray:
    """Which packed elements of register words `[w, 32, r]` are non-zero: `[w, 32, e]`."""
    fields = raw if bits == 32 else unpack(raw, bits)
    if name in _INT:
        return fields != 0
    return (fields & fields.dtype.type(_MAGNITUDE[bits])) != 0


def operand_masks(m, ins, lanes, warps: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-zero masks of A `[w, M, K]` and B `[w, K, N]` of the executing warps."""
    key = tensor_mma.form_key(ins)
    bits = _BITS[key[2]]
    la, lb, _ = tensor_mma.layouts(ins.shape, bits, _BITS[key[1]])
    out = []
    for k, lay in ((1, la), (2, lb)):
        nz = _nonzero(read_fragment(m, ins.ops[k], _U32, lanes, warps), key[2], bits)
        flat = np.take(nz.reshape(warps, -1), lay.inverse, axis=1)
        out.append(flat.reshape(warps, lay.rows, lay.cols))
    return out[0], out[1]


def pack_detail(nz_a: np.ndarray, nz_b: np.ndarray) -> np.ndarray:
    """The int64 detail (module docstring) of A/B non-zero masks `[w, M, K]`, `[w, K, N]`."""
    w, rows, k = nz_a.shape
    cols_a, rows_b = nz_a.sum(axis=1), nz_b.sum(axis=2)             # [w, K]
    products = (cols_a.astype(np.int64) * rows_b).sum(axis=1)
    ga = nz_a.reshape(w, rows, k // GROUP_K, GROUP_K)
    gb = nz_b.reshape(w, k // GROUP_K, GROUP_K, nz_b.shape[2])
    groups = np.count_nonzero(np.einsum("wmgu,wgun->wmgn", ga, gb), axis=(1, 2, 3))
    live = (cols_a > 0) & (rows_b > 0)
    mask = (live.astype(np.int64) << np.arange(k, dtype=np.int64)).sum(axis=1)
    return products | (groups.astype(np.int64) << ELEMENT_BITS) | \
        (mask << (ELEMENT_BITS + GROUP_BITS))


def unpack_detail(detail: int) -> tuple[int, int, int]:
    """(non-zero products, live K groups, live-k mask) of a packed detail."""
    products = detail & ((1 << ELEMENT_BITS) - 1)
    groups = (detail >> ELEMENT_BITS) & ((1 << GROUP_BITS) - 1)
    return products, groups, detail >> (ELEMENT_BITS + GROUP_BITS)


def event_detail(m, ins, lanes) -> np.ndarray:
    """Per executing warp, the packed zero statistics of its `zmma` operands."""
    warps = converged_warps(m, ins, lanes).shape[0]
    return pack_detail(*operand_masks(m, ins, lanes, warps))
