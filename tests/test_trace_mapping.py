"""Kernel-name mapping rules and stream-overlap analysis, on synthetic and DeepSeek data."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from workloads.traces import category_totals, map_kernels, stream_overlap, unmatched
from workloads.traces.mapping import CATEGORIES, RULES

NAMES = Path(__file__).resolve().parents[1] / "workloads" / "reference" / \
    "deepseek_v3_kernel_names.csv"


def _names() -> pd.DataFrame:
    return pd.read_csv(NAMES, comment="#")


def test_every_deepseek_kernel_is_mapped_or_listed_unmatched():
    """Mapped rows plus rows of listed unmatched names account for every activity."""
    df = map_kernels(_names())
    listed = set(unmatched(df)["name"])
    assert all(r is not None or n in listed for n, r in zip(df["name"], df["rule"],
                                                            strict=True))
    assert len(df) == len(_names())


def test_deepseek_rules_leave_no_kernel_unmatched():
    """The rule table covers every kernel name of the DeepSeek-V3 trace."""
    assert unmatched(map_kernels(_names())).empty


def test_category_totals_equal_the_sum_of_durations():
    """Per-category time and count add up to the table's totals, shares to 1."""
    names = _names()
    df = map_kernels(names.loc[names.index.repeat(names["count"])].assign(
        dur_us=lambda d: d["dur_us"] / d["count"]))
    totals = category_totals(df)
    assert totals["dur_us"].sum() == pytest.approx(names["dur_us"].sum())
    assert totals["count"].sum() == names["count"].sum()
    assert totals["share"].sum() == pytest.approx(1.0)


def test_unmatched_names_are_listed_with_count_and_time():
    """An unknown kernel keeps op None and appears in unmatched() with its total time."""
    df = map_kernels(pd.DataFrame({"name": ["mystery_kernel", "mystery_kernel", "rotary_kernel"],
                                   "kind": ["kernel"] * 3, "stream": [7] * 3,
                                   "dur_us": [2.0, 3.0, 1.0]}))
    assert df["op"].isna().sum() == 2
    assert unmatched(df).to_dict("records") == [{"name": "mystery_kernel", "count": 2,
                                                 "dur_us": 5.0}]
    assert category_totals(df).set_index("category").loc["unmatched", "dur_us"] == 5.0


@pytest.mark.parametrize("fragment, stream, op, category, rule", [
    ("dpsk::grouped_gemm::cuda::m_grouped_fp8_ptp128c::GemmKernel", 7, "grouped_gemm", "gemm",
     "deepgemm_m_grouped_fp8"),
    ("dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel", 23, "grouped_gemm", "gemm",
     "deepgemm_fp8_acc_wgrad_stream"),
    ("dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel", 7, "grouped_gemm", "gemm",
     "deepgemm_fp8_acc"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64", 7, "gemm", "gemm",
     "cublas_sm90_gemm"),
    ("flash::compute_attn_ws<Flash_fwd_kernel_traits", 7, "attention", "attention",
     "flash_attn_fwd"),
    ("flash::FlashAttnBwd<flash::CollectiveMainloopBwd", 7, "attention", "attention",
     "flash_attn_bwd"),
    ("dpsk::ep::internode::dispatch<false, 8, false, 8>", 27, "alltoall_dispatch",
     "communication", "deepep_dispatch"),
    ("dpsk::ep::internode::combine<false, 8, __nv_bfloat16", 27, "alltoall_combine",
     "communication", "deepep_combine"),
    ("layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits<__nv_bfloat16", 7, "rmsnorm", "norm",
     "layer_norm_fwd"),
    ("swiglu_forward_with_weight_and_per_token_cast_to_fp8_with_channels_impl", 7, "swiglu",
     "elementwise", "swiglu"),
    ("per_token_cast_to_fp8_with_channels<__nv_bfloat16", 27, "quantize", "quantize",
     "fp8_cast"),
    ("rotary_kernel", 7, "rope", "elementwise", "rope"),
])
def test_known_deepseek_kernel_names_map_to_their_op(fragment, stream, op, category, rule):
    """Real kernel names of the trace (by fragment and stream) get the expected op."""
    names = _names()
    rows = names[names["name"].str.contains(fragment, regex=False)
                 & (names["stream"] == stream)]
    assert not rows.empty
    df = map_kernels(rows)
    assert set(zip(df["op"], df["category"], df["rule"], strict=True)) == {(op, category, rule)}


def test_norm_rule_records_the_hidden_size_hint():
    """The layer_norm rules capture the compiled hidden size (7168, 1536, 512) as a hint."""
    df = map_kernels(_names())
    hints = set(df.loc[df["category"] == "norm", "hint"])
    assert hints == {"hidden=7168", "hidden=1536", "hidden=512"}


