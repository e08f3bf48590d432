"""The verifier: rejects, before anything runs, programs the interpreter would mis-execute.

The interpreter keeps registers as raw bits and reads or writes them at whatever width
an instruction's type says, so a program that breaks PTX's operand rules would not
fail: it would silently truncate, extend or reinterpret. This module holds those rules
as data and checks every decoded instruction against them, raising a `PtxError` at the
instruction's line and column:

* `SIGNATURES`: the role of each operand position per opcode (destination of the
  instruction type's width, relaxed destination of at least that width for `ld`/`cvt`,
  double-width `.wide` destination, source, 32-bit source, predicate, address). Roles
  fix register widths, which operand kinds are allowed (a destination must be
  writable, special registers and variable names only feed `mov`/`cvt`/`cvta`), and
  the kind of an immediate (a float constant for a float type, an integer otherwise).
  Opcodes without a row (tensor-core and copy ops) are not checked here; tensor-core
  forms (shape, layout, types, fragment sizes) are checked by
  `isa.semantics.tensor.form_problem`, which knows what the interpreter implements.
* `EXTENSION_FORMS`: the form checks of our extension ops (`vmma`, ...), kept beside
  their semantics.
* Cache policies (`isa.semantics.cache_policy.form_problem`, kept beside their semantics):
  the `.L2::cache_hint` policy operand (the last; operand roles apply to the others),
  `.L1::`/`.L2::` qualifiers and what they combine with, `createpolicy`, `discard` and
  `applypriority` forms, each as ptxas enforces it.
* `CVT_ROUNDING`: which rounding modifiers `cvt` requires or forbids, by the kinds of
  its destination and source types.
* `SETP_COMPARISONS`: which comparisons a `setp` type accepts.
* Shape rules: a type is present where one is needed, guards are predicates, address
  registers are 32/64-bit integers, vector operands hold as many registers as `.vN`
  says, pack/unpack `mov` widths add up, barrier ids are 0..15 with thread counts in
  whole warps.
* Positions: an `[address]` stands exactly where the signature has `ADDR` (`st [a], b`,
  `ld d, [a]`, `atom d, [a], b`), nowhere else.
* Immediate ranges: an integer constant for an N-bit operand lies in -2^(N-1) .. 2^N - 1
  (negative values as two's complement, as nvcc writes `-1` for a `.u32`);
  `BIT_FIELD_OPERANDS` (bfe/bfi position and length) take 0..255.

The rules follow the PTX ISA's operand-size and type rules as `ptxas` (CUDA 13, sm_90)
enforces them; each one here was checked against what `ptxas` accepts. The immediate
range is stricter than `ptxas`, which refuses only integer constants beyond 64 bits
("Constant overflow", refused by the parser here) and silently takes a constant too wide
for its operand, with a value the PTX ISA does not define. Left out: register type
*kinds* beyond predicates (a `.b32` and an `.f32` register hold the same bits, so mixing
them cannot mis-execute), and half-precision immediates. Duplicate labels are refused
where labels are resolved (`isa.decode`).
"""

from __future__ import annotations

from isa.errors import PtxError, column_of, operand_column
from isa.opcodes import IROUND, ROUND
from isa.operands import DAddr, DImm, DLabel, DNeg, DPipe, DReg, DSink, DSpecial, DSym, DVec
from isa.semantics import cache_policy, vpcu, zce
from isa.semantics.tensor import form_problem
from isa.types import TYPES

# Operand roles. Widths compare a register's declared width with the instruction type's.
DST = "d"          # destination, exactly the type's width
DST_WIDE = "dw"    # destination, twice the type's width (.wide)
DST_RELAXED = "dr"  # destination at least the type's width (ld, cvt)
DST_32 = "d32"     # 32-bit destination whatever the type (popc, clz, bfind)
SRC = "s"          # source, exactly the type's width
SRC_WIDE = "sw"    # source, twice the type's width (mad.wide addend)
SRC_RELAXED = "sr"  # source at least the type's width (st value)
SRC_CVT = "sc"     # cvt source: at least the width of the second (source) type
SRC_32 = "u32"     # 32-bit integer source (shift amounts, lanes, masks, barrier ids)
PRED = "p"         # predicate register (a source may be negated: !%p)
ADDR = "a"         # [address]

