"""Self-summarization toy RL (issue 33): success needs one fact carried across a summary.

    python bench/bench_rl_summary.py [--pool 480] [--facts 4] [--lr 3e-3] [--seed 0]
        [--kl_beta 0.02] [--uniform_beta 0] [--no-expected_reward] [--group_size 16]
        [--schedule cosine] [--unbalanced]
        [--workdir /tmp/bench_rl_summary] [--out bench/rl_summary_curve.png]
    python bench/bench_rl_summary.py --seeds_plot DIR [DIR ...] --out bench/rl_summary_seeds.png
    python bench/bench_rl_summary.py --seeds 100,101,102 --workdir /tmp/summary_seeds \
        --out /tmp/summary_seeds.png   # one run a seed (WORKDIR/seed_N), then mean/min/max
    python bench/bench_rl_summary.py --tiny --seeds 0,1   # smoke: 2 steps of 4 chains a group

rl/learning/loop.py on rl.task='summary_toy' (rl/sampling/summary_toy.py): each episode is two
segments, one training row each; the fact (one of `--facts` ids) is in segment 0 only, the policy
writes a 2-token summary there, and segment 1 (summary only) answers with 2 tokens rewarded by how
many name the fact. Both segments share the chain's reward and its group-relative advantage. Chance
is 1 / (facts + 5) (answers are sampled among the facts and the toy's 5 markers); the reward
can rise above 1 / facts (one fixed guess) only if summaries learn to keep the fact. Per step it
prints the mean reward and the fraction of summaries that kept the fact (from the rollout store's
records: the summary holds the fact's id, or the fact is decodable from it under whatever code
the policy adopted) and of groups whose chains all tied (zero advantage), and writes the curve.
The recipe: balanced pools (rl.summary_toy.balanced; `--unbalanced` draws each task's fact
independently, as the first recipe did), a k2 KL of 0.02 to the initial policy
(rl/sampling/summary_toy.py says why), 16 chains a group, a cosine lr decay to 0.1x over the pool
(bench/RESULTS_LOG.md), and the summary's reward in expectation (rl.summary_toy.expected_reward:
the summary segment's advantage from the receiver's probability of the fact given the summary,
rl/sampling/summary_toy.py answer_expectation; the answer keeps the sampled reward): without it
7 of 10 fresh seeds (100-109) ended >= 0.9, with it 9 of 10 (120-129; issue 55,
bench/RESULTS.md); `--no-expected_reward` is the recipe before it. `--uniform_beta B` adds
rl.uniform_beta: a KL(uniform || policy) term per policy token whose gradient does not vanish
where the policy has saturated (rl/learning/grpo.py); 0.01 fixed the two stalled tuning seeds it
was tried on but not the fresh seeds (issue 55, bench/RESULTS.md), so the recipe ships without
it. The reported reward is always the sampled one (the answer names the fact), either way.
`--report_only` redoes the report of a finished run; `--seeds_plot` draws finished runs' reward
curves together and prints their 10-step means. `--seeds` runs the recipe once per seed, reports
each run as one seed's run is reported (its curve PNG in WORKDIR/seed_N), draws every seed's curve
with the mean and the min-max band in --out, and prints the last-10-step reward, decodable and
zero-signal fractions as mean, min and max over the seeds (also in WORKDIR/seeds.json).

    python bench/bench_rl_summary.py --reuse [--repeats 2]

measures instead what the engine's rewind saves at segment boundaries: the summarizing oracle's
long_lookup episodes (difficulty 2, 2,560-token context, trigger 1,500) teacher-forced through
the tiny model's engine, with the system + task prefix's cache kept (rewind) and with every
segment prefilled whole (reuse_prefix=False), alternated; prefill seconds and tokens per run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from bench.common import (  # noqa: E402
    curves_over_seeds,
    over_seeds,
    parse_seeds,
    parse_tiny,
    seeds_line,  # noqa: E402
)
from configs import rl as rl_config  # noqa: E402
from rl.learning import loop  # noqa: E402
from rl.sampling.summary_toy import vocab  # noqa: E402
from rl.stores.store import RolloutStore  # noqa: E402


def toy_config(
    pool: int,
    facts: int,
    lr: float,
    seed: int,
    temperature: float = 1.0,
    kl_beta: float = 0.0,
    group_size: int = 8,
    balanced: bool = True,
    schedule: str = "cosine",
    uniform_beta: float = 0.0,
    expected_reward: bool = False,
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
        uniform_beta=uniform_beta,  # > 0: a floor under every token (rl/learning/grpo.py)
    )
    c.rl.summary_toy.update(facts=facts, balanced=balanced, expected_reward=expected_reward)
    # 'cosine': lr to 0.1x over the pool's steps (at a constant 3e-3, 5 of 10 runs lost facts
    # they had learned: bench/RESULTS.md); 'constant' as configs/rl.py
    c.train.update(schedule=schedule, steps=pool // c.rl.groups_per_batch)
    c.train.lr = lr
    return c


def curves(workdir: str) -> dict[str, list[float]]:
    """Per trained step (journal order), from the rollout store: 'reward' (mean over the step's
    chains), 'literal' (summaries holding the fact's own id) and 'decodable' (chains whose fact is
    the most common fact among the chains of the 10 steps before that wrote the same summary; a
    summary not seen there counts as a miss: the fact is recoverable from the summary, whatever
    code the policy uses for it, by a decoder fitted on other episodes)."""
    store = RolloutStore(os.path.join(workdir, "rollouts"))
    steps, zero = [], []  # per step: [(fact, summary tuple, reward)] of its chains; no-signal
    with open(os.path.join(workdir, "journal.jsonl")) as f:
        for line in f:
            groups = [store.get(g) for g in json.loads(line)["groups"]]
            # a group whose chains all got one reward has zero advantage: no gradient at all
            zero.append(float(np.mean([len({r["reward"] for r in g}) == 1 for g in groups])))
            steps.append(
                [
                    (int(r["tokens"][1]), tuple(r["tokens"][r["mask"] > 0].tolist()), r["reward"])
                    for r in (r for g in groups for r in g)
                    if r["segment"]
                    == 0  # segment 0's prompt is USER f f (rl/sampling/summary_toy.py)
                ]
            )
    out = {"reward": [], "literal": [], "decodable": [], "zero_signal": zero}
    for i, chains in enumerate(steps):
        window = [c for cs in steps[max(i - 10, 0) : i] for c in cs]
        by_summary = collections.defaultdict(collections.Counter)
        for fact, summary, _ in window:
            by_summary[summary][fact] += 1
        best = {s: c.most_common(1)[0][0] for s, c in by_summary.items()}
        out["reward"].append(float(np.mean([r for _, _, r in chains])))
        out["literal"].append(float(np.mean([f in s for f, s, _ in chains])))
        out["decodable"].append(float(np.mean([best.get(s) == f for f, s, _ in chains])))
    return out


def plot(c: dict, chance: float, blind: float, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(c["reward"]) + 1)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for key, label, color in (
        ("reward", "reward (answer names the fact)", "C0"),
        ("decodable", "fact decodable from the summary", "C1"),
        ("literal", "summary holds the fact's own id", "C2"),
    ):
        values = c[key]
        w = min(10, len(values))  # 10-step moving average over the faint per-step values
        smooth = np.convolve(values, np.ones(w) / w, mode="valid")
        ax.plot(steps, values, color=color, alpha=0.2, lw=0.8)
        ax.plot(steps[w - 1 :], smooth, color=color, label=label)
    ax.axhline(chance, color="gray", ls="--", label="chance (uniform answer)")
    ax.axhline(blind, color="gray", ls=":", label="best answer without the fact")
    ax.set(xlabel="RL step", ylim=(0, 1.05), title="summary_toy: a fact carried across a summary")
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_seeds(workdirs: list[str], facts: int, path: str) -> None:
    """Every finished run's reward (10-step moving average) in one figure, one line per run, and
    an ASCII table of its 10-step means (every 10th step) for bench/RESULTS_LOG.md."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    smoothed = {}
    for i, w in enumerate(workdirs):
        values = curves(w)["reward"]
        n = min(10, len(values))  # a run shorter than 10 steps: its whole-run mean
        smooth = np.convolve(values, np.ones(n) / n, mode="valid")
        label = os.path.basename(os.path.normpath(w))
        ax.plot(np.arange(n, len(values) + 1), smooth, color=f"C{i}", label=label, lw=0.8)
        print(f"{label:>12}: " + " ".join(f"{v:.2f}" for v in smooth[::10]))
        smoothed[label] = (n, smooth)
    if len(workdirs) > 1:  # the mean over runs and their min-max band, as long as the shortest
        band = curves_over_seeds({k: s for k, (_, s) in smoothed.items()})
        n = max(n for n, _ in smoothed.values())
        x = np.arange(n, n + len(band["mean"]))
        ax.plot(x, band["mean"], color="k", label="mean over runs")
        ax.fill_between(x, band["min"], band["max"], color="k", alpha=0.1, label="min-max")
    ax.axhline(1 / vocab(facts), color="gray", ls="--", label="chance (uniform answer)")
    ax.axhline(1 / facts, color="gray", ls=":", label="best answer without the fact")
    ax.set(xlabel="RL step", ylabel="reward, 10-step mean", ylim=(0, 1.05))
    ax.set_title("summary_toy: one run per seed", fontsize=10)  # ylim: rewards are in [0, 1]
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"curves: {path}")


