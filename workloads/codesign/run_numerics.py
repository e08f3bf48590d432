"""The numerics of a run: what the co-design units of a run's config cost in accuracy, per
op category, beside the time the run simulates (`ptxsim run`: kernels table, `run.json`'s
`numerics`, `report.html`).

What it models
--------------
The run's layer is timed shape-only (no data), so its error comes from `numerics`: the
model's reduced layer (`numerics.reduced_layer`: the same structure at a width divided by
a power of two, at most `max_tokens` tokens, a `classes`-class head; the reduction is
stated in words in the result) run on seeded data (`numerics.layer_data`, `seed`) under
the config's shortcuts (`numerics.Shortcuts.of`) against the FP64 forward of the same
layer on the same data. Per op category of the run's kernels table:

* `gemm` (ops `CATEGORY_OPS["gemm"]`): the GEMM precision (the model's own, or the VPCU
  policy's), FP8 scaling, the ZCE (exact zeros, `units.zce.threshold`, the typed
  `units.zce.activation_sparsity` as the smallest activations of each GEMM pruned,
  `units.zce.weight_sparsity`), 2:4 pruning of the weights;
* `attention` (ops `CATEGORY_OPS["attention"]`): the attention precision and the LUT exp
  (`units.lut_exp.entries`, `interpolation`);
* `layer`: all of them together (the layer's own figures: `numerics.layer_error`).

The ZCE's activation sparsity for the time side (`zce_sparsity`, `timed_config`): with
`units.zce.activation_sparsity_source` "measured" (the default) the run measures, before it
simulates, the MAC-weighted share of zero GEMM activations of the same reduced layer on the
same seeded data at `units.zce.threshold` (after rounding to the GEMM precision: exact zeros,
values that round to zero, and those under the threshold; no typed pruning), rounded to
`SPARSITY_DECIMALS`, and times every GEMM of the graph at that one share (the per-GEMM shares
are left out: a ReLU FFN's zeros sit in its down projection's input only); "config" times
the typed `units.zce.activation_sparsity`. The measurement runs whatever `--numerics` says
(it is an input of the time, not a report); one forward of the reduced layer and its FP64
reference, 0.2-1.3 s of CPU.

A category's error is that of the layer output (and of its head's argmax) with only that
category's shortcuts on and the rest of the layer in FP64, so each is the share of the
layer's error its ops bring. Beside the error against FP64, `*_vs_stock` gives the error
against the same forward at the stock precision (the model's own dtype, every co-design
unit of `NUMERICS_SWITCHES` off): the extra error of the units, exactly 0 with them off or
with the ZCE skipping exact zeros only.

When it is computed (`NumericsSettings.mode`): "auto" when a unit of `NUMERICS_SWITCHES` is
on (a stock-precision run says "stock precision, error not computed": its ~1 s of CPU is
not spent on a run whose numerics no unit changes), "on" always (a stock run then reports
the stock precision's error against FP64), "off" never.

Left out: gradient compression (an option of the all-reduce op, `ptxsim op allreduce
--compress`, not of a `ptxsim run` graph; `python -m workloads.codesign.whatif compress`
reports it), decode attention over a KV cache and the backward pass (a decode or train run
gets the error of its layer's forward), the error of ops outside the categories (norms,
activations, residual adds, routing and communication run in FP32 in the reduced layer),
and, with `units.zce.activation_sparsity_source` "config", the time side's own zeros:
such a run times the ZCE at the typed `units.zce.activation_sparsity`, not at the zeros the
threshold makes on the data (`activation_zeros` says how many those are).
Units: errors in the output's own units (dimensionless data), shares in [0, 1].
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd

from isa.errors import InputError
from workloads.codesign import numerics as N

NUMERICS_MODES = ("auto", "on", "off")
NUMERICS_SWITCHES = ("units.vpcu.enabled", "units.zce.enabled", "units.tensor.sparse_2_4",
                     "units.lut_exp.enabled")
"""The config switches of the units whose numerics `numerics` models."""
REFERENCE = "fp64"
REFERENCE_TEXT = ("FP64 forward of the same reduced layer on the same seeded data (every "
                  "shortcut off)")
DATA_TEXT = ("inputs standard normal with 1 % of the hidden channels x10, weights "
             "N(0, 1/fan_in), no biases")
CATEGORY_OPS = {"gemm": ("gemm", "grouped_gemm"),
                "attention": ("attention", "mla_decode", "softmax")}
"""Kernels-table ops -> the error category whose shortcuts act on them."""
CATEGORY_FIELDS = {"gemm": ("gemm_precision", "fp8_scaling", "zce", "zce_threshold",
                            "zce_granularity", "activation_sparsity", "weight_sparsity",
                            "two_four"),
                   "attention": ("attention_precision", "lut")}
"""The `numerics.Shortcuts` fields each category's ops apply."""
LAYER = "layer"
METRICS = ("rel_error", "max_abs_error", "argmax_change")
KERNEL_ERROR_COLUMNS = ("error_category", "rel_error", "max_abs_error", "argmax_change",
                        "rel_error_vs_stock")
