"""`ptxsim models`: list the hardware presets and their key figures, or print one resolved.

Figures are closed forms from each preset: BF16 dense TFLOPS = BF16 FMA/clk/SM x 2 x SMs x
clock; HBM TB/s = channels x channel bandwidth; L2 in MiB; the PTX target the chip runs
(`chip.isa_target`). With a preset name, prints that
preset's fully resolved config as TOML (or JSON with `--json`), overrides applied; with
`--fields`, every config key with its type and help string.
Also the flags other commands share: `--model` / `--set` (`add_config_arguments`,
`config_from_args`) and the `--seed` type (`seed_value`: 0 to 2**32 - 1).
Left out: comparison across presets beyond the listed figures. Units as in the column names.
"""

from __future__ import annotations

import argparse
import json

import models
from isa.errors import InputError
from simulator.framework.config import field_docs, parse_overrides

NAME = "models"
HELP = "list hardware presets and their key parameters (or print one resolved preset)"

COLUMNS = ("preset", "name", "isa_target", "sms", "clock_ghz", "hbm_tbps", "l2_mib",
           "bf16_dense_tflops")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments: optional preset name, `--set KEY=VALUE` overrides, `--json`."""
    parser.add_argument("preset", nargs="?", help="print this preset fully resolved")
    parser.add_argument("--set", dest="overrides", action="append", default=None,
                        metavar="KEY=VALUE",
                        help="override a dotted key (value read as TOML), e.g. sm.count=112")
    parser.add_argument("--fields", action="store_true",
                        help="list every config key with its type and help string")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def summary(name: str, config: models.GpuConfig) -> dict:
    """The key figures of one preset (the columns of the listing)."""
    return {
        "preset": name,
        "name": config.chip.name,
        "isa_target": config.chip.isa_target,
        "sms": config.sm.count,
        "clock_ghz": config.chip.clock_ghz,
        "hbm_tbps": round(config.hbm_peak_tbps, 3),
        "l2_mib": round(config.l2.size_bytes / 2**20, 1),
        "bf16_dense_tflops": round(config.peak_tensor_tflops("bf16"), 1),
    }


SEED_MAX = 2**32 - 1   # an unsigned 32-bit seed: the range every numpy seeding API takes


def seed_value(text: str) -> int:
    """An argparse type for `--seed`: an integer from 0 to 2**32 - 1, else an error naming
    the range."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed: give an integer from 0 to "
                                         f"{SEED_MAX} (2**32 - 1)")
    return value


def simulates(args: argparse.Namespace) -> bool:
    """Listing presets runs no simulation."""
    return False


def add_config_arguments(parser, default: str) -> None:
    """`--model PRESET` (default `default`) and repeatable `--set KEY=VALUE`, the flags
    `config_from_args` reads."""
    parser.add_argument("--model", default=default, metavar="PRESET",
                        help=f"hardware preset (see ptxsim models; default {default})")
    parser.add_argument("--set", dest="overrides", action="append", default=None,
                        metavar="KEY=VALUE", help="override a preset value (repeatable)")


def config_from_args(args):
    """The preset `args.model` with the `--set` overrides `args.overrides`; a bad preset or
    key is an `InputError` naming the flag (`--model` or `--set`)."""

    try:
        return models.load_preset(args.model, parse_overrides(args.overrides))
    except InputError as exc:
        flag = "--set" if args.overrides else "--model"
        raise InputError(f"{flag}: {exc}") from None


def _table(rows: list[dict]) -> str:
    cells = [[str(row[c]) for c in COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def run(args: argparse.Namespace) -> int:
    """Print the listing, or one resolved preset."""
    overrides = parse_overrides(args.overrides)
    if args.fields:
        docs = [{"key": k, "type": t, "help": h} for k, t, h, _ in field_docs(models.GpuConfig)]
        print(json.dumps(docs, indent=2) if args.json
              else "\n".join(f"{d['key']:45s} {d['type']:14s} {d['help']}" for d in docs))
        return 0
    if args.preset:
        config = models.load_preset(args.preset, overrides)
        print(json.dumps(config.to_dict(), indent=2) if args.json else config.to_toml(), end="")
        if args.json:
            print()
        return 0
    rows = [summary(name, models.load_preset(name, overrides)) for name in models.list_presets()]
    print(json.dumps(rows, indent=2) if args.json else _table(rows))
    return 0
