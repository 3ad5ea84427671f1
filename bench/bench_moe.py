"""MoE dispatch FLOP rate vs a dense matmul of the same active FLOPs, forward+backward.

    python bench/bench_moe.py [--tokens 4096 --experts 16 --top_k 2 --d 512 --f 512]
    python bench/bench_moe.py --tiny     # seconds: the smoke scale tests/test_bench_moe.py runs

Every dispatch computes, per token, top_k SwiGLU experts: 3 matmuls of D x F, i.e. 6·D·F·k FLOPs
forward and 2x that backward. The dense baseline runs one SwiGLU FFN of width k·F over the same
tokens (identical FLOPs, no routing). Reported: each implementation's useful FLOP rate and its ratio
to the dense rate, measured side by side in one process, plus the f32 matmul peak (not under
--tiny). Each implementation's loss is checked against the blocked dispatch's (the CPU reference):
the `max |loss - blocked|` line; the bench fails when one is off by more than a float32 sum allows.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train.malloc_env import reexec_with_hugepages  # noqa: E402

reexec_with_hugepages()  # the default launch's allocator setting (main.py applies it too)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bench.common import interleaved_min_times, matmul_peak_flops  # noqa: E402
from model import presets  # noqa: E402
from model.moe import route, select_dispatch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--top_k", type=int, default=2)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--f", type=int, default=512)
    ap.add_argument("--impls", default="blocked,ragged,dense")
    ap.add_argument("--block", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tiny", action="store_true", help="64 tokens, 4 experts, d=f=32, 1 round")
    args = ap.parse_args()
    if args.tiny:
        args.tokens, args.experts, args.d, args.f, args.rounds = 64, 4, 32, 32, 1
    n, e, k, d, f = args.tokens, args.experts, args.top_k, args.d, args.f
    cfg = presets.get(
        "tiny",
        hidden_size=d,
        moe_intermediate_size=f,
        n_routed_experts=e,
        num_experts_per_tok=k,
        n_group=1,
        topk_group=1,
        moe_block_size=args.block,
    )
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    x = jax.random.normal(keys[0], (n, d))
    kernel = jax.random.normal(keys[1], (d, e)) * 0.05
    w = [
        jax.random.normal(kk, s) * 0.02
        for kk, s in zip(keys[2:5], [(e, d, f), (e, d, f), (e, f, d)])
    ]
    dense_w = [
        jax.random.normal(kk, s) * 0.02
        for kk, s in zip(keys[2:5], [(d, k * f), (d, k * f), (k * f, d)])
    ]
    flops = 3 * (6 * d * f * k * n)  # forward + backward (2x forward)

    def dense_loss(x, wg, wu, wd):
        return jnp.sum((jax.nn.silu(x @ wg) * (x @ wu)) @ wd)

    def moe_loss(impl):
        dispatch = select_dispatch(cfg.replace(moe_impl=impl))  # model/kernels/choice.py resolves

        def loss(x, wg, wu, wd):
            return jnp.sum(dispatch(x, route(x, kernel, jnp.zeros((e,)), cfg), wg, wu, wd))

        return loss

    impls = args.impls.split(",")
    losses = {impl: float(jax.jit(moe_loss(impl))(x, *w)) for impl in impls}
    ref = float(jax.jit(moe_loss("blocked"))(x, *w))
    off = max(abs(v - ref) for v in losses.values())
    print(f"max |loss - blocked| over {','.join(impls)}: {off:.3g} (blocked loss {ref:.4g})")
    if off > 1e-3 * max(1.0, abs(ref)):
        raise SystemExit(f"an implementation's loss is off the blocked reference: {losses}")
    peak = float("nan") if args.tiny else matmul_peak_flops()
    grad = lambda fn: jax.jit(jax.grad(fn, argnums=(0, 1, 2, 3)))
    fns = {"dense matmul FFN": grad(dense_loss)}
    args_of = {"dense matmul FFN": (x, *dense_w)}
    for impl in impls:
        fns[impl], args_of[impl] = grad(moe_loss(impl)), (x, *w)
    best = interleaved_min_times(fns, args_of, rounds=args.rounds)
    dense_t = best["dense matmul FFN"]
    print(f"matmul peak (f32, 2048^3): {peak / 1e9:.1f} GFLOP/s")
    print(
        f"tokens={n} experts={e} top_k={k} d={d} f={f}  fwd+bwd useful FLOPs={flops / 1e9:.2f} G  "
        f"(best of {args.rounds} interleaved rounds)"
    )
    for name, t in best.items():
        print(
            f"{name:>18}: {t * 1e3:8.1f} ms  {flops / t / 1e9:7.1f} GFLOP/s  "
            f"({dense_t / t:.2f} of dense, {flops / t / peak:.2f} of peak)"
        )


if __name__ == "__main__":
    main()
