"""`ptxsim opcodes`: the opcode table (name, operands, unit, latency class, modifiers)."""

from __future__ import annotations

import json

from isa.opcodes import EXTENSIONS, OPCODES
from isa.semantics import SEMANTICS

NAME = "opcodes"
HELP = "list the ISA's opcodes with their unit, latency class and accepted modifiers"


def simulates(args) -> bool:
    """Listing opcodes runs no simulation."""
    return False


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list")


def run(args) -> int:

    ext = {op.name for op in EXTENSIONS}
    rows = [{"opcode": op.name, "operands": list(op.arity), "unit": op.unit,
             "latency_class": op.latency, "modifiers": sorted(op.mods),
             "extension": op.name in ext, "runs": op.name in SEMANTICS}
            for op in sorted(OPCODES.values(), key=lambda o: o.name)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for r in rows:
        arity = r["operands"][0] if r["operands"][0] == r["operands"][1] else \
            f"{r['operands'][0]}-{r['operands'][1]}"
        flags = ("ext " if r["extension"] else "") + ("" if r["runs"] else "(no semantics)")
        print(f"{r['opcode']:<24} {arity!s:<4} {r['unit']:<7} {r['latency_class']:<7} {flags}")
    return 0