_DESTINATIONS = {DST, DST_WIDE, DST_RELAXED, DST_32}

_BINARY = (DST, SRC, SRC)
_UNARY = (DST, SRC)

SIGNATURES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor",
                     "copysign"), _BINARY),
    **dict.fromkeys(("mad", "fma"), (DST, SRC, SRC, SRC)),
    **dict.fromkeys(("abs", "neg", "not", "cnot", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2",
                     "ex2", "tanh", "brev", "mov", "cvta"), _UNARY),
    **dict.fromkeys(("popc", "clz", "bfind"), (DST_32, SRC)),
    **dict.fromkeys(("shl", "shr"), (DST, SRC, SRC_32)),
    "setp": (PRED, SRC, SRC, PRED),
    "selp": (DST, SRC, SRC, PRED),
    "testp": (PRED, SRC),
    "cvt": (DST_RELAXED, SRC_CVT, SRC_CVT),
    "ld": (DST_RELAXED, ADDR),
    "ldu": (DST_RELAXED, ADDR),
    "st": (ADDR, SRC_RELAXED),
    "atom": (DST, ADDR, SRC, SRC),
    "red": (ADDR, SRC),
    "shfl": (DST, SRC, SRC_32, SRC_32, SRC_32),
    "vote": (DST, PRED, SRC_32),
    "activemask": (DST,),
    "bar": (SRC_32, SRC_32),
    "barrier": (SRC_32, SRC_32),
    "bar.warp.sync": (SRC_32,),
    "prmt": (DST, SRC, SRC, SRC),
    "bfe": (DST, SRC, SRC_32, SRC_32),
    "bfi": (DST, SRC, SRC, SRC_32, SRC_32),
    "shf": (DST, SRC, SRC, SRC_32),
    "lop3": (DST, SRC, SRC, SRC, SRC_32),
    "vpcu.setprec": (DST, SRC),
}
"""Operand roles by position; operands beyond a row's length are not checked."""

READS_SPECIAL_REGISTERS = frozenset({"mov", "cvt"})
READS_VARIABLE_ADDRESSES = frozenset({"mov", "cvta"})
NEEDS_TYPE = frozenset({"add", "sub", "mul", "mad", "fma", "div", "rem", "abs", "neg", "min",
                        "max", "and", "or", "xor", "not", "shl", "shr", "setp", "selp", "mov",
                        "ld", "st", "cvt", "atom", "red", "cvta", "shfl", "rcp", "sqrt", "rsqrt",
                        "ex2", "lg2", "sin", "cos"})
NEEDS_ADDRESS = frozenset({"ld", "ldu", "st", "atom", "red", "prefetch", "prefetchu",
                           "discard", "applypriority", "createpolicy.range",
                           "cp.async.bulk.prefetch"})
VECTOR_MEMORY = frozenset({"ld", "ldu", "st"})
VECTOR_OPERANDS = VECTOR_MEMORY | {"mov", "atom", "red"}
"""Opcodes of `SIGNATURES` whose operands may be `{vectors}` (mov packs and unpacks)."""
BIT_FIELD_OPERANDS = {"bfe": (2, 3), "bfi": (3, 4)}
"""Operand positions of the bit position and field length; `ptxas` takes immediates in
0..255 there ("value '4000' out of range, expected to be in range [0..255]")."""
BIT_FIELD_RANGE = (0, 255)
EXTENSION_FORMS = {"vmma": vpcu.form_problem, "zmma": zce.form_problem}
"""Form checks of our ISA extensions (isa/opcodes.py EXTENSIONS), by table name."""
CACHE_POLICY_FORMS = cache_policy.POLICY_OPS | {"createpolicy.fractional", "createpolicy.range"}
"""Opcodes whose cache-policy forms `isa.semantics.cache_policy.form_problem` checks."""

