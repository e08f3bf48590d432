"""A ready-to-run launch of one catalogued kernel, its expected outputs and tolerances.

`Case` holds what `isa.run_kernel` needs (PTX file, entry, grid, block, argument list,
dynamic shared bytes) plus, per output argument, the expected array and an absolute and
relative tolerance (scalars or arrays broadcast against the output). Every other array
argument is an input and must come back unchanged. Builders in the `cases_*` modules make
Cases from a seeded `numpy.random.Generator` and a problem size; `catalog.py` lists them.
`isa` is imported only when a case runs, so the catalog is usable without the interpreter.

PTX builds per ISA target: `X.ptx` is nvcc's build for the `.target` it names (sm_90 or
sm_90a); a file whose kernels mean something on an A100 also has `X.sm_80.ptx`, nvcc's
`-arch=sm_80` build (both commands on the `// ptx:` header lines of `X.cu`). `load_ptx(file,
target)` reads the newest build a chip of ISA `target` runs; the files using FP8 (which an
A100 lacks) have no sm_80 build, so an sm_80 chip gets their sm_90 build and the ISA target
check (`isa.targets.verify_target`, `workloads.ops.registry.check_plan_target`) refuses it,
naming the op and the kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

import isa
from isa.targets import has_target, target_rank

KERNEL_DIR = Path(__file__).resolve().parent

U32 = 2.0**-24  # unit roundoff of f32 (half an ulp of 1.0)
U64 = 2.0**-53  # unit roundoff of f64


_TARGET_LINE = re.compile(r"^\.target\s+(sm_\w+)", re.M)


def ptx_builds(file: str) -> dict[str, Path]:
    """The committed PTX builds of `file` (a `.cu` or `.ptx` name in this folder) by target:
    `X.ptx` under the `.target` it names, `X.<target>.ptx` under its name's target."""
    base = (KERNEL_DIR / file).with_suffix(".ptx")
    match = _TARGET_LINE.search(base.read_text())
    builds = {match.group(1) if match else "": base}
    for path in base.parent.glob(f"{base.stem}.sm_*.ptx"):
        builds[path.name[len(base.stem) + 1:-len(".ptx")]] = path
    return builds


def load_ptx(file: str, target: str | None = None) -> str:
    """Text of the committed PTX of `file` (a `.cu` or `.ptx` name in this folder): `X.ptx`
    without a `target`; with one, the newest build a chip of ISA `target` runs, else `X.ptx`
    (which the chip's ISA target check then refuses)."""
    builds = ptx_builds(file)
    base = (KERNEL_DIR / file).with_suffix(".ptx")
    if target is None:
        return base.read_text()
    runnable = [t for t in builds if target_rank(t) is not None and has_target(target, t)]
    if not runnable:
        return base.read_text()
    return builds[max(runnable, key=target_rank)].read_text()


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def fma_exact(a, b, c, dtype) -> np.ndarray:
    """a * b + c rounded once to `dtype` (f32 or f64), nearest-even: what fma.rn produces.

    The exact value is a Fraction; it is rounded to f64 with round-to-odd (nearest, then
    one step toward the exact value when inexact and the last bit came out even), which
    makes the later nearest rounding to f32 correct (53 >= 24 + 2 bits).
    """
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    out = np.empty(a.shape, np.float64)
    for i, (x, y, z) in enumerate(zip(a.flat, b.flat, c.flat, strict=True)):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        near = float(exact)
        if Fraction(near) != exact and dtype != np.float64:
            bits = np.float64(near).view(np.uint64)
            if bits & np.uint64(1) == 0:
                near = float(np.nextafter(near, np.inf if exact > near else -np.inf))
        out.flat[i] = near
    return out.astype(dtype)


@dataclass(frozen=True, slots=True)
class Expected:
    """The array an output argument must hold after the run, within atol + rtol * |value|.

    NaNs must sit where the expected array has NaNs.
    """

    value: np.ndarray
    atol: float | np.ndarray = 0.0
    rtol: float = 0.0


@dataclass(frozen=True, slots=True)
class Case:
    """One launch: grid/block as 3-tuples, args in parameter order, outputs by arg index."""

    file: str
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list
    outputs: dict[int, Expected]
    shared_bytes: int = 0
    inputs_before: dict[int, np.ndarray] = field(default_factory=dict)

    def run(self, target: str | None = None):
        """Run the kernel through `isa.run_kernel` (outputs change in place) from its build for
        ISA `target` (`load_ptx`; `X.ptx` without one); return its result."""
        return isa.run_kernel(load_ptx(self.file, target), self.entry, self.grid, self.block,
                              self.args, shared_bytes=self.shared_bytes)

    def check(self) -> None:
        """Raise AssertionError naming the first argument that is off, and by how much."""
        for index, expected in self.outputs.items():
            _check_close(f"{self.entry} arg {index}", self.args[index], expected)
        for index, before in self.inputs_before.items():
            if not np.array_equal(_as_bits(self.args[index]), _as_bits(before)):
                raise AssertionError(f"{self.entry} arg {index} is an input but was modified")


def make_case(file: str, entry: str, grid, block, args: list, outputs: dict[int, Expected],
              shared_bytes: int = 0) -> Case:
    """Build a Case, normalising grid/block to 3-tuples and snapshotting the input arrays."""
    inputs = {i: a.copy() for i, a in enumerate(args)
              if isinstance(a, np.ndarray) and i not in outputs}
    return Case(file, entry, _dim3(grid), _dim3(block), args, outputs, shared_bytes, inputs)


def _dim3(d) -> tuple[int, int, int]:
    dims = (d,) if isinstance(d, int) else tuple(d)
    return tuple(int(x) for x in dims) + (1,) * (3 - len(dims))


def _as_bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def _check_close(name: str, actual: np.ndarray, expected: Expected) -> None:
    want = np.asarray(expected.value, dtype=np.float64)
    got = np.asarray(actual).astype(np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    nan_want, nan_got = np.isnan(want), np.isnan(got)
    bad = nan_want != nan_got
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want)
        bound = expected.atol + expected.rtol * np.abs(want)
        bad |= ~nan_want & ~(err <= bound)
    if bad.any():
        idx = np.argwhere(bad)[0]
        at = tuple(int(i) for i in idx)
        limit = np.broadcast_to(bound, want.shape)[at]
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.size} elements off; first at {at}: "
            f"got {got[at]!r}, expected {want[at]!r}, allowed error {limit!r}"
        )
