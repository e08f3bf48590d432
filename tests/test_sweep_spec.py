"""Sweep files: validation errors name file, line and key path; axes expand as documented."""

import textwrap

import pytest

from simulator.app.cli import main
from simulator.app.points import POINT_RUNNERS
from simulator.app.sweep import SweepError, count_points, expand_points, parse_sweep

BASE = """\
[base]
kind = "kernel"
preset = "h100_sxm"
kernel = "saxpy"
size = { n = 256, block = 128 }
seed = 0
"""


def _spec(axes: str = "", base: str = BASE):
    return parse_sweep(base + textwrap.dedent(axes), "t.toml")


def _error(axes: str = "", base: str = BASE, expand: bool = False) -> SweepError:
    with pytest.raises(SweepError) as info:
        spec = _spec(axes, base)
        if expand:
            expand_points(spec)
    return info.value


def test_unknown_top_level_key_names_file_line_and_accepted_keys():
    """A stray table is refused with its file, line and the accepted top-level keys."""
    err = _error("[axes]\nkey = 1\n")
    assert err.file == "t.toml" and err.line == 7 and err.path == "axes"
    assert "unknown key" in str(err) and "sweep, base, axis" in str(err)
    assert str(err).startswith("t.toml:7: axes:")


def test_unknown_axis_key_names_the_axis_and_its_line():
    """A misspelt key inside an [[axis]] is reported at axis[i].key with its line."""
    err = _error("""
        [[axis]]
        key = "sm.count"
        values = [66, 132]

        [[axis]]
        key = "size.n"
        valus = [1, 2]
    """)
    assert err.path == "axis[1].valus" and err.line == 14
    assert "one of key, values, random, zip" in str(err)


def test_bad_preset_key_on_an_axis_is_refused_before_anything_runs():
    """Every point's config is resolved up front: an unknown preset key names its axis."""
    err = _error("""
        [[axis]]
        key = "sm.cuont"
        values = [66, 132]
    """, expand=True)
    assert err.path == "axis[0].values[0]" and err.line == 10
    assert "sm.cuont" in str(err) and "unknown key" in str(err) and "count" in str(err)


def test_out_of_range_axis_value_names_the_value_index():
    """A value the config refuses (sm.count = 0) is reported at axis[i].values[j]."""
    err = _error('[[axis]]\n"sm.count" = [66, 0]\n', expand=True)
    assert err.path == "axis[0].sm.count[1]" and err.line == 8
    assert "point 1" in str(err) and "too small" in str(err)


def test_bad_fixed_override_names_base_overrides():
    """A bad key in [base] overrides is reported under base.overrides."""
    err = _error(base=BASE + 'overrides = { "l2.size_byte" = 1 }\n', expand=True)
    assert err.path == "base.overrides.l2.size_byte" and err.line == 7


@pytest.mark.parametrize("axes, path, words", [
    ('[[axis]]\nkey = "sm.count"\nvalues = []\n', "axis[0].values", "non-empty list"),
    ('[[axis]]\nkey = "sm.count"\nvalues = 66\n', "axis[0].values", "non-empty list"),
    ('[[axis]]\nkey = "sm.count"\nvalues = [66, 66]\n', "axis[0].values[1]", "repeated"),
    ('[[axis]]\nkey = "sm.count"\n', "axis[0]", "exactly one of values and random"),
    ('[[axis]]\nkey = "sm count"\nvalues = [1]\n', "axis[0].key", "dotted key"),
    ('[[axis]]\nkey = "x"\nrandom = { low = 1, high = 2, count = 2.5, seed = 0 }\n',
     "axis[0].random.count", "integer >= 1"),
    ('[[axis]]\nkey = "x"\nrandom = { low = 1, high = 2, count = 2 }\n',
     "axis[0].random.seed", "integer >= 0"),
    ('[[axis]]\nkey = "x"\nrandom = { low = 3, high = 2, count = 2, seed = 0 }\n',
     "axis[0].random.high", "> 3"),
    ('[[axis]]\nkey = "x"\nrandom = { low = 0, high = 2, count = 2, seed = 0, log = true }\n',
     "axis[0].random.low", "low > 0"),
    ('[[axis]]\n"sm.count" = [66]\nzip = 3\n', "axis[0].zip", "group name"),
    ('[[axis]]\nkey = "kind"\nvalues = ["kernel"]\n', "axis[0].key", "not an axis key"),
    ('[[axis]]\nkey = "preset"\nvalues = ["h900"]\n', "axis[0].values[0]", "unknown preset"),
])
def test_malformed_axes_are_refused_with_key_path_and_accepted_values(axes, path, words):
    """Empty, mistyped or impossible axes name their TOML key path and what is accepted."""
    err = _error(axes)
    assert err.path == path
    assert words in str(err)


