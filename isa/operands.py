"""Decoded operands: how an instruction reads and writes its values.

Each operand kind knows how to `read(m, ty, lanes)` a numpy array (or scalar) of
PTX type `ty` for the given lanes of machine `m`, and destinations know how to
`write(m, values, ty, lanes)`. Registers are raw bits in width files (`P`, `R16`,
`R32`, `R64`); a read of the register's own width is a view, other widths are
truncated or extended (sign-extended for signed types) as PTX's relaxed type rules
for `ld`/`st`/`cvt` require.
"""

from __future__ import annotations

import numpy as np

from isa.types import FILE_BITS, SINT_OF_BITS, UINT_OF_BITS, PtxType

FILE_IDS = {"P": 0, "R16": 1, "R32": 2, "R64": 3}


def to_bits(values, ty: PtxType, bits: int) -> np.ndarray:
    """Raw bits of `values` (typed `ty`) widened or truncated to `bits` wide unsigned."""
    v = np.asarray(values, dtype=ty.dtype)
    if ty.bits == bits:
        return v.view(UINT_OF_BITS[bits])
    raw = v.view(UINT_OF_BITS[max(ty.bits, 8)])
    if ty.bits < bits and ty.is_signed:
        return raw.view(SINT_OF_BITS[ty.bits]).astype(SINT_OF_BITS[bits]).view(UINT_OF_BITS[bits])
    return raw.astype(UINT_OF_BITS[bits])


def from_bits(raw: np.ndarray, bits: int, ty: PtxType) -> np.ndarray:
    """Interpret `bits`-wide raw register bits as type `ty` (truncate or extend)."""
    tb = max(ty.bits, 8)
    if tb == bits:
        return raw.view(ty.dtype)
    if tb < bits:
        return raw.astype(UINT_OF_BITS[tb]).view(ty.dtype)
    if ty.is_signed:
        return raw.view(SINT_OF_BITS[bits]).astype(ty.dtype)
    return raw.astype(UINT_OF_BITS[tb]).view(ty.dtype)


class DReg:
    __slots__ = ("fid", "index", "bits", "name")

    def __init__(self, file: str, index: int, name: str):
        self.fid = FILE_IDS[file]
        self.index = index
        self.bits = FILE_BITS[file]
        self.name = name

    def read(self, m, ty: PtxType, lanes):
        raw = m.files[self.fid][self.index, lanes]
        if self.fid == 0:
            return raw
        return from_bits(raw, self.bits, ty)

    def read_raw(self, m, lanes):
        return m.files[self.fid][self.index, lanes]

    def write(self, m, values, ty: PtxType, lanes) -> None:
        if self.fid == 0:
            m.files[0][self.index, lanes] = values
        elif max(ty.bits, 8) == self.bits and ty.kind != "pred":
            m.view(self.fid, ty.dtype)[self.index, lanes] = values
        else:
            m.files[self.fid][self.index, lanes] = to_bits(values, ty, self.bits)

    def write_raw(self, m, raw, lanes) -> None:
        m.files[self.fid][self.index, lanes] = raw

    def __repr__(self):
        return self.name


class DImm:
    __slots__ = ("value", "float_bits", "float_width", "_cache")

    def __init__(self, value, float_bits=None, float_width=0):
        self.value = value
        self.float_bits = float_bits
        self.float_width = float_width
        self._cache = {}

    def read(self, m, ty: PtxType, lanes=None):
        v = self._cache.get(ty.name)
        if v is None:
            v = self._cache[ty.name] = self.convert(ty)
        return v

    def convert(self, ty: PtxType):
        if ty.kind == "pred":
            return np.bool_(bool(self.value))
        if ty.kind == "f":
            if self.float_width == 32 and ty.bits == 32:
                return np.uint32(self.float_bits).view(np.float32)
            if self.float_width == 64 and ty.bits == 64:
                return np.uint64(self.float_bits).view(np.float64)
            return np.asarray(self.value, dtype=np.float64).astype(ty.dtype)[()]
        if self.float_width:   # float bit pattern used as raw bits of an integer type
            bits = self.float_bits
        else:
            if isinstance(self.value, float):
                bits = int(self.value)
            else:
                bits = int(self.value)
        width = max(ty.bits, 8) if ty.bits != 128 else 64
        bits &= (1 << width) - 1
        return np.asarray(bits, dtype=UINT_OF_BITS[width]).view(
            ty.dtype if ty.bits != 128 else np.uint64)[()]

    def __repr__(self):
        return repr(self.value)


