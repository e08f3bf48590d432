"""PyTorch's layout kernels as ops: concatenation and row gathers, timed by simulating the
kernels of `workloads/kernels/aten/torch_layout.cu` (ATen's, written again with their launch
geometry) at the given shapes, so that their time follows from bytes and access pattern.

* cat           `aten::cat` / `aten::stack` of `--shapes` (';' between the inputs) along
                `--dim`: `CatArrayBatchedCopy_alignedK_contig`, 128-thread blocks,
                grid.y = the inputs of the launch (at most `CAT_BATCH`; more inputs are more
                launches, ATen batches 128), grid.x = enough blocks for the largest input
                in 16-byte vectors, at most `CAT_BLOCKS_PER_SM` x the SMs (a grid-stride
                loop beyond; the traces' 4224 blocks on 132 SMs). Inputs must be contiguous,
                at most 4 dimensions (ATen's batched kernel's limit).
* index-select  `aten::index_select` / `aten::embedding`: `--rows` i64 indices into a
                [--table-rows, --cols] table, `indexSelectLargeIndex`: a grid-stride loop
                over the output elements, 128-thread blocks, at most 8 x the SMs.

Values move as opaque words of the dtype's size (bf16/f16 2, f32 4, f64/i64 8 bytes).
Bytes: inputs read once and the output written once (the gather: its rows, indices
included). Below `FUNCTIONAL_ELEMENTS` elements the kernels run with random data; above,
in timing mode with `isa.ShapeOnly` tensors (no branch depends on data), except the
gather's indices, which decide its addresses: they are always real (uniform random rows of
the table, seeded). Left out: ATen's
other cat kernels (unaligned or strided inputs, more than 4 dimensions), the small-index
gather kernel. Tensors beyond the device memory are refused first (`registry.check_op_size`),
then more than 2^32 elements (32-bit indexing). Units: elements, bytes.
"""

from __future__ import annotations

import math

import numpy as np

import isa
from isa.errors import InputError
from workloads.kernels.case import ceil_div, load_ptx
from workloads.ops.pointwise import DTYPES, parse_shape
from workloads.ops.registry import Flag, Launch, OpPlan, check_op_size, positive, register

KERNEL_FILE = "aten/torch_layout.cu"
FUNCTIONAL_ELEMENTS = 1 << 16
THREADS = 128
VECTOR_BYTES = 16
CAT_BATCH = 8                     # CAT_MAX_INPUTS of torch_layout.cu
CAT_MAX_DIMS = 4
CAT_BLOCKS_PER_SM = 32
GATHER_BLOCKS_PER_SM = 8
PEAK = "vector_fp32_tflops"
WORDS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
CAT_INPUTS = np.dtype([("start", "<u8", CAT_BATCH), ("offset", "<u4", CAT_BATCH),
                       ("dim_size", "<u4", CAT_BATCH), ("n_elements", "<u4", CAT_BATCH)])
OUT_GEOMETRY = np.dtype([("size", "<u4", CAT_MAX_DIMS), ("stride", "<u4", CAT_MAX_DIMS)])
DTYPE = Flag("--dtype", f"element dtype ({', '.join(DTYPES)})", kind="str", default="bf16",
             choices=tuple(DTYPES))


def _itemsize(dtype: str) -> int:
    if dtype not in DTYPES:
        raise InputError(f"--dtype {dtype!r}: accepted {', '.join(DTYPES)}")
    return np.dtype(DTYPES[dtype][1]).itemsize


def _buffer(count: int, itemsize: int, functional: bool, rng):
    word = WORDS[itemsize]
    if not functional:
        return isa.ShapeOnly((max(count, 1),), word)
    return rng.integers(0, np.iinfo(word).max, max(count, 1), dtype=word, endpoint=True)


def cat_shapes(shapes, dim: int) -> tuple[list[tuple[int, ...]], int, tuple[int, ...]]:
    """(input shapes, the cat dimension >= 0, output shape); an `InputError` names what
    does not fit."""
    groups = shapes.split(";") if isinstance(shapes, str) else list(shapes)
    inputs = [parse_shape(g, "--shapes") for g in groups if str(g).strip() or g == []]
    if not inputs:
        raise InputError(f"--shapes {shapes!r}: accepted one shape per input, ';' between")
    ndim = len(inputs[0])
    if ndim == 0 or any(len(s) != ndim for s in inputs):
        raise InputError(f"--shapes {shapes!r}: accepted inputs of one rank >= 1")
    if not -ndim <= dim < ndim:
        raise InputError(f"--dim {dim}: accepted -{ndim} to {ndim - 1}")
    dim %= ndim
    if any(s[:dim] + s[dim + 1:] != inputs[0][:dim] + inputs[0][dim + 1:] for s in inputs):
        raise InputError(f"--shapes {shapes!r}: the inputs must agree except along --dim {dim}")
    out = list(inputs[0])
    out[dim] = sum(s[dim] for s in inputs)
    return inputs, dim, tuple(out)


@register("cat", (Flag("--shapes", "input shapes, ';' between inputs (e.g. "
                       "4096x32x64x1;4096x32x64x1)", kind="str", required=True),
                  Flag("--dim", "dimension to concatenate along (negative from the end)",
                       default=0),
                  DTYPE),
          "PyTorch cat / stack (CatArrayBatchedCopy_alignedK_contig)")
