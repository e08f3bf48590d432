"""Co-design variants of the GEMM and attention ops: the stock templates, run on the
co-design units the config enables (`units.vpcu`, `units.zce`, `units.tensor.sparse_2_4`).

`gemm_hook` and `attention_hook` wrap the op builders of `workloads.ops.gemm` /
`workloads.ops.attention` (one decorator line there). With no unit active (`active(config)`
false: every stock preset, and `deepseek_codesign` with the units switched off) they call the
builder unchanged, so the plans, and every simulated figure, are the stock ones. Otherwise
the stock template (`templates.gemm` / `templates.attention`, not edited) is planned on the
config with the units off and each of its launches is composed with the units:

* VPCU (`units.vpcu.enabled`): the precision of the op comes from `units.vpcu.policy`
  (`workloads.codesign.precision`: "dtype" keeps the op's own, "static" uses
  `static_precision`, "per_kernel" DeepSeek-V3's recipe by op kind, "gradient_norm" the
  layer's `grad_norm`). The GEMM is planned at that precision's storage (fp32/tf32 -> the
  tf32 template, 4-byte operands; fp16, bf16; e4m3/e5m2 -> fp8, DeepSeek block scaling kept
  only when the op had it); attention keeps bf16/fp16 (its template has no other; a policy
  asking for another is an InputError). Every consumer warp first runs
  `vpcu.setprec.b32 %vprec, CODE` (timed by `models.vpcu`: the switch holds the tensor pipe
  `units.vpcu.switch_cycles`), and the launch's tensor pipe runs at the VPCU's rate for the
  precision: `units.tensor.<template>_fma_per_clk_per_sm` = `units.vpcu.<p>_flop_per_clk_per_sm`
  / 2 for that launch (the wgmma instructions keep their stock spelling; their issue
  interval is what changes).
* ZCE (`units.zce.enabled` and a non-zero `activation_sparsity` or `weight_sparsity`): from
  seeded 128 x 128 tiles at those zero ratios (ReLU-like activations, magnitude-pruned
  weights; `zce_layer.sample_operands`) it takes the share of MMA work the engine still
  issues at `units.zce.granularity` (floored at `min_issue_fraction`, as `models.zce` times
  `zmma`) and the compressed/dense byte ratio of each operand in the ZCE format at the
  template's dtype. Zero-skipping MMA: the tensor rate above is divided by the share (the
  `zmma` closed form, interval x share). Compressed loads: A and B stay compressed in
  memory and in shared memory (the MMA reads bitmap + non-zeros, no decompression on this
  path); every TMA box of a 128-byte K atom moves `ceil(128 * ratio / 16) * 16` bytes (the
  TMA's 16-byte granule), so L2 and HBM see the compressed bytes, and the producer's
  `expect_tx` counts them. The launch runs in timing mode (the product equals the dense
  one, as `zmma`'s semantics guarantee); C is stored dense (a GEMM with an activation
  epilogue: `zce_store.gemm_activation_output`).
* 2:4 structured sparsity (`units.tensor.sparse_2_4`, the stock baseline, `mma.sp` /
  sparse wgmma): rate x `units.tensor.sparse_rate_multiplier`; B (the weights) moves half
  its values plus 2 bits of metadata per kept value per 128-byte atom (rounded up to 16
  bytes: 80 bytes for fp8/bf16/tf32). Cannot be combined with ZCE sparsity (InputError).

* ZCE in causal attention (`units.zce.enabled`, whatever the configured sparsities): the
  masked scores make P zero above the diagonal; the template computes no block above it,
  so only the P.V blocks straddling the diagonal hold zeros. `causal_pv_skip` measures, per
  distinct block offset, the share of that block's P.V work the engine issues at
  `units.zce.granularity` (floored at `min_issue_fraction`), and the launch's tensor rate is
  divided by the launch-wide share (QK^T and P.V work together: both wgmma kinds are sped
  up alike, the average). Packed (decode GQA) launches are left stock.

`codesign_info(config, op)` gives the choices (precision, share, byte ratios) of an op kind
("gemm" with its template dtype, or "attention"); `op_counts(plan)` the per-op figures the
workload kernels table carries (MACs, MACs skipped, precision, operand bytes, output bytes
stored compressed).

Compressed stores (`zce_store`): the forward GELU/SwiGLU ops store their output, the A
operand of the next GEMM, in the ZCE format at the same seeded ratio these loads read
(through the SM's compression engine at `units.zce.compress_bytes_per_clk_per_sm`). Left
out: every other producer of a GEMM's A (norms, attention, residual adds, GEMMs without an
activation epilogue) still stores dense, while its consumer GEMM reads A compressed as if
it had been stored so (that compression is assumed free); the weights B are taken as
stored compressed offline. Also left out: precision
switches between kernels (one setprec per warp per launch is charged whatever the previous
kernel ran). Units: bytes, FMAs per clock per SM, SM cycles.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import types

import numpy as np

from isa.errors import InputError
from isa.semantics.vpcu import PRECISION_CODES
from isa.tensor_map import TensorMap, make_tensor_map, read_tensor_map
from workloads.codesign.precision import make_policy
from workloads.codesign.zce_format import active_fraction
from workloads.codesign.zce_layer import sample_operands

ATOM_BYTES = 128                 # one 128-byte swizzled K atom per TMA box
TMA_GRANULE_BYTES = 16           # TMA boxes move whole 16-byte units of the inner dimension
STORAGE = {"fp32": "tf32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "e4m3": "fp8",
           "e5m2": "fp8"}
"""Template dtype a VPCU precision is planned at (its operand storage)."""
OWN_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp8": "e4m3", "tf32": "tf32"}
WORKLOAD_DTYPE = {"fp8": "e4m3", "bf16": "bf16", "fp16": "f16", "tf32": "f32"}
TWO_FOUR_KEPT = 0.5             # 2:4: two of every four weights kept, half the products done
ELEM_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "tf32": 4}
_SETMAXNREG = re.compile(r"^(\s*setmaxnreg\.inc\.sync\.aligned\.u32 \d+;)$", re.M)
_FIRST_REG = re.compile(r"^(\s*\.reg )", re.M)
_EXPECT_TX = re.compile(r"(mbarrier\.arrive\.expect_tx\.shared::cta\.b64 %rd2, \[%r3\], )"
                        r"(\d+);")


def _zce_on(config) -> bool:
    z = config.units.zce
    return bool(z.enabled and (z.activation_sparsity > 0 or z.weight_sparsity > 0))


def active(config) -> bool:
    """Whether any co-design unit changes the GEMM/attention ops on `config`."""
    return bool(config.units.vpcu.enabled or _zce_on(config) or config.units.tensor.sparse_2_4)


def stock(config):
    """`config` with the co-design units off (what the stock templates are planned on)."""
    return config.with_overrides({"units.vpcu.enabled": False, "units.zce.enabled": False,
                                  "units.tensor.sparse_2_4": False})


def precision_of(config, op: str, own: str) -> str:
    """VPCU precision of an op of kind `op` ("gemm" or "attention") whose own precision is
    `own`, by `units.vpcu.policy` (module docstring)."""
    v = config.units.vpcu
    if v.policy == "dtype":
        return own
    params = {"static": {"precision": v.static_precision}}.get(v.policy, {})
    policy = make_policy(v.policy, **params)
    node = types.SimpleNamespace(op=op, name=op, role="")
    return policy.precision(node, v.grad_norm if v.policy == "gradient_norm" else None) or own


@functools.lru_cache(maxsize=64)
def _zce_sample(activation: float, weight: float, seed: int, granularity: str, kblock: int,
                floor: float) -> dict:

    cfg = types.SimpleNamespace(units=types.SimpleNamespace(zce=types.SimpleNamespace(
        granularity=granularity, kblock_elements=kblock, min_issue_fraction=floor)))
    return sample_operands(activation, weight, cfg, seed)


def atom_bytes(ratio: float) -> int:
    """Bytes a TMA box moves per 128-byte atom of an operand compressed to `ratio`."""
    granules = math.ceil(ATOM_BYTES * min(ratio, 1.0) / TMA_GRANULE_BYTES - 1e-9)
    return max(TMA_GRANULE_BYTES, min(ATOM_BYTES, granules * TMA_GRANULE_BYTES))


def two_four_atom_bytes(elem_bytes: int) -> int:
    """Bytes per 128-byte weight atom under 2:4: half the values + 2 metadata bits each."""
    kept = ATOM_BYTES // elem_bytes // 2
    return atom_bytes((ATOM_BYTES / 2 + kept * 2 / 8) / ATOM_BYTES)


def codesign_info(config, op: str, dtype: str) -> dict:
    """Choices for an op of kind `op` at template dtype `dtype` (see the module docstring):
    precision, template dtype, tensor rate (FMA/clk/SM), share of MMA work issued, bytes
    per 128-byte atom of A and B."""
    u = config.units
    if _zce_on(config) and u.tensor.sparse_2_4:
        raise InputError("units.zce activation/weight sparsity and units.tensor.sparse_2_4 are "
                         "both set (accepted: one of them: ZCE, or the stock 2:4 baseline)")
    own = OWN_PRECISION[dtype]
    precision = precision_of(config, op, own) if u.vpcu.enabled else own
    template = STORAGE[precision]
    if op == "attention" and template not in ("bf16", "fp16"):
        raise InputError(f"attention at precision {precision!r} (units.vpcu.policy = "
                         f"{u.vpcu.policy!r}): the attention template runs bf16 or fp16 "
                         "(accepted: a policy giving attention bf16/fp16)")
    rate = (u.vpcu.flop_per_clk_per_sm(precision) / 2 if u.vpcu.enabled
            else u.tensor.fma_per_clk_per_sm(template))
    info = {"precision": precision, "template": template, "share": 1.0, "raw_share": 1.0,
            "a_atom_bytes": ATOM_BYTES, "b_atom_bytes": ATOM_BYTES, "rate_multiplier": 1.0}
    if op == "gemm" and _zce_on(config):
        z = u.zce
        sample = _zce_sample(z.activation_sparsity, z.weight_sparsity, z.seed, z.granularity,
                             z.kblock_elements, z.min_issue_fraction)
        ra, rw = sample["ratios"][WORKLOAD_DTYPE[template]]
        info.update(share=sample["share"], raw_share=sample["raw_share"],
                    a_atom_bytes=atom_bytes(ra), b_atom_bytes=atom_bytes(rw))
    elif op == "gemm" and u.tensor.sparse_2_4:
        info.update(rate_multiplier=u.tensor.sparse_rate_multiplier, raw_share=TWO_FOUR_KEPT,
                    b_atom_bytes=two_four_atom_bytes(ELEM_BYTES[template]))
    info["fma_per_clk_per_sm"] = int(round(rate * info["rate_multiplier"] / info["share"]))
    return info


def _with_setprec(ptx: str, precision: str) -> str:
    """`ptx` whose consumer warps set the VPCU precision after `setmaxnreg.inc`."""
    if len(_SETMAXNREG.findall(ptx)) != 1:
        raise InputError("co-design: the template's consumer prologue (one setmaxnreg.inc) "
                         "was not found; accepted: the stock GEMM/attention templates")
    code = PRECISION_CODES[precision]
    ptx = _FIRST_REG.sub(r"\1.b32 %vprec;\n\1", ptx, count=1)
    return _SETMAXNREG.sub(rf"\1\n    vpcu.setprec.b32 %vprec, {code};", ptx)


def _narrow(raw, args: list, inner_bytes: int):
    """Tensor map `raw` with its inner box cut to `inner_bytes` (same rows and tensor)."""
    tm = read_tensor_map(raw)
    if not isinstance(tm, TensorMap):
        raise InputError(f"co-design: launch argument is not a tensor map ({tm})")
    target = args[tm.base_arg]
    box = (tm.box[1], inner_bytes // tm.elem_bytes)
    return make_tensor_map(0, box, swizzle=tm.swizzle_bytes, arg=tm.base_arg,
                           shape=tuple(target.shape), dtype=target.dtype)


def _compressed(launch, info: dict, elem_bytes: int):
    """(ptx, args) with compressed TMA boxes and the matching expect_tx: the stage's A and B
    bytes replaced by their compressed size, anything else the stage's barrier expects (the
    DeepSeek-scaled template's scale_a box) kept."""
    tiles = launch.detail["tiles"]
    k_atoms = tiles["k_tile"] * elem_bytes // ATOM_BYTES
    ca, cb = info["a_atom_bytes"], info["b_atom_bytes"]
    args = list(launch.args)
    args[0], args[1] = _narrow(args[0], args, ca), _narrow(args[1], args, cb)
    found = _EXPECT_TX.findall(launch.ptx)
    if len(found) != 1:
        raise InputError("co-design: the GEMM producer's expect_tx was not found; accepted: "
                         "the stock GEMM template")
    dense = k_atoms * ATOM_BYTES * (tiles["m_tile"] + tiles["n_tile"])
    other = int(found[0][1]) - dense
    if other < 0:
        raise InputError(f"co-design: the GEMM producer expects {found[0][1]} bytes per stage, "
                         f"less than its A and B boxes ({dense}); accepted: the stock GEMM "
                         "template")
    tx = k_atoms * (tiles["m_tile"] * ca + tiles["n_tile"] * cb) + other
    ptx = _EXPECT_TX.sub(rf"\g<1>{tx};", launch.ptx)
    return ptx, args


