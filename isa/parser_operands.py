"""Operand parsing for `isa.parser`: registers, immediates, addresses, vectors, `d|p`.

`OperandParser` is a mixin of the parser class; it relies on the parser's token helpers
(`peek`, `next`, `at`, `expect`, `error`, `signed_int`, `int_value`) and resolves register
names through the stack of `{ }` scopes the parser keeps.
"""

from __future__ import annotations

import struct

from isa.ast import Addr, Imm, Neg, Pipe, Reg, Sink, Special, Sym, Vec
from isa.lexer import Token

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
        tok = self.peek()
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
            raise self.error(f"unexpected '{tok.text}' in operand", tok,
                             expected="a register, immediate, symbol, [address] or {vector}")
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
            return Imm(float(tok.text))
        if tok.kind in ("int", "hex"):
            return Imm(self.int_value(tok))
        raise self.error(f"expected an immediate, found '{tok.text}'", tok,
                         expected="an integer or float constant")

    def address(self, scopes) -> Addr | tuple:
        """`[base+off]`; a TMA tensor operand `[map, {coords}]` gives (Addr, Vec)."""
        self.expect("[")
        base = None
        offset = 0
        tok = self.peek()
        if tok.kind == "word":
            self.next()
            if tok.text.startswith("%"):
                base = self.lookup_reg(tok, scopes)
            else:
                base = self.find_reg(tok.text, scopes) or Sym(tok.text)
        elif tok.kind in ("int", "hex") or tok.text == "-":
            offset = self.signed_int()
        while self.at("+") or self.at("-"):
            sign = -1 if self.next().text == "-" else 1
            offset += sign * self.signed_int()
        if self.at(",") and base is not None:   # [tensorMap, {c0, c1, ...}] (TMA)
            self.next()
            coords = self.operand(scopes)
            self.expect("]", "']' closing the tensor address")
            return Addr(base, offset), coords
        self.expect("]", "']' closing the address")
        return Addr(base, offset)

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
        raise self.error(f"undeclared register '{tok.text}'", tok,
                         expected="a register declared with .reg in an enclosing scope")

    def lookup_var(self, tok: Token, scopes):
        for scope in reversed(scopes):
            r = scope.get(tok.text)
            if r is not None:
                return r
        raise self.error(f"undeclared name '{tok.text}' in call", tok,
                         expected="a .param variable declared in the call sequence")
