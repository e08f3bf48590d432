"""Exact references shared by the float semantics tests: add/sub/mul/fma/div rounded once.

`ref_arith` computes each lane with `fractions.Fraction` and rounds once to the target
format in the requested mode, with IEEE 754 signs of exact zeros; `flush` applies `.ftz`.
"""

from __future__ import annotations

import math

import numpy as np
from semantics_reference import FORMATS, exact, round_exact

MODES = [None, "rn", "rz", "rm", "rp"]
F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)


def mods(*mods) -> str:
    return "".join(f".{m}" for m in mods if m)


def signbit(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _sum_zero_is_negative(x: float, y: float, mode: str) -> bool:
    """IEEE 754 sign of an exact zero sum x + y."""
    if mode == "rm":
        return signbit(x) or signbit(y)
    return signbit(x) and signbit(y)


def _special_case(op: str, f: list) -> float:
    """Results with an infinite or NaN operand (or x/0) are exact in float64."""
    with np.errstate(all="ignore"):
        r = {"add": lambda: f[0] + f[1], "sub": lambda: f[0] - f[1],
             "mul": lambda: f[0] * f[1], "div": lambda: f[0] / f[1],
             "fma": lambda: f[0] * f[1] + f[2]}[op]()
    return float(r)


def ref_arith(op: str, fmt_name: str, mode: str | None, *xs) -> np.ndarray:
    """Lane-wise exact add/sub/mul/fma/div rounded once to the format."""
    fmt, mode = FORMATS[fmt_name], mode or "rn"
    out = []
    for vals in zip(*(np.asarray(x).astype(np.float64) for x in xs), strict=True):
        v = [float(x) for x in vals]
        if not all(math.isfinite(x) for x in v) or (op == "div" and v[1] == 0):
            out.append(_special_case(op, [np.float64(x) for x in v]))
            continue
        q = [exact(x) for x in v]
        if op in ("add", "sub"):
            y = v[1] if op == "add" else -v[1]
            val, neg = q[0] + exact(y), _sum_zero_is_negative(v[0], y, mode)
        elif op == "mul":
            val, neg = q[0] * q[1], signbit(v[0]) != signbit(v[1])
        elif op == "div":
            val, neg = q[0] / q[1], signbit(v[0]) != signbit(v[1])
        else:
            p = q[0] * q[1]
            p_sign = math.copysign(1.0, v[0]) * math.copysign(1.0, v[1])
            p_zero = math.copysign(0.0 if p == 0 else 1.0, p_sign)
            val, neg = p + q[2], _sum_zero_is_negative(p_zero, v[2], mode)
        out.append(round_exact(val, fmt, mode, negative_zero=neg))
    return np.array(out, dtype=np.float64).astype(fmt.dtype)


def flush(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(x.dtype).smallest_normal
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x).astype(x.dtype)


