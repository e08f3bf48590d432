"""Tensor maps: the descriptor a TMA copy (`cp.async.bulk.tensor`) reads its tensor from.

The real `CUtensorMap` is an opaque 128-byte object built by the driver
(`cuTensorMapEncodeTiled`); its encoding is not published. ptxsim uses its own
documented 128-byte stand-in, passed the same way, as a by-value kernel parameter
(`.param .align 64 .b8 tmap[128]`, what nvcc emits for `const __grid_constant__
CUtensorMap`) or from global memory. Layout, all little-endian:

    offset size field
    0      4    magic 0x4D585450 ("PTXM"); anything else is "not a tensor map"
    4      1    version (1)
    5      1    rank, 1..5
    6      1    dtype code (`DTYPES`, numbered as CUtensorMapDataType)
    7      1    element size in bytes (1, 2, 4 or 8)
    8      1    swizzle code: 0 none, 1 32B, 2 64B, 3 128B (as CUtensorMapSwizzle)
    9      1    interleave: 0 (none; the only mode modelled)
    10     1    OOB fill: 0 (zeros; the NaN-request fill is not modelled)
    11     1    base argument: 0xFF = `address` is absolute; k = `address` is a byte
                offset added to the pointer passed as kernel argument k
    12     4    reserved (0)
    16     8    global address (see base argument)
    24     20   dims[5], u32, elements, innermost first
    44     4    reserved
    48     32   strides[4], u64, bytes, of dims 1..4 (dim 0 is dense)
    80     20   box[5], u32, elements, innermost first
    100    20   element strides[5], u32 (1 each; traversal strides are not modelled)
    120    8    reserved

The base-argument field exists because ptxsim assigns global addresses at launch: a
map built from a numpy array names the kernel argument that carries that array, and
the copy adds the pointer's value when it runs. Rules enforced by the builder, as the
driver enforces them: 16-byte aligned base and strides, box dims 1..256, inner box
bytes a multiple of 16 and, when swizzled, at most the swizzle span.

Swizzle (`swizzle_offsets`): in a shared-memory box written with swizzle span S
(32/64/128 bytes), the 16-byte chunk bits [4, 4+b) of each byte address are XORed with
address bits [7, 7+b), b = log2(S/16), on the CTA-relative shared address (the pattern
repeats every 8*S bytes). For 128B and rows of 128 bytes that is "chunk ^= row % 8";
for 64B it is "chunk ^= (row // 2) % 4" with 64-byte rows. wgmma matrix descriptors
use the same function, so TMA-written tiles feed wgmma directly.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

MAP_BYTES = 128
MAGIC = 0x4D585450
ABSOLUTE = 0xFF
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
SWIZZLE_CODE = {v: k for k, v in SWIZZLE_BYTES.items()}
DTYPES = {"u8": 0, "u16": 1, "u32": 2, "s32": 3, "u64": 4, "s64": 5, "f16": 6, "f32": 7,
          "f64": 8, "bf16": 9, "f32_ftz": 10, "tf32": 11, "tf32_ftz": 12}
_SIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
_HEAD = struct.Struct("<IBBBBBBBBIQ5II4Q5I5I8x")
assert _HEAD.size == MAP_BYTES


@dataclass(frozen=True, slots=True)
class TensorMap:
    """A decoded tensor map; dims, strides and box innermost first."""
    rank: int
    dtype_code: int
    elem_bytes: int
    swizzle_bytes: int
    base_arg: int
    address: int
    dims: tuple[int, ...]
    strides_bytes: tuple[int, ...]     # rank entries; strides_bytes[0] == elem_bytes
    box: tuple[int, ...]

    @property
    def box_bytes(self) -> int:
        return math.prod(self.box) * self.elem_bytes


def _dtype_code(dtype) -> int:
    dt = np.dtype(dtype)
    name = {"float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
            "int32": "s32", "uint32": "u32", "int64": "s64", "uint64": "u64",
            "uint16": "u16", "int16": "u16"}.get(dt.name)
    if name is None and dt.itemsize == 1:
        name = "u8"                       # u8/s8 and the fp8 formats travel as bytes
    if name is None:
        raise ValueError(f"no tensor-map data type for numpy dtype {dt}; accepted: 1-byte "
                         "types, float16, bfloat16, float32, float64, (u)int16/32/64")
    return DTYPES[name]


def make_tensor_map(array_or_address, box, swizzle: int = 0, *, arg: int | None = None,
                    shape=None, dtype=None, strides_bytes=None) -> np.ndarray:
    """The 128 bytes of a tiled tensor map over a row-major tensor.

    `array_or_address`: a numpy array (shape, dtype and strides taken from it) or an
    absolute global address (then `shape` and `dtype` are required). `box`: the box
    extent per dimension, in numpy order (outermost first), like `shape`. `swizzle`:
    0, 32, 64 or 128 (bytes). `arg`: the kernel argument index whose pointer is the
    base (the byte offset of a numpy view from its base is not tracked: pass the array
    the argument carries)."""
    if isinstance(array_or_address, np.ndarray):
        a = array_or_address
        shape, dtype = a.shape, a.dtype
        strides_bytes = strides_bytes or a.strides
        address = 0
        if arg is None:
            raise ValueError("a tensor map over a numpy array needs arg=<index of the kernel "
                             "argument that passes this array>")
    else:
        address = int(array_or_address)
        if shape is None or dtype is None:
            raise ValueError("a tensor map over an address needs shape= and dtype=")
    code = _dtype_code(dtype)
    esize = _SIZE[code]
    shape, box = tuple(int(s) for s in shape), tuple(int(b) for b in box)
    rank = len(shape)
    if not 1 <= rank <= 5 or len(box) != rank:
        raise ValueError(f"rank {rank} with box {box}: need rank 1..5 and one box extent "
                         "per dimension")
    if strides_bytes is None:
        strides_bytes = tuple(int(np.prod(shape[k + 1:])) * esize for k in range(rank))
    strides = tuple(int(s) for s in strides_bytes)[::-1]    # innermost first
    dims, boxr = shape[::-1], box[::-1]
    _check(address, strides, dims, boxr, esize, swizzle)
    raw = _HEAD.pack(MAGIC, 1, rank, code, esize, SWIZZLE_CODE[swizzle], 0, 0,
                     ABSOLUTE if arg is None else int(arg), 0, address,
                     *(dims + (1,) * (5 - rank)), 0,
                     *(strides[1:] + (0,) * (5 - rank)),
                     *(boxr + (1,) * (5 - rank)), *([1] * 5))
    return np.frombuffer(raw, dtype=np.uint8).copy()


def _check(address, strides, dims, box, esize, swizzle) -> None:
    if swizzle not in SWIZZLE_CODE:
        raise ValueError(f"swizzle {swizzle!r}: accepted 0, 32, 64 or 128 (bytes)")
    if address % 16:
        raise ValueError(f"global address {address:#x} is not 16-byte aligned")
    if strides[0] != esize:
        raise ValueError(f"innermost stride {strides[0]} bytes: the innermost dimension "
                         f"must be dense ({esize} bytes)")
    if any(s % 16 for s in strides[1:]):
        raise ValueError(f"strides {strides[1:]} bytes: each must be a multiple of 16")
    if any(not 1 <= b <= 256 for b in box) or any(d < 1 for d in dims):
        raise ValueError(f"box {box[::-1]}: each extent must be 1..256, dims positive")
    inner = box[0] * esize
    if inner % 16:
        raise ValueError(f"inner box dimension is {inner} bytes: must be a multiple of 16")
    if swizzle and inner > swizzle:
        raise ValueError(f"inner box dimension is {inner} bytes, more than the {swizzle}B "
                         "swizzle span")


def read_tensor_map(raw: np.ndarray) -> TensorMap | str:
    """Decode 128 bytes; a string saying what is wrong when they are no valid map."""
    f = _HEAD.unpack(np.ascontiguousarray(raw, dtype=np.uint8).tobytes())
    magic, version, rank, code, esize, swz, inter, oob, base_arg = f[:9]
    address = f[10]
    if magic != MAGIC or version != 1:
        return "the bytes are not a ptxsim tensor map (bad magic); build it with " \
            "isa.tensor_map.make_tensor_map"
    if not 1 <= rank <= 5 or code not in _SIZE or _SIZE[code] != esize or swz not in \
            SWIZZLE_BYTES or inter or oob:
        return f"malformed tensor map (rank {rank}, dtype {code}, swizzle {swz}, " \
            f"interleave {inter}, oob fill {oob})"
    dims = f[11:11 + rank]
    strides = (esize,) + f[17:17 + rank - 1]
    box = f[21:21 + rank]
    return TensorMap(rank, code, esize, SWIZZLE_BYTES[swz], base_arg, address, dims,
                     strides, box)


def swizzle_offsets(addr: np.ndarray, swizzle_bytes) -> np.ndarray:
    """Byte addresses after the swizzle of span `swizzle_bytes` (0 = none); broadcasts."""
    sw = np.asarray(swizzle_bytes, dtype=np.int64)
    mask = np.where(sw > 0, sw // 16 - 1, 0)
    return addr ^ (((addr >> 7) & mask) << 4)


def box_offsets(tm: TensorMap) -> tuple[np.ndarray, np.ndarray]:
    """Per box element (numpy order, flattened): the coordinate offsets `[rank, n]`
    (innermost first) and the dense byte offset inside the box (before swizzle)."""
    grids = np.indices(tm.box[::-1]).reshape(tm.rank, -1)[::-1]
    dense = np.arange(grids.shape[1], dtype=np.int64) * tm.elem_bytes
    return grids.astype(np.int64), dense
