"""Self-summarization toy RL (issue 33): success needs one fact carried across a summary.

    python bench/bench_rl_summary.py [--pool 480] [--facts 4] [--lr 3e-3] [--seed 0]
        [--workdir /tmp/bench_rl_summary] [--out bench/rl_summary_curve.png]

rl/loop.py on rl.task='summary_toy' (rl/summary_toy.py): each episode is two segments, one
training row each; the fact (one of `--facts` ids) is in segment 0 only, the policy writes a
2-token summary there, and segment 1 (summary only) answers with 2 tokens rewarded by how many
name the fact. Both segments share the chain's reward and its group-relative advantage. Chance is
1 / (facts + 5) (answers are sampled among the facts and the toy's 5 markers); the reward
can rise above 1 / facts (one fixed guess) only if summaries learn to keep the fact. Per step it
prints the mean reward and the fraction of summaries that kept the fact (from the rollout store's
records), and writes the curve.

    python bench/bench_rl_summary.py --reuse [--repeats 2]

measures instead what the engine's rewind saves at segment boundaries: the summarizing oracle's
long_lookup episodes (difficulty 2, 2,560-token context, trigger 1,500) teacher-forced through
the tiny model's engine, with the system + task prefix's cache kept (rewind) and with every
segment prefilled whole (reuse_prefix=False), alternated; prefill seconds and tokens per run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from configs import rl as rl_config  # noqa: E402
from rl import loop  # noqa: E402
from rl.store import RolloutStore  # noqa: E402
from rl.summary_toy import vocab  # noqa: E402


def toy_config(
    pool: int,
    facts: int,
    lr: float,
    seed: int,
    temperature: float = 1.0,
    kl_beta: float = 0.0,
    group_size: int = 8,
):
    c = rl_config.get_config()
    c.rl.update(
        task="summary_toy",
        pool_size=pool,
        samplers=1,
        mode="threads",
        synchronous=True,  # each batch sampled with the params of its step: a clean curve
        segments_per_chain=2,
        seed=seed,
        temperature=temperature,  # sampling and the loss alike
        kl_beta=kl_beta,  # > 0: k2 KL to the initial policy (keeps it exploring)
        group_size=group_size,
    )
    c.rl.summary_toy.facts = facts
    c.train.lr = lr
    return c


def kept_per_step(workdir: str, history: list[dict]) -> list[float]:
    """Fraction of chains whose summary held the fact, per trained step (journal order)."""
    import json  # noqa: PLC0415

    store = RolloutStore(os.path.join(workdir, "rollouts"))
    out = []
    with open(os.path.join(workdir, "journal.jsonl")) as f:
        for line in f:
            groups = json.loads(line)["groups"]
            recs = [r for g in groups for r in store.get(g) if r["segment"] == 0]
            out.append(float(np.mean([r["fact_kept"] for r in recs])))
    return out[: len(history)]


def plot(history, kept, chance: float, blind: float, path: str) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    steps = [h["step"] for h in history]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for values, label, color in (
        ([h["reward/mean"] for h in history], "reward (answer names the fact)", "C0"),
        (kept, "summaries that kept the fact", "C1"),
    ):
        w = min(10, len(values))  # 10-step moving average over the faint per-step values
        smooth = np.convolve(values, np.ones(w) / w, mode="valid")
        ax.plot(steps, values, color=color, alpha=0.25, lw=0.8)
        ax.plot(steps[w - 1 :], smooth, color=color, label=label)
    ax.axhline(chance, color="gray", ls="--", label="chance (uniform answer)")
    ax.axhline(blind, color="gray", ls=":", label="best answer without the fact")
    ax.set(xlabel="RL step", ylim=(0, 1.05), title="summary_toy: a fact carried across a summary")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def measure_reuse(repeats: int) -> None:
    import random  # noqa: PLC0415

    import jax  # noqa: PLC0415

    from data.tokenizers import ByteTokenizer  # noqa: PLC0415
    from model import init_params, presets  # noqa: PLC0415
    from model.engine import RolloutEngine  # noqa: PLC0415
    from rl.envs import generate_task  # noqa: PLC0415
    from rl.envs.scripted import SummarizingPolicy, TracePolicy  # noqa: PLC0415
    from rl.envs.summary import SummaryConfig  # noqa: PLC0415
    from rl.rollout import play_episodes  # noqa: PLC0415

    tok, budget = ByteTokenizer(), 2560
    cfg = presets.get("tiny", max_position_embeddings=budget)
    params = init_params(cfg, jax.random.PRNGKey(0))
    eng = RolloutEngine(cfg, params, slots=4, cache_len=budget, valid_vocab=tok.vocab_size)
    tasks = [generate_task("long_lookup", seed=s, difficulty=2) for s in range(4)]
    kw = dict(
        scripted=lambda t: SummarizingPolicy(tok, TracePolicy(tok, t, random.Random(0)), t),
        env_kwargs=dict(max_tokens=budget, summary=SummaryConfig(trigger_tokens=1500)),
        log_every_s=0,
    )
    play_episodes(eng, tok, tasks, **kw)  # compiles every program both modes use
    play_episodes(eng, tok, tasks, reuse_prefix=False, **kw)
    for _ in range(repeats):
        for reuse in (True, False):
            out = play_episodes(eng, tok, tasks, reuse_prefix=reuse, **kw)
            st = out.stats
            prefilled = sum(len(r.tokens) - r.policy_tokens for r in out.records)
            print(
                f"reuse={reuse!s:5}: {len(out.records)} segments, {st['segments_started']} "
                f"boundaries, prefill {st['prefill_s']:.2f}s, decode {st['decode_s']:.2f}s, "
                f"wall {st['wall_s']:.2f}s; prompt tokens {prefilled}, of them kept in cache "
                f"{st['prefix_reused_tokens']}; load {os.getloadavg()[0]:.1f}"
            )


def main() -> None:
    if "--reuse" in sys.argv[1:]:
        n = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 2
        measure_reuse(n)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", type=int, default=480)
    ap.add_argument("--facts", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--kl_beta", type=float, default=0.0)
    ap.add_argument("--group_size", type=int, default=8)
    ap.add_argument("--workdir", default="/tmp/bench_rl_summary")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "rl_summary_curve.png"))
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    t0 = time.time()
    out = loop.train(
        toy_config(
            args.pool,
            args.facts,
            args.lr,
            args.seed,
            args.temperature,
            args.kl_beta,
            args.group_size,
        ),
        args.workdir,
        log=lambda s: None,
    )
    h = out["history"]
    kept = kept_per_step(args.workdir, h)
    chance = 1 / vocab(args.facts)  # a uniformly sampled answer token names the fact
    for i in range(0, len(h), max(len(h) // 15, 1)):
        print(f"step {h[i]['step']:3d}  reward {h[i]['reward/mean']:.3f}  kept {kept[i]:.3f}")
    first = np.mean([x["reward/mean"] for x in h[:3]])
    last = np.mean([x["reward/mean"] for x in h[-3:]])
    print(
        f"{len(h)} steps in {time.time() - t0:.0f}s; reward {first:.3f} -> {last:.3f} "
        f"(chance {chance:.3f}, best without the fact {1 / args.facts:.3f}); kept {np.mean(kept[:3]):.3f} -> {np.mean(kept[-3:]):.3f}; "
        f"load {os.getloadavg()}"
    )
    plot(h, kept, chance, 1 / args.facts, args.out)
    print(f"curve: {args.out}")


if __name__ == "__main__":
    main()
