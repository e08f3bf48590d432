"""Where the project's shared reference data lies: `../shared/reference/` beside the
checkout (published hardware facts and real-GPU measurements, see its README.md). Modules
that read a file there when it is present (and fall back to a committed subset when not)
name it through `SHARED_REFERENCE`, so the layout is spelled once.
"""

from __future__ import annotations

from pathlib import Path

SHARED_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
