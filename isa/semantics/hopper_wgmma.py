"""Warpgroup MMA (`wgmma.*`), `elect.sync` and `setmaxnreg`.

    wgmma.mma_async.sync.aligned.m64nNk16.{f32,f16}.f16.f16   d, a, b-desc, scale-d, ±1, ±1, tA, tB
    wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16       (same operands)
    wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32        d, a, b-desc, scale-d, ±1, ±1
    wgmma.mma_async.sync.aligned.m64nNk32.{f32,f16}.{e4m3,e5m2}.{e4m3,e5m2}  (same, no tA/tB)
    wgmma.fence.sync.aligned; wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned N;

N = 8..256 in steps of 8. `a` is a 64-bit shared-memory matrix descriptor (SS form) or
a `{4 registers}` fragment (RS form, laid out per warp as the A fragment of
mma.m16n8k{K}, warp w of the group holding rows 16w..16w+15; no tA operand then).
D[64, N] = scale_a A[64, K] x scale_b B[K, N] + (scale-d ? D : 0), computed when issued:
the program may not read D before `wgmma.wait_group`, nor change the operands' shared
memory, so issuing early is a legal order; fence/commit/wait have no functional effect.
Executed by whole warpgroups (4 consecutive warps of a CTA, warp_in_cta % 4 == 0 first,
all 128 lanes converged); descriptors and scale-d must be uniform across the group.

Accumulator fragment, element i of lane l of warp w (f16 packs elements 2r, 2r+1 into
register r, low half first): row 16w + l/4 + 8 (i % 4 >= 2), column 2 (l % 4) + (i & 1)
+ 8 (i / 4).

Matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address >> 4,
16-29 leading-dimension byte offset (LBO) >> 4, 32-45 stride-dimension byte offset
(SBO) >> 4, 49-51 base offset (ignored: the swizzle is applied to absolute CTA shared
addresses, which is what the base offset exists to reproduce), 62-63 swizzle (0 none,
1 128B, 2 64B, 3 32B). Element (r, k) of a K-major operand (A: r = row; B stored as
N x K: r = column), e = element bytes, T = 16 / e, W = swizzle span:
    none: start + (r/8) SBO + (r%8) 16 + (k/T) LBO + (k%T) e
    W:    start + (r/8) SBO + (r%8) W + k e
MN-major (tA/tB = 1, 16-bit types only), E = W / e:
    none: start + (r/T) SBO + (r%T) e + (k/8) LBO + (k%8) 16
    W:    start + (r/E) LBO + (r%E) e + (k/8) SBO + (k%8) W
then `tensor_map.swizzle_offsets` (the canonical layouts of CUTLASS's GMMA descriptors).

Numerics as `tensor_mma`: inputs decoded exactly (tf32 ignores the low 13 mantissa
bits), products and the sum with D formed in float64 and rounded once (to nearest
even) to the D type. Left out: sparse `wgmma.mma_async.sp`, integer (s8/u8) and b1
forms, `.satfinite`.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from isa.operands import DImm, DVec
from isa.semantics.common import PRED, U32, as_array
from isa.semantics.registry import semantics
from isa.semantics.tensor_frame import (
    WARP,
    converged_warps,
    items_of,
    pack,
    read_fragment,
    unpack,
    write_fragment,
)
from isa.semantics.tensor_mma import layouts
from isa.tensor_map import swizzle_offsets
from isa.types import TYPES

_FP8 = ("e4m3", "e5m2")
FORMS = frozenset(
    {("k16", "f32", "f16", "f16"), ("k16", "f16", "f16", "f16"), ("k16", "f32", "bf16", "bf16"),
     ("k8", "f32", "tf32", "tf32")}
    | {("k32", d, a, b) for d in ("f32", "f16") for a in _FP8 for b in _FP8})
_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}
_DTYPE = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
          "e5m2": ml_dtypes.float8_e5m2}
_SWIZZLE = np.array([0, 128, 64, 32], dtype=np.int64)
_U64 = TYPES["u64"]
ACCEPTED = ("wgmma.mma_async.sync.aligned.m64nNk{16,8,32}.<d>.<a>.<b>, N = 8..256 step 8, "
            "<d.a.b> one of: " + ", ".join(sorted(".".join(f[1:]) + f" (k{f[0][1:]})"
                                                  for f in FORMS)))


def _form(ins):
    shape = ins.shape or ""
    if not shape.startswith("m64n") or "k" not in shape:
        return None
    n, k = shape[4:].split("k")
    return int(n), "k" + k, tuple(t.name for t in ins.types)


def form_problem(ins) -> tuple[str, str] | None:
    """Why this `wgmma.mma_async` cannot run; None when it is supported."""
    form = _form(ins)
    if form is None or len(form[2]) != 3 or (form[1],) + form[2] not in FORMS \
            or not 8 <= form[0] <= 256 or form[0] % 8 or not {"sync", "aligned"} <= ins.flags:
        return f"unsupported wgmma form '{ins.text}'", ACCEPTED
    n, _, (d, a, _b) = form
    regs = n // 2 if d == "f32" else n // 4
    if len(items_of(ins.ops[0])) != regs:
        return (f"wgmma D fragment has {len(items_of(ins.ops[0]))} registers",
                f"{regs} registers for .m64n{n} with .{d} accumulators")
    if not all(isinstance(op, DImm) for op in ins.ops[4:]):
        return "wgmma scale and transpose operands must be immediates", \
            "imm-scale-a/b of 1 or -1, imm-trans-a/b of 0 or 1"
    rs = isinstance(ins.ops[1], DVec)
    if rs and len(ins.ops[1].items) != 4:
        return f"wgmma A fragment has {len(ins.ops[1].items)} registers", "4 registers"
    want = 6 + (_BYTES[a] == 2) * (1 if rs else 2)
    if len(ins.ops) != want:
        return (f"wgmma takes {want} operands in this form, got {len(ins.ops)}",
                "d, a, b-desc, scale-d, imm-scale-a, imm-scale-b"
                + (", imm-trans-a, imm-trans-b" if _BYTES[a] == 2 and not rs else
                   ", imm-trans-b" if _BYTES[a] == 2 else ""))
    return None


@functools.cache
def _d_layout(n: int) -> np.ndarray:
    """Flat (warp, lane, element) position -> flat index into D[64, n]."""
    w, lane, i = np.meshgrid(np.arange(4), np.arange(WARP), np.arange(n // 2), indexing="ij")
    row = 16 * w + (lane >> 2) + 8 * ((i % 4) >= 2)
    col = 2 * (lane & 3) + (i & 1) + 8 * (i // 4)
    out = (row * n + col).reshape(-1)
    out.setflags(write=False)
    return out


def _groups(m, ins, lanes) -> np.ndarray:
    """Slot ids `[groups, 128]` of complete warpgroups; fault otherwise."""
    grid = converged_warps(m, ins, lanes)
    first = grid[:, 0]
    wic = m.warp_in_cta[first].astype(np.int64)
    ok = grid.shape[0] % 4 == 0
    if ok:
        wg = wic.reshape(-1, 4)
        cta = m.cta_of[first].reshape(-1, 4)
        ok = bool(((wg[:, :1] % 4 == 0) & (wg == wg[:, :1] + np.arange(4))).all()
                  and (cta == cta[:, :1]).all())
    if not ok:
        raise m.fault(ins, f"warpgroup instruction executed by warps {wic.tolist()} of a CTA",
                      expected="all 4 warps of each warpgroup (warps 4q..4q+3) converged here")
    return grid.reshape(-1, 4 * WARP)


def _uniform(m, ins, values: np.ndarray, what: str) -> np.ndarray:
    """First value per group of a `[groups, 128]` array; fault if a group disagrees."""
    if (values != values[:, :1]).any():
        raise m.fault(ins, f"{what} differs across the lanes of a warpgroup",
                      expected=f"one {what} for the whole warpgroup")
    return values[:, 0]


def _operand_addresses(desc: np.ndarray, rows: int, k: int, eb: int, trans: bool):
    """CTA-relative byte addresses `[g, rows, k]` of a descriptor-addressed operand."""
    d = desc.astype(np.uint64)[:, None, None]
    field = lambda lo: ((d >> np.uint64(lo)) & np.uint64(0x3FFF)).astype(np.int64) << 4  # noqa: E731
    start, lbo, sbo = field(0), field(16), field(32)
    swz = _SWIZZLE[(d >> np.uint64(62)).astype(np.int64)]
    r = np.arange(rows, dtype=np.int64)[None, :, None]
    kk = np.arange(k, dtype=np.int64)[None, None, :]
    t = 16 // eb
    if not trans:
        plain = (r // 8) * sbo + (r % 8) * 16 + (kk // t) * lbo + (kk % t) * eb
        swizzled = (r // 8) * sbo + (r % 8) * swz + kk * eb
    else:
        e = np.maximum(swz // eb, 1)
        plain = (r // t) * sbo + (r % t) * eb + (kk // 8) * lbo + (kk % 8) * 16
        swizzled = (r // e) * lbo + (r % e) * eb + (kk // 8) * sbo + (kk % 8) * swz
    return swizzle_offsets(start + np.where(swz > 0, swizzled, plain), swz)


def _decode_words(raw: np.ndarray, name: str) -> np.ndarray:
    """Raw little-endian element bits (uint of the element width) to float64."""
    if name == "tf32":
        return (raw & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    return raw.view(_DTYPE[name]).astype(np.float64)


def _smem_operand(m, ins, groups, desc, rows, k, name, trans) -> np.ndarray:
    eb = _BYTES[name]
    addr = _operand_addresses(desc, rows, k, eb, trans)
    size = m.mem.shared_bytes
    if (addr < 0).any() or (addr + eb > size).any():
        bad = int(addr[(addr < 0) | (addr + eb > size)][0])
        raise m.fault(ins, f"wgmma operand element at shared offset {bad:#x} is out of bounds",
                      expected=f"descriptors addressing inside {size} bytes of shared memory")
    base = (m.cta_of[groups[:, 0]] * size)[:, None, None]
    words = m.mem.shared.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[eb])
    return _decode_words(words[(base + addr) // eb], name)


def _register_a(m, ins, lanes, g: int, k: int, name: str) -> np.ndarray:
    la = layouts(f"m16n8k{k}", 8 * _BYTES[name], 32)[0]
    raw = read_fragment(m, ins.ops[1], U32, lanes, 4 * g)           # [4g, 32, 4]
    if name == "tf32":
        vals = _decode_words(raw, name)
    else:
        vals = _decode_words(unpack(raw, 8 * _BYTES[name]), name)
    a = np.empty((4 * g, 16 * k))
    a[:, la.forward] = vals.reshape(4 * g, -1)
    return a.reshape(g, 64, k)


def _scalar(m, ins, k: int, ty, groups) -> np.ndarray:
    op = ins.ops[k]
    flat = groups.reshape(-1)
    vals = as_array(op.read(m, ty, flat), flat.size).reshape(groups.shape)
    return _uniform(m, ins, vals, f"operand {k}")


@semantics("wgmma.mma_async")
def wgmma_mma_async(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    n, kname, (dname, aname, bname) = _form(ins)
    k = int(kname[1:])
    groups = _groups(m, ins, lanes)
    g = groups.shape[0]
    rs = isinstance(ins.ops[1], DVec)
    imm = [int(np.int64(op.value)) for op in ins.ops[4:]]
    scale_a, scale_b = imm[0], imm[1]
    trans_a = bool(imm[2]) if len(imm) == 4 else False
    trans_b = bool(imm[-1]) if len(imm) >= 3 else False
    if rs:
        a = _register_a(m, ins, lanes, g, k, aname)
    else:
        a = _smem_operand(m, ins, groups, _scalar(m, ins, 1, _U64, groups), 64, k, aname,
                          trans_a)
    b = _smem_operand(m, ins, groups, _scalar(m, ins, 2, _U64, groups), n, k, bname, trans_b)
    scale_d = _scalar(m, ins, 3, PRED, groups).astype(bool)
    lay = _d_layout(n)
    if dname == "f32":
        frag = read_fragment(m, ins.ops[0], U32, lanes, 4 * g).view(np.float32)
    else:
        frag = unpack(read_fragment(m, ins.ops[0], U32, lanes, 4 * g), 16).view(np.float16)
    c = np.empty((g, 64 * n))
    c[:, lay] = frag.reshape(g, -1).astype(np.float64)
    c = np.where(scale_d[:, None], c, 0.0).reshape(g, 64, n)
    d = np.matmul(scale_a * a, scale_b * b.transpose(0, 2, 1)) + c
    out = d.reshape(g, -1)[:, lay].reshape(4 * g, WARP, -1)
    if dname == "f32":
        write_fragment(m, ins.ops[0], out.astype(np.float32).view(np.uint32), U32, lanes)
    else:
        words = pack(out.astype(np.float16).view(np.uint16), 16)
        write_fragment(m, ins.ops[0], words, U32, lanes)


@semantics("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group")
def wgmma_sync(m, ins, lanes):
    _groups(m, ins, lanes)


@semantics("elect")
def elect(m, ins, lanes):
    """elect.sync d|p, membermask: the lowest executing lane named in membermask leads."""
    ids = m.lane_ids(lanes)
    n = ids.size
    mask = as_array(ins.ops[1].read(m, U32, lanes), n).astype(np.int64)
    lane = ids & 31
    member = ((mask >> lane) & 1).astype(bool)
    warp = ids >> 5
    big = np.where(member, lane, 64)
    leader = np.full(int(warp.max()) + 1 - int(warp.min()), 64, dtype=np.int64)
    np.minimum.at(leader, warp - warp.min(), big)
    lead = leader[warp - warp.min()]
    d = ins.ops[0]
    value, pred = (d.value, d.pred) if hasattr(d, "pred") else (d, None)
    value.write(m, np.where(lead < 32, lead, 0).astype(np.uint32), U32, lanes)
    if pred is not None:
        pred.write(m, lane == lead, PRED, lanes)


@semantics("setmaxnreg")
def setmaxnreg(m, ins, lanes):
    count = int(np.asarray(ins.ops[0].read(m, U32, lanes)).reshape(-1)[0])
    if not 24 <= count <= 256 or count % 8:
        raise m.fault(ins, f"setmaxnreg count {count}", expected="24..256, a multiple of 8")
