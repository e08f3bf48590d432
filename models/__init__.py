"""Hardware blocks and presets: `load_preset(name, overrides)` returns a frozen `GpuConfig`.

Presets are TOML files in `models/presets/`; a preset may name another as its `base` and
override only what differs. Loading resolves the base chain, applies dotted-key overrides
(`{"l2.size_bytes": 64 << 20, "sm.count": 112}`) and validates everything; bad input raises
`ConfigError` (an `isa.errors.InputError`) naming the key, the value and what is accepted.
Importing this package reads no file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import simulator.framework  # noqa: F401  (first: loads the simulator front door, see its docstring)
from models.chip_spec import (
    TENSOR_PRECISIONS,
    ChipSpec,
    SmSpec,
    TensorUnitSpec,
    UnitsSpec,
    VectorUnitSpec,
)
from models.gpu_spec import GpuConfig, LinksSpec
from models.memory_spec import HbmSpec, L1Spec, L2Spec, L3Spec, NocSpec, SharedMemorySpec
from simulator.framework.config import (
    ConfigError,
    apply_overrides,
    build_spec,
    read_toml,
    resolve_bases,
)

PRESET_DIR = Path(__file__).resolve().parent / "presets"


def list_presets() -> list[str]:
    """Names of the presets in `models/presets/`, sorted."""
    return sorted(path.stem for path in PRESET_DIR.glob("*.toml"))


def preset_path(name: str) -> Path:
    """The TOML file of preset `name`; ConfigError if there is none."""
    path = PRESET_DIR / f"{name}.toml"
    if not isinstance(name, str) or "/" in name or not path.is_file():
        raise ConfigError("preset", name, f"one of {list_presets()}", "unknown preset")
    return path


def _read_preset(name: str) -> dict[str, Any]:
    return read_toml(preset_path(name))


def load_preset(name: str, overrides: Mapping[str, Any] | None = None) -> GpuConfig:
    """The validated config of preset `name` with dotted-key `overrides` applied."""
    path = preset_path(name)
    data = resolve_bases(name, _read_preset)
    try:
        config = build_spec(GpuConfig, data)
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.value, exc.accepted, exc.problem, file=str(path)) from None
    if not overrides:
        return config
    try:
        return build_spec(GpuConfig, apply_overrides(GpuConfig, data, overrides))
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.value, exc.accepted, exc.problem,
                          file=f"overrides of {name}") from None


__all__ = [
    "PRESET_DIR",
    "TENSOR_PRECISIONS",
    "ChipSpec",
    "ConfigError",
    "GpuConfig",
    "HbmSpec",
    "L1Spec",
    "L2Spec",
    "L3Spec",
    "LinksSpec",
    "NocSpec",
    "SharedMemorySpec",
    "SmSpec",
    "TensorUnitSpec",
    "UnitsSpec",
    "VectorUnitSpec",
    "list_presets",
    "load_preset",
    "preset_path",
]
