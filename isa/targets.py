"""ISA targets: what each PTX target has, and the check that refuses a program its chip lacks.

What it models
--------------
A chip runs the PTX of one target (`sm_80` for an A100, `sm_90a` for an H100/H800) and
`ptxas -arch=<target>` refuses what that target lacks. `verify_target(program, target)`
does the same before a program runs: it raises `PtxError` at the first instruction (its line
and the column of the offending word), special register, directive or `.target` directive
that needs a newer target, naming the feature, the target it needs and the chip's target,
in ptxas's words ("Feature 'cp.async.bulk' requires .target sm_90 or higher").

Targets: `TARGETS` lists those a chip may have, oldest first. Each has every feature of the
ones before it; `sm_90a` is `sm_90` plus the arch-specific `wgmma.*` and `setmaxnreg`. A
program's `.target` may name any `sm_NN[a|f]`; it must not be above the chip's (ptxas:
"SM version specified by .target is higher than default SM version assumed").

Rules, as data (each refusal checked against ptxas of CUDA 13.0 with `-arch=sm_80` and
`-arch=sm_90`, and acceptance with `-arch=sm_90a`; the cases and ptxas's messages are listed
in `tests/fixtures/ptxas_targets.md`):

* `OPCODE_TARGETS`: opcodes (as `isa.opcodes` names them) new after sm_80. Opcodes of sm_80
  and older (`cp.async`, `ldmatrix`, `mma.sync`, `mma.sp`, `redux.sync`, `mbarrier.init` /
  `arrive` / `test_wait`, `createpolicy`, `ld ... .L2::cache_hint`) have no row: every
  target has them.
* `QUALIFIER_TARGETS`: qualifiers, on whatever instruction they are written (`.cluster`
  scope, `.shared::cluster`, `.multicast::cluster`, `.mbarrier::complete_tx::bytes`,
  `.bulk_group`, `.expect_tx`).
* Type rules (`_type_feature`): bf16 `add`/`sub`/`mul`/`setp`/`set`/`ex2`/`tanh` and bf16
  atomics need sm_90 (bf16 `fma`/`min`/`max`/`neg`/`abs` are sm_80); `cvt` between bf16 and a
  type other than f32 needs sm_90; FP8 (`e4m3`, `e5m2`) `cvt` and `mma` need sm_89;
  `min`/`max` `.relu` needs sm_90; `mbarrier.arrive` with a count operand needs sm_90;
  a float `redux.sync` needs sm_100a (above every target here: ptxas refuses it on sm_90a).
* `SPECIAL_TARGETS`: the cluster special registers (`%clusterid`, `%cluster_ctarank`, ...).
* `DIRECTIVE_TARGETS`: the entry's cluster directives (`.reqnctapercluster`, ...).
* `EXTENSION_UNITS`: our own opcodes (`isa/EXTENSIONS.md`) need their co-design unit, given
  in `extensions` (a chip's enabled units, `units.<unit>.enabled`), whatever the target.

Left out: targets below sm_80 (no chip here has one; what sm_80 has that older targets lack
is not tabled), PTX ISA `.version` requirements, instructions the parser does not know
(`cp.reduce.async.bulk`, `st.async`, `multimem`; unknown opcodes are refused anyway), the
sm_100 families (an `a` target's features are not carried to the next generation, so the
linear order here would not hold there).
"""

from __future__ import annotations

import re

from isa.errors import InputError, PtxError, column_of
from isa.operands import DSpecial

TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
"""The targets a chip may have, oldest first (`chip.isa_target` of a preset)."""

OPCODE_TARGETS: dict[str, str] = {
    **dict.fromkeys(("wgmma.mma_async", "wgmma.fence", "wgmma.commit_group",
                     "wgmma.wait_group", "setmaxnreg"), "sm_90a"),
    **dict.fromkeys(("cp.async.bulk", "cp.async.bulk.tensor", "cp.async.bulk.prefetch",
                     "cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
                     "mbarrier.expect_tx", "mbarrier.complete_tx", "mbarrier.try_wait",
                     "barrier.cluster.arrive", "barrier.cluster.wait", "mapa", "getctarank",
                     "elect", "stmatrix", "fence.proxy.async", "fence.mbarrier_init"),
                    "sm_90"),
}
"""Opcode -> the oldest target that has it (opcodes every target has are not listed)."""