def test_repeated_axis_key_is_refused():
    """Two axes over one key are refused, naming the first."""
    err = _error('[[axis]]\n"sm.count" = [66]\n[[axis]]\nkey = "sm.count"\nvalues = [1]\n')
    assert err.path == "axis[1].key" and "already swept by axis[0]" in str(err)


@pytest.mark.parametrize("base, path, words", [
    (BASE.replace('"kernel"\n', '"kernl"\n', 1), "base.kind", "kernel"),
    (BASE.replace('"saxpy"', '"saxpyy"'), "base.kernel", "unknown kernel"),
    (BASE.replace("block = 128", "blk = 128"), "base.size.blk", "size keys of saxpy: n, block"),
    (BASE.replace("n = 256", "n = 2.5"), "base.size.n", "integer >= 1"),
    (BASE.replace("seed = 0", 'seed = "x"'), "base.seed", "integer >= 0"),
    (BASE.replace('preset = "h100_sxm"', 'preset = "h900"'), "base.preset", "h100_sxm"),
    (BASE + "colour = 1\n", "base.colour", "kind, preset, overrides, kernel, seed, size"),
    ("[sweep]\nname = 1\n", "sweep.name", "text"),
])
def test_bad_base_table_is_refused_with_key_path(base, path, words):
    """Unknown kind, kernel, size keys, wrong types in [base] name their key path."""
    err = _error(base=base, expand=True)
    assert err.path == path
    assert words in str(err)


def test_invalid_toml_reports_its_line():
    """A TOML syntax error is reported with the file and the line tomllib found."""
    err = _error(base=BASE + "[[axis]]\nkey = \n")
    assert err.line == 8 and "not valid TOML" in str(err)


def test_cli_prints_a_bad_sweep_as_one_line_with_exit_2(tmp_path, capsys):
    """`ptxsim sweep` turns a validation error into one stderr line and exit status 2."""
    path = tmp_path / "bad.toml"
    path.write_text(BASE + '[[axis]]\n"sm.count" = []\n')
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}:8: axis[0].sm.count" in err
    assert not (tmp_path / "out").exists()


def test_grid_axes_expand_to_their_cartesian_product_last_axis_fastest():
    """Three grid axes of 3, 2 and 2 values give 12 points; the last axis varies fastest."""
    spec = _spec("""
        [[axis]]
        "sm.count" = [32, 66, 132]
        [[axis]]
        key = "size.n"
        values = [64, 256]
        [[axis]]
        key = "preset"
        values = ["h100_sxm", "h800_sxm"]
    """)
    points = expand_points(spec)
    assert count_points(spec) == len(points) == 12
    assert [p.index for p in points] == list(range(12))
    assert [p.preset for p in points[:4]] == ["h100_sxm", "h800_sxm"] * 2
    assert [p.target["size.n"] for p in points[:4]] == [64, 64, 256, 256]
    assert {p.overrides["sm.count"] for p in points[:4]} == {32}
    assert len({p.point_id for p in points}) == 12


def test_random_axis_is_reproducible_from_its_seed_and_stays_in_range():
    """A seeded random axis draws the same values every time, within [low, high]."""
    axis = ('[[axis]]\nkey = "l2.size_bytes"\n'
            'random = {{ low = 1048576, high = 67108864, count = 5, seed = {seed}, '
            'log = true, integer = true }}\n')
    first, again, other = (_spec(axis.format(seed=s)).axes[0].values for s in (7, 7, 8))
    assert first == again and first != other
    assert all(isinstance(v, int) and 1048576 <= v <= 67108864 for v in first)
    assert list(first) == sorted(first)


