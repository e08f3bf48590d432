"""Kineto (torch.profiler) Chrome traces of one LLaMA-3-8B-shaped decoder layer.

Random bf16 weights, eager PyTorch: RMSNorm, fused QKV projection (4096 -> 6144: 32 query
heads, 8 KV heads of 128), rotary embedding, GQA attention (`scaled_dot_product_attention`
with `enable_gqa`), output projection, residual add, RMSNorm, fused gate/up projection
(4096 -> 2 x 14336), SiLU x up, down projection, residual add.

* prefill: 1 sequence of `--prefill-tokens` (4096) tokens, causal attention.
* decode: `--decode-batch` (64) sequences, one new token each, attending to a KV cache of
  `--kv-len` (2048) cached tokens plus the new one; the new K/V are written into the cache.

Each phase: 3 warm-up runs, then 2 profiled runs (CPU + CUDA activities, shapes recorded),
each under `record_function("prefill" | "decode")`; written as
`llama3_8b_layer_<phase>.json`.

    python benchmarks/hardware/layer_trace.py --out DIR [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hw_common import ClockSampler, environment  # noqa: E402

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 4096, 32, 8, 128, 14336
ROPE_THETA = 500000.0


class Layer:
    def __init__(self, torch, seed: int = 0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        bf = torch.bfloat16

        def w(*shape):
            return (torch.randn(*shape, device="cuda", generator=g) / shape[-1] ** 0.5).to(bf)

        self.torch = torch
        self.norm1 = torch.ones(HIDDEN, device="cuda", dtype=bf)
        self.norm2 = torch.ones(HIDDEN, device="cuda", dtype=bf)
        self.wqkv = w((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN)
        self.wo = w(HIDDEN, HEADS * HEAD_DIM)
        self.wgu = w(2 * FFN, HIDDEN)
        self.wd = w(HIDDEN, FFN)

    def rope(self, x, pos):
        torch = self.torch
        inv = ROPE_THETA ** (-torch.arange(0, HEAD_DIM, 2, device="cuda") / HEAD_DIM)
        ang = pos[:, None].float() * inv[None, :]
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]   # [T, 1, D/2]
        x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return out.flatten(-2).to(x.dtype)

    def forward(self, x, pos, batch: int, kv_cache=None, cache_len: int = 0):
        """x: [batch * seq, HIDDEN]; pos: [batch * seq] positions."""
        F = self.torch.nn.functional
        tokens = x.shape[0]
        seq = tokens // batch
        h = F.rms_norm(x, (HIDDEN,), self.norm1, 1e-5)
        qkv = F.linear(h, self.wqkv)
        q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
        q = self.rope(q.view(tokens, HEADS, HEAD_DIM), pos)
        k = self.rope(k.reshape(tokens, KV_HEADS, HEAD_DIM), pos)
        v = v.reshape(tokens, KV_HEADS, HEAD_DIM)
        q = q.view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2)
        k = k.view(batch, seq, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = v.view(batch, seq, KV_HEADS, HEAD_DIM).transpose(1, 2)
        if kv_cache is not None:
            kc, vc = kv_cache
            kc[:, :, cache_len:cache_len + seq].copy_(k)
            vc[:, :, cache_len:cache_len + seq].copy_(v)
            k, v = kc[:, :, :cache_len + seq], vc[:, :, :cache_len + seq]
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=kv_cache is None,
                                              enable_gqa=True)
        attn = attn.transpose(1, 2).reshape(tokens, HEADS * HEAD_DIM)
        x = x + F.linear(attn, self.wo)
        h = F.rms_norm(x, (HIDDEN,), self.norm2, 1e-5)
        gate, up = F.linear(h, self.wgu).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, self.wd)


def profile_phase(torch, layer, phase: str, run, out: Path, env: dict, setup: dict,
                  clocks: ClockSampler) -> Path:
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with clocks.window() as w, profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                       record_shapes=True) as prof:
        for _ in range(2):
            with record_function(phase):
                run()
        torch.cuda.synchronize()
    path = out / f"llama3_8b_layer_{phase}.json"
    prof.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    doc["ptxsim_harness"] = {**env, **setup, "phase": phase, "profiled_runs": 2,
                             "warmup_runs": 3, "clocks_seen": w.stats,
                             "clocks_max": {"sm_mhz": clocks.max_sm_mhz,
                                            "mem_mhz": clocks.max_mem_mhz},
                             "method": "torch.profiler CPU+CUDA, record_shapes=True, eager"}
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("hw_out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--prefill-tokens", type=int, default=4096)
    ap.add_argument("--decode-batch", type=int, default=64)
    ap.add_argument("--kv-len", type=int, default=2048)
    args = ap.parse_args(argv)
    import torch

    if args.quick:
        args.prefill_tokens, args.decode_batch, args.kv_len = 512, 8, 256
    args.out.mkdir(parents=True, exist_ok=True)
    env = environment()
    layer = Layer(torch)
    bf = torch.bfloat16
    with torch.no_grad(), ClockSampler() as clocks:
        t = args.prefill_tokens
        x = torch.randn(t, HIDDEN, device="cuda", dtype=bf)
        pos = torch.arange(t, device="cuda")
        p = profile_phase(torch, layer, "prefill", lambda: layer.forward(x, pos, 1), args.out,
                          env, {"model": "llama3-8b", "tokens": t, "batch": 1}, clocks)
        print("wrote", p, p.stat().st_size, flush=True)

        b, kv = args.decode_batch, args.kv_len
        xd = torch.randn(b, HIDDEN, device="cuda", dtype=bf)
        posd = torch.full((b,), kv, device="cuda")
        cache = tuple(torch.randn(b, KV_HEADS, kv + 1, HEAD_DIM, device="cuda", dtype=bf)
                      for _ in range(2))
        p = profile_phase(torch, layer, "decode",
                          lambda: layer.forward(xd, posd, b, cache, kv), args.out, env,
                          {"model": "llama3-8b", "batch": b, "kv_len": kv, "new_tokens": 1},
                          clocks)
        print("wrote", p, p.stat().st_size, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
