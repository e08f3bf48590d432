"""The opcode table: one entry per opcode, as data.

Each `OpSpec` names the opcode (possibly dotted, e.g. `cp.async.wait_group`), its
operand count, the unit class that executes it (`arith` resolves by type to `fp32`,
`fp16`, `fp64` or `int`), a latency class for the timing model, the modifiers it
accepts besides type names, and whether it changes control flow. Its semantics live
in `isa/semantics/` under the same name (registered with `@semantics`). Adding an
opcode = one row here + one semantics function.

Our extensions are listed at the end of `TABLE` (see `EXTENSIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass

ROUND = frozenset({"rn", "rz", "rm", "rp", "rna", "rs"})
IROUND = frozenset({"rni", "rzi", "rmi", "rpi"})
CMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu",
                 "leu", "gtu", "geu", "num", "nan"})
BOOL = frozenset({"and", "or", "xor"})
SPACE = frozenset({"global", "shared", "local", "const", "param", "shared::cta",
                   "shared::cluster", "param::entry", "param::func"})
CACHE = frozenset({"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "volatile", "relaxed",
                   "acquire", "release", "weak", "sys", "gpu", "cta", "cluster", "mmio",
                   "L1::no_allocate", "L1::evict_last", "L1::evict_first", "L1::evict_normal",
                   "L1::evict_unchanged", "L2::evict_last", "L2::evict_first", "L2::evict_normal",
                   "L2::64B", "L2::128B", "L2::256B", "L2::cache_hint", "v2", "v4", "v8",
                   "unified"})
FLOATMODS = frozenset({"ftz", "sat", "approx", "full", "relu", "NaN", "xorsign.abs", "oob"})
ATOMOPS = frozenset({"add", "min", "max", "inc", "dec", "and", "or", "xor", "cas", "exch",
                     "noftz"})


@dataclass(frozen=True, slots=True)
class OpSpec:
    name: str
    arity: tuple[int, int]
    unit: str                 # arith|fp32|fp64|int|sfu|tensor|lsu|ctrl|sync|misc
    latency: str              # alu|mul|fma|div|sfu|mem|tensor|ctrl|sync|conv
    mods: frozenset = frozenset()
    control: bool = False     # sets pc itself (branches, calls, barriers, exits)
    doc: str = ""


def _op(name, arity, unit, latency, mods=(), control=False, doc=""):
    if isinstance(arity, int):
        arity = (arity, arity)
    return OpSpec(name, arity, unit, latency, frozenset(mods), control, doc)


_TMA_MODS = SPACE | {"1d", "2d", "3d", "4d", "5d", "tile", "im2col", "bulk_group",
                     "mbarrier::complete_tx::bytes", "multicast::cluster", "L2::cache_hint"}
_MBAR_MODS = SPACE | {"release", "relaxed", "cta", "cluster"}
_POLICY_MODS = frozenset({"L2::evict_last", "L2::evict_normal", "L2::evict_first",
                          "L2::evict_unchanged"})

_ARITH = ROUND | {"ftz", "sat", "lo", "hi", "wide", "cc", "relu", "NaN", "xorsign.abs"}

TABLE: tuple[OpSpec, ...] = (
    # integer and floating-point arithmetic
    _op("add", 3, "arith", "alu", _ARITH, doc="d = a + b"),
    _op("sub", 3, "arith", "alu", _ARITH, doc="d = a - b"),
    _op("mul", 3, "arith", "mul", _ARITH, doc="d = a * b (.lo/.hi/.wide for integers)"),
    _op("mad", 4, "arith", "fma", _ARITH, doc="d = a * b + c"),
    _op("fma", 4, "arith", "fma", _ARITH, doc="fused d = a * b + c, one rounding"),
    _op("mul24", 3, "int", "mul", {"lo", "hi"}),
    _op("mad24", 4, "int", "mul", {"lo", "hi"}),
    _op("sad", 4, "int", "alu"),
    _op("div", 3, "arith", "div", _ARITH | {"approx", "full"}, doc="IEEE or approximate divide"),
    _op("rem", 3, "int", "div"),
    _op("abs", 2, "arith", "alu", {"ftz"}),
    _op("neg", 2, "arith", "alu", {"ftz"}),
    _op("min", 3, "arith", "alu", {"ftz", "NaN", "xorsign.abs", "relu"}),
    _op("max", 3, "arith", "alu", {"ftz", "NaN", "xorsign.abs", "relu"}),
    _op("copysign", 3, "fp32", "alu"),
    _op("rcp", 2, "sfu", "sfu", ROUND | {"approx", "ftz"}),
    _op("sqrt", 2, "sfu", "sfu", ROUND | {"approx", "ftz"}),
    _op("rsqrt", 2, "sfu", "sfu", {"approx", "ftz"}),
    _op("sin", 2, "sfu", "sfu", {"approx", "ftz"}),
    _op("cos", 2, "sfu", "sfu", {"approx", "ftz"}),
    _op("lg2", 2, "sfu", "sfu", {"approx", "ftz"}),
    _op("ex2", 2, "sfu", "sfu", {"approx", "ftz"}),
    _op("tanh", 2, "sfu", "sfu", {"approx"}),
    _op("testp", 2, "fp32", "alu", {"finite", "infinite", "number", "notanumber", "normal",
                                     "subnormal"}),
    # integer bit manipulation
    _op("popc", 2, "int", "alu"), _op("clz", 2, "int", "alu"), _op("brev", 2, "int", "alu"),
    _op("bfind", 2, "int", "alu", {"shiftamt"}), _op("bfe", 4, "int", "alu"),
    _op("bfi", 5, "int", "alu"), _op("prmt", 4, "int", "alu", {"f4e", "b4e", "rc8", "ecl",
                                                                "ecr", "rc16"}),
    _op("shl", 3, "int", "alu"), _op("shr", 3, "int", "alu"),
    _op("shf", 4, "int", "alu", {"l", "r", "clamp", "wrap"}),
    _op("and", 3, "int", "alu"), _op("or", 3, "int", "alu"), _op("xor", 3, "int", "alu"),
    _op("not", 2, "int", "alu"), _op("cnot", 2, "int", "alu"), _op("lop3", 5, "int", "alu"),
    _op("dp4a", 4, "int", "fma"), _op("dp2a", 4, "int", "fma", {"lo", "hi"}),
    # compare and select
    _op("setp", (3, 5), "arith", "alu", CMP | BOOL | {"ftz"}),
    _op("set", (3, 4), "arith", "alu", CMP | BOOL | {"ftz"}),
    _op("selp", 4, "int", "alu"),
    _op("slct", 4, "int", "alu", {"ftz"}),
    # data movement and conversion
    _op("mov", 2, "int", "alu"),
    _op("cvt", (2, 3), "arith", "conv", ROUND | IROUND | {"ftz", "sat", "satfinite", "relu"}),
    _op("cvta", 2, "int", "alu", SPACE | {"to"}),
    _op("isspacep", 2, "int", "alu", SPACE),
    _op("ld", (2, 3), "lsu", "mem", SPACE | CACHE, doc="d = [a]; a policy operand last with "
        ".L2::cache_hint (isa/semantics/cache_policy.py)"),
    _op("ldu", 2, "lsu", "mem", SPACE | CACHE),
    _op("st", (2, 3), "lsu", "mem", SPACE | CACHE),
    _op("prefetch", 1, "lsu", "mem", SPACE | {"L1", "L2", "L2::evict_last", "L2::evict_normal"}),
    _op("prefetchu", 1, "lsu", "mem", {"L1"}),
    _op("atom", (3, 5), "lsu", "mem", SPACE | ATOMOPS | CACHE),
    _op("red", (2, 3), "lsu", "mem", SPACE | ATOMOPS | CACHE),
    _op("cp.async", (3, 5), "lsu", "mem", SPACE | {"ca", "cg", "L2::128B", "L2::256B",
                                                   "L2::64B", "L2::cache_hint"}),
    _op("cp.async.commit_group", 0, "lsu", "sync"),
    _op("cp.async.wait_group", 1, "lsu", "sync"),
    _op("cp.async.wait_all", 0, "lsu", "sync"),
    # warp collectives
    _op("shfl", (4, 5), "int", "alu", {"sync", "up", "down", "bfly", "idx"}),
    _op("vote", (2, 3), "int", "alu", {"sync", "all", "any", "uni", "ballot"}),
    _op("activemask", 1, "int", "alu"),
    _op("match", (3, 4), "int", "alu", {"sync", "any", "all"}),
    _op("redux", 3, "int", "alu", {"sync", "add", "min", "max", "and", "or", "xor"}),
    _op("bar.warp.sync", 1, "sync", "sync"),
    # tensor core
    _op("mma", (4, 6), "tensor", "tensor", {"sync", "aligned", "row", "col", "satfinite"}),
    _op("ldmatrix", 2, "lsu", "mem", SPACE | {"sync", "aligned", "trans", "x1", "x2", "x4"}),
    _op("stmatrix", 2, "lsu", "mem", SPACE | {"sync", "aligned", "trans", "x1", "x2", "x4"}),
    _op("wmma.load", (2, 3), "lsu", "mem", SPACE | {"a", "b", "c", "sync", "aligned", "row",
                                                      "col"}),
    _op("wmma.store", (2, 3), "lsu", "mem", SPACE | {"d", "sync", "aligned", "row", "col"}),
    _op("wmma.mma", 4, "tensor", "tensor", {"sync", "aligned", "row", "col", "satfinite"}),
    # control and synchronisation
    _op("bra", 1, "ctrl", "ctrl", {"uni"}, control=True),
    _op("call", 0, "ctrl", "ctrl", {"uni"}, control=True),
    _op("ret", 0, "ctrl", "ctrl", {"uni"}, control=True),
    _op("exit", 0, "ctrl", "ctrl", control=True),
    _op("trap", 0, "ctrl", "ctrl", control=True),
    _op("bar", (1, 2), "sync", "sync", {"sync", "cta", "aligned", "arrive"}, control=True),
    _op("barrier", (1, 2), "sync", "sync", {"sync", "cta", "aligned", "arrive"}, control=True),
    _op("barrier.cluster.arrive", 0, "sync", "sync", {"release", "relaxed", "aligned"},
        doc="arrive at the cluster barrier's phase (isa.semantics.cluster)"),
    _op("barrier.cluster.wait", 0, "sync", "sync", {"acquire", "aligned"}, control=True,
        doc="wait until the cluster's threads arrived"),
    _op("mapa", 3, "int", "alu", SPACE, doc="shared address in cluster CTA `rank`"),
    _op("getctarank", 2, "int", "alu", SPACE, doc="cluster rank owning a shared address"),
    _op("membar", 0, "sync", "sync", {"gl", "cta", "sys"}),
    _op("fence", 0, "sync", "sync", {"acq_rel", "sc", "cta", "gpu", "sys", "cluster",
                                      "proxy", "async", "proxy.async"}),
    _op("nanosleep", 1, "misc", "ctrl"),
    _op("pmevent", 1, "misc", "ctrl"),
    # Hopper (sm_90a) tile-level ops: TMA bulk copies, mbarrier, wgmma
    _op("cp.async.bulk.tensor", (3, 6), "lsu", "mem", _TMA_MODS,
        doc="TMA box copy global<->shared through a tensor map"),
    _op("cp.async.bulk", (3, 6), "lsu", "mem", _TMA_MODS, doc="bulk copy of N*16 bytes"),
    _op("cp.async.bulk.prefetch", (2, 3), "lsu", "mem", {"L2", "global", "L2::cache_hint"},
        doc="prefetch N bytes of global memory into the L2"),
    _op("cp.async.bulk.commit_group", 0, "lsu", "sync"),
    _op("cp.async.bulk.wait_group", 1, "lsu", "sync", {"read"}),
    _op("mbarrier.init", 2, "lsu", "mem", SPACE),
    _op("mbarrier.inval", 1, "lsu", "mem", SPACE),
    _op("mbarrier.arrive", (2, 3), "lsu", "mem", _MBAR_MODS | {"expect_tx"}),
    _op("mbarrier.arrive_drop", (2, 3), "lsu", "mem", _MBAR_MODS | {"expect_tx"}),
    _op("mbarrier.expect_tx", 2, "lsu", "mem", _MBAR_MODS),
    _op("mbarrier.complete_tx", 2, "lsu", "mem", _MBAR_MODS),
    _op("mbarrier.test_wait", 3, "lsu", "sync", _MBAR_MODS | {"parity", "acquire"},
        control=True, doc="true once the phase completed; suspends the lane until then"),
    _op("mbarrier.try_wait", (3, 4), "lsu", "sync", _MBAR_MODS | {"parity", "acquire"},
        control=True, doc="true once the phase completed; suspends the lane until then"),
    _op("fence.proxy.async", 0, "sync", "sync", SPACE),
    _op("fence.mbarrier_init", 0, "sync", "sync", {"release", "cluster"}),
    _op("wgmma.mma_async", (6, 8), "tensor", "tensor", {"sync", "aligned"},
        doc="warpgroup D[64,N] += A[64,K] B[K,N], A/B via shared-memory descriptors"),
    _op("wgmma.fence", 0, "tensor", "sync", {"sync", "aligned"}),
    _op("wgmma.commit_group", 0, "tensor", "sync", {"sync", "aligned"}),
    _op("wgmma.wait_group", 1, "tensor", "sync", {"sync", "aligned"}),
    _op("elect", 2, "int", "alu", {"sync"}),
    _op("setmaxnreg", 1, "misc", "ctrl", {"inc", "dec", "sync", "aligned"}),
    # cache policies (isa/semantics/cache_policy.py)
    _op("createpolicy.fractional", (1, 2), "int", "alu", _POLICY_MODS,
        doc="pol = an L2 eviction policy for a fraction of the lines accessed"),
    _op("createpolicy.range", 4, "int", "alu", _POLICY_MODS | {"global"},
        doc="pol = an L2 eviction policy for an address range"),
    _op("discard", 2, "lsu", "mem", {"global", "L2"},
        doc="drop a 128-byte line from the L2 without writing it back"),
    _op("applypriority", 2, "lsu", "mem", {"global", "L2::evict_normal"},
        doc="give a 128-byte line held by the L2 the normal eviction priority"),
    # 2:4 structured-sparse mma (isa/semantics/tensor_mma_sp.py)
    _op("mma.sp", 6, "tensor", "tensor", {"sync", "aligned", "row", "col"},
        doc="D = expand(A, metadata e, selector f) @ B + C, A 2:4 sparse (K/2 stored)"),
    _op("mma.sp::ordered_metadata", 6, "tensor", "tensor", {"sync", "aligned", "row", "col"},
        doc="mma.sp with increasing metadata indices per group (the sm_90 spelling)"),
)

# Our own ops, spelled like PTX. An extension is one row here plus one function in
# `isa/semantics/` registered under the same name; parser, decoder, verifier, counters and
# the timing model's unit classes pick it up from this table. Documented in
# `isa/EXTENSIONS.md` and in the module docstring of each semantics module.
EXTENSIONS: tuple[OpSpec, ...] = (
    # variable-precision compute unit (isa/semantics/vpcu.py, timed by models/vpcu.py)
    _op("vpcu.setprec", 2, "misc", "alu",
        doc="d = precision code (0 fp32, 1 tf32, 2 fp16, 3 bf16, 4 e4m3, 5 e5m2); checks it"),
    _op("vmma", 5, "tensor", "tensor", {"sync", "aligned", "row", "col", "dyn"},
        doc="D = A @ B + C with A/B read in the precision held by the last operand"),
    # zero-compression engine (isa/semantics/zce.py, timed by models/zce.py)
    _op("zmma", 4, "tensor", "tensor", {"sync", "aligned", "row", "col", "satfinite"},
        doc="mma.sync that skips zero operands: dense result, time scaled by non-zeros"),
)

OPCODES: dict[str, OpSpec] = {op.name: op for op in TABLE + EXTENSIONS}


def lookup(opcode: str, mods: tuple[str, ...]) -> tuple[OpSpec | None, tuple[str, ...]]:
    """Find the longest dotted table key that prefixes `opcode.mods`; return it and the rest."""
    for n in range(min(len(mods), 3), -1, -1):
        key = ".".join((opcode,) + mods[:n])
        spec = OPCODES.get(key)
        if spec is not None:
            return spec, mods[n:]
    return None, mods
