"""Communication ops: all-to-all and all-reduce as kernels on the comm SMs (small shapes)."""

import shutil
import subprocess
from pathlib import Path

import pytest

import models
import simulator
from isa.errors import InputError
from tests.test_ptx_current import header_command
from workloads.ops import build_op, simulate_op
from workloads.ops.comm import expected_distinct

COMM_DIR = Path(__file__).resolve().parents[1] / "workloads" / "kernels" / "comm"

H800 = models.load_preset("h800_sxm")


def _link_bytes(plan, config, link):
    launch = plan.launches[0]
    cfg = config.with_overrides(launch.overrides)
    res = simulator.simulate_kernel(launch.ptx, launch.entry, launch.grid, launch.block,
                                    list(launch.args), config=cfg, timing_only=True,
                                    regs_per_thread=launch.regs_per_thread, **launch.options)
    stats = res.stats
    rows = stats[(stats.component == f"link.{link}") & (stats.stat == "bytes")]
    return float(rows.value.sum()), res


def test_expected_distinct_ranks_matches_the_closed_forms():
    """Drawing 1 item hits one group; drawing all items hits every group."""
    assert expected_distinct(8, 32, 1) == pytest.approx(1.0)
    assert expected_distinct(8, 32, 256) == pytest.approx(8.0)
    assert 5.0 < expected_distinct(8, 32, 8) < 5.5


def test_allreduce_gbps_is_nccl_bus_bandwidth():
    """gbps = 2 (n - 1) / n x bytes / time, and the ring sends that many bytes over NVLink."""
    plan = build_op("allreduce", H800, ranks=4, bytes=1 << 16, comm_sms=2,
                    channels_per_sm=1, chunk_bytes=8192)
    res = simulate_op(plan, H800, "full")
    assert res["gbps"] == pytest.approx(1.5 * (1 << 16) / (res["time_us"] * 1e3))
    sent, _ = _link_bytes(plan, H800, "nvlink")
    signals = plan.launches[0].detail["chunks"] * 2 * (4 - 1)     # one 32-byte flag per send
    assert sent == 1.5 * (1 << 16) + 32 * signals


def test_intranode_dispatch_moves_its_bottleneck_bytes_over_nvlink_only():
    """EP8 dispatch: NVLink carries the plan's bytes rounded up to chunks; no RDMA bytes."""
    plan = build_op("alltoall", H800, ranks=8, tokens=32, hidden=512, comm_sms=2,
                    channels_per_sm=1)
    sent, res = _link_bytes(plan, H800, "nvlink")
    chunk = plan.launches[0].detail["chunk_bytes"]
    assert plan.bytes <= sent < plan.bytes + 2 * chunk
    assert res.stats.query("component == 'link.network' and stat == 'bytes'").empty


def test_internode_dispatch_crosses_ib_then_forwards_over_nvlink():
    """EP16: tokens for the other node go over the NIC, then are forwarded over NVLink."""
    plan = build_op("alltoall", H800, ranks=16, tokens=16, hidden=512, comm_sms=2,
                    channels_per_sm=1)
    ib, _ = _link_bytes(plan, H800, "network")
    nvl, _ = _link_bytes(plan, H800, "nvlink")
    chunk = plan.launches[0].detail["chunk_bytes"]
    assert plan.bytes <= ib < plan.bytes + 2 * chunk      # gbps counts the RDMA bytes
    assert nvl > ib                                       # forwarded to several GPUs


def test_slower_nvlink_makes_a_large_dispatch_slower():
    """Halving the usable NVLink rate slows a bandwidth-bound EP8 dispatch (the kernel
    alone: no launch overhead)."""
    kwargs = dict(ranks=8, tokens=64, hidden=2048, comm_sms=4, channels_per_sm=2)
    fast_cfg = H800.with_overrides({"launch.kernel_overhead_us": 0.0})
    fast = simulate_op(build_op("alltoall", fast_cfg, **kwargs), fast_cfg, "full")
    slow_cfg = fast_cfg.with_overrides({"links.nvlink_achieved_gbps": 40.0})
    slow = simulate_op(build_op("alltoall", slow_cfg, **kwargs), slow_cfg, "full")
    assert slow["time_us"] > 1.5 * fast["time_us"]


def test_sampled_collective_extrapolates_on_two_round_counts():
    """A long ring is sampled with two reduced launches whose weights sum to one."""
    plan = build_op("allreduce", H800, ranks=2, bytes=1 << 22, comm_sms=1,
                    channels_per_sm=1, chunk_bytes=65536)
    assert len(plan.samples) == 2
    assert sum(w for w, _ in plan.samples) == pytest.approx(1.0)
    assert "rounds" in plan.sample_note


