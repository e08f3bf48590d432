"""What the co-design shortcuts cost in accuracy: a reduced-size layer run functionally on
seeded data under a config's units, against an FP64 reference.

What it models
--------------
* The layer (`reduced_layer`): the structure of one transformer layer of a model at a
  reduced width, stated in `ReducedLayer.reduction`: multi-head attention (a fused QKV
  projection, softmax(Q K^T / sqrt(d)) V per head, causal for decoder models, an output
  projection), a residual add and an RMS normalization, the model's FFN (GELU: fc1, GELU,
  fc2; SwiGLU: gate and up, SiLU(gate) x up, down), a residual add and an RMS
  normalization, then a classifier-like head (`classes` logits per token, FP64, so the
  change of argmax shows the layer's error only). Width: hidden, FFN width and head count
  divided by `width_divisor` (head_dim kept, so each softmax row is as long as at full
  size); tokens capped at `max_tokens`. DeepSeek-V3's MLA runs as plain MHA of its value
  head size and its MoE FFN as one SwiGLU expert (routing left out). The relative error of
  a GEMM whose inputs are rounded comes from the rounding of each input, not from K, and
  FP32 accumulation error (~K x 2^-24) is far below it, so the narrower K changes little.
* The data (`layer_data`, seeded): inputs standard normal with `outlier_channels` of the
  hidden channels scaled by `outlier_scale` (the few large channels of LLM hidden states,
  LLM.int8(), arXiv:2208.07339, reports up to 20x); weights N(0, 1/fan_in); no biases.
* The shortcuts of a config (`Shortcuts.of(config, layer)`):
  - GEMM and attention precision: the model's own dtype (`ModelConfig.precision`), or the
    VPCU policy's choice (`codesign_ops.precision_of`). Inputs rounded to nearest-even in
    the precision (fp8 e4m3/e5m2, bf16, fp16, tf32, fp32) and multiplied with FP32
    accumulation. FP8 scaling: models whose recipe runs FP8 GEMMs (DeepSeek-V3) use
    DeepSeek's fine-grained scales (`fp8_scaling="block"`: one FP32 scale per 1 x 128
    activation tile along K and per 128 x 128 weight block, each tile's max |x| mapped to
    the format's max); an FP8 precision a policy picks for a model without that recipe
    gets one scale per tensor (`"tensor"`), as the time model plans it (no scale tiles).
    P is rounded to the attention precision before P V, as flash attention does.
  - ZCE: the engine skips zero products exactly (bit-exact: a zero operand contributes
    nothing); activations (every projection's A operand, as stored, after rounding) with
    |a| < `units.zce.threshold` are made zero; `units.zce.weight_sparsity` prunes the
    smallest weights. The MACs skipped are measured on those operands at
    `units.zce.granularity` (`zce_format.active_fraction`).
  - 2:4 (`units.tensor.sparse_2_4`): in every group of 4 weights along K the 2 smallest
    magnitudes pruned (no retraining); half the MACs skipped.
  - LUT exp (`units.lut_exp.enabled`): softmax's exp is `lut_exp2(x log2 e)`: 2^x =
    2^i x 2^f (i = floor(x)), 2^f from a table of `entries` + 1 FP32 values of 2^(j / entries),
    read by `interpolation` ('linear' between neighbours, 'nearest'). Off: exact exp (the
    stock SFU's ex2.approx error, ~2^-22, is left out).
* The metrics (`error_metrics`): relative Frobenius error ||y - y_ref|| / ||y_ref||, max
  absolute error, and the share of tokens whose head argmax differs from the reference's.
* Gradient compression (`compressed_allreduce_error`): the top-k (about 10 %) + 4-bit format
  of `workloads.kernels.comm.compression` (the kernels' numpy reference) on a seeded gradient
  stream (a fixed mean plus per-rank noise per step), all-reduced by summing what each rank
  sends, with or without error feedback (each rank adds the residual it did not send to its
  next gradient); the error of the running sum after each step against the uncompressed
  all-reduce.
* Gradient norms (`mlp_gradient_norms`): per-layer weight-gradient L2 norms of the backward
  pass of a seeded numpy ReLU MLP (cross-entropy against a seeded teacher's labels) after
  `steps` SGD steps, as the `gradient_norm` precision policy's input (the norms fall as
  the loss does, so the precision the policy picks depends on the training phase).

Left out: biases and LayerNorm affine weights, rounding of GEMM outputs and element-wise
ops (they stay FP32 until the next GEMM rounds them), Hopper's FP8 accumulation width
(DeepSeek promotes partial sums to FP32 every 128 K; here every product is accumulated in
FP32), errors of the backward pass and their effect on convergence.
Units: errors in the output's own units (dimensionless data), shares in [0, 1].
"""

