"""The cost of the context axis on CPU: train-step time with context = 1, 2 and 4 on the same
simulated device count (the rest of the devices on 'data'), same global batch and row length.

    python bench/bench_context.py                       # small preset, 4 devices, 4 x 2048 tokens
    python bench/bench_context.py --model=tiny --seq_len=512 --devices=4 --rounds=3
    python bench/bench_context.py --tiny   # smoke: tiny, 2 devices, 2 x 64 tokens, context 2

The step is train/'s own (trainer.build + jit_train_step: AdamW, the LM loss without MTP, which
context parallelism refuses; blocked attention, the CPU's 'auto'). Each step is timed in turn,
best of --rounds, so load on a shared machine hits the variants alike. What it shows on CPU: the
all-gather of the MLA latent per layer and, with context > 1, the blocked kernel's scores of every
local query against the whole row (it cannot skip the zig-zag chunks' upper triangle, the fused
kernel does), against smaller per-device matmuls. Prints a markdown table for bench/RESULTS.md.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="small")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq_len", type=int, default=2048)
    ap.add_argument("--contexts", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=5)
    sys.path.insert(0, ROOT)
    from bench.common import parse_tiny  # JAX is not imported yet: XLA_FLAGS below still counts

    tiny = dict(model="tiny", devices=2, batch=2, seq_len=64, contexts="2", rounds=1)
    args = parse_tiny(ap, tiny)
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    import jax
    import jax.numpy as jnp

    from bench.common import interleaved_min_times, synthetic_batch
    from configs import default
    from train import sharding as shd
    from train import trainer

    steps, inputs = {}, {}
    for cp in (int(x) for x in args.contexts.split(",")):
        c = default.get_config()
        c.model = args.model
        c.mesh.update(data=-1, fsdp=1, expert=1, tensor=1, context=cp)
        c.train.update(batch_size=args.batch, seq_len=args.seq_len, mtp_mode="none")
        c.model_overrides = dict(max_position_embeddings=max(args.seq_len, 512))
        run = trainer.build(c)
        sh = run.state_shardings()
        state = trainer.init_state(run.init_fn, run.tx, sh, run.mesh, run.rules, seed=0)
        step = trainer.jit_train_step(run.loss_fn, sh, run.mesh, run.rules)
        host = synthetic_batch(args.batch, args.seq_len, run.cfg.vocab_size)
        batch = shd.global_batch(host, run.mesh)
        # The step donates its state: each call steps a fresh copy (a copy is cheap next to a
        # step, and the same bytes for every variant).
        fn = lambda s, b, step=step: step(jax.tree.map(jnp.copy, s), b)[1]["loss"]
        name = f"context {cp} ({run.mesh_sizes})"
        steps[name], inputs[name] = fn, (state, batch)
    best = interleaved_min_times(steps, inputs, rounds=args.rounds)
    load = os.getloadavg()[0]
    print(f"| {args.model}, {args.devices} CPU devices, {args.batch} x {args.seq_len} tokens "
          f"(load {load:.1f}) | step s (best of {args.rounds}) | vs context 1 |")  # fmt: skip
    print("|---|---|---|")
    base = next(iter(best.values()))
    for name, s in best.items():
        print(f"| {name} | {s:.3f} | {s / base:.2f}x |")


if __name__ == "__main__":
    main()