def _adapt(launch, info: dict, vpcu: bool, compress: bool):
    """One launch composed with the units (module docstring)."""
    ptx, args = launch.ptx, launch.args
    if compress:
        ptx, args = _compressed(launch, info, ELEM_BYTES[info["template"]])
    if vpcu:
        ptx = _with_setprec(ptx, info["precision"])
    key = f"units.tensor.{info['template']}_fma_per_clk_per_sm"
    detail = {**launch.detail, "codesign": {k: info[k] for k in
                                            ("precision", "share", "a_atom_bytes",
                                             "b_atom_bytes", "fma_per_clk_per_sm")}}
    return dataclasses.replace(launch, ptx=ptx, args=args, detail=detail,
                               overrides={**launch.overrides,
                                          key: info["fma_per_clk_per_sm"]})


def _adapt_plan(plan, info: dict, config, compress: bool):
    vpcu = bool(config.units.vpcu.enabled)
    launches = tuple(_adapt(x, info, vpcu, compress) if x.detail.get("uses_wgmma") else x
                     for x in plan.launches)
    samples = tuple((w, _adapt(x, info, vpcu, compress) if x.detail.get("uses_wgmma") else x)
                    for w, x in plan.samples)
    sizes = {**plan.sizes, "precision": info["precision"], "mma_share": info["share"],
             "mac_share": info["raw_share"], "template": info["template"],
             "a_atom_bytes": info["a_atom_bytes"], "b_atom_bytes": info["b_atom_bytes"]}
    return dataclasses.replace(plan, launches=launches, samples=samples, sizes=sizes)