def measure_reuse(repeats: int) -> None:
    import random

    import jax

    from data.tokenizers import ByteTokenizer
    from model import init_params, presets
    from model.engine import RolloutEngine
    from rl.envs import generate_task
    from rl.envs.agent.scripted import SummarizingPolicy, TracePolicy
    from rl.envs.agent.summary import SummaryConfig
    from rl.episodes.records import policy_tokens
    from rl.sampling.rollout import play_episodes

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
            # every context token the policy did not emit is prefilled, unless the rewind kept it
            context = sum(len(r["tokens"]) - policy_tokens(r) for r in out.records)
            kept = st["prefix_reused_tokens"]
            print(
                f"reuse={reuse!s:5}: {len(out.records)} segments, {st['segments_started']} "
                f"boundaries, prefill {st['prefill_s']:.2f}s, decode {st['decode_s']:.2f}s, "
                f"wall {st['wall_s']:.2f}s; tokens prefilled {context - kept}, kept in cache "
                f"{kept}; load {os.getloadavg()[0]:.1f}"
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
    ap.add_argument("--kl_beta", type=float, default=0.02)
    ap.add_argument("--group_size", type=int, default=16)
    ap.add_argument("--uniform_beta", type=float, default=0.0, help="rl.uniform_beta; 0: off")
    ap.add_argument(
        "--expected_reward",
        action=argparse.BooleanOptionalAction,
        default=True,  # the recipe since issue 55: 9 of 10 fresh seeds >= 0.9 (bench/RESULTS.md)
        help="rl.summary_toy.expected_reward: the summary's advantage from E[answer reward]",
    )
    ap.add_argument("--unbalanced", action="store_true", help="facts drawn per task (old recipe)")
    ap.add_argument("--schedule", default="cosine", choices=("cosine", "constant"))
    ap.add_argument("--workdir", default="/tmp/bench_rl_summary")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "rl_summary_curve.png"))
    ap.add_argument("--report_only", action="store_true", help="curves of a finished --workdir")
    ap.add_argument("--seeds_plot", nargs="+", help="finished workdirs: one reward curve each")
    ap.add_argument("--seeds", default="", help="e.g. 100,101: a run each, mean/min/max over them")
    tmp = os.path.join(tempfile.gettempdir(), "bench_rl_summary_tiny")
    tiny = dict(pool=8, group_size=4, workdir=tmp, out=tmp + ".png")  # 2 steps of 4 groups
    args = parse_tiny(ap, tiny)
    if args.seeds:
        run_seeds(args, parse_seeds(args.seeds))
        return
    if args.seeds_plot:
        plot_seeds(args.seeds_plot, args.facts, args.out)
        return
    if args.report_only:
        report(args.workdir, args.facts, args.out, "(earlier run)")
        return
    wall = train_one(args, args.seed, args.workdir)
    report(args.workdir, args.facts, args.out, wall)


