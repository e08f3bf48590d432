"""Turn the raw CSV of the harness's ncu stage into one tidy row per own-kernel launch.

`ncu --csv --page raw --log-file RAW` (run_all.sh stage `ncu`) writes a header row of
metric names, a row of units and one row per profiled launch, with ncu's own notes
(`==PROF==` lines) between them. `own_kernels.py --ncu-launches` launches each catalogued
kernel once per size of `HW_SIZES` (or the catalog's test sizes with --quick), in catalog
order, so the n-th launch of a kernel is its size_index n.

    python benchmarks/hardware/ncu_table.py RAW.csv OUT.csv [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

# ncu metric -> output column (unit in the name)
METRICS = {
    "gpu__time_duration.sum": ("duration_ns", 1.0),
    "sm__cycles_elapsed.avg": ("sm_cycles_elapsed_avg", 1.0),
    "sm__cycles_elapsed.max": ("sm_cycles_elapsed_max", 1.0),
    "sm__cycles_elapsed.avg.per_second": ("sm_clock_hz", None),
    "smsp__inst_executed.sum": ("warp_instructions", 1.0),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("achieved_occupancy_pct", 1.0),
    "l1tex__t_sector_hit_rate.pct": ("l1_hit_rate_pct", 1.0),
    "lts__t_sector_hit_rate.pct": ("l2_hit_rate_pct", 1.0),
    "dram__bytes_read.sum": ("dram_read_bytes", None),
    "dram__bytes_write.sum": ("dram_write_bytes", None),
    "launch__registers_per_thread": ("registers_per_thread", 1.0),
    "launch__waves_per_multiprocessor": ("waves_per_sm", 1.0),
}
SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "hz": 1, "Khz": 1e3,
         "Mhz": 1e6, "Ghz": 1e9, "cycle/second": 1, "cycle/nsecond": 1e9,
         "cycle/usecond": 1e6, "cycle/msecond": 1e3, "nsecond": 1, "usecond": 1e3,
         "msecond": 1e6}
"""ncu's units to the tables': bytes, hertz, cycles per second, nanoseconds."""


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def read_raw(path: Path) -> list[dict]:
    rows, header, units = [], None, None
    with path.open(newline="") as fh:
        lines = (ln for ln in fh if not ln.startswith("=="))
        for rec in csv.reader(lines):
            if not rec:
                continue
            if rec[0] == "ID":
                header, units = rec, None
                continue
            if header is None:
                continue
            if units is None:
                units = rec
                continue
            rows.append({h: (v, u) for h, v, u in zip(header, rec, units, strict=False)})
    return rows


def tidy(raw: list[dict], quick: bool) -> list[dict]:
    from own_kernels import sizes_for

    from workloads.kernels.catalog import KERNELS

    seen: dict[str, int] = {}
    out = []
    for r in raw:
        name = r["Kernel Name"][0]
        index = seen.get(name, 0)
        seen[name] = index + 1
        sizes = sizes_for(name, KERNELS[name], quick)[index]
        row = {"kernel": name, "size_index": index, "sizes": json.dumps(sizes, sort_keys=True),
               "grid": r["Grid Size"][0], "block": r["Block Size"][0]}
        for metric, (column, _) in METRICS.items():
            if metric not in r:
                continue
            value, unit = r[metric]
            v = _number(value)
            if column in ("dram_read_bytes", "dram_write_bytes"):
                v *= SCALE[unit]
            if column == "sm_clock_hz":
                v *= SCALE.get(unit, 1)
            if column == "duration_ns":
                v *= SCALE.get(unit, 1)
            row[column] = round(v, 3)
        out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rows = tidy(read_raw(args.raw), args.quick)
    columns: list[str] = []
    for r in rows:
        columns += [c for c in r if c not in columns]
    with args.out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    meta_in = args.raw.parent / "own_kernels.meta.json"
    meta = json.loads(meta_in.read_text()) if meta_in.exists() else {}
    for key in ("table", "method", "clocks_seen", "failures", "rows"):
        meta.pop(key, None)
    meta.update({
        "table": args.out.name, "rows": len(rows),
        "method": ("Nsight Compute (ncu 2025.3.1) --clock-control none (clocks as found), "
                   "default --cache-control all (caches flushed before each replay pass), "
                   "--page raw; one launch per kernel and size from own_kernels.py "
                   "--ncu-launches (fresh inputs, outputs checked). Metrics: "
                   + ", ".join(f"{c} = {m}" for m, (c, _) in METRICS.items())),
        "clocks_seen": "per row: sm_clock_hz = sm__cycles_elapsed.avg.per_second"})
    args.out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{len(rows)} launches -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
