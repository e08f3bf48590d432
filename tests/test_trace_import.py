"""Kineto and CSV trace importers: schema, launch join, validation errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from workloads.traces import KINETO_COLUMNS, TraceFormatError, read_kernel_csv, read_kineto

REFERENCE = Path(__file__).resolve().parents[1] / "workloads" / "reference"
EXCERPT = REFERENCE / "deepseek_v3_trace_excerpt.json"
FULL_TRACE = Path(__file__).resolve().parents[2] / "shared" / "reference" / \
    "deepseek_v3_train_trace.json"


def _trace(tmp_path, events):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _kernel(corr, ts, dur, stream=7, name="k"):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": {"stream": stream, "correlation": corr, "device": 0,
                                 "grid": [4, 2], "block": [128, 1, 1],
                                 "registers per thread": 40, "shared memory": 1024}}


def _launch(corr, ts):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 1, "args": {"correlation": corr}}


def _op(name, ts, dur, cat="cpu_op", shapes=None):
    args = {} if shapes is None else {"Input Dims": shapes}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def test_kineto_rows_have_the_documented_columns_and_launch_geometry(tmp_path):
    """Every GPU kernel becomes one row with the schema's columns and 3-tuple dims."""
    df = read_kineto(_trace(tmp_path, [_kernel(1, 100, 5), _launch(1, 10)]))
    assert list(df.columns) == list(KINETO_COLUMNS)
    row = df.iloc[0]
    assert (row.grid, row.block) == ((4, 2, 1), (128, 1, 1))
    assert (row.registers_per_thread, row.shared_memory_bytes, row.stream) == (40, 1024, 7)


def test_kernel_cpu_op_is_the_innermost_enclosing_op_with_its_shapes(tmp_path):
    """The launch at ts 15 lies in aten::mm (10..20) inside outer (0..50): aten::mm wins."""
    events = [_op("outer", 0, 50), _op("aten::mm", 10, 10, shapes=[[2, 3], [3, 4]]),
              _op("later", 30, 5), _op("step", 0, 100, cat="user_annotation"),
              _launch(1, 15), _launch(2, 32), _launch(3, 60), _kernel(1, 100, 5),
              _kernel(2, 110, 5), _kernel(3, 120, 5)]
    df = read_kineto(_trace(tmp_path, events)).set_index("correlation")
    assert df.loc[1, "cpu_op"] == "aten::mm"
    assert json.loads(df.loc[1, "input_shapes"]) == [[2, 3], [3, 4]]
    assert df.loc[2, "cpu_op"] == "later"
    assert pd.isna(df.loc[3, "cpu_op"])
    assert set(df["annotation"]) == {"step"}


def test_op_stack_lists_the_enclosing_ops_outermost_first_with_their_arguments(tmp_path):
    """The launch at ts 15 lies in aten::linear (0..50) > aten::mm (10..20): both, outermost
    first, with name, External id, dims, types, concrete inputs and strides as recorded."""
    linear = _op("aten::linear", 0, 50, shapes=[[2, 3], [4, 3], []])
    mm = _op("aten::mm", 10, 10, shapes=[[2, 3], [3, 4]])
    mm["args"].update({"External id": 7, "Input type": ["float", "float"],
                       "Concrete Inputs": ["", ""], "Input Strides": [[3, 1], [1, 3]]})
    df = read_kineto(_trace(tmp_path, [linear, mm, _launch(1, 15), _kernel(1, 100, 5),
                                       _launch(2, 30), _kernel(2, 110, 5)]))
    df = df.set_index("correlation")
    stack = json.loads(df.loc[1, "op_stack"])
    assert [o["name"] for o in stack] == ["aten::linear", "aten::mm"]
    assert stack[1] == {"name": "aten::mm", "id": 7, "dims": [[2, 3], [3, 4]],
                        "types": ["float", "float"], "concrete": ["", ""],
                        "strides": [[3, 1], [1, 3]]}
    assert [o["name"] for o in json.loads(df.loc[2, "op_stack"])] == ["aten::linear"]


