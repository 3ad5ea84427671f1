"""Speculative decoding through RL (issue 44, point 3): MTP acceptance and batch-1 speedup before
RL, after N RL steps without the MTP self-distillation term, and after N steps with it.

    python bench/bench_rl_mtp.py                                  # toy task, tiny, small scale
    python bench/bench_rl_mtp.py --rl_steps 40 --timing           # + batch-1 speedups
                                                                    (quiet machine)
    python bench/bench_rl_mtp.py --task coding --params DIR --rl_steps 40 --timing
        # DIR: an export with trained MTP heads, e.g. bench_rl_coding.py's SFT export after
        # configs/mtp.py's stage
    python bench/bench_rl_mtp.py --seeds 100,101,102              # each seed in WORKDIR/seed_N
    python bench/bench_rl_mtp.py --tiny --seeds 0,1               # smoke: 1 warm + 1 RL step

1. Start: `--params` (an export) or a random-init `--preset`; then `--warm_steps` RL steps with
   train.trainable='mtp' (the trunk frozen: only the MTP heads learn, by rl/learning/losses.py's
   self-distillation on the policy's own samples), so the heads start trained on the traffic
   they will draft for (the MTP stage's role, configs/mtp.py). That export is "before RL".
2. Two RL runs from it with the same seeds (pool order, sampling, params init): rl.mtp_weight=0
   (the heads stay as they were while RL moves the policy) and rl.mtp_weight=1 (the default with
   speculative samplers). Samplers decode speculatively (rl.speculative_k) in both.
3. Each of the three params: acceptance (accepted / drafted, model/engine/'s counters) and
   tokens per verify step, decoding held-out tasks (pool seed + 10000) at the RL temperature,
   --eval_groups x --eval_group_size episodes; with --timing also the batch-1 decode time of the
   same tasks with plain and speculative decoding (one task at a time, after a warm-up pass), and
   the speedup. Also the RL runs' median train_step span (rl/episodes/timeline.py): the term's cost.

`--weights 1` runs only the RL run with the term; `--mtp_lr` sets its heads' own lr (train.mtp_lr;
0: the policy's `--lr`; default: configs/rl.py's). Every RL run saves its per-step metrics
(`mtp_kl`, `mtp_accept_est`, the samplers' `spec/acceptance`, `entropy`, ...) in RUN/history.json,
and a second plot (--out with `_steps`) draws the samplers' acceptance per RL step for every run in
--workdir, so reruns with other flags into one --workdir compare on one figure.

Prints a markdown table and one JSON line; writes the plot (--out). Acceptance and tokens per
verify step are counts (fine on a loaded machine); timings only mean something on a quiet one.
With `--seeds` (issue 55) every seed runs all of the above in WORKDIR/seed_N (its own start, RL
runs and table); then acceptance, tokens per verify step and the last step's reward of each row
are printed as mean, min and max over the seeds, and the plot's bars are the means with min-max
whiskers and one dot per seed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import jax  # noqa: E402

from bench.common import over_seeds, parse_seeds, parse_tiny, seeds_line  # noqa: E402
from configs import rl as rl_config  # noqa: E402
from model.export import load_params, save_params  # noqa: E402
from rl.episodes import timeline  # noqa: E402
from rl.learning import loop  # noqa: E402
from rl.sampling import sampler_process  # noqa: E402
from rl.sampling.samplers import acceptance  # noqa: E402
from rl.stores.weight_store import FixedWeights  # noqa: E402


def base_config(args, params_dir: str = ""):
    c = rl_config.get_config()
    c.model = args.preset
    c.init_params_from = params_dir
    c.rl.update(
        task=args.task,
        seed=args.seed,
        pool_size=args.pool,
        speculative_k=args.k,
        temperature=args.temperature,
        groups_per_batch=args.groups_per_batch,
        groups_per_call=args.groups_per_batch,
        max_ahead=2 * args.groups_per_batch,
        # batch b sampled with the params of step b: deterministic given the seed, so the two RL
        # runs differ only by the term (and the draws speculative acceptance consumes)
        synchronous=True,
    )
    if args.group_size:  # 0: configs/rl.py's
        c.rl.group_size = args.group_size
    c.train.update(log_every=5, lr=args.lr)
    c.checkpoint.every_steps = 1000
    if args.task == "coding":
        c.rl.update(max_tokens=args.max_tokens, group_size=4)
        c.rl.coding.update(max_turns=4, max_turn_tokens=96, slots=8, workers=2)
    return c


def run_rl(config, workdir: str, log) -> dict:
    """loop.train -> {'params' (host), 'steps', 'median_step_s'}."""
    out = loop.train(config, workdir, log=log)
    spans = [e for e in timeline.read(workdir) if e["name"] == "train_step"]
    step_s = [e["dur"] / 1e6 for e in spans[1:]]  # the first step compiles
    with open(os.path.join(workdir, "history.json"), "w") as f:  # per step: mtp_kl, acceptance
        json.dump(out["history"], f)
    return {
        "params": jax.device_get(out["state"].params),
        "steps": len(out["history"]),
        "median_step_s": statistics.median(step_s) if step_s else float("nan"),
        "history": out["history"],
    }


def measure(config, params, args) -> dict:
    """Acceptance and tokens per verify step on held-out tasks; with --timing, batch-1 decode
    seconds plain and speculative."""
    rl = config.rl.copy_and_resolve_references()
    rl.update(group_size=args.eval_group_size, seed=args.seed + 10_000)  # held-out pool
    cfg = loop.model_config(config)
    weights = FixedWeights(sampler_process.to_engine(params))
    tasks = [sampler_process.make_task(rl, j) for j in range(args.eval_groups)]
    sampler = sampler_process.make_sampler(rl, cfg)
    sampler.play(tasks, weights, seed=args.seed)
    out = {k: v for k, v in sampler.counters.items()}
    out.update(acceptance(sampler.counters))
    if args.timing:
        rl.group_size = 1
        for k in (0, args.k):
            rl.speculative_k = k
            one = sampler_process.make_sampler(rl, cfg)
            one.play(tasks[:1], weights, seed=args.seed)  # compiles
            t0 = time.perf_counter()
            for i, t in enumerate(tasks):
                one.play([t], weights, seed=args.seed + i)
            out[f"batch1_s_k{k}"] = time.perf_counter() - t0
        out["speedup"] = out["batch1_s_k0"] / out[f"batch1_s_k{args.k}"]
    return out


def plot(rows_by_seed: dict, path: str) -> None:
    """{seed: {row name: measure()}} -> bars of the mean over seeds, min-max whiskers, a dot per
    seed (one seed: its bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(next(iter(rows_by_seed.values())))
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, key in zip(axes, ("spec/acceptance", "spec/tokens_per_verify")):
        s = [over_seeds({seed: r[n][key] for seed, r in rows_by_seed.items()}) for n in names]
        mean = [x["mean"] for x in s]
        err = [[m - x["min"] for m, x in zip(mean, s)], [x["max"] - m for m, x in zip(mean, s)]]
        ax.bar(names, mean, yerr=err if len(rows_by_seed) > 1 else None, color=["gray", "C3", "C0"])
        for i, x in enumerate(s):
            ax.plot([i] * len(x["per_seed"]), list(x["per_seed"].values()), "k.", ms=4)
    axes[0].set_ylabel("acceptance (accepted / drafted)")
    axes[0].set_ylim(0, 1)
    axes[1].set_ylabel("tokens per verify step")
    for ax in axes:
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("MTP drafts through RL (bench/bench_rl_mtp.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_steps(root: str, path: str) -> None:
    """The samplers' acceptance at every RL step of every run saved under root (each run's
    history.json; a run dir's name says its variant: rl_w<term>_lr<lr>[_mtplr<heads' lr>]), one
    color per variant, one line per seed: reruns into the same --workdir add their runs."""
    import glob

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted(glob.glob(os.path.join(root, "**", "rl_w*", "history.json"), recursive=True))
    variants = sorted({os.path.basename(os.path.dirname(r)) for r in runs})
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labelled = set()
    for r in runs:
        name = os.path.basename(os.path.dirname(r))
        with open(r) as f:
            h = [e for e in json.load(f) if "spec/acceptance" in e]
        label = None if name in labelled else name  # one legend entry per variant
        labelled.add(name)
        color = f"C{variants.index(name)}"
        ax.plot([e["step"] for e in h], [e["spec/acceptance"] for e in h], color=color, label=label)
    ax.set_xlabel("RL step")
    ax.set_ylabel("samplers' acceptance (accepted / drafted)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="pattern", choices=("pattern", "coding"))
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--params", default="", help="start export ('' = random-init --preset)")
    ap.add_argument("--warm_steps", type=int, default=10)
    ap.add_argument("--rl_steps", type=int, default=12)
    ap.add_argument("--groups_per_batch", type=int, default=4)
    ap.add_argument("--k", type=int, default=2, help="MTP draft tokens per verify step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max_tokens", type=int, default=768)
    ap.add_argument("--eval_groups", type=int, default=8)
    ap.add_argument("--eval_group_size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timing", action="store_true", help="batch-1 speedups (quiet machine)")
    ap.add_argument("--workdir", default="runs/bench_rl_mtp")
    ap.add_argument("--out", default="bench/rl_mtp_acceptance.png")
    ap.add_argument("--group_size", type=int, default=0, help="rl.group_size (0: configs/rl.py's)")
    ap.add_argument("--seeds", default="", help="e.g. 100,101: all of it per seed, mean/min/max")
    ap.add_argument(
        "--mtp_lr",
        type=float,
        default=-1,
        help="RL runs' train.mtp_lr (0: --lr; < 0: the config's)",
    )
    ap.add_argument(
        "--weights", default="0,1", help="which RL runs: rl.mtp_weight 0 (no term), 1 (the term)"
    )
    tiny = dict(warm_steps=1, rl_steps=1, groups_per_batch=1, group_size=2, eval_groups=1)
    tmp = os.path.join(tempfile.gettempdir(), "bench_rl_mtp_tiny")
    args = parse_tiny(ap, dict(tiny, eval_group_size=2, workdir="", out=tmp + ".png"))
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="bench_rl_mtp_")
    args.pool = max(args.warm_steps, args.rl_steps) * args.groups_per_batch
    args.weights = {float(w) for w in args.weights.split(",")}
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    rows_by_seed, runs_by_seed = {}, {}
    for seed in seeds:
        args.seed = seed
        workdir = os.path.join(args.workdir, f"seed_{seed}") if args.seeds else args.workdir
        rows_by_seed[seed], runs_by_seed[seed] = run_seed(args, workdir)
    plot(rows_by_seed, args.out)
    plot_steps(args.workdir, args.out.removesuffix(".png") + "_steps.png")
    if args.seeds:
        print_over_seeds(rows_by_seed, runs_by_seed)


def print_over_seeds(rows_by_seed: dict, runs_by_seed: dict) -> None:
    """Each row's acceptance, tokens per verify step and last-step reward: mean, min, max."""
    print()
    for name in next(iter(rows_by_seed.values())):
        for key in ("spec/acceptance", "spec/tokens_per_verify"):
            s = over_seeds({seed: rows[name][key] for seed, rows in rows_by_seed.items()})
            print(seeds_line(f"{name}: {key}", s))
        if name in next(iter(runs_by_seed.values())):
            last = {seed: r[name]["history"][-1]["reward/mean"] for seed, r in runs_by_seed.items()}
            print(seeds_line(f"{name}: reward (last step)", over_seeds(last)))


def run_seed(args, workdir: str) -> tuple[dict, dict]:
    """Start, two RL runs and the three measurements for args.seed in workdir -> (rows, runs)."""
    log = lambda s: print(s, flush=True) if s.startswith(("rl:", "step")) else None  # noqa: E731
    start = os.path.join(workdir, "start")
    if not os.path.exists(os.path.join(start, "model_config.json")):
        c = base_config(args, args.params)
        if args.warm_steps:  # the MTP stage on the policy's own samples: trunk frozen
            # the heads at --lr here (train.mtp_lr 0), as before train.mtp_lr existed
            c.train.update(steps=args.warm_steps, trainable="mtp", mtp_mode="distill", mtp_lr=0.0)
            c.rl.mtp_weight = 1.0
            params = run_rl(c, os.path.join(workdir, "warm"), log)["params"]
        else:
            from train import trainer

            params = trainer.host_params(c, loop.model_config(c))
        save_params(start, loop.model_config(c), params)
    rows, runs = {}, {}
    cfg_start, params = load_params(start)
    # The start's measurement is seeded (tasks, sampler): saved, so a rerun that only adds an RL
    # variant does not play the held-out tasks again (not with --timing: timings are not kept).
    key = f"{args.eval_groups}x{args.eval_group_size}_k{args.k}_t{args.temperature:g}"
    before = os.path.join(start, f"before_{key}_m{args.max_tokens}_s{args.seed}.json")
    if os.path.exists(before) and not args.timing:
        with open(before) as f:
            rows["before RL"] = json.load(f)
    else:
        rows["before RL"] = measure(base_config(args, start), params, args)
        with open(before, "w") as f:
            json.dump(rows["before RL"], f, default=float)
    runs_wanted = ((0.0, "RL, no MTP term"), (1.0, "RL + MTP term"))
    for w, name in (r for r in runs_wanted if r[0] in args.weights):
        c = base_config(args, start)
        c.rl.mtp_weight = w
        c.train.steps = args.rl_steps
        if args.mtp_lr >= 0:
            c.train.mtp_lr = args.mtp_lr
        heads = f"_mtplr{c.train.mtp_lr:g}" if c.train.mtp_lr else ""
        runs[name] = run_rl(c, os.path.join(workdir, f"rl_w{w:g}_lr{args.lr:g}{heads}"), log)
        rows[name] = measure(c, runs[name]["params"], args)
    print(f"\n{args.rl_steps} RL steps, task {args.task}, K={args.k}, seed {args.seed}\n")
    print(
        "| params | acceptance | tokens / verify step | batch-1 speedup | reward (last step) | "
        "median RL step |"
    )
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        run = runs.get(name)
        reward = f"{run['history'][-1]['reward/mean']:.3f}" if run else "-"
        step = f"{run['median_step_s'] * 1e3:.0f} ms" if run else "-"
        speed = f"{r['speedup']:.2f}x" if "speedup" in r else "-"
        print(f"| {name} | {r['spec/acceptance']:.3f} | {r['spec/tokens_per_verify']:.3f} | "
            f"{speed} | {reward} | {step} |")  # fmt: skip
    print(
        json.dumps(
            {"rows": rows, "median_step_s": {n: r["median_step_s"] for n, r in runs.items()}}
        )
    )
    return rows, runs


if __name__ == "__main__":
    main()
