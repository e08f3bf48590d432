"""`ptxsim kernel`: run one PTX kernel on generated inputs and count its instructions.

The kernel runs functionally (`isa.run_kernel`) on inputs made from its parameter list
(the rule is in `INPUT_RULE`, which is also the command's `--help` epilog), and the
command prints warp- and thread-instruction totals, warp-instructions per unit class and
per opcode (with modifiers), as text or as one JSON object. With `--model PRESET` the
same inputs are also timed on that hardware preset (`simulator.simulate_kernel`) and
the cycles and microseconds are printed too, after the program is checked against the
preset's ISA target (`chip.isa_target`: an instruction the chip lacks is refused at its line
before anything runs, as `ptxas -arch=<target>` refuses it). Bad PTX, an impossible launch
or a fault while running is an `InputError`, printed by the CLI as one line with exit status 2.
Units: counts of instructions, bytes, cycles, microseconds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import isa
import models
import simulator
from isa.decode import decode
from isa.errors import InputError
from isa.parser import parse
from isa.schedule import hoist_loads
from isa.types import TYPES
from isa.verify import verify
from simulator.app.commands.models import seed_value
from simulator.app.progress import add_quiet_argument
from simulator.runner.simulate import check_isa_target

NAME = "kernel"
HELP = "run a PTX kernel functionally on generated inputs and count its instructions"

INPUT_RULE = """\
inputs, by parameter type (in parameter order):
  .u64/.b64 (pointers)  a float32 array of ELEMENTS values drawn uniformly from [-1, 1)
                        with numpy's default_rng(SEED), one array per pointer in order
  other integer types   ELEMENTS (a count), clipped to the type's range
  float types           1.0
  .b8 name[N]           N zero bytes (a by-value struct)
