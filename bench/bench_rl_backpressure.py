"""Groups dropped as stale by the asynchronous RL loop in processes mode (issue 44, point 5).

    python bench/bench_rl_backpressure.py                       # this checkout
    python bench/bench_rl_backpressure.py --repo /tmp/main_copy # another tree (e.g. before the fix:
                                                                #  git archive main | tar -x -C DIR)
    python bench/bench_rl_backpressure.py --pool 48 --groups 4 --max_ahead 8 --max_staleness 4
                                                                # configs/rl.py's defaults
    python bench/bench_rl_backpressure.py --tiny                # smoke: pool 2, 1 sampler, 1 group

Runs `main.py --mode=rl` (toy 'pattern' task, tiny preset) in processes mode: one trainer process
(fsdp over 2 CPU devices) and --samplers sampler processes (each its own 2-device mesh, tensor 2),
by default the multi-process test's settings (pool 36, 2 groups a batch and a call, max_ahead 6,
max_staleness 3), and prints one JSON line: groups dropped as stale / pool, the staleness
histogram of the trained groups (journal.jsonl) and steps per minute (wall time of the trainer's
steps: a timing, compare only runs on a quiet machine). The dropped count is a count: it depends
on how much faster the samplers are than the trainer, not on absolute speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(repo: str, workdir: str, args) -> dict:
    cmd = [
        sys.executable,
        "main.py",
        "--mode=rl",
        "--config=configs/rl.py",
        f"--workdir={workdir}",
        "--config.mesh.data=1",
        "--config.mesh.fsdp=2",
        "--config.rl.mode=processes",
        f"--config.rl.samplers={args.samplers}",
        "--config.rl.sampler_devices=2",
        f"--config.rl.pool_size={args.pool}",
        f"--config.rl.groups_per_batch={args.groups}",
        f"--config.rl.groups_per_call={args.groups}",
        f"--config.rl.max_ahead={args.max_ahead}",
        f"--config.rl.max_staleness={args.max_staleness}",
        "--config.train.log_every=1",
        "--config.checkpoint.every_steps=1000",
        f"--config.rl.compile_cache={os.path.join(workdir, 'xla')}",
    ]
    env = dict(
        os.environ,
        PYTHONPATH=repo,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(
            f"rl run failed ({out.returncode}):\n{out.stdout[-3000:]}{out.stderr[-3000:]}"
        )
    line = [ln for ln in out.stdout.splitlines() if "groups dropped" in ln][-1]
    dropped = int(line.split("groups dropped")[0].split(",")[-1].split()[0])
    with open(os.path.join(workdir, "journal.jsonl")) as f:
        journal = [json.loads(ln) for ln in f if ln.strip()]
    stal = [s for e in journal for s in e["staleness"]]
    return {
        "repo": repo,
        "pool": args.pool,
        "max_ahead": args.max_ahead,
        "max_staleness": args.max_staleness,
        "groups_per_batch": args.groups,
        "samplers": args.samplers,
        "dropped": dropped,
        "dropped_fraction": dropped / args.pool,
        "steps": len(journal),
        "staleness_hist": {str(s): stal.count(s) for s in sorted(set(stal))},
        "wall_s": round(wall, 1),
        "steps_per_min_incl_startup": round(60 * len(journal) / wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--pool", type=int, default=36)
    ap.add_argument("--samplers", type=int, default=2)
    ap.add_argument("--max_ahead", type=int, default=6)
    ap.add_argument("--max_staleness", type=int, default=3)
    ap.add_argument("--groups", type=int, default=2, help="groups per batch and per play call")
    ap.add_argument("--workdir", default="")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.common import parse_tiny

    args = parse_tiny(ap, dict(pool=2, samplers=1, groups=1, max_ahead=1, max_staleness=1))
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_backpressure_")
    print(json.dumps(run(os.path.abspath(args.repo), workdir, args)))


if __name__ == "__main__":
    main()