def gemm_hook(builder):
    """Wrap the GEMM op builder: unchanged unless `active(config)` (module docstring)."""
    signature = inspect.signature(builder)

    @functools.wraps(builder)
    def gemm(config, *args, **kwargs):
        if not active(config):
            return builder(config, *args, **kwargs)
        bound = signature.bind(config, *args, **kwargs)
        bound.apply_defaults()
        call = dict(bound.arguments)
        tiles = call.pop("tiles", {})
        call.pop("config")
        dtype = {"e4m3": "fp8"}.get(call["dtype"], call["dtype"])
        if dtype not in OWN_PRECISION:
            return builder(config, *args, **kwargs)       # the builder names the bad dtype
        info = codesign_info(config, "gemm", dtype)
        compress = info["a_atom_bytes"] < ATOM_BYTES or info["b_atom_bytes"] < ATOM_BYTES
        if info["template"] != dtype:
            call["out_dtype"] = call["out_dtype"] or ("f32" if dtype == "tf32" else "bf16")
            if call["scaling"] == "deepseek" and info["template"] != "fp8":
                call["scaling"] = "none"
        call["dtype"] = info["template"]
        if compress:
            call["shape_only"] = True
        plan = builder(stock(config), **call, **tiles)
        return _adapt_plan(plan, info, config, compress)

    return gemm