QUALIFIER_TARGETS: dict[str, str] = {
    "cluster": "sm_90",                       # .cluster scope (fence, atom, ld, mbarrier ...)
    "shared::cluster": "sm_90",
    "multicast::cluster": "sm_90",
    "mbarrier::complete_tx::bytes": "sm_90",
    "bulk_group": "sm_90",
    "expect_tx": "sm_90",                     # mbarrier.arrive{_drop}.expect_tx
}
"""Qualifier (as written after a `.`) -> the oldest target that has it."""

SPECIAL_TARGETS: dict[str, str] = dict.fromkeys(
    ("%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
     "%cluster_nctarank", "%is_explicit_cluster"), "sm_90")
"""Special register (without `.x`/`.y`/`.z`) -> the oldest target that has it."""

DIRECTIVE_TARGETS: dict[str, str] = dict.fromkeys(
    (".reqnctapercluster", ".explicitcluster", ".maxclusterrank"), "sm_90")
"""Entry directive -> the oldest target that has it."""

EXTENSION_UNITS: dict[str, str] = {"vmma": "vpcu", "vpcu.setprec": "vpcu", "zmma": "zce"}
"""Our own opcodes -> the co-design unit that runs them (`isa/EXTENSIONS.md`)."""

UNIT_NAMES = {"vpcu": "the variable-precision compute unit",
              "zce": "the zero-compression engine"}

_BF16 = frozenset({"bf16", "bf16x2"})
_FP8 = frozenset({"e4m3", "e5m2", "e4m3x2", "e5m2x2", "e4m3x4", "e5m2x4"})
_BF16_ARITH = frozenset({"add", "sub", "mul", "setp", "set", "ex2", "tanh", "atom", "red"})
_MMA = frozenset({"mma", "mma.sp", "mma.sp::ordered_metadata", "zmma"})
_TARGET_NAME = re.compile(r"sm_(\d+)([af]?)$")


def target_rank(name: str) -> tuple[int, int] | None:
    """Order of a target name (`sm_90a` > `sm_90` > `sm_89`); None when it is not `sm_NN[a|f]`."""
    m = _TARGET_NAME.match(name)
    return (int(m.group(1)), 1 if m.group(2) else 0) if m else None


def check_target(target: str) -> str:
    """`target` if a chip may have it, else an `InputError` listing `TARGETS`."""
    if target not in TARGETS:
        raise InputError(f"ISA target {target!r} is not known; accepted: {', '.join(TARGETS)}")
    return target


def has_target(target: str, needed: str) -> bool:
    """Whether a chip of `target` has what `needed` (a target name) introduced."""
    return target_rank(target) >= target_rank(needed)


def program_target(program) -> str | None:
    """The `sm_NN[a|f]` entry of a program's `.target` directive (None without one)."""
    return next((t for t in program.target if target_rank(t) is not None), None)


def verify_target(program, target: str, extensions=frozenset()) -> None:
    """Raise `PtxError` at the first part of `program` that a chip of ISA `target` (one of
    `TARGETS`) with the co-design units `extensions` ({"vpcu", "zce"}) cannot run: its
    `.target` directive, an entry directive, an instruction (opcode, qualifier, type,
    special register), an extension opcode."""
    check_target(target)
    _check_target_directive(program, target)
    for name, needed in DIRECTIVE_TARGETS.items():
        if name in program.directives and not has_target(target, needed):
            loc = program.entry_loc
            raise _refusal(f"'{name}'", needed, target, loc, program.file, name)
    for ins in program.instrs:
        _check_instruction(ins, target, extensions)


