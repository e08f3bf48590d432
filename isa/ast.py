"""The parsed form of a PTX module: functions, declarations, instructions, operands.

Everything here is a frozen record with its source location (`Loc`), produced by
`isa.parser` and consumed by `isa.decode`. Register names are already resolved to
unique ids through nested `{ }` scopes, so two inline-asm blocks that both declare
`low` get distinct registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from isa.types import TYPES


@dataclass(frozen=True, slots=True)
class Loc:
    file: str
    line: int
    col: int
    text: str  # the whole source line


@dataclass(frozen=True, slots=True)
class Reg:
    uid: int          # unique within the function
    name: str         # as written
    type: str         # declared type name


@dataclass(frozen=True, slots=True)
class Special:
    name: str         # %tid.x, %laneid, %clock64 ...


@dataclass(frozen=True, slots=True)
class Imm:
    value: int | float
    float_bits: int | None = None   # bits of a 0f/0d literal
    float_width: int = 0            # 32 for 0f, 64 for 0d, 0 otherwise


@dataclass(frozen=True, slots=True)
class Sym:
    name: str         # variable, label or function name


@dataclass(frozen=True, slots=True)
class Addr:
    base: Reg | Sym | None
    offset: int


@dataclass(frozen=True, slots=True)
class Vec:
    items: tuple


@dataclass(frozen=True, slots=True)
class Neg:
    """`!%p` as an operand (predicate negation)."""
    inner: Reg


@dataclass(frozen=True, slots=True)
class Pipe:
    """`d|p`: a value destination and a predicate destination."""
    value: object
    pred: object


@dataclass(frozen=True, slots=True)
class Sink:
    """`_`: a discarded destination."""


@dataclass(frozen=True, slots=True)
class Instruction:
    opcode: str                 # base opcode, e.g. 'ld'
    modifiers: tuple[str, ...]  # e.g. ('global', 'nc', 'f32')
    operands: tuple
    guard: Reg | None
    guard_negated: bool
    loc: Loc
    call_args: tuple = ()       # call: (retvals, function, params)


@dataclass(frozen=True, slots=True)
class Label:
    name: str
    loc: Loc


@dataclass(frozen=True, slots=True)
class VarDecl:
    space: str                  # shared, local, global, const, param
    type: str
    name: str
    count: int                  # elements (1 for scalars; 0 for extern unsized arrays)
    align: int
    vec: int = 1
    init: tuple = ()            # initial values (numbers)
    extern: bool = False
    loc: Loc | None = None

    @property
    def size_bytes(self) -> int:
        return TYPES[self.type].nbytes * self.vec * self.count


@dataclass(slots=True)
class Function:
    name: str
    is_entry: bool
    params: list[VarDecl]
    returns: list[VarDecl]
    body: list                  # Instruction | Label
    regs: list[Reg] = field(default_factory=list)
    vars: list[VarDecl] = field(default_factory=list)   # shared/local/param in body
    has_body: bool = True
    loc: Loc | None = None
    directives: dict = field(default_factory=dict)      # .maxntid, .reqntid ...


@dataclass(slots=True)
class Module:
    file: str
    version: str = ""
    target: tuple[str, ...] = ()
    target_loc: Loc | None = None          # where `.target` is written
    address_size: int = 64
    functions: dict[str, Function] = field(default_factory=dict)
    globals: list[VarDecl] = field(default_factory=list)   # module-scope variables
