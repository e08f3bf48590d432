"""Launch exported template cases (`template_export.py`) on a real GPU and time them.

Needs an NVIDIA Hopper GPU with CuPy, cuda-python (`cuda.bindings`) and NVML. Each case
runs in a child process with a time limit (a kernel that hangs costs its case, not the
run). A child loads the case's cubins with the driver, re-encodes our tensor-map
stand-ins as real `CUtensorMap`s (`cuTensorMapEncodeTiled`: same data type, dims,
strides, box and swizzle, over the device copy of the argument they name), fills the
arrays (data from `arrays.npz`, else random normal / zeros), launches once and compares
the output with the expected one for checked cases, then times the case's launches
between CUDA events: `warmup` untimed, then `reps` timed, each after a 256 MiB L2 flush
(`l2_flush` true, outside the events) and once back to back after a 20 us spin kernel
(`l2_flush` false). Writes `template_ops.csv` + `.meta.json` (hw_common.Table).

    python benchmarks/hardware/template_run.py EXPORTDIR OUTDIR [--timeout-s 60]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from hw_common import (  # noqa: E402
    FLUSH_BYTES,
    ClockSampler,
    Table,
    environment,
    gpu_spin,
    reps_for,
    summarize_ms,
    time_cupy,
)

from isa.tensor_map import ABSOLUTE, SWIZZLE_CODE, read_tensor_map  # noqa: E402

_CTYPE = {"u32": ctypes.c_uint32, "b32": ctypes.c_uint32, "s32": ctypes.c_int32,
          "u64": ctypes.c_uint64, "b64": ctypes.c_uint64, "s64": ctypes.c_int64,
          "f32": ctypes.c_float, "f64": ctypes.c_double}


def _ok(res):
    from cuda.bindings import driver as cu

    err, *rest = res if isinstance(res, tuple) else (res,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver: {err}")
    return rest[0] if len(rest) == 1 else rest


def _device_array(spec: dict, data: np.ndarray | None, rng):
    import cupy

    shape, size = tuple(spec["shape"]), spec["itemsize"]
    raw = {1: cupy.uint8, 2: cupy.uint16, 4: cupy.uint32, 8: cupy.uint64}[size]
    if data is not None:
        return cupy.asarray(np.ascontiguousarray(data).view({1: np.uint8, 2: np.uint16,
                                                             4: np.uint32, 8: np.uint64}[size]))
    if spec["fill"] == "zeros":
        return cupy.zeros(shape, raw)
    if size == 1:       # fp8: finite e4m3/e5m2 codes of either sign, |x| <= 2, by chunks
        out = cupy.empty(shape, cupy.uint8)
        flat = out.reshape(-1)
        for lo in range(0, flat.size, 1 << 28):
            n = min(1 << 28, flat.size - lo)
            flat[lo:lo + n] = (rng.integers(0, 0x40, n, dtype=cupy.int32)
                               | (rng.integers(0, 2, n, dtype=cupy.int32) << 7)).astype(cupy.uint8)
        return out
    if size not in (2, 4):
        return cupy.zeros(shape, raw)
    x = rng.standard_normal(shape, dtype=cupy.float32)
    if spec["dtype"] == "float32":
        return x.view(cupy.uint32)
    if spec["dtype"] == "bfloat16":
        return (x.view(cupy.uint32) >> 16).astype(cupy.uint16)
    if spec["dtype"] == "float16":
        return x.astype(cupy.float16).view(cupy.uint16)
    return cupy.zeros(shape, raw)


def encode_args(stand_in: np.ndarray, base: dict) -> dict:
    """What cuTensorMapEncodeTiled takes for our 128-byte tensor-map stand-in
    (`isa.tensor_map`, read by `read_tensor_map`) over the device pointers `base` of the
    kernel arguments: dtype and swizzle codes (numbered as the driver's enums), rank, global
    address, dims, strides of dims 1.. in bytes, box; innermost first."""
    tm = read_tensor_map(stand_in)
    if isinstance(tm, str):
        raise ValueError(f"not a tensor map: {tm}")
    offset = base[tm.base_arg] if tm.base_arg != ABSOLUTE else 0
    return {"dtype": tm.dtype_code, "rank": tm.rank, "address": tm.address + offset,
            "dims": tm.dims, "strides": tm.strides_bytes[1:], "box": tm.box,
            "swizzle": SWIZZLE_CODE[tm.swizzle_bytes]}


def _tensor_map(stand_in: np.ndarray, base: dict):
    """A real CUtensorMap with the stand-in's fields over the device pointer it names."""
    from cuda.bindings import driver as cu

    f = encode_args(stand_in, base)
    rank, address = f["rank"], f["address"]
    return _ok(cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType(f["dtype"]), rank, address,
        [cu.cuuint64_t(d) for d in f["dims"]], [cu.cuuint64_t(s) for s in f["strides"]],
        [cu.cuuint32_t(b) for b in f["box"]], [cu.cuuint32_t(1)] * rank,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle(f["swizzle"]),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))


