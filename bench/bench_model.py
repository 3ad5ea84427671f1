"""Model benchmarks, side by side in one process (this machine is shared and noisy):

    python bench/bench_model.py                      # small preset, CPU
    python bench/bench_model.py --preset small --batch 8 --seq 256 --steps 3

1. f32 matmul peak (the MFU denominator).
2. A full training step (forward + backward + AdamW) of the preset: tokens/s and MFU with FLOPs/token
   counted analytically (model.flops_per_token: MLA, active + shared experts, router, head, MTP, attention).
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

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from bench.common import matmul_peak_flops  # noqa: E402
from model import Transformer, flops_per_token, init_params, presets, trainable_mask  # noqa: E402
from model.decode import cache_bytes_per_token  # noqa: E402


def make_step(cfg):
    """Minimal next-token + MTP cross-entropy AdamW step (the real one lives in train/)."""
    opt = optax.masked(optax.adamw(1e-3), trainable_mask)

    def loss_fn(params, tokens):
        out = Transformer(cfg).apply({"params": params}, tokens)
        ce = optax.softmax_cross_entropy_with_integer_labels(
            out.logits[:, :-1], tokens[:, 1:]
        ).mean()
        if out.mtp_logits is not None:
            ce += (
                0.3
                * optax.softmax_cross_entropy_with_integer_labels(
                    out.mtp_logits[0][:, :-2], tokens[:, 2:]
                ).mean()
            )
        return ce

    def step(params, opt_state, tokens):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return opt, step


def bench_train_step(cfg, batch, seq, steps, peak):
    params = init_params(cfg, jax.random.PRNGKey(0))
    opt, step = make_step(cfg)
    opt_state = opt.init(params)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (batch, seq), 0, cfg.vocab_size)
    jitted = jax.jit(step, donate_argnums=(0, 1))
    params, opt_state, loss = jitted(params, opt_state, tokens)  # compile + warm up
    jax.block_until_ready(loss)
    start = time.perf_counter()
    for _ in range(steps):
        params, opt_state, loss = jitted(params, opt_state, tokens)
    jax.block_until_ready(loss)
    dt = (time.perf_counter() - start) / steps
    tok_s = batch * seq / dt
    mfu = tok_s * flops_per_token(cfg, seq) / peak
    return dt, tok_s, mfu


def compile_seconds(cfg, batch, seq):
    _, step = make_step(cfg)
    params = jax.eval_shape(lambda: init_params(cfg, jax.random.PRNGKey(0)))
    opt_state = jax.eval_shape(optax.masked(optax.adamw(1e-3), trainable_mask).init, params)
    tokens = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    start = time.perf_counter()
    jax.jit(step).lower(params, opt_state, tokens).compile()
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--impls", default="blocked,ragged")
    ap.add_argument("--skip_compile", action="store_true")
    args = ap.parse_args()
    base = presets.get(args.preset)
    peak = matmul_peak_flops()
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
        sizes = cache_bytes_per_token(presets.get(name))
        print(
            f"  {name}: latent {sizes['latent'] / 1024:.1f} KiB vs uncompressed {sizes['uncompressed'] / 1024:.1f} KiB "
            f"({sizes['uncompressed'] / sizes['latent']:.1f}x smaller)"
        )


if __name__ == "__main__":
    main()