@functools.lru_cache(maxsize=256)
def _diagonal_block_share(offset: int, rows: int, cols: int, dv: int, granularity: str,
                          kblock: int) -> float:
    """Share of a P.V block's MMA work the ZCE issues when P[r, c] is zero for
    c > r + offset (the causal mask inside a block straddling the diagonal; V dense)."""

    p = (np.arange(cols)[None, :] <= np.arange(rows)[:, None] + offset).astype(np.float32)
    return active_fraction(p, np.ones((cols, dv), np.float32), granularity, kblock)


def causal_pv_skip(sizes: dict, m_tile: int, kv_block: int, granularity: str, kblock: int,
                   floor: float) -> dict:
    """What the ZCE skips in a causal attention launch: only the P.V blocks that straddle
    the diagonal hold zeros (masked scores give P = 0; the template computes no block
    above the diagonal). Per head: `work` = FMAs of every block the template computes
    (QK^T and P.V, m_tile x kv_block x (D + Dv) each), `skipped_work` = sum over straddling
    blocks of m_tile x kv_block x Dv x (1 - max(floor, share of that block)), `macs_skipped` =
    their zero products (batch x heads x sum of zeros x Dv)."""
    sq, sk = sizes["seqlen_q"], sizes["seqlen_k"]
    d, dv = sizes["headdim"], sizes["headdim_v"]
    rows0 = np.arange(0, sq, m_tile)[:, None]
    cols0 = np.arange(0, sk, kv_block)[None, :]
    offset = rows0 + (sk - sq) - cols0                 # block's first row sees c <= offset
    computed = offset + m_tile - 1 >= 0                # its last row sees a key
    straddling = computed & (offset < kv_block - 1)
    offsets, counts = np.unique(offset[straddling], return_counts=True)
    skipped = zeros = 0.0
    for o, c in zip(offsets.tolist(), counts.tolist(), strict=True):
        share = max(floor, _diagonal_block_share(o, m_tile, kv_block, dv, granularity,
                                                 kblock))
        skipped += c * m_tile * kv_block * dv * (1 - share)
        visible = np.clip(np.arange(m_tile) + o + 1, 0, kv_block).sum()
        zeros += c * (m_tile * kv_block - visible) * dv
    work = float(np.count_nonzero(computed)) * m_tile * kv_block * (d + dv)
    per_head = sizes["batch"] * sizes["heads"]
    return {"share": 1 - skipped / work if work else 1.0,
            "macs_skipped": float(zeros * per_head)}


