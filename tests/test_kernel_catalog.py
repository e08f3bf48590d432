"""The kernel catalog agrees with the committed PTX and builds well-formed cases.

These checks need no interpreter: every catalogued entry is a `.visible .entry` of its
file's PTX, every PTX entry is catalogued, and every case's launch is sane.
"""

import re

import numpy as np
import pytest

from workloads.kernels.case import KERNEL_DIR, fma_exact, load_ptx
from workloads.kernels.catalog import KERNELS

ENTRY = re.compile(r"^\.visible \.entry (\w+)\(", re.M)


def test_catalog_lists_exactly_the_ptx_entries():
    """Every `.visible .entry` in the committed PTX (each target's build) has one catalog row,
    and vice versa."""
    in_ptx = {(p.name.split(".")[0] + ".cu", name)
              for p in KERNEL_DIR.glob("*.ptx") for name in ENTRY.findall(p.read_text())}
    in_catalog = {(spec.file, spec.entry) for spec in KERNELS.values()}
    assert in_catalog == in_ptx


def test_catalog_has_at_least_22_kernels_with_two_launch_shapes_each():
    """The suite covers at least 22 kernels, each with two distinct (grid, block) launches."""
    assert len(KERNELS) >= 22
    for spec in KERNELS.values():
        launches = {(c.grid, c.block) for c in
                    (spec.build(np.random.default_rng(0), **v) for v in spec.variants)}
        assert len(launches) >= 2, spec.entry


@pytest.mark.parametrize("entry", sorted(KERNELS))
def test_case_arguments_match_the_entry_parameter_count(entry):
    """A built case passes an array for each pointer (.u64) parameter, a scalar otherwise."""
    spec = KERNELS[entry]
    case = spec.build(np.random.default_rng(0), **spec.variants[0])
    params = re.search(rf"\.entry {entry}\((.*?)\)", load_ptx(spec.file), re.S).group(1)
    types = re.findall(r"\.param \.(\w+)", params)
    assert [isinstance(a, np.ndarray) for a in case.args] == [t == "u64" for t in types]
    assert all(isinstance(case.args[index], np.ndarray) for index in case.outputs)


def test_fma_exact_rounds_once_where_f64_then_f32_rounds_wrong():
    """The fma reference rounds a*b + c once: 2^30 + 2^6 + 2^-30 goes up to 2^30 + 2^7."""
    a, b, c = np.float32(8390656 * 2.0**-23), np.float32(16773121 * 2.0**-18), np.float32(2.0**30)
    twice = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert twice == np.float32(2.0**30)
    assert fma_exact(a, b, c, np.float32) == np.float32(2.0**30 + 2.0**7)
