"""Keep numba's on-disk cache (`cache=True`) in step with ptxsim's sources.

Numba checks only the source file of the function it compiled, but the compiled SM loop
(`models.sm_core`) inlines helpers from other files (`models.sm_warps`, `models.sm_state`,
`models.units`), so an edit to one of those would load stale machine code. `refresh()`
hashes the sources numba compiles from and, when the hash differs from the stamp left by
the last refresh, deletes the cached `.nbi`/`.nbc` files of their folders. It runs when
this module is imported, which the modules that run compiled code do (`models.sm`,
`models.cached_memory`; numba loads a cache at a function's first call); a folder that
cannot be written is left alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("models/*.py", "isa/fpround.py", "isa/semantics/memory.py")
STAMP = "numba_sources.sha1"


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


refresh()
