"""The simulator's own policies as config: `[fidelity]` (how sampled fidelity shortens a
launch) and `[kernels]` (launch choices of the op builders), beside the hardware blocks.

What it models
--------------
Nothing of the hardware: these blocks say which shortcuts sampled fidelity may take and
with which thresholds (`FidelitySpec`, read by `fidelity`, `sampling`, `chip_slice`,
`trace_synthesis` and `work_synthesis` in `simulator.runner`), and which kernel variants
the op builders launch (`KernelsSpec`, read by `workloads.ops.attention` and
`workloads.ops.gemm`). Both are part of every resolved config (`GpuConfig.fidelity`,
`GpuConfig.kernels`), so `--set fidelity.chip_slicing=false` overrides a key, a sweep varies
it like any preset key, and `config.json` beside every result records it.

The defaults live here, one per field, each with the measurement it rests on (the `source`
of its field; figures against `--fidelity full` on h800_sxm unless stated, as in
docs/fidelity.md); a preset may set any of them in its own `[fidelity]` / `[kernels]` table.

Left out: the op-level extrapolation's own constants (sample points of
`workloads.ops.gemm_sampling` and `workloads.ops.attention_sampling`), which define the
extrapolation rather than switch it. Units: waves (whole-chip waves of CTAs unless named
otherwise), CTAs, SMs, keys, fractions.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

from simulator.framework.config import COUNT_MAXIMUM, Problem, SpecMixin, spec_field

GemmTileRule = Literal["n128", "n256", "waves", "fill", "last_wave", "last_wave_pairs"]
SplitCombine = Literal["kernel", "inline"]
DecodeAttention = Literal["fa3", "xqa"]
AttentionSchedule = Literal["plain", "fa3"]
CommCacheHints = Literal["plain", "deepep", "deepep_evict_first"]
GemmEpilogue = Literal["tma", "registers"]
GemmL2Policy = Literal["normal", "stream_weights"]
GemmSm80KTile = Literal["32", "64", "one_wave"]
L2Start = Literal["cold", "warm-inputs"]
GEMM_TILE_RULES: tuple[str, ...] = typing.get_args(GemmTileRule)
"""The GEMM tile rules `workloads.ops.gemm.choose_tiles` knows (its module docstring)."""
SPLIT_COMBINES: tuple[str, ...] = typing.get_args(SplitCombine)
COMM_CACHE_HINTS: tuple[str, ...] = typing.get_args(CommCacheHints)
GEMM_EPILOGUES: tuple[str, ...] = typing.get_args(GemmEpilogue)
"""How the Hopper GEMM template writes C (`KernelsSpec.gemm_epilogue`)."""
"""Cache qualifiers of the collectives' chunk accesses (`KernelsSpec.comm_cache_hints`)."""
"""How split-KV attention partials are merged (`KernelsSpec.attention_split_combine`)."""
GEMM_L2_POLICIES: tuple[str, ...] = typing.get_args(GemmL2Policy)
"""The L2 cache policies of the Hopper GEMM's TMA loads (`KernelsSpec.gemm_l2_policy`)."""
GEMM_SM80_K_TILES: tuple[str, ...] = typing.get_args(GemmSm80KTile)
"""The k-tile rules of the sm_80 GEMM (`KernelsSpec.gemm_sm80_k_tile`)."""
MAX_WAVES = float(COUNT_MAXIMUM)
"""The ceiling of a wave count: far beyond any grid worth sampling."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FidelitySpec(SpecMixin):
    """Which shortcuts sampled fidelity may take, and their thresholds (module docstring;
    `simulator.runner.fidelity` for how they combine into a launch's plan)."""

    # -- chip slice (`simulator.runner.chip_slice`) ------------------------------------------
    chip_slicing: bool = spec_field(
        "Time a grid of alike CTAs (2 to f x chip_slice_max_slice_waves waves) whole on a "
        "slice of 1/f of the chip, and a 2-D grid whose last row differs on a row slice "
        "(false: such grids are wave-sampled or timed in full on the whole chip).",
        default=True,
        source="quantize 4096x7168 sliced -0.8 % against full where wave-sampled reads "
               "-4.9 %, for 1.4 instead of 4.4 CPU s")
    chip_slice_factors: tuple[int, ...] = spec_field(
        "Slice factors f tried, first preferred: the first that divides every unit count "
        "(SMs, L2 slices and capacity, HBM channels or stacks, L3) is used.",
        default=(4, 2), minimum=2,
        source="4 divides every unit count of h100_sxm/h800_sxm; 2 for parts it does not")
    chip_slice_min_sms: int = spec_field(
        "Compute SMs a slice keeps at least (f is lowered, or no slice).",
        default=16, minimum=1,
        source="a slice of fewer SMs gains little and its waves vary more")
    chip_slice_min_waves: float = spec_field(
        "Whole-chip waves a grid needs to be sliced; fewer are timed in full on the whole "
        "chip.", default=2.0, minimum=0, maximum=MAX_WAVES,
        source="below two waves a slice read up to 3.5 % off (vLLM RoPE 1024x8192 on "
               "h100_sxm); from two, RMSNorm/quantize/SwiGLU within 2 %")
    chip_slice_max_slice_waves: float = spec_field(
        "Waves of the slice (whole-chip waves / f) up to which a grid is sliced and every "
        "CTA of the slice timed; larger grids are wave-sampled on the whole chip.",
        default=16.0, above=0, maximum=MAX_WAVES,
        source="16 slice waves at f = 4 are the SM work of 4 whole-chip waves, the first "
               "replay of wave sampling; against full on h800_sxm (20 communication SMs) "
               "quantize 8192x7168 (28 waves) sliced +0.18 % where wave-sampled read "
               "-2.94 %, residual add 2 x 8192x7168 +0.38 % (-2.16 %), 9 x 8192x7168 "
               "+0.36 % (+3.38 %) (docs/fidelity.md); wave-sampling the slice instead "
               "read -5.7 % (residual add 4096x7168) and +3.6 % (quantize 4096x16384)")
    chip_slice_footprint_tolerance_fraction: float = spec_field(
        "A grid is sliced when the slice's CTAs touch at least (1 - this) / f of the "
        "grid's distinct sectors (no data shared along a grid dimension).",
        default=0.01, minimum=0, maximum=1,
        source="rounding of partial rows and periods; shared weight vectors miss by far "
               "more")

    # -- trace and work synthesis (exact shortcuts of the functional run) -------------
    trace_synthesis: bool = spec_field(
        "Build the traces of CTAs that repeat the first ones' events with affine addresses "
        "instead of running them (`simulator.runner.trace_synthesis`); the same trace, bit for "
        "bit, checked on two real CTAs per range.",
        default=True, source="exact; RMSNorm 4096x7168 10.8 -> 6.5 CPU s")
    trace_synthesis_first_ctas: int = spec_field(
        "CTAs traced for real before any is synthesized (a wave when that is fewer, one "
        "per SM when that is more): the evidence the template is checked on.",
        default=256, minimum=1,
        source="enough rows of a 2-D grid to find its strides and periods up to 32")
    trace_synthesis_wrap: bool = spec_field(
        "Use a launch's declared wrap in x (`simulate_kernel(cta_wrap_x=Q)`: an operand "
        "indexed by x mod Q, RoPE's cos/sin rows by row mod seqlen) in its template: the "
        "places that start over every Q CTAs are read off CTA x = Q and checked on the "
        "probes like the rest; without it such a grid fails the probes past Q and is timed "
        "whole.",
        default=True, source="RoPE 8192x8256 at 4096 positions, h800_sxm with 20 "
        "communication SMs: row-sliced 94.97 against full 95.07 us (-0.10 %, HBM bytes "
        "+0.03 %), 4.3 against 17.0 CPU s of the op")
    work_synthesis: bool = spec_field(
        "Trace a few CTAs per work class of a kernel launched with a `CtaWork` (persistent "
        "GEMMs) and synthesize the others (`simulator.runner.work_synthesis`); the same trace.",
        default=True, source="exact; q_a_proj 4096x1536x7168 fp8 14.1 -> 12.0 CPU s")
    work_synthesis_probe_units: int = spec_field(
        "Units per work class traced beyond the evidence and checked against their "
        "synthesis.", default=2, minimum=0,
        source="the last and the middle unit: the two a wrong stride shows first")
    work_synthesis_max_traced_fraction: float = spec_field(
        "Work synthesis is not tried when its units to trace exceed this share of the "
        "grid's units.", default=0.5, above=0, maximum=1,
        source="beyond half the grid, tracing all costs about the same")

    # -- wave sampling (`simulator.runner.sampling`) -----------------------------------------
    wave_sampling_min_waves: float = spec_field(
        "Waves a grid needs to be wave-sampled; a grid of fewer that no slice takes is "
        "timed in full.", default=8.0, minimum=1, maximum=MAX_WAVES,
        source="below 8 waves the replays cost about as much as the full run, and "
               "extrapolating from fewer waves read up to +6.6 % (RMSNorm 4096x7168)")
    wave_sampling_start_waves: int = spec_field(
        "Waves of the first replay (k); at least 4 for two wave marginals.",
        default=4, minimum=4,
        source="the fewest waves whose last two marginals exclude the first and last wave")
    wave_sampling_max_waves: int = spec_field(
        "Waves of the second replay (k_max) when the first is not steady, lowered to leave "
        "a wave to extrapolate.", default=7, minimum=4,
        source="4 + 7 waves of replay at most; growing one wave at a time cost 4+5+6+7")
    wave_sampling_steady_tolerance_fraction: float = spec_field(
        "The first replay is steady when its last two wave marginals differ by less than "
        "this share.", default=0.01, minimum=0, maximum=1,
        source="a 3 % tolerance read RMSNorm 4096x7168 +6.6 % against full")
    steady_l2_preconditioning: bool = spec_field(
        "Start the wave replays of a grid whose footprint outgrows the L2 from an L2 full "
        "of lines of no kernel, dirty in the share the grid's evictions have "
        "(`CachedMemory.precondition_l2`).", default=True,
        source="saxpy 16M elements on h100_sxm -29 % -> +1.7 %, SwiGLU 32768x2048 "
               "-30 % -> +1.7 %")
    l2_start: L2Start = spec_field(
        "What the L2 holds when a launch starts: \"cold\" (empty, a kernel timed alone "
        "after a flush) or \"warm-inputs\" (the pointer arguments it loads from resident "
        "and dirty, as just written by the kernel before it, when they fit in the L2 "
        "together; `simulator.runner.l2_start`).", default="cold",
        source="cold: ncu flushes the caches before each measured launch; warm-inputs: "
               "the kernels of a profiled layer read what the one before wrote "
               "(docs/accuracy.md, LLaMA-3-8B layer traces)")
    snapshot_growth: bool = spec_field(
        "The k_max-wave replay continues a copy of the k-wave one taken before the two "
        "differ instead of starting cold (`simulator.runner.replay_session`).",
        default=True, source="exact (the same simulation up to the copy); saves the "
                             "first k waves of the second replay")
    snapshot_lead_waves: float = spec_field(
        "The copy is taken once all but this many waves of the k waves' CTAs are "
        "dispatched.", default=0.5, minimum=0, maximum=MAX_WAVES,
        source="before the k-wave replay's last CTAs run out, after most of its work")

    # -- contention between overlapping kernels (`simulator.runner.contention`) --------
    contention_window_us: float = spec_field(
        "Microseconds a compute launch and a collective are run together to measure how "
        "much each slows the other (the run ends sooner when either launch ends); each "
        "alone is then compared at the same progress (share of its warp instructions "
        "issued). 0: no limit, until the first of the two ends.",
        default=100.0, minimum=0,
        source="the default run's pairs: the residual add + combine (284.5 us together "
               "without a limit) reads stretches 1.1179 / 1.2413 against 1.0988 / 1.2073 "
               "in 42.1 against 150.7 s CPU, the layer +0.04 %; its other pairs end before "
               "100 us, unchanged; windows of 25 and 50 us moved the collective's stretch "
               "by up to 0.22 on the GEMM pairs (benchmarks/contention_window.py, "
               "docs/fidelity.md)")

    def problems(self) -> tuple[Problem, ...]:
        """Thresholds of wave sampling that could not replay the waves they name."""
        found: list[Problem] = []
        if self.wave_sampling_max_waves < self.wave_sampling_start_waves:
            found.append(("wave_sampling_max_waves", self.wave_sampling_max_waves,
                          f">= wave_sampling_start_waves ({self.wave_sampling_start_waves})",
                          "second replay shorter than the first"))
        if self.wave_sampling_min_waves <= self.wave_sampling_start_waves:
            found.append(("wave_sampling_min_waves", self.wave_sampling_min_waves,
                          f"> wave_sampling_start_waves ({self.wave_sampling_start_waves})",
                          "no wave left to extrapolate"))
        return tuple(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelsSpec(SpecMixin):
    """Launch choices of the op builders (module docstring), each chosen on FIT rows."""

    attention_split_combine: SplitCombine = spec_field(
        "How split-KV attention partials are merged: \"kernel\" (FA3: a combine kernel "
        "launched after) or \"inline\" (the last CTA of each row block merges them, as "
        "decode kernels with a multi-block mode do); MLA keeps FlashMLA's combine kernel.",
        default="inline",
        source="decode-attention FIT rows (workloads.calibration.attention_accuracy "
               "--fit-combine)")
    decode_attention: DecodeAttention = spec_field(
        "The program decode attention (one query token, head dim 128, 16-bit KV, no MLA) "
        "runs on sm_90a: \"fa3\" (the FlashAttention-3-style template with the choices "
        "below) or \"xqa\" (TensorRT-LLM's XQA decode kernel, `templates.xqa`, for "
        "GQA/MQA shapes, kv_heads < heads; MHA shapes run the \"fa3\" template, since "
        "TensorRT-LLM's runtime runs its masked-MHA (MMHA) kernel for them, which is not "
        "modelled).",
        default="xqa",
        source="decode-attention FIT rows, all 344 (workloads.calibration."
               "attention_accuracy --kernel fa3|xqa --subset fit): fa3 15.7 %, xqa 14.2 % "
               "MAPE, the lower chosen as declared (docs/accuracy.md, decode attention)")
    attention_packed_decode_ctas_per_sm: int = spec_field(
        "CTAs per SM of packed GQA decode attention (1, or 2 where two fit as for unpacked "
        "decode).", default=1, minimum=1, maximum=2,
        source="210 GQA decode FIT rows: 28.8 % MAPE with one per SM, 39.7 % with two "
               "(attention_accuracy --fit-gqa)")
    attention_packed_decode_whole_pages: bool = spec_field(
        "Packed GQA decode CTAs compute whole pages of the paged KV cache (a cache shorter "
        "than a page is one page-sized block, masked past its end), not blocks cut to the "
        "keys rounded up to 16.", default=True,
        source="210 GQA decode FIT rows 20.8 -> 16.3 % MAPE (attention_accuracy "
               "--fit-whole); MHA decode keeps cut blocks")
    attention_kv_page_keys: int = spec_field(
        "Keys per page of the paged KV cache decode attention reads (seqlen_q <= 64, not "
        "MLA): 0 for contiguous K/V, else a multiple of 16 (a block-table load before each "
        "block's copies, whole page boxes read); `--kv-page` sets it per op.",
        default=64, minimum=0,
        source="TensorRT-LLM's tokens_per_block; 344 decode FIT rows: contiguous 19.4 %, "
               "paged 17.1 % MAPE (attention_accuracy --fit-paged)")
    attention_schedule: AttentionSchedule = spec_field(
        "Consumer mainloop of the FlashAttention-3-style forward template for prefill "
        "(seqlen_q above 64; decode and MLA keep \"plain\"): \"plain\" (per KV block QK^T, "
        "wait, softmax, P.V, wait) or \"fa3\" (FA3's IntraWGOverlap, S_(n) = Q K_n^T issued "
        "with the previous block's P.V and its softmax run under that P.V, K and V on "
        "separate mbarriers, and the consumer warpgroups' GEMM issues ping-ponged through "
        "token mbarriers, FA3's warp_scheduler_barrier_sync/arrive).",
        default="fa3",
        source="declared rule (workloads.ops.attention module docstring): the lower "
               "absolute error on the FIT row, the LLaMA-3-8B prefill layer's attention "
               "kernel on our H100 (258.3 us): fa3 255.1 us (-1.2 %), plain 294.0 us "
               "(+13.8 %)")
    comm_cache_hints: CommCacheHints = spec_field(
        "Cache qualifiers of the collectives' chunk loads and stores "
        "(`workloads/kernels/comm/comm_pipeline.cu`): \"plain\" ld/st; \"deepep\" "
        "ld.global.nc.L1::no_allocate.L2::256B and st.global.L1::no_allocate; "
        "\"deepep_evict_first\" those with an L2::evict_first cache policy on every chunk "
        "access (a what-if beyond DeepEP).",
        default="deepep",
        source="DeepEP csrc/kernels utils: LD_NC_FUNC / ST_NA_FUNC "
               "(../shared/notes/deepseek-deployment.md)")
    gemm_tile_rule: GemmTileRule = spec_field(
        "GEMM tile rule (`workloads.ops.gemm.choose_tiles`): n128, n256, waves, fill, "
        "last_wave or last_wave_pairs; an op's `--rule` wins.",
        default="last_wave_pairs",
        source="lowest MAPE on the 42 GEMM FIT rows (gemm_accuracy --fit): 15.9 % "
               "against 17.1-30.8 % for the others")
    gemm_epilogue: GemmEpilogue = spec_field(
        "How the Hopper GEMM template writes C (`workloads.kernels.templates.gemm`): "
        "\"tma\" stages the tile in shared memory and stores it with TMA "
        "(cp.async.bulk.tensor ... bulk_group); \"registers\" stores the accumulator "
        "fragments with 4-byte st.global (the program measured in "
        "workloads/reference/h100/template_ops.csv). Grouped GEMMs and C rows that are no "
        "16-byte multiple always take \"registers\".",
        default="tma",
        source="CUTLASS 3 sm90 collective epilogues (Sm90TmaWarpSpecialized*: smem staging "
               "+ SM90_TMA_STORE) and DeepGEMM's sm90 FP8 GEMM (../shared/notes/"
               "deepgemm-fp8.md, Epilogue: STSM into smem_D, tma_store_fence, TMA store)")
    gemm_l2_policy: GemmL2Policy = spec_field(
        "L2 cache policy of the Hopper GEMM template's operand TMA loads "
        "(`workloads.kernels.templates.gemm`): \"normal\" no .L2::cache_hint (lines take "
        "the normal eviction class); \"stream_weights\" B (the weights) under "
        "createpolicy.fractional.L2::evict_first 1.0 and A (the activations, and the "
        "DeepSeek scale_a chunks) under L2::evict_last 1.0, each TMA load carrying "
        ".L2::cache_hint (a what-if, as CUTLASS's and DeepGEMM's TMA cache-hint argument "
        "offer). Grouped and DeepSeek-scaled GEMMs take it too.",
        default="normal",
        source="DeepGEMM's sm90 FP8 GEMM issues its TMA loads with EVICT_NORMAL "
               "(../shared/notes/deepgemm-fp8.md, Pipeline); in a GEMM's own lines that is "
               "the normal class no hint gives (models.cached_memory)")
    gemm_sm80_k_tile: GemmSm80KTile = spec_field(
        "K depth of the sm_80 GEMM's CTA tile (`workloads.ops.gemm_sm80.choose_tiles`): "
        "\"32\" 32 elements a stage, 5 stages (cuBLAS's ..._128x128_ldg8_f2f_stages_32x5); "
        "\"64\" 64 elements, 3 stages (..._128x128_ldg8_f2f_stages_64x3: 128 B of each "
        "operand row a k-tile); \"one_wave\" 64 where the output tiles are at most the "
        "compute SMs (one CTA an SM holds the grid, so the second CTA slot the 32-deep "
        "ring leaves room for stays idle), 32 elsewhere. An op's `k_tile` wins.",
        default="one_wave",
        source="declared rule (workloads.ops.gemm_sm80 module docstring): the lowest MAPE "
               "on the 10 LLMCompass A100 GEMM FIT rows (llmcompass_a100_accuracy --family "
               "gemm --set kernels.gemm_sm80_k_tile=...): one_wave 17.7 %, 32 22.7 %, "
               "64 41.2 %")

    def problems(self) -> tuple[Problem, ...]:
        """A KV page must hold whole 16-key blocks."""
        if self.attention_kv_page_keys % 16:
            return (("attention_kv_page_keys", self.attention_kv_page_keys,
                     "0 or a multiple of 16", "not a whole number of 16-key blocks"),)
        return ()