# cvt: (destination class, source class) -> (required roundings, allowed roundings).
# Classes: "i" integer/bit types, "f" floats, "pk" packed and 8-bit floats.
_FLOAT_ROUND = ".rn, .rz, .rm or .rp"
_INT_ROUND = ".rni, .rzi, .rmi or .rpi"
CVT_ROUNDING: dict[tuple[str, str], tuple[frozenset, frozenset]] = {
    ("i", "i"): (frozenset(), frozenset()),
    ("i", "f"): (IROUND, IROUND),
    ("f", "i"): (ROUND, ROUND),
    ("pk", "f"): (ROUND, ROUND),
    ("pk", "pk"): (ROUND, ROUND),
}
"""Rules for float-to-float conversions depend on the widths: see `_cvt_rounding`."""

_UNSIGNED_CMP = frozenset({"lo", "ls", "hi", "hs"})
_ORDERED_CMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
_FLOAT_ONLY_CMP = frozenset({"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"})
SETP_COMPARISONS: dict[str, frozenset] = {
    "b": frozenset({"eq", "ne"}),
    "u": _ORDERED_CMP | _UNSIGNED_CMP,
    "s": _ORDERED_CMP | _UNSIGNED_CMP,
    "f": _ORDERED_CMP | _FLOAT_ONLY_CMP,
}
"""Comparisons accepted by `setp`/`set` per type kind (`.b` types compare bits only)."""

_INT_KINDS = frozenset({"b", "u", "s"})


def verify(program) -> None:
    """Raise `PtxError` at the first instruction of `program` that breaks a rule."""
    for ins in program.instrs:
        _check(ins, program.reg_types)


def _err(ins, msg: str, expected: str = "", near: str = "", operand: int = -1) -> PtxError:
    """An error at `ins`, at the column of `near` (in operand `operand` when given) when
    it is written on the instruction's line."""
    col = column_of(ins.loc.text, near, ins.loc.col, operand) if near else ins.loc.col
    if near and col == ins.loc.col and operand >= 0:     # written otherwise (0x..., -x)
        col = operand_column(ins.loc.text, ins.loc.col, operand)
    return PtxError(msg, file=ins.loc.file, line=ins.loc.line, col=col, text=ins.loc.text,
                    expected=expected)


def _check(ins, reg_types) -> None:
    name = ins.spec.name
    if name in NEEDS_TYPE and not ins.types:
        raise _err(ins, f"'{ins.text}' lacks a type", f"a type modifier such as {name}.u32")
    if ins.guard is not None and ins.guard.fid != 0:
        raise _err(ins, f"guard '{ins.guard.name}' is not a predicate register",
                   "@%p or @!%p with a .pred register", ins.guard.name)
    if name == "cvt":
        _check_cvt(ins)
    if name in ("setp", "set"):
        _check_comparison(ins)
    if name in NEEDS_ADDRESS and not any(isinstance(o, DAddr) for o in ins.ops):
        raise _err(ins, f"'{ins.text}' needs an address operand", "[reg], [reg+imm] or [var]")
    if name in ("bar", "barrier"):
        _check_barrier(ins)
    if name in VECTOR_MEMORY:
        _check_vector_width(ins)
    for o in ins.ops:
        _check_shape(ins, o, reg_types)
    problem = form_problem(ins)
    if problem is None and name in EXTENSION_FORMS:
        problem = EXTENSION_FORMS[name](ins)
    if problem is None and name in CACHE_POLICY_FORMS:
        problem = cache_policy.form_problem(ins, reg_types)
    if problem is not None:
        raise _err(ins, *problem)
    roles = _signature(ins)
    operands = ins.ops[:-1] if cache_policy.CACHE_HINT in ins.flags else ins.ops
    for k, (role, op) in enumerate(zip(roles or (), operands, strict=False)):
        _check_address_position(ins, k, role, op, roles)
        _check_operand_kind(ins, k, role, op)
        if ins.types:
            _check_operand(ins, k, role, op, reg_types)
    if name in BIT_FIELD_OPERANDS:
        _check_bit_field(ins)


