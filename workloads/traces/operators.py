"""Map profiled kernels to simulator ops through the CPU operators that launched them.

A Kineto trace records, for each kernel, the CPU ops around its launch (`op_stack` of
`workloads.traces.kineto.read_kineto`: name, External id, "Input Dims", "Input type",
"Concrete Inputs", "Input Strides"). `map_operator(row, siblings)` walks that stack from the
innermost op outwards and gives the first op an `OperatorRule` knows: the simulator op kind
(a `workloads.ops` registry kind), its sizes (the builder's keyword arguments), a category
and the rule's name. Kernel names are read only to tell apart what one operator launches
(`OperatorRule.kernel`: cuBLAS's split-K reduction beside its GEMM, the memsets cuBLAS and
cuDNN issue, cuDNN's attention kernels) and for what the trace does not record (the launch
path of an element-wise kernel, `vectorized_elementwise_kernel<8` / `unrolled_` /
`elementwise_kernel<128, 4`, whether it casts at run time, `gpu_kernel_impl<` or
`LoadWithCast<` against `gpu_kernel_impl_nocast<`, and a cat's element size,
`OpaqueType<4u>`, where the operator records its inputs as a TensorList without dtype).

Rules by operator:

* GEMM: aten::mm, addmm, bmm, baddbmm, linear, matmul, _scaled_mm -> `gemm` (m, n, k;
  bmm: groups; dtype from the input type: bf16, fp16, fp8; f32 is not mapped, a full-precision
  GEMM has no op); in them a `splitKreduce` kernel -> `elementwise` add of the split-K partial
  sums (f32) into the output, the number of splits = the main kernel's CTAs / its output
  tiles (its tile from the cuBLAS kernel name, e.g. `nvjet_..._64x64_...`; 2, 3 supported).
* attention: aten::_scaled_dot_product_{flash,efficient,cudnn}_attention,
  _flash_attention_forward, _efficient_attention_forward, _cudnn_attention_forward,
  scaled_dot_product_attention -> `attention` (batch, heads, kv_heads, seqlen, seqlen_k,
  headdim, headdim_v, causal from the operator's is_causal argument, contiguous K/V:
  kv_page 0).
* norm: aten::_fused_rms_norm / rms_norm (bf16) -> `rmsnorm`, with `kernel` "aten" where the
  kernel is ATen's `vectorized_layer_norm_kernel` (PyTorch's own RMSNorm kernel,
  `workloads.ops.torch_norms`; another kernel keeps the catalog's); native_layer_norm / layer_norm
  (f32) -> `layernorm`; _softmax / softmax (f32) -> `softmax` (rows = the leading dims,
  cols = the last).
* element-wise: add, sub, rsub, mul, div, neg, silu, sigmoid (as silu: one exp and one
  division), cos, sin, pow, fill_, zero_, arange and their in-place / out= forms ->
  `elementwise` with the broadcast shape, each input's strides over it (0 where
  broadcast), the result dtype (type promotion: floating over integer, the wider float;
  true division of integers is f32) and the output's strides (contiguous, or the input's for
  an in-place op, or the out= tensor's); a Scalar operand (or a 0-dim operand the kernel
  folds into its functor, `AUnaryFunctor` / `BUnaryFunctor`) becomes --alpha.
* copy/layout: copy_ (with the destination's and source's strides and dtypes) -> `copy`;
  cat / stack (the dimension from Concrete Inputs) -> `cat`; index_select, embedding ->
  `index-select`.
* memset activities (cuBLAS/cuDNN workspace, `cudaMemsetAsync`) and device-to-device
  memcpy activities -> `memset` / `memcpy` of the activity's bytes, whatever operator issued
  them (`build_runtime_copy`, before the rules; host copies are not mapped).

A GEMM operator's other kernels (ATen's own, a split-K reduction) are not its GEMM; an
attention operator's split-KV combine kernel is not its forward (the attention op times
its combine with it).

A row whose stack holds no operator a rule knows gets `reason` (why not) and is left to the
kernel-name rules of `workloads.traces.mapping`. Units: elements.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from workloads.ops.pointwise import contiguous

KINETO_DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "f16", "float": "f32",
                 "double": "f64", "long int": "i64", "int": "i32", "bool": "bool",
                 "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8e5"}
FLOAT_RANK = {"bf16": 1, "f16": 1, "f32": 2, "f64": 3}
GEMM_DTYPES = {"bf16": "bf16", "f16": "fp16", "fp8": "fp8"}
ITEMSIZE_DTYPES = {2: "bf16", 4: "f32", 8: "f64"}
SPLITK_INPUTS = (2, 3)


class Unmappable(Exception):
    """An operator a rule knows, whose recorded arguments do not give the op (the message
    says what is missing)."""


@dataclass(frozen=True, slots=True)
class OpCall:
    """One CPU operator of a launch's stack, as Kineto recorded it."""

    name: str
    id: int | None
    dims: tuple
    types: tuple
    concrete: tuple
    strides: tuple

    @classmethod
    def from_entry(cls, entry: dict) -> OpCall:
        def listed(key):
            value = entry.get(key)
            return tuple(value) if isinstance(value, list) else ()
        ident = entry.get("id")
        return cls(str(entry.get("name", "")), ident if isinstance(ident, int) else None,
                   listed("dims"), listed("types"), listed("concrete"), listed("strides"))

    @property
    def short(self) -> str:
        return self.name.removeprefix("aten::")

    def has_shapes(self) -> bool:
        return any(isinstance(d, list) and d for d in self.dims)

    def dtype(self, i: int) -> str | None:
        """The dtype of argument i (`KINETO_DTYPES` names), "scalar", or None."""
        if i >= len(self.types):
            return None
        t = self.types[i]
        return "scalar" if t == "Scalar" else KINETO_DTYPES.get(t)

    def shape(self, i: int) -> tuple[int, ...] | None:
        """Argument i as a tensor shape (a 0-dim tensor is ()), None if it is no tensor."""
        if i >= len(self.dims) or self.dtype(i) in (None, "scalar"):
            return None
        d = self.dims[i]
        if not isinstance(d, list) or not all(isinstance(n, int) for n in d):
            return None
        return tuple(d)

    def tensor_strides(self, i: int) -> tuple[int, ...] | None:
        shape = self.shape(i)
        if shape is None:
            return None
        s = self.strides[i] if i < len(self.strides) else None
        if isinstance(s, list) and len(s) == len(shape) and all(isinstance(v, int) for v in s):
            return tuple(s)
        return contiguous(shape)

    def scalar(self, i: int) -> float | None:
        """Argument i's recorded value as a number (Concrete Inputs), else None."""
        if i >= len(self.concrete):
            return None
        try:
            return float(self.concrete[i])
        except (TypeError, ValueError):
            return None

    def flag(self, i: int) -> bool | None:
        value = self.concrete[i] if i < len(self.concrete) else None
        return {"True": True, "False": False}.get(value)