class DSpecial:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def read(self, m, ty: PtxType, lanes):
        raw = m.special(self.name, lanes)
        return from_bits(raw, raw.dtype.itemsize * 8, ty) if raw.dtype.itemsize * 8 != max(
            ty.bits, 8) or raw.dtype != ty.dtype else raw

    def __repr__(self):
        return self.name


class DSym:
    """A variable's address used as a value (`mov.u32 %r, smem_array`)."""
    __slots__ = ("name", "space", "address")

    def __init__(self, name: str, space: str, address: int):
        self.name = name
        self.space = space
        self.address = address

    def read(self, m, ty: PtxType, lanes=None):
        return np.asarray(self.address, dtype=UINT_OF_BITS[max(ty.bits, 8)]).view(ty.dtype)[()]

    def __repr__(self):
        return self.name


class DAddr:
    """`[base+offset]` with a register, a symbol or nothing as base."""
    __slots__ = ("base", "offset", "space")

    def __init__(self, base, offset: int, space: str | None):
        self.base = base          # DReg | DSym | None
        self.offset = offset
        self.space = space        # the symbol's space when the base is a symbol

    def address(self, m, lanes) -> np.ndarray:
        """Addresses as int64 for the lanes (scalar-broadcast for symbol bases)."""
        if isinstance(self.base, DReg):
            raw = self.base.read_raw(m, lanes)
            if self.base.bits == 64:
                a = raw.view(np.int64)
            else:
                a = raw.astype(np.int64)
            return a + self.offset if self.offset else a
        base = self.base.address if self.base is not None else 0
        return np.full(m.nlanes(lanes), base + self.offset, dtype=np.int64)

    def __repr__(self):
        return f"[{self.base}+{self.offset}]"


class DVec:
    __slots__ = ("items",)

    def __init__(self, items):
        self.items = tuple(items)

    def __repr__(self):
        return "{" + ",".join(map(repr, self.items)) + "}"


class DLabel:
    __slots__ = ("name", "pc")

    def __init__(self, name: str, pc: int):
        self.name = name
        self.pc = pc


class DSink:
    __slots__ = ()

    def write(self, m, values, ty, lanes) -> None:
        return None

    def write_raw(self, m, raw, lanes) -> None:
        return None


class DNeg:
    __slots__ = ("reg",)

    def __init__(self, reg: DReg):
        self.reg = reg

    def read(self, m, ty, lanes):
        return ~self.reg.read(m, ty, lanes)


class DPipe:
    __slots__ = ("value", "pred")

    def __init__(self, value, pred):
        self.value = value
        self.pred = pred


def registers_of(op) -> list[DReg]:
    """The registers operand `op` names (a vector's items, an address's base register,
    both halves of a `p|q` pipe)."""
    if isinstance(op, DReg):
        return [op]
    if isinstance(op, DNeg):
        return [op.reg]
    if isinstance(op, DVec):
        return [r for item in op.items for r in registers_of(item)]
    if isinstance(op, DAddr) and isinstance(op.base, DReg):
        return [op.base]
    pipe_value = getattr(op, "value", None)
    pipe_pred = getattr(op, "pred", None)
    if isinstance(pipe_value, DReg) and isinstance(pipe_pred, DReg):
        return [pipe_value, pipe_pred]
    return []