def _attention_zce(plan, config):
    """`plan` with the ZCE skipping the causal zeros of P in P.V (`causal_pv_skip`), as a
    launch-wide tensor rate / share (both wgmma kinds sped up alike: the average)."""
    z = config.units.zce
    launch = plan.launches[0]
    tiles = launch.detail["tiles"]
    skip = causal_pv_skip(plan.sizes, tiles["m_tile"], tiles["kv_block"], z.granularity,
                          z.kblock_elements, z.min_issue_fraction)
    template = plan.sizes.get("template", plan.sizes["dtype"])
    key = f"units.tensor.{template}_fma_per_clk_per_sm"
    base = dict(launch.overrides).get(key, config.units.tensor.fma_per_clk_per_sm(template))

    def adapt(x):
        if not x.detail.get("uses_wgmma"):
            return x
        rate = int(round(dict(x.overrides).get(key, base) / skip["share"]))
        return dataclasses.replace(x, overrides={**x.overrides, key: rate})

    macs = plan.flops / 2
    sizes = {**plan.sizes, "mma_share": skip["share"], "template": template,
             "mac_share": 1 - skip["macs_skipped"] / macs if macs else 1.0}
    return dataclasses.replace(plan, sizes=sizes,
                               launches=tuple(adapt(x) for x in plan.launches),
                               samples=tuple((w, adapt(x)) for w, x in plan.samples))


def attention_hook(builder):
    """Wrap the attention op builder: unchanged unless the VPCU is on or the ZCE meets a
    causal mask (module docstring)."""
    signature = inspect.signature(builder)

    @functools.wraps(builder)
    def attention(config, *args, **kwargs):
        bound = signature.bind(config, *args, **kwargs)
        bound.apply_defaults()
        call = dict(bound.arguments)
        call.pop("config")
        zce = bool(config.units.zce.enabled and call.get("causal"))
        if not (config.units.vpcu.enabled or zce) or call["dtype"] not in ("bf16", "fp16"):
            return builder(config, *args, **kwargs)       # stock (or the builder's error)
        if config.units.vpcu.enabled:
            info = codesign_info(config, "attention", call["dtype"])
            call["dtype"] = info["template"]
            plan = _adapt_plan(builder(stock(config), **call), info, config, False)
        else:
            plan = builder(stock(config), **call)
        packed = plan.launches[0].detail["tiles"].get("pack", 0)
        return _attention_zce(plan, config) if zce and not packed else plan

    return attention


