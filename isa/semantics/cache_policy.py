"""Cache-eviction policies: `createpolicy`, the 64-bit policy values it writes, the L2
maintenance ops, and the cache policy each memory instruction applies.

Forms (sm_90a; each checked with `ptxas -arch=sm_90a`, CUDA 13.0):

    createpolicy.fractional.L2::primary{.L2::secondary}.b64  pol{, fraction};
    createpolicy.range{.global}.L2::primary{.L2::secondary}.b64  pol, [a], primary_size,
        total_size;
    ld / st / atom / red / cp.async / cp.async.bulk{.tensor} / cp.async.bulk.prefetch.L2
        ... .L2::cache_hint ... , pol;        (the policy is the last operand)
    ld{.global}{.nc}.L1::{no_allocate,evict_first,evict_last,evict_normal,evict_unchanged}
    ld / cp.async ... .L2::{64B,128B,256B}   (L2 fetch size)
    prefetch.global.{L1,L2,L2::evict_last,L2::evict_normal} [a];
    discard.global.L2 [a], 128;   applypriority.global.L2::evict_normal [a], 128;

primary: evict_first, evict_last, evict_normal or evict_unchanged; secondary: evict_first
or evict_unchanged (the default); fraction: (0, 1], default 1.0 (ptxas refuses 0 and 1.5:
"value '1.500000' out of range, expected to be in range (0.000000 .. 1.000000]"). The
functional result of every form is that of the access without it: a policy only steers
the caches (`discard` leaves the data as it is, one of the values the PTX ISA allows, as
discarded data is undefined).

The policy value (ours: the PTX ISA keeps it opaque; programs only pass it on). Bits 63..60
say the form (0x1 fractional, 0x2 range; 0, a register never written, is no policy), bits
59..56 the primary priority (0x0 evict_normal, 0x2 evict_first, 0x4 evict_last, 0x6
evict_unchanged), bits 55..52 the fraction in sixteenths minus one (0xF = 1.0; a fraction
rounds to the nearest sixteenth, at least one), bits 51..48 the secondary priority (0x0
evict_unchanged, 0x2 evict_first), and for the range form bits 31..0 index the launch's
table of ranges (`range_table`: (a, a + primary_size, a + total_size) byte addresses).
CUTLASS's `CacheHintSm90` constants, passed as immediates, are what createpolicy writes
here for a fraction of 1.0: EVICT_FIRST 0x12F0000000000000 and EVICT_LAST
0x14F0000000000000; EVICT_NORMAL 0x1000000000000000 has fraction bits 0, so it reads as
evict_normal for 1/16 of the lines and evict_unchanged (the default) for the others.

`instruction_policy` turns an instruction and the first executing lane's policy value into
the row of `isa.trace_format.POLICY_FIELDS` the timing model reads (eviction class of the
L2 per line, L1 mode, L2 fetch size, maintenance op). Left out: `createpolicy.cvt` (the
access-property form), `.L2::evict_*` written on 256-bit loads (sm_100), `ld.global.nc`
through a separate texture path (it is the L1 on Hopper). Units: byte addresses, bytes,
sixteenths.
"""

from __future__ import annotations

import numpy as np

from isa.operands import DAddr, DImm, DReg, DSym
from isa.semantics.common import as_array, dst
from isa.semantics.registry import semantics
from isa.trace_format import (
    L1_ALLOCATE,
    L1_EVICT_FIRST,
    L1_NO_ALLOCATE,
    L2_FIRST,
    L2_LAST,
    L2_NORMAL,
    L2_UNCHANGED,
    OP_APPLY_PRIORITY,
    OP_DISCARD,
    SECTOR_SHIFT,
    policy_row,
)
from isa.types import TYPES

_U32, _U64, _F32 = TYPES["u32"], TYPES["u64"], TYPES["f32"]

FORM_SHIFT, PRIMARY_SHIFT, FRACTION_SHIFT, SECONDARY_SHIFT = 60, 56, 52, 48
FORM_FRACTIONAL, FORM_RANGE = 1, 2
PRIORITIES = {"L2::evict_normal": 0x0, "L2::evict_first": 0x2, "L2::evict_last": 0x4,
              "L2::evict_unchanged": 0x6}