def test_rule_categories_are_declared():
    """Every rule's category is one of CATEGORIES."""
    assert {r.category for r in RULES} <= set(CATEGORIES)


def _table(rows):
    return pd.DataFrame(rows, columns=["stream", "start_us", "dur_us"])


def test_overlap_of_two_streams_matches_the_closed_form():
    """A=[0,10)+[8,12) merges to 12 us; B=[5,20): union 20, overlap 7 (5..12)."""
    result = stream_overlap(_table([(1, 0, 10), (1, 8, 4), (2, 5, 15)]))
    assert result.busy_us_by_stream == {1: 12.0, 2: 15.0}
    assert (result.union_us, result.overlap_us, result.span_us) == (20.0, 7.0, 20.0)


def test_concurrency_levels_sum_to_the_per_stream_busy_time():
    """sum(k * t_k) equals the sum of stream busy times; three streams at once count once."""
    result = stream_overlap(_table([(1, 0, 10), (2, 2, 6), (3, 4, 10), (3, 30, 1)]))
    assert result.concurrency_us == {1: 7.0, 2: 4.0, 3: 4.0}
    weighted = sum(k * t for k, t in result.concurrency_us.items())
    assert weighted == sum(result.busy_us_by_stream.values())
    assert result.overlap_us == 8.0 and result.union_us == 15.0 and result.span_us == 31.0


def test_zero_length_activities_add_no_busy_time():
    """A 0 us memset counts for neither busy time nor overlap."""
    result = stream_overlap(_table([(1, 0, 10), (2, 5, 0)]))
    assert result.busy_us_by_stream == {1: 10.0, 2: 0.0}
    assert result.overlap_us == 0.0


FULL_TRACE = Path(__file__).resolve().parents[2] / "shared" / "reference" / \
    "deepseek_v3_train_trace.json"


@pytest.mark.skipif(not FULL_TRACE.exists(), reason="../shared/reference not beside the repo")
def test_full_deepseek_trace_maps_every_kernel_and_overlap_adds_up():
    """On the real trace: no unmatched kernel, totals equal durations, sum(k*t_k) = busy."""
    from workloads.traces import read_kineto

    df = map_kernels(read_kineto(FULL_TRACE))
    assert unmatched(df).empty
    assert category_totals(df)["dur_us"].sum() == df["dur_us"].sum()
    result = stream_overlap(df)
    weighted = sum(k * t for k, t in result.concurrency_us.items())
    assert weighted == pytest.approx(sum(result.busy_us_by_stream.values()))
    assert result.overlap_us < result.union_us <= result.span_us


# ---------------------------------------------------------------- mapping through operators

H100 = Path(__file__).resolve().parents[1] / "workloads" / "reference" / "h100"


@pytest.fixture(scope="module")
def llama():
    """Both LLaMA-3-8B H100 traces, mapped."""
    from workloads.traces import read_kineto
    return {phase: map_kernels(read_kineto(H100 / f"llama3_8b_layer_{phase}.json"))
            for phase in ("prefill", "decode")}


def _sizes(df, fragment):
    rows = df[df["name"].str.contains(fragment, regex=False)]
    return [json.loads(s) for s in rows["sizes"]], rows


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_every_llama_kernel_maps_through_its_operator(llama, phase):
    """All kernels and memsets of both traces get an op and sizes from their aten operator."""
    df = llama[phase]
    assert (df["mapped_by"] == "operator").all()
    assert df["sizes"].notna().all() and df["map_reason"].isna().all()
    assert set(df["category"]) <= set(CATEGORIES)


def test_llama_gemms_take_their_sizes_from_aten_mm(llama):
    """The fused gate/up projection: aten::mm [[4096, 4096], [4096, 28672]] bf16."""
    sizes, rows = _sizes(llama["prefill"], "nvjet_sm90_tst_320x128")
    assert set(rows["op"]) == {"gemm"} and set(rows["hint"]) == {"aten::mm"}
    assert sizes[0] == {"m": 4096, "n": 28672, "k": 4096, "dtype": "bf16"}


def test_llama_attention_reads_gqa_heads_and_the_causal_flag(llama):
    """cuDNN SDPA: 32 query heads over 8 KV heads; prefill causal, decode not, K/V of 2049."""
    (prefill, *_), _ = _sizes(llama["prefill"], "cudnn_generated")
    (decode, *_), _ = _sizes(llama["decode"], "cudnn_generated")
    assert (prefill["heads"], prefill["kv_heads"], prefill["seqlen"]) == (32, 8, 4096)
    assert prefill["causal"] is True and decode["causal"] is False
    assert (decode["batch"], decode["seqlen"], decode["seqlen_k"]) == (64, 1, 2049)