def train_one(args, seed: int, workdir: str) -> str:
    """One run of the recipe from scratch in workdir -> its wall time, printable."""
    shutil.rmtree(workdir, ignore_errors=True)
    t0 = time.time()
    loop.train(
        toy_config(
            args.pool,
            args.facts,
            args.lr,
            seed,
            args.temperature,
            args.kl_beta,
            args.group_size,
            not args.unbalanced,
            args.schedule,
            args.uniform_beta,
            args.expected_reward,
        ),
        workdir,
        log=lambda s: None,
    )
    return f"{time.time() - t0:.0f}s"


def run_seeds(args, seeds: list[int]) -> dict:
    """One run per seed (WORKDIR/seed_N, each reported and plotted as a single run is), every
    seed's curve in --out, and the last-10-step figures as mean/min/max over the seeds."""
    dirs = {}
    for seed in seeds:
        dirs[seed] = os.path.join(args.workdir, f"seed_{seed}")
        wall = train_one(args, seed, dirs[seed])
        print(f"\n## seed {seed}", flush=True)
        report(dirs[seed], args.facts, os.path.join(dirs[seed], "curve.png"), wall)
    print()
    plot_seeds(list(dirs.values()), args.facts, args.out)
    summary = seeds_summary({s: curves(d) for s, d in dirs.items()})
    for name, s in summary.items():
        print(seeds_line(f"last-10-step {name}", s))
    with open(os.path.join(args.workdir, "seeds.json"), "w") as f:
        json.dump(summary, f)
    return summary


