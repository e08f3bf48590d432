"""GEMM accuracy of `ptxsim op gemm` against measured H100 SXM GEMM latencies.

Reference: `aiconfigurator_h100_sxm_gemm_subset.csv` (beside this module; its `#` lines
name the source: NVIDIA aiconfigurator, TensorRT-LLM GEMMs measured on an H100 80GB
HBM3), bf16, fp8 (per-tensor scaling) and fp8_block (1x128 activation and 128x128 weight
block scales, DeepSeek-V3's recipe, simulated with `--scaling deepseek`: the template the
DeepSeek-V3 layer runs) rows with m in {1, 16, 128, 512, 1024, 2048, 4096} and n, k in
{4096, 8192}: 28 rows per family (the `dtype` column holds the family). fp8_block was added
on 2026-11-26 (sixth stop), after the launch overhead and the tile rule were chosen, so
neither fit used its rows (`launch_fit` keeps to `LAUNCH_FIT_FAMILIES`).

Declared split (fixed before any number was looked at): within each dtype, rows in file
order; even positions (0, 2, 4, ...) are the FIT subset, odd positions the HELD-BACK
subset. The fit subset serves two things only: `launch.kernel_overhead_us`, fitted by
`workloads.calibration.launch_fit` on the fit rows with m <= 16 (with small decode-
attention fit rows), and the choice among the template heuristics of
`workloads.ops.gemm.TILE_RULES` (`--fit`: the rule with the lowest MAPE over the fit rows
becomes `workloads.ops.gemm.DEFAULT_RULE`; about 7 minutes per rule on one core: on
2026-11-26 over the 28 bf16/fp8 fit rows n128 22.7 %, n256 26.8 %, waves 18.1 %, fill
18.4 %, so "waves"; on 2026-11-27 over the 42 fit rows of the three families n128 19.6 %,
n256 30.8 %, waves 18.2 %, fill 17.5 %, last_wave 17.1 %, so "last_wave").
There are no per-shape or per-dtype factors. MAPE and Pearson r are reported per dtype on
the held-back rows.

What the held-back rows show (h100_sxm, sampled, rule "waves"; see the baseline). Two
memory-model fixes and the sustained clock moved them; none is fitted to these rows. (1) The
L2 slices' bandwidth is measured: ncu on an H100 reads the L2's peak as 7680 B per L2 cycle
at a 1.70 GHz L2 clock (`workloads/reference/h100/gemm_ncu_l2.csv`), 89 B per SM cycle per
slice at the preset clock (it was an A100-derived 64, which bound the template's TMA loads:
bf16 MAPE 34.3 -> 16.4 %, fp8 15.1 -> 22.6 %). (2) An L2 slice picks its set by a hash of the line
(`models.cached_memory_layout.l2_set_of_line`); with line % sets the operand rows 16 KiB
apart shared 2 of 256 sets and large GEMMs re-read their operands from HBM (bf16
4096x8192x8192: 2.56 GB for 192 MB; bf16 MAPE 16.4 -> 14.4 %, fp8 22.6 -> 25.7 %).
(3) The SM clock under tensor load (`models.sustained_clock`): each launch is re-timed at
the clock its tensor busy fraction sustains under the power limit, f = min(1.83, 1.55 GHz /
(u x ratio)^(1/3)), ratio 1.218 for fp8, fitted by `workloads.calibration.clock_fit` on ncu's
in-kernel clocks of cuBLAS GEMMs on our H100 (`gemm_ncu_l2.csv`, RMS 30 MHz), never on these
rows. Held-back: bf16 MAPE 14.4 -> 14.7 %, fp8 25.7 -> 20.1 % (28 rows: 20.1 -> 17.4 %).
The clock the simulated launches sustain against ncu's on the shapes both have: bf16
2048x4096x4096 1.63 (ncu 1.61) GHz, 4096x4096x8192 1.58 (1.61); fp8 2048x4096x4096 1.55
(1.64), 4096x4096x8192 1.51 (1.49); at m = 512 the template's tensor pipes are busy too
little for the cap (1.83, ncu 1.72-1.73).

What is left. bf16 rows with m <= 16 (weights streamed from HBM plus the launch overhead)
read 1-19 % high; they keep the preset clock (tensor busy below the cap). The compute-bound
bf16 rows (m >= 1024) moved from -12..+1 % to -2..+12 %: the template at the preset clock
matched cuBLAS at m = 2048 (-0.6 %) although cuBLAS ran at 1.61 GHz there (ncu), so per
cycle the template is slower than cuBLAS on those shapes, and at its sustained clock (about
1.6 GHz) it now reads 11 % high; at 4096x4096x8192 it reads +1.1 % (was -12.4 %). The misses
are 512x4096x4096 (+55 %) and 128x4096x8192 (+52 %); ncu names what cuBLAS does there that the
template does not: every kernel is a 2-CTA cluster with TMA multicast (one operand's L2 reads
halved; not in the ISA), and m = 128 runs 64x64 tiles on 128 SMs where the template's 128x128
tiles occupy 32 (rule "fill" tries small tiles; without multicast they do not help, see
`workloads.ops.gemm`). fp8 rows read 3-29 % low (were 3-41 %). The template's fp8 kernel at the
preset clock was near cuBLAS's own: ncu kernel durations 16.2 / 50.4 / 194 us at m = 512 /
2048 / 4096 (n = 4096, k = 4096 / 4096 / 8192) against 17.4 / 42.2 / 157 us simulated without
the launch overhead; the reference's fp8 GEMMs take 27.1 / 78.4 / 277 us, still 41 % above
the simulated 197 us at 4096 with its sustained clock, so the reference ran its fp8 GEMMs
slower than our cuBLAS did. At m <= 16 the reference's fp8 GEMMs take longer than its bf16
ones (19.2 vs 16.6 us at 16x4096x4096) although they read half the bytes, and the simulated
fp8 rows with m <= 16 read 5.1-6.5 us low, about one launch overhead, as if the reference
timed a second kernel (the activation quantization) with the GEMM; not modelled, since the
collector's code is not here to confirm it.

fp8_block (held back, 2026-11-26, sixth stop: MAPE 17.5 %, r 0.998; bf16 and fp8 unchanged
at 15.6 % and 19.6 %): rows with m <= 128 at n = 4096 read +28 to +49 % (the template runs
32 CTAs of 64- or 128-row tiles there, one k-tile after another, each waiting for its
wgmmas before the promotion; the reference's 16x4096x4096 takes 11.7 us, about the launch
overhead plus the fp8 weights at HBM speed), at n = 8192 -8 to +7 %; m >= 1024 reads -11 to
-21 % (the reference's 4096x4096x8192 runs at 1000 TFLOPS counting the launch, the
template's at 1260 at its sustained 1.58 GHz). Both fp8 families show the reference's
large-m fp8 GEMMs about 1.2-1.5x faster than its bf16 ones where the tensor rates differ
2x.

Rule "last_wave" (2026-11-27, chosen on the 42 fit rows, see above; it changes only the
held-back rows with m <= 128): bf16 15.6 -> 17.1 %, fp8 19.6 -> 19.7 %, fp8_block 17.5 ->
12.5 % (r 0.999 / 0.997 / 0.999). m <= 16 rows run narrow tiles on more SMs and come closer
(fp8_block 16x4096x4096 +48.5 -> +16.6 %, 1x4096x8192 +41.3 -> +2.9 %); m = 128 rows read
further high (bf16 128x4096x8192 +51.9 -> +65.8 %, 128x8192x8192 +2.3 -> +18.3 %): 128x32
tiles re-read all of A from the L2 in each CTA, where cuBLAS and DeepGEMM multicast it across
a 2-CTA cluster, which the ISA does not model yet.

The fp8 operator's activation quantization (2026-11-27, INPUT_QUANT). The reference times
TensorRT-LLM's linear layer, not the GEMM, and as we know TensorRT-LLM's per-tensor FP8
layer, it quantizes its bf16 input in a kernel of its own before the scaled GEMM (its
source is not in ../shared, so that is not taken on trust). Evidence that does not use the
held-back rows: our own H100's `torch._scaled_mm` (per-tensor fp8, CUDA events,
`workloads/reference/h100/gemm.csv`) on the 18 shapes it shares with the full reference
(`own_vs_reference`) runs 1.7-6.2 us faster than the reference at m <= 512 although
our bf16 `torch.matmul` runs 7-13 us slower than the reference's bf16 on the same shapes
(events without CUDA graphs), and the fp8 gap grows with the activation m x k (n = k = 4096:
+4.4 us at m = 128, +22.7 at 2048, +80.1 at 8192; the bf16 gap does not). Declared choice:
per fp8 family, the simulated operator quantizes its activation (`ptxsim op quantize
--scaling tensor` for fp8, `--scaling deepseek`, TensorRT-LLM's 1x128 kernel, for
fp8_block) if that lowers the MAPE over its FIT rows (`--fit-quant`). On 2026-11-27: fp8
25.1 -> 8.0 %, so fp8 includes it; fp8_block 15.1 -> 28.4 %, so fp8_block's operator is its
GEMM alone (the reference's small-m block-scaled rows leave no room for a second launch:
16x4096x4096 takes 11.7 us). `launch_fit` counts the quantization as a second launch (the
overhead refitted: 3.8 -> 3.75 us, fit-row MAPE 6.3 -> 3.7 %). Held-back: fp8 25.0 -> 8.2 %
(r 0.994 -> 0.997; m <= 512 rows -7.6..+11.7 %, m >= 1024 -17.7..-3.9 %), bf16 6.8 % and
fp8_block 14.2 % unchanged. With the overhead refitted to 3.25 us (decode attention reading
a paged KV cache, `workloads.calibration.attention_accuracy`, the same day): bf16 5.9 %,
fp8 7.5 %, fp8_block 14.4 % (the 42 rows 9.3 %). Refitted to 2.6 us (packed GQA decode
computing whole pages, 2026-11-27, ninth stop): bf16 6.0 -> 5.0 %, fp8 7.5 -> 8.3 %,
fp8_block 11.3 -> 12.3 % (the 42 rows 8.3 -> 8.5 %).

`BASELINE` (`gemm_accuracy_baseline.json`) stores what was measured (date, preset,
fidelity, rule, per-row simulated times, MAPE and r per dtype); the tests recompute the
cheapest held-back rows and hold their MAPE to the stored one + 2 points.

    python -m workloads.calibration.gemm_accuracy            # held-back table (DEFAULT_RULE)
    python -m workloads.calibration.gemm_accuracy --fit      # also score every rule on fit
    python -m workloads.calibration.gemm_accuracy --fit-quant    # fp8 quantization, on fit
    python -m workloads.calibration.gemm_accuracy --write-baseline

Units: microseconds, percent.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from workloads.calibration import scoring
from workloads.calibration.scoring import group_metrics, with_errors
from workloads.shared_reference import SHARED_REFERENCE

HERE = Path(__file__).resolve().parent
DATA = HERE / "aiconfigurator_h100_sxm_gemm_subset.csv"
BASELINE = HERE / "gemm_accuracy_baseline.json"
PRESET = "h100_sxm"
DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block"}
FAMILY_OP = {"bf16": {"dtype": "bf16"}, "fp8": {"dtype": "fp8"},
             "fp8_block": {"dtype": "fp8", "scaling": "deepseek"}}
"""`ptxsim op gemm` arguments of each family."""
LAUNCH_FIT_FAMILIES = ("bf16", "fp8")
"""The families whose fit rows `launch_fit` used (fp8_block came later)."""


def load_rows() -> pd.DataFrame:
    """The reference rows with `dtype` (ptxsim name), `measured_us` and `subset` (fit/held)."""
    df = pd.read_csv(DATA, comment="#")
    df["dtype"] = df.gemm_dtype.map(DTYPE)
    df["measured_us"] = df.latency_ms * 1e3
    df["subset"] = ["fit" if i % 2 == 0 else "held"
                    for i in df.groupby("dtype").cumcount()]
    return df


QUANT_OPTIONS = {"fp8": "tensor", "fp8_block": "deepseek"}
"""The activation quantization an fp8 family's operator may run before its GEMM
(`ptxsim op quantize --scaling S` of the bf16 m x k input)."""
INPUT_QUANT = {"fp8": "tensor"}
"""The families whose simulated operator includes that quantization, chosen on the fit rows
(`fit_input_quant`, module docstring)."""


def launches_of(dtype: str, quant: dict | None = None) -> int:
    """Kernel launches of one simulated operator of family `dtype`."""
    return 1 + (dtype in (INPUT_QUANT if quant is None else quant))


def quantize_us(m: int, k: int, scaling: str, fidelity: str | None = None,
                config=None) -> float:
    """Simulated microseconds of the activation quantization (bf16 m x k -> e4m3)."""
    import models
    from workloads.ops import build_op, simulate_op

    config = config or models.load_preset(PRESET)
    plan = build_op("quantize", config, rows=int(m), cols=int(k), scaling=scaling)
    return float(simulate_op(plan, config, fidelity)["time_us"])


def gemm_us(m: int, n: int, k: int, dtype: str, rule: str | None = None,
            fidelity: str | None = None, config=None) -> float:
    """Simulated microseconds of the GEMM alone of family `dtype` (`FAMILY_OP`)."""
    import models
    from workloads.ops import build_op, simulate_op

    config = config or models.load_preset(PRESET)
    sizes = {"m": int(m), "n": int(n), "k": int(k), **FAMILY_OP[dtype]}
    if rule:
        sizes["rule"] = rule
    return float(simulate_op(build_op("gemm", config, **sizes), config, fidelity)["time_us"])


def simulate_row(m: int, n: int, k: int, dtype: str, rule: str | None = None,
                 fidelity: str | None = None, config=None, quant: dict | None = None) -> float:
    """Simulated microseconds of one measured operator of family `dtype` on the `PRESET`
    hardware: its GEMM, after the activation quantization where `quant` (default
    `INPUT_QUANT`) names the family."""
    import models

    config = config or models.load_preset(PRESET)
    quant = INPUT_QUANT if quant is None else quant
    us = gemm_us(m, n, k, dtype, rule, fidelity, config)
    if dtype in quant:
        us += quantize_us(m, k, quant[dtype], fidelity, config)
    return us


def simulate(rows: pd.DataFrame, rule: str | None = None, fidelity: str | None = None,
             progress: bool = False) -> pd.DataFrame:
    """`rows` with `simulated_us` and `error_pct` (100 (sim - measured) / measured)."""
    import models

    config = models.load_preset(PRESET)
    times = []
    for r in rows.itertuples():
        times.append(simulate_row(r.m, r.n, r.k, r.dtype, rule, fidelity, config))
        if progress:
            print(f"  {r.dtype} {r.m}x{r.n}x{r.k}: {times[-1]:.2f} us "
                  f"(measured {r.measured_us:.2f})", flush=True)
    return with_errors(rows, times)


def fit_input_quant(rule: str | None = None, fidelity: str | None = None,
                    progress: bool = False) -> tuple[dict, dict]:
    """Per fp8 family of `QUANT_OPTIONS`, the fit-row MAPE of its GEMM alone and of its
    GEMM after the activation quantization; (the families where the latter is lower,
    scores {family: (without, with)})."""
    import models

    config = models.load_preset(PRESET)
    fit = load_rows().query("subset == 'fit'")
    chosen, scores = {}, {}
    for dtype, scaling in QUANT_OPTIONS.items():
        rows = fit[fit.dtype == dtype]
        alone, quant = [], []
        for r in rows.itertuples():
            alone.append(gemm_us(r.m, r.n, r.k, dtype, rule, fidelity, config))
            quant.append(quantize_us(r.m, r.k, scaling, fidelity, config))
            if progress:
                print(f"  {dtype} {r.m}x{r.n}x{r.k}: gemm {alone[-1]:.2f} + quantize "
                      f"{quant[-1]:.2f} us (measured {r.measured_us:.2f})", flush=True)
        without = float(with_errors(rows, alone).error_pct.abs().mean())
        withq = float(with_errors(rows, [a + q for a, q in zip(alone, quant, strict=True)])
                      .error_pct.abs().mean())
        scores[dtype] = (without, withq)
        if withq < without:
            chosen[dtype] = scaling
    return chosen, scores


def metrics(df: pd.DataFrame) -> dict:
    """Per dtype: rows, MAPE (%), Pearson r of simulated vs measured time."""
    return group_metrics(df, "dtype")


def fit_rule(fidelity: str | None = None, progress: bool = False) -> tuple[str, dict]:
    """Score every tile rule on the FIT subset; the rule with the lowest MAPE, and scores."""
    from workloads.ops.gemm import TILE_RULES

    fit = load_rows().query("subset == 'fit'")
    scores = {}
    for rule in TILE_RULES:
        sim = simulate(fit, rule, fidelity, progress)
        scores[rule] = float(sim.error_pct.abs().mean())
    return min(scores, key=scores.get), scores


def held_back(rule: str | None = None, fidelity: str | None = None, limit: int | None = None,
              progress: bool = False) -> pd.DataFrame:
    """Simulated held-back rows (optionally the first `limit` of each dtype)."""
    held = load_rows().query("subset == 'held'")
    if limit:
        held = held.groupby("dtype").head(limit)
    return simulate(held, rule, fidelity, progress)


def cheapest_held(per_dtype: int) -> pd.DataFrame:
    """The `per_dtype` held-back rows of each dtype with the fewest FLOPs (m n k), the rows
    the fast regression test recomputes."""
    held = load_rows().query("subset == 'held'")
    held = held.assign(work=held.m * held.n * held.k).sort_values(["dtype", "work", "m"],
                                                                   kind="stable")
    return held.groupby("dtype").head(per_dtype).drop(columns="work")


OWN_GEMMS = HERE.parent / "reference" / "h100" / "gemm.csv"


def own_vs_reference(dtype: str = "fp8") -> pd.DataFrame:
    """Our H100's GEMM times (`OWN_GEMMS`, median over repeats, `torch.matmul` for bf16,
    `torch._scaled_mm` for fp8) beside the full shared reference's on the shapes both have:
    m, n, k, own_us, reference_us, gap_us (reference - own)."""
    shared = SHARED_REFERENCE / "aiconfigurator_h100_sxm_gemm.csv"
    ref = pd.read_csv(shared if shared.exists() else DATA, comment="#")
    ref = ref[ref.gemm_dtype.map(DTYPE) == dtype].assign(reference_us=ref.latency_ms * 1e3)
    own = pd.read_csv(OWN_GEMMS)
    own = own[own.dtype == dtype].groupby(["m", "n", "k"]).median_us.median()
    out = own.rename("own_us").reset_index().merge(ref[["m", "n", "k", "reference_us"]],
                                                   on=["m", "n", "k"])
    return out.assign(gap_us=out.reference_us - out.own_us)


def load_baseline() -> dict:
    return json.loads(BASELINE.read_text())


def write_baseline(df: pd.DataFrame, fidelity: str, rule: str) -> None:
    """Store the simulated held-back rows `df` (with `simulated_us`, `error_pct`) as
    `BASELINE`."""
    scoring.write_baseline(BASELINE, df, {"dtype": "dtype", "m": "m", "n": "n", "k": "k"},
                           preset=PRESET, fidelity=fidelity, metrics=metrics(df), rule=rule)


def _table(df: pd.DataFrame) -> str:
    lines = [f"{'dtype':5} {'m':>5} {'n':>5} {'k':>5} {'measured_us':>12} "
             f"{'simulated_us':>12} {'error_%':>8}"]
    for r in df.itertuples():
        lines.append(f"{r.dtype:5} {r.m:5d} {r.n:5d} {r.k:5d} {r.measured_us:12.2f} "
                     f"{r.simulated_us:12.2f} {r.error_pct:8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from workloads.ops import available_fidelities
    from workloads.ops.gemm import DEFAULT_RULE

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fit", action="store_true", help="score every tile rule on the fit rows")
    p.add_argument("--fit-quant", action="store_true",
                   help="score each fp8 family with and without its activation quantization "
                        "on the fit rows")
    p.add_argument("--fidelity", default=None, help="sampled or full (default: best available)")
    p.add_argument("--limit", type=int, default=None, help="held-back rows per dtype")
    p.add_argument("--write-baseline", action="store_true", help=f"write {BASELINE.name}")
    a = p.parse_args(argv)
    fidelity = a.fidelity or available_fidelities()[0]
    rule = DEFAULT_RULE
    if a.fit:
        best, scores = fit_rule(fidelity, progress=True)
        print("fit subset MAPE by rule: " +
              ", ".join(f"{k} {v:.1f}%" for k, v in scores.items()) + f" -> {best}")
        rule = best
    if a.fit_quant:
        chosen, scores = fit_input_quant(rule, fidelity, progress=True)
        print("fit subset MAPE without / with the activation quantization: " +
              ", ".join(f"{k} {v[0]:.1f}% / {v[1]:.1f}%" for k, v in scores.items()) +
              f" -> INPUT_QUANT = {chosen}" + ("" if chosen == INPUT_QUANT else
                                               f" (in use: {INPUT_QUANT})"))
    df = held_back(rule, fidelity, a.limit, progress=True)
    print(_table(df))
    m = metrics(df)
    for dtype, v in m.items():
        print(f"held-back {dtype}: {v['rows']} rows, MAPE {v['mape_pct']:.1f}%, "
              f"Pearson r {v['pearson_r']:.3f}")
    if a.write_baseline:
        write_baseline(df, fidelity, rule)
        print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
