"""The `ptxsim` command line: one subcommand per module in `simulator/app/commands/`.

Each command module defines `NAME`, `HELP`, `add_arguments(parser)` and
`run(args) -> int`, and may define `simulates(args) -> bool` (default: true), which says
whether the command will run the timing model. Errors that carry a location
(`isa.PtxError`, config errors) are printed as one line on stderr with exit status 2;
nothing is half-written. `ptxsim` alone prints the help (exit 0), `ptxsim --version` the
installed package's version; Ctrl-C anywhere ends the command with one line on stderr and
exit status 130 (128 + SIGINT), as shells expect. In a command that simulates, one line on
stderr says so when numba is about to compile the simulator's kernels (logged by
`models.jit_cache.ensure_fresh` just before compiled code first loads, so a command
refused on its input says nothing of it), unless the command was given `--quiet`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import logging
import os
import pkgutil
import sys

import simulator.app.commands as _commands
from isa.errors import InputError
from models import jit_cache

DESCRIPTION = "ptxsim: a cycle-approximate GPU simulator running PTX kernels, ops and layers"
INTERRUPTED_STATUS = 130   # 128 + SIGINT, what a shell reports for a Ctrl-C'd program


def _command_modules():
    for info in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"simulator.app.commands.{info.name}")


def version() -> str:
    """The installed ptxsim distribution's version ("unknown" when not installed)."""
    try:
        return importlib.metadata.version("ptxsim")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptxsim", description=DESCRIPTION,
                                     epilog="`ptxsim COMMAND --help` lists a command's flags.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _simulates=getattr(module, "simulates", None))
    return parser


def main(argv: list[str] | None = None) -> int:
    command = "ptxsim"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        command = f"ptxsim {args.command}"
        with _compile_notices(args):
            return int(args._run(args) or 0)
    except InputError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # output piped into a reader that stopped (`| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except SystemError as exc:   # Ctrl-C inside a compiled function (numba wraps it)
        if not _interrupted(exc):
            raise
        print(f"{command}: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS


def _interrupted(exc: BaseException) -> bool:
    """Whether `exc` was raised by a KeyboardInterrupt (its cause or context, at any depth),
    as numba's dispatcher reports an interrupt in a compiled call or while loading one."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


@contextlib.contextmanager
def _compile_notices(args: argparse.Namespace):
    """While the command runs, the line `models.jit_cache` logs just before numba first
    compiles the simulator's kernels goes to stderr (not for commands that never simulate,
    nor with `--quiet`)."""
    simulates = args._simulates(args) if args._simulates is not None else True
    if not simulates or getattr(args, "quiet", False):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"ptxsim {args.command}: %(message)s"))
    log = jit_cache.COMPILE_LOG
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