# -- instruction-level rules ------------------------------------------------------------
def _signature(ins) -> tuple[str, ...] | None:
    roles = SIGNATURES.get(ins.spec.name)
    if roles is None or not ins.has("wide"):
        return roles
    widened = (DST_WIDE,) + roles[1:]
    if ins.spec.name == "mad":
        widened = widened[:3] + (SRC_WIDE,)
    return widened


def _kind_class(ty) -> str:
    if ty.kind in _INT_KINDS:
        return "i"
    return "pk" if ty.kind == "pk" else "f"


def _cvt_rounding(d, s) -> tuple[frozenset, frozenset]:
    classes = (_kind_class(d), _kind_class(s))
    if classes in CVT_ROUNDING:
        return CVT_ROUNDING[classes]
    if classes == ("f", "f"):
        if d.bits < s.bits or d.name == "tf32":
            return ROUND, ROUND
        if d.bits == s.bits:
            return frozenset(), IROUND
        return frozenset(), ROUND      # widening is exact; a rounding is harmless
    return frozenset(), ROUND | IROUND


def _check_cvt(ins) -> None:
    if len(ins.types) != 2:
        raise _err(ins, f"'{ins.text}' needs a destination and a source type",
                   "cvt{.rnd}.dtype.atype, e.g. cvt.rn.f32.s32")
    d, s = ins.types
    required, allowed = _cvt_rounding(d, s)
    what = f"conversion from .{s.name} to .{d.name}"
    if ins.rnd is None and required:
        names = _INT_ROUND if required == IROUND else _FLOAT_ROUND
        if _kind_class(d) == "f" and _kind_class(s) == "f":
            what = f"narrowing float {what}"
        raise _err(ins, f"{what} without a rounding modifier", names)
    if ins.rnd is not None and ins.rnd not in allowed:
        names = (_INT_ROUND if allowed == IROUND else _FLOAT_ROUND if allowed == ROUND
                 else "no rounding modifier")
        raise _err(ins, f"rounding '.{ins.rnd}' is not allowed for a {what}", names)


def _check_comparison(ins) -> None:
    if ins.cmp is None:
        raise _err(ins, f"'{ins.text}' lacks a comparison", ".eq, .ne, .lt, .le, .gt, .ge ...")
    if not ins.types:
        return
    ty = ins.types[-1]
    accepted = SETP_COMPARISONS.get("f" if ty.kind in ("f", "pk") else ty.kind)
    if accepted is None:
        raise _err(ins, f"'{ins.text}' compares .{ty.name} values",
                   "a .bN, .uN, .sN or float type")
    if ins.cmp not in accepted:
        raise _err(ins, f"comparison '.{ins.cmp}' does not apply to .{ty.name}",
                   "one of: " + ", ".join("." + c for c in sorted(accepted)))


def _form(ins, roles) -> str:
    """How an instruction's operands are written, e.g. 'st.global.f32 [addr], a'."""
    names = iter("abcde")
    parts = ["[addr]" if r == ADDR else "d" if r in _DESTINATIONS else
             "p" if r == PRED else next(names) for r in roles]
    return f"{ins.text} {', '.join(parts)}"


def _check_address_position(ins, k: int, role: str, op, roles) -> None:
    """An `[address]` stands where the signature has ADDR, and only there."""
    if role == ADDR and not isinstance(op, DAddr):
        raise _err(ins, f"operand {k} of '{ins.text}' must be an [address]; the operands "
                   "look swapped", _form(ins, roles), _operand_name(op), k)
    if role in _DESTINATIONS and isinstance(op, DAddr):
        raise _err(ins, f"destination of '{ins.text}' is not writable",
                   f"a register, {{vector}}, d|p or _: {_form(ins, roles)}")
    if role != ADDR and isinstance(op, DAddr):
        raise _err(ins, f"operand {k} of '{ins.text}' is an [address] where a register or "
                   "value belongs", _form(ins, roles), "[", k)


