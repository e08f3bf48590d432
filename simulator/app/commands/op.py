"""`ptxsim op`: time one op (GEMM, softmax, RMSNorm, LayerNorm) on a hardware preset.

    ptxsim op gemm --m 4096 --n 7168 --k 16384 --dtype fp8 --model h800_sxm --json
    ptxsim op softmax --rows 4096 --cols 4096 --model h100_sxm

The op is built by `workloads.ops` (kernel launch(es) from the GEMM template or the
catalog's CUDA kernels, tile heuristic in `workloads.ops.gemm`), timed by
`simulator.simulate_kernel` and printed as text or as one JSON object with `time_us`,
`cycles`, `tflops` (issued FLOP / time: 2·M·N·K for a GEMM, less 2 x the products the
co-design units skip, ZCE zeros or 2:4's half, `issued_flops`; `flops` stays the dense
2·M·N·K), `gbps` (bytes of the inputs and outputs, each once, / time), `hbm_bytes`
(simulated), `roofline_us` (max(issued FLOP / peak, roofline_bytes / HBM peak), the
roofline bytes with a GEMM's operands as stored: `workloads.ops.registry.issued_work`),
`bound` ("compute" or "memory", the larger roofline term), `kernel` (name,
launch, tiles), `fidelity` and the fidelity plan carried out (`simulator.runner.fidelity`):
`fidelity_method` (full, full+synthesized_ctas, chip_slice, row_slice, wave_extrapolation,
op_model, mixed), `fidelity_params`, `simulated_cta_share` and `extrapolated_time_share`,
for the op and for each kernel entry. `--explain` prints the plan in words before
running it (`workloads.ops.registry.explain_op`; on stderr with `--json`). The result is
read from the on-disk op result cache when an equal op (kind, flags, seed, resolved config,
fidelity, code version) was timed before, and saved there when simulated
(`workloads.op_result_cache`; `--cache-dir DIR`, `--no-cache`); `cached` and `op_cache` (the
folder, null with `--no-cache`) say which. Bad flags
(dtype, non-positive sizes, unknown `--set` key) are an `InputError` naming the flag: one
line, exit status 2.
Units: microseconds, cycles, TFLOP/s, GB/s, bytes.
"""

from __future__ import annotations

import argparse
import json
import sys

from simulator.app.commands.models import add_config_arguments, config_from_args, seed_value
from simulator.app.op_cache_options import add_cache_arguments, cache_from_args
from simulator.app.progress import add_quiet_argument
from simulator.framework.config import strict_json
from workloads.op_result_cache import simulate_op_cached
from workloads.ops import OP_FLAGS, OP_HELP, OPS, build_op
from workloads.ops.registry import explain_op

NAME = "op"
HELP = "time one op (gemm, attention, softmax, rmsnorm, ...) on a hardware preset"


def _common(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, "h100_sxm")
    parser.add_argument("--fidelity", choices=("sampled", "full"), default=None,
                        help="sampled: enough waves of CTAs for a steady state, "
                        "extrapolated; full: every CTA (default: sampled where available)")
    parser.add_argument("--seed", type=seed_value, default=0, metavar="S",
                        help="seed of random inputs, 0 to 2**32 - 1 (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--explain", action="store_true",
                        help="print how the op will be timed (its fidelity plan) in words "
                        "before running it (to stderr with --json)")
    add_cache_arguments(parser)
    add_quiet_argument(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-command per registered op kind (`workloads.ops.OPS`), each with the flags
    its builder declares (`workloads.ops.OP_FLAGS`) and the common flags."""

    sub = parser.add_subparsers(dest="op", metavar="OP")
    sub.required = True
    types = {"int": int, "str": str, "float": float}
    for kind in sorted(OPS):
        p = sub.add_parser(kind, help=_literal(OP_HELP[kind]), description=OP_HELP[kind])
        for flag in OP_FLAGS[kind]:
            if flag.kind == "switch":
                p.add_argument(flag.name, dest=flag.dest, action="store_true",
                               help=_literal(flag.help))
                continue
            p.add_argument(flag.name, dest=flag.dest, type=types[flag.kind],
                           required=flag.required, default=flag.default,
                           choices=flag.choices, help=_literal(flag.help))
        _common(p)


def _literal(text: str | None) -> str | None:
    """Help text shown as written: argparse %-formats help strings (`%(default)s`), so a
    literal `%` (as in "top 10 %") must be doubled."""
    return None if text is None else text.replace("%", "%%")


def run(args: argparse.Namespace) -> int:
    """Build the op, time it, print."""

    config = config_from_args(args)
    sizes = {f.dest: getattr(args, f.dest) for f in OP_FLAGS[args.op]
             if getattr(args, f.dest) is not None}
    plan = build_op(args.op, config, seed=args.seed, **sizes)
    if getattr(args, "explain", False):
        print(explain_op(plan, config, args.fidelity), file=sys.stderr if args.json else
              sys.stdout, flush=True)
    result = {"model": args.model,
              **simulate_op_cached(args.op, {"seed": args.seed, **sizes}, plan, config,
                                   args.fidelity, cache_from_args(args))}
    print(strict_json(result, indent=1) if args.json else _text(result, plan.sizes))
    return 0


def _text(r: dict, op_sizes: dict) -> str:
    k = r["kernel"] if isinstance(r["kernel"], dict) else r["kernel"][0]
    sizes = ", ".join(f"{key}={value}" for key, value in op_sizes.items())
    return "\n".join([
        f"{r['op']} ({sizes}) on {r['model']}, fidelity {r['fidelity']}",
        f"kernel {k['name']} grid {'x'.join(map(str, k['grid']))} block "
        f"{'x'.join(map(str, k['block']))} shared {k['shared_bytes']} B ({k['mode']} mode)",
        f"time_us     {r['time_us']:12.3f} us   (with launch overhead; cycles {r['cycles']}, "
        "the SM span)",
        f"throughput  {r['tflops']:12.2f} TFLOP/s  {r['gbps']:10.1f} GB/s{_issued_note(r)}",
        f"hbm bytes   {r['hbm_bytes']:12.0f} B simulated (op bytes {r['bytes']:.0f} B: inputs "
        "and outputs once, bus bytes for collectives)",
        f"roofline    {r['roofline_us']:12.3f} us   {r['bound']}-bound, "
        f"{r['gap']:.2f}x the bound",
        f"fidelity    {r['fidelity_method']}: {_pct(r['simulated_cta_share'])} of the CTAs "
        f"simulated, {_pct(r['extrapolated_time_share'])} of the time extrapolated "
        f"{json.dumps(r['fidelity_params'], sort_keys=True)}",
        "op cache    " + (f"result read from {r['op_cache']}" if r["cached"] else
                          f"simulated (cache {r['op_cache']})" if r["op_cache"] else
                          "off (--no-cache)"),
    ])


def _issued_note(r: dict) -> str:
    """Where the co-design units skip products: the dense-equivalent figure beside the
    issued one."""
    issued = r.get("issued_flops", r["flops"])
    if issued == r["flops"] or not r["time_us"]:
        return ""
    return (f"   (issued FLOPs, {100 * issued / r['flops']:.1f}% of the dense "
            f"{r['flops']:.4g}; dense-equivalent {r['flops'] / r['time_us'] / 1e6:.2f} "
            "TFLOP/s)")


def _pct(share) -> str:
    return "-" if share is None or share != share else f"{100 * share:.3g} %"