def test_kineto_kernel_without_launch_is_kept(tmp_path):
    """An activity whose launch call is missing is a row with no cpu_op, not dropped."""
    df = read_kineto(_trace(tmp_path, [_kernel(9, 100, 5)]))
    assert len(df) == 1 and df["cpu_op"].isna().all() and df["op_stack"].isna().all()


def test_kineto_bad_json_names_file_line_and_column(tmp_path):
    """Malformed JSON raises TraceFormatError with file:line:col."""
    path = tmp_path / "bad.json"
    path.write_text('{"traceEvents": [\n  {"ph": }]}')
    with pytest.raises(TraceFormatError, match=r"bad\.json:2:\d+: not valid JSON"):
        read_kineto(path)


def test_kineto_activity_without_duration_is_an_error(tmp_path):
    """A GPU activity lacking `dur` is reported with its event index."""
    event = _kernel(1, 0, 1)
    del event["dur"]
    with pytest.raises(TraceFormatError, match=r"traceEvents\[0\].*lacks \['dur'\]"):
        read_kineto(_trace(tmp_path, [event]))


def test_deepseek_excerpt_joins_launches_across_streams():
    """The excerpt's kernels of streams 7, 23, 27 all have an annotation; some a cpu_op."""
    df = read_kineto(EXCERPT)
    assert set(df["stream"]) == {7, 23, 27}
    assert set(df["kind"]) == {"kernel", "memcpy", "memset"}
    assert df["annotation"].notna().all()
    assert df["cpu_op"].notna().any()
    assert (df["start_us"].diff().dropna() >= 0).all()


@pytest.mark.skipif(not FULL_TRACE.exists(), reason="../shared/reference not beside the repo")
def test_full_deepseek_trace_imports_every_gpu_activity():
    """963 kernels, 8 memcpy and 12 memset activities of GPU 0, each once."""
    df = read_kineto(FULL_TRACE)
    assert df["kind"].value_counts().to_dict() == {"kernel": 963, "memset": 12, "memcpy": 8}
    assert df["correlation"].is_unique


def _csv(tmp_path, text):
    path = tmp_path / "ops.csv"
    path.write_text(text)
    return path


def test_csv_rows_become_kernels_back_to_back(tmp_path):
    """measured_us becomes dur_us; starts are the running sum; shape columns are kept."""
    df = read_kernel_csv(_csv(tmp_path, "# source\nkernel,op,m,n,measured_us\n"
                                        "gemm_a,linear,64,128,2.5\ngemm_b,linear,8,8,1.5\n"))
    assert list(df["start_us"]) == [0.0, 2.5]
    assert list(df["dur_us"]) == [2.5, 1.5]
    assert list(df["m"]) == [64, 8]
    assert json.loads(df.loc[0, "input_shapes"]) == {"m": 64, "n": 128}
    assert list(df["cpu_op"]) == ["linear", "linear"]


@pytest.mark.parametrize("text, where", [
    ("kernel,op,m,measured_us\nk,o,4,-1\n", r"ops\.csv:2:4: measured_us '-1'"),
    ("kernel,op,m,measured_us\nk,o,4,abc\n", r"ops\.csv:2:4: measured_us 'abc'"),
    ("# src\nkernel,op,m,measured_us\nk,o,x,1\n", r"ops\.csv:3:3: m 'x'"),
    ("kernel,op,m,measured_us\nk,o,1\n", r"ops\.csv:2:1: 3 fields"),
    ("kernel,m,measured_us\n", r"ops\.csv:1:1: missing column\(s\) op"),
    ("kernel,op,measured_us\n,o,1\n", r"ops\.csv:2:1: empty kernel"),
])
def test_csv_errors_name_file_row_and_column(tmp_path, text, where):
    """Each validation error says file:row:column and what was expected."""
    with pytest.raises(TraceFormatError, match=where):
        read_kernel_csv(_csv(tmp_path, text))