"""The 4-bit code of each L2 eviction priority in a policy value."""
SECONDARY = {"L2::evict_unchanged": 0x0, "L2::evict_first": 0x2}
"""The secondary priorities `createpolicy` accepts (ptxas: "Unsupported modifier
'.evict_last' as secondary_priority") and their codes."""
_CLASS_OF_CODE = {0x0: L2_NORMAL, 0x2: L2_FIRST, 0x4: L2_LAST, 0x6: L2_UNCHANGED}
_CLASS_OF_SECONDARY = {0x0: L2_UNCHANGED, 0x2: L2_FIRST}
_CLASS_OF_QUALIFIER = {"L2::evict_normal": L2_NORMAL, "L2::evict_first": L2_FIRST,
                       "L2::evict_last": L2_LAST}
_FETCH_BYTES = {"L2::64B": 64, "L2::128B": 128, "L2::256B": 256}
CACHE_HINT = "L2::cache_hint"
MAINTENANCE_OPS = frozenset({"discard", "applypriority"})
LINE_OPS = frozenset({"prefetch", "prefetchu", "discard", "applypriority"})
"""Ops that act on the 128-byte line holding their address."""
POLICY_OPS = frozenset({"ld", "ldu", "st", "atom", "red", "cp.async", "cp.async.bulk",
                        "cp.async.bulk.tensor", "cp.async.bulk.prefetch", "prefetch",
                        "prefetchu", "discard", "applypriority"})
"""Memory instructions that may carry a cache policy."""
POLICY_FLAGS = frozenset({"L1::no_allocate", "L1::evict_first", "L1::evict_last",
                          "L1::evict_normal", "L1::evict_unchanged", "L2::evict_first",
                          "L2::evict_last", "L2::evict_normal", "L2::64B", "L2::128B",
                          "L2::256B", CACHE_HINT})
"""Qualifiers that decide an instruction's cache policy."""


def priorities(ins) -> list[str]:
    """The `.L2::evict_*` qualifiers of `ins` in the order written (primary first)."""
    return [m for m in ins.text.split(".") if m in PRIORITIES]


def encode_fractional(primary: str, secondary: str, fraction: np.ndarray) -> np.ndarray:
    """Policy values of the fractional form (uint64, one per fraction)."""
    sixteenths = np.clip(np.rint(np.asarray(fraction, np.float64) * 16), 1, 16).astype(np.uint64)
    return ((np.uint64(FORM_FRACTIONAL) << np.uint64(FORM_SHIFT))
            | (np.uint64(PRIORITIES[primary]) << np.uint64(PRIMARY_SHIFT))
            | ((sixteenths - np.uint64(1)) << np.uint64(FRACTION_SHIFT))
            | (np.uint64(SECONDARY[secondary]) << np.uint64(SECONDARY_SHIFT)))


def range_table(m) -> list[tuple[int, int, int]]:
    """The ranges `createpolicy.range` made in this launch ((a, a + primary_size,
    a + total_size) byte addresses), indexed by the low bits of their policy values. The
    table lives with the launch's global memory, so every batch of CTAs shares it."""
    table = getattr(m.gmem, "cache_policy_ranges", None)
    if table is None:
        table = m.gmem.cache_policy_ranges = []
    return table


def _secondary(ins) -> str:
    named = priorities(ins)
    return named[1] if len(named) > 1 else "L2::evict_unchanged"


@semantics("createpolicy.fractional")
def createpolicy_fractional(m, ins, lanes):
    n = m.nlanes(lanes)
    fraction = as_array(ins.ops[1].read(m, _F32, lanes), n) if len(ins.ops) > 1 \
        else np.ones(n, np.float32)
    bad = ~((fraction > 0) & (fraction <= 1))
    if bad.any():
        raise m.fault(ins, f"createpolicy fraction {float(fraction[bad][0])} out of range",
                      expected="a fraction in (0.0, 1.0]")
    dst(m, ins, encode_fractional(priorities(ins)[0], _secondary(ins), fraction), _U64, lanes)


