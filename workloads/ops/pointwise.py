"""PyTorch's generic element-wise kernels as ops: n-ary element-wise, copy/transpose/cast,
fill and memset, timed by simulating the kernels of `workloads/kernels/aten/torch_elementwise.cu`
(ATen's three launch paths, written again with their geometry) at the given shapes, dtypes
and strides, so that their time follows from bytes, access width and index arithmetic.

* elementwise  `--functor` copy | add | mul | silu | cos | sin | pow | fill | arange over
               `--inputs` tensors (0 to 3) broadcast to `--shape`, input dtype `--dtype`,
               output `--out-dtype`, input strides `--strides` (elements, one list per
               input, `;` between inputs, 0 where an input is broadcast), output strides
               `--out-strides` (default contiguous).
* copy         `aten::copy_` / `.to` / `.contiguous()` / a transpose: one input, a cast where
               the dtypes differ.
* memset       `cudaMemsetAsync` of `--bytes`: the driver's fill stands as a vectorized f32 fill.
* memcpy       `cudaMemcpyAsync` device to device of `--bytes`: a vectorized f32 copy stands
               for the copy engine (host copies over PCIe are not modelled).

Launch path (`--path auto` chooses as ATen's `gpu_kernel` does, after coalescing the
dimensions as TensorIterator does: adjacent dimensions merge where every operand's strides
allow it, size-1 dimensions vanish):

* vectorized  every operand contiguous and one dtype (or the f32 -> bf16 copy ATen
              special-cases): `vectorized_elementwise_kernel<VEC>`, 1024 elements per
              128-thread block in VEC-element aligned vectors.
* unrolled    every operand contiguous, a cast on load or store: 512 elements per block,
              one scalar access each.
* generic     anything else (a strided or broadcast operand): `elementwise_kernel<128, V>`,
              V = 2 for casts-free ops on 4-byte or wider values (`gpu_kernel_impl_nocast`),
              else 4; each element's offsets computed by magic-number division per dimension.
* index       arange (`elementwise_kernel_with_index`): 64 threads x 4 elements.

Casts (`--cast`): where an operand's dtype differs from the functor's, ATen's `gpu_kernel_impl`
casts at run time (`needs_dynamic_casting`): on the unrolled and generic paths every access
goes through `c10::fetch_and_cast` / `cast_and_store`, a switch over the operand's ScalarType
(a kernel parameter), and the generic path takes 4 elements per thread
(`workloads/kernels/aten/torch_elementwise_cast.cu`, entries compiled for the f32 functor
only, any operand dtype). `auto` does as ATen does (dynamic on those paths where an input
dtype differs from the output's; the vectorized f32 -> bf16 copy casts at compile time);
`static` runs the compile-time casts of `torch_elementwise.cu` instead (a kernel written for
its dtypes), `dynamic` the run-time ones.

A trace's kernel name says which path ran and whether it cast at run time (`gpu_kernel_impl`
against `gpu_kernel_impl_nocast`, `LoadWithCast`); the compare mapping passes them (`--path`,
`--vec`, `--cast`) rather than trusting this choice. Each (path, functor, inputs, dtypes) is
one entry of the compile-time file, each (path, functor, inputs) one of the run-time file; a
combination without an entry is an `InputError` naming the entries there are. On the
compile-time path f16 runs the bf16 entries (the same bytes and instructions); inputs share
one dtype, so a broadcast operand of another dtype (a 0-dim f64 base of `pow`) is read as
the input dtype. Arithmetic in f32 (ATen's opmath for these dtypes).

FLOPs (roofline only): one per arithmetic operation or libm call per element. Bytes: every
distinct element of every operand once (a broadcast operand counts its own size). Below
`FUNCTIONAL_ELEMENTS` touched elements the kernels run with random data (functional +
timing); above, in timing mode with `isa.ShapeOnly` tensors (no branch depends on data).
Tensors beyond the device memory are refused first (`registry.check_op_size`). Left out:
64-bit indexing (more than 2^31 elements is refused, ATen splits such launches),
unaligned vector paths.
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from workloads.kernels.case import KERNEL_DIR, ceil_div, load_ptx
from workloads.ops.registry import Flag, Launch, OpPlan, check_op_size, positive, register

KERNEL_FILE = "aten/torch_elementwise.cu"
CAST_FILE = "aten/torch_elementwise_cast.cu"
FUNCTIONAL_ELEMENTS = 1 << 16
THREADS = 128
VEC_BLOCK_ELEMENTS = THREADS * 8
UNROLL_BLOCK_ELEMENTS = THREADS * 4
INDEX_THREADS = 64
INDEX_BLOCK_ELEMENTS = INDEX_THREADS * 4
MAX_DIMS = 6                      # Geometry's dimensions (torch_elementwise.cu MAX_DIMS)
MAX_ELEMENTS = (1 << 31) - 1      # 32-bit indexing
PEAK = "vector_fp32_tflops"

DTYPES = {"bf16": ("b", ml_dtypes.bfloat16), "f16": ("b", ml_dtypes.bfloat16),
          "f32": ("f", np.float32), "f64": ("d", np.float64), "i64": ("l", np.int64)}
FUNCTORS = {"copy": 1, "add": 2, "mul": 2, "silu": 1, "cos": 1, "sin": 1, "pow": 2,
            "fill": 0, "arange": 0}
INPUT_RANGE = {"add": (1, 3), "mul": (1, 3)}
FLOPS_PER_ELEMENT = {"copy": 0, "silu": 3, "cos": 1, "sin": 1, "pow": 1, "fill": 0,
                     "arange": 2}
PATHS = ("auto", "vectorized", "unrolled", "generic", "index")
PATH_TAGS = {"vectorized": "vec", "unrolled": "unr", "index": "idx"}
CASTS = ("auto", "static", "dynamic")
CAST_PATH_TAGS = {"unrolled": "unrcast", "generic": "gencast"}
CAST_GENERIC_PER_THREAD = 4       # launch_legacy_kernel<128, 4> of gpu_kernel_impl
SCALAR_TYPES = {"bf16": 15, "f16": 5, "f32": 6, "f64": 7, "i64": 4}
"""c10::ScalarType codes (c10/core/ScalarType.h) the run-time casts switch on."""
CAST_NUMPY = {"f16": np.float16}
"""Buffers of a run-time cast hold their own dtype (the compile-time entries run f16 as
bf16)."""
DEFAULT_ALPHA = {"add": 1.0, "mul": 1.0, "fill": 0.0, "arange": 0.0}
GEOMETRY = np.dtype([("dims", "<i4"), ("divisor", "<u4", MAX_DIMS),
                     ("magic", "<u4", MAX_DIMS), ("shift", "<u4", MAX_DIMS),
                     ("stride", "<u4", (MAX_DIMS, 4))])
CAST_ARG = np.dtype([("dtype", "u1", 4), ("size", "<u4", 4)])
"""The by-value `Casts` argument of torch_elementwise_cast.cu: ScalarType and element size
per operand, the output first."""

SHAPE = Flag("--shape", "output shape, e.g. 4096x14336 (the broadcast shape of the inputs)",
             kind="str", required=True)
DTYPE = Flag("--dtype", f"input dtype ({', '.join(DTYPES)})", kind="str", default="bf16",
             choices=tuple(DTYPES))
OUT_DTYPE = Flag("--out-dtype", "output dtype (default: --dtype)", kind="str",
                 choices=tuple(DTYPES))
STRIDES = Flag("--strides", "input strides in elements, ';' between inputs, 0 where "
               "broadcast (default: contiguous)", kind="str")
OUT_STRIDES = Flag("--out-strides", "output strides in elements (default: contiguous)",
                   kind="str")
PATH = Flag("--path", "launch path: auto (as ATen chooses), vectorized, unrolled, generic, "
            "index", kind="str", default="auto", choices=PATHS)
VEC = Flag("--vec", "vectorized: elements per vector access; generic: elements per thread "
           "(default: the kernel's)")
CAST = Flag("--cast", "dtype casts: auto (as ATen: at run time on the unrolled and generic "
            "paths where an input dtype differs from the output's), static (compiled for the "
            "dtypes), dynamic (ATen's fetch_and_cast / cast_and_store switch per access)",
            kind="str", default="auto", choices=CASTS)


@dataclass(frozen=True, slots=True)
class Operand:
    """One tensor of an element-wise launch: its dtype and strides over the launch shape
    (elements; 0 where broadcast), dimensions as given (slowest first)."""

    dtype: str
    strides: tuple[int, ...]

    @property
    def itemsize(self) -> int:
        return np.dtype(DTYPES[self.dtype][1]).itemsize

    def span(self, shape: tuple[int, ...]) -> int:
        """Elements from the first to the last one the operand touches, plus one."""
        if math.prod(shape) == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(shape, self.strides, strict=True))

    def distinct(self, shape: tuple[int, ...]) -> int:
        """Distinct elements it touches (broadcast dimensions counted once)."""
        return math.prod(n for n, s in zip(shape, self.strides, strict=True) if s)


def parse_shape(text, flag: str = "--shape") -> tuple[int, ...]:
    """'4096x14336', '4096,14336' or a list -> a tuple of sizes >= 1 ('' or [] is 0-dim)."""
    if isinstance(text, (list, tuple)):
        parts = list(text)
    else:
        text = str(text).strip()
        parts = [p for p in re.split(r"[x,\s]+", text) if p] if text else []
    try:
        shape = tuple(int(p) for p in parts)
    except (TypeError, ValueError):
        raise InputError(f"{flag} {text!r}: accepted sizes separated by 'x' or ',' "
                         "(e.g. 4096x14336)") from None
    if any(n < 1 for n in shape):
        raise InputError(f"{flag} {text!r}: accepted sizes >= 1")
    return shape


def contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (elements) of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _strides(text, count: int, shape: tuple[int, ...], flag: str) -> list[tuple[int, ...]]:
    if text is None or text == "":
        return [contiguous(shape)] * count
    groups = text.split(";") if isinstance(text, str) else list(text)
    if len(groups) != count:
        raise InputError(f"{flag} {text!r}: accepted {count} stride list(s), one per "
                         "tensor, ';' between them")
    out = []
    for group in groups:
        parts = [p for p in re.split(r"[x,\s]+", group.strip()) if p] \
            if isinstance(group, str) else list(group)
        try:
            strides = tuple(int(p) for p in parts)
        except (TypeError, ValueError):
            raise InputError(f"{flag} {text!r}: accepted integers") from None
        if len(strides) != len(shape) or any(s < 0 for s in strides):
            raise InputError(f"{flag} {text!r}: accepted {len(shape)} strides >= 0 per tensor "
                             f"(one per dimension of --shape {'x'.join(map(str, shape))})")
        out.append(strides)
    return out


def coalesce(shape: tuple[int, ...], operands: list[tuple[int, ...]]) \
        -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """TensorIterator's `coalesce_dimensions` (on dimensions slowest first): size-1
    dimensions vanish and adjacent ones merge where every operand steps through them as
    through one; returns the launch shape and each operand's strides, slowest first."""
    dims = [(n, [s[d] for s in operands]) for d, n in enumerate(shape) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, strides in reversed(dims):                     # fastest first
        if merged:
            inner_n, inner = merged[-1]
            if all(s == i * inner_n for s, i in zip(strides, inner, strict=True)):
                merged[-1] = (inner_n * n, inner)
                continue
        merged.append((n, strides))
    merged.reverse()
    return (tuple(n for n, _ in merged),
            [tuple(strides[k] for _, strides in merged) for k in range(len(operands))])


def int_divider(divisor: int) -> tuple[int, int]:
    """ATen's IntDivider<unsigned int>: (magic, shift) with n / d = (umulhi(n, magic) + n)
    >> shift for every 32-bit n."""
    shift = next(s for s in range(33) if (1 << s) >= divisor)
    magic = ((1 << 32) * ((1 << shift) - divisor)) // divisor + 1
    return magic & 0xFFFFFFFF, shift


def geometry(shape: tuple[int, ...], operands: list[Operand]) -> np.ndarray:
    """The by-value `Geometry` argument: dimensions fastest first, byte strides per operand
    (the output first)."""
    if len(shape) > MAX_DIMS:
        raise InputError(f"--shape: {len(shape)} dimensions after coalescing; the generic "
                         f"kernel takes at most {MAX_DIMS}")
    geo = np.zeros((), GEOMETRY)
    geo["dims"] = len(shape)
    for d, n in enumerate(reversed(shape)):
        axis = len(shape) - 1 - d
        geo["divisor"][d] = n
        geo["magic"][d], geo["shift"][d] = int_divider(n)
        for k, op in enumerate(operands):
            geo["stride"][d][k] = op.strides[axis] * op.itemsize
    return geo


@lru_cache(maxsize=2)
def kernel_entries(file: str = KERNEL_FILE) -> frozenset[str]:
    """The entry names of `file`'s PTX (torch_elementwise.ptx by default)."""
    text = (KERNEL_DIR / file).with_suffix(".ptx").read_text()
    return frozenset(re.findall(r"\.entry\s+(\w+)\(", text))


def choose_path(path: str, functor: str, shape, operands: list[Operand]) \
        -> tuple[str, int | None]:
    """(path, V of the generic path) as ATen's `gpu_kernel` chooses them (module doc)."""
    out, inputs = operands[0], operands[1:]
    if functor == "arange":
        return "index", None
    dense = len(shape) <= 1 and all(o.strides in ((), (1,)) for o in operands)
    same = all(o.dtype == out.dtype for o in inputs)
    if path == "auto":
        if dense and (same or (functor == "copy" and inputs[0].dtype == "f32"
                               and DTYPES[out.dtype][0] == "b")):
            path = "vectorized"
        else:
            path = "unrolled" if dense else "generic"
    if path == "generic":
        return path, 2 if same and out.itemsize >= 4 else 4
    return path, None


def cast_mode(cast: str, path: str, operands: list[Operand]) -> str:
    """"static" or "dynamic": how the launch casts (module docstring, `--cast`)."""
    if cast not in CASTS:
        raise InputError(f"--cast {cast!r}: accepted {', '.join(CASTS)}")
    out, inputs = operands[0], operands[1:]
    if cast == "auto":
        differs = any(o.dtype != out.dtype for o in inputs)
        return "dynamic" if differs and path in CAST_PATH_TAGS else "static"
    if cast == "dynamic" and path not in CAST_PATH_TAGS:
        raise InputError(f"--cast dynamic: ATen casts at run time on the unrolled and generic "
                         f"paths only; this launch takes the {path} path")
    return cast


def cast_entry_name(path: str, functor: str, nin: int) -> str:
    """The run-time-cast entry of this launch (an `InputError` listing the instantiated
    ones when there is none)."""
    tag = CAST_PATH_TAGS[path] + (str(CAST_GENERIC_PER_THREAD) if path == "generic" else "")
    name = f"pw_{tag}_{functor}{nin}_f_f"
    entries = kernel_entries(CAST_FILE)
    if name in entries:
        return name
    raise InputError(f"elementwise: no run-time-cast kernel for path {path}, functor {functor} "
                     f"on {nin} input(s) in {CAST_FILE} (--cast dynamic); instantiated: "
                     f"{', '.join(sorted(entries))}")


def casts_argument(operands: list[Operand]) -> np.ndarray:
    """The by-value `Casts` argument: each operand's ScalarType and element size."""
    arg = np.zeros((), CAST_ARG)
    for k, op in enumerate(operands):
        arg["dtype"][k] = SCALAR_TYPES[op.dtype]
        arg["size"][k] = op.itemsize
    return arg


def entry_name(path: str, functor: str, nin: int, dtype: str, out_dtype: str,
               vec: int | None) -> str:
    """The kernel entry of this launch (an `InputError` listing the instantiated ones of
    the path and functor when there is none)."""
    tag = PATH_TAGS.get(path, f"gen{vec}")
    stem = f"pw_{tag}_{functor}{nin}_{DTYPES[dtype][0]}_{DTYPES[out_dtype][0]}"
    entries = kernel_entries()
    if path == "vectorized":
        found = sorted(e for e in entries if e.startswith(stem + "_v"))
        if vec is not None:
            found = [e for e in found if e == f"{stem}_v{vec}"]
        if found:
            return found[0]
    elif stem in entries:
        return stem
    same = sorted(e for e in entries if e.startswith(f"pw_{tag.rstrip('0123456789')}")
                  and f"_{functor}" in e)
    raise InputError(f"elementwise: no kernel for path {path}"
                     f"{f' ({vec})' if vec else ''}, functor {functor} on {nin} input(s), "
                     f"{dtype} -> {out_dtype} in {KERNEL_FILE}; instantiated for this path and "
                     "functor: "
                     f"{', '.join(same) or 'none'}")


def _tensor(op: Operand, shape, functional: bool, rng, dynamic: bool = False):
    """The buffer an operand's launch strides walk: its span of elements (of its own dtype
    under a run-time cast, `CAST_NUMPY`)."""
    span = max(op.span(shape), 1)
    dtype = CAST_NUMPY.get(op.dtype, DTYPES[op.dtype][1]) if dynamic else DTYPES[op.dtype][1]
    if not functional:
        return isa.ShapeOnly((span,), dtype)
    if op.dtype == "i64":
        return rng.integers(-1000, 1000, span).astype(np.int64)
    return rng.standard_normal(span).astype(dtype)


def _flops(functor: str, nin: int, n: int) -> float:
    """add: x0 + alpha * (x1 + x2) is one operation per input; mul one per product."""
    if functor == "add":
        return float(nin * n)
    if functor == "mul":
        return float(max(nin - 1, 1) * n)
    return float(FLOPS_PER_ELEMENT[functor] * n)


def pointwise_plan(config, kind: str, functor: str, shape, inputs: int | None = None,
                   dtype: str = "bf16", out_dtype: str | None = None, strides=None,
                   out_strides=None, path: str = "auto", vec: int | None = None,
                   alpha: float | None = None, beta: float = 1.0, seed: int = 0,
                   shape_only: bool | None = None, cast: str = "auto") -> OpPlan:
    """The plan of one element-wise launch (the `elementwise`, `copy` and `memset` ops)."""
    if functor not in FUNCTORS:
        raise InputError(f"--functor {functor!r}: accepted {', '.join(FUNCTORS)}")
    for flag, value in (("--dtype", dtype), ("--out-dtype", out_dtype)):
        if value is not None and value not in DTYPES:
            raise InputError(f"{flag} {value!r}: accepted {', '.join(DTYPES)}")
    if path not in PATHS:
        raise InputError(f"--path {path!r}: accepted {', '.join(PATHS)}")
    out_dtype = out_dtype or dtype
    nin = FUNCTORS[functor] if inputs is None else inputs
    low, high = INPUT_RANGE.get(functor, (FUNCTORS[functor], FUNCTORS[functor]))
    if isinstance(nin, bool) or not isinstance(nin, int) or not low <= nin <= high:
        raise InputError(f"--inputs {nin!r}: functor {functor} takes {low}"
                         f"{f' to {high}' if high != low else ''} input(s)")
    if vec is not None:
        positive("--vec", vec)
    full = parse_shape(shape)
    n = math.prod(full)
    given = [_strides(out_strides, 1, full, "--out-strides")[0],
             *_strides(strides, nin, full, "--strides")]
    spans = [Operand(d, s).span(full) * Operand(d, s).itemsize
             for d, s in zip([out_dtype] + [dtype] * nin, given, strict=True)]
    check_op_size(config, kind, {"functor": functor, "shape": shape}, {}, float(sum(spans)))
    if n > MAX_ELEMENTS:
        raise InputError(f"--shape {shape}: {n} elements; accepted at most 2^31 - 1 (32-bit "
                         "indexing, as one ATen launch)")
    launch_shape, launch_strides = coalesce(full, given)
    operands = [Operand(out_dtype, launch_strides[0]),
                *(Operand(dtype, s) for s in launch_strides[1:])]
    chosen, per_thread = choose_path(path, functor, launch_shape, operands)
    if chosen in ("vectorized", "unrolled") and not (
            len(launch_shape) <= 1 and all(o.strides in ((), (1,)) for o in operands)):
        raise InputError(f"--path {chosen}: accepted for contiguous operands only; these "
                         f"have strides {[o.strides for o in operands]} over "
                         f"{'x'.join(map(str, launch_shape)) or 'a scalar'}")
    mode = cast_mode(cast, chosen, operands)
    if mode == "dynamic" and chosen == "generic":
        if vec not in (None, CAST_GENERIC_PER_THREAD):
            raise InputError(f"--vec {vec}: ATen's run-time-cast generic path takes "
                             f"{CAST_GENERIC_PER_THREAD} elements per thread (--cast dynamic)")
        per_thread = CAST_GENERIC_PER_THREAD
    elif chosen == "generic" and vec is not None:
        per_thread = vec
    if mode == "dynamic":
        entry = cast_entry_name(chosen, functor, nin)
    else:
        entry = entry_name(chosen, functor, nin, dtype, out_dtype,
                           vec if chosen == "vectorized" else per_thread)
    functional = (sum(o.span(launch_shape) for o in operands) <= FUNCTIONAL_ELEMENTS
                  if shape_only is None else not shape_only)
    rng = np.random.default_rng(seed)
    tensors = [_tensor(o, launch_shape, functional, rng, mode == "dynamic") for o in operands]
    alpha = DEFAULT_ALPHA.get(functor, 0.0) if alpha is None else alpha
    args = [n, np.float32(alpha), np.float32(beta), tensors[0],
            *tensors[1:], *([0] * (3 - nin))]
    if chosen == "vectorized":
        grid, block = ceil_div(n, VEC_BLOCK_ELEMENTS), THREADS
    elif chosen == "unrolled":
        grid, block = ceil_div(n, UNROLL_BLOCK_ELEMENTS), THREADS
    elif chosen == "index":
        grid, block = ceil_div(n, INDEX_BLOCK_ELEMENTS), INDEX_THREADS
        args = args[:4]
    else:
        grid, block = ceil_div(n, THREADS * per_thread), THREADS
        args.append(geometry(launch_shape, operands))
    if mode == "dynamic":
        args.append(casts_argument(operands))
    launch = Launch(kind, load_ptx(CAST_FILE if mode == "dynamic" else KERNEL_FILE,
                                   config.chip.isa_target), entry,
                    (max(grid, 1), 1, 1), (block, 1, 1),
                    args, 0, timing_only=not functional,
                    detail={"path": chosen, "cast": mode, "launch_shape": list(launch_shape),
                            **({"per_thread": per_thread} if per_thread else {})})
    sizes = {"functor": functor, "shape": "x".join(map(str, full)), "inputs": nin,
             "dtype": dtype,
             "out_dtype": out_dtype, "path": chosen, "cast": mode}
    nbytes = sum(o.distinct(launch_shape) * o.itemsize for o in operands)
    return OpPlan(kind, sizes, (launch,), _flops(functor, nin, n), float(nbytes), PEAK)


@register("elementwise", (SHAPE, Flag("--functor", "what each element computes", kind="str",
                                      default="add", choices=tuple(FUNCTORS)),
                          Flag("--inputs", "tensor inputs (default: the functor's arity; add and "
                               "mul take 1 to 3, with 1 the other operand is --alpha)"),
                          DTYPE, OUT_DTYPE, STRIDES, OUT_STRIDES, PATH, VEC, CAST,
                          Flag("--alpha", "scalar operand (add: x0 + alpha * x1, one input: "
                               "x0 + alpha; mul with one input: x0 * alpha; fill value; "
                               "arange start)", kind="float"),
                          Flag("--beta", "arange step (default 1)", kind="float",
                               default=1.0)),
          "PyTorch element-wise kernel (vectorized / unrolled / generic) at given shapes, "
          "dtypes and strides")
def elementwise_op(config, shape, functor: str = "add", inputs: int | None = None,
                   dtype: str = "bf16", out_dtype: str | None = None, strides=None,
                   out_strides=None, path: str = "auto", vec: int | None = None,
                   alpha: float | None = None, beta: float = 1.0, seed: int = 0,
                   shape_only: bool | None = None, cast: str = "auto") -> OpPlan:
    """An n-ary element-wise op over `shape` as ATen launches it (module docstring)."""
    return pointwise_plan(config, "elementwise", functor, shape, inputs, dtype, out_dtype,
                          strides, out_strides, path, vec, alpha, beta, seed, shape_only, cast)


@register("copy", (SHAPE, DTYPE, OUT_DTYPE,
                   Flag("--strides", "input strides in elements (default: contiguous; a "
                        "transpose permutes them)", kind="str"),
                   OUT_STRIDES, PATH, VEC, CAST),
          "PyTorch copy / cast / transpose (aten::copy_, .to, .contiguous)")
def copy_op(config, shape, dtype: str = "bf16", out_dtype: str | None = None, strides=None,
            out_strides=None, path: str = "auto", vec: int | None = None, seed: int = 0,
            shape_only: bool | None = None, cast: str = "auto") -> OpPlan:
    """y = x (cast to --out-dtype) over `shape`, x read through --strides."""
    return pointwise_plan(config, "copy", "copy", shape, 1, dtype, out_dtype, strides,
                          out_strides, path, vec, None, 1.0, seed, shape_only, cast)


@register("memcpy", (Flag("--bytes", "bytes copied", required=True),),
          "cudaMemcpyAsync device to device (a vectorized 16-byte copy kernel stands for the "
          "copy engine's)")
def memcpy_op(config, bytes: int, seed: int = 0, shape_only: bool | None = None) -> OpPlan:
    """A device-to-device copy of `bytes` bytes, timed as a vectorized f32 copy of as many
    words."""
    positive("--bytes", bytes)
    check_op_size(config, "memcpy", {"bytes": bytes}, {}, 2.0 * bytes)
    words = ceil_div(bytes, 4)
    plan = pointwise_plan(config, "memcpy", "copy", str(words), 1, "f32", "f32", None, None,
                          "vectorized", None, None, 1.0, seed, shape_only)
    return OpPlan("memcpy", {"bytes": bytes}, plan.launches, 0.0, 2.0 * bytes, PEAK)


@register("memset", (Flag("--bytes", "bytes set", required=True),),
          "cudaMemsetAsync (a vectorized 16-byte fill kernel stands for the driver's)")
def memset_op(config, bytes: int, seed: int = 0, shape_only: bool | None = None) -> OpPlan:
    """A device memset of `bytes` bytes, timed as a vectorized f32 fill of as many words."""
    positive("--bytes", bytes)
    check_op_size(config, "memset", {"bytes": bytes}, {}, float(bytes))
    words = ceil_div(bytes, 4)
    plan = pointwise_plan(config, "memset", "fill", str(words), 0, "f32", "f32", None, None,
                          "vectorized", None, 0.0, 1.0, seed, shape_only)
    return OpPlan("memset", {"bytes": bytes}, plan.launches, 0.0, float(bytes), PEAK)