def _check_target_directive(program, target: str) -> None:
    written = program_target(program)
    if written is None or target_rank(written) <= target_rank(target):
        return
    loc = program.target_loc
    raise PtxError(f"the program's .target {written} is higher than the chip's target {target} "
                   f"(ptxas -arch={target}: SM version specified by .target is higher than "
                   "default SM version assumed)",
                   file=loc.file if loc else program.file, line=loc.line if loc else 0,
                   col=column_of(loc.text, written, loc.col) if loc else 0,
                   text=loc.text if loc else "",
                   expected=f"a program built for {target} or an older target "
                   f"(.target {target})")


def _check_instruction(ins, target: str, extensions) -> None:
    unit = EXTENSION_UNITS.get(ins.opname)
    if unit is not None and unit not in extensions:
        raise PtxError(f"'{ins.opname}' is an extension of {UNIT_NAMES[unit]} ({unit}), "
                       f"which this chip lacks", file=ins.loc.file, line=ins.loc.line,
                       col=ins.loc.col, text=ins.loc.text,
                       expected=f"a chip with the {unit} (units.{unit}.enabled = true)")
    for feature, needed, word in _features(ins):
        if not has_target(target, needed):
            raise _refusal(feature, needed, target, ins.loc, ins.loc.file, word)


def _features(ins):
    """(feature as ptxas names it, the target it needs, the word to point at) of `ins`."""
    needed = OPCODE_TARGETS.get(ins.opname)
    if needed is not None:
        yield f"'{ins.opname}'", needed, ins.opname.split(".")[0]
    for part in ins.text.split(".")[1:]:
        needed = QUALIFIER_TARGETS.get(part)
        if needed is not None:
            yield f"'.{part}'", needed, "." + part
    found = _type_feature(ins)
    if found is not None:
        yield found
    for op in ins.ops:
        if isinstance(op, DSpecial):
            base = op.name.split(".")[0]
            if base in SPECIAL_TARGETS:
                yield f"'{base}'", SPECIAL_TARGETS[base], base


def _type_feature(ins):
    """The type rule `ins` falls under, as `_features` yields it, or None."""
    names = [t.name for t in ins.types]
    op = ins.opname
    if op == "cvt" and _FP8 & set(names):
        return "'cvt with .e4m3x2/.e5m2x2'", "sm_89", "cvt"
    if op == "cvt" and _BF16 & set(names) and len(names) == 2 and not {"f32"} & set(names):
        return f"'cvt with .{names[0]}.{names[1]}'", "sm_90", "cvt"
    if op in _MMA and _FP8 & set(names):
        return "'mma with FP8 floating point type'", "sm_89", op.split(".")[0]
    if op in _BF16_ARITH and _BF16 & set(names):
        return f"'{op}.{next(n for n in names if n in _BF16)}'", "sm_90", op
    if op == "redux" and any(t.kind == "f" for t in ins.types):
        return f"'redux.{names[0]}'", "sm_100a", "redux"
    if op in ("min", "max") and ins.has("relu"):
        return f"'{op}.relu'", "sm_90", ".relu"
    if op == "mbarrier.arrive" and len(ins.ops) == 3 and not ins.has("expect_tx"):
        return "'mbarrier.arrive with count argument'", "sm_90", "mbarrier"
    return None


def _refusal(feature: str, needed: str, target: str, loc, file: str, word: str) -> PtxError:
    """ptxas's refusal of `feature` on `target`, at `word` on the line of `loc`."""
    if loc is None:
        return PtxError(f"{feature} requires .target {needed} or higher; the chip's target is "
                        f"{target}", file=file, expected=f"what {target} has")
    return PtxError(f"{feature} requires .target {needed} or higher; the chip's target is "
                    f"{target}", file=loc.file, line=loc.line,
                    col=_word_column(loc.text, word, loc.col), text=loc.text,
                    expected=f"what {target} has (ptxas -arch={target} refuses this too)")


def _word_column(text: str, word: str, start: int) -> int:
    """1-based column of `word` (a `.qualifier`, an opcode, a `%register`) at or after
    `start`; `start` when it is not written on this line."""
    k = text.find(word, max(start - 1, 0))
    return k + 1 if k >= 0 else start