@semantics("createpolicy.range")
def createpolicy_range(m, ins, lanes):
    n = m.nlanes(lanes)
    a = as_array(ins.ops[1].address(m, lanes), n).astype(np.int64)
    primary = as_array(ins.ops[2].read(m, _U32, lanes), n).astype(np.int64)
    total = as_array(ins.ops[3].read(m, _U32, lanes), n).astype(np.int64)
    if (primary > total).any():
        raise m.fault(ins, "createpolicy.range primary size exceeds its total size",
                      expected="primary_size <= total_size")
    table = range_table(m)
    rows = np.stack([a, a + primary, a + total], axis=1)
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    index = np.empty(len(unique), np.uint64)
    for k, row in enumerate(map(tuple, unique.tolist())):
        if row not in table:
            table.append(row)
        index[k] = table.index(row)
    value = ((np.uint64(FORM_RANGE) << np.uint64(FORM_SHIFT))
             | (np.uint64(PRIORITIES[priorities(ins)[0]]) << np.uint64(PRIMARY_SHIFT))
             | (np.uint64(0xF) << np.uint64(FRACTION_SHIFT))
             | (np.uint64(SECONDARY[_secondary(ins)]) << np.uint64(SECONDARY_SHIFT)))
    dst(m, ins, value | index[inverse.reshape(-1)], _U64, lanes)


@semantics("discard", "applypriority", "cp.async.bulk.prefetch")
def cache_maintenance(m, ins, lanes):
    return None


# -- the policy of an access -----------------------------------------------------------------
def _value_row(m, value: int) -> tuple[int, int, int, int, int, int] | None:
    """(primary class, secondary class, sixteenths, range lo, mid, hi sectors) of a policy
    value; None when it is no policy we made (0, or an unknown form)."""
    form = value >> FORM_SHIFT
    primary = _CLASS_OF_CODE.get((value >> PRIMARY_SHIFT) & 0xF, L2_UNCHANGED)
    secondary = _CLASS_OF_SECONDARY.get((value >> SECONDARY_SHIFT) & 0xF, L2_UNCHANGED)
    if form == FORM_FRACTIONAL:
        return primary, secondary, ((value >> FRACTION_SHIFT) & 0xF) + 1, -1, -1, -1
    if form == FORM_RANGE:
        table = range_table(m)
        index = value & 0xFFFF_FFFF
        if index >= len(table):
            return None
        lo, mid, hi = (x >> SECTOR_SHIFT for x in table[index])
        return primary, secondary, 16, lo, mid, hi
    return None


def instruction_policy(m, ins, lanes) -> np.ndarray | None:
    """The `isa.trace_format` policy row of a memory instruction executed by `lanes`
    (its qualifiers, and the value of its policy operand in the first lane); None when it
    applies none (the caches' default behaviour)."""
    flags = ins.flags
    if not flags & POLICY_FLAGS and ins.opname not in MAINTENANCE_OPS:
        return None
    l1 = L1_ALLOCATE
    if "L1::no_allocate" in flags:
        l1 = L1_NO_ALLOCATE
    elif "L1::evict_first" in flags:
        l1 = L1_EVICT_FIRST
    fetch = max((b for f, b in _FETCH_BYTES.items() if f in flags), default=0)
    op = {"discard": OP_DISCARD, "applypriority": OP_APPLY_PRIORITY}.get(ins.opname, 0)
    primary = secondary = L2_UNCHANGED
    sixteenths, lo, mid, hi = 16, -1, -1, -1
    named = [f for f in _CLASS_OF_QUALIFIER if f in flags]
    if named:
        primary = _CLASS_OF_QUALIFIER[named[0]]
    if CACHE_HINT in flags:
        raw = ins.ops[-1].read(m, _U64, lanes)
        value = int(np.asarray(raw).reshape(-1)[0])
        row = _value_row(m, value)
        if row is not None:
            primary, secondary, sixteenths, lo, mid, hi = row
    if (l1, fetch, op, primary, secondary) == (L1_ALLOCATE, 0, 0, L2_UNCHANGED, L2_UNCHANGED):
        return None
    return policy_row(primary, secondary, sixteenths, l1, op, fetch, lo, mid, hi)


# -- forms the verifier refuses (isa.verify) ---------------------------------------------------
_CACHE_OPERATORS = frozenset({"ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile"})
_L1_PRIORITIES = ("L1::no_allocate", "L1::evict_first", "L1::evict_last", "L1::evict_normal",
                  "L1::evict_unchanged")
_L2_DIRECT = ("L2::evict_first", "L2::evict_last", "L2::evict_normal")
_POLICY_SPACES = (None, "global")