ELEMENTS is --elements, by default 4 per launched thread (grid x block threads x 4).
"""


def dims(text: str) -> tuple[int, int, int]:
    """`X`, `X,Y` or `X,Y,Z` -> a 3-tuple of positive ints (missing ones are 1)."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not X[,Y[,Z]] with integers") from None
    if not 1 <= len(values) <= 3 or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}' is not X[,Y[,Z]] with 1 to 3 positive "
                                         "integers")
    return values + (1,) * (3 - len(values))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """FILE, --entry, --grid, --block, --shared, --elements, --seed, --model, --json,
    --quiet."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = INPUT_RULE
    parser.add_argument("file", metavar="FILE.ptx", help="PTX file (as nvcc -ptx writes it)")
    parser.add_argument("--entry", metavar="NAME",
                        help="kernel entry; may be left out when the file has exactly one")
    parser.add_argument("--grid", type=dims, required=True, metavar="X[,Y[,Z]]",
                        help="CTAs per grid dimension")
    parser.add_argument("--block", type=dims, required=True, metavar="X[,Y[,Z]]",
                        help="threads per CTA dimension")
    parser.add_argument("--shared", type=int, default=0, metavar="BYTES",
                        help="dynamic shared memory per CTA in bytes (default 0)")
    parser.add_argument("--elements", type=int, default=None, metavar="N",
                        help="elements per pointer argument and value of integer arguments "
                        "(default: 4 x total threads)")
    parser.add_argument("--seed", type=seed_value, default=0, metavar="S",
                        help="seed of the random input arrays, 0 to 2**32 - 1 (default 0)")
    parser.add_argument("--model", metavar="PRESET",
                        help="also time the kernel on this hardware preset (see ptxsim models)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_argument(parser)


def simulates(args: argparse.Namespace) -> bool:
    """Only `--model` runs the timing model; counting instructions is functional."""
    return args.model is not None


def run(args: argparse.Namespace) -> int:
    """Compile, generate inputs, run (and time), print."""

    if args.elements is not None and args.elements < 1:
        raise InputError(f"--elements must be >= 1, got {args.elements}")
    config = models.load_preset(args.model) if args.model else None
    program = _compile(args.file, args.entry)
    if config is not None:             # the chip's ISA target, before anything runs
        check_isa_target(program, config)
    threads = int(np.prod(args.grid)) * int(np.prod(args.block))
    elements = args.elements if args.elements is not None else 4 * threads
    report = _functional(program, args, elements)
    if config is not None:
        report["timing"] = _timing(program, args, elements, config)
    print(json.dumps(report, indent=1) if args.json else _text(report))
    return 0


# -- steps ------------------------------------------------------------------------------
def _compile(file: str, entry: str | None):

    try:
        text = Path(file).read_bytes()   # the parser reports a non-UTF-8 byte where it is
    except OSError as exc:
        raise InputError(f"cannot read {file}: {exc.strerror}") from None
    module = parse(text, file)
    if entry is None:
        entries = [name for name, fn in module.functions.items() if fn.is_entry]
        if len(entries) != 1:
            raise InputError(f"{file}: give --entry NAME; the file has {len(entries)} entries"
                             + (f": {', '.join(entries)}" if entries else ""))
        entry = entries[0]
    program = decode(module, entry)
    verify(program)
    return hoist_loads(program)


def make_arguments(program, elements: int, seed: int) -> tuple[list, list[dict]]:
    """Kernel arguments by `INPUT_RULE`, and a description of each (name, kind, value)."""

    rng = np.random.default_rng(seed)
    args, described = [], []
    for decl, _ in program.kparams:
        ty = TYPES[decl.type]
        if decl.count > 1 or decl.vec > 1:
            args.append(np.zeros(decl.size_bytes, dtype=np.uint8))
            described.append({"name": decl.name, "kind": "bytes", "bytes": decl.size_bytes})
        elif ty.bits == 64 and ty.kind in ("u", "b"):
            args.append(rng.uniform(-1.0, 1.0, elements).astype(np.float32))
            described.append({"name": decl.name, "kind": "pointer", "dtype": "float32",
                              "elements": elements})
        elif ty.kind in ("f", "pk"):
            args.append(1.0)
            described.append({"name": decl.name, "kind": "scalar", "type": decl.type,
                              "value": 1.0})
        else:
            hi = (1 << (ty.bits - 1)) - 1 if ty.kind == "s" else (1 << ty.bits) - 1
            args.append(min(elements, hi))
            described.append({"name": decl.name, "kind": "scalar", "type": decl.type,
                              "value": min(elements, hi)})
    return args, described


def _functional(program, args, elements: int) -> dict:

    kernel_args, described = make_arguments(program, elements, args.seed)
    before = [a.copy() if isinstance(a, np.ndarray) else None for a in kernel_args]
    result = isa.run_kernel(program, program.entry, args.grid, args.block, kernel_args,
                            args.shared)
    for desc, old, new in zip(described, before, kernel_args, strict=True):
        if desc["kind"] == "pointer":
            desc["written"] = not np.array_equal(old, new, equal_nan=True)
    return {
        "file": args.file, "entry": program.entry,
        "grid": list(args.grid), "block": list(args.block), "shared_bytes": args.shared,
        "threads": int(np.prod(args.grid)) * int(np.prod(args.block)),
        "elements": elements, "seed": args.seed, "arguments": described,
        "warp_instructions": result.warp_instructions,
        "thread_instructions": result.thread_instructions,
        "by_unit": result.by_unit(), "by_opcode": result.by_opcode(),
    }


def _timing(program, args, elements: int, config) -> dict:

    kernel_args, _ = make_arguments(program, elements, args.seed)
    res = simulator.simulate_kernel(program, program.entry, args.grid, args.block, kernel_args,
                                    config=config, shared_bytes=args.shared)
    return {"model": args.model, "cycles": int(res.cycles), "time_us": float(res.time_us),
            "occupancy_limiter": res.occupancy_limiter}


# -- text output ----------------------------------------------------------------------------
def _describe(arg: dict) -> str:
    if arg["kind"] == "pointer":
        written = ", written" if arg.get("written") else ""
        return f"{arg['name']}: float32[{arg['elements']}]{written}"
    if arg["kind"] == "bytes":
        return f"{arg['name']}: {arg['bytes']} zero bytes"
    return f"{arg['name']} = {arg['value']} (.{arg['type']})"


def _counts(title: str, counts: dict, total: int) -> list[str]:
    width = max((len(k) for k in counts), default=0)
    lines = [title]
    for key, n in counts.items():
        lines.append(f"  {key:<{width}}  {n:>10}  {100.0 * n / max(total, 1):5.1f}%")
    return lines


def _text(r: dict) -> str:
    shape = lambda t: "x".join(map(str, t))   # noqa: E731
    lines = [f"kernel {r['entry']} ({r['file']})",
             f"launch grid {shape(r['grid'])}, block {shape(r['block'])}, {r['threads']} "
             f"threads, {r['shared_bytes']} B dynamic shared",
             "inputs (seed {}): {}".format(r["seed"], "; ".join(map(_describe,
                                                                     r["arguments"]))),
             f"warp instructions    {r['warp_instructions']:>10}",
             f"thread instructions  {r['thread_instructions']:>10}"]
    lines += _counts("warp instructions by unit:", r["by_unit"], r["warp_instructions"])
    lines += _counts("warp instructions by opcode:", r["by_opcode"], r["warp_instructions"])
    timing = r.get("timing")
    if timing:
        lines.append(f"timing on {timing['model']}: {timing['cycles']} cycles, "
                     f"{timing['time_us']:.3f} us (occupancy limited by "
                     f"{timing['occupancy_limiter']})")
    return "\n".join(lines)
