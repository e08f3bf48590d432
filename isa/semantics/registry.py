"""The registry that maps an opcode-table name to its semantics function."""

from __future__ import annotations

SEMANTICS: dict = {}


def semantics(*names: str):
    """Register the decorated function as the semantics of the named opcodes."""
    def deco(fn):
        for n in names:
            if n in SEMANTICS:
                raise ValueError(f"semantics for '{n}' registered twice")
            SEMANTICS[n] = fn
        return fn
    return deco
