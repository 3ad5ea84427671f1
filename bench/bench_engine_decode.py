"""RolloutEngine decode cost (ms per decode iteration, every slot active) and the cost of extending
one slot by an observation at several contexts (prefill), optionally side by side with another git
revision of this repo in alternating subprocesses (the machine is shared):

    python bench/bench_engine_decode.py [--slots 8,16] [--cache_len 2048] [--rounds 3]
        [--contexts 256,1024,1792] [--obs 200]
    python bench/bench_engine_decode.py --against 53845dd    # this tree vs that commit
    python bench/bench_engine_decode.py --tiny     # smoke: 2 slots, cache 512, context 64, 1 call

The model is bench_rl_coding's `tiny4` preset (model/presets.py) (random init, float32), the RL
sampler's shape: what the coding RL loop decodes with. Each slot is prefilled with a 59-token
prompt, then decodes in calls of 16 iterations (as the rollout driver calls the engine between
turns); no stop tokens, so every slot stays active. The decode-at-context check fills 8 slots with
ctx-token prompts and decodes turns of <= 192 tokens (the coding sampler's budget), so the decode's
cache window (model/engine/) is sized to ctx + 192; the first check's turns may run to the cache's
end. The prefill check submits a ctx-token prompt to one slot, then times `extend` by --obs tokens
plus the one decode iteration that runs it (best of 3 after a compiling first). `--against REV`
checks REV out into a temporary git worktree and runs the same measurement there, alternating
old/new each round.
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
def ms_per_iteration(slots, prompt, max_new, calls):  # every slot holds prompt, decodes, no stops
    eng = RolloutEngine(cfg, params, slots=slots, cache_len={cache_len}, temperature=0.5, seed=0)
    for i in range(slots):
        eng.submit(i, prompt, max_new=max_new, stop_tokens=[])
    eng.step(4)
    eng.step(16)  # compiled and warm
    jax.block_until_ready(eng.state.tokens)
    t0 = time.perf_counter()
    for _ in range(calls):
        eng.step(16)
    jax.block_until_ready(eng.state.tokens)
    return (time.perf_counter() - t0) / (16 * calls) * 1e3
for slots in {slots!r}:
    ms = ms_per_iteration(slots, list(range(1, 60)), {cache_len} - 100, {calls})
    print(f"slots {{slots}}: {{ms:.3f}} ms/iter", flush=True)
for ctx in {contexts!r}:  # 8 slots holding ctx tokens each, in turns of <= 192 tokens (the
    # coding sampler's budget): the decode window is sized to ctx + 192, not to the cache
    ms = ms_per_iteration(8, [1 + j % 200 for j in range(ctx)], 192, max({calls} // 2, 1))
    # 20 + 16 x 8 = 148 iterations < 192 at the default 16 calls
    print(f"decode at {{ctx}}: {{ms:.3f}} ms/iter", flush=True)
eng = RolloutEngine(cfg, params, slots=8, cache_len={cache_len}, temperature=0.5, seed=0)
for ctx in {contexts!r}:  # one observation of {obs} tokens extended onto a context of ctx tokens
    times = []
    for rep in range(4):
        eng.submit(rep, [1 + i % 200 for i in range(ctx)], max_new=1, stop_tokens=[])
        eng.step(1)
        jax.block_until_ready(eng.state.tokens)
        t0 = time.perf_counter()
        eng.extend(rep, [5] * {obs}, max_new=1, stop_tokens=[])
        eng.step(1)
        jax.block_until_ready(eng.state.tokens)
        times.append(time.perf_counter() - t0)
        eng.finish(rep)
    print(f"prefill at {{ctx}}: {{min(times[1:]) * 1e3:.3f}} ms", flush=True)  # rep 0 compiles
"""


def measure(
    root: str, slots: list[int], cache_len: int, contexts: list[int], obs: int, calls: int = 16
) -> dict:
    sys.path[:0] = [ROOT]
    from model import presets

    code = MEASURE.format(
        root=root,
        overrides=presets.overrides("tiny4"),
        cache_len=cache_len,
        slots=tuple(slots),
        contexts=tuple(contexts),
        obs=obs,
        calls=calls,
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    if out.returncode:
        raise RuntimeError(f"measurement in {root} failed:\n{out.stderr[-2000:]}")
    got = {
        f"decode iteration, {s} slots": float(ms)
        for s, ms in re.findall(r"slots (\d+): ([\d.]+) ms/iter", out.stdout)
    }
    for c, ms in re.findall(r"decode at (\d+): ([\d.]+) ms/iter", out.stdout):
        got[f"decode iteration, 8 slots at context {c} (turns <= 192)"] = float(ms)
    for c, ms in re.findall(r"prefill at (\d+): ([\d.]+) ms", out.stdout):
        got[f"{obs}-token prefill + 1 decode at context {c}"] = float(ms)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", default="8,16")
    ap.add_argument("--cache_len", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--contexts", default="256,1024,1792", help="contexts of the prefill check")
    ap.add_argument("--obs", type=int, default=200, help="observation tokens prefilled per check")
    ap.add_argument("--against", default="", help="git revision to measure side by side")
    ap.add_argument("--calls", type=int, default=16, help="timed engine calls of 16 iterations")
    sys.path.insert(0, ROOT)
    from bench.common import parse_tiny

    args = parse_tiny(ap, dict(slots="2", cache_len=512, rounds=1, contexts="64", obs=8, calls=1))
    slots = [int(s) for s in args.slots.split(",")]
    contexts = [int(c) for c in args.contexts.split(",")]
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
    runs: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, root in trees.items():
                for what, ms in measure(
                    root, slots, args.cache_len, contexts, args.obs, args.calls
                ).items():
                    runs.setdefault((name, what), []).append(ms)
    finally:
        if tmp:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tmp], check=False)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\n| tree | what (cache {args.cache_len}) | ms, each round |")
    print("|---|---|---|")
    for (name, what), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"| {name} | {what} | {' / '.join(f'{x:.2f}' for x in v)} |")
    if args.against:
        for what in sorted({w for _, w in runs}):
            ratio = sum(runs[("this tree", what)]) / sum(runs[(args.against, what)])
            print(f"{what}: this tree / {args.against} = {ratio:.2f} of the time")


if __name__ == "__main__":
    main()
