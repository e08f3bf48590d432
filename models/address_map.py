"""Where an address lives: its L2 slice and partition, its HBM channel, bank and row.

What it models
--------------
NVIDIA does not publish its address hashes. We use XOR-folds of the line number that spread
sequential and strided streams evenly over slices and channels, which is what the real hashes
are built to do. Slices are numbered partition by partition (`slice // slices_per_partition`
is the partition); SMs alternate between partitions by index. Inside a channel, consecutive
local lines share a DRAM row until `row_bytes` are used, then move to the next bank.

All functions take numpy arrays of byte addresses and answer for all of them in one call.
`build_address_map(config)` gives the map of a chip config; the compiled hashes of
`models.cached_memory_layout` implement the same functions (`tests/test_cached_memory.py`
compares the two).
Left out: the real (undisclosed) hash functions, memory-side partition camping effects beyond
what the hash produces. Units: byte addresses, indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.gpu_spec import GpuConfig


def _fold(ids: np.ndarray, shifts: tuple[int, ...]) -> np.ndarray:
    folded = ids.copy()
    for shift in shifts:
        folded ^= ids >> shift
    return folded


@dataclass(frozen=True, slots=True)
class AddressMap:
    """Address -> L2 slice / partition and HBM channel / bank / row, for one configuration."""

    line_bytes: int
    l2_slices: int
    l2_partitions: int
    hbm_channels: int
    hbm_banks: int
    hbm_row_bytes: int
    hbm_row_channels: int         # the row map's channels (`HbmSpec.row_channels`)

    def line_ids(self, addresses: np.ndarray) -> np.ndarray:
        """Line numbers of byte addresses."""
        return np.asarray(addresses, dtype=np.int64) // self.line_bytes

    def l2_slice(self, addresses: np.ndarray) -> np.ndarray:
        """The L2 slice holding each address."""
        return _fold(self.line_ids(addresses), (7, 13, 19)) % self.l2_slices

    def partition_of_slice(self, slice_index: int) -> int:
        """The partition a slice belongs to."""
        return slice_index * self.l2_partitions // self.l2_slices

    def partition_of_sm(self, sm_index: int) -> int:
        """The partition an SM sits next to (SMs alternate between partitions)."""
        return sm_index % self.l2_partitions

    def hbm_channel(self, addresses: np.ndarray) -> np.ndarray:
        """The HBM channel holding each address."""
        return _fold(self.line_ids(addresses), (5, 11, 17)) % self.hbm_channels

    def hbm_bank_row(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bank, row) of each address inside its channel."""
        local_line = self.line_ids(addresses) // self.hbm_row_channels
        row_index = local_line * self.line_bytes // self.hbm_row_bytes
        return row_index % self.hbm_banks, row_index // self.hbm_banks


def build_address_map(config: GpuConfig) -> AddressMap:
    """The address hashes of `config` (line size, L2 slices and partitions, HBM channels,
    banks, row size and row interleave)."""
    return AddressMap(line_bytes=config.l2.line_bytes, l2_slices=config.l2.slices,
                      l2_partitions=config.l2.partitions, hbm_channels=config.hbm.channels,
                      hbm_banks=config.hbm.banks_per_channel,
                      hbm_row_bytes=config.hbm.row_bytes,
                      hbm_row_channels=config.hbm.row_channels)
