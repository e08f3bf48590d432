"""ZCE compressed stores (workloads/codesign/zce_store.py): bit-exact round trip of a kernel's
output, the streaming-store closed form, the stock figures with the unit off."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from simulator import simulate_kernel
from workloads.codesign import codesign_ops as co
from workloads.codesign import zce_format as Z
from workloads.codesign import zce_store as S
from workloads.codesign.zce_kernels import store_stream_kernel
from workloads.codesign.zce_layer import BLOCK_ELEMS
from workloads.ops import build_op, simulate_op

ZCE = {"units.zce.enabled": True, "units.zce.activation_sparsity": 0.5}


def _bytes(stats, component: str) -> float:
    rows = stats[(stats.component == component) & (stats.stat == "bytes")]
    return float(rows.value.sum())


def _run(plan, cfg, fidelity="full"):
    runs = []
    res = simulate_op(plan, cfg, fidelity, stats=runs)
    return res, runs[0][2]


def test_kernel_output_stored_compressed_reads_back_bit_for_bit():
    cfg = models.load_preset("h800_sxm", ZCE)
    plan = build_op("gelu", cfg, rows=64, cols=512)
    stock = build_op("gelu", models.load_preset("h800_sxm"), rows=64, cols=512)
    assert not plan.launches[0].timing_only and "memory" in plan.launches[0].options
    for p in (plan, stock):                # ReLU-like input: half the outputs are zeros
        x = p.launches[0].args[0]
        x[np.arange(x.size).reshape(x.shape) % 2 == 0] = -30
    _run(plan, cfg)
    _run(stock, models.load_preset("h800_sxm"))
    y, want = plan.launches[0].args[1], stock.launches[0].args[1]
    assert y.dtype == ml_dtypes.bfloat16 and np.count_nonzero(y) > y.size // 4
    assert np.array_equal(y.view(np.uint16), want.view(np.uint16))  # timing-only wrapper
    z = Z.compress(y, BLOCK_ELEMS)
    assert z.nbytes < 0.6 * y.nbytes
    back = Z.decompress(z)
    canonical = np.where(y == 0, np.zeros_like(y), y)          # -0.0 is stored as +0.0
    assert np.array_equal(back.view(np.uint16), canonical.view(np.uint16))


def _stream(ratio_cfg, n_bytes: int, compressed: bool):
    ptx = store_stream_kernel()
    args = [isa.ShapeOnly((n_bytes // 2,), np.uint16)]
    memory = "flat"
    if compressed:
        start, end = S.arg_window(ptx, "store_stream", args, 0)
        memory = S.CompressedStoreFactory(
            (S.StoreWindow(start, end, S.store_ratio(ratio_cfg)),), "flat")
    res = simulate_kernel(ptx, "store_stream", (n_bytes // 16 // 256, 1, 1), (256, 1, 1), args,
                          ratio_cfg, memory=memory, timing_only=True)
    return res.time_us, _bytes(res.stats, "memory.hbm.store") + _bytes(res.stats,
                                                                        "memory.hbm.load")


@pytest.mark.parametrize("sparsity,engine", [(0.5, 128.0), (0.9, 128.0), (0.5, 4.0)])
def test_streaming_store_matches_closed_form(sparsity, engine):
    cfg = models.load_preset("h800_sxm", {**ZCE, "units.zce.activation_sparsity": sparsity,
                                          "units.zce.compress_bytes_per_clk_per_sm": engine})
    sms = cfg.sm.count
    n_bytes = sms * 32 * 256 * 16                # 32 CTAs of 4 KiB per SM: even per-SM work
    ratio = S.store_ratio(cfg)
    time_us, hbm = _stream(cfg, n_bytes, True)
    # flat memory: a first store fills the sector and writes it back (2 HBM bytes per byte)
    assert hbm == pytest.approx(2 * ratio * n_bytes, rel=1e-3)
    store_us = hbm / (cfg.hbm.peak_bandwidth_gbps * 1e3)
    compress_us = Z.compression_cycles(n_bytes, engine, sms) / (cfg.chip.clock_ghz * 1e3)
    body_us = time_us - cfg.launch.kernel_overhead_us - cfg.launch.kernel_front_end_us
    assert body_us == pytest.approx(max(store_us, compress_us), rel=0.04)
    dense_us, dense_hbm = _stream(models.load_preset("h800_sxm"), n_bytes, False)
    assert dense_hbm == 2 * n_bytes
    dense_store_us = dense_hbm / (cfg.hbm.peak_bandwidth_gbps * 1e3)
    assert (time_us < dense_us) == (compress_us < dense_store_us)   # slower only engine-bound


def test_zce_off_is_the_stock_plan_and_time():
    stock_cfg = models.load_preset("h800_sxm")
    off = models.load_preset("h800_sxm", {**ZCE, "units.zce.enabled": False})
    on = models.load_preset("h800_sxm", ZCE)
    for kind, sizes in (("gelu", {"rows": 256, "cols": 3072}),
                        ("swiglu", {"rows": 256, "cols": 2048})):
        base = build_op(kind, stock_cfg, **sizes)
        plan_off = build_op(kind, off, **sizes)
        assert plan_off.sizes == base.sizes and plan_off.launches[0].options == {}
        t_stock, st_stock = _run(base, stock_cfg, "sampled")
        t_off, _ = _run(plan_off, off, "sampled")
        assert t_off["time_us"] == t_stock["time_us"]
        assert t_off["hbm_bytes"] == t_stock["hbm_bytes"]
        plan_on = build_op(kind, on, **sizes)
        _, st_on = _run(plan_on, on, "sampled")
        ratio = plan_on.sizes["store_ratio"]
        dense = _bytes(st_stock, "memory.l2.store")
        assert _bytes(st_on, "memory.l2.store") == pytest.approx(ratio * dense, rel=1e-3)
        assert co.op_counts(plan_on)["output_bytes_stored"] == pytest.approx(ratio * dense)
        assert co.op_counts(base)["output_bytes"] == 0.0
        back = build_op(kind, on, **sizes, backward=True)      # gradients stay dense
        assert back.launches[0].options == {}


def test_store_ratio_is_the_consumers_load_ratio():
    for s in (0.25, 0.5, 0.9):
        cfg = models.load_preset("deepseek_codesign", {"units.zce.activation_sparsity": s,
                                                       "units.zce.weight_sparsity": s})
        ratio = S.store_ratio(cfg)
        assert co.codesign_info(cfg, "gemm", "bf16")["a_atom_bytes"] == co.atom_bytes(ratio)
        assert S.store_ratio(cfg) == ratio                     # seeded
    dense = models.load_preset("deepseek_codesign")            # sparsity 0: nothing stored
    assert not S.stores_compressed(dense)


def test_gemm_activation_epilogue_stores_compressed():
    cfg = models.load_preset("h800_sxm", ZCE)
    stock = models.load_preset("h800_sxm")
    sizes = {"m": 256, "n": 1024, "k": 256}
    plan = S.gemm_activation_output(build_op("gemm", cfg, **sizes), cfg)
    base = build_op("gemm", stock, **sizes, epilogue="registers")
    tma = build_op("gemm", stock, **sizes)
    assert plan.sizes["output_bytes"] == 256 * 1024 * 2
    _, st = _run(plan, cfg)
    _, st_base = _run(base, stock)
    _, st_tma = _run(tma, stock)
    ratio = plan.sizes["store_ratio"]
    # the dense register epilogue stores each 32-byte sector as two 16-byte halves (2 sector
    # writes), the default TMA-store epilogue whole lines once; the engine merges the halves
    # and sends on the packed stream once
    assert _bytes(st_base, "memory.l2.store") == 2 * plan.sizes["output_bytes"]
    assert _bytes(st_tma, "memory.l2.store") == plan.sizes["output_bytes"]
    assert _bytes(st, "memory.l2.store") == pytest.approx(ratio * plan.sizes["output_bytes"],
                                                          rel=1e-3)
    with pytest.raises(InputError, match="accepted: gemm"):
        S.gemm_activation_output(build_op("gelu", cfg, rows=8, cols=64), cfg)
    with pytest.raises(InputError, match="ratio"):
        S.StoreWindow(0, 64, 0.0)


def test_workload_table_carries_the_stored_output_bytes():
    import workloads
    from workloads.execute import simulate_workload

    graph = workloads.layer("bert-base", "prefill", tokens=64)
    graph = type(graph)(graph.name, tuple(dataclasses.replace(n, deps=()) for n in graph.nodes
                                          if n.op == "gelu"), dict(graph.meta))
    cfg = models.load_preset("deepseek_codesign", {"units.zce.activation_sparsity": 0.9})
    k = simulate_workload(graph, cfg, "sampled").kernels
    ratio = S.store_ratio(cfg)
    assert len(k) == 1 and k.output_bytes.iloc[0] == 64 * 3072 * 2
    assert k.output_bytes_stored.iloc[0] == pytest.approx(ratio * 64 * 3072 * 2)
    assert k.compress_cycles.iloc[0] == pytest.approx(
        Z.compression_cycles(64 * 3072 * 2, 128.0, cfg.sm.count))
    assert co.totals(k)["output_bytes_stored"] == k.output_bytes_stored.iloc[0]
