"""Coding-task RL benchmark (issue 11): SFT warm start on environment traces of one task family,
then the asynchronous RL loop on other seeds of that family, then held-out pass@1 / best-of-4.

    python bench/bench_rl_coding.py [--family boundary] [--traces 96] [--sft_steps 240]
        [--rl_minutes 30] [--rl_steps 100] [--rl_lr 1e-5] [--malformed_streak 2] [--group_size 8]
        [--temperature 0.5] [--groups_per_batch 2] [--heldout 48] [--workdir runs/bench_rl_coding]
        [--out bench/rl_coding_curve.png] [--seeds 100,101,102]
    python bench/bench_rl_coding.py --tiny --seeds 0,1   # smoke: tiny, 2 traces, 1 SFT + 1 RL step

The defaults are run 16's setting in bench/RESULTS_LOG.md: run 6's (lr 1e-5 raised held-out pass@1
by ~10 points in runs 6 and 8; lr 1e-4 lowered it, runs 3-4) with episodes ended after 2 consecutive
broken turns (~1.5x the RL steps per minute) and RL stopped by the issue's 30-minute budget.

1. Traces: the scripted oracle (rl.envs.agent.scripted.TracePolicy, via rl/envs/traces.py) plays
   `--traces` tasks of the family in the sandbox (seeds 1_000_000 + i); only clean all-pass
   submits are kept. These are the SFT data (the same chat rendering as RL). With
   `--mistake_rate` some traces hold one typo, its error and the recovery (runs 10-11 in
   bench/RESULTS_LOG.md; the default 0 is the clean-trace setting).
2. SFT: train/'s loop (configs/sft.py's loss: assistant tokens only) on those traces, from a random
   init of the `--preset` (default a 4-layer, hidden-256 MoE: tiny's shape scaled up, chosen as the
   largest that trains in minutes here; `--preset tiny` itself was not benchmarked), exported as
   the RL start.
3. Held-out "before": `--heldout` tasks of the family with seeds 2_000_000 + i, 4 episodes each at
   `--temperature` (default 0.5; RL samples at it too) in the same CodingSampler the loop uses,
   counted by rl.episodes.episode_metrics.episode_metrics (the agentic suite's and the RL logs'
   definition):
   pass@1 = mean over episodes of the hidden tests' all-pass (no tampering), best-of-4 = mean over
   tasks of the unbiased pass@4 estimator (with exactly 4 episodes a task, as here, that is the
   fraction of tasks with an all-pass episode), partial credit, endings; an episode the driver
   drops counts as failed.
4. RL: rl/learning/loop.py (task 'coding', rl.coding.templates = the family, pool seeded by rl.seed:
   seeds drawn from [0, 2^30), disjoint from 1. and 3. with overwhelming probability; checked) for
   `--rl_steps` trainer steps or until `--rl_minutes` have passed (no trainer step starts after).
5. Held-out "after", the reward curve (PNG) and a markdown table with wall times and load.

`--seeds S1,S2,..` (issue 55) repeats 4.-5. once per seed (rl.seed, which also seeds the trainer:
the pool's tasks and order, sampling) in WORKDIR/rl_seed_N from the same SFT export, whose
held-out "before" is measured once (the same params, tasks and sampler seed for every RL seed); the
table has a row per seed, the PNG a reward and pass-rate curve per seed, and held-out pass@1 after
RL, its gain over "before" and best-of-4 after are printed as mean, min and max over the seeds.

Re-running reuses finished stages found in --workdir (traces, the SFT export, a finished RL seed)
and held-out measurements saved there (WORKDIR/heldout_before.json, RUN_DIR/heldout_after.json) when
they were taken of the same params with the same evaluation settings: the held-out play is seeded
(tasks and sampler), and a re-measured "before" came out identical (bench/RESULTS.md, issue 55).
`--eval_only RUN_DIR[,RUN_DIR]` evaluates the SFT export and each RL run's newest published params
(RUN_DIR/weights) on `--heldout` tasks and exits (how the 48-task table in bench/RESULTS_LOG.md
was made).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

from train.malloc_env import reexec_with_hugepages  # noqa: E402

reexec_with_hugepages()  # the default launch's allocator setting (main.py applies it too)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench import rl_stages  # noqa: E402
from bench.common import over_seeds, parse_seeds, parse_tiny, seeds_line  # noqa: E402
from bench.rl_stages import describe, heldout_metrics, train_and_export  # noqa: E402
from rl.learning import loop  # noqa: E402
from rl.sampling import sampler_process  # noqa: E402

TRACE_SEED_BASE, HELDOUT_SEED_BASE = 1_000_000, 2_000_000


def synthetic_package(rng: random.Random) -> str:
    """A pronounceable lowercase name of 2-3 syllables that is not a keyword, a stdlib module
    (the task's tests import it: a shadowed module would break them) or one of PACKAGES."""
    import keyword

    from rl.envs.taskgen.helpers import PACKAGES

    while True:
        name = "".join(
            rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3))
        )
        if not (keyword.iskeyword(name) or name in sys.stdlib_module_names or name in PACKAGES):
            return name


