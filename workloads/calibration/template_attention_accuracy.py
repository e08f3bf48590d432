"""Same-program accuracy of the Hopper decode-attention template: the simulator against our
H100 run of the very kernels the attention op generates
(`workloads/reference/h100/template_ops.csv`).

Reference rows: the 16 decode-attention cases (c0 ... c15) of `template_ops.csv` (head dim
128, one new token over a KV cache), each at its latest run (column `run`; earlier runs
timed earlier templates), CUDA events around each launch, L2 flushed
(`median_us_flushed`). Each case is rebuilt by the attention op with its sizes and must
yield the measured entry (the kernel's name spells its tiles, stages, packing and paging); a
row whose entry differs is reported as "other program" and left out of the scores. The op
builds the measured program: `kernels.decode_attention` as the measured entry names it
("xqa" for the XQA-style kernel's `xqa_decode_*` entries, else "fa3": the default runs GQA
decode as XQA) and `kernels.attention_packed_decode_whole_pages` false (the short-cache
packed GQA cases ran 16-key blocks; the op's default now builds whole 64-key pages there,
docs/hardware.md).
Simulated: `time_us` less `launch.kernel_overhead_us` (what events around one launch see),
sampled fidelity, `h100_sxm`; error = 100 (simulated - measured) / measured.

Declared split (as `template_gemm_accuracy` declares the GEMM cases'; declared in
docs/accuracy.md before this module's figures were looked at, after the CSV's own
`sim_error_pct` column was public in docs/hardware.md; positional): cases in case order,
even positions (c0, c2, ..., c14) FIT, odd positions (c1, c3, ..., c15) HELD BACK. FIT rows
may choose a model or parameter; the HELD-BACK rows only report. No parameter has been
fitted on either half.

    python -m workloads.calibration.template_attention_accuracy [--only c0,c1]
        [--set KEY=VALUE ...]

Left out: the GEMM rows of the same file (`template_gemm_accuracy`), the dirty-L2 state the
flushed timings start from (the simulator starts from a clean cache). Units: microseconds,
percent.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

import models
from workloads.calibration.template_gemm_accuracy import add_errors, print_scores
from workloads.ops import build_op, simulate_op

DATA = Path(__file__).resolve().parents[1] / "reference" / "h100"
PRESET = "h100_sxm"


def measured() -> pd.DataFrame:
    """The decode-attention cases at their latest run, in case order, with their half."""
    df = pd.read_csv(DATA / "template_ops.csv")
    df = df[df.op == "attention"].sort_values("run").groupby("case").tail(1)
    df["order"] = df.case.str[1:].astype(int)
    df = df.sort_values("order").reset_index(drop=True)
    df["half"] = ["FIT" if i % 2 == 0 else "HELD" for i in range(len(df))]
    return df


def program_of(entry: str) -> str:
    """The `kernels.decode_attention` value that builds a measured entry: "xqa" for the
    XQA-style kernel's entries, else "fa3"."""
    return "xqa" if entry.startswith("xqa_") else "fa3"


def simulate(row, config) -> tuple[str, float]:
    """(entry, simulated kernel time in us) of one case."""
    plan = build_op("attention", config, **json.loads(row.sizes), shape_only=True)
    res = simulate_op(plan, config)
    return plan.launches[0].entry, res["time_us"] - float(config.launch.kernel_overhead_us)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated case keys (default: all 16)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override of the preset")
    args = ap.parse_args(argv)
    overrides = {"kernels.attention_packed_decode_whole_pages": False,
                 **dict(s.split("=", 1) for s in args.set)}
    configs = {program: models.load_preset(PRESET, {**overrides,
                                                    "kernels.decode_attention": program})
               for program in ("fa3", "xqa")}
    df = measured()
    if args.only:
        df = df[df.case.isin(args.only.split(","))].reset_index(drop=True)
    sims = []
    for row in df.itertuples():
        entry, us = simulate(row, configs[program_of(row.entry)])
        sims.append((entry, us))
        err = 100.0 * (us / row.median_us_flushed - 1)
        print(f"{row.case:4s} {row.half:4s} {entry:52s} measured {row.median_us_flushed:8.2f}"
              f"  simulated {us:8.2f}  {err:+6.1f} %"
              + ("" if entry == row.entry else f"  (other program: measured {row.entry})"),
              flush=True)
    add_errors(df, sims)
    print_scores(df)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