def _base_operands(ins) -> tuple[int, int]:
    """(fewest, most) operands of `ins` without its policy operand."""
    name = ins.opname
    if name in ("ld", "ldu", "st", "red"):
        return 2, 2
    if name == "atom":
        return (4, 4) if "cas" in ins.flags else (3, 3)
    if name == "cp.async":
        return 3, 4
    if name == "cp.async.bulk":
        return (4, 4) if "mbarrier::complete_tx::bytes" in ins.flags else (3, 3)
    if name == "cp.async.bulk.tensor":
        load = "mbarrier::complete_tx::bytes" in ins.flags
        n = (4 if load else 3) + ("multicast::cluster" in ins.flags)   # [map], {coords}
        return n, n
    if name == "cp.async.bulk.prefetch":
        return 2, 2
    return len(ins.ops), len(ins.ops)


def _is_64bit_value(op, reg_types) -> bool:
    if isinstance(op, DImm):
        return not op.float_width and not isinstance(op.value, float)
    if isinstance(op, DReg):
        decl = reg_types.get((op.fid, op.index))
        bits = TYPES[decl].bits if decl is not None else op.bits
        return bits == 64 and (decl is None or TYPES[decl].kind in ("b", "u", "s"))
    return False


def _cache_hint_problem(ins, reg_types) -> tuple[str, str] | None:
    lo, hi = _base_operands(ins)
    hint = CACHE_HINT in ins.flags
    n = len(ins.ops) - hint
    if not lo <= n <= hi:
        want = f"{lo}" if lo == hi else f"{lo} or {hi}"
        extra = " plus the cache-policy operand" if hint else ""
        return (f"'{ins.text}' takes {want} operands{extra}, got {len(ins.ops)}",
                f"{want} operands{extra}" + ("" if hint else
                                              " (a policy operand needs .L2::cache_hint)"))
    if hint and not _is_64bit_value(ins.ops[-1], reg_types):
        return (f"the cache-policy operand of '{ins.text}' is not a 64-bit value",
                "a .b64 register written by createpolicy, or a 64-bit integer constant")
    return None


def _qualifier_problem(ins) -> tuple[str, str] | None:
    flags = ins.flags
    l1 = [f for f in _L1_PRIORITIES if f in flags]
    if len(l1) > 1:
        return (f"'{ins.text}' has two .L1 eviction priorities", "at most one .L1:: qualifier")
    hinted = l1 or CACHE_HINT in flags
    if hinted and ins.opname in ("ld", "ldu", "st") and ins.space not in _POLICY_SPACES:
        return (f"'{ins.text}': cache qualifiers cannot be applied to the .{ins.space} space",
                ".global or generic addresses")
    if CACHE_HINT in flags and ins.opname == "atom" and "cas" in flags:
        return "'.L2::cache_hint' is not a qualifier of 'atom.cas'", "atom.cas without a policy"
    if l1 and ins.opname in ("atom", "red"):
        return f"'.{l1[0]}' is not a qualifier of '{ins.opname}'", ".L2::cache_hint only"
    operator = sorted(flags & _CACHE_OPERATORS)
    if l1 and operator:
        return (f"'.{l1[0]}' cannot be combined with '.{operator[0]}' in '{ins.text}'",
                "an .L1:: eviction priority without a cache operator (.nc and .relaxed "
                "may stay)")
    if CACHE_HINT in flags and "volatile" in flags:
        return (f"'.L2::cache_hint' cannot be combined with '.volatile' in '{ins.text}'",
                "ld.relaxed or ld.weak with a cache policy")
    sizes = [f for f in _FETCH_BYTES if f in flags]
    if len(sizes) > 1:
        return f"'{ins.text}' has two L2 fetch sizes", "one of .L2::64B, .L2::128B, .L2::256B"
    if sizes and ins.opname in ("st", "atom", "red"):
        return (f"'.{sizes[0]}' is not a qualifier of '{ins.opname}'",
                "an L2 fetch size on ld or cp.async")
    direct = [f for f in _L2_DIRECT if f in flags]
    if direct and ins.opname in ("ld", "ldu", "st") and \
            not (ins.vec * max((t.bits for t in ins.types), default=0) == 256):
        return (f"'.{direct[0]}' on '{ins.opname}' needs a 256-bit access",
                ".v8.b32 or .v4.b64 (sm_100), or a policy: createpolicy + .L2::cache_hint")
    return None


