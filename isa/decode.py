"""Decode a parsed PTX entry (and the functions it calls) into a flat `Program`.

Decoding happens once per (module, entry): registers get indices in their width
files, variables get addresses in their state spaces, labels become instruction
indices (each defined once per function: the parser has already given the labels of
nested `{ }` blocks names of their own, so a repeated name here is two definitions in
the function's body, which ptxas refuses too), modifiers are
sorted into fields (types, rounding, comparison, space, vector width, flags) and
checked against the opcode table. The result runs on any launch shape. Errors are
`PtxError`s pointing at the offending line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from isa import ast
from isa.errors import PtxError, column_of
from isa.memory import KPARAM_BASE, TPARAM_BASE, GlobalLayout
from isa.opcodes import BOOL, CMP, IROUND, OPCODES, ROUND, SPACE, OpSpec, lookup
from isa.operands import DAddr, DImm, DLabel, DNeg, DPipe, DReg, DSink, DSpecial, DSym, DVec
from isa.semantics import SEMANTICS
from isa.types import TYPES, PtxType, reg_file_of

_SHAPE = re.compile(r"^m\d+n\d+k\d+$|^m8n8$|^m16n16$|^m8n16$|^m16n8$")


class DInstr:
    """One decoded instruction; fields are filled by `_decode_instruction`."""
    __slots__ = ("pc", "spec", "sem", "unit", "text", "loc", "types", "rnd", "space", "cmp",
                 "bop", "vec", "flags", "shape", "ops", "guard", "guard_neg", "target",
                 "in_entry", "call", "ret_map", "control", "opname")

    def ty(self, k: int = 0) -> PtxType:
        return self.types[k]

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def __repr__(self):
        return f"<{self.pc}: {self.text}>"


@dataclass
class Program:
    entry: str
    file: str
    instrs: list[DInstr]
    entry_pc: int
    nregs: dict[str, int]
    kparams: list[tuple[ast.VarDecl, int]]        # (declaration, byte offset)
    kparam_bytes: int
    shared_bytes: int                              # static shared memory per CTA
    local_bytes: int
    tparam_bytes: int
    global_layout: GlobalLayout
    module_globals: list = field(default_factory=list)   # (VarDecl, Buffer)
    regs_per_thread: int = 0
    funcs_params: dict = field(default_factory=dict)    # .func name -> [(address, bytes)]
    funcs_returns: dict = field(default_factory=dict)
    directives: dict = field(default_factory=dict)      # the entry's .maxntid/.reqntid ...
    reg_types: dict = field(default_factory=dict)       # (file id, index) -> declared type
    target: tuple[str, ...] = ()                        # the module's `.target` entries
    target_loc: ast.Loc | None = None                   # where `.target` is written
    entry_loc: ast.Loc | None = None                    # where the entry is declared


def _align(x: int, a: int) -> int:
    return -(-x // max(a, 1)) * max(a, 1)


class _Layout:
    def __init__(self, base: int = 0):
        self.top = base
        self.base = base
        self.slots: dict[str, tuple[int, int]] = {}

    def place(self, decl: ast.VarDecl) -> int:
        size = max(decl.size_bytes, 1)
        if decl.name in self.slots:
            off, old = self.slots[decl.name]
            if size <= old:
                return off
        off = _align(self.top, decl.align)
        self.slots[decl.name] = (off, size)
        self.top = off + size
        return off

    @property
    def size(self) -> int:
        return self.top - self.base


def decode(module: ast.Module, entry: str) -> Program:
    fn = module.functions.get(entry)
    if fn is None or not fn.is_entry:
        names = ", ".join(n for n, f in module.functions.items() if f.is_entry) or "none"
        what = f"'{entry}' is a .func, not an .entry" if fn is not None else \
            f"no .entry named '{entry}'"
        loc = fn.loc if fn is not None and fn.loc is not None else ast.Loc(module.file, 1, 1, "")
        raise PtxError(what, file=module.file, line=loc.line, col=loc.col, text=loc.text,
                       expected=f"one of: {names}")
    funcs = _reachable(module, fn)
    return _Decoder(module, funcs).run(entry)


def _reachable(module: ast.Module, entry: ast.Function) -> list[ast.Function]:
    order: list[ast.Function] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(f: ast.Function, via: ast.Instruction | None):
        st = state.get(f.name)
        if st == 1:
            cycle = " -> ".join(path[path.index(f.name):] + [f.name])
            raise PtxError(f"recursive call to '{f.name}' ({cycle}) is not supported",
                           file=via.loc.file, line=via.loc.line,
                           col=column_of(via.loc.text, f.name, via.loc.col), text=via.loc.text,
                           expected="a call graph without cycles")
        if st == 2:
            return
        state[f.name] = 1
        path.append(f.name)
        order.append(f)
        for ins in f.body:
            if isinstance(ins, ast.Instruction) and ins.opcode == "call":
                name = ins.call_args[1]
                callee = module.functions.get(name)
                if callee is None or not callee.has_body:
                    raise PtxError(f"call to undefined function '{name}'", file=ins.loc.file,
                                   line=ins.loc.line, col=column_of(ins.loc.text, name,
                                                                    ins.loc.col),
                                   text=ins.loc.text, expected="a .func defined in this module")
                visit(callee, ins)
        state[f.name] = 2
        path.pop()

    visit(entry, None)
    return order


class _Decoder:
    def __init__(self, module: ast.Module, funcs: list[ast.Function]):
        self.module = module
        self.funcs = funcs
        self.nregs = {"P": 0, "R16": 0, "R32": 0, "R64": 0}
        self.regmap: dict[tuple[str, int], DReg] = {}
        self.shared = _Layout()
        self.local = _Layout()
        self.tparam = _Layout()
        self.kparam = _Layout()
        self.glayout = GlobalLayout()
        self.module_syms: dict[str, DSym] = {}
        self.module_globals: list = []
        self.extern_shared: list[ast.VarDecl] = []
        self.reg_types: dict[tuple[int, int], str] = {}

    def run(self, entry: str) -> Program:
        self._module_vars()
        starts, fsyms = {}, {}
        pc = 0
        for f in self.funcs:
            starts[f.name] = pc
            pc += sum(1 for x in f.body if isinstance(x, ast.Instruction)) + 1  # + implicit ret
            for r in f.regs:
                file = reg_file_of(r.type)
                dreg = DReg(file, self.nregs[file], r.name)
                self.regmap[(f.name, r.uid)] = dreg
                self.reg_types[(dreg.fid, dreg.index)] = r.type
                self.nregs[file] += 1
            fsyms[f.name] = self._function_vars(f)
        static_shared = self.shared.top
        for d in self.extern_shared:
            self.module_syms[d.name] = DSym(d.name, "shared", _align(static_shared, d.align))
        kparams = [(p, self.kparam.slots[p.name][0]) for p in self.funcs[0].params]
        instrs: list[DInstr] = []
        for f in self.funcs:
            instrs.extend(self._function(f, starts, fsyms[f.name]))
        fparams = {f.name: [(fsyms[f.name][p.name].address, max(p.size_bytes, 1))
                            for p in f.params] for f in self.funcs[1:]}
        frets = {f.name: [(fsyms[f.name][p.name].address, max(p.size_bytes, 1))
                          for p in f.returns] for f in self.funcs[1:]}
        regs = self.nregs["R16"] // 2 + self.nregs["R32"] + 2 * self.nregs["R64"]
        return Program(entry=entry, file=self.module.file, instrs=instrs, entry_pc=0,
                       nregs=dict(self.nregs), kparams=kparams, kparam_bytes=self.kparam.top,
                       shared_bytes=_align(static_shared, 16), local_bytes=self.local.top,
                       tparam_bytes=self.tparam.top, global_layout=self.glayout,
                       module_globals=self.module_globals, regs_per_thread=regs,
                       funcs_params=fparams, funcs_returns=frets,
                       directives=dict(self.funcs[0].directives), reg_types=self.reg_types,
                       target=self.module.target, target_loc=self.module.target_loc,
                       entry_loc=self.funcs[0].loc)

    # -- symbols -------------------------------------------------------------------
    def _module_vars(self) -> None:
        for d in self.module.globals:
            if d.space == "shared":
                if d.extern or d.count == 0:
                    self.extern_shared.append(d)
                else:
                    self.module_syms[d.name] = DSym(d.name, "shared", self.shared.place(d))
            elif d.space in ("global", "const"):
                buf = self.glayout.allocate(d.name, max(d.size_bytes, 1), d.align)
                self.module_globals.append((d, buf))
                self.module_syms[d.name] = DSym(d.name, d.space, buf.start)
            else:
                raise PtxError(f"module-scope .{d.space} variable is not supported",
                               file=d.loc.file, line=d.loc.line, col=d.loc.col, text=d.loc.text,
                               expected=".global, .const or .shared")

    def _function_vars(self, f: ast.Function) -> dict[str, DSym]:
        syms = {}
        for p in f.params:
            if f.is_entry:
                syms[p.name] = DSym(p.name, "param", KPARAM_BASE + self.kparam.place(p))
            else:
                syms[p.name] = DSym(p.name, "param", TPARAM_BASE + self.tparam.place(
                    _renamed(p, f)))
        for p in f.returns:
            syms[p.name] = DSym(p.name, "param", TPARAM_BASE + self.tparam.place(_renamed(p, f)))
        for d in f.vars:
            if d.space == "shared":
                if d.extern or d.count == 0:
                    self.extern_shared.append(d)
                    continue
                syms[d.name] = DSym(d.name, "shared", self.shared.place(_renamed(d, f)))
            elif d.space == "local":
                syms[d.name] = DSym(d.name, "local", self.local.place(_renamed(d, f)))
            elif d.space == "param":
                syms[d.name] = DSym(d.name, "param",
                                    TPARAM_BASE + self.tparam.place(_renamed(d, f)))
            else:
                raise PtxError(f".{d.space} variable inside a function is not supported",
                               file=d.loc.file, line=d.loc.line, col=d.loc.col, text=d.loc.text,
                               expected=".reg, .shared, .local or .param")
        return syms

    # -- instructions --------------------------------------------------------------
    def _function(self, f: ast.Function, starts: dict, syms: dict) -> list[DInstr]:
        labels, pc = {}, starts[f.name]
        first: dict[str, ast.Label] = {}
        for x in f.body:
            if isinstance(x, ast.Label):
                if x.name in first:
                    raise _duplicate_label(x, first[x.name], f)
                first[x.name] = x
                labels[x.name] = pc
            else:
                pc += 1
        out = []
        pc = starts[f.name]
        for x in f.body:
            if isinstance(x, ast.Instruction):
                out.append(self._instruction(x, pc, f, labels, syms, starts))
                pc += 1
        ret = ast.Instruction("ret", (), (), None, False, f.loc or ast.Loc(self.module.file, 0, 0,
                                                                          ""))
        out.append(self._instruction(ret, pc, f, labels, syms, starts))
        return out

    def _err(self, ins: ast.Instruction, msg: str, expected: str = "",
             near: str = "") -> PtxError:
        """An error at `ins`, at the column of operand `near` when given."""
        col = column_of(ins.loc.text, near, ins.loc.col) if near else ins.loc.col
        return PtxError(msg, file=ins.loc.file, line=ins.loc.line, col=col,
                        text=ins.loc.text, expected=expected)

    def _instruction(self, x: ast.Instruction, pc, f, labels, syms, starts) -> DInstr:
        spec, rest = lookup(x.opcode, x.modifiers)
        if spec is None:
            raise self._err(x, f"unknown opcode '{'.'.join((x.opcode,) + x.modifiers)}'",
                            _choices("an opcode listed in isa.opcodes.TABLE", x.opcode,
                                     [k for k in OPCODES if "." not in k]))
        d = DInstr()
        d.pc, d.spec, d.loc = pc, spec, x.loc
        d.opname = spec.name
        d.text = ".".join((x.opcode,) + x.modifiers)
        d.sem = SEMANTICS.get(spec.name)
        if d.sem is None:
            raise self._err(x, f"opcode '{spec.name}' is not supported by the interpreter",
                            "an opcode with semantics in isa/semantics")
        self._modifiers(d, spec, rest, x)
        d.unit = _unit(spec, d.types)
        d.control = spec.control
        d.in_entry = f.is_entry
        d.target = -1
        d.call = None
        d.ret_map = None
        d.guard = self._reg(f, x.guard) if x.guard is not None else None
        d.guard_neg = x.guard_negated
        n = len(x.operands)
        lo, hi = spec.arity
        if not (lo <= n <= hi):
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise self._err(x, f"'{spec.name}' takes {want} operands, got {n}",
                            f"{want} operands")
        d.ops = tuple(self._operand(o, f, labels, syms, x, d) for o in x.operands)
        if spec.name == "bra":
            if not isinstance(d.ops[0], DLabel):
                raise self._err(x, "branch target must be a label", "bra LABEL",
                                _operand_text(x.operands[0]))
            d.target = d.ops[0].pc
        if spec.name == "call":
            rets, name, params = x.call_args
            d.call = (starts[name], [self._param_sym(p, syms, x) for p in rets],
                      [self._param_sym(p, syms, x) for p in params], name)
        return d

    def _param_sym(self, p, syms, x):
        s = syms.get(p.name)
        if s is None:
            raise self._err(x, f"call argument '{p.name}' is not a .param variable",
                            "a .param variable declared in the call sequence", p.name)
        return (s.address, max(p.size_bytes, 1))

    def _modifiers(self, d: DInstr, spec: OpSpec, mods, x) -> None:
        types, flags = [], set()
        d.rnd = d.space = d.cmp = d.bop = d.shape = None
        d.vec = 1
        for m in mods:
            if m in TYPES and m not in spec.mods:
                types.append(TYPES[m])
            elif m in ("v2", "v4", "v8") and spec.latency == "mem":
                d.vec = int(m[1:])
            elif m in SPACE and m in spec.mods:
                d.space = m.split("::")[0]
            elif m in (ROUND | IROUND) and m in spec.mods:
                d.rnd = m
            elif spec.name in ("setp", "set") and m in CMP and d.cmp is None:
                d.cmp = m
            elif spec.name in ("setp", "set") and m in BOOL:
                d.bop = m
            elif _SHAPE.match(m):
                d.shape = m
            elif m in spec.mods:
                flags.add(m)
            else:
                raise self._err(x, f"unknown modifier '.{m}' for '{spec.name}'",
                                "one of: " + ", ".join("." + s for s in sorted(spec.mods))
                                + " or a type")
        d.types = tuple(types)
        d.flags = frozenset(flags)

    def _reg(self, f, r: ast.Reg) -> DReg:
        return self.regmap[(f.name, r.uid)]

    def _operand(self, o, f, labels, syms, x, d):
        if isinstance(o, ast.Reg):
            return self._reg(f, o)
        if isinstance(o, ast.Imm):
            return DImm(o.value, o.float_bits, o.float_width)
        if isinstance(o, ast.Special):
            return DSpecial(o.name)
        if isinstance(o, ast.Sink):
            return DSink()
        if isinstance(o, ast.Neg):
            return DNeg(self._reg(f, o.inner))
        if isinstance(o, ast.Pipe):
            return DPipe(self._operand(o.value, f, labels, syms, x, d),
                         self._operand(o.pred, f, labels, syms, x, d))
        if isinstance(o, ast.Vec):
            return DVec(self._operand(i, f, labels, syms, x, d) for i in o.items)
        if isinstance(o, ast.Sym):
            if o.name in labels:
                return DLabel(o.name, labels[o.name])
            s = syms.get(o.name) or self.module_syms.get(o.name)
            if s is None and d.spec.name == "bra":
                raise self._err(x, f"undefined label '{o.name}' in function '{f.name}'",
                                _choices("a label of this function", o.name, labels), o.name)
            if s is None:
                known = list(syms) + list(self.module_syms) + list(labels)
                raise self._err(x, f"undefined symbol '{o.name}'",
                                _choices("a label, variable or parameter declared in scope",
                                         o.name, known), o.name)
            return s
        if isinstance(o, ast.Addr):
            if o.base is None:
                return DAddr(None, o.offset, None)
            if isinstance(o.base, ast.Reg):
                return DAddr(self._reg(f, o.base), o.offset, None)
            s = syms.get(o.base.name) or self.module_syms.get(o.base.name)
            if s is None:
                known = list(syms) + list(self.module_syms)
                raise self._err(x, f"undefined symbol '{o.base.name}' in address",
                                _choices("a variable or parameter declared in scope",
                                         o.base.name, known), o.base.name)
            return DAddr(s, o.offset, s.space)
        raise self._err(x, f"unsupported operand {o!r}")


def _duplicate_label(label: ast.Label, first: ast.Label, f: ast.Function) -> PtxError:
    """A label defined twice in a function's body: `ptxas` refuses it ("Duplicate
    definition of label"); labels of nested `{ }` blocks were renamed by the parser."""
    return PtxError(f"label '{label.name}' is defined twice in function '{f.name}' (first at "
                    f"line {first.loc.line}, column {first.loc.col})", file=label.loc.file,
                    line=label.loc.line, col=label.loc.col, text=label.loc.text,
                    expected="one definition of each label per function")


def _operand_text(o) -> str:
    """How a register, symbol or special register operand is written in the source."""
    return getattr(o, "name", "")


def _choices(what: str, name: str, known) -> str:
    """`what`, plus the closest known names when some are near `name`."""
    near = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    return f"{what} (did you mean {', '.join(near)}?)" if near else what


def _renamed(d: ast.VarDecl, f: ast.Function) -> ast.VarDecl:
    """Per-function slot names, so equal names in different functions do not share."""
    return ast.VarDecl(d.space, d.type, f"{f.name}::{d.name}", d.count, d.align, d.vec, d.init,
                       d.extern, d.loc)


def _unit(spec: OpSpec, types) -> str:
    if spec.unit != "arith":
        return spec.unit
    names = {t.name for t in types}
    if "f64" in names:
        return "fp64"
    if names & {"f16", "bf16", "f16x2", "bf16x2"} and not names & {"f32"}:
        return "fp16"
    if any(t.kind == "f" for t in types):
        return "fp32"
    return "int"
