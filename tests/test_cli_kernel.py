"""`ptxsim kernel`: a kernel run on generated inputs, with instruction counts as text or JSON.

Counts are checked against closed forms from the PTX: saxpy is 20 straight-line
instructions per in-bounds thread (its one guarded `bra` is not taken, so it costs a
warp-instruction but no thread-instruction); out-of-bounds threads run 11.
"""

import json
from pathlib import Path

import pytest

import models
from simulator.app.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAXPY = str(ROOT / "workloads" / "kernels" / "saxpy.ptx")
BLOCK_REDUCE = str(ROOT / "workloads" / "kernels" / "block_reduce.ptx")
FIXTURE = str(ROOT / "tests" / "fixtures" / "constructs.ptx")
SAXPY_INSTRUCTIONS = 20       # static instructions of saxpy, all on the in-bounds path
SAXPY_EARLY_EXIT = 11         # 10 up to the guarded bra, which jumps to ret


def run_json(capsys, *argv) -> dict:
    assert main(["kernel", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_text_output_has_totals_units_and_opcodes(capsys):
    """32 warps x 20 instructions; thread count drops the untaken guarded bra."""
    assert main(["kernel", SAXPY, "--entry", "saxpy", "--grid", "8", "--block", "128"]) == 0
    out = capsys.readouterr().out
    warps = 8 * 128 // 32
    assert f"warp instructions    {warps * SAXPY_INSTRUCTIONS:>10}" in out
    assert f"thread instructions  {8 * 128 * (SAXPY_INSTRUCTIONS - 1):>10}" in out
    assert "warp instructions by unit:" in out and "warp instructions by opcode:" in out
    assert f"  fma.rn.f32          {warps:>10}" in out
    assert "saxpy_param_0 = 4096 (.u32); saxpy_param_1 = 1.0 (.f32)" in out
    assert "saxpy_param_3: float32[4096], written" in out


def test_json_is_one_object_whose_breakdowns_add_up(capsys):
    """`--json` prints one object; per-unit and per-opcode counts sum to the total."""
    r = run_json(capsys, SAXPY, "--grid", "4,1,1", "--block", "64,1")
    assert (r["grid"], r["block"], r["threads"]) == ([4, 1, 1], [64, 1, 1], 256)
    assert r["warp_instructions"] == 8 * SAXPY_INSTRUCTIONS
    assert sum(r["by_unit"].values()) == sum(r["by_opcode"].values()) == r["warp_instructions"]
    assert r["by_opcode"]["ld.param.u64"] == 2 * 8
    assert set(r["by_unit"]) == {"int", "lsu", "ctrl", "fp32"}
    assert "timing" not in r


def test_inputs_follow_the_documented_rule(capsys):
    """Pointers get ELEMENTS float32s (4 per thread by default), ints the count, floats 1.0."""
    args = run_json(capsys, SAXPY, "--grid", "2", "--block", "32")["arguments"]
    assert args == [
        {"name": "saxpy_param_0", "kind": "scalar", "type": "u32", "value": 256},
        {"name": "saxpy_param_1", "kind": "scalar", "type": "f32", "value": 1.0},
        {"name": "saxpy_param_2", "kind": "pointer", "dtype": "float32", "elements": 256,
         "written": False},
        {"name": "saxpy_param_3", "kind": "pointer", "dtype": "float32", "elements": 256,
         "written": True},
    ]


def test_elements_sets_array_sizes_and_the_count_argument(capsys):
    """With 1000 elements and 1024 threads, 24 threads take the early exit."""
    r = run_json(capsys, SAXPY, "--grid", "8", "--block", "128", "--elements", "1000")
    assert r["arguments"][0]["value"] == 1000 and r["arguments"][2]["elements"] == 1000
    assert r["thread_instructions"] == 1000 * (SAXPY_INSTRUCTIONS - 1) + 24 * SAXPY_EARLY_EXIT


def test_same_seed_gives_the_same_report(capsys):
    """The run is deterministic for a seed."""
    argv = (BLOCK_REDUCE, "--grid", "3", "--block", "64", "--shared", "256", "--seed", "5")
    assert run_json(capsys, *argv) == run_json(capsys, *argv)


def test_entry_may_be_omitted_when_the_file_has_one(capsys):
    """saxpy.ptx has one entry, so `--entry` is optional."""
    assert run_json(capsys, SAXPY, "--grid", "1", "--block", "32")["entry"] == "saxpy"


def test_entry_must_be_named_when_the_file_has_several(capsys):
    """activations.ptx has two entries: the error lists them, on one line, exit 2."""
    path = str(ROOT / "workloads" / "kernels" / "activations.ptx")
    assert main(["kernel", path, "--grid", "1", "--block", "32"]) == 2
    err = capsys.readouterr().err
    assert err == (f"ptxsim kernel: error: {path}: give --entry NAME; the file has 2 entries: "
                   "gelu_tanh, silu\n")


def test_dynamic_shared_memory_comes_from_the_shared_flag(capsys):
    """block_reduce needs block x 4 bytes of dynamic shared memory; without it, it faults."""
    r = run_json(capsys, BLOCK_REDUCE, "--grid", "2", "--block", "128", "--shared", "512")
    assert r["shared_bytes"] == 512 and r["arguments"][1]["written"]
    assert main(["kernel", BLOCK_REDUCE, "--grid", "2", "--block", "128"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ptxsim kernel: error: {BLOCK_REDUCE}:")
    assert "out-of-bounds shared access" in err and err.count("\n") == 1


def test_by_value_struct_parameter_gets_zero_bytes(capsys):
    """The fixture's 16-byte struct is passed as zeros (n = 0: every thread returns early)."""
    r = run_json(capsys, FIXTURE, "--grid", "1", "--block", "128", "--shared", "512")
    assert r["arguments"][0] == {"name": "_Z6affine6AffinePKfPfi_param_0", "kind": "bytes",
                                 "bytes": 16}
    assert r["arguments"][2]["written"] is False


def test_bad_ptx_is_one_line_with_its_location(capsys, tmp_path):
    """A PTX error is printed as file:line:col on one line, exit status 2."""
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 9.0\n.target sm_90\n.address_size 64\n"
                   ".visible .entry k()\n{\n.reg .b32 %r1;\n  frobnicate.u32 %r1;\n}\n")
    assert main(["kernel", str(bad), "--grid", "1", "--block", "32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ptxsim kernel: error: {bad}:7:3: unknown opcode 'frobnicate.u32'")
    assert err.count("\n") == 1


def test_impossible_launch_and_missing_file_are_input_errors(capsys, tmp_path):
    """Too many threads per block, or no such file: one line, exit 2."""
    assert main(["kernel", SAXPY, "--grid", "1", "--block", "2048"]) == 2
    assert "block (2048, 1, 1) has 2048 threads" in capsys.readouterr().err
    assert main(["kernel", str(tmp_path / "none.ptx"), "--grid", "1", "--block", "32"]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("dims", ["8,x", "0", "1,2,3,4"])
def test_malformed_dimensions_are_usage_errors(capsys, dims):
    """`--grid` takes 1 to 3 positive integers separated by commas."""
    with pytest.raises(SystemExit) as info:
        main(["kernel", SAXPY, "--grid", dims, "--block", "32"])
    assert info.value.code == 2
    assert "argument --grid" in capsys.readouterr().err


def test_help_documents_the_input_rule(capsys):
    """`--help` states how inputs are generated."""
    with pytest.raises(SystemExit) as info:
        main(["kernel", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "default_rng(SEED)" in out and "4 per launched thread" in out
    assert "clipped to the type's range" in out and "N zero bytes" in out


def test_model_adds_cycles_and_time(capsys):
    """`--model` times the same launch; time_us is cycles over the preset's clock plus the
    preset's front end and launch overhead."""
    r = run_json(capsys, SAXPY, "--grid", "4", "--block", "128", "--model", "h100_sxm")
    timing = r["timing"]
    preset = models.load_preset("h100_sxm")
    clock_ghz = preset.chip.clock_ghz
    overhead_us = preset.launch.kernel_overhead_us + preset.launch.kernel_front_end_us
    assert timing["model"] == "h100_sxm" and timing["cycles"] > 0
    assert timing["time_us"] - overhead_us == pytest.approx(
        timing["cycles"] / (clock_ghz * 1e3), rel=1e-3)
    assert r["warp_instructions"] == 16 * SAXPY_INSTRUCTIONS


def test_unknown_model_lists_the_presets(capsys):
    """An unknown preset name is an input error naming the known ones."""
    assert main(["kernel", SAXPY, "--grid", "1", "--block", "32", "--model", "nosuch"]) == 2
    assert "unknown preset" in capsys.readouterr().err