def make_traces(
    family: str, n: int, path: str, mistake_rate: float, max_tokens: int, names: str = "standard"
) -> int:
    """`n` traces of the family that end in an all-pass submit (seeds TRACE_SEED_BASE + i, up to
    2n tried), a fraction `mistake_rate` of them holding one mistake and its recovery; traces
    longer than the context (`max_tokens`) are skipped and counted: no episode reaches their end.
    names='random': each trace's package gets a synthetic name (the task is otherwise the same),
    so recalling one of the generator's 8 names never fits the data and copying it from the
    listing does."""
    from data.chat import render_messages
    from data.tokenizers import ByteTokenizer
    from rl.envs import generate_task
    from rl.envs import traces as mt

    if os.path.exists(path):
        return sum(1 for _ in open(path))
    tok, rows, too_long = ByteTokenizer(), [], 0
    for i in range(2 * n):
        rng = random.Random(TRACE_SEED_BASE + i)
        package = synthetic_package(random.Random(-1 - i)) if names == "random" else None
        task = generate_task(family, TRACE_SEED_BASE + i, 1 + i % 3, package=package)
        t = mt.task_trace(task, rng, f"{family}-{i:04d}", mistake_rate)
        if t is not None and len(render_messages(tok, t["messages"])[0]) > max_tokens:
            too_long += 1
        elif t is not None:
            rows.append(t)
        if len(rows) == n:
            break
    mistakes = sum(t["mistake"] is not None for t in rows)
    print(
        f"traces: {len(rows)} kept ({mistakes} with a mistake), {too_long} over {max_tokens} "
        f"tokens, package names {names}"
    )
    with open(path + ".tmp", "w") as f:
        f.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in rows)
    os.replace(path + ".tmp", path)
    return len(rows)


def pretrain(args, workdir: str) -> str:
    """--pretrain_steps > 0: stage (a) first (configs/pretrain.py: next-byte prediction on the
    embedded stdlib corpus, 16 x 512-byte rows) from a random init, so SFT starts from a model
    that has seen code, where copying an identifier from earlier in the context is everywhere.
    -> the exported params dir, or '' (SFT then starts from a random init)."""
    if not args.pretrain_steps:
        return ""
    from configs import pretrain as pretrain_config

    c = pretrain_config.get_config()
    c.model = args.preset
    c.model_overrides = dict(
        num_mtp_modules=args.mtp_modules, max_position_embeddings=args.max_tokens
    )
    c.train.update(
        steps=args.pretrain_steps,
        batch_size=16,
        seq_len=512,
        lr=args.sft_lr,
        warmup_steps=20,
        eval_every=args.pretrain_steps,
        eval_batches=2,
        log_every=50,
        mtp_mode="distill" if args.mtp_modules else "none",
    )
    return train_and_export(c, workdir)


def sft(args, traces: str, workdir: str, init: str = "") -> str:
    """-> the exported params dir of the SFT run (bench/rl_stages.py's sft) from `init`."""
    return rl_stages.sft(
        traces,
        workdir,
        preset=args.preset,
        mtp_modules=args.mtp_modules,
        max_tokens=args.max_tokens,
        steps=args.sft_steps,
        lr=args.sft_lr,
        init=init,
    )