def _check_operand_kind(ins, k: int, role: str, op) -> None:
    """A label only as a branch target, `_` only as a destination, a `{vector}` only where
    the instruction moves several registers (ld, st, mov packing, vector atomics)."""
    if isinstance(op, DLabel):
        raise _err(ins, f"label '{op.name}' used as operand {k} of '{ins.text}'",
                   f"a register or value (a label is a branch target: bra {op.name})",
                   op.name, k)
    if isinstance(op, DSink) and role not in _DESTINATIONS:
        raise _err(ins, f"'_' (a discarded result) used as source operand {k} of "
                   f"'{ins.text}'", "a register or value", "_", k)
    if isinstance(op, DVec) and ins.spec.name not in VECTOR_OPERANDS:
        raise _err(ins, f"operand {k} of '{ins.text}' is a {{vector}}", "one register or "
                   f"value per operand ({{vectors}} go with {', '.join(sorted(VECTOR_OPERANDS))})",
                   "{", k)


def _operand_name(op) -> str:
    if isinstance(op, DImm):
        return _imm_text(op)
    if isinstance(op, DNeg):
        return op.reg.name
    return getattr(op, "name", "")


def _check_bit_field(ins) -> None:
    lo, hi = BIT_FIELD_RANGE
    for k in BIT_FIELD_OPERANDS[ins.spec.name]:
        op = ins.ops[k] if k < len(ins.ops) else None
        if isinstance(op, DImm) and not op.float_width and not lo <= int(op.value) <= hi:
            what = "position" if k == BIT_FIELD_OPERANDS[ins.spec.name][0] else "length"
            raise _err(ins, f"bit-field {what} {op.value} of '{ins.text}' is out of range",
                       f"an immediate in {lo}..{hi}", _imm_text(op), k)


def _check_barrier(ins) -> None:
    ops = ins.ops
    if ops and isinstance(ops[0], DImm) and not 0 <= int(ops[0].value) <= 15:
        raise _err(ins, f"barrier id {ops[0].value} out of range", "a barrier id in 0..15",
                   str(ops[0].value))
    if len(ops) > 1 and isinstance(ops[1], DImm):
        count = int(ops[1].value)
        if count <= 0 or count % 32:
            raise _err(ins, f"barrier thread count {count} is not a positive multiple of 32",
                       "a thread count in whole warps (32, 64, ...)", str(count))


def _check_vector_width(ins) -> None:
    data = [o for o in ins.ops if not isinstance(o, DAddr)]
    if not data:
        return
    op = data[0]
    if isinstance(op, DVec) and len(op.items) != ins.vec:
        want = f"{{...}} with {ins.vec} registers" if ins.vec > 1 else \
            f"a scalar operand, or .v{len(op.items)} on the opcode"
        raise _err(ins, f"'{ins.text}' moves {ins.vec} element(s) per thread but the vector "
                   f"operand has {len(op.items)}", want)
    if not isinstance(op, DVec) and ins.vec > 1:
        raise _err(ins, f"'{ins.text}' needs a {{vector}} operand of {ins.vec} registers",
                   f"{{%r1, ..., %r{ins.vec}}}")


def _check_shape(ins, o, reg_types) -> None:
    if isinstance(o, DVec):
        for it in o.items:
            if not isinstance(it, (DReg, DImm, DSink)):
                raise _err(ins, "vector operand items must be registers or immediates",
                           "{%r1, %r2, ...}")
    elif isinstance(o, DPipe) and not (isinstance(o.pred, DSink) or
                                       isinstance(o.pred, DReg) and o.pred.fid == 0):
        raise _err(ins, "the second half of d|p must be a predicate register", "d|%p")
    elif isinstance(o, DAddr) and isinstance(o.base, DReg):
        bits, kind = _reg_width(o.base, reg_types), _reg_kind(o.base, reg_types)
        if bits not in (32, 64) or kind == "f":
            decl = reg_types.get((o.base.fid, o.base.index), f"{bits}-bit")
            raise _err(ins, f"address register '{o.base.name}' is .{decl}".replace("..", "."),
                       "a 32- or 64-bit integer register such as %rd1 or %r1", o.base.name)


