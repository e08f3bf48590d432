"""Where the compiled SM loop (`models.sm_driver.drive`, with the SM loop and the cached
memory inlined into it) spends its time on one op: samples per function and per source line.

    python benchmarks/compiled_profile.py [--op gemm] [--set m=4096 --set n=1536
        --set k=7168 --set dtype=fp8 --set scaling=deepseek] [--model h800_sxm]
        [--fidelity sampled] [--top 30] [--out DIR]

pyinstrument and py-spy see `drive` as one opaque frame. This script runs the op under
`perf record` in a child process whose numba functions carry debug line tables
(`NUMBA_DEBUGINFO=1`, a cache directory of its own): a first child compiles them (a minute or
two) and writes `drive`'s object code as the cache keeps it, the profiled child loads that
object from the cache and writes where it lies in memory; the script then maps every sample
that fell in it to a function (the object's symbols) and a source line (`addr2line` on the
object's `.ltext` section). Needs Linux `perf` and binutils; prints the share of `drive`'s
samples per function and per line, largest first.

Measured (2026-11-28, h800_sxm, the DeepSeek-V3 prefill layer, samples in `drive`): the cached
memory model 47 % (its tag scan `_find` 12 %), the SM loop (`models.sm_core`) 41 %, HBM 3.5 %.
Units: samples, percent of the samples in `drive`.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_OP = ("gemm", ("m=4096", "n=1536", "k=7168", "dtype=fp8", "scaling=deepseek"))


def child(args) -> None:
    """Run the op (after a warm-up), then write drive's object code (`--child compile`: the
    object the cache keeps, which a later process loads as it is) or its address in this
    process (`--child profile`, a process that loaded it from the cache)."""
    import models
    import models.sm_driver as smd
    from simulator.framework.config import parse_overrides
    from workloads.ops import build_op, simulate_op

    config = models.load_preset(args.model)
    simulate_op(build_op("residual-add", config, rows=8, cols=64), config, "full")
    res = simulate_op(build_op(args.op, config, **parse_overrides(args.set)), config,
                      args.fidelity)
    print(f"{args.op}: {res['time_us']:.3f} us simulated", flush=True)
    cres = next(iter(smd.drive.overloads.values()))
    out = Path(args.out)
    if args.child == "compile":
        (out / "drive.o").write_bytes(cres.library._get_compiled_object())
        return
    address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    (out / "drive.addr").write_text(f"{address:x}\n")


def _functions(obj: Path) -> list[tuple[int, int, str]]:
    """(offset, size, name) of the object's functions in its code section, by offset."""
    rows = subprocess.run(["readelf", "-sW", str(obj)], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    funcs = []
    for row in rows:
        p = row.split()
        if len(p) >= 8 and p[3] == "FUNC" and p[6].isdigit():
            funcs.append((int(p[1], 16), int(p[2]), _demangle(p[7])))
    return sorted(funcs)


def _demangle(name: str) -> str:
    """models.sm_core._run from numba's _ZN6models7sm_core4_runB3v84... (else the name)."""
    if not name.startswith("_ZN"):
        return name
    s, parts, i = name[3:], [], 0
    while i < len(s) and s[i].isdigit():
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        k = int(s[i:j])
        parts.append(s[j:j + k])
        i = j + k
    return ".".join(parts) or name


def report(out: Path, top: int) -> None:
    base = int((out / "drive.addr").read_text(), 16)
    script = subprocess.run(["perf", "script", "-i", str(out / "perf.data"), "-F", "ip,dso"],
                            capture_output=True, text=True, check=True).stdout
    ips = [int(line.split()[0], 16) for line in script.splitlines()
           if "perf-" in line or "[JIT]" in line]
    funcs = _functions(out / "drive.o")
    starts = [f[0] for f in funcs]
    by_func, by_offset = collections.Counter(), collections.Counter()
    for ip in ips:
        i = bisect.bisect_right(starts, ip - base) - 1
        if i >= 0 and ip - base < funcs[i][0] + funcs[i][1]:
            by_func[funcs[i][2]] += 1
            by_offset[ip - base] += 1
    total = sum(by_func.values())
    if not total:
        raise SystemExit("no samples fell in drive's code (was the op timed by the SM loop?)")
    offsets = list(by_offset)
    lines = subprocess.run(["addr2line", "-e", str(out / "drive.o"), "-j", ".ltext"]
                           + [f"{o:x}" for o in offsets], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    by_line = collections.Counter()
    root = str(Path(__file__).resolve().parents[1]) + "/"
    for o, line in zip(offsets, lines, strict=True):
        by_line[line.replace(root, "")] += by_offset[o]
    print(f"{total} samples in drive ({len(ips)} in compiled code)")
    for title, counter in (("function", by_func), ("source line", by_line)):
        print(f"\nper {title}:")
        for name, n in counter.most_common(top):
            print(f"  {100 * n / total:5.1f} %  {name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default=DEFAULT_OP[0])
    p.add_argument("--set", action="append", default=None, help="op keyword, key=value")
    p.add_argument("--model", default="h800_sxm")
    p.add_argument("--fidelity", default="sampled", choices=("sampled", "full"))
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--out", default=None, help="folder for perf.data and drive.o")
    p.add_argument("--child", choices=("compile", "profile"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.set is None:
        a.set = list(DEFAULT_OP[1]) if a.op == DEFAULT_OP[0] else []
    if a.child:
        child(a)
        return 0
    out = Path(a.out or tempfile.mkdtemp(prefix="ptxsim-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "numba-cache"
    shutil.rmtree(cache, ignore_errors=True)   # the compile child must compile, not load
    env = dict(os.environ, NUMBA_DEBUGINFO="1", NUMBA_CACHE_DIR=str(cache))
    cmd = [sys.executable, __file__, "--op", a.op, "--model", a.model, "--fidelity",
           a.fidelity, "--out", str(out)] + [f"--set={s}" for s in a.set]
    subprocess.run(cmd + ["--child", "compile"], env=env, check=True)
    subprocess.run(["perf", "record", "-F", "999", "-o", str(out / "perf.data"), "--"]
                   + cmd + ["--child", "profile"], env=env, check=True)
    report(out, a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
