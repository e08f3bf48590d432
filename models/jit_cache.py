"""Keep numba's on-disk cache (`cache=True`) in step with ptxsim's sources, and say when
the simulator's compiled kernels are about to be built.

Numba checks only the source file of the function it compiled, but the compiled SM loop
(`models.sm_core`) inlines helpers and constants from other files (`models.sm_state`,
`models.sm_memory`, `models.units`, `models.cached_memory_kernel`, `isa.trace_format`), so
an edit to one of those would load stale machine code. `refresh()` hashes the sources numba
compiles from and, when the hash differs from the stamp left by the last refresh, deletes
the cached `.nbi`/`.nbc` files of their folders; a folder that cannot be written is left
alone. Numba loads a cache file at a function's first call, so the check runs where
compiled code first loads: `ensure_fresh()` (one `refresh()` per process) opens the
constructors of `models.kernel_image.KernelImage` (the first compiled call of every
timing run), `models.sm.StreamingMultiprocessor` and `models.cached_memory.CachedMemory`.
Importing this module, or any other, reads and writes nothing.

`cache_state()` tells, reading only the stamp and the cache folder (no compiling, no
writes), whether the next simulation will compile: "ready", "stale" (sources changed since
the last refresh), "empty" (no compiled SM loop cached) or "unknown" (numba caches
elsewhere, `NUMBA_CACHE_DIR`, or does not compile, `NUMBA_DISABLE_JIT`). `compile_notice()`
is that line; `ensure_fresh()` hands it, when the state is "stale" or "empty", to the
`logging` logger `ptxsim.compile` at INFO level just before compiled code first loads, so a
command that fails on its input earlier says nothing about compiling. This module prints
nothing itself: the command line attaches a handler writing the record on stderr.

`reserved_call(fn, *args)` calls `fn` from a frame that holds `RESERVED_STACK_SLOTS` slots of
the interpreter's data stack. CPython 3.11 keeps its frames in chunks of 16 KiB and maps a new
chunk when a call does not fit in the current one, unmapping it when that call returns: numba's
compiler, a deep recursion, crosses a chunk boundary back and forth millions of times (3.9 M
mmap/munmap pairs of 16 KiB when the compiled SM loop is built, 35 s of system time on this
project's machine). Called through the reserve, the compiler's frames fit in the reserve's
chunk, so none is mapped; the compiled SM loop's first call (`models.sm_driver`,
`models.sm`) goes through it. Units: seconds, data stack slots (8 bytes each).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("models/*.py", "isa/fpround.py", "isa/semantics/memory.py", "isa/trace_format.py")
STAMP = "numba_sources.sha1"
PROBE = "sm_core._run-*.nbi"   # the compiled SM loop's cache index: absent until it is built
# Wall time of the first simulation on an empty cache (`ptxsim op softmax --rows 256
# --cols 256 --no-cache` with an empty `NUMBA_CACHE_DIR`: 69.4 s wall, 67.3 s user, against
# 2.5 s warm, one core); every cached function compiles then.
COMPILE_ESTIMATE_S = 70
COMPILE_LOG = logging.getLogger("ptxsim.compile")
"""Where `ensure_fresh()` reports that compiling is ahead (INFO; no handler of its own)."""


RESERVED_STACK_SLOTS = 300_000
"""Slots (8 bytes) of the data stack `reserved_call` holds: 2.4 MB, so the chunk it takes has
1.6 MB of room for the frames above it (numba's compiler needs far less)."""


@functools.cache
def _reserve():
    """The caller whose frame holds the reserve: `fn(*args)` with `RESERVED_STACK_SLOTS` more
    local slots, built at its first use (80 ms), not at import."""
    def call(fn, args):
        return fn(*args)

    names = ("fn", "args") + tuple(f"_slot{i}" for i in range(RESERVED_STACK_SLOTS))
    call.__code__ = call.__code__.replace(co_varnames=names, co_nlocals=len(names))
    return call


def reserved_call(fn, *args):
    """`fn(*args)` from a frame holding `RESERVED_STACK_SLOTS` data stack slots (module
    docstring): the same result, without the chunk churn of a deep recursion inside."""
    return _reserve()(fn, args)


def sources_hash() -> str:
    digest = hashlib.sha1()
    for pattern in SOURCES:
        for path in sorted(ROOT.glob(pattern)):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def refresh() -> bool:
    """Drop stale numba cache files; True when the sources had changed."""
    stamp = ROOT / "models" / "__pycache__" / STAMP
    now = sources_hash()
    try:
        if stamp.exists() and stamp.read_text() == now:
            return False
        folders = {(ROOT / p).parent / "__pycache__" for p in SOURCES}
        for folder in folders:
            for pattern in ("*.nbi", "*.nbc"):
                for path in folder.glob(pattern):
                    path.unlink(missing_ok=True)
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(now)
    except OSError:
        return False
    return True


@functools.cache
def ensure_fresh() -> bool:
    """`refresh()` the first time compiled code is about to load in this process (the call
    sites are in the module docstring); later calls return that answer without reading a
    file. The memo is per process: a worker of a sweep checks once for itself. Logs
    `compile_notice()` to `COMPILE_LOG` first when compiling is ahead."""
    notice = compile_notice()
    if notice:
        COMPILE_LOG.info(notice)
    return refresh()


def cache_state() -> str:
    """"ready", "stale", "empty" or "unknown" (see the module docstring); reads only."""
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0") \
            or os.environ.get("NUMBA_CACHE_DIR"):
        return "unknown"
    folder = ROOT / "models" / "__pycache__"
    try:
        stamp = (folder / STAMP).read_text()
    except OSError:
        return "empty"
    if stamp != sources_hash():
        return "stale"
    return "ready" if any(folder.glob(PROBE)) else "empty"


def compile_notice() -> str | None:
    """The one line to show before a simulation that will compile the simulator's kernels
    first, or None when the cache is ready (or its state unknown)."""
    if cache_state() not in ("stale", "empty"):
        return None
    return (f"compiling the simulator's kernels, once per install, about "
            f"{COMPILE_ESTIMATE_S} s")
