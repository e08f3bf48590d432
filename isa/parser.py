"""Recursive-descent parser for the PTX that nvcc emits, plus our extensions.

Opcode-agnostic: an instruction is `[@[!]pred] opcode(.mod)* operands ;`; whether
the opcode and modifiers exist is checked by `isa.decode`/`isa.verify` against the
opcode table. Handles module directives (`.version/.target/.address_size`), linkage
(`.visible/.extern/.weak`), `.entry`/`.func` with `.param` lists (scalars, `.b8 n[N]`
aggregates, `.ptr .global .align N` attributes), variable declarations with
alignment, arrays and initializers, nested `{ }` scopes whose `.reg` names shadow
outer ones, labels (scoped by block as ptxas does: a nested block's labels are renamed
`name%scopeN` with the branches naming them, so inline asm may repeat a label), guards,
vector operands, `d|p` destinations, `[reg+imm]` addresses, float bit-pattern
immediates, `call` sequences, and ignores `.pragma`, `.loc`, `.file` and `.section` debug
blocks.

Errors are `PtxError`s at the offending token, or just past the last token where a
`;` or `}` is missing (a statement running into the next line lacks its `;`). The source
may be bytes (UTF-8, see `isa.lexer`). Limits that keep a malformed file from exhausting
the machine: integer constants fit 64 bits (`INT_BITS`), address offsets and variable
sizes fit a signed 64-bit byte address (`MAX_ADDRESS`), a function declares at most
`MAX_REGISTERS` virtual registers, and nested `{ }` scopes and initializers are walked
without recursion, to any depth.
"""

from __future__ import annotations

from dataclasses import replace

from isa.ast import (
    Function,
    Instruction,
    Label,
    Loc,
    Module,
    Reg,
    Sym,
    VarDecl,
)
from isa.errors import PtxError
from isa.lexer import Token, excerpt, shorten, tokenize
from isa.parser_operands import OperandParser
from isa.types import TYPES

_LINE_DIRECTIVES = {".version", ".target", ".address_size", ".file", ".loc"}
_SPACES = {".shared", ".local", ".global", ".const", ".param"}
_LINKAGE = {".visible", ".extern", ".weak", ".common"}
INT_BITS = 64
MAX_INT = (1 << INT_BITS) - 1
MAX_ADDRESS = (1 << 63) - 1  # bytes of a variable: addresses are signed 64-bit
MAX_REGISTERS = 1 << 17     # per function; nvcc's largest kernels declare a few thousand
_PERF_DIRECTIVES = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg",
                    ".noreturn", ".reqnctapercluster", ".explicitcluster", ".maxclusterrank",
                    ".pragma"}


def parse(text: str | bytes, file: str = "<ptx>") -> Module:
    """Parse PTX source (text, or UTF-8 bytes as read from a file) into a `Module`; raises
    `PtxError` with a location."""
    tokens, lines = tokenize(text, file)
    return _Parser(tokens, lines, file).module()