COUNT_COLUMNS = ("macs", "macs_skipped", "precision", "operand_bytes", "operand_bytes_stored")
"""What `op_counts` gives per op: the workload kernels table's co-design columns."""
STORE_COLUMNS = ("output_bytes", "output_bytes_stored", "compress_cycles")
"""Also in `op_counts`: an output stored ZCE-compressed (`zce_store`), dense and as stored,
and the compressor's closed-form cycles; 0 for ops storing dense."""


def _operand_elements(plan) -> tuple[float, float]:
    """Elements of A and B a GEMM plan's MMAs read (valid rows; B once per group)."""
    s, macs = plan.sizes, plan.flops / 2
    if "groups" not in s:                     # plain or batched: macs = g m n k
        return macs / s["n"], macs / s["m"]
    b = s["k_total"] * s["n"] if s.get("ragged") == "k" else s["groups"] * s["k"] * s["n"]
    return macs / s["n"], b


def op_counts(plan) -> dict:
    """The co-design figures of one op plan (stock or composed by the hooks), summed by
    workload tables: `macs` (tensor-core MACs: flops / 2 of an op whose launches issue
    wgmma, else 0), `macs_skipped` (macs x (1 - share of products done): zero products
    under the ZCE, half the products under 2:4; causal attention: the zero products of the
    P.V blocks straddling the diagonal, which the op's flops, counting visible products
    only, leave out), `precision` of its MMAs ("" without MMA),
    `operand_bytes` (a GEMM's A and B dense at its template dtype; 0 for other ops) and
    `operand_bytes_stored` (A and B in the format its MMA reads: ZCE-compressed, 2:4 weights
    halved plus metadata; = operand_bytes when nothing is compressed); the
    `STORE_COLUMNS` of an op whose output `zce_store` compresses (else 0). Bytes, MACs,
    cycles."""
    s = plan.sizes
    stored = {c: float(s.get(c, 0.0)) for c in STORE_COLUMNS}
    mma = any(x.detail.get("uses_wgmma") for x in plan.launches)
    if not mma:
        return {"macs": 0.0, "macs_skipped": 0.0, "precision": "", "operand_bytes": 0.0,
                "operand_bytes_stored": 0.0, **stored}
    macs = plan.flops / 2
    dtype = s.get("template", {"e4m3": "fp8"}.get(s.get("dtype"), s.get("dtype")))
    if dtype is None:                  # an op without a dtype flag: its peak's tensor type
        dtype = plan.peak.removeprefix("tensor_").removesuffix("_tflops")
    counts = {"macs": macs, "macs_skipped": macs * (1 - s.get("mac_share", 1.0)),
              "precision": s.get("precision", OWN_PRECISION.get(dtype, str(dtype))),
              "operand_bytes": 0.0, "operand_bytes_stored": 0.0, **stored}
    if plan.kind == "gemm":
        a, b = _operand_elements(plan)
        elem = ELEM_BYTES[dtype]
        counts["operand_bytes"] = (a + b) * elem
        counts["operand_bytes_stored"] = (a * s.get("a_atom_bytes", ATOM_BYTES)
                                          + b * s.get("b_atom_bytes", ATOM_BYTES)) \
            * elem / ATOM_BYTES
    return counts


def totals(kernels) -> dict:
    """Sums of the `COUNT_COLUMNS` over a workload kernels table, and the MACs per
    precision (the precision mix); empty when the table has no `macs` column."""
    if "macs" not in getattr(kernels, "columns", ()):
        return {}
    out = {c: float(kernels[c].fillna(0).sum()) for c in COUNT_COLUMNS + STORE_COLUMNS
           if c != "precision" and c in kernels.columns}
    mix = kernels[kernels["macs"] > 0].groupby("precision", sort=True)["macs"].sum()
    out["macs_by_precision"] = {str(p): float(v) for p, v in mix.items()}
    return out
