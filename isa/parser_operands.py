"""Operand parsing for `isa.parser`: registers, immediates, addresses, vectors, `d|p`.

`OperandParser` is a mixin of the parser class; it relies on the parser's token helpers
(`peek`, `current`, `next`, `at`, `expect`, `error`, `signed_int`, `int_value`) and
resolves register names through the stack of `{ }` scopes the parser keeps.

Immediates are 64-bit integers (range checked by `int_value`) or finite f64 floats; an
address `[base+off]` keeps its byte offset within a signed 64-bit address
(`MIN_OFFSET`..`MAX_OFFSET`), as the interpreter computes addresses in int64.
"""

from __future__ import annotations

import math
import struct

from isa.ast import Addr, Imm, Neg, Pipe, Reg, Sink, Special, Sym, Vec
from isa.lexer import Token, shorten

MIN_OFFSET, MAX_OFFSET = -(1 << 63), (1 << 63) - 1
OPERAND_FORMS = "a register, immediate, symbol, [address] or {vector}"

SPECIAL_REGS = {
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
    "%gridid", "%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo",
    "%globaltimer_hi", "%lanemask_eq", "%lanemask_le", "%lanemask_lt", "%lanemask_ge",
    "%lanemask_gt", "%dynamic_smem_size", "%total_smem_size", "%aggr_smem_size",
    "%cluster_ctarank", "%cluster_nctarank", "%clusterid", "%nclusterid", "%cluster_ctaid",
    "%cluster_nctaid", "%is_explicit_cluster", "%envreg0", "%pm0",
}


class OperandParser:
    # -- operands ------------------------------------------------------------------
    def operand(self, scopes):
        tok = self.current(OPERAND_FORMS)
        if tok.text == "{":
            self.next()
            items = []
            while not self.at("}"):
                if self.at(","):
                    self.next()
                    continue
                items.append(self.simple_operand(scopes))
            self.next()
            return Vec(tuple(items))
        if tok.text == "[":
            return self.address(scopes)
        if tok.text == "!":
            self.next()
            return Neg(self.lookup_reg(self.next(), scopes))
        op = self.simple_operand(scopes)
        if self.at("|"):
            self.next()
            return Pipe(op, self.simple_operand(scopes))
        return op

    def simple_operand(self, scopes):
        tok = self.next()
        if tok.text == "-":
            nxt = self.next()
            imm = self.immediate(nxt)
            if imm.float_bits is not None:
                raise self.error("negated float bit pattern", nxt, expected="an immediate")
            return Imm(-imm.value)
        if tok.kind in ("int", "hex", "float", "fbits"):
            return self.immediate(tok)
        if tok.kind != "word":
            raise self.error(f"unexpected '{shorten(tok.text)}' in operand", tok,
                             expected=OPERAND_FORMS)
        if tok.text == "_":
            return Sink()
        if tok.text.startswith("%"):
            base = tok.text.split(".")[0]
            if base in SPECIAL_REGS:
                return Special(tok.text)
            return self.lookup_reg(tok, scopes)
        reg = self.find_reg(tok.text, scopes)
        return reg if reg is not None else Sym(tok.text)

    def immediate(self, tok: Token) -> Imm:
        if tok.kind == "fbits":
            bits = int(tok.text[2:], 16)
            if tok.text[1] in "fF":
                return Imm(struct.unpack("<f", struct.pack("<I", bits))[0], bits, 32)
            return Imm(struct.unpack("<d", struct.pack("<Q", bits))[0], bits, 64)
        if tok.kind == "float":
            value = float(tok.text)
            if math.isinf(value):
                raise self.error(f"float constant {shorten(tok.text)} overflows f64", tok,
                                 expected="a decimal float below 1.8e308 in magnitude, or "
                                 "0d7FF0000000000000 for infinity")
            return Imm(value)
        if tok.kind in ("int", "hex"):
            return Imm(self.int_value(tok))
        raise self.error(f"expected an immediate, found '{shorten(tok.text)}'", tok,
                         expected="an integer or float constant")

    def address(self, scopes) -> Addr | tuple:
        """`[base+off]`; a TMA tensor operand `[map, {coords}]` gives (Addr, Vec)."""
        self.expect("[")
        base = None
        offset = 0
        tok = self.current("a register, symbol or offset inside '[ ]'")
        if tok.kind == "word":
            self.next()
            if tok.text.startswith("%"):
                base = self.lookup_reg(tok, scopes)
            else:
                base = self.find_reg(tok.text, scopes) or Sym(tok.text)
        elif tok.kind in ("int", "hex") or tok.text == "-":
            offset = self.offset_term(1, offset)
        while self.at("+") or self.at("-"):
            sign = -1 if self.next().text == "-" else 1
            offset = self.offset_term(sign, offset)
        if self.at(",") and base is not None:   # [tensorMap, {c0, c1, ...}] (TMA)
            self.next()
            if not self.at("{"):
                raise self.error("tensor coordinates must be a {vector}",
                                 self.current("'{' opening the tensor coordinates"),
                                 expected="[tensorMap, {c0, c1, ...}]")
            coords = self.operand(scopes)
            self.expect("]", "']' closing the tensor address")
            return Addr(base, offset), coords
        self.expect("]", "']' closing the address")
        return Addr(base, offset)

    def offset_term(self, sign: int, offset: int) -> int:
        """`offset` plus the next signed integer times `sign`, kept within a 64-bit address."""
        tok = self.current("an integer byte offset")
        offset += sign * self.signed_int()
        if not MIN_OFFSET <= offset <= MAX_OFFSET:
            raise self.error(f"address offset {offset} does not fit a 64-bit address", tok,
                             expected=f"a byte offset from {MIN_OFFSET} to {MAX_OFFSET}")
        return offset

    @staticmethod
    def find_reg(name: str, scopes) -> Reg | None:
        for scope in reversed(scopes):
            r = scope.get(name)
            if r is not None:
                return r if isinstance(r, Reg) else None
        return None

    def lookup_reg(self, tok: Token, scopes) -> Reg:
        for scope in reversed(scopes):
            r = scope.get(tok.text)
            if isinstance(r, Reg):
                return r
        raise self.error(f"undeclared register '{shorten(tok.text)}'", tok,
                         expected="a register declared with .reg in an enclosing scope")

    def lookup_var(self, tok: Token, scopes):
        for scope in reversed(scopes):
            r = scope.get(tok.text)
            if r is not None:
                return r
        raise self.error(f"undeclared name '{shorten(tok.text)}' in call", tok,
                         expected="a .param variable declared in the call sequence")
