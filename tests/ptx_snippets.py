"""Run one PTX instruction (or a few) over many lanes through `isa.run_kernel`.

`run_instruction(body, outs, *inputs)` wraps `body` in a tiny kernel: thread `i` loads
element `i` of every input array into a register, executes `body`, and stores its
destination registers to element `i` of the output arrays. Placeholders in `body`:
`{d}` (= `{d0}`), `{d1}`, ... for destinations and `{a}`, `{b}`, `{c}`, `{e}`, `{f}` for
inputs. The register kind follows the element size of the numpy dtype: `bool` is a
predicate, 1- and 2-byte elements sit in `.b16` registers, 4-byte in `.b32`, 8-byte in
`.b64` (PTX lets any instruction type use a bit-size register of its width). Inputs
are padded to whole blocks of 256 threads; compiled kernels are cached by text.
"""

from __future__ import annotations

import functools

import numpy as np

import isa

BLOCK_THREADS = 256
INPUT_NAMES = ("a", "b", "c", "e", "f")


def _reg_kind(dtype: np.dtype) -> tuple[str, str]:
    """(PTX register type, name prefix) holding an element of `dtype`."""
    if dtype == np.bool_:
        return "pred", "%p"
    return {1: ("b16", "%h"), 2: ("b16", "%h"), 4: ("b32", "%r"), 8: ("b64", "%rd")}[
        dtype.itemsize]


def _mem_type(dtype: np.dtype) -> str:
    return "u8" if dtype == np.bool_ else f"b{dtype.itemsize * 8}"


def _kernel_text(body: str, out_dtypes, in_dtypes) -> str:
    arrays = list(out_dtypes) + list(in_dtypes)
    params = ",\n".join(f"    .param .u64 snip_param_{k}" for k in range(len(arrays)))
    names, counts = {}, {"%p": 0, "%h": 0, "%r": 0, "%rd": 0}
    lines = ["mov.u32 %ix0, %tid.x;", "mov.u32 %ix1, %ctaid.x;", "mov.u32 %ix2, %ntid.x;",
             "mad.lo.s32 %ix3, %ix1, %ix2, %ix0;", "cvt.u64.u32 %ad0, %ix3;"]
    stores = []
    for k, dt in enumerate(arrays):
        is_out = k < len(out_dtypes)
        label = f"d{k}" if is_out else INPUT_NAMES[k - len(out_dtypes)]
        _, prefix = _reg_kind(dt)
        reg = f"{prefix}{counts[prefix]}"
        counts[prefix] += 1
        names[label] = reg
        lines += [f"ld.param.u64 %ad{2 * k + 1}, [snip_param_{k}];",
                  f"mad.lo.u64 %ad{2 * k + 2}, %ad0, {max(dt.itemsize, 1)}, %ad{2 * k + 1};"]
        addr = f"[%ad{2 * k + 2}]"
        if is_out:
            if dt == np.bool_:
                stores += [f"selp.b16 %sx0, 1, 0, {reg};", f"st.global.u8 {addr}, %sx0;"]
            else:
                stores.append(f"st.global.{_mem_type(dt)} {addr}, {reg};")
        elif dt == np.bool_:
            lines += [f"ld.global.u8 %sx0, {addr};", f"setp.ne.b16 {reg}, %sx0, 0;"]
        else:
            lines.append(f"ld.global.{_mem_type(dt)} {reg}, {addr};")
    names["d"] = names["d0"]
    decls = [f".reg .{ty} {p}<{max(counts[p], 1)}>;" for ty, p in
             (("pred", "%p"), ("b16", "%h"), ("b32", "%r"), ("b64", "%rd"))]
    decls += [".reg .b32 %ix<4>;", f".reg .b64 %ad<{2 * len(arrays) + 1}>;",
              ".reg .b16 %sx<1>;"]
    code = lines + [body.format(**names)] + stores + ["ret;"]
    return (".version 8.0\n.target sm_90\n.address_size 64\n\n"
            f".visible .entry snip(\n{params}\n)\n{{\n"
            + "\n".join("    " + s for s in decls + code) + "\n}\n")


@functools.lru_cache(maxsize=512)
def _compiled(text: str):
    return isa.compile_kernel(text, "snip", file="<snippet>")


def run_instruction(body: str, outs, *inputs):
    """Run `body` once per element of the inputs; returns the output array(s).

    `outs` is a dtype, or a tuple of dtypes for several destinations.
    """
    single = not isinstance(outs, (tuple, list))
    out_dtypes = [np.dtype(outs)] if single else [np.dtype(o) for o in outs]
    arrays = [np.ascontiguousarray(x) for x in inputs]
    n = arrays[0].size if arrays else BLOCK_THREADS
    padded = -(-n // BLOCK_THREADS) * BLOCK_THREADS

    def pad(x: np.ndarray) -> np.ndarray:
        raw = x.reshape(-1).astype(np.uint8) if x.dtype == np.bool_ else x.reshape(-1)
        full = np.zeros(padded, dtype=raw.dtype)
        full[:n] = raw
        return full

    mem_in = [pad(x) for x in arrays]
    mem_out = [np.zeros(padded, dtype=np.uint8 if dt == np.bool_ else dt) for dt in out_dtypes]
    text = _kernel_text(body, out_dtypes, [x.dtype for x in arrays])
    isa.run_kernel(_compiled(text), "snip", padded // BLOCK_THREADS, BLOCK_THREADS,
                   mem_out + mem_in)
    res = [o[:n].astype(bool) if dt == np.bool_ else o[:n]
           for o, dt in zip(mem_out, out_dtypes, strict=True)]
    return res[0] if single else tuple(res)