def seeds_summary(by_seed: dict[int, dict]) -> dict:
    """{seed: curves()} -> {figure: over_seeds of each seed's mean over its last 10 steps}."""
    keys = ("reward", "decodable", "literal", "zero_signal")
    return {
        k: over_seeds({s: float(np.mean(c[k][-10:])) for s, c in by_seed.items()}) for k in keys
    }


def report(workdir: str, facts: int, out_png: str, wall: str) -> None:
    c = curves(workdir)
    n = len(c["reward"])
    for i in range(0, n, max(n // 12, 1)):
        print(
            f"step {i + 1:3d}  reward {c['reward'][i]:.3f}  decodable {c['decodable'][i]:.3f}  "
            f"literal {c['literal'][i]:.3f}  zero-signal groups {c['zero_signal'][i]:.2f}"
        )
    head = {k: np.mean(v[:10]) for k, v in c.items()}
    tail = {k: np.mean(v[-10:]) for k, v in c.items()}
    print(
        f"{n} steps in {wall}; first -> last 10 steps: reward {head['reward']:.3f} -> "
        f"{tail['reward']:.3f}, decodable {head['decodable']:.3f} -> {tail['decodable']:.3f}, "
        f"literal {head['literal']:.3f} -> {tail['literal']:.3f}, zero-signal groups "
        f"{head['zero_signal']:.2f} -> {tail['zero_signal']:.2f} (chance {1 / vocab(facts):.3f}, "
        f"best without the fact {1 / facts:.3f}); load {os.getloadavg()}"
    )
    with open(os.path.join(workdir, "curves.json"), "w") as f:
        json.dump(c, f)
    plot(c, 1 / vocab(facts), 1 / facts, out_png)
    print(f"curve: {out_png}")


if __name__ == "__main__":
    main()
