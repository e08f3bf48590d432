"""Command-line options of the on-disk op result cache (`workloads.op_result_cache`), shared
by `ptxsim run` and `ptxsim op`: `--no-cache` (simulate every op afresh, read and write
nothing) and `--cache-dir DIR` (default `$XDG_CACHE_HOME/ptxsim/op-cache`, else
`~/.cache/ptxsim/op-cache`). The folder used, or none, is recorded in each result
(`op_cache`), and each kernel or op says whether it was read from it (`cached`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workloads.op_result_cache import OpResultCache, default_cache_dir


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """`--no-cache` and `--cache-dir DIR` (`--no-cache` wins)."""
    parser.add_argument("--no-cache", action="store_true",
                        help="simulate every op afresh: read nothing from the op result "
                        "cache and write nothing to it (wins over --cache-dir)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="op result cache folder (default: $XDG_CACHE_HOME/ptxsim/op-cache, "
                        "else ~/.cache/ptxsim/op-cache); results are keyed by the op, the "
                        "resolved config and the code version")


def cache_from_args(args: argparse.Namespace) -> OpResultCache | None:
    """The cache the flags ask for (None with --no-cache)."""
    if getattr(args, "no_cache", False):
        return None
    directory = getattr(args, "cache_dir", None)
    return OpResultCache(Path(directory) if directory else default_cache_dir())
