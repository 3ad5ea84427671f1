"""Where an asynchronous RL run waits (issue 44, point 4): one real run's timeline as a picture, the
idle fraction of each role, and steps per minute.

    python bench/bench_rl_timeline.py                                   # coding task, tiny, small
    python bench/bench_rl_timeline.py --steps 12 --extra --config.rl.samplers=2 \\
        --config.rl.mode=processes                                      # the same with a change
    python bench/bench_rl_timeline.py --plot_only RUN_DIR               # re-render a run's timeline
    python bench/bench_rl_timeline.py --tiny       # smoke: 1 step, 1-turn episodes, a /tmp workdir

Runs `main.py --mode=rl` (a subprocess: the production entry) with configs/rl.py's coding task on
a small pool (random-init tiny: episodes end malformed quickly; give --extra
--config.init_params_from=DIR for a trained start), then reads RUN_DIR/timeline.json
(rl/episodes/timeline.py: spans per process and thread) and writes RUN_DIR/timeline.png (one row per
thread; idle spans hatched), printing one JSON line: idle fraction per role, median span seconds
by name, steps per minute (trainer steps over the wall time from the first train_step to the
last, i.e. without start-up and compilation) and the share of the trainer's wall time per span
name. Timings: compare runs only on a quiet machine (spans are wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

from bench.common import parse_tiny  # noqa: E402
from rl.episodes import timeline  # noqa: E402

COLORS = {
    "generate": "C0",
    "weight_fetch": "C1",
    "sandbox_wait": "C7",
    "wait_trainer": "C7",
    "put_groups": "C4",
    "train_step": "C2",
    "publish": "C1",
    "after_step": "C5",
    "wait_batch": "C7",
}


def run(args) -> str:
    workdir = args.workdir
    cmd = [
        sys.executable,
        "main.py",
        "--mode=rl",
        "--config=configs/rl.py",
        f"--workdir={workdir}",
        "--config.rl.task=coding",
        f"--config.rl.pool_size={args.steps * 2}",
        "--config.rl.group_size=2",
        "--config.rl.groups_per_batch=2",
        "--config.rl.groups_per_call=2",
        "--config.rl.max_ahead=4",
        "--config.rl.max_tokens=768",
        f"--config.rl.coding.max_turns={args.max_turns}",
        "--config.rl.coding.max_turn_tokens=48",
        "--config.train.log_every=1",
    ] + args.extra
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, PYTHONPATH=ROOT))
    return workdir


def summarize(workdir: str) -> dict:
    with open(os.path.join(workdir, "timeline.json")) as f:
        trace = json.load(f)
    timeline.check(trace)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    steps = sorted((e for e in spans if e["name"] == "train_step"), key=lambda e: e["ts"])
    out = {"idle": timeline.idle_fractions(spans), "steps": len(steps)}
    if len(steps) > 2:  # from the end of the first (compiling) step to the end of the last
        t0 = steps[0]["ts"] + steps[0]["dur"]
        t1 = steps[-1]["ts"] + steps[-1]["dur"]
        out["steps_per_min"] = 60 * (len(steps) - 1) / ((t1 - t0) / 1e6)
        trainer = [e for e in spans if e["args"]["role"].startswith("trainer") and e["ts"] >= t0]
        wall = (t1 - t0) / 1e6
        share = {}
        for e in timeline._outermost(trainer):
            share[e["name"]] = share.get(e["name"], 0.0) + e["dur"] / 1e6 / wall
        out["trainer_share"] = share
    names = sorted({e["name"] for e in spans})
    out["median_s"] = {
        n: statistics.median(e["dur"] / 1e6 for e in spans if e["name"] == n) for n in names
    }
    return out


def plot(workdir: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(workdir, "timeline.json")) as f:
        spans = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    start = min(e["ts"] for e in spans)
    rows = sorted({(e["args"]["role"], e["pid"], e["tid"]) for e in spans})
    fig, ax = plt.subplots(figsize=(12, 1 + 0.6 * len(rows)))
    for y, (_role, pid, tid) in enumerate(rows):
        mine = [e for e in spans if (e["pid"], e["tid"]) == (pid, tid)]
        for e in timeline._outermost(mine) + [
                e for e in mine
                if e["name"] in ("sandbox_wait", "weight_fetch", "publish")]:  # fmt: skip
            nested = e["name"] in ("sandbox_wait", "weight_fetch", "publish")
            ax.broken_barh(
                [((e["ts"] - start) / 1e6, e["dur"] / 1e6)],
                (y - (0.2 if nested else 0.4), 0.4 if nested else 0.8),
                color=COLORS.get(e["name"], "C9"),
                hatch="//" if e["name"] in timeline.IDLE else None,
                alpha=0.5 if e["name"] in timeline.IDLE else 0.9,
            )
    ax.set_yticks(range(len(rows)), [f"{r[0]} ({r[1]})" for r in rows])
    ax.set_xlabel("seconds since the first span")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    fig.legend(handles, list(COLORS), ncol=9, fontsize=7, loc="lower center")
    ax.set_title("async RL timeline (rl/episodes/timeline.py; hatched: idle)")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--workdir", default="runs/bench_rl_timeline")
    ap.add_argument("--plot_only", default="")
    ap.add_argument("--out", default="", help="PNG path ('' = RUN_DIR/timeline.png)")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more main.py flags")
    ap.add_argument("--max_turns", type=int, default=3, help="turns per coding episode")
    args = parse_tiny(ap, dict(steps=1, max_turns=1, workdir=""))
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="bench_rl_timeline_")
    workdir = args.plot_only or run(args)
    plot(workdir, args.out or os.path.join(workdir, "timeline.png"))
    print(json.dumps(summarize(workdir)))


if __name__ == "__main__":
    main()
