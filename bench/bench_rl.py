"""RL loop benchmark on the toy 'pattern' task: reward curve (PNG) and a table, plus held-out
greedy pass@1 and best-of-4 (temperature 1) on tasks outside the training pool, before and after.

    python bench/bench_rl.py [--preset tiny] [--pool 240] [--samplers 1] [--out bench/rl_curve.png]
    python bench/bench_rl.py --tiny     # smoke: pool 8 (2 steps), 4 held-out tasks, PNG in /tmp

A held-out task 'passes' when every completion token is in the target set (reward 1.0).
The coding-task benchmark (SFT warm start on one family's environment traces, RL on other seeds,
held-out pass@1 / best-of-4) is bench/bench_rl_coding.py. Prints the markdown table and the load
average.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np

from bench.common import parse_tiny
from configs import rl as rl_config
from model import generate
from rl.learning import loop
from rl.sampling import sampler_process
from train import trainer


def heldout(cfg, params, rl, n_tasks):
    """-> (pass@1 greedy, best-of-4 at temperature 1) on tasks numbered past the pool, both by
    rl.episodes.episode_metrics.episode_metrics (best-of-4: the unbiased pass@4 over each task's 4
    samples)."""
    from rl.episodes.episode_metrics import episode_metrics

    reward = sampler_process.make_sampler(rl, cfg).reward_fn
    ids = [rl.pool_size + 1000 + j for j in range(n_tasks)]
    prompts = [sampler_process.make_task(rl, j).prompt for j in ids]
    greedy = generate(cfg, params, prompts, rl.max_new_tokens, temperature=0.0)
    p1 = episode_metrics(toy_records(greedy.sequences, ids, reward))["pass_rate"]
    many = generate(
        cfg,
        params,
        [p for p in prompts for _ in range(4)],
        rl.max_new_tokens,
        temperature=1.0,
        seed=1,
    )
    b4 = episode_metrics(
        toy_records(many.sequences, [j for j in ids for _ in range(4)], reward), ks=(4,)
    )
    return p1, b4["best_of_4"]


def toy_records(sequences, task_ids, reward) -> list[dict]:
    """Completions as episodes (rl.episodes.schema.Episode's record form). The toy task has one
    check, every completion token in the target set (reward 1.0), so it is graded as one test; no
    tools, one turn."""
    from rl.episodes.schema import Counts, Episode

    one_turn = Counts(turns=1, tool_calls=0, malformed_calls=0)
    return [
        dict(
            Episode(
                str(t), "completion", int(reward(s.tokens, "")[0] == 1.0), 1, False, one_turn
            ).to_dict(),
            completion_tokens=len(s.tokens),
        )
        for t, s in zip(task_ids, sequences, strict=True)
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--pool", type=int, default=240)
    ap.add_argument("--samplers", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--out", default="bench/rl_curve.png")
    ap.add_argument("--heldout", type=int, default=32, help="held-out tasks")
    tiny_png = os.path.join(tempfile.gettempdir(), "bench_rl_tiny.png")
    args = parse_tiny(ap, dict(pool=8, heldout=4, out=tiny_png))
    c = rl_config.get_config()
    c.model = args.preset
    c.rl.update(pool_size=args.pool, samplers=args.samplers)
    c.train.lr = args.lr
    cfg = loop.model_config(c)
    p0 = trainer.host_params(c, cfg)
    before = heldout(cfg, p0, c.rl, args.heldout)
    t0 = time.time()
    out = loop.train(c, tempfile.mkdtemp(), log=lambda s: None)
    wall = time.time() - t0
    after = heldout(cfg, jax.device_get(out["state"].params), c.rl, args.heldout)
    h = out["history"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(5, 3))
    plt.plot([x["step"] for x in h], [x["reward/mean"] for x in h])
    plt.xlabel("trainer step (version)")
    plt.ylabel("mean reward")
    plt.title(f"toy pattern task, {args.preset}, {args.samplers} sampler(s)")
    plt.tight_layout()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    plt.savefig(args.out, dpi=100)
    load = os.getloadavg()[0]
    print(
        "| preset | steps | wall s (incl. compile) | reward first 3 | reward last 3 | "
        "pass@1 before | pass@1 after | best-of-4 before | best-of-4 after | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    r0 = np.mean([x["reward/mean"] for x in h[:3]])
    r1 = np.mean([x["reward/mean"] for x in h[-3:]])
    print(
        f"| {args.preset} | {len(h)} | {wall:.0f} | {r0:.3f} | {r1:.3f} | {before[0]:.2f} | "
        f"{after[0]:.2f} | {before[1]:.2f} | {after[1]:.2f} | {load:.1f} |"
    )
    print(f"curve: {args.out}")


if __name__ == "__main__":
    main()
