"""The link memory: peer windows go over NVLink / InfiniBand pipes, the rest to local memory."""

import numpy as np
import pytest

import models
from models.fixed_latency_memory import FixedLatencyMemory
from models.link_memory import LinkMemory, LinkWindow

BASE = 1 << 28
SIZE = 1 << 20


def _memory(**overrides):
    cfg = models.load_preset("h100_sxm", overrides)
    windows = (LinkWindow(BASE, BASE + SIZE, "nvlink", mirror_start=BASE + 4 * SIZE),
               LinkWindow(BASE + SIZE, BASE + SIZE + 4096, "nvlink", signal=True),
               LinkWindow(BASE + 2 * SIZE, BASE + 3 * SIZE, "network"))
    return cfg, LinkMemory(cfg, FixedLatencyMemory(cfg, 10), windows)


def _sectors(start, nbytes):
    return np.arange(start // 32, (start + nbytes) // 32, dtype=np.int64)


def test_stores_to_a_peer_window_queue_at_the_usable_nvlink_rate():
    """Two 64 KiB stores land at 2 x 64 KiB / rate + latency (closed form)."""
    cfg, mem = _memory(**{"links.nvlink_latency_ns": 500.0})
    links = cfg.links
    mem.access(0, "store", _sectors(BASE, 65536), 0)
    done = mem.access(1, "store", _sectors(BASE + 65536, 65536), 0)
    expected = 2 * 65536 / (links.nvlink_achieved_gbps * 1e9) * 1e12 + 500_000
    assert done == pytest.approx(expected, rel=1e-3)


def test_signal_wait_returns_after_the_queued_data_and_the_message_cost():
    """A signal load waits for the data and the flag message queued before it."""
    cfg, mem = _memory(**{"links.nvlink_latency_ns": 0.0,
                          "links.nvlink_message_overhead_ns": 1000.0})
    rate = cfg.links.nvlink_achieved_gbps * 1e9
    mem.access(0, "store", _sectors(BASE, 32768), 0)
    mem.access(0, "store", _sectors(BASE + SIZE, 32), 0)
    done = mem.access(0, "load", _sectors(BASE + SIZE, 32), 0)
    expected = (32768 + 32) / rate * 1e12 + 1_000_000
    assert done == pytest.approx(expected, rel=1e-3)


def test_local_addresses_go_to_the_inner_memory_only():
    """An access outside every window takes the inner memory's latency and no link time."""
    cfg, mem = _memory()
    mem.access(0, "store", _sectors(BASE, 65536), 0)
    local = mem.access(0, "load", _sectors(BASE + 8 * SIZE, 4096), 0)
    assert local == FixedLatencyMemory(cfg, 10).access(0, "load", _sectors(0, 32), 0)


def test_network_window_uses_the_nic_rate_capped_by_pcie():
    """RDMA stores run at min(network_achieved_gbps, pcie) and add the network latency."""
    cfg, mem = _memory(**{"links.pcie_bandwidth_per_direction_gbps": 25.0,
                          "links.network_latency_ns": 2000.0})
    done = mem.access(0, "store", _sectors(BASE + 2 * SIZE, 65536), 0)
    assert done == pytest.approx(65536 / 25e9 * 1e12 + 2_000_000, rel=1e-3)


def test_overlapping_windows_are_refused():
    """Two windows over the same bytes are a configuration error."""
    cfg = models.load_preset("h100_sxm")
    with pytest.raises(ValueError, match="overlap"):
        LinkMemory(cfg, FixedLatencyMemory(cfg), (LinkWindow(0, 4096, "nvlink"),
                                                  LinkWindow(2048, 8192, "network")))
    with pytest.raises(ValueError, match="accepted: nvlink, network"):
        LinkWindow(0, 4096, "pcie")


def test_touches_tells_whether_any_sector_lies_in_a_window():
    """Sectors below, above and between the windows touch none; one inside touches."""
    _, mem = _memory()
    below, above = _sectors(0, 4096), _sectors(BASE + 8 * SIZE, 4096)
    between = _sectors(BASE + SIZE + 4096, SIZE - 4096)       # the gap before the network one
    assert not mem.touches(below) and not mem.touches(above) and not mem.touches(between)
    assert not mem.touches(np.concatenate([below, between, above]))
    assert not mem.touches(np.zeros(0, np.int64))
    assert mem.touches(np.concatenate([below, _sectors(BASE + 2 * SIZE + 64, 32), above]))
