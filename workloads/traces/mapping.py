"""Map profiled kernels to simulator ops: through the CPU operators that launched them where
the trace records their shapes, else by a data table of kernel-name rules.

`map_kernels(df)` first asks `workloads.traces.operators` (the innermost aten operator
around the launch, with its recorded shapes, dtypes, strides and scalars): a kernel it maps
gets the registry op kind (`op`), its builder sizes as JSON (`sizes`), a `category`, the
operator rule (`rule`), the operator's name (`hint`) and `mapped_by` "operator". Every other
kernel keeps the reason the operators did not give an op (`map_reason`) and goes through the
kernel-name rules below (`mapped_by` "kernel name", `sizes` None): that is the path of a
trace recorded without shapes, such as DeepSeek's.

A `MappingRule` is a regex searched in the kernel name, optionally restricted by hints on
other columns (`where`: column -> accepted values, e.g. the stream), and gives the
simulator op kind (`op`, the `workloads.layer` op names where one exists: gemm,
grouped_gemm, attention, rmsnorm, swiglu, rope, quantize, alltoall_dispatch, ...) and a
coarser `category`. The first rule that matches wins, so specific rules come first.
Named regex groups become the `hint` column (`name=value;...`), e.g. the hidden size
a norm kernel was compiled for. A row that no rule matches keeps `op`, `category` and
`rule` None and is listed by `unmatched`; nothing is dropped. Memcpy/memset activities
are matched by their `kind` through the same table (their names are "Memcpy ...").
The rules cover the kernel names of DeepSeek's V3 training trace (DeepGEMM FP8 grouped
GEMMs, cuBLAS sm90_xmma, FlashAttention-3, DeepEP internode all-to-all, its FP8 cast and
MoE routing kernels, PyTorch's at::native elementwise/reduce kernels) and, for traces of
PyTorch 2.11 recorded without shapes, cuBLAS's nvjet GEMMs and split-K reduction, cuDNN's
SDPA kernels, ATen's layer-norm and cat kernels.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pandas as pd

from workloads.traces.operators import map_operators

CATEGORIES = ("gemm", "attention", "norm", "elementwise", "quantize", "moe_routing",
              "communication", "layout", "reduction", "memcpy", "setup")


@dataclass(frozen=True, slots=True)
class MappingRule:
    """Kernel-name regex (+ column hints) -> simulator op kind and category."""

    name: str
    pattern: str
    op: str
    category: str
    where: dict = field(default_factory=dict)

    def matches(self, row: dict) -> re.Match | None:
        """The regex match on `row['name']` when every `where` hint holds too."""
        if any(row.get(column) not in accepted for column, accepted in self.where.items()):
            return None
        return re.search(self.pattern, row["name"])


R = MappingRule
RULES: tuple[MappingRule, ...] = (
    # GEMMs: DeepGEMM-style FP8 grouped kernels (persistent, 112 CTAs) and cuBLAS BF16.
    R("deepgemm_m_grouped_fp8", r"grouped_gemm::cuda::m_grouped_fp8\w*::GemmKernel",
      "grouped_gemm", "gemm"),
    R("deepgemm_fp8_acc_wgrad_stream", r"grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel",
      "grouped_gemm", "gemm", {"stream": (23,)}),
    R("deepgemm_fp8_acc", r"grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel",
      "grouped_gemm", "gemm"),
    R("deepgemm_fp8", r"grouped_gemm::cuda::(?P<variant>\w+)::GemmKernel", "grouped_gemm",
      "gemm"),
    R("deepgemm_transpose", r"grouped_gemm::cuda::utils::transpose", "transpose", "layout"),
    R("deepgemm_tensormaps", r"fill_tensormaps_kernel", "setup", "setup"),
    R("cublas_sm90_gemm", r"sm90_xmma_gemm_(?P<types>\w+?)_(?P<layout>[nt]{2})_n_tilesize"
      r"(?P<tile>\d+x\d+x\d+)", "gemm", "gemm"),
    R("cutlass_gemm", r"cutlass\w*gemm|\bgemm\w*kernel", "gemm", "gemm"),
    R("cublas_nvjet_gemm", r"^nvjet_sm\d+_\w+?_(?P<tile>\d+x\d+)_", "gemm", "gemm"),
    R("cublaslt_splitk_reduce", r"cublasLt::splitKreduce_kernel", "splitk_reduce", "gemm"),
    # Attention: FlashAttention-3 (Hopper, warp-specialised) forward and backward.
    R("flash_attn_bwd_pre", r"flash::FlashAttnBwdPreprocess", "attention", "attention"),
    R("flash_attn_bwd_post", r"flash::FlashAttnBwdPostprocess", "attention", "attention"),
    R("flash_attn_bwd", r"flash::FlashAttnBwd<", "attention", "attention"),
    R("flash_attn_fwd", r"flash::compute_attn|flash_fwd|flash::FlashAttnFwd", "attention",
      "attention"),
    R("cudnn_sdpa_fwd", r"cudnn_generated_\w*sdpa\w*fprop", "attention", "attention"),
    # Norms: V3's norms are RMSNorm on hidden 7168, q_lora 1536 and kv_lora 512.
    R("layer_norm_fwd", r"layer_norm::ln_fwd_kernel<.*?unsigned int, (?P<hidden>\d+)u",
      "rmsnorm", "norm"),
    R("layer_norm_bwd", r"layer_norm::ln_bwd_(?:finalize_)?kernel<.*?(?P<hidden>\d{3,})u",
      "rmsnorm", "norm"),
    R("rmsnorm", r"rms_?norm", "rmsnorm", "norm"),
    R("torch_layer_norm", r"at::native::\(anonymous namespace\)::\w*layer_norm_kernel<",
      "layernorm", "norm"),
    # Expert-parallel communication (DeepEP internode kernels on 20 SMs, stream 27).
    R("deepep_dispatch", r"ep::internode::dispatch<", "alltoall_dispatch", "communication"),
    R("deepep_combine", r"ep::internode::combine<", "alltoall_combine", "communication"),
    R("deepep_notify", r"ep::internode::(?:notify_dispatch|cached_notify)<",
      "alltoall_notify", "communication"),
    R("nccl", r"nccl\w*Kernel|ncclDevKernel", "allreduce", "communication"),
    # MoE routing: top-k, expert counting and layouts.
    R("deepep_layout", r"ep::cuda::get_dispatch_layout", "moe_gating", "moe_routing"),
    R("moe_routing", r"get_fused_mapping|clean_and_count_expert|topk_sum_and_topk_idx|"
      r"unique_group_indices|aux_fi_impl|sbtopk::gatherTopK", "moe_gating", "moe_routing"),
    # Fused activations, then FP8 casts (a fused swiglu+cast counts as swiglu).
    R("swiglu", r"swiglu", "swiglu", "elementwise"),
    R("rope", r"rotary_kernel|rotary|rope", "rope", "elementwise"),
    R("fp8_cast", r"per_token_cast|per_channel_cast|cast_back|expand_to_fused_with_scales",
      "quantize", "quantize"),
    R("moe_weighted_reduce", r"cuda::reduce_fused_impl", "moe_combine_reduce", "reduction"),
    R("batched_transpose", r"batched_transpose", "transpose", "layout"),
    R("torch_cat", r"at::native::\(anonymous namespace\)::CatArrayBatchedCopy", "cat",
      "layout"),
    R("tensor_copy", r"_copy_tensor_kernel|direct_copy_kernel_cuda", "copy", "layout"),
    R("torch_add", r"at::native::\w*elementwise_kernel\w*<.*CUDAFunctor(?:OnSelf)?_add",
      "residual_add", "elementwise"),
    R("torch_reduce", r"at::native::reduce_kernel", "reduce", "reduction"),
    R("torch_elementwise", r"at::native::|elementwise_kernel|at6native",
      "elementwise", "elementwise"),
    # Copies and fills issued by the runtime.
    R("memcpy", r"^Memcpy", "memcpy", "memcpy", {"kind": ("memcpy",)}),
    R("memset", r"^Memset", "memset", "memcpy", {"kind": ("memset",)}),
)
del R


MAPPED_COLUMNS = ("op", "category", "rule", "hint", "sizes", "mapped_by", "map_reason")


def map_kernels(df: pd.DataFrame, rules: tuple[MappingRule, ...] = RULES) -> pd.DataFrame:
    """A copy of `df` with `MAPPED_COLUMNS` (module docstring; None where nothing matched)."""
    out = df.copy()
    records = df.to_dict("records")
    by_operator = map_operators(records)
    mapped = []
    for row, found, reason in zip(records, by_operator.mapped, by_operator.reasons,
                                  strict=True):
        if found is not None:
            mapped.append((found.op, found.category, found.rule, found.operator,
                           json.dumps(found.sizes, sort_keys=True), "operator", None))
            continue
        op, category, rule, hint = _map_row(row, rules)
        mapped.append((op, category, rule, hint, None, "kernel name" if rule else None,
                       reason))
    for i, column in enumerate(MAPPED_COLUMNS):
        out[column] = [m[i] for m in mapped]
    return out


def _map_row(row: dict, rules) -> tuple:
    for rule in rules:
        match = rule.matches(row)
        if match:
            hint = ";".join(f"{k}={v}" for k, v in match.groupdict().items() if v is not None)
            return rule.op, rule.category, rule.name, hint or None
    return None, None, None, None


def unmatched(df: pd.DataFrame) -> pd.DataFrame:
    """Distinct unmatched kernel names with `count` and `dur_us` (total), longest first."""
    rest = df[df["rule"].isna()]
    table = rest.groupby("name", as_index=False).agg(count=("dur_us", "size"),
                                                     dur_us=("dur_us", "sum"))
    return table.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)


def category_totals(df: pd.DataFrame) -> pd.DataFrame:
    """Per category (unmatched as `unmatched`): `count`, `dur_us` and `share` of the total."""
    cats = df["category"].fillna("unmatched")
    table = df.assign(category=cats).groupby("category", as_index=False).agg(
        count=("dur_us", "size"), dur_us=("dur_us", "sum"))
    total = table["dur_us"].sum()
    table["share"] = table["dur_us"] / total if total else 0.0
    return table.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)
