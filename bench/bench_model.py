"""Model benchmarks, side by side in one process (this machine is shared and noisy):

    python bench/bench_model.py                      # small preset, CPU
    python bench/bench_model.py --preset small --batch 8 --seq 256 --steps 3
    python bench/bench_model.py --tiny       # smoke: tiny preset, 2 x 32 tokens, 1 step, no depth

1. f32 matmul peak (the MFU denominator).
2. train/'s jitted training step (forward + backward + AdamW + router-bias update, LM + MTP loss)
   of the preset on one device: tokens/s and MFU with FLOPs/token counted analytically
   (model.flops_per_token: MLA, active + shared experts, router, head, MTP, attention).
   One row per MoE dispatch implementation.
3. Compile time of the training step at 4 vs 32 layers (nn.scan keeps it nearly flat).
4. Latent-cache bytes/token vs an uncompressed multi-head cache for kimi_k2 and deepseek_v3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train.malloc_env import reexec_with_hugepages  # noqa: E402

reexec_with_hugepages()  # the default launch's allocator setting (main.py applies it too)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bench.common import (  # noqa: E402
    matmul_peak_flops,
    parse_tiny,
    train_setup,
    train_step_seconds,
)
from model import flops_per_token, presets  # noqa: E402
from model.decode import cache_bytes_per_token, uncompressed_cache_bytes_per_token  # noqa: E402
from model.sharding import DEFAULT_RULES  # noqa: E402
from train import trainer  # noqa: E402


def bench_train_step(cfg, batch, seq, steps, peak):
    """train/'s jitted step (AdamW, LM + MTP loss, router-bias update): seconds, tokens/s, MFU."""
    dt = train_step_seconds(cfg, batch, seq, steps, mesh_sizes={"data": 1})
    tok_s = batch * seq / dt
    return dt, tok_s, tok_s * flops_per_token(cfg, seq) / peak


def compile_seconds(cfg, batch, seq):
    """Seconds to compile train/'s jitted step from shapes alone."""
    abstract, step, mesh = train_setup(cfg, {"data": 1}, allocate=False)
    tokens = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    batch_spec = {k: tokens for k in ("tokens", "targets", "segment_ids", "positions")}
    batch_spec["loss_mask"] = jax.ShapeDtypeStruct((batch, seq), jnp.float32)
    start = time.perf_counter()
    with trainer.mesh_context(mesh, DEFAULT_RULES):
        step.jitted.lower(abstract, batch_spec).compile()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--impls", default="blocked,ragged")
    ap.add_argument("--skip_compile", action="store_true")
    ap.add_argument("--peak_n", type=int, default=2048, help="matmul size of the peak")
    tiny = dict(preset="tiny", batch=2, seq=32, steps=1, impls="blocked", skip_compile=True)
    args = parse_tiny(ap, dict(tiny, peak_n=256))
    base = presets.get(args.preset)
    peak = matmul_peak_flops(args.peak_n)
    print(f"devices: {jax.devices()}")
    print(f"f32 matmul peak: {peak / 1e9:.1f} GFLOP/s")
    print(
        f"\n## training step, preset={args.preset} batch={args.batch} seq={args.seq} "
        f"({flops_per_token(base, args.seq) / 1e6:.1f} MFLOP/token analytic)"
    )
    for impl in args.impls.split(","):
        dt, tok_s, mfu = bench_train_step(
            base.replace(moe_impl=impl), args.batch, args.seq, args.steps, peak
        )
        print(f"  moe_impl={impl:8s} step {dt * 1e3:8.1f} ms  {tok_s:8.0f} tokens/s  MFU {mfu:.1%}")
    if not args.skip_compile:
        print("\n## training-step compile time vs depth (nn.scan)")
        for layers in (4, 32):
            cfg = base.replace(num_hidden_layers=layers)
            print(f"  {layers:2d} layers: {compile_seconds(cfg, args.batch, args.seq):.1f} s")
    print("\n## KV cache bytes/token (bf16, all layers)")
    for name in ("kimi_k2", "deepseek_v3"):
        c = presets.get(name)
        latent = cache_bytes_per_token(c, "bfloat16", positions=False)
        full = uncompressed_cache_bytes_per_token(c, "bfloat16")
        print(
            f"  {name}: latent {latent / 1024:.1f} KiB vs uncompressed {full / 1024:.1f} KiB "
            f"({full / latent:.1f}x smaller)"
        )


if __name__ == "__main__":
    main()