"""Columns `kernel_error_columns` adds to a workload kernels table (NaN / "" for kernels
outside the categories or when the numerics were not computed)."""
KERNEL_ERROR_UNITS = {"rel_error": "fraction", "max_abs_error": "", "argmax_change":
                      "fraction", "rel_error_vs_stock": "fraction"}
SPARSITY_KEY = "units.zce.activation_sparsity"
SPARSITY_DECIMALS = 4
"""Decimals of the measured activation sparsity written into the timed config (as
`whatif.timed_config`): 1e-4 of the GEMM activations, far below the reduced layer's
sampling noise."""


@dataclasses.dataclass(frozen=True)
class NumericsSettings:
    """How a run computes its numerics (module docstring); saved in run.json."""

    mode: str = "auto"
    seed: int = 0
    max_tokens: int = 128
    classes: int = 16

    def __post_init__(self) -> None:
        if self.mode not in NUMERICS_MODES:
            raise InputError(f"--numerics {self.mode}: accepted {', '.join(NUMERICS_MODES)}")
        if self.seed < 0:
            raise InputError(f"--numerics-seed {self.seed}: accepted an integer >= 0")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _value(config, key: str):
    return functools.reduce(getattr, key.split("."), config)


def switches_on(config) -> list[str]:
    """The keys of `NUMERICS_SWITCHES` that are on in `config`."""
    return [key for key in NUMERICS_SWITCHES if bool(_value(config, key))]


def stock_config(config):
    """`config` with every unit of `NUMERICS_SWITCHES` off."""
    return config.with_overrides(dict.fromkeys(NUMERICS_SWITCHES, False))


def only(sc: N.Shortcuts, category: str) -> N.Shortcuts:
    """`sc` with only `category`'s shortcuts kept (the rest as the FP64 reference); the
    `LAYER` category keeps all."""
    if category == LAYER:
        return sc
    return dataclasses.replace(N.Shortcuts(), **{f: getattr(sc, f)
                                                 for f in CATEGORY_FIELDS[category]})


def _describe(sc: N.Shortcuts, category: str) -> str:
    """The shortcuts of `category` in words."""
    parts = []
    if category in ("gemm", LAYER):
        fp8 = f" ({sc.fp8_scaling} scales)" if sc.gemm_precision in N.FP8 else ""
        parts.append(f"GEMM inputs {sc.gemm_precision}{fp8}")
        if sc.zce:
            parts.append(f"ZCE threshold {sc.zce_threshold:g}"
                         + (f", activations pruned {sc.activation_sparsity:g}"
                            if sc.activation_sparsity else "")
                         + (f", weights pruned {sc.weight_sparsity:g}"
                            if sc.weight_sparsity else ""))
        if sc.two_four:
            parts.append("2:4 weights (2 smallest of 4 pruned)")
    if category in ("attention", LAYER):
        parts.append(f"attention {sc.attention_precision}")
        parts.append(f"LUT exp {sc.lut[0]} entries, {sc.lut[1]}" if sc.lut else "exact exp")
    return "; ".join(parts)


def not_computed(reason: str, settings: NumericsSettings) -> dict:
    """run.json's `numerics` when the error is not computed."""
    return {"computed": False, "reason": reason, "settings": settings.to_dict(),
            "categories": []}


def zce_sparsity(config, model: str, tokens: int,
                 settings: NumericsSettings | None = None) -> dict | None:
    """run.json's `zce_activation_sparsity`: the activation sparsity the run times the ZCE
    at and where it came from (module docstring), None with the ZCE off. `source`,
    `threshold`, `typed` (the config's value), `activation_sparsity` (the timed share);
    measured also `measured` (unrounded), `macs_skipped_share` (of the reduced layer at the
    config's granularity), `reduction`, `seed`."""
    settings = settings or NumericsSettings()
    zce = config.units.zce
    if not zce.enabled:
        return None
    typed = float(zce.activation_sparsity)
    record = {"source": zce.activation_sparsity_source, "threshold": float(zce.threshold),
              "typed": typed}
    if zce.activation_sparsity_source == "config":
        return {**record, "activation_sparsity": typed}
    layer = N.reduced_layer(model, tokens, max_tokens=settings.max_tokens,
                            classes=settings.classes)
    e = N.layer_error(config, layer, settings.seed)
    return {**record, "activation_sparsity": round(e["activation_zeros"], SPARSITY_DECIMALS),
            "measured": e["activation_zeros"], "macs_skipped_share": e["macs_skipped_share"],
            "reduction": layer.reduction, "seed": settings.seed}