def cat_op(config, shapes, dim: int = 0, dtype: str = "bf16", seed: int = 0,
           shape_only: bool | None = None) -> OpPlan:
    """Concatenation of contiguous inputs along `dim`, as ATen's batched aligned kernel."""
    itemsize = _itemsize(dtype)
    inputs, dim, out_shape = cat_shapes(shapes, dim)
    if len(out_shape) > CAT_MAX_DIMS:
        raise InputError(f"--shapes {shapes!r}: {len(out_shape)} dimensions; the batched cat "
                         f"kernel takes at most {CAT_MAX_DIMS}")
    total = math.prod(out_shape)
    check_op_size(config, "cat", {"shapes": shapes, "dim": dim}, {},
                  float(2 * total * itemsize))
    if total >= 1 << 32:
        raise InputError(f"--shapes {shapes!r}: {total} output elements; accepted < 2^32 "
                         "(32-bit indexing)")
    vector = VECTOR_BYTES // itemsize
    counts = [math.prod(s) for s in inputs]
    starts = np.cumsum([0] + [ceil_div(c, vector) * vector for c in counts])
    functional = (2 * total <= FUNCTIONAL_ELEMENTS) if shape_only is None else not shape_only
    rng = np.random.default_rng(seed)
    source = _buffer(int(starts[-1]), itemsize, functional, rng)
    out = _buffer(total, itemsize, functional, rng) if not functional else \
        np.zeros(total, WORDS[itemsize])
    strides = [math.prod(out_shape[d + 1:]) for d in range(len(out_shape))]
    geometry = np.zeros((), OUT_GEOMETRY)
    geometry["size"][:len(out_shape)] = out_shape
    geometry["stride"][:len(out_shape)] = strides
    launches, offset = [], 0
    ptx = load_ptx(KERNEL_FILE, config.chip.isa_target)
    entry = f"cat_aligned{itemsize}_d{len(out_shape)}"
    for first in range(0, len(inputs), CAT_BATCH):
        batch = list(range(first, min(first + CAT_BATCH, len(inputs))))
        meta = np.zeros((), CAT_INPUTS)
        for slot, i in enumerate(batch):
            meta["start"][slot] = starts[i]
            meta["offset"][slot] = offset
            meta["dim_size"][slot] = inputs[i][dim]
            meta["n_elements"][slot] = counts[i]
            offset += inputs[i][dim]
        blocks = ceil_div(max(counts[i] for i in batch), vector * THREADS)
        grid = (max(1, min(blocks, CAT_BLOCKS_PER_SM * config.sm.count)), len(batch), 1)
        launches.append(Launch("cat", ptx, entry, grid, (THREADS, 1, 1),
                               [out, source, meta, geometry, dim, strides[dim]], 0,
                               timing_only=not functional,
                               detail={"inputs": len(batch), "vector_elements": vector}))
    sizes = {"shapes": ";".join("x".join(map(str, s)) for s in inputs), "dim": dim,
             "dtype": dtype}
    return OpPlan("cat", sizes, tuple(launches), 0.0, float(2 * total * itemsize), PEAK)


@register("index-select", (Flag("--rows", "indices (rows gathered)", required=True),
                           Flag("--cols", "elements per row", required=True),
                           Flag("--table-rows", "rows of the source table (default: --rows)"),
                           DTYPE),
          "PyTorch index_select / embedding row gather (indexSelectLargeIndex)")
def index_select_op(config, rows: int, cols: int, table_rows: int | None = None,
                    dtype: str = "bf16", seed: int = 0,
                    shape_only: bool | None = None) -> OpPlan:
    """out[r, :] = table[index[r], :] for `rows` i64 indices (random, within the table)."""
    itemsize = _itemsize(dtype)
    positive("--rows", rows)
    positive("--cols", cols)
    table_rows = rows if table_rows is None else positive("--table-rows", table_rows)
    total = rows * cols
    check_op_size(config, "index-select", {"rows": rows, "cols": cols, "table_rows": table_rows},
                  {}, float((total + table_rows * cols) * itemsize + 8 * rows))
    if max(total, table_rows * cols) >= 1 << 32:
        raise InputError(f"--rows {rows} --cols {cols} --table-rows {table_rows}: accepted "
                         "fewer than 2^32 elements (32-bit indexing)")
    functional = ((total + table_rows * cols) <= FUNCTIONAL_ELEMENTS
                  if shape_only is None else not shape_only)
    rng = np.random.default_rng(seed)
    table = _buffer(table_rows * cols, itemsize, functional, rng)
    out = np.zeros(total, WORDS[itemsize]) if functional else \
        _buffer(total, itemsize, False, rng)
    index = rng.integers(0, table_rows, rows).astype(np.int64)   # its values decide addresses
    grid = max(1, min(ceil_div(total, THREADS), GATHER_BLOCKS_PER_SM * config.sm.count))
    launch = Launch("index-select", load_ptx(KERNEL_FILE, config.chip.isa_target),
                    f"index_select_rows{itemsize}",
                    (grid, 1, 1), (THREADS, 1, 1), [out, table, index, total, cols, cols, cols],
                    0, timing_only=not functional)
    return OpPlan("index-select", {"rows": rows, "cols": cols, "table_rows": table_rows,
                                   "dtype": dtype}, (launch,), 0.0,
                  float(2 * total * itemsize + 8 * rows), PEAK)