@dataclass(frozen=True, slots=True)
class Mapped:
    """A kernel mapped to a simulator op: registry kind, builder sizes, category, rule."""

    op: str
    sizes: dict
    category: str
    rule: str
    operator: str


Builder = Callable[[OpCall, dict, list], Mapped]
"""(the operator, the kernel row, (name, grid) of the operator's kernels) -> the op, or an
`Unmappable` saying what the recorded arguments lack."""


@dataclass(frozen=True, slots=True)
class OperatorRule:
    """Operators (by name, without "aten::") -> an op, for the kernels (not memcpy/memset
    activities) whose name matches `kernel` (a regex; None: any) and not `skip_kernel`."""

    name: str
    operators: tuple[str, ...]
    category: str
    build: Builder
    kernel: str | None = None
    skip_kernel: str | None = None

    def applies(self, call: OpCall, row: dict) -> bool:
        if call.short not in self.operators or row.get("kind", "kernel") != "kernel":
            return False
        name = str(row.get("name", ""))
        if self.skip_kernel and re.search(self.skip_kernel, name):
            return False
        return self.kernel is None or re.search(self.kernel, name) is not None


def _dtype(call: OpCall, i: int, what: str) -> str:
    dtype = call.dtype(i)
    if dtype in (None, "scalar"):
        raise Unmappable(f"{call.name}: no dtype recorded for its {what}")
    return dtype


def _matrix(call: OpCall, i: int, rank: tuple[int, ...] = (2,)) -> tuple[int, ...]:
    shape = call.shape(i)
    if shape is None or len(shape) not in rank:
        raise Unmappable(f"{call.name}: argument {i} is not a {'/'.join(map(str, rank))}-d "
                         f"tensor (Input Dims {list(call.dims)})")
    return shape