def timed_config(config, sparsity: dict | None):
    """`config` with `SPARSITY_KEY` at the measured share of `sparsity` (`zce_sparsity`);
    unchanged with the ZCE off or the source "config"."""
    if sparsity is None or sparsity["source"] == "config":
        return config
    return config.with_overrides({SPARSITY_KEY: sparsity["activation_sparsity"]})


def run_numerics(config, model: str, tokens: int,
                 settings: NumericsSettings | None = None) -> dict:
    """run.json's `numerics` section for a run of `model` at `tokens` on `config` (the config
    the run was timed on, `timed_config`; module docstring): `computed`, `reason`,
    `settings`, `switches_on`, `reduction`, `seed`, `reference`, `data`, `stock` and
    `categories` (one dict per category: the shortcuts in words, precisions, `METRICS`
    against FP64 and against the stock precision; the layer also `softmax_rel_error`,
    `activation_zeros`, `macs_skipped_share`, `zce_threshold`, the `activation_sparsity`
    the time side ran at and its `activation_sparsity_source`). A typed activation sparsity
    (source "config") prunes that share of each GEMM's smallest activations on the error
    side; a measured one prunes nothing (the threshold made those zeros)."""
    settings = settings or NumericsSettings()
    on = switches_on(config)
    if settings.mode == "off":
        return not_computed("--numerics off: error not computed", settings)
    if settings.mode == "auto" and not on:
        return not_computed("stock precision, error not computed (no co-design unit of "
                            f"{', '.join(NUMERICS_SWITCHES)} is on; --numerics on computes "
                            "the stock precision's error against FP64)", settings)
    layer = N.reduced_layer(model, tokens, max_tokens=settings.max_tokens,
                            classes=settings.classes)
    zce = config.units.zce
    timed = float(zce.activation_sparsity) if zce.enabled else 0.0
    typed = timed if zce.activation_sparsity_source == "config" else 0.0
    sc = N.Shortcuts.of(config, layer, typed)
    stock = N.Shortcuts.of(stock_config(config), layer)
    data = N.layer_data(layer, settings.seed)
    outputs: dict[N.Shortcuts, dict] = {}

    def forward(s: N.Shortcuts) -> dict:
        if s not in outputs:
            outputs[s] = N.forward(layer, data, s)
        return outputs[s]

    ref = forward(N.Shortcuts())
    categories = []
    for category in (*CATEGORY_FIELDS, LAYER):
        mine, base = forward(only(sc, category)), forward(only(stock, category))
        row = {"category": category, "ops": list(CATEGORY_OPS.get(category, ())),
               "shortcuts": _describe(sc, category),
               **_metrics(mine, ref), **{f"{k}_vs_stock": v
                                         for k, v in _metrics(mine, base).items()}}
        if category == LAYER:
            e = N.layer_error(config, layer, settings.seed, typed)
            row.update({k: e[k] for k in ("precision", "attention_precision", "fp8_scaling",
                                          "softmax_rel_error", "activation_zeros",
                                          "macs_skipped_share", "zce_threshold")},
                       activation_sparsity=timed,
                       activation_sparsity_source=zce.activation_sparsity_source)
        categories.append(row)
    return {"computed": True,
            "reason": ("co-design units on: " + ", ".join(on) if on else
                       "--numerics on: the stock precision against FP64"),
            "settings": settings.to_dict(), "switches_on": on,
            "reduction": layer.reduction, "seed": settings.seed, "reference": REFERENCE,
            "reference_text": REFERENCE_TEXT, "data": DATA_TEXT,
            "stock": _describe(stock, LAYER), "categories": categories,
            "left_out": "gradient compression (not in a run graph), decode attention over a "
                        "KV cache, the backward pass, ops outside the categories (FP32)"}


def _metrics(out: dict, ref: dict) -> dict:
    return {**N.error_metrics(out["output"], ref["output"]),
            "argmax_change": N.argmax_change(out["logits"], ref["logits"])}


def category_of(op: str) -> str:
    """The error category of a kernels-table op ("" outside them)."""
    return next((c for c, ops in CATEGORY_OPS.items() if op in ops), "")


def kernel_error_columns(kernels: pd.DataFrame, numerics: dict) -> pd.DataFrame:
    """`kernels` (a workload kernels table with `op`) with `KERNEL_ERROR_COLUMNS`: each
    kernel's category's error against FP64 and against the stock precision."""
    out = kernels.copy()
    rows = {c["category"]: c for c in numerics.get("categories", ())}
    cats = out["op"].map(lambda op: category_of(str(op)) if str(op) and rows else "")
    out["error_category"] = cats

    def pick(key: str) -> pd.Series:
        return cats.map(lambda c: float(rows[c][key]) if c in rows else np.nan)

    for col in KERNEL_ERROR_COLUMNS[1:]:
        out[col] = pick(col).astype(float)
    return out