# -- operand roles -------------------------------------------------------------------------
def _reg_width(reg: DReg, reg_types) -> int:
    """Declared width of a register (its file's width when the declaration is unknown)."""
    decl = reg_types.get((reg.fid, reg.index))
    return TYPES[decl].bits if decl is not None else reg.bits


def _reg_kind(reg: DReg, reg_types) -> str:
    decl = reg_types.get((reg.fid, reg.index))
    return TYPES[decl].kind if decl is not None else ("pred" if reg.fid == 0 else "b")


def _norm(bits: int) -> int:
    """Widths as registers hold them: 8-bit values sit in 16-bit registers."""
    return bits if bits in (1, 32, 64, 128) else max(bits, 16)


def _role_type(ins, role: str):
    return ins.types[1] if role == SRC_CVT and len(ins.types) > 1 else ins.types[0]


def _check_operand(ins, k: int, role: str, op, reg_types) -> None:
    if isinstance(op, DPipe):
        _check_operand(ins, k, role, op.value, reg_types)
        return
    if isinstance(op, DVec):
        _check_vector(ins, k, role, op, reg_types)
        return
    if role == ADDR:
        return
    if role in _DESTINATIONS or (role == PRED and k == 0):
        _check_destination(ins, op)
    if isinstance(op, DSpecial):
        if ins.spec.name not in READS_SPECIAL_REGISTERS:
            raise _err(ins, f"special register '{op.name}' used as an operand of "
                       f"'{ins.spec.name}'", f"mov.u32 %r, {op.name} first", op.name, k)
        return
    if isinstance(op, DSym):
        if ins.spec.name not in READS_VARIABLE_ADDRESSES:
            raise _err(ins, f"variable '{op.name}' used as a value in '{ins.spec.name}'",
                       f"a register (mov.u64 %rd, {op.name} gives its address) or [{op.name}]",
                       op.name, k)
        return
    ty = _role_type(ins, role)
    if isinstance(op, DImm):
        _check_immediate(ins, k, role, op, ty)
    elif isinstance(op, DNeg):
        if role != PRED and ty.kind != "pred":
            raise _err(ins, f"operand {k} of '{ins.text}' negates a predicate where a value is "
                       "expected", "a register or immediate", op.reg.name, k)
    elif isinstance(op, DReg):
        _check_width(ins, k, role, op, ty, reg_types)


def _check_destination(ins, op) -> None:
    if isinstance(op, (DImm, DSpecial, DSym, DLabel, DAddr, DNeg)):
        near = _imm_text(op) if isinstance(op, DImm) else getattr(op, "name", "")
        raise _err(ins, f"destination of '{ins.text}' is not writable",
                   "a register, {vector}, d|p or _", near)


def _want_bits(ins, role: str, ty) -> tuple[int, str]:
    """(width, relation) a register in `role` must have: '=' exact, '>=' at least."""
    if role in (DST_32, SRC_32):
        return 32, "="
    if role == PRED or ty.kind == "pred":
        return 1, "="
    if role in (DST_WIDE, SRC_WIDE):
        return 2 * ty.bits, "="
    if role in (DST_RELAXED, SRC_RELAXED, SRC_CVT):
        return _norm(ty.bits), ">="
    return _norm(ty.bits), "="


