"""The address map of a chip config: which L2 slice, HBM channel, bank and row hold a line.

What it models
--------------
`build_address_map(config)` returns the `models.address_map.AddressMap` of `config` (line
size, L2 slices and partitions, HBM channels, banks, row size and row interleave). The
compiled hashes of `models.cached_memory_layout` implement the same functions; tests compare
the two and use the map to pick lines of a given slice, partition, channel or bank.

Left out: the hashes themselves (`models.address_map`). Units: bytes.
"""

from __future__ import annotations

from models.address_map import AddressMap
from models.gpu_spec import GpuConfig


def build_address_map(config: GpuConfig) -> AddressMap:
    """The address hashes of `config`."""
    return AddressMap(line_bytes=config.l2.line_bytes, l2_slices=config.l2.slices,
                      l2_partitions=config.l2.partitions, hbm_channels=config.hbm.channels,
                      hbm_banks=config.hbm.banks_per_channel,
                      hbm_row_bytes=config.hbm.row_bytes,
                      hbm_row_channels=config.hbm.row_channels)


__all__ = ["build_address_map"]
