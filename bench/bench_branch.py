"""Best-of-K from a shared mid-episode prefix (rl/sampling/rollout.py `prefix_turns`) vs K fresh
episodes.

    python bench/bench_branch.py                          # 4 tasks x K=4, 2-turn prefix, tiny
    python bench/bench_branch.py --groups 2 --k 2 --repeats 1   # a quick check
    python bench/bench_branch.py --tiny     # smoke: 1 task x K=2, 1-turn prefix, 2 short turns

Each task's group of K episodes plays the same teacher-forced prefix (the oracle's first N turns:
list_files, then its first edit) and then samples (temperature 1, up to `--max_turns`). "fresh"
plays K full episodes per task (the prefix decoded and its tool calls run K times); "branched"
plays the prefix once, snapshots it (rl/envs/agent/snapshot.py) and branches K episodes from it.
Both run on the same engine settings (tiny preset, float32 on CPU), the first repeat of each after a
warm-up run that compiles the programs. Printed per mode (medians over repeats): wall seconds,
decode / prefill / sandbox seconds, decode iterations, slot-steps (decoded tokens summed over
slots: the decode compute), tool calls run and the driver's shared-prefix counters; then the
branched / fresh ratios. The prefix saves slot-steps and tool calls always, and wall time only
when the slots are full (K fresh prefixes decode side by side in one batch otherwise): hence 4
groups x K=4 on 8 slots by default. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from bench.common import parse_tiny  # noqa: E402
from data.tokenizers import ByteTokenizer  # noqa: E402
from model import init_params, presets  # noqa: E402
from model.engine import RolloutEngine  # noqa: E402
from rl.envs import OraclePolicy, generate_tasks, require_isolation  # noqa: E402
from rl.envs.agent import tools  # noqa: E402
from rl.sampling.rollout import play_episodes  # noqa: E402


class Prefix:
    """The oracle's first `n` turns, teacher-forced; then [] (the model samples)."""

    def __init__(self, tok, task, n: int):
        self.turns = OraclePolicy(tok, task)._turns[:n]

    def __call__(self, context):
        return self.turns.pop(0) if self.turns else []


def play(cfg, params, tok, tasks, args, prefix_turns: int, calls: collections.Counter) -> dict:
    eng = RolloutEngine(
        cfg,
        params,
        slots=args.slots,
        cache_len=2048,
        temperature=1.0,
        valid_vocab=tok.vocab_size,
        min_bucket=128,
    )
    calls.clear()
    out = play_episodes(
        eng,
        tok,
        tasks,
        group_size=args.k,
        max_turn_tokens=args.max_turn_tokens,
        env_kwargs=dict(max_turns=args.max_turns),
        scripted=lambda t: Prefix(tok, t, args.prefix),
        prefix_turns=prefix_turns,
        log_every_s=0,
    )
    s = out.stats
    keys = ("wall_s", "decode_s", "prefill_s", "sandbox_s", "iterations", "slot_steps", "errors")
    row = {k: s[k] for k in keys}
    row.update({k: s[k] for k in ("branched_groups", "shared_prefix_tokens", "shared_tool_calls")})
    row.update(tool_calls=sum(calls.values()), records=len(out.records))
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--prefix", type=int, default=2, help="prefix turns (teacher-forced)")
    p.add_argument("--max_turns", type=int, default=4)
    p.add_argument("--max_turn_tokens", type=int, default=64)
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    tiny = dict(groups=1, k=2, prefix=1, max_turns=2, max_turn_tokens=16, slots=2, repeats=1)
    args = parse_tiny(p, tiny)
    require_isolation()
    tok = ByteTokenizer()
    cfg = presets.get("tiny", max_position_embeddings=4096)
    params = init_params(cfg, jax.random.PRNGKey(0))
    tasks = generate_tasks(args.groups, seed=0, templates=("off_by_one", "boundary"))
    calls, lock, execute = collections.Counter(), threading.Lock(), tools.execute

    def counting(sandbox, call, **kw):
        with lock:
            calls[call.name] += 1
        return execute(sandbox, call, **kw)

    tools.execute = counting  # counts every tool call the environments run
    play(cfg, params, tok, tasks, args, args.prefix, calls)  # warm-up: compiles
    rows = {}
    for mode, n in (("fresh", 0), ("branched", args.prefix)):
        runs = [play(cfg, params, tok, tasks, args, n, calls) for _ in range(args.repeats)]
        rows[mode] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(json.dumps({"mode": mode, **rows[mode]}))
    ratio = {
        k: rows["branched"][k] / max(rows["fresh"][k], 1e-9)
        for k in ("wall_s", "decode_s", "iterations", "slot_steps", "sandbox_s", "tool_calls")
    }
    print(json.dumps({"branched/fresh": ratio}))


if __name__ == "__main__":
    main()