# ------------------------------------------------------------------ GEMM

GEMM_OPERANDS = {"mm": (0, 1), "addmm": (1, 2), "bmm": (0, 1), "baddbmm": (1, 2),
                 "_scaled_mm": (0, 1), "matmul": (0, 1), "linear": (0, 1)}


def gemm_sizes(call: OpCall) -> dict:
    """m, n, k (and groups for batched operators) and the dtype of a GEMM operator."""
    a_i, b_i = GEMM_OPERANDS[call.short]
    dtype = _dtype(call, a_i, "first operand")
    if dtype not in GEMM_DTYPES:
        raise Unmappable(f"{call.name}: {dtype} operands; the gemm op takes "
                         f"{', '.join(GEMM_DTYPES)} (a full-precision f32 GEMM has no op)")
    sizes: dict = {"dtype": GEMM_DTYPES[dtype]}
    if call.short in ("bmm", "baddbmm"):
        a, b = _matrix(call, a_i, (3,)), _matrix(call, b_i, (3,))
        return {**sizes, "groups": a[0], "m": a[1], "k": a[2], "n": b[2]}
    if call.short == "linear":
        a, w = _matrix(call, a_i, (2, 3, 4)), _matrix(call, b_i)
        return {**sizes, "m": math.prod(a[:-1]), "k": a[-1], "n": w[0]}
    if call.short == "matmul":
        a, b = _matrix(call, a_i, (2, 3, 4)), _matrix(call, b_i)
        return {**sizes, "m": math.prod(a[:-1]), "k": a[-1], "n": b[-1]}
    a, b = _matrix(call, a_i), _matrix(call, b_i)
    return {**sizes, "m": a[0], "k": a[1], "n": b[1]}


def build_gemm(call: OpCall, row: dict, siblings: list) -> Mapped:
    sizes = gemm_sizes(call)
    if sizes["dtype"] == "fp8":
        sizes["scaling"] = "none"
    return Mapped("gemm", sizes, "gemm", "gemm", call.name)


CUBLAS_TILE = re.compile(r"(?:nvjet_sm\d+_\w+?_|tilesize)(\d+)x(\d+)")


def split_count(sizes: dict, siblings: list) -> int:
    """Split-K partial sums of a cuBLAS GEMM: its main kernel's CTAs over its output tiles
    (the tile read from the kernel name)."""
    for name, grid in siblings:
        match = CUBLAS_TILE.search(name)
        if match and "splitKreduce" not in name:
            tile_m, tile_n = int(match.group(1)), int(match.group(2))
            tiles = math.ceil(sizes["m"] / tile_m) * math.ceil(sizes["n"] / tile_n)
            ctas = math.prod(grid)
            if tiles and ctas % tiles == 0 and ctas // tiles > 1:
                return ctas // tiles
            raise Unmappable(f"split-K reduction: the main kernel {name} runs {ctas} CTAs "
                             f"for {tiles} output tiles of {tile_m}x{tile_n}: no whole "
                             "number of splits")
    raise Unmappable("split-K reduction: no main GEMM kernel with a tile in its name "
                     "beside it in the trace")


def build_splitk(call: OpCall, row: dict, siblings: list) -> Mapped:
    sizes = gemm_sizes(call)
    splits = split_count(sizes, siblings)
    if splits not in SPLITK_INPUTS:
        raise Unmappable(f"split-K reduction of {splits} partial sums: the element-wise "
                         f"kernels add {' or '.join(map(str, SPLITK_INPUTS))}")
    out = {"bf16": "bf16", "fp16": "f16", "fp8": "bf16"}[sizes["dtype"]]
    shape = f"{sizes.get('groups', 1) * sizes['m']}x{sizes['n']}"
    return Mapped("elementwise", {"functor": "add", "shape": shape, "inputs": splits,
                                  "dtype": "f32", "out_dtype": out, "path": "vectorized"},
                  "gemm", "gemm_splitk_reduce", call.name)


# ------------------------------------------------------------------ attention

