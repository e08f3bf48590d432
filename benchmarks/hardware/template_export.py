"""Export ops' template launches for a real GPU (no GPU needed here).

Our Hopper templates (attention, GEMM) are real PTX. This writes what
`template_run.py` needs to launch them on a GPU, and what the simulator says for each:

* `cases.json`: for each case, its op and sizes, the simulator's figures on `h100_sxm`
  (`sim_kernel_us`: `time_us` less `launch.kernel_overhead_us`, what CUDA events around
  one launch see; `sim_time_us`), and each launch: its cubin, entry, grid, block,
  dynamic shared bytes and arguments. An argument is `tmap` (our 128-byte stand-in,
  `isa.tensor_map`, re-encoded by the driver there), `array` (shape, dtype, and `fill`:
  `data` from `arrays.npz`, else `normal` random or `zeros`) or `scalar` (typed there by
  the PTX parameter).
* `arrays.npz`: small real arrays (block tables, counters, tensor maps) and, for cases
  marked `check`, the inputs and the expected output (`workloads.kernels.templates.
  attention.reference`).
* `*.cubin`: each PTX assembled by `ptxas -arch=sm_90a` here.

    python benchmarks/hardware/template_export.py OUTDIR [--no-sim] [--only c0,c16]

Cases are numbered in list order (c0 ... : `ATTENTION` with the FlashAttention-3-style
template, then `GEMM`, then `XQA`: the GQA rows of `ATTENTION` with the XQA-style decode
kernel, `kernels.decode_attention = "xqa"`), the keys of
`workloads/reference/h100/template_ops.csv`; the runner runs them with
`template_run.py OUTDIR RESULTS [--only ...]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from own_kernels import entry_params  # noqa: E402  (PTX parameter types, harness)

PRESET = "h100_sxm"
DATA_MAX_BYTES = 1 << 20      # real arrays up to this size travel as data

# Decode attention rows of the aiconfigurator reference (head dim 128, new token + cache):
# (batch, heads, kv_heads, kv_len); the GQA short-cache rows the model misses, MHA, long
# caches and split-KV rows.
ATTENTION = [(4, 32, 8, 16), (2, 32, 32, 300),                       # output checked
             (1, 32, 8, 2), (128, 32, 8, 2), (512, 32, 8, 2), (2048, 32, 8, 2),
             (512, 32, 8, 64), (512, 32, 8, 128), (128, 32, 8, 1024), (8, 32, 8, 8192),
             (512, 96, 8, 2), (128, 32, 32, 2), (512, 32, 32, 2), (512, 32, 32, 16),
             (128, 32, 32, 1024), (8, 32, 32, 8192)]
CHECKED = {(4, 32, 8, 16), (2, 32, 32, 300)}
# GEMMs: the template at shapes of the GEMM calibration rows (the op's tile rule, and
# one without clusters), the speed benchmark's FP8 GEMM and a DeepSeek-scaled one.
GEMM = [dict(m=4096, n=4096, k=4096, dtype="bf16"), dict(m=512, n=4096, k=4096, dtype="bf16"),
        dict(m=128, n=4096, k=8192, dtype="bf16"), dict(m=2048, n=4096, k=4096, dtype="fp8"),
        dict(m=4096, n=7168, k=16384, dtype="fp8"),
        dict(m=4096, n=4096, k=4096, dtype="bf16", rule="last_wave"),
        dict(m=4096, n=1536, k=7168, dtype="fp8", scaling="deepseek"),
        dict(m=4096, n=576, k=7168, dtype="fp8", scaling="deepseek"),
        dict(m=4096, n=4096, k=7168, dtype="fp8", scaling="deepseek")]
# The rest of the default DeepSeek-V3 prefill layer's GEMMs (4096 tokens; q_a, kv_a and the
# shared expert's gate/up are above), its MoE grouped GEMMs as 256 contiguous groups.
LAYER_GEMM = [dict(m=4096, n=24576, k=1536), dict(m=4096, n=32768, k=512),
              dict(m=4096, n=7168, k=16384), dict(m=4096, n=7168, k=2048),
              dict(m=128, n=4096, k=7168, groups=256, layout="contiguous", m_total=32768),
              dict(m=128, n=7168, k=2048, groups=256, layout="contiguous", m_total=32768)]
GEMM += [dict(sizes, dtype="fp8", scaling="deepseek") for sizes in LAYER_GEMM]
# The XQA-style kernel at the GQA rows of ATTENTION (MHA decode stays on the fa3 template).
XQA = [row for row in ATTENTION if row[2] < row[1]]
XQA_CHECKED = {(4, 32, 8, 16)}


def _cubin(ptx: str, out: Path) -> str:
    name = hashlib.sha1(ptx.encode()).hexdigest()[:12] + ".cubin"
    if not (out / name).exists():
        src = out / (name + ".ptx")
        src.write_text(ptx)
        subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(out / name)], check=True)
        src.unlink()
    return name


def _args(launch, key: str, arrays: dict) -> list[dict]:
    import isa
    from isa.tensor_map import MAGIC, MAP_BYTES

    out = []
    for i, a in enumerate(launch.args):
        name = f"{key}_a{i}"
        if isinstance(a, np.ndarray) and a.dtype == np.uint8 and a.size == MAP_BYTES \
                and int(a[:4].view(np.uint32)[0]) == MAGIC:
            arrays[name] = a
            out.append({"kind": "tmap", "key": name})
        elif isinstance(a, (np.ndarray, isa.ShapeOnly)):
            dtype = np.dtype(a.dtype)
            real = isinstance(a, np.ndarray)
            if real and a.nbytes <= DATA_MAX_BYTES:
                arrays[name] = a
                fill = "data"
            else:
                fill = "normal" if dtype.kind in "fV" or dtype.name == "bfloat16" else "zeros"
            out.append({"kind": "array", "key": name, "shape": list(a.shape),
                        "dtype": dtype.name, "itemsize": dtype.itemsize, "fill": fill})
        else:
            out.append({"kind": "scalar", "value": float(a) if isinstance(
                a, (float, np.floating)) else int(a)})
    return out


def _expected(plan, arrays: dict, key: str, sizes: dict) -> None:
    """Inputs and the numpy reference output of a checked (functional) attention case."""
    from workloads.kernels.templates.attention import reference

    launch = plan.launches[0]
    q, k, v = (np.asarray(launch.args[i]) for i in (3, 4, 5))
    b, sk = sizes["batch"], sizes["seqlen_k"]
    if launch.detail["tiles"]["page"]:      # pool pages in order (block table arange)
        k = k.reshape(b, -1, *k.shape[2:])[:, :sk]
        v = v.reshape(b, -1, *v.shape[2:])[:, :sk]
    want = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
                     causal=False)
    for i in (3, 4, 5):
        arrays[f"{key}_l0_a{i}"] = launch.args[i]
    arrays[f"{key}_expected"] = want.astype(np.float32)


def _expected_xqa(plan, arrays: dict, key: str) -> None:
    """Inputs and the numpy reference output of a checked XQA case (arguments: tensor maps,
    K pool, V pool, Q, out, block table, lengths, ...)."""
    from workloads.kernels.templates.xqa import reference

    launch = plan.launches[0]
    k, v, q, _, table, lens = (np.asarray(launch.args[i]) for i in range(2, 8))
    want = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
                     table, lens)
    for i in (2, 3, 4):
        arrays[f"{key}_l0_a{i}"] = launch.args[i]
    arrays[f"{key}_expected"] = want.astype(np.float32)


def export(out: Path, simulate: bool = True, only: set | None = None) -> list[dict]:
    import models
    from workloads.ops import build_op, simulate_op

    configs = {program: models.load_preset(PRESET, {"kernels.decode_attention": program})
               for program in ("fa3", "xqa")}
    overhead = float(configs["fa3"].launch.kernel_overhead_us)
    out.mkdir(parents=True, exist_ok=True)
    cases, arrays = [], {}
    todo = [("attention", "fa3", dict(batch=b, heads=h, kv_heads=hk, seqlen=1, seqlen_k=sk,
                                      headdim=128), (b, h, hk, sk) in CHECKED)
            for b, h, hk, sk in ATTENTION]
    todo += [("gemm", "fa3", sizes, False) for sizes in GEMM]
    todo += [("attention", "xqa", dict(batch=b, heads=h, kv_heads=hk, seqlen=1, seqlen_k=sk,
                                       headdim=128), (b, h, hk, sk) in XQA_CHECKED)
             for b, h, hk, sk in XQA]
    for c, (kind, program, sizes, check) in enumerate(todo):
        key = f"c{c}"
        if only and key not in only:
            continue
        config = configs[program]
        plan = build_op(kind, config, **sizes, shape_only=not check)
        row = {"case": key, "op": kind, "sizes": sizes, "check": check, "launches": [],
               "decode_attention": program}
        for j, launch in enumerate(plan.launches):
            row["launches"].append({
                "name": launch.name, "cubin": _cubin(launch.ptx, out), "entry": launch.entry,
                "grid": list(launch.grid), "block": list(launch.block),
                "shared_bytes": int(launch.shared_bytes),
                "ptx_types": entry_params(launch.ptx, launch.entry),
                "args": _args(launch, f"{key}_l{j}", arrays)})
        if check and program == "xqa":
            _expected_xqa(plan, arrays, key)
        elif check:
            _expected(plan, arrays, key, sizes)
        if simulate:
            res = simulate_op(plan, config)
            row.update(sim_time_us=res["time_us"], sim_kernel_us=res["time_us"] - overhead,
                       sim_fidelity=res["fidelity"])
        cases.append(row)
        print(key, kind, sizes, {k: round(v, 2) for k, v in row.items()
                                 if k.startswith("sim_") and isinstance(v, float)}, flush=True)
    np.savez(out / "arrays.npz", **arrays)
    (out / "cases.json").write_text(json.dumps(
        {"preset": PRESET, "kernel_overhead_us": overhead, "cases": cases}, indent=1))
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--no-sim", action="store_true", help="skip the simulator's figures")
    p.add_argument("--only", help="comma-separated case keys to export (default: all)")
    a = p.parse_args(argv)
    export(a.out, simulate=not a.no_sim, only=set(a.only.split(",")) if a.only else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