def test_random_float_axis_draws_count_values():
    """A non-integer random axis yields `count` floats in [low, high)."""
    spec = _spec('[[axis]]\nkey = "chip.clock_ghz"\n'
                 'random = { low = 1.0, high = 2.0, count = 4, seed = 3 }\n')
    values = spec.axes[0].values
    assert len(values) == 4 and all(1.0 <= v < 2.0 for v in values)
    assert len(expand_points(spec)) == 4


def test_zip_axes_are_paired_not_multiplied():
    """Axes with zip = true pair value by value; with one other axis of 3: 3 x 2 points."""
    spec = _spec("""
        [[axis]]
        key = "size.n"
        values = [64, 128]
        zip = true
        [[axis]]
        "sm.count" = [16, 32, 66]
        [[axis]]
        key = "seed"
        values = [5, 6]
        zip = true
    """)
    points = expand_points(spec)
    assert len(points) == count_points(spec) == 6
    assert {(p.target["size.n"], p.target["seed"]) for p in points} == {(64, 5), (128, 6)}


def test_zip_axes_of_unequal_length_are_refused():
    """Zipped axes must have as many values as each other."""
    err = _error('[[axis]]\n"sm.count" = [16, 32]\nzip = true\n'
                 '[[axis]]\nkey = "size.n"\nvalues = [1, 2, 3]\nzip = true\n')
    assert err.path == "axis[1].zip" and "pairs 3 values with 2 of axis[0]" in str(err)


def test_point_ids_are_stable_and_follow_the_resolved_parameters():
    """The same file gives the same ids; a changed base value changes every id."""
    axes = '[[axis]]\n"sm.count" = [66, 132]\n'
    ids = [p.point_id for p in expand_points(_spec(axes))]
    assert ids == [p.point_id for p in expand_points(_spec(axes))]
    changed = expand_points(_spec(axes, BASE.replace("seed = 0", "seed = 1")))
    assert not set(ids) & {p.point_id for p in changed}


def test_kernel_target_without_size_takes_the_first_catalog_variant():
    """A kernel target with no size table runs the kernel's first catalogued size."""
    base = BASE.replace("size = { n = 256, block = 128 }\n", "")
    (point,) = expand_points(_spec(base=base))
    assert point.target == {"kernel": "saxpy", "seed": 0, "size.n": 1000, "size.block": 128}
    assert point.params()["preset"] == "h100_sxm"


def test_kernel_kind_is_registered_with_its_metrics():
    """The point-runner registry maps kind "kernel" to a runner reporting cycles and time."""
    runner = POINT_RUNNERS["kernel"]
    assert runner.target_keys == ("kernel", "seed", "size")
    assert {"cycles", "time_us", "instructions"} <= set(runner.metrics)
    assert sorted(POINT_RUNNERS) == ["kernel", "layer", "op", "step"]


def test_documented_format_example_and_example_files_are_valid_sweeps():
    """The example in simulator/app/sweep.py and every workloads/sweeps file expand as described."""
    import inspect
    from pathlib import Path

    import simulator.app.sweep as sweep_module
    from simulator.app.sweep import load_sweep_spec

    doc = inspect.getdoc(sweep_module).split("::", 1)[1].split("\n\n")[1]
    spec = parse_sweep(textwrap.dedent(doc), "doc.toml")
    assert len(expand_points(spec)) == 2 * 2 * len(spec.axes[2].values)
    folder = Path(__file__).resolve().parents[1] / "workloads" / "sweeps"
    counts = {path.name: len(expand_points(load_sweep_spec(path)))
              for path in sorted(folder.glob("*.toml"))
              if not path.name.startswith("tune_")}   # ptxsim tune's spaces: test_tune.py
    assert counts == {"layer_bert_l2.toml": 2, "layer_llama_decode_hbm.toml": 2,
                      "layer_llama_decode_hbm_sms.toml": 6,
                      "op_gemm_sm_count.toml": 2, "op_rmsnorm_presets.toml": 4,
                      "saxpy_sm_count.toml": 8, "sgemm_l2_random.toml": 6,
                      "step_bert_dualpipe.toml": 2}
    large = {path.name: len(expand_points(load_sweep_spec(path)))     # valid, not run by tests
             for path in sorted((folder / "large").glob("*.toml"))}
    assert large == {"layer_deepseek_comm_l2.toml": 16}
