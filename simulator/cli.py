"""The `ptxsim` command line: one subcommand per module in `simulator/commands/`.

Each command module defines `NAME`, `HELP`, `add_arguments(parser)` and
`run(args) -> int`. Errors that carry a location (`isa.PtxError`, config errors)
are printed as one line on stderr with exit status 2; nothing is half-written.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

import simulator.commands as _commands
from isa.errors import InputError


def _command_modules():
    for info in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"simulator.commands.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptxsim", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except InputError as exc:
        print(f"ptxsim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # output piped into a reader that stopped (`| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
