"""Weight sync: bytes per delta vs a full snapshot, publish and fetch seconds, for bfloat16 and
float32 samplers, on real RL updates (train_step with the RL loss) of a preset.

    python bench/bench_weight_sync.py [--preset small] [--steps 5] [--lrs 1e-5,1e-4]

Each step: one RL train_step on a batch of synthetic episodes (random tokens, random rewards, the
sampler logprob set to the uniform one), then publish to a bf16 and an f32 store (interleaved, same
params) and fetch the newest version with a reader that holds the previous one (what a sampler
does). Prints a markdown table and the load average.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from configs import rl as rl_config
from rl import batch as rb
from rl.loop import state_and_step
from rl.weight_store import WeightReader, WeightWriter


def _records(rng, cfg, rows, seq):
    recs = []
    for i in range(rows):
        n = seq + 1
        recs.append(
            dict(
                tokens=rng.integers(1, cfg.vocab_size, size=n),
                mask=np.r_[np.zeros(n // 4), np.ones(n - n // 4)],
                logprobs=np.full(n, -np.log(cfg.vocab_size)),
                experts=rng.integers(
                    0, cfg.n_routed_experts, size=(cfg.num_moe_layers, n, cfg.num_experts_per_tok)
                ),
                reward=float(rng.random()),
                group_id=f"g{i // 4}",
            )
        )
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lrs", default="1e-5,1e-4")
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()
    from model import init_params, presets

    cfg = presets.get(args.preset)
    c = rl_config.get_config()
    c.model = args.preset
    c.rl.update(max_tokens=args.seq, group_size=4, groups_per_batch=args.rows // 4)
    c.trainer_devices = 1
    params0 = jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))
    print(f"preset={args.preset} params={sum(x.size for x in jax.tree.leaves(params0)):,}")
    print(
        "| lr | sampler dtype | version | delta bytes | full bytes | delta/full | changed elems "
        "| publish s | fetch s | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for lr in [float(x) for x in args.lrs.split(",")]:
        c.train.lr = lr
        state, step = state_and_step(c, params0)
        rng = np.random.default_rng(0)
        root = tempfile.mkdtemp()
        stores = {}
        for dt in ("bfloat16", "float32"):
            w = WeightWriter(os.path.join(root, dt), dtype=dt, full_every=1000)
            w.publish(params0, 0)
            r = WeightReader(os.path.join(root, dt))
            r.fetch()
            stores[dt] = (w, r)
        for v in range(1, args.steps + 1):
            b = rb.collate(
                _records(rng, cfg, args.rows, args.seq),
                seq_len=args.seq,
                rows=args.rows,
                n_moe_layers=cfg.num_moe_layers,
                k=cfg.num_experts_per_tok,
            )
            state, _ = step(state, {k: jnp.asarray(x) for k, x in b.items()})
            host = jax.device_get(state.params)
            for dt, (w, r) in stores.items():
                st = w.publish(host, v)
                t0 = time.perf_counter()
                _, got = r.fetch()
                fetch_s = time.perf_counter() - t0
                assert got == v
                nb, fb = st["bytes"], st["full_bytes"]
                print(
                    f"| {lr:g} | {dt} | {v} | {nb:,} | {fb:,} | {nb / fb:.4f} | "
                    f"{st['changed_frac']:.4f} | {st['seconds']:.2f} | {fetch_s:.2f} | "
                    f"{os.getloadavg()[0]:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
