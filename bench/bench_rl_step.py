"""The RL trainer step on one device (ms per step, the jitted RL loss + optimizer update), side by
side with another git revision of this repo in alternating subprocesses (the machine is shared):

    python bench/bench_rl_step.py --against 5002604 [--shapes tiny:32x16,tiny4:16x512] [--rounds 3]
    python bench/bench_rl_step.py --tiny        # smoke: this tree, tiny 4 x 16, one round

A shape `MODEL:ROWSxTOKENS` trains MODEL (`tiny`, or bench_rl_coding's `tiny4` on top of it:
model/presets.py) on collated batches of ROWS episodes of TOKENS tokens (3/4 of them policy
tokens, replayed routing, random rewards), float32, lr 1e-5. The step is whatever the revision's
RL trainer jits: `rl.learning.loop.state_and_step` (the one trainer, train/trainer.py) where it
exists, else an older revision's own rl.trainer.jit_rl_step (since removed). Each round times 10
steps after 2 warm ones.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MEASURE = r"""
import dataclasses, sys, time
sys.path.insert(0, {root!r})
import jax, jax.numpy as jnp, ml_collections, numpy as np
from model import init_params, presets
try:  # where collate lives: rl/learning/batch.py since the rl/ layers, rl/batch.py before
    from rl.learning import batch as rb
except ImportError:
    from rl import batch as rb
overrides, rows, seq = {overrides!r}, {rows}, {seq}
cfg = dataclasses.replace(presets.get("tiny", **overrides), max_position_embeddings=max(seq, 512))
params = jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))
try:  # the one trainer
    from configs import rl as rl_config
    from rl.learning.loop import state_and_step
    c = rl_config.get_config()
    c.model_overrides = dict(overrides, max_position_embeddings=max(seq, 512))
    c.rl.update(max_tokens=seq, group_size=4, groups_per_batch=rows // 4)
    c.train.lr, c.trainer_devices = 1e-5, 1
    state, step = state_and_step(c, params)
except ImportError:  # a revision with RL's own trainer
    from rl.trainer import init_state, jit_rl_step
    rl = ml_collections.ConfigDict(dict(max_tokens=seq, temperature=1.0, tis_c=2.0, ppo_clip=0.0,
        kl_beta=0.0, kl_mode="k2", valid_vocab=0, router_replay=True))
    state, step = init_state(jax.tree.map(jnp.asarray, params), lr=1e-5, seed=0), jit_rl_step(cfg, rl)
rng = np.random.default_rng(0)
def records():
    n = seq + 1
    return [dict(tokens=rng.integers(1, cfg.vocab_size, size=n),
                 mask=np.r_[np.zeros(n // 4), np.ones(n - n // 4)],
                 logprobs=np.r_[np.zeros(n // 4), np.full(n - n // 4, -np.log(cfg.vocab_size))],
                 experts=rng.integers(0, cfg.n_routed_experts,
                                      size=(cfg.num_moe_layers, n, cfg.num_experts_per_tok)),
                 reward=float(rng.random()), group_id=f"g{{i // 4}}") for i in range(rows)]
batches = [{{k: jnp.asarray(v) for k, v in rb.collate(records(), seq_len=seq, rows=rows,
            n_moe_layers=cfg.num_moe_layers, k=cfg.num_experts_per_tok).items()}} for _ in range(3)]
for i in range(2):
    state, m = step(state, batches[i % 3])
jax.block_until_ready(state)
t0 = time.perf_counter()
for i in range(10):
    state, m = step(state, batches[i % 3])
jax.block_until_ready(state)
print(f"ms per step: {{(time.perf_counter() - t0) / 10 * 1e3:.2f}}", flush=True)
"""  # noqa: E501


def _overrides(model: str) -> dict:
    """The preset as overrides of `tiny` (the measured revision may predate the preset)."""
    sys.path[:0] = [ROOT]
    from model import presets

    return presets.overrides(model)


def measure(root: str, model: str, rows: int, seq: int) -> float:
    code = MEASURE.format(root=root, overrides=_overrides(model), rows=rows, seq=seq)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
        env=dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1"),
    )
    if out.returncode:
        raise RuntimeError(f"measurement in {root} failed:\n{out.stderr[-2000:]}")
    return float(re.search(r"ms per step: ([\d.]+)", out.stdout).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default="", help="git revision to measure side by side")
    ap.add_argument("--shapes", default="tiny:32x16,tiny4:16x512")
    ap.add_argument("--rounds", type=int, default=3)
    sys.path.insert(0, ROOT)
    from bench.common import parse_tiny

    args = parse_tiny(ap, dict(shapes="tiny:4x16", rounds=1))
    trees = {"this tree": ROOT}
    tmp = ""
    if args.against:
        tmp = tempfile.mkdtemp(prefix="bench_rl_step_")
        subprocess.run(
            ["git", "-C", ROOT, "worktree", "add", "--detach", tmp, args.against],
            check=True,
            capture_output=True,
        )
        trees = {args.against: tmp, "this tree": ROOT}
    shapes = []
    for s in args.shapes.split(","):
        model, size = s.split(":")
        rows, seq = (int(x) for x in size.split("x"))
        shapes.append((model, rows, seq))
    runs: dict = {}
    try:
        for r in range(args.rounds):
            for name, root in trees.items():  # alternating: load drifts hit both alike
                for model, rows, seq in shapes:
                    ms = measure(root, model, rows, seq)
                    runs.setdefault((name, model, rows, seq), []).append(ms)
                    print(
                        f"round {r} {name}: {model} {rows}x{seq}: {ms:.2f} ms/step "
                        f"(load {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
    finally:
        if tmp:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tmp], check=False)
    for model, rows, seq in shapes:
        best = {n: min(runs[(n, model, rows, seq)]) for n in trees}
        line = ", ".join(f"{n} {v:.2f} ms" for n, v in best.items())
        if args.against:
            ratio = best["this tree"] / best[args.against]
            line += f": this tree / {args.against} = {ratio:.2f} of the time"
        print(f"{model} {rows}x{seq} (best of {args.rounds}): {line}")


if __name__ == "__main__":
    main()