class CaseLaunch:
    """One exported launch on the device: module, arguments, a callable launch."""

    def __init__(self, spec: dict, export: Path, arrays, rng):
        from cuda.bindings import driver as cu

        self.spec = spec
        image = np.frombuffer((export / spec["cubin"]).read_bytes(), np.uint8).copy()
        self._image = image
        self.module = _ok(cu.cuModuleLoadData(image.ctypes.data))
        self.fn = _ok(cu.cuModuleGetFunction(self.module, spec["entry"].encode()))
        if spec["shared_bytes"] > 48 * 1024:
            _ok(cu.cuFuncSetAttribute(
                self.fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                spec["shared_bytes"]))
        self.dev, base = {}, {}
        for i, a in enumerate(spec["args"]):
            if a["kind"] == "array":
                data = arrays[a["key"]] if a["key"] in arrays.files else None
                self.dev[i] = _device_array(a, data, rng)
                base[i] = int(self.dev[i].data.ptr)
        self._keep, ptrs = [], []
        for i, (a, ptype) in enumerate(zip(spec["args"], spec["ptx_types"], strict=True)):
            if a["kind"] == "tmap":
                tm = _tensor_map(arrays[a["key"]], base)
                self._keep.append(tm)
                ptrs.append(int(tm.getPtr()))
                continue
            value = _CTYPE["u64"](base[i]) if a["kind"] == "array" else _CTYPE[ptype](a["value"])
            self._keep.append(value)
            ptrs.append(ctypes.addressof(value))
        self.params = (ctypes.c_void_p * len(ptrs))(*ptrs)

    def __call__(self):
        from cuda.bindings import driver as cu

        (gx, gy, gz), (bx, by, bz) = self.spec["grid"], self.spec["block"]
        _ok(cu.cuLaunchKernel(self.fn, gx, gy, gz, bx, by, bz, self.spec["shared_bytes"],
                              cu.CUstream(0), ctypes.addressof(self.params), 0))


def _check(case: dict, launches: list, arrays) -> str:
    """Max |device - expected| / max |expected| of the case's output, as text."""
    import cupy

    want = arrays[case["case"] + "_expected"]
    spec = case["launches"][-1]
    idx = [i for i, a in enumerate(spec["args"])
           if a["kind"] == "array" and tuple(a["shape"]) == want.shape]
    got = launches[-1].dev[idx[-1]].get()
    got = (got.astype(np.uint32) << 16).view(np.float32) if got.dtype == np.uint16 else got
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    cupy.cuda.Device().synchronize()
    return f"{'ok' if err < 2e-2 else 'FAIL'} rel {err:.2e}"


def run_case(export: Path, key: str) -> dict:
    """Child: launch, check and time case `key`; its row as a dict."""
    import cupy

    cases = {c["case"]: c for c in json.loads((export / "cases.json").read_text())["cases"]}
    case = cases[key]
    arrays = np.load(export / "arrays.npz")
    rng = cupy.random.default_rng(0)
    launches = [CaseLaunch(s, export, arrays, rng) for s in case["launches"]]

    def all_launches():
        for launch in launches:
            launch()

    all_launches()
    cupy.cuda.Device().synchronize()
    row = {"case": key, "op": case["op"], **case["sizes"],
           "entry": case["launches"][0]["entry"],
           "check": _check(case, launches, arrays) if case["check"] else ""}
    probe = min(time_cupy(all_launches, 1, 3))
    flush_buf = cupy.empty(FLUSH_BYTES, dtype=cupy.uint8)
    spin = gpu_spin()
    for flushed in (True, False):
        reps = reps_for(probe, budget_ms=150.0, low=5, high=50)
        times = time_cupy(all_launches, 3, reps, (lambda: flush_buf.fill(1)) if flushed else spin)
        row.update({f"{k}_{'flushed' if flushed else 'warm'}": v
                    for k, v in summarize_ms(times).items()})
        row[f"reps_{'flushed' if flushed else 'warm'}"] = reps
    for name in ("sim_kernel_us", "sim_time_us", "sim_fidelity"):
        row[name] = case.get(name, "")
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export", type=Path)
    p.add_argument("out", type=Path, nargs="?")
    p.add_argument("--case", help="run this case in this process and print its row as JSON")
    p.add_argument("--timeout-s", type=float, default=60.0)
    p.add_argument("--only", help="comma-separated case keys to run (default: all)")
    a = p.parse_args(argv)
    if a.case:
        print("ROW " + json.dumps(run_case(a.export, a.case)), flush=True)
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    spec = json.loads((a.export / "cases.json").read_text())
    method = ("template_export.py's cubins (ptxas -arch=sm_90a) loaded with cuModuleLoadData; "
              "tensor maps re-encoded with cuTensorMapEncodeTiled (L2 promotion 128B, no OOB "
              "NaN fill); inputs random normal (bf16 truncated from f32) or the exported data; "
              "CUDA events around each launch (all of a case's launches), warm-up 3, reps "
              "sized to ~150 ms (5-50); flushed: 256 MiB written before each launch, outside "
              "the events; warm: a 20 us spin kernel before each instead. sim_kernel_us: the "
              f"simulator on {spec['preset']} (time_us less launch.kernel_overhead_us = "
              f"{spec['kernel_overhead_us']}), from cases.json.")
    with ClockSampler() as sampler:
        table = Table(a.out, "template_ops", method, environment(), sampler)
        only = set(a.only.split(",")) if a.only else None
        for case in spec["cases"]:
            if only and case["case"] not in only:
                continue
            t0 = time.monotonic()
            try:
                done = subprocess.run(
                    [sys.executable, __file__, str(a.export), "--case", case["case"]],
                    capture_output=True, text=True, timeout=a.timeout_s)
            except subprocess.TimeoutExpired as exc:
                table.fail(case["case"], exc)
                continue
            rows = [ln[4:] for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
            if done.returncode or not rows:
                text = (done.stderr or done.stdout).splitlines() or ["no output"]
                errors = [ln for ln in text if "Error" in ln] or text
                table.fail(case["case"], RuntimeError(errors[-1].strip()[-280:]))
                continue
            table.add({**json.loads(rows[0]), "wall_s": round(time.monotonic() - t0, 1)})
        table.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