@pytest.mark.parametrize("kind,kwargs,flag", [
    ("alltoall", dict(ranks=8, tokens=4, hidden=64, kind="scatter"), "--kind"),
    ("alltoall", dict(ranks=8, tokens=4, hidden=64, dtype="fp16"), "--dtype"),
    ("alltoall", dict(ranks=4096, tokens=4, hidden=64), "links.nodes"),
    ("alltoall", dict(ranks=12, tokens=4, hidden=64), "--ranks"),
    ("allreduce", dict(ranks=8, bytes=4096, chunk_bytes=1000), "--chunk-bytes"),
    ("allreduce", dict(ranks=16, bytes=4096), "--ranks"),
    ("allreduce", dict(ranks=8, bytes=4096, algo="halving"), "--algo"),
    ("allreduce", dict(ranks=8, bytes=4096, comm_sms=132), "--comm-sms"),
])
def test_bad_comm_flags_name_the_flag(kind, kwargs, flag):
    """Bad sizes are an InputError naming the flag or key and what is accepted."""
    with pytest.raises(InputError, match=flag):
        build_op(kind, H800, **kwargs)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_comm_pipeline_ptx_is_what_nvcc_makes(tmp_path):
    """Recompiling comm_pipeline.cu with its header command reproduces the committed PTX."""
    source = COMM_DIR / "comm_pipeline.cu"
    argv = header_command(source)
    argv[-1] = str(tmp_path / argv[-1])
    subprocess.run(argv, cwd=COMM_DIR, check=True, capture_output=True, timeout=300)
    fresh = (tmp_path / "comm_pipeline.ptx").read_text()
    assert fresh == (COMM_DIR / "comm_pipeline.ptx").read_text()


def test_routing_table_sets_the_bytes_per_path():
    """A routing table's counts decide the NVLink and RDMA bytes (token = hidden + scales)."""
    token = 1024 + 4 * 8                                   # fp8 values + one f32 per 128
    counts = [0, 10, 0, 0, 0, 0, 0, 0] + [3, 5, 0, 0, 0, 0, 0, 0]
    plan = build_op("alltoall", H800, ranks=16, tokens=16, hidden=1024, routing=counts,
                    comm_sms=2, channels_per_sm=1)
    detail = plan.launches[0].detail
    assert detail["ib_bytes"] == 5 * token                # once per node: the largest count
    assert detail["nvlink_bytes"] == pytest.approx(10 * token + 8 * token * 7 / 8)
    assert plan.bytes == 5 * token                        # RDMA bytes across nodes
    with pytest.raises(InputError, match="routing"):
        build_op("alltoall", H800, ranks=16, tokens=16, hidden=1024, routing=[1, 2])


@pytest.mark.parametrize("hints, load, store", [
    ("plain", "ld.global.nc.v4.u32", "st.global.v4.u32"),
    ("deepep", "ld.global.nc.L1::no_allocate.L2::256B.v4.u32",
     "st.global.L1::no_allocate.v4.u32"),
    ("deepep_evict_first", "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32",
     "st.global.L1::no_allocate.L2::cache_hint.v4.u32"),
])
def test_comm_cache_hints_pick_the_entry_with_those_qualifiers(hints, load, store):
    """`kernels.comm_cache_hints` picks the comm_pipeline entry whose chunk accesses carry
    DeepEP's qualifiers (or none, or an L2 evict_first policy besides); DeepEP's are the
    default."""
    config = H800.with_overrides({"kernels.comm_cache_hints": hints})
    launch = build_op("alltoall", config, ranks=8, tokens=256, hidden=7168).launches[0]
    ptx = launch.ptx
    start = ptx.index(f".entry {launch.entry}(")
    end = ptx.find(".entry", start + 1)
    body = ptx[start:end if end > 0 else None]
    assert load in body and store in body
    assert ("createpolicy.fractional.L2::evict_first" in body) == (hints == "deepep_evict_first")
    assert launch.detail["cache_hints"] == hints
    assert H800.kernels.comm_cache_hints == "deepep"


def test_a_bad_comm_cache_hints_value_is_refused_naming_the_key():
    with pytest.raises(InputError, match="comm_cache_hints"):
        H800.with_overrides({"kernels.comm_cache_hints": "evict_last"})