def _createpolicy_problem(ins, reg_types) -> tuple[str, str] | None:
    named = priorities(ins)
    if [t.name for t in ins.types] != ["b64"]:
        return f"'{ins.text}' must be typed .b64", f"{ins.opname}....b64"
    if not named or len(named) > 2:
        return (f"'{ins.text}' needs a primary (and at most a secondary) priority",
                ".L2::evict_last, .L2::evict_normal, .L2::evict_first or .L2::evict_unchanged")
    if len(named) == 2 and named[1] not in SECONDARY:
        return (f"'.{named[1]}' is not a secondary priority",
                ".L2::evict_first or .L2::evict_unchanged")
    if not _is_64bit_value(ins.ops[0], reg_types) or isinstance(ins.ops[0], DImm):
        return f"the destination of '{ins.text}' is not a 64-bit register", "a .b64 register"
    if ins.opname == "createpolicy.fractional":
        if len(ins.ops) > 1 and isinstance(ins.ops[1], DImm):
            f = ins.ops[1].read(None, _F32)
            if not 0 < float(f) <= 1:
                return (f"createpolicy fraction {float(f)} out of range",
                        "a fraction in (0.0, 1.0]")
        return None
    a = ins.ops[1]
    if not isinstance(a, DAddr) or (isinstance(a.base, DSym) and a.base.space != "global"):
        return (f"'{ins.text}' needs a global [address]", "[reg] or [global variable]")
    sizes = ins.ops[2:4]
    for op in sizes:
        if isinstance(op, DReg) and reg_types.get((op.fid, op.index), "b32") not in (
                "b32", "u32", "s32"):
            return (f"size operand '{op.name}' of '{ins.text}' is not 32-bit",
                    "a 32-bit register or an integer constant")
    if all(isinstance(op, DImm) for op in sizes) and int(sizes[0].value) > int(sizes[1].value):
        return (f"primary size {sizes[0].value} exceeds total size {sizes[1].value}",
                "primary_size <= total_size")
    return None


def _line_op_problem(ins) -> tuple[str, str] | None:
    if ins.space != "global":
        return f"'{ins.text}' needs .global", f"{ins.opname}.global..."
    size = ins.ops[1]
    if not isinstance(size, DImm) or int(size.value) != 128:
        return f"the size of '{ins.text}' must be 128", f"{ins.opname} ... [a], 128"
    return None


def form_problem(ins, reg_types) -> tuple[str, str] | None:
    """Why `ins` breaks a cache-policy rule ptxas enforces (message, what is accepted);
    None when it does not. The rules, with what ptxas -arch=sm_90a says:

    * a `.L2::cache_hint` instruction takes one more operand, a 64-bit register or integer
      constant; without the qualifier there is none ("Arguments mismatch"); `atom.cas` takes
      none ("Illegal modifier '.L2::cache_hint' for instruction 'atom'");
    * at most one `.L1::` priority ("Duplicate '.L1::eviction_priority' modifier"), none on
      atomics ("Illegal modifier '.no_allocate' for instruction 'atom'"), none with a cache
      operator or `.volatile` ("Modifier '.no_allocate' cannot be combined with modifier
      '.cg'"), none on `.shared` ("cannot be applied to '.shared' space");
    * one L2 fetch size ("Multiple cache prefetching modifiers"), on loads only ("Illegal
      modifier '.L2::256B' for instruction 'st'");
    * `.L2::evict_*` on ld/st needs a 256-bit access ("Instruction 'ld' requires
      '.v8.b32/.v4.b64' type with '.L2::evict_first' modifier");
    * createpolicy: .b64 ("Unexpected instruction types"), secondary evict_first or
      evict_unchanged, fraction in (0, 1], a global address and primary <= total size
      ("must be less than or equal to the value '4096' of argument 4");
    * discard / applypriority: .global, size 128 ("unexpected value '64', expected to be
      128").
    """
    name = ins.opname
    if name.startswith("createpolicy."):
        return _createpolicy_problem(ins, reg_types)
    if name in MAINTENANCE_OPS:
        return _line_op_problem(ins)
    if name in POLICY_OPS:
        return _cache_hint_problem(ins, reg_types) or _qualifier_problem(ins)
    return None