from __future__ import annotations

import dataclasses
import functools
import math

import ml_dtypes
import numpy as np

from isa.errors import InputError
from workloads.codesign import zce_format as Z
from workloads.codesign.codesign_ops import precision_of
from workloads.codesign.precision import GradientNorms
from workloads.kernels.comm import compression as C
from workloads.models import get_model

FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
CASTS = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2")
MANTISSA_BITS = {"fp64": 52, "fp32": 23, "tf32": 10, "fp16": 10, "bf16": 7, "e4m3": 3,
                 "e5m2": 2}
FP8_SCALINGS = ("block", "tensor")
FP8_BLOCK = 128                  # DeepSeek-V3: 1 x 128 activation tiles, 128 x 128 weights
_OWN = {"e4m3": "e4m3", "e5m2": "e5m2", "bf16": "bf16", "f16": "fp16", "f32": "fp32"}
TARGET_HIDDEN = 256              # default reduction: the widest power-of-two cut to <= this


# -- rounding -------------------------------------------------------------------------------

def _tile_scales(x: np.ndarray, tile: tuple[int, int] | None, fmax: float) -> np.ndarray:
    """FP32 scale per tile of `x` [R, C] (broadcast to x) mapping the tile's max |x| to
    `fmax`; one scale for the tensor when `tile` is None."""
    if tile is None:
        amax = float(np.max(np.abs(x))) if x.size else 0.0
        return np.full(x.shape, np.float32(amax / fmax) if amax > 0 else np.float32(1))
    tr, tc = tile
    r, c = x.shape
    pr, pc = -(-r // tr) * tr, -(-c // tc) * tc
    padded = np.zeros((pr, pc))
    padded[:r, :c] = np.abs(x)
    amax = padded.reshape(pr // tr, tr, pc // tc, tc).max(axis=(1, 3))
    scale = np.where(amax > 0, amax / fmax, 1.0).astype(np.float32)
    return np.repeat(np.repeat(scale, tr, axis=0), tc, axis=1)[:r, :c]


def round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """FP32 `x` rounded to nearest-even with `bits` mantissa bits (tf32: 10)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    drop = 23 - bits
    bias = np.uint32((1 << (drop - 1)) - 1) + ((u >> np.uint32(drop)) & np.uint32(1))
    return ((u + bias) & ~np.uint32((1 << drop) - 1)).view(np.float32)


def quantize(x: np.ndarray, precision: str, tile: tuple[int, int] | None = None) -> np.ndarray:
    """`x` rounded to nearest-even in `precision`, as float64 values. FP8: `x / scale` in
    the format times `scale`, one FP32 scale per `tile` (None: per tensor; module
    docstring)."""
    x = np.asarray(x, np.float64)
    if precision == "fp64":
        return x.copy()
    if precision in FP8:
        fmax = float(ml_dtypes.finfo(FP8[precision]).max)
        scale = _tile_scales(x, tile, fmax).astype(np.float64)
        q = np.clip(x / scale, -fmax, fmax).astype(FP8[precision]).astype(np.float64)
        return q * scale
    if precision == "tf32":
        return round_mantissa(x.astype(np.float32), MANTISSA_BITS["tf32"]).astype(np.float64)
    if precision in CASTS:
        return x.astype(CASTS[precision]).astype(np.float64)
    raise InputError(f"precision {precision!r} (accepted: {', '.join(PRECISIONS)})")


def error_metrics(out: np.ndarray, ref: np.ndarray) -> dict:
    """Relative Frobenius error and max absolute error of `out` against `ref`."""
    diff = np.asarray(out, np.float64) - np.asarray(ref, np.float64)
    norm = float(np.linalg.norm(ref))
    return {"rel_error": float(np.linalg.norm(diff)) / norm if norm else float("nan"),
            "max_abs_error": float(np.max(np.abs(diff))) if diff.size else 0.0}


def argmax_change(logits: np.ndarray, ref_logits: np.ndarray) -> float:
    """Share of rows whose argmax differs from the reference's."""
    return float(np.mean(np.argmax(logits, axis=-1) != np.argmax(ref_logits, axis=-1)))


# -- LUT exp --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _exp2_table(entries: int) -> np.ndarray:
    return (2.0 ** (np.arange(entries + 1) / entries)).astype(np.float32).astype(np.float64)


def lut_exp2(x: np.ndarray, entries: int, interpolation: str = "linear") -> np.ndarray:
    """2^x by range reduction 2^i x 2^f and a table of 2^f (module docstring)."""
    if entries < 1:
        raise InputError(f"LUT entries = {entries} (accepted: an integer >= 1)")
    x = np.asarray(x, np.float64)
    i = np.floor(x)
    pos = (x - i) * entries
    j = np.minimum(np.floor(pos), entries - 1).astype(np.int64)
    table = _exp2_table(entries)
    if interpolation == "linear":
        t = pos - j
        frac = table[j] + t * (table[j + 1] - table[j])
    elif interpolation == "nearest":
        frac = table[np.rint(pos).astype(np.int64)]
    else:
        raise InputError(f"LUT interpolation {interpolation!r} (accepted: linear, nearest)")
    return np.ldexp(frac, i.astype(np.int64))


def linear_interpolation_bound(entries: int) -> float:
    """Closed-form bound of |lut_exp2 - 2^f| on f in [0, 1), linear: h^2 / 8 max|f''|, h =
    1 / entries, f'' = ln(2)^2 2^f <= 2 ln(2)^2."""
    return (1 / entries) ** 2 / 8 * 2 * math.log(2) ** 2


def softmax(s: np.ndarray, lut: tuple[int, str] | None = None) -> np.ndarray:
    """Row softmax of `s` (max subtracted); exp from the LUT (`(entries, interpolation)`)
    or exact; -inf entries give 0."""
    z = s - np.max(s, axis=-1, keepdims=True)
    e = np.exp(z) if lut is None else np.where(np.isfinite(z),
                                               lut_exp2(np.where(np.isfinite(z), z, 0)
                                                        * math.log2(math.e), *lut), 0.0)
    return e / np.sum(e, axis=-1, keepdims=True)


# -- the reduced layer ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ReducedLayer:
    """Sizes of the reduced layer (module docstring)."""

    model: str
    tokens: int
    hidden: int
    ffn: int
    heads: int
    head_dim: int
    activation: str            # "gelu", "swiglu" or "relu"
    causal: bool
    classes: int
    width_divisor: int
    gemm_dtype: str            # the model's own GEMM precision
    attention_dtype: str
    fp8_block_scaling: bool    # the model's recipe runs FP8 GEMMs with block scales

    @property
    def reduction(self) -> str:
        """The reduction, in words."""
        return (f"{self.model} layer at 1/{self.width_divisor} width: {self.tokens} tokens, "
                f"hidden {self.hidden}, {self.activation} FFN {self.ffn}, {self.heads} heads "
                f"x {self.head_dim}, {'causal' if self.causal else 'bidirectional'}, "
                f"{self.classes}-class head")


def _round16(n: int) -> int:
    return max(16, n // 16 * 16)


def reduced_layer(model: str, tokens: int, width_divisor: int | None = None,
                  max_tokens: int = 128, classes: int = 16,
                  activation: str | None = None) -> ReducedLayer:
    """The reduced layer of `model` at `tokens` (module docstring); `width_divisor` None:
    the smallest power of two bringing hidden to <= `TARGET_HIDDEN`."""
    cfg = get_model(model)
    att = cfg.attention
    head_dim = getattr(att, "head_dim", getattr(att, "v_head_dim", 64))
    ffn = cfg.moe.expert_intermediate_size if cfg.moe else cfg.mlp.intermediate_size
    div = width_divisor or 1 << max(0, math.ceil(math.log2(cfg.hidden_size / TARGET_HIDDEN)))
    act = activation or ("swiglu" if cfg.mlp.kind == "swiglu" else "gelu")
    if act not in ("gelu", "swiglu", "relu"):
        raise InputError(f"activation {act!r} (accepted: gelu, swiglu, relu)")
    return ReducedLayer(model=cfg.name, tokens=_round16(min(tokens, max_tokens)),
                        hidden=_round16(cfg.hidden_size // div), ffn=_round16(ffn // div),
                        heads=max(1, att.heads // div), head_dim=head_dim, activation=act,
                        causal=cfg.causal, classes=classes, width_divisor=div,
                        gemm_dtype=_OWN[cfg.precision.gemm_dtype],
                        attention_dtype=_OWN[cfg.precision.attention_dtype],
                        fp8_block_scaling=cfg.precision.gemm_dtype in FP8)


@dataclasses.dataclass(frozen=True)
class LayerData:
    """Seeded inputs and weights of a reduced layer ([in, out] weights)."""

    x: np.ndarray
    w_qkv: np.ndarray
    w_o: np.ndarray
    w_in: np.ndarray           # fc1, or gate and up side by side for SwiGLU
    w_out: np.ndarray
    w_head: np.ndarray


@functools.lru_cache(maxsize=8)
def layer_data(layer: ReducedLayer, seed: int = 0, outlier_channels: float = 0.01,
               outlier_scale: float = 10.0) -> LayerData:
    """Seeded data of `layer` (module docstring)."""
    rng = np.random.default_rng(seed)
    h, f, width = layer.hidden, layer.ffn, layer.heads * layer.head_dim
    x = rng.standard_normal((layer.tokens, h))
    n_out = int(round(outlier_channels * h))
    x[:, rng.choice(h, n_out, replace=False)] *= outlier_scale

    def weight(fan_in: int, fan_out: int) -> np.ndarray:
        return rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)

    return LayerData(x=x, w_qkv=weight(h, 3 * width), w_o=weight(width, h),
                     w_in=weight(h, 2 * f if layer.activation == "swiglu" else f),
                     w_out=weight(f, h), w_head=weight(h, layer.classes))


@dataclasses.dataclass(frozen=True)
class Shortcuts:
    """What a config changes in the layer's arithmetic (module docstring); all off and
    precision "fp64" is the reference."""

    gemm_precision: str = "fp64"
    attention_precision: str = "fp64"
    fp8_scaling: str = "tensor"
    zce: bool = False
    zce_threshold: float = 0.0
    zce_granularity: str = "element"
    activation_sparsity: float = 0.0   # typed what-if: smallest |a| share pruned per GEMM
    weight_sparsity: float = 0.0
    two_four: bool = False
    lut: tuple[int, str] | None = None

    @classmethod
    def of(cls, config, layer: ReducedLayer, activation_sparsity: float = 0.0) -> Shortcuts:
        """The shortcuts `config` takes on `layer`; `activation_sparsity` > 0 prunes that
        share of each GEMM's smallest activations (a typed what-if) beside the threshold."""
        u = config.units
        gemm, attention = layer.gemm_dtype, layer.attention_dtype
        if u.vpcu.enabled:
            gemm = precision_of(config, "gemm", gemm)
            attention = precision_of(config, "attention", attention)
        zce = bool(u.zce.enabled)
        return cls(gemm_precision=gemm, attention_precision=attention,
                   fp8_scaling="block" if layer.fp8_block_scaling else "tensor", zce=zce,
                   zce_threshold=u.zce.threshold if zce else 0.0,
                   zce_granularity=u.zce.granularity,
                   activation_sparsity=activation_sparsity if zce else 0.0,
                   weight_sparsity=u.zce.weight_sparsity if zce else 0.0,
                   two_four=bool(u.tensor.sparse_2_4),
                   lut=(u.lut_exp.entries, u.lut_exp.interpolation) if u.lut_exp.enabled
                   else None)


def prune_two_four(w: np.ndarray) -> np.ndarray:
    """`w` [K, N] with the 2 smallest magnitudes of every 4 consecutive K entries zero."""
    k, n = w.shape
    groups = w.T.reshape(n, k // 4, 4).copy()
    order = np.argsort(np.abs(groups), axis=2, kind="stable")[:, :, :2]
    np.put_along_axis(groups, order, 0.0, axis=2)
    return groups.reshape(n, k).T.copy()


@dataclasses.dataclass
class _Run:
    """One forward pass's record: the operands each projection GEMM ran on."""

    sc: Shortcuts
    gemms: list = dataclasses.field(default_factory=list)   # (macs, a zeros, share done)

    def gemm(self, a: np.ndarray, w: np.ndarray) -> np.ndarray:
        sc = self.sc
        if sc.gemm_precision == "fp64" and not (sc.zce or sc.two_four):
            return a @ w
        if sc.two_four:
            w = prune_two_four(w)
        if sc.weight_sparsity > 0:
            w = Z.magnitude_pruned(w, sc.weight_sparsity)
        block = sc.fp8_scaling == "block"
        aq = quantize(a, sc.gemm_precision, (1, FP8_BLOCK) if block else None)
        wq = quantize(w, sc.gemm_precision, (FP8_BLOCK, FP8_BLOCK) if block else None)
        if sc.zce_threshold > 0:
            aq = np.where(np.abs(aq) < sc.zce_threshold, 0.0, aq)
        if sc.activation_sparsity > 0:
            aq = Z.magnitude_pruned(aq, sc.activation_sparsity)
        done = 0.5 if sc.two_four else (
            Z.active_fraction(aq, wq, sc.zce_granularity) if sc.zce else 1.0)
        self.gemms.append((a.shape[0] * a.shape[1] * w.shape[1], float(np.mean(aq == 0)),
                           done))
        return _f32_matmul(aq, wq, sc.gemm_precision)

    def attention_matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        p = self.sc.attention_precision
        return _f32_matmul(quantize(a, p), quantize(b, p), p)


def _f32_matmul(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    """a @ b with FP32 accumulation (FP64 for the reference precision)."""
    if precision == "fp64":
        return a @ b
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)


_ERF = np.frompyfunc(math.erf, 1, 1)


def _activation(kind: str, z: np.ndarray) -> np.ndarray:
    if kind == "relu":
        return np.maximum(z, 0.0)
    if kind == "gelu":                                   # exact (erf) GELU, as BERT's
        return 0.5 * z * (1.0 + _ERF(z / math.sqrt(2)).astype(np.float64))
    gate, up = np.split(z, 2, axis=1)
    return gate / (1.0 + np.exp(-gate)) * up


def _rms_norm(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + 1e-6)


def forward(layer: ReducedLayer, data: LayerData, sc: Shortcuts) -> dict:
    """The layer's output, head logits, reference-scores softmax and per-GEMM records
    under `sc` (module docstring)."""
    run = _Run(sc)
    t, heads, d = layer.tokens, layer.heads, layer.head_dim
    qkv = run.gemm(data.x, data.w_qkv)
    q, k, v = (part.reshape(t, heads, d).transpose(1, 0, 2) for part in np.split(qkv, 3, 1))
    mask = np.triu(np.full((t, t), -np.inf), 1) if layer.causal else np.zeros((t, t))
    ctx = np.empty((heads, t, d))
    for h in range(heads):
        s = run.attention_matmul(q[h], k[h].T) / math.sqrt(d) + mask
        ctx[h] = run.attention_matmul(softmax(s, sc.lut), v[h])
    attn = run.gemm(ctx.transpose(1, 0, 2).reshape(t, heads * d), data.w_o)
    n1 = _rms_norm(data.x + attn)
    y = run.gemm(_activation(layer.activation, run.gemm(n1, data.w_in)), data.w_out)
    out = _rms_norm(n1 + y)
    return {"output": out, "logits": out @ data.w_head, "gemms": run.gemms}


@functools.lru_cache(maxsize=8)
def _reference(layer: ReducedLayer, seed: int) -> dict:
    return forward(layer, layer_data(layer, seed), Shortcuts())


def _reference_scores(layer: ReducedLayer, data: LayerData) -> np.ndarray:
    """FP64 attention scores of the first head (the softmax error's input)."""
    t, d = layer.tokens, layer.head_dim
    qkv = data.x @ data.w_qkv
    q, k = qkv[:, :d], qkv[:, layer.heads * d:layer.heads * d + d]
    mask = np.triu(np.full((t, t), -np.inf), 1) if layer.causal else np.zeros((t, t))
    return q @ k.T / math.sqrt(d) + mask


def layer_error(config, layer: ReducedLayer, seed: int = 0,
                activation_sparsity: float = 0.0) -> dict:
    """Error of `layer` on `config` against FP64 (module docstring): precisions, FP8
    scaling, rel_error, max_abs_error, argmax_change, softmax_rel_error (the exp unit alone,
    on FP64 scores), activation_zeros (MAC-weighted share of zero activations the GEMMs
    ran on), macs_skipped_share (measured), zce_threshold."""
    sc = Shortcuts.of(config, layer, activation_sparsity)
    data = layer_data(layer, seed)
    ref, out = _reference(layer, seed), forward(layer, data, sc)
    gemms = np.array(out["gemms"]) if out["gemms"] else np.zeros((0, 3))
    macs = gemms[:, 0].sum() if len(gemms) else 0.0
    scores = _reference_scores(layer, data)
    softmax_err = error_metrics(softmax(scores, sc.lut), softmax(scores))["rel_error"]
    return {"precision": sc.gemm_precision, "attention_precision": sc.attention_precision,
            "fp8_scaling": sc.fp8_scaling if sc.gemm_precision in FP8 else "",
            **error_metrics(out["output"], ref["output"]),
            "argmax_change": argmax_change(out["logits"], ref["logits"]),
            "softmax_rel_error": softmax_err,
            "activation_zeros": float(gemms[:, 0] @ gemms[:, 1] / macs) if macs else 0.0,
            "macs_skipped_share": float(1 - gemms[:, 0] @ gemms[:, 2] / macs) if macs
            else 0.0,
            "zce_threshold": sc.zce_threshold}


# -- gradient compression -------------------------------------------------------------------

def gradient_stream(steps: int, ranks: int, n_values: int, seed: int = 0,
                    noise: float = 1.0) -> np.ndarray:
    """[steps, ranks, n] f32 gradients: a fixed standard-normal mean plus `noise` x standard
    normal per rank and step, from `seed`."""
    rng = np.random.default_rng(seed)
    mean = rng.standard_normal(n_values)
    return (mean + noise * rng.standard_normal((steps, ranks, n_values))).astype(np.float32)


def compress_decompress(v: np.ndarray) -> np.ndarray:
    """What one rank's `v` (whole `compression.BLOCK`s) is after top-k + 4-bit and back."""
    return C.decompress_reference(C.compress_reference(v), v.size // C.BLOCK, 1)


def compressed_allreduce_error(grads: np.ndarray, error_feedback: bool) -> dict:
    """Per step t of the stream `grads` [steps, ranks, n]: the relative error of the running
    sum of compressed all-reduces against the uncompressed one (`cumulative_rel_error`;
    `cumulative_abs_error` its L2 norm), of step t alone (`step_rel_error`), and the
    largest rank residual norm (0 without error feedback)."""
    steps, ranks, n = grads.shape
    if n % C.BLOCK:
        raise InputError(f"{n} gradient values (accepted: a multiple of {C.BLOCK})")
    residual = np.zeros((ranks, n), np.float32)
    exact_sum, sent_sum = np.zeros(n), np.zeros(n)
    cum, cum_abs, step_err, res_norm = [], [], [], []
    for t in range(steps):
        sent = np.zeros(n)
        for r in range(ranks):
            v = grads[t, r] + residual[r] if error_feedback else grads[t, r]
            c = compress_decompress(v.astype(np.float32))
            if error_feedback:
                residual[r] = v - c
            sent += c
        exact = grads[t].astype(np.float64).sum(axis=0)
        exact_sum += exact
        sent_sum += sent
        cum_abs.append(float(np.linalg.norm(sent_sum - exact_sum)))
        cum.append(cum_abs[-1] / np.linalg.norm(exact_sum))
        step_err.append(np.linalg.norm(sent - exact) / np.linalg.norm(exact))
        res_norm.append(float(np.linalg.norm(residual, axis=1).max()))
    return {"cumulative_rel_error": np.array(cum), "cumulative_abs_error": np.array(cum_abs),
            "step_rel_error": np.array(step_err),
            "residual_norm": np.array(res_norm),
            "wire_share": C.BLOCK_BYTES / (4 * C.BLOCK)}


# -- gradient norms from a backward pass ----------------------------------------------------

def mlp_gradient_norms(layers: int, width: int = 64, batch: int = 256, classes: int = 10,
                       steps: int = 200, lr: float = 0.05, seed: int = 0) -> GradientNorms:
    """Per-layer weight-gradient L2 norms of a seeded ReLU MLP of `layers` hidden layers
    (He-initialized `width` x `width`, then a `classes` head; inputs standard normal, labels
    from a seeded random teacher, mean cross-entropy), measured by the backward pass after
    `steps` full-batch SGD steps of rate `lr` (0: at initialization)."""
    if layers < 1 or steps < 0:
        raise InputError(f"layers = {layers}, steps = {steps} (accepted: layers >= 1, "
                         "steps >= 0)")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, width))
    labels = np.argmax(x @ rng.standard_normal((width, classes)), axis=1)
    ws = [rng.standard_normal((width, width)) * math.sqrt(2 / width) for _ in range(layers)]
    head = rng.standard_normal((width, classes)) / math.sqrt(width)
    for step in range(steps + 1):
        grads, head_grad = _mlp_backward(x, labels, ws, head)
        if step == steps:
            return GradientNorms(tuple(float(np.linalg.norm(g)) for g in grads))
        for w, g in zip(ws, grads, strict=True):
            w -= lr * g
        head -= lr * head_grad
    raise AssertionError("unreachable")


def _mlp_backward(x: np.ndarray, labels: np.ndarray, ws: list, head: np.ndarray):
    """(weight gradients per layer, head gradient) of the mean cross-entropy."""
    acts = [x]
    for w in ws:
        acts.append(np.maximum(acts[-1] @ w, 0.0))
    logits = acts[-1] @ head
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(labels)), labels] -= 1.0
    p /= len(labels)                                      # d loss / d logits
    head_grad = acts[-1].T @ p
    grad = p @ head.T
    grads = [np.empty(0)] * len(ws)
    for i in range(len(ws) - 1, -1, -1):
        grad = grad * (acts[i + 1] > 0)
        grads[i] = acts[i].T @ grad
        grad = grad @ ws[i].T
    return grads, head_grad