def rl_config_for(args, params_dir: str, seed: int | None = None):
    """The RL run's config; seed: rl.seed (None: configs/rl.py's)."""
    c = rl_stages.coding_rl_config(
        args,
        params_dir,
        seed,
        # room for skipped zero-signal groups (dynamic sampling)
        pool_size=args.pool or 4 * args.rl_steps * args.groups_per_batch,
        rl=dict(dynamic_sampling=True, negative_adv_scale=args.negative_scale),
        coding=dict(
            templates=(args.family,), max_turns=8, max_turn_tokens=192, obs_token_budget=384
        ),
    )
    c.train.update(steps=args.rl_steps, max_seconds=60.0 * args.rl_minutes)
    c.checkpoint.every_steps = 10
    if args.skip_key:
        c.rl.curriculum.update(key=args.skip_key, after=args.skip_after, prob=args.skip_prob)
    return c


def heldout(config, params, n_tasks: int, k: int = 4) -> dict:
    """-> heldout_metrics of n_tasks x k episodes at the RL temperature."""
    from rl.envs import generate_task

    family = config.rl.coding.templates[0]
    tasks = [
        generate_task(family, seed=HELDOUT_SEED_BASE + i, difficulty=1 + i % 3)
        for i in range(n_tasks)
    ]
    groups, _ = rl_stages.play_heldout(config, params, tasks, k, HELDOUT_SEED_BASE)
    return heldout_metrics([t.id for t in tasks], groups, k)


def saved_heldout(path: str, key: dict, measure) -> dict:
    """heldout()'s metrics from `path` when it holds a measurement under the same `key` (what was
    evaluated and how), else measure() saved there (written whole, then renamed: a killed run
    leaves no half file)."""
    if os.path.exists(path):
        with open(path) as f:
            saved = json.load(f)
        if saved.get("key") == key:
            print(f"held-out: reusing {path}", flush=True)
            return saved["metrics"]
    metrics = measure()
    with open(path + ".tmp", "w") as f:
        json.dump({"key": key, "metrics": metrics}, f, default=float)
    os.replace(path + ".tmp", path)
    return metrics


def heldout_key(config, n_tasks: int, params: str) -> dict:
    """What a held-out measurement depends on besides the sampler code: the params (a path, or a
    run dir and step), the tasks and the episode settings (the family is rl.coding.templates)."""
    return dict(
        params=params,
        tasks=n_tasks,
        temperature=config.rl.temperature,
        max_tokens=config.rl.max_tokens,
        coding={k: str(v) for k, v in sorted(config.rl.coding.to_dict().items())},
    )


def evaluate_only(config, params_dir: str, runs: list[str], n_tasks: int) -> None:
    """Held-out pass@1 / best-of-4 of the SFT export and of each RL run's newest published
    params."""
    from model.export import load_params
    from rl.stores.weight_store import WeightReader

    for name in ["sft"] + runs:
        t0 = time.time()
        if name == "sft":
            params, label = load_params(params_dir)[1], params_dir
        else:
            params, version = WeightReader(os.path.join(name, "weights")).fetch()
            label = f"{name} v{version}"
        m = heldout(config, params, n_tasks)
        print(f"{label}: {describe(m)} {time.time() - t0:.0f}s", flush=True)


