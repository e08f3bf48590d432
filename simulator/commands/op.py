"""`ptxsim op`: time one op (GEMM, softmax, RMSNorm, LayerNorm) on a hardware preset.

    ptxsim op gemm --m 4096 --n 7168 --k 16384 --dtype fp8 --model h800_sxm --json
    ptxsim op softmax --rows 4096 --cols 4096 --model h100_sxm

The op is built by `workloads.ops` (kernel launch(es) from the GEMM template or the
catalog's CUDA kernels, tile heuristic in `workloads.ops.gemm`), timed by
`simulator.simulate_kernel` and printed as text or as one JSON object with `time_us`,
`cycles`, `tflops` (2·M·N·K / time for a GEMM), `gbps` (bytes of the inputs and outputs,
each once, / time), `hbm_bytes` (simulated), `roofline_us` (max(FLOP / peak, bytes / HBM
peak)), `bound` ("compute" or "memory", the larger roofline term), `kernel` (name,
launch, tiles) and `fidelity`. Bad flags (dtype, non-positive sizes, unknown `--set`
key) are an `InputError` naming the flag: one line, exit status 2.
Units: microseconds, cycles, TFLOP/s, GB/s, bytes.
"""

from __future__ import annotations

import argparse
import json

NAME = "op"
HELP = "time one op (gemm, softmax, rmsnorm, layernorm) on a hardware preset"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="h100_sxm", metavar="PRESET",
                        help="hardware preset (see ptxsim models; default h100_sxm)")
    parser.add_argument("--set", dest="overrides", action="append", default=None,
                        metavar="KEY=VALUE", help="override a preset value (repeatable)")
    parser.add_argument("--fidelity", choices=("sampled", "full"), default=None,
                        help="sampled: enough waves of CTAs for a steady state, "
                        "extrapolated; full: every CTA (default: sampled where available)")
    parser.add_argument("--seed", type=int, default=0, help="seed of random inputs")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per op kind, each with its sizes and the common flags."""
    sub = parser.add_subparsers(dest="op", metavar="OP")
    sub.required = True
    g = sub.add_parser("gemm", help="C[M,N] = A[M,K] B[N,K]^T (warp-specialized TMA+wgmma)")
    g.add_argument("--m", type=int, required=True, help="rows of A and C")
    g.add_argument("--n", type=int, required=True, help="rows of B, columns of C")
    g.add_argument("--k", type=int, required=True, help="reduction length")
    g.add_argument("--dtype", default="bf16", help="bf16, fp16, fp8 or tf32 (default bf16)")
    g.add_argument("--scaling", default="none",
                   help="fp8 scaling: none (per tensor) or deepseek (1x128/128x128 blocks)")
    g.add_argument("--rule", default=None, help="GEMM tile rule: n128, n256 or waves "
                   "(default: the one chosen on the calibration fit subset)")
    _common(g)
    for kind, what in (("softmax", "row softmax, f32"), ("rmsnorm", "RMSNorm, bf16"),
                       ("layernorm", "LayerNorm, f32")):
        p = sub.add_parser(kind, help=f"{what} (catalog CUDA kernel)")
        p.add_argument("--rows", type=int, required=True, help="rows (tokens)")
        p.add_argument("--cols", type=int, required=True, help="columns (hidden size)")
        _common(p)


def _config(args):
    import models
    from isa.errors import InputError
    from simulator.commands.models import parse_overrides

    try:
        return models.load_preset(args.model, parse_overrides(args.overrides))
    except InputError as exc:
        flag = "--set" if args.overrides else "--model"
        raise InputError(f"{flag}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Build the op, time it, print."""
    from workloads.ops import build_op, simulate_op

    config = _config(args)
    if args.op == "gemm":
        sizes = {"m": args.m, "n": args.n, "k": args.k, "dtype": args.dtype,
                 "scaling": args.scaling}
        if args.rule:
            sizes["rule"] = args.rule
    else:
        sizes = {"rows": args.rows, "cols": args.cols}
    plan = build_op(args.op, config, seed=args.seed, **sizes)
    result = {"model": args.model, **simulate_op(plan, config, args.fidelity)}
    print(json.dumps(result, indent=1) if args.json else _text(result))
    return 0


def _text(r: dict) -> str:
    k = r["kernel"] if isinstance(r["kernel"], dict) else r["kernel"][0]
    sizes = ", ".join(f"{key}={r[key]}" for key in ("m", "n", "k", "dtype", "rows", "cols")
                      if key in r)
    return "\n".join([
        f"{r['op']} ({sizes}) on {r['model']}, fidelity {r['fidelity']}",
        f"kernel {k['name']} grid {'x'.join(map(str, k['grid']))} block "
        f"{'x'.join(map(str, k['block']))} shared {k['shared_bytes']} B ({k['mode']} mode)",
        f"time        {r['time_us']:12.3f} us   ({r['cycles']} cycles)",
        f"throughput  {r['tflops']:12.2f} TFLOP/s  {r['gbps']:10.1f} GB/s",
        f"hbm bytes   {r['hbm_bytes']:12.0f} B (simulated; {r['bytes']:.0f} B at least)",
        f"roofline    {r['roofline_us']:12.3f} us   {r['bound']}-bound, "
        f"{r['gap']:.2f}x the bound",
    ])