class _Parser(OperandParser):
    """Statements, declarations and functions; operands come from `OperandParser`."""

    def __init__(self, tokens: list[Token], lines: list[str], file: str):
        self.toks = tokens
        self.lines = lines
        self.file = file
        self.i = 0
        self.mod = Module(file=file)
        self._uid = 0
        self._fn_regs = 0
        self._scoped_labels = 0   # nested blocks whose labels were renamed

    # -- token helpers -------------------------------------------------------------
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.end_error("unexpected end of input", "more PTX")
        self.i += 1
        return tok

    def current(self, expected: str) -> Token:
        """The next token, not consumed; the end of the input is an error naming what was
        `expected` there."""
        tok = self.peek()
        if tok is None:
            raise self.end_error("unexpected end of input", expected)
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.text == text

    def expect(self, text: str, what: str | None = None) -> Token:
        tok = self.next()
        if tok.text != text:
            raise self.error(f"expected '{text}'", tok, expected=what or f"'{text}'")
        return tok

    def loc(self, tok: Token) -> Loc:
        line_text = self.lines[tok.line - 1] if 0 < tok.line <= len(self.lines) else ""
        return Loc(self.file, tok.line, tok.col, line_text)

    def error(self, msg: str, tok: Token, expected: str = "") -> PtxError:
        line_text = self.lines[tok.line - 1] if 0 < tok.line <= len(self.lines) else tok.text
        return PtxError(msg, file=self.file, line=tok.line, col=tok.col,
                        text=excerpt(line_text, tok.col), expected=expected)

    def after_error(self, msg: str, tok: Token, expected: str = "") -> PtxError:
        """An error located just after `tok` (where a missing token belongs)."""
        line_text = self.lines[tok.line - 1] if 0 < tok.line <= len(self.lines) else tok.text
        col = tok.col + len(tok.text)
        return PtxError(msg, file=self.file, line=tok.line, col=col,
                        text=excerpt(line_text, col), expected=expected)

    def end_error(self, msg: str, expected: str) -> PtxError:
        """An error at the end of the input."""
        if not self.toks:
            return PtxError(msg, file=self.file, line=1, col=1, expected=expected)
        return self.after_error(msg, self.toks[-1], expected)

    def skip_line(self, line: int) -> list[Token]:
        out = []
        while (t := self.peek()) is not None and t.line == line:
            out.append(self.next())
        return out

    def int_value(self, tok: Token) -> int:
        """The value of an integer token, at most `INT_BITS` wide (a longer literal is an
        error before it is converted)."""
        if tok.kind not in ("int", "hex"):
            raise self.error("expected an integer", tok, expected="an integer constant")
        literal = tok.text.rstrip("U")
        hexadecimal = tok.kind == "hex"
        digits = (literal[2:] if hexadecimal else literal).lstrip("0")
        fits = len(digits) <= (INT_BITS // 4 if hexadecimal else len(str(MAX_INT)))
        value = int(digits or "0", 16 if hexadecimal else 10) if fits else MAX_INT + 1
        if value > MAX_INT:
            raise self.error(f"integer constant {shorten(tok.text)} does not fit in "
                             f"{INT_BITS} bits", tok, expected=f"an integer from 0 to "
                             f"{MAX_INT} (0x{MAX_INT:X}), optionally negated")
        return value

    def signed_int(self) -> int:
        sign = -1 if self.at("-") and self.next() else 1
        return sign * self.int_value(self.next())

    # -- module level --------------------------------------------------------------
    def module(self) -> Module:
        while (tok := self.peek()) is not None:
            self.top_level(tok)
        return self.mod

    def top_level(self, tok: Token) -> None:
        text = tok.text
        if text in _LINE_DIRECTIVES:
            rest = self.skip_line(tok.line)[1:]
            if text == ".version":
                self.mod.version = "".join(t.text for t in rest)
            elif text == ".target":
                self.mod.target = tuple(t.text for t in rest if t.text != ",")
                self.mod.target_loc = self.loc(tok)
            elif text == ".address_size":
                self.mod.address_size = self.int_value(rest[0]) if rest else 64
            return
        if text == ".section":
            self.skip_section()
            return
        if text == ".pragma":
            self.skip_statement()
            return
        linkage = set()
        while (t := self.peek()) is not None and t.text in _LINKAGE:
            linkage.add(self.next().text)
        t = self.peek()
        if t is None:
            raise self.error("declaration expected after linkage", tok)
        if t.text in (".entry", ".func"):
            self.function(linkage)
        elif t.text in _SPACES or t.text == ".tex":
            for decl in self.var_decl(extern=".extern" in linkage):
                self.mod.globals.append(decl)
        else:
            raise self.error(f"unknown module-level statement '{shorten(t.text)}'", t,
                             expected=".version, .target, .address_size, .entry, .func, "
                             "a .global/.const/.shared variable, or .file/.section")

    def skip_section(self) -> None:
        self.next()
        while not self.at("{"):
            self.next()
        self.skip_braces()

    def skip_braces(self) -> None:
        depth = 0
        while True:
            t = self.next()
            if t.text == "{":
                depth += 1
            elif t.text == "}":
                depth -= 1
                if depth == 0:
                    return

    def skip_statement(self) -> None:
        while self.next().text != ";":
            pass

    # -- functions -----------------------------------------------------------------
    def function(self, linkage: set[str]) -> None:
        kind = self.next()
        is_entry = kind.text == ".entry"
        returns: list[VarDecl] = []
        if not is_entry and self.at("("):
            returns = self.param_list()
        name_tok = self.next()
        if name_tok.kind != "word":
            raise self.error("expected a function name", name_tok, expected="an identifier")
        params = self.param_list() if self.at("(") else []
        fn = Function(name=name_tok.text, is_entry=is_entry, params=params, returns=returns,
                      body=[], loc=self.loc(name_tok))
        while (t := self.peek()) is not None and t.text in _PERF_DIRECTIVES:
            d = self.next().text
            vals = []
            while (v := self.peek()) is not None and v.kind in ("int", "hex", "string") or \
                    (v is not None and v.text == ","):
                tok = self.next()
                if tok.kind in ("int", "hex"):
                    vals.append(self.int_value(tok))
            if self.at(";"):
                self.next()
            fn.directives[d] = tuple(vals)
        if self.at(";"):
            self.next()
            fn.has_body = False
            self.mod.functions.setdefault(fn.name, fn)
            return
        first = self.mod.functions.get(fn.name)
        if first is not None and first.has_body:
            raise self.error(f"function '{fn.name}' defined twice (first at line "
                             f"{first.loc.line})", name_tok,
                             expected="one definition per function name")
        self.mod.functions[fn.name] = fn
        self._fn_regs = 0
        scopes = [{}]
        for p in params + returns:
            scopes[0][p.name] = p
        self.block(fn, scopes, self.expect("{", "'{' opening the function body"))

    def param_list(self) -> list[VarDecl]:
        self.expect("(")
        params: list[VarDecl] = []
        while not self.at(")"):
            if self.at(","):
                self.next()
                continue
            start = self.current("a parameter declaration or ')'")
            if start.text not in (".param", ".reg"):
                raise self.error("expected a parameter declaration", start,
                                 expected=".param .TYPE name")
            params.extend(self.var_decl(statement=False))
        self.next()
        return params

    def var_decl(self, extern: bool = False, statement: bool = True) -> list[VarDecl]:
        """`.space [.align N] [.vN] .type [.ptr [.space] [.align N]] name[N][= init] {, name}`

        A statement (module or body scope) ends with ';'; a parameter does not. The
        `.align` of a `.ptr` attribute is the pointee's alignment, not the parameter's.
        """
        space_tok = self.next()
        space = space_tok.text[1:]
        align, vec, type_name, pointer = 0, 1, None, False
        while (t := self.peek()) is not None and t.kind == "word" and t.text.startswith("."):
            w = self.next().text
            if w == ".align":
                value = self.int_value(self.next())
                align = align if pointer else value
            elif w in (".v2", ".v4", ".v8"):
                vec = int(w[2:])
            elif w == ".ptr":
                pointer = True
            elif w in (".global", ".shared", ".const", ".local"):
                continue
            elif w[1:] in TYPES:
                type_name = w[1:]
            else:
                raise self.error(f"unknown declaration qualifier '{shorten(w)}'", t,
                                 expected=".align N, .v2/.v4, .ptr or a type such as .b32")
        if type_name is None:
            raise self.error("declaration without a type", space_tok,
                             expected="a type such as .u32, .f32 or .b8")
        decls = []
        while True:
            name_tok = self.next()
            if name_tok.kind != "word":
                raise self.error("expected a variable name", name_tok, expected="an identifier")
            count, unsized = 1, False
            while self.at("["):
                self.next()
                if self.at("]"):
                    unsized = True
                    count = 0
                else:
                    size_tok = self.next()
                    count *= self.int_value(size_tok)
                    if count * TYPES[type_name].nbytes * vec > MAX_ADDRESS:
                        raise self.error(f"array '{shorten(name_tok.text)}' of {count} "
                                         f".{type_name} elements does not fit a 64-bit "
                                         "address space", size_tok,
                                         expected=f"at most {MAX_ADDRESS} bytes")
                self.expect("]")
            init = self.initializer() if self.at("=") else ()
            if unsized and init:
                count = len(init)
            decls.append(VarDecl(space=space, type=type_name, name=name_tok.text, count=count,
                                 align=align or TYPES[type_name].nbytes * vec, vec=vec,
                                 init=init, extern=extern or unsized, loc=self.loc(name_tok)))
            if self.at(","):
                self.next()
                nxt = self.peek()
                if nxt is not None and nxt.text.startswith("."):
                    break   # next parameter in a param list
                continue
            break
        if statement:
            tok = self.peek()
            if tok is None or tok.text != ";":
                raise self.after_error(f"missing ';' after the declaration of "
                                       f"'{decls[-1].name}'", self.toks[self.i - 1],
                                       expected="';' ending the declaration")
            self.next()
        return decls

    def initializer(self) -> tuple:
        """`= value` or `= {items}` with nested braces, flattened in order (walked with a
        depth counter, not recursion)."""
        self.expect("=")
        vals: list = []
        depth = 0
        while True:
            tok = self.next()
            if tok.text == "{":
                depth += 1
            elif tok.text == "}" and depth:
                depth -= 1
            elif tok.text == "," and depth:
                pass
            elif tok.text == "-":
                vals.append(-self.immediate(self.next()).value)
            else:
                vals.append(self.immediate(tok).value)
            if depth == 0:
                return tuple(vals)

    # -- bodies --------------------------------------------------------------------
    def block(self, fn: Function, scopes: list[dict], opened: Token) -> None:
        """Parse statements until the '}' matching `opened`; a nested '{' opens a scope
        (kept on `scopes` and on a stack of the braces still open, so nesting depth costs
        no recursion)."""
        open_braces = [opened]
        levels = [(len(fn.body), set())]   # per open block: first body index, its labels
        while True:
            tok = self.peek()
            if tok is None:
                what = "body of function" if len(open_braces) == 1 else \
                    "'{' scope in function"
                inner = open_braces[-1]
                raise self.end_error(f"{what} '{fn.name}' is not closed",
                                     f"'}}' matching the '{{' at line {inner.line}, "
                                     f"column {inner.col}")
            text = tok.text
            if text == "}":
                self.next()
                open_braces.pop()
                start, names = levels.pop()
                if not open_braces:
                    return
                self.scope_labels(fn, start, names)
                scopes.pop()
            elif text == "{":
                scopes.append({})
                open_braces.append(self.next())
                levels.append((len(fn.body), set()))
            elif text == ".reg":
                self.reg_decl(fn, scopes)
            elif text in (".shared", ".local", ".param", ".global", ".const"):
                for d in self.var_decl():
                    fn.vars.append(d)
                    scopes[-1][d.name] = d
            elif text in (".loc", ".file"):
                self.skip_line(tok.line)
            elif text == ".pragma":
                self.skip_statement()
            elif tok.kind == "word" and self.peek(1) is not None and self.peek(1).text == ":" \
                    and not text.startswith("%"):
                self.next()
                self.next()
                if len(levels) > 1 and text in levels[-1][1]:   # the body's: isa.decode
                    label = next(x for x in fn.body[levels[-1][0]:]
                                 if isinstance(x, Label) and x.name == text)
                    raise self.error(f"label '{text}' is defined twice in one block (first "
                                     f"at line {label.loc.line}, column {label.loc.col})",
                                     tok, "one definition of each label per { } block")
                levels[-1][1].add(text)
                fn.body.append(Label(text, self.loc(tok)))
            else:
                fn.body.append(self.instruction(scopes))

    def scope_labels(self, fn: Function, start: int, names: set[str]) -> None:
        """Give the labels a closed nested `{ }` block defined names of their own (as ptxas
        scopes labels by block, and inline asm repeats them): from body index `start` on,
        each such label and every branch target naming it (inner blocks' own labels were
        renamed when they closed) becomes `name%scopeN`, unique in the function."""
        if not names:
            return
        self._scoped_labels += 1
        renamed = {n: f"{n}%scope{self._scoped_labels}" for n in names}
        for i in range(start, len(fn.body)):
            x = fn.body[i]
            if isinstance(x, Label):
                if x.name in renamed:
                    fn.body[i] = replace(x, name=renamed[x.name])
            elif any(isinstance(o, Sym) and o.name in renamed for o in x.operands):
                fn.body[i] = replace(x, operands=tuple(
                    Sym(renamed[o.name]) if isinstance(o, Sym) and o.name in renamed else o
                    for o in x.operands))

    def reg_decl(self, fn: Function, scopes: list[dict]) -> None:
        start = self.next()
        vec = 1
        type_name = None
        while (t := self.peek()) is not None and t.kind == "word" and t.text.startswith("."):
            w = self.next().text
            if w in (".v2", ".v4"):
                vec = int(w[2:])
            elif w[1:] in TYPES:
                type_name = w[1:]
            else:
                raise self.error(f"unknown register type '{shorten(w)}'", t,
                                 expected="a type such as .b32")
        if type_name is None:
            raise self.error("register declaration without a type", start, expected=".reg .TYPE")
        if vec != 1:
            raise self.error("vector registers are not supported", start,
                             expected="scalar .reg declarations")
        while True:
            name_tok = self.next()
            if name_tok.kind != "word":
                raise self.error("expected a register name", name_tok, expected="%name")
            names = [name_tok.text]
            if self.at("<"):
                self.next()
                count_tok = self.next()
                n = self.int_value(count_tok)
                if self._fn_regs + n > MAX_REGISTERS:
                    raise self.error(f"'{name_tok.text}<{n}>' declares {n} registers, "
                                     f"{self._fn_regs} are already declared", count_tok,
                                     expected=f"at most {MAX_REGISTERS} virtual registers "
                                     "per function")
                self.expect(">")
                names = [f"{name_tok.text}{k}" for k in range(n)]
            self._fn_regs += len(names)
            for nm in names:
                reg = Reg(self._uid, nm, type_name)
                self._uid += 1
                fn.regs.append(reg)
                scopes[-1][nm] = reg
            if self.at(","):
                self.next()
                continue
            break
        self.expect(";", "';' after a .reg declaration")

    def instruction(self, scopes: list[dict]) -> Instruction:
        first = self.peek()
        guard, negated = None, False
        if self.at("@"):
            self.next()
            if self.at("!"):
                self.next()
                negated = True
            gtok = self.next()
            guard = self.lookup_reg(gtok, scopes)
        op_tok = self.next()
        if op_tok.kind == "word" and op_tok.text.startswith(".") and guard is None:
            raise self.error(f"unknown directive '{shorten(op_tok.text)}' in a function body",
                             op_tok, expected=".reg, .shared, .local, .param, .pragma, .loc, "
                             "a label or an instruction")
        if op_tok.kind != "word" or op_tok.text.startswith((".", "%")):
            raise self.error(f"expected an opcode, found '{shorten(op_tok.text)}'", op_tok,
                             expected="an instruction such as add.s32 or a directive")
        parts = op_tok.text.split(".")
        opcode, mods = parts[0], tuple(parts[1:])
        if opcode == "call":
            return self.call(op_tok, mods, guard, negated, scopes)
        operands = []
        while not self.at(";"):
            self.operand_separator(op_tok, bool(operands))
            op = self.operand(scopes)
            if isinstance(op, tuple):      # [tensorMap, {coords}]: two operands
                operands.extend(op)
            else:
                operands.append(op)
        self.next()
        return Instruction(opcode, mods, tuple(operands), guard, negated, self.loc(first or op_tok))

    def operand_separator(self, op_tok: Token, after_operand: bool) -> None:
        """Consume the ',' before an operand; a statement running into the next line
        without ';' is reported where the ';' is missing."""
        tok = self.peek()
        prev = self.toks[self.i - 1]
        if tok is None:
            raise self.end_error(f"missing ';' after '{shorten(op_tok.text)}'", "';' ending the "
                                 "instruction")
        if tok.line > prev.line and prev.text != "," and tok.text not in (",", "[", "{", "|"):
            raise self.after_error(f"missing ';' after '{shorten(op_tok.text)}'", prev,
                                   expected="';' ending the instruction")
        if after_operand:
            if tok.text != ",":
                raise self.error(f"expected ',' or ';' after an operand, found "
                                 f"'{shorten(tok.text)}'",
                                 tok, expected="',' between operands or ';'")
            self.next()

    def call(self, op_tok, mods, guard, negated, scopes) -> Instruction:
        rets: list = []
        if self.at("("):
            rets = self.name_list(scopes)
            self.expect(",")
        fn_tok = self.next()
        params: list = []
        if self.at(","):
            self.next()
            if self.at("("):
                params = self.name_list(scopes)
            else:
                raise self.error("indirect calls are not supported",
                                 self.current("'(' opening the call's parameters"),
                                 expected="call (rets), func, (params)")
        self.expect(";", "';' ending the call")
        return Instruction("call", mods, (), guard, negated, self.loc(op_tok),
                           call_args=(tuple(rets), fn_tok.text, tuple(params)))

    def name_list(self, scopes) -> list:
        self.expect("(")
        out = []
        while not self.at(")"):
            if self.at(","):
                self.next()
                continue
            tok = self.next()
            out.append(self.lookup_var(tok, scopes))
        self.next()
        return out
