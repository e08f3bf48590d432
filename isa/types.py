"""PTX scalar and packed types: width, kind, numpy dtype, register file.

A type name (`f32`, `s64`, `bf16x2`, `e4m3`...) maps to a `PtxType`. Registers live
in four files by width: `P` (predicates, bool), `R16`, `R32`, `R64` (raw bits as
unsigned integers); a typed read is a zero-copy view where widths agree. Sub-word
types (`b8/u8/s8`, `e4m3`, `e5m2`) sit in `R16` registers.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True, slots=True)
class PtxType:
    name: str
    bits: int
    kind: str  # 'b' bits, 'u' unsigned, 's' signed, 'f' float, 'pred', 'pk' packed/narrow float
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_signed(self) -> bool:
        return self.kind == "s"

    @property
    def uint_dtype(self) -> np.dtype:
        return UINT_OF_BITS[max(self.bits, 8)]


UINT_OF_BITS = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                64: np.dtype(np.uint64)}
SINT_OF_BITS = {8: np.dtype(np.int8), 16: np.dtype(np.int16), 32: np.dtype(np.int32),
                64: np.dtype(np.int64)}

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


def _t(name, bits, kind, dtype):
    return name, PtxType(name, bits, kind, np.dtype(dtype))


TYPES: dict[str, PtxType] = dict([
    _t("pred", 1, "pred", np.bool_),
    _t("b8", 8, "b", np.uint8), _t("u8", 8, "u", np.uint8), _t("s8", 8, "s", np.int8),
    _t("b16", 16, "b", np.uint16), _t("u16", 16, "u", np.uint16), _t("s16", 16, "s", np.int16),
    _t("b32", 32, "b", np.uint32), _t("u32", 32, "u", np.uint32), _t("s32", 32, "s", np.int32),
    _t("b64", 64, "b", np.uint64), _t("u64", 64, "u", np.uint64), _t("s64", 64, "s", np.int64),
    _t("b128", 128, "b", np.uint64),
    _t("f16", 16, "f", np.float16), _t("bf16", 16, "f", BF16), _t("f32", 32, "f", np.float32),
    _t("f64", 64, "f", np.float64), _t("tf32", 32, "f", np.float32),
    _t("f16x2", 32, "pk", np.uint32), _t("bf16x2", 32, "pk", np.uint32),
    _t("e4m3", 8, "pk", E4M3), _t("e5m2", 8, "pk", E5M2),
    _t("e4m3x2", 16, "pk", np.uint16), _t("e5m2x2", 16, "pk", np.uint16),
    _t("e4m3x4", 32, "pk", np.uint32), _t("e5m2x4", 32, "pk", np.uint32),
])

# register file of each declarable register type
FILE_OF_BITS = {1: "P", 8: "R16", 16: "R16", 32: "R32", 64: "R64"}
FILE_BITS = {"P": 1, "R16": 16, "R32": 32, "R64": 64}
FILE_DTYPE = {"P": np.dtype(np.bool_), "R16": np.dtype(np.uint16), "R32": np.dtype(np.uint32),
              "R64": np.dtype(np.uint64)}


def reg_file_of(type_name: str) -> str:
    return FILE_OF_BITS[TYPES[type_name].bits]


def is_type(name: str) -> bool:
    return name in TYPES
