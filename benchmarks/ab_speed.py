"""CPU seconds of two versions of ptxsim on the same job, run at the same time: this
checkout against another revision (or source tree), so that both see the same machine.

    python benchmarks/ab_speed.py --rev REV [--rounds 3] [--discard 1]
        [-- ARGS of benchmarks/workload_speed.py, e.g. --workload llama-3-8b]
    python benchmarks/ab_speed.py --tree DIR ...

Why: this project's 2-core machine changes speed by a third within minutes (the default
layer read 62.6 s and 92.4 s CPU for the same code an hour apart on 2026-11-28), so runs
taken in turns cannot tell apart versions that differ by less than that. Here each round
starts `benchmarks/workload_speed.py` of both versions at once, one per core, so both see
the same machine, and prints both CPU figures and their ratio (new / base); the mean ratio
of the kept rounds closes. `--rev` checks the revision out into a temporary git worktree
(removed at the end); its first round compiles that tree's numba kernels, so `--discard`
drops the first round(s) by default. Each process imports its own tree (`PYTHONPATH`, run
from the temporary directory). Units: CPU seconds, ratio.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CPU = re.compile(r"([0-9.]+) s CPU")


def _start(tree: Path, args: list[str], cwd: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen([sys.executable, str(tree / "benchmarks" / "workload_speed.py"),
                             *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _cpu(proc: subprocess.Popen, label: str) -> float:
    out, _ = proc.communicate()
    found = _CPU.search(out or "")
    if proc.returncode or not found:
        raise SystemExit(f"{label} run failed (exit {proc.returncode}):\n{out}")
    return float(found.group(1))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--rev", help="git revision of the base version")
    which.add_argument("--tree", type=Path, help="source tree of the base version")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--discard", type=int, default=None,
                   help="first rounds not counted (default: 1 with --rev, else 0)")
    a = p.parse_args(argv)
    if a.rounds < 1:
        p.error("--rounds: accepted an integer >= 1")
    discard = a.discard if a.discard is not None else (1 if a.rev else 0)
    if not 0 <= discard < a.rounds:
        p.error(f"--discard {discard}: accepted 0 .. rounds - 1 ({a.rounds - 1})")
    with tempfile.TemporaryDirectory() as tmp:
        base = a.tree
        if a.rev:
            base = Path(tmp) / "base"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                            str(base), a.rev], check=True)
        try:
            ratios = []
            for r in range(a.rounds):
                procs = [_start(base, extra, tmp), _start(ROOT, extra, tmp)]
                old, new = _cpu(procs[0], "base"), _cpu(procs[1], "new")
                kept = r >= discard
                if kept:
                    ratios.append(new / old)
                print(f"round {r + 1}: base {old:.1f} s, new {new:.1f} s CPU, new/base "
                      f"{new / old:.3f}" + ("" if kept else " (not counted)"), flush=True)
            print(f"mean new/base over {len(ratios)} rounds: {sum(ratios) / len(ratios):.3f}")
        finally:
            if a.rev:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(base)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