def _check_width(ins, k: int, role: str, reg: DReg, ty, reg_types) -> None:
    if ty.bits == 128 and role not in (PRED, DST_32, SRC_32):
        return
    want, rel = _want_bits(ins, role, ty)
    have = _norm(_reg_width(reg, reg_types))
    ok = have == want if rel == "=" or want == 1 else (have >= want and have != 1)
    if ok:
        return
    decl = reg_types.get((reg.fid, reg.index), f"b{have}")
    what = "destination" if role in _DESTINATIONS or (role == PRED and k == 0) else \
        f"operand {k}"
    if want == 1:
        need = "a .pred register"
    elif rel == "=":
        need = f"a {want}-bit register"
    else:
        need = f"a register of at least {want} bits"
    raise _err(ins, f"{what} '{reg.name}' of '{ins.text}' is .{decl}", need, reg.name, k)


def _check_vector(ins, k: int, role: str, vec: DVec, reg_types) -> None:
    if ins.spec.name == "mov":
        _check_pack(ins, vec, reg_types)
        return
    item_role = DST_RELAXED if role in _DESTINATIONS else SRC_RELAXED
    for it in vec.items:
        if isinstance(it, DReg):
            _check_width(ins, k, item_role, it, ins.types[0], reg_types)
        elif isinstance(it, DImm):
            if role in _DESTINATIONS:
                _check_destination(ins, it)
            _check_immediate(ins, k, SRC, it, ins.types[0])


def _check_pack(ins, vec: DVec, reg_types) -> None:
    """`mov.b32 {lo, hi}, %r` and `mov.b64 %rd, {a, b}`: equal parts summing to the type."""
    widths = {_norm(_reg_width(it, reg_types)) for it in vec.items if isinstance(it, DReg)}
    total = ins.types[0].bits
    part = total // max(len(vec.items), 1)
    if widths and (widths != {part} or part * len(vec.items) != total):
        raise _err(ins, f"'{ins.text}' packs {len(vec.items)} registers of "
                   f"{'/'.join(map(str, sorted(widths)))} bits into {total} bits",
                   f"{len(vec.items)} registers of {part} bits each")


def _check_immediate(ins, k: int, role: str, imm: DImm, ty) -> None:
    is_float = imm.float_width or isinstance(imm.value, float)
    if role in (SRC_32, DST_32):
        if is_float:
            raise _err(ins, f"operand {k} of '{ins.text}' is a float constant", "an integer",
                       _imm_text(imm), k)
        _check_integer_range(ins, k, imm, 32)
        return
    if not is_float and ty.kind in _INT_KINDS and ty.bits < 128:
        _check_integer_range(ins, k, imm, 2 * ty.bits if role in (DST_WIDE, SRC_WIDE)
                             else ty.bits)
    if ty.kind == "f" and ty.bits >= 32 and not is_float:
        raise _err(ins, f"integer constant {imm.value} used as a .{ty.name} operand",
                   f"a float constant such as 1.0 or 0f3F800000 for .{ty.name}", _imm_text(imm),
                   k)
    if ty.kind in ("u", "s") and is_float:
        raise _err(ins, f"float constant {_imm_text(imm)} used as a .{ty.name} operand",
                   f"an integer constant for .{ty.name}, or cvt from a float", _imm_text(imm),
                   k)
    if ty.kind == "b" and is_float and imm.float_width != ty.bits:
        raise _err(ins, f"float constant {_imm_text(imm)} used as a .{ty.name} operand",
                   f"an integer, or a {ty.bits}-bit float bit pattern "
                   f"({'0f' if ty.bits == 32 else '0d'}...) for .{ty.name}", _imm_text(imm),
                   k)


def _check_integer_range(ins, k: int, imm: DImm, bits: int) -> None:
    """An integer constant of an N-bit operand: -2^(N-1) .. 2^N - 1."""
    lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    if not lo <= int(imm.value) <= hi:
        raise _err(ins, f"integer constant {imm.value} does not fit the {bits}-bit operand {k} "
                   f"of '{ins.text}'", f"an integer from {lo} to {hi} ({hi:#x}); negative "
                   "values are two's complement", _imm_text(imm), k)


def _imm_text(imm: DImm) -> str:
    if imm.float_width == 32:
        return f"0f{imm.float_bits:08X}"
    if imm.float_width == 64:
        return f"0d{imm.float_bits:016X}"
    return repr(imm.value)