def test_split_k_reduction_counts_the_main_kernels_splits(llama):
    """cuBLAS's splitKreduce beside a 64x64-tile kernel of 128 CTAs over 64 tiles: 2 splits,
    f32 partial sums added into the bf16 output, in the GEMM category."""
    sizes, rows = _sizes(llama["decode"], "splitKreduce")
    assert set(rows["category"]) == {"gemm"} and set(rows["op"]) == {"elementwise"}
    assert sizes[0] == {"functor": "add", "shape": "64x4096", "inputs": 2, "dtype": "f32",
                        "out_dtype": "bf16", "path": "vectorized"}


def test_elementwise_kernels_keep_strides_dtypes_and_launch_path(llama):
    """silu of the gate half (row stride 28672) runs ATen's generic <128, 4> kernel; the
    bf16 residual add its vectorized<8>; the cat's element size comes from OpaqueType<4u>."""
    df = llama["prefill"]
    (silu, *_), _ = _sizes(df, "silu_kernel")
    assert (silu["path"], silu["vec"], silu["strides"]) == ("generic", 4, "28672,1")
    (add, *_), _ = _sizes(df, "CUDAFunctor_add<c10::BFloat16>")
    assert (add["path"], add["vec"], add["dtype"]) == ("vectorized", 8, "bf16")
    (cat, *_), rows = _sizes(df, "CatArrayBatchedCopy")
    assert cat == {"shapes": "4096x32x64x1;4096x32x64x1", "dim": -1, "dtype": "f32"}
    assert set(rows["category"]) == {"layout"}


def test_decode_kv_cache_copy_writes_through_the_cache_strides(llama):
    """copy_ into the KV cache: destination strides of a 2049-slot cache, source a view."""
    sizes, _ = _sizes(llama["decode"], "gpu_kernel_impl_nocast<at::native::direct_copy")
    assert len(sizes) == 4
    assert {(s["dtype"], s["out_dtype"], s["out_strides"]) for s in sizes} == \
        {("bf16", "bf16", "2098176,262272,128,1")}


def _op_row(name, dims, types, kernel="k", concrete=None, strides=None):
    entry = {"name": name, "id": 1, "dims": dims, "types": types,
             "concrete": concrete or [""] * len(dims)}
    if strides is not None:
        entry["strides"] = strides
    return {"name": kernel, "kind": "kernel", "grid": (1, 1, 1), "bytes": 0,
            "op_stack": json.dumps([entry])}


def test_scalar_operands_become_alpha_and_types_promote():
    """int64 / 0-dim folded into the functor -> f32 out with one input; sub's alpha negated;
    an in-place op writes through its own strides."""
    from workloads.traces.operators import map_operator

    div, _ = map_operator(_op_row("aten::div", [[64], []], ["long int", "long int"],
                                  kernel="BUnaryFunctor<float"), [])
    assert (div.sizes["inputs"], div.sizes["dtype"], div.sizes["out_dtype"]) == \
        (1, "i64", "f32")
    sub, _ = map_operator(_op_row("aten::sub", [[8, 4], [8, 4], []],
                                  ["float", "float", "Scalar"], concrete=["", "", "2"]), [])
    assert sub.sizes["alpha"] == -2.0
    mul_, _ = map_operator(_op_row("aten::mul_", [[8, 4], [4]], ["float", "float"],
                                   strides=[[1, 8], [1]]), [])
    assert (mul_.sizes["out_strides"], mul_.sizes["strides"]) == ("1,8", "1,8;0,1")


def test_operators_that_give_no_op_say_why():
    """An f32 mm (no full-precision GEMM op) and an unknown operator keep a reason; a trace
    without shapes says it was recorded without them."""
    from workloads.traces.operators import map_operator

    mapped, reason = map_operator(_op_row("aten::mm", [[8, 4], [4, 2]], ["float", "float"]),
                                  [])
    assert mapped is None and "f32 operands" in reason
    mapped, reason = map_operator(_op_row("aten::gelu", [[8, 4]], ["float"]), [])
    assert mapped is None and "no operator rule for aten::gelu" in reason
    shapeless = {"name": "k", "kind": "kernel", "grid": (1, 1, 1),
                 "op_stack": json.dumps([{"name": "MyFunction", "id": 3}])}
    mapped, reason = map_operator(shapeless, [])
    assert mapped is None and "record_shapes" in reason