# (layout of q/k/v dims, index of is_causal in Concrete Inputs)
ATTENTION_OPERATORS = {
    "scaled_dot_product_attention": ("bhsd", 5),
    "_scaled_dot_product_flash_attention": ("bhsd", 4),
    "_scaled_dot_product_efficient_attention": ("bhsd", 6),
    "_scaled_dot_product_cudnn_attention": ("bhsd", 6),
    "_cudnn_attention_forward": ("bhsd", 10),
    "_flash_attention_forward": ("bshd", 8),
    "_efficient_attention_forward": ("bshd", None),
}


def build_attention(call: OpCall, row: dict, siblings: list) -> Mapped:
    layout, causal_at = ATTENTION_OPERATORS[call.short]
    q, k, v = (_matrix(call, i, (4,)) for i in range(3))
    if layout == "bhsd":
        (b, hq, sq, d), (_, hk, sk, _), dv = q, k, v[3]
    else:
        (b, sq, hq, d), (_, sk, hk, _), dv = q, k, v[3]
    causal = call.flag(causal_at) if causal_at is not None else None
    if causal is None:
        raise Unmappable(f"{call.name}: is_causal not recorded (Concrete Inputs "
                         f"{list(call.concrete)})")
    dtype = _dtype(call, 0, "query")
    if dtype not in ("bf16", "f16"):
        raise Unmappable(f"{call.name}: {dtype} attention; the attention op takes bf16, fp16")
    sizes = {"batch": b, "heads": hq, "kv_heads": hk, "seqlen": sq, "seqlen_k": sk,
             "headdim": d, "headdim_v": dv, "causal": causal, "kv_page": 0,
             "dtype": "fp16" if dtype == "f16" else "bf16"}
    return Mapped("attention", sizes, "attention", "attention", call.name)


# ------------------------------------------------------------------ norms

def _rows_cols(call: OpCall) -> tuple[int, int]:
    x = call.shape(0)
    if not x:
        raise Unmappable(f"{call.name}: no input shape recorded")
    return math.prod(x[:-1]), x[-1]


def build_norm(kind: str, dtype_needed: str) -> Callable:
    def build(call: OpCall, row: dict, siblings: list) -> Mapped:
        dtype = _dtype(call, 0, "input")
        if dtype != dtype_needed:
            raise Unmappable(f"{call.name}: {dtype} input; the {kind} op's kernel is "
                             f"{dtype_needed}")
        rows, cols = _rows_cols(call)
        category = "elementwise" if kind == "softmax" else "norm"
        sizes = {"rows": rows, "cols": cols}
        if kind == "rmsnorm" and ATEN_LAYER_NORM_KERNEL.search(str(row.get("name", ""))):
            sizes["kernel"] = "aten"
        return Mapped(kind, sizes, category, kind, call.name)
    return build


ATEN_LAYER_NORM_KERNEL = re.compile(r"vectorized_layer_norm_kernel")
"""The kernel ATen's layer-norm and RMS-norm operators launch for widths divisible by 4."""


# ------------------------------------------------------------------ element-wise

@dataclass(frozen=True, slots=True)
class Functor:
    """An aten element-wise operator: the kernel functor, its operand count (tensors or
    Scalars, the out= tensor after them) and where its alpha sits."""

    op: str
    arity: int
    alpha_at: int | None = None
    alpha_sign: float = 1.0
    true_division: bool = False
    fixed_alpha: float | None = None


FUNCTORS = {
    "add": Functor("add", 2, 2), "sub": Functor("add", 2, 2, -1.0),
    "rsub": Functor("add", 2, 2, -1.0), "mul": Functor("mul", 2),
    "div": Functor("mul", 2, true_division=True), "neg": Functor("mul", 1, fixed_alpha=-1.0),
    "silu": Functor("silu", 1), "sigmoid": Functor("silu", 1), "cos": Functor("cos", 1),
    "sin": Functor("sin", 1), "pow": Functor("pow", 2), "fill_": Functor("fill", 1),
    "zero_": Functor("fill", 1, fixed_alpha=0.0),
}
INPLACE = {f"{name}_": f for name, f in FUNCTORS.items() if not name.endswith("_")}
ELEMENTWISE_OPERATORS = tuple(FUNCTORS) + tuple(INPLACE)


def broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy/torch broadcasting of the shapes (an `Unmappable` if they do not broadcast)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = {s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise Unmappable(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                      out: tuple[int, ...]) -> tuple[int, ...]:
    """An operand's strides over the broadcast shape `out` (0 where it broadcasts)."""
    lead = len(out) - len(shape)
    return tuple(0 if d < lead or shape[d - lead] == 1 else strides[d - lead]
                 for d in range(len(out)))


def promote(dtypes: list[str], true_division: bool) -> str:
    """The result dtype of an element-wise op on tensors of `dtypes`."""
    floats = [d for d in dtypes if d in FLOAT_RANK]
    if floats:
        return max(floats, key=lambda d: FLOAT_RANK[d])
    if true_division:
        return "f32"
    return dtypes[0] if dtypes else "f32"


KERNEL_PATH = (
    (re.compile(r"vectorized_elementwise_kernel<(\d+)"), "vectorized"),
    (re.compile(r"unrolled_elementwise_kernel<"), "unrolled"),
    (re.compile(r"elementwise_kernel_with_index<"), "index"),
    (re.compile(r"elementwise_kernel<\d+, (\d+)"), "generic"),
)


DYNAMIC_CAST = re.compile(r"gpu_kernel_impl<|LoadWithCast<")
"""Kernel names of ATen's run-time casts: the generic path of `gpu_kernel_impl` (its
`_nocast` twin casts nothing) and the unrolled path's `memory::LoadWithCast`."""


def kernel_cast(name: str) -> str | None:
    """"dynamic" where an ATen element-wise kernel's name shows run-time casts, else None
    (the op's `--cast auto`)."""
    return "dynamic" if DYNAMIC_CAST.search(name) else None


def kernel_path(name: str) -> tuple[str, int | None]:
    """The launch path an ATen element-wise kernel's name shows, and its VEC / V."""
    for pattern, path in KERNEL_PATH:
        match = pattern.search(name)
        if match:
            return path, int(match.group(1)) if match.groups() else None
    return "auto", None


def build_elementwise(call: OpCall, row: dict, siblings: list) -> Mapped:
    functor = FUNCTORS.get(call.short) or INPLACE.get(call.short)
    inplace = call.short in INPLACE or call.short in ("fill_", "zero_")
    name = str(row.get("name", ""))
    folded = re.search(r"[AB]UnaryFunctor<", name) is not None
    inputs, alpha = [], None
    for i in range(functor.arity):
        shape = call.shape(i)
        if shape is None or (shape == () and folded):
            alpha = call.scalar(i) if alpha is None else alpha
            continue
        inputs.append((shape, call.tensor_strides(i), _dtype(call, i, f"operand {i}")))
    if functor.op == "fill":
        if not inputs:
            raise Unmappable(f"{call.name}: no tensor recorded")
        out_shape, out_strides, out_dtype = inputs[0]
        alpha = call.scalar(1)
        inputs = []
    else:
        if not inputs:
            raise Unmappable(f"{call.name}: no tensor operand recorded (Input Dims "
                             f"{list(call.dims)})")
        out_shape = broadcast([s for s, _, _ in inputs])
        out_dtype = promote([d for _, _, d in inputs], functor.true_division)
        out_strides = contiguous(out_shape)
        out_index = functor.arity if call.shape(functor.arity) is not None else None
        if inplace:
            out_shape, out_strides, out_dtype = inputs[0]
        elif out_index is not None:
            out_shape, out_strides = call.shape(out_index), call.tensor_strides(out_index)
            out_dtype = _dtype(call, out_index, "output")
    if functor.fixed_alpha is not None:
        alpha = functor.fixed_alpha
    elif functor.alpha_at is not None and call.scalar(functor.alpha_at) is not None:
        alpha = call.scalar(functor.alpha_at) * functor.alpha_sign
    elif functor.alpha_sign != 1.0:
        alpha = functor.alpha_sign
    largest = max(inputs, key=lambda t: math.prod(t[0]), default=None)
    strides = ";".join(",".join(map(str, broadcast_strides(s, st, out_shape)))
                       for s, st, _ in inputs)
    path, vec = kernel_path(name)
    sizes = {"functor": functor.op, "shape": "x".join(map(str, out_shape)) or "1",
             "inputs": len(inputs), "dtype": largest[2] if largest else out_dtype,
             "out_dtype": out_dtype, "path": path}
    if vec is not None:
        sizes["vec"] = vec
    if kernel_cast(name):
        sizes["cast"] = kernel_cast(name)
    if strides:
        sizes["strides"] = strides
    if out_strides != contiguous(out_shape):
        sizes["out_strides"] = ",".join(map(str, out_strides))
    if alpha is not None:
        sizes["alpha"] = alpha
    return Mapped("elementwise", sizes, "elementwise", f"elementwise_{functor.op}", call.name)


def build_arange(call: OpCall, row: dict, siblings: list) -> Mapped:
    start, end, step = (call.scalar(i) for i in range(3))
    if None in (start, end, step) or step == 0:
        raise Unmappable(f"{call.name}: start, end, step not recorded (Concrete Inputs "
                         f"{list(call.concrete)})")
    n = max(math.ceil((end - start) / step), 1)
    dtype = call.dtype(3) if call.dtype(3) not in (None, "scalar") else "i64"
    sizes = {"functor": "arange", "shape": str(n), "inputs": 0, "dtype": dtype,
             "out_dtype": dtype,
             "path": "index", "alpha": start, "beta": step}
    return Mapped("elementwise", sizes, "elementwise", "elementwise_arange", call.name)


# ------------------------------------------------------------------ copy and layout

def build_copy(call: OpCall, row: dict, siblings: list) -> Mapped:
    dst, src = call.shape(0), call.shape(1)
    if dst is None or src is None:
        raise Unmappable(f"{call.name}: destination and source shapes not recorded")
    src_strides = broadcast_strides(src, call.tensor_strides(1), dst)
    name = str(row.get("name", ""))
    path, vec = kernel_path(name)
    sizes = {"shape": "x".join(map(str, dst)) or "1", "dtype": _dtype(call, 1, "source"),
             "out_dtype": _dtype(call, 0, "destination"), "path": path}
    if kernel_cast(name):
        sizes["cast"] = kernel_cast(name)
    if src_strides != contiguous(dst):
        sizes["strides"] = ",".join(map(str, src_strides))
    if call.tensor_strides(0) != contiguous(dst):
        sizes["out_strides"] = ",".join(map(str, call.tensor_strides(0)))
    if vec is not None:
        sizes["vec"] = vec
    return Mapped("copy", sizes, "layout", "copy", call.name)


OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")


def build_cat(call: OpCall, row: dict, siblings: list) -> Mapped:
    tensors = call.dims[0] if call.dims else None
    if not isinstance(tensors, list) or not tensors or \
            not all(isinstance(t, list) and all(isinstance(n, int) for n in t) for t in tensors):
        raise Unmappable(f"{call.name}: the input shapes are not recorded")
    dim = call.scalar(1)
    dim = 0 if dim is None else int(dim)
    match = OPAQUE.search(str(row.get("name", "")))
    dtype = ITEMSIZE_DTYPES.get(int(match.group(1))) if match else None
    if dtype is None:
        raise Unmappable(f"{call.name}: the element size is not recorded (a TensorList) and "
                         "the kernel name does not show it (OpaqueType<N>)")
    shapes = ";".join("x".join(map(str, t)) for t in tensors)
    return Mapped("cat", {"shapes": shapes, "dim": dim, "dtype": dtype}, "layout", "cat",
                  call.name)


def build_index_select(call: OpCall, row: dict, siblings: list) -> Mapped:
    if call.short == "embedding":
        table, index = _matrix(call, 0), call.shape(1)
    else:
        table, index = _matrix(call, 0), call.shape(2)
        if call.scalar(1) not in (0.0, None):
            raise Unmappable(f"{call.name}: a gather along dimension {call.scalar(1)}; the "
                             "index-select op gathers rows (dimension 0)")
    if index is None:
        raise Unmappable(f"{call.name}: the index shape is not recorded")
    dtype = _dtype(call, 0, "table")
    if dtype not in ("bf16", "f16", "f32", "f64", "i64"):
        raise Unmappable(f"{call.name}: {dtype} table")
    sizes = {"rows": max(math.prod(index), 1), "cols": table[1], "table_rows": table[0],
             "dtype": dtype}
    return Mapped("index-select", sizes, "layout", "index_select", call.name)


def build_runtime_copy(call: OpCall | None, row: dict, siblings: list) -> Mapped:
    """A memset, or a device-to-device memcpy, of the activity's recorded bytes."""
    kind, nbytes = row.get("kind"), int(row.get("bytes") or 0)
    if kind == "memcpy" and "DtoD" not in str(row.get("name", "")):
        raise Unmappable(f"{row.get('name')}: a copy to or from the host (PCIe is not "
                         "modelled)")
    if nbytes < 1:
        raise Unmappable(f"{kind} of 0 bytes recorded")
    return Mapped(kind, {"bytes": nbytes}, "memcpy", kind,
                  call.name if call else f"cuda{kind.capitalize()}Async")


R = OperatorRule
OPERATOR_RULES: tuple[OperatorRule, ...] = (
    R("gemm_splitk_reduce", tuple(GEMM_OPERANDS), "gemm", build_splitk,
      kernel=r"splitKreduce"),
    R("gemm", tuple(GEMM_OPERANDS), "gemm", build_gemm,
      skip_kernel=r"splitKreduce|at::native|at6native"),
    R("attention", tuple(ATTENTION_OPERATORS), "attention", build_attention,
      kernel=r"sdpa|fmha|flash|attention|attn", skip_kernel=r"combine"),
    R("rmsnorm", ("_fused_rms_norm", "rms_norm"), "norm", build_norm("rmsnorm", "bf16")),
    R("layernorm", ("native_layer_norm", "layer_norm"), "norm",
      build_norm("layernorm", "f32")),
    R("softmax", ("_softmax", "softmax"), "elementwise", build_norm("softmax", "f32")),
    R("arange", ("arange",), "elementwise", build_arange),
    R("elementwise", ELEMENTWISE_OPERATORS, "elementwise", build_elementwise),
    R("copy", ("copy_",), "layout", build_copy),
    R("cat", ("cat", "_cat"), "layout", build_cat),
    R("index_select", ("index_select", "embedding"), "layout", build_index_select),
)
del R


def stack_calls(row: dict) -> list[OpCall]:
    """The row's op stack, outermost first ([] where the trace records none)."""
    text = row.get("op_stack")
    if not isinstance(text, str):
        return []
    try:
        entries = json.loads(text)
    except json.JSONDecodeError:
        return []
    return [OpCall.from_entry(e) for e in entries if isinstance(e, dict)]


def map_operator(row: dict, siblings: list, rules=OPERATOR_RULES) \
        -> tuple[Mapped | None, str | None]:
    """(the op of the innermost operator a rule maps, None) or (None, why not)."""
    calls = stack_calls(row)
    if row.get("kind") in ("memset", "memcpy"):
        try:
            return build_runtime_copy(calls[-1] if calls else None, row, siblings), None
        except Unmappable as exc:
            return None, str(exc)
    if not calls:
        return None, "no CPU operator recorded around the launch"
    if not any(c.has_shapes() for c in calls):
        return None, (f"the operators around the launch ({calls[-1].name}) carry no input "
                      "shapes (the trace was recorded without record_shapes)")
    first_reason = None
    for call in reversed(calls):
        for rule in rules:
            if not rule.applies(call, row):
                continue
            try:
                return rule.build(call, row, siblings), None
            except Unmappable as exc:
                first_reason = first_reason or str(exc)
                break
    names = " < ".join(c.name for c in reversed(calls))
    return None, first_reason or f"no operator rule for {names}"


def records_shapes(df) -> bool:
    """Whether any kernel of a table has an operator with recorded input shapes."""
    return any(any(c.has_shapes() for c in stack_calls(row))
               for row in df[["op_stack"]].to_dict("records")) if "op_stack" in df else False


def sibling_kernels(rows: list[dict]) -> dict[int, list]:
    """Innermost operator id -> (kernel name, grid) of every kernel it launched."""
    out: dict[int, list] = {}
    for row in rows:
        calls = stack_calls(row)
        if calls and calls[-1].id is not None and row.get("kind") == "kernel":
            out.setdefault(calls[-1].id, []).append((str(row["name"]), tuple(row["grid"])))
    return out


@dataclass
class OperatorMapping:
    """`map_operator` over a table: per row the `Mapped` or the reason."""

    mapped: list = field(default_factory=list)
    reasons: list = field(default_factory=list)


def map_operators(rows: list[dict]) -> OperatorMapping:
    """Map every row of a kernel table (dicts) through its operators."""
    siblings = sibling_kernels(rows)
    result = OperatorMapping()
    for row in rows:
        calls = stack_calls(row)
        near = siblings.get(calls[-1].id, []) if calls and calls[-1].id is not None else []
        mapped, reason = map_operator(row, near)
        result.mapped.append(mapped)
        result.reasons.append(reason)
    return result
