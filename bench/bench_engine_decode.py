"""RolloutEngine decode cost (ms per decode iteration, every slot active), optionally side by side
with another git revision of this repo in alternating subprocesses (the machine is shared):

    python bench/bench_engine_decode.py [--slots 8,16] [--cache_len 2048] [--rounds 3]
    python bench/bench_engine_decode.py --against 53845dd    # this tree vs that commit

The model is bench_rl_coding's `tiny4` preset (bench/common.py) (random init, float32), the RL sampler's shape: what
the coding RL loop decodes with. Each slot is prefilled with a 59-token prompt, then decodes in
calls of 16 iterations (as the rollout driver calls the engine between turns); no stop tokens, so
every slot stays active. `--against REV` checks REV out into a temporary git worktree and runs
the same measurement there, alternating old/new each round.
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
import jax, jax.numpy as jnp
from model import init_params, presets
from model.engine import RolloutEngine
cfg = dataclasses.replace(
    presets.get("tiny"), **{overrides!r}, max_position_embeddings={cache_len}, dtype="float32"
)
params = init_params(cfg, jax.random.PRNGKey(0))
for slots in {slots!r}:
    eng = RolloutEngine(cfg, params, slots=slots, cache_len={cache_len}, temperature=0.5, seed=0)
    for i in range(slots):
        eng.submit(i, list(range(1, 60)), max_new={cache_len} - 100, stop_tokens=[])
    eng.step(4)
    eng.step(16)  # compiled and warm
    jax.block_until_ready(eng.state.tokens)
    t0 = time.perf_counter()
    for _ in range(16):
        eng.step(16)
    jax.block_until_ready(eng.state.tokens)
    print(f"slots {{slots}}: {{(time.perf_counter() - t0) / 256 * 1e3:.3f}} ms/iter", flush=True)
"""


def measure(root: str, slots: list[int], cache_len: int) -> dict[int, float]:
    sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]
    from common import RL_CODING_PRESETS  # noqa: PLC0415

    code = MEASURE.format(
        root=root, overrides=RL_CODING_PRESETS["tiny4"], cache_len=cache_len, slots=tuple(slots)
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    if out.returncode:
        raise RuntimeError(f"measurement in {root} failed:\n{out.stderr[-2000:]}")
    return {int(s): float(ms) for s, ms in re.findall(r"slots (\d+): ([\d.]+) ms/iter", out.stdout)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", default="8,16")
    ap.add_argument("--cache_len", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", default="", help="git revision to measure side by side")
    args = ap.parse_args()
    slots = [int(s) for s in args.slots.split(",")]
    trees = {"this tree": ROOT}
    tmp = None
    if args.against:
        tmp = tempfile.mkdtemp(prefix="bench_engine_decode_")
        subprocess.run(
            ["git", "-C", ROOT, "worktree", "add", "--detach", tmp, args.against],
            check=True,
            capture_output=True,
        )
        trees = {args.against: tmp, "this tree": ROOT}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    runs: dict[tuple[str, int], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, root in trees.items():
                for s, ms in measure(root, slots, args.cache_len).items():
                    runs.setdefault((name, s), []).append(ms)
    finally:
        if tmp:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tmp], check=False)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\n| tree | slots | ms per decode iteration (cache {args.cache_len}), each round |")
    print("|---|---|---|")
    for (name, s), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"| {name} | {s} | {' / '.join(f'{x:.2f}' for x in v)} |")
    if args.against:
        for s in slots:
            ratio = sum(runs[("this tree", s)]) / sum(runs[(args.against, s)])
            print(f"slots {s}: this tree / {args.against} = {ratio:.2f} of the time")


if __name__ == "__main__":
    main()