def plot(histories: dict, path: str, title: str) -> None:
    """{label: loop history} -> mean reward (solid) and pass rate (dashed), one colour a run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(5, 3))
    for i, (label, history) in enumerate(histories.items()):
        steps = [x["step"] for x in history]
        name = f"{label}: " if len(histories) > 1 else ""
        rewards = [x["reward/mean"] for x in history]
        plt.plot(steps, rewards, color=f"C{i}", label=f"{name}mean reward")
        plt.plot(
            steps, [x["pass_rate"] for x in history], "--", color=f"C{i}", label=f"{name}pass rate"
        )
    plt.xlabel("trainer step (version)")
    plt.legend()
    plt.title(title)
    plt.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    plt.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="boundary")
    ap.add_argument("--preset", default="tiny4", choices=("tiny4", "tiny"))  # both without MTP
    ap.add_argument(
        "--mtp_modules",
        type=int,
        default=0,
        help="MTP modules on the preset (trained jointly by self-distillation in pretrain + SFT); "
        "bench_rl_mtp.py --task coding starts from such an SFT export",
    )
    ap.add_argument("--sft_only", action="store_true", help="stop after the SFT export")
    ap.add_argument("--traces", type=int, default=96)
    ap.add_argument(
        "--mistake_rate",
        type=float,
        default=0.0,
        help="fraction of SFT traces with one mistake and its recovery (TracePolicy)",
    )
    ap.add_argument(
        "--trace_names",
        default="standard",
        choices=("standard", "random"),
        help="package names in the SFT traces: the generator's 8, or a synthetic one per trace",
    )
    ap.add_argument(
        "--pretrain_steps",
        type=int,
        default=0,
        help="stdlib pretraining steps before SFT (0: none)",
    )
    ap.add_argument("--sft_steps", type=int, default=240)
    ap.add_argument("--sft_lr", type=float, default=2e-3)
    ap.add_argument("--max_tokens", type=int, default=2048)
    ap.add_argument("--rl_steps", type=int, default=100)
    ap.add_argument(
        "--rl_minutes", type=float, default=30.0, help="RL wall-time budget (0: --rl_steps only)"
    )
    ap.add_argument("--rl_lr", type=float, default=1e-5)
    ap.add_argument("--pool", type=int, default=0, help="RL pool size (0: 4 x steps x groups)")
    ap.add_argument("--group_size", type=int, default=8)
    ap.add_argument(
        "--temperature", type=float, default=0.5, help="RL sampling and held-out eval temperature"
    )
    ap.add_argument("--groups_per_batch", type=int, default=2)
    ap.add_argument(
        "--microbatches", type=int, default=1, help="train.microbatches (4 groups of 8 need 4 here)"
    )
    ap.add_argument(
        "--negative_scale", type=float, default=1.0, help="rl.negative_adv_scale (1 = plain GRPO)"
    )
    ap.add_argument(
        "--malformed_streak",
        type=int,
        default=2,
        help="rl.coding.max_malformed_streak: end an episode after this many consecutive broken "
        "turns (0: never), in RL and in both held-out evaluations",
    )
    ap.add_argument(
        "--skip_key",
        default="",
        help="rl.curriculum.key: skip tasks of a kind (e.g. meta.package) whose last "
        "--skip_after groups had no outcome spread, with probability --skip_prob ('' = off)",
    )
    ap.add_argument("--skip_after", type=int, default=2)
    ap.add_argument("--skip_prob", type=float, default=0.75)
    ap.add_argument("--heldout", type=int, default=48)
    ap.add_argument(
        "--eval_only",
        default="",
        help="comma-separated RL run dirs: evaluate the SFT export and the newest version in each "
        "run's weight store (DIR/weights) on --heldout tasks, then exit (no RL)",
    )
    ap.add_argument("--workdir", default="runs/bench_rl_coding")
    ap.add_argument("--out", default="bench/rl_coding_curve.png")
    ap.add_argument("--seeds", default="", help="e.g. 100,101,102: an RL run each (rl.seed)")
    tmp = os.path.join(tempfile.gettempdir(), "bench_rl_coding_tiny")
    tiny = dict(preset="tiny", traces=2, sft_steps=1, rl_steps=1, rl_minutes=0.0)
    tiny.update(group_size=2, groups_per_batch=1, heldout=1, workdir=tmp, out=tmp + ".png")
    args = parse_tiny(ap, tiny)
    if args.tiny:  # a fresh run: re-running reuses the stages found in --workdir
        shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir, exist_ok=True)
    wall = {}
    t0 = time.time()
    n = make_traces(
        args.family,
        args.traces,
        os.path.join(args.workdir, "traces.jsonl"),
        args.mistake_rate,
        args.max_tokens,
        args.trace_names,
    )
    wall["traces"] = time.time() - t0
    print(f"{n} traces of {args.family}", flush=True)
    t0 = time.time()
    init = pretrain(args, args.workdir + "/pretrain")
    wall["pretrain"] = time.time() - t0
    t0 = time.time()
    params_dir = sft(args, os.path.join(args.workdir, "traces.jsonl"), args.workdir + "/sft", init)
    wall["sft"] = time.time() - t0
    if args.sft_only:
        print(f"SFT export: {params_dir}")
        return
    seeds = parse_seeds(args.seeds) if args.seeds else [None]
    # fails closed without isolation
    configs = {s: loop.resolve(rl_config_for(args, params_dir, s)) for s in seeds}
    for config in configs.values():
        pool = {
            t.seed
            for t in (sampler_process.make_task(config.rl, j) for j in range(config.rl.pool_size))
        }
        assert not pool & (
            set(range(TRACE_SEED_BASE, TRACE_SEED_BASE + 2 * args.traces))
            | set(range(HELDOUT_SEED_BASE, HELDOUT_SEED_BASE + args.heldout))
        ), "RL pool seeds overlap the SFT or held-out seeds"
    from model.export import load_params

    config = configs[seeds[0]]
    if args.eval_only:
        evaluate_only(config, params_dir, args.eval_only.split(","), args.heldout)
        return
    t0 = time.time()
    before = saved_heldout(
        os.path.join(args.workdir, "heldout_before.json"),
        heldout_key(config, args.heldout, os.path.abspath(params_dir)),
        lambda: heldout(config, load_params(params_dir)[1], args.heldout),
    )
    wall["heldout_before"] = time.time() - t0
    print(f"held-out before RL: {describe(before)}")
    rows, histories, afters = [], {}, {}
    for seed, config in configs.items():
        run_dir = os.path.join(args.workdir, "rl" if seed is None else f"rl_seed_{seed}")
        t0 = time.time()
        out = loop.train(config, run_dir)
        wall["rl"] = time.time() - t0
        t0 = time.time()
        step = int(jax.device_get(out["state"].step))
        afters[seed] = saved_heldout(
            os.path.join(run_dir, "heldout_after.json"),
            heldout_key(config, args.heldout, f"{os.path.abspath(run_dir)} step {step}"),
            functools.partial(heldout, config, jax.device_get(out["state"].params), args.heldout),
        )
        wall["heldout_after"] = time.time() - t0
        print(f"held-out after RL (rl.seed {config.rl.seed}): {describe(afters[seed])}")
        histories[f"seed {config.rl.seed}"] = h = out["history"]
        rows.append(table_row(args, n, config.rl.seed, h, before, afters[seed], wall))
    plot(histories, args.out, f"coding RL, family {args.family}, {args.preset}")
    print(
        "\n| family | traces | SFT steps | rl.seed | RL steps | reward first 3 | last 3 | "
        "pass@1 before | after | best-of-4 before | after | "
        "wall s (traces/pretrain/SFT/eval/RL/eval) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if args.seeds:
        for name, of in (
            ("held-out pass@1 after RL", lambda m: m["pass_rate"]),
            ("held-out pass@1 gain", lambda m: m["pass_rate"] - before["pass_rate"]),
            ("held-out best-of-4 after RL", lambda m: m["best_of_4"]),
        ):
            print(seeds_line(name, over_seeds({s: of(m) for s, m in afters.items()})))
    print(f"curve: {args.out}")


def table_row(args, n_traces, seed, h, before, after, wall) -> str:
    """One markdown row of the run's table (the load: now, at the row's end)."""
    r0 = np.mean([x["reward/mean"] for x in h[:3]]) if h else float("nan")
    r1 = np.mean([x["reward/mean"] for x in h[-3:]]) if h else float("nan")
    secs = "/".join(f"{wall[k]:.0f}" for k in wall)
    return (
        f"| {args.family} | {n_traces} | {args.sft_steps} | {seed} | {len(h)} | {r0:.3f} | "
        f"{r1:.3f} | {before['pass_rate']:.3f} | {after['pass_rate']:.3f} | "
        f"{before['best_of_4']:.3f} | {after['best_of_4']:.3f} | {secs} | "
        f"{os.getloadavg()[0]:.1f} |"
    )


if __name__ == "__main__":
    main()
