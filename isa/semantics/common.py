"""Helpers shared by semantics modules: reading sources, writing destinations."""

from __future__ import annotations

import numpy as np

from isa.types import TYPES

U32, U64, S64 = TYPES["u32"], TYPES["u64"], TYPES["s64"]
PRED = TYPES["pred"]


def src(m, ins, k: int, ty=None, lanes=None):
    """Operand k (0 = destination) read as type `ty` (default: the instruction type)."""
    return ins.ops[k].read(m, ty or ins.types[0], lanes)


def dst(m, ins, values, ty=None, lanes=None, k: int = 0) -> None:
    ins.ops[k].write(m, values, ty or ins.types[0], lanes)


def as_array(v, n: int) -> np.ndarray:
    v = np.asarray(v)
    return np.broadcast_to(v, (n,)) if v.ndim == 0 else v


def unsigned(ty):
    return TYPES[f"u{ty.bits}"] if ty.bits in (8, 16, 32, 64) else ty


def signed(ty):
    return TYPES[f"s{ty.bits}"] if ty.bits in (8, 16, 32, 64) else ty
