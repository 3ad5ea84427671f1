"""SFT traces of the scripted expert (rl/envs/repos/expert.py) on mined real-repository tasks.

    python -m rl.envs.repos.training_pool --out /tmp/pool.jsonl --per-project 120   # mine (sandbox)
    python -m rl.envs.repo_traces --pool /tmp/pool.jsonl --out data/traces/repo_expert_traces.jsonl

The committed traces: `--pool data/repos/expert_pool.jsonl --per-task 4` (rl/envs/README.md).

Every trace is one CodingEnv episode (the RL environment: its system prompt with the search
tools, its sandbox, its tool-output trim at the default obs_token_budget) of a task rebuilt from a
recipe of a training repository, played by ExpertPolicy. Kept only when the episode ends in
`submit`, has no malformed call, the real grader passes every hidden test untampered, the tool
errors are exactly the planned mistake's, and the chat messages render (data/chat.py) to exactly
the episode's token ids. Output is a function of the pool file (in play_order) and these
arguments: trace k of a recipe uses statement variant ("full", "terse")[k % 2] and the rng
Random("<recipe id>:<k>") (its flow, and a mistake with probability --mistake-rate).

Resumable: every played job (recipe, k) is appended to OUT.progress as it ends, so a killed run
loses only the episodes in flight; a rerun with the same --mistake-rate plays only the jobs not in
it (runs under --time-budget add up, a larger pool extends), and OUT holds the traces of every
played job of this pool, in job order. Delete OUT.progress after changing the expert.

Refused (one line, exit 2) before anything is written: a trace whose project is held out by
repository (holdout.HELD_OUT_REPOS when this runs) or whose task is a committed suite task (held
out by site).

Fields: id, task, project, recipe (mine.Recipe as a dict: rebuild with mine.build_task),
statement ("full" | "terse"), mistake (None | expert.MISTAKES), grade [passed, total], tools,
tokens (the episode's byte tokens), messages (a mistaken turn has "weight": 0).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np

from data.chat import render_messages
from data.tokenizers import ByteTokenizer
from rl.envs import CodingEnv, require_isolation, run_episode
from rl.envs.isolation.dep_cache import MissingTestDeps
from rl.envs.repos import holdout
from rl.envs.repos import mine as M
from rl.envs.repos.expert import MISTAKES, ExpertPolicy, GaveUp
from rl.envs.repos.training_pool import load_pool, suite_ids
from rl.envs.repos.vendored import load_spec, project_files, require_test_deps
from rl.envs.traces import record_to_messages, system_prompt

STATEMENTS = ("full", "terse")


def recipe_task(recipe: M.Recipe, statement: str = "full"):
    """The Task of a recipe, its prompt the chosen statement variant (mine.statements)."""
    task = M.build_task(recipe, project_files(recipe.project), load_spec(recipe.project))
    return dataclasses.replace(task, prompt=task.meta["statements"][statement])


def plan_of(recipe: M.Recipe, k: int, mistake_rate: float) -> tuple[str, str | None, random.Random]:
    """(statement, mistake, rng) of trace k of `recipe`: seeded by the recipe id and k."""
    rng = random.Random(f"{recipe.id}:{k}")
    mistake = rng.choice(MISTAKES) if rng.random() < mistake_rate else None
    return STATEMENTS[k % len(STATEMENTS)], mistake, rng


def expert_trace(
    recipe: M.Recipe, k: int = 0, mistake_rate: float = 0.0
) -> tuple[dict | None, str]:
    """(trace, outcome): outcome "solved" (trace kept), "gave_up" (the expert did not find the
    code in the tools' output) or "failed: <why>" (played, not solved cleanly)."""
    statement, mistake, rng = plan_of(recipe, k, mistake_rate)
    task = recipe_task(recipe, statement)
    tok = ByteTokenizer()
    policy = ExpertPolicy(tok, task, rng, mistake)
    try:
        rec = run_episode(CodingEnv(tok), task, policy)
    except GaveUp as e:
        return None, f"gave_up: {e}"
    messages = record_to_messages(tok, rec, policy.plan, task.prompt, system_prompt(task))
    errors = sum(m["role"] == "tool" and m["content"].startswith("error:") for m in messages)
    want_errors = 1 if mistake == "edit_old" else 0
    if rec.done_reason != "submit" or rec.malformed_calls or rec.tampered or not rec.all_pass:
        return None, f"failed: {rec.done_reason}, {rec.tests_passed}/{rec.tests_total} passed"
    if errors != want_errors:
        return None, f"failed: {errors} tool errors, planned {want_errors}"
    if render_messages(tok, messages)[0] != rec.tokens:
        return None, "failed: messages do not render to the episode's ids"
    trace = {
        "id": f"expert-{recipe.id}-{k}",
        "task": task.id,
        "project": recipe.project,
        "recipe": recipe.to_dict(),
        "statement": statement,
        "mistake": mistake,
        "grade": [rec.tests_passed, rec.tests_total],
        "tools": list(task.meta["tools"]),
        "tokens": len(rec.tokens),
        "messages": messages,
    }
    return trace, "solved"


def play_order(recipe: M.Recipe) -> str:
    """Recipes are played in the order of their ids' site digest (mine.site_id: project-op-digest),
    so any prefix (--limit, --time-budget) mixes projects and operators."""
    return recipe.id.rsplit("-", 1)[-1]


def check_training_only(traces, held_out=None, suite=None) -> None:
    """Raises ValueError (one line) on a trace from a held-out repository or a suite task."""
    held = set(holdout.HELD_OUT_REPOS if held_out is None else held_out)
    suite = suite_ids() if suite is None else suite
    for t in traces:
        if t["project"] in held or t["recipe"]["project"] in held:
            raise ValueError(f"trace {t['id']} is from held-out repository {t['project']!r}")
        if t["task"] in suite:
            raise ValueError(f"trace {t['id']} is of held-out suite task {t['task']!r}")


def write_traces(path: str, traces: list[dict], held_out=None) -> None:
    """Checks every trace is from training repositories, then writes them whole (tmp + rename)."""
    check_training_only(traces, held_out)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for t in traces:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def summary(outcomes: list[str], traces: list[dict]) -> str:
    """Solve rate, token lengths, count per project and mistake fraction (markdown lines)."""
    counts = Counter(o.split(":")[0] for o in outcomes)
    played = len(outcomes) - counts["gave_up"]
    lines = [
        f"attempts {len(outcomes)}: solved {counts['solved']}, failed {counts['failed']}, "
        f"gave up (code not found from the tools' output) {counts['gave_up']}; "
        f"solve rate of played episodes {counts['solved'] / max(played, 1):.3f}"
    ]
    if traces:
        n = np.array([t["tokens"] for t in traces])
        p50, p90 = np.percentile(n, [50, 90])
        lines.append(f"tokens (byte): p50 {p50:.0f}, p90 {p90:.0f}, max {n.max()}")
        lines.append(f"per project: {dict(sorted(Counter(t['project'] for t in traces).items()))}")
        mis = Counter(t["mistake"] for t in traces if t["mistake"])
        lines.append(f"with a mistake: {sum(mis.values())} of {len(traces)} {dict(mis)}")
    return "\n".join(lines)


def progress_path(out: str) -> str:
    return out + ".progress"


def load_progress(path: str, mistake_rate: float) -> tuple[dict[str, tuple], int]:
    """({job id: (trace | None, outcome)}, lines cut short) of the jobs an earlier run played.
    A line cut short by a kill is dropped (its job is played again). Raises ValueError (one line)
    when the earlier run used another --mistake-rate: its traces would not be this run's."""
    if not os.path.exists(path):
        return {}, 0
    done, cut = {}, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                cut += 1
                continue
            if row["mistake_rate"] != mistake_rate:
                raise ValueError(
                    f"{path} was written with --mistake-rate {row['mistake_rate']}, not "
                    f"{mistake_rate}: rerun with that rate or delete the file to start over"
                )
            done[row["job"]] = (row["trace"], row["outcome"])
    return done, cut


def job_id(recipe: M.Recipe, k: int) -> str:
    return f"{recipe.id}#{k}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rl.envs.repo_traces", description=__doc__)
    p.add_argument("--pool", required=True, help="recipes (python -m rl.envs.repos.training_pool)")
    p.add_argument("--out", default="data/traces/repo_expert_traces.jsonl")
    p.add_argument("--per-task", type=int, default=2, help="traces per recipe (variants)")
    p.add_argument("--mistake-rate", type=float, default=0.25)
    p.add_argument("--limit", type=int, default=0, help="first N recipes by id (0 = all)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--time-budget", type=float, default=0, help="seconds; later jobs are skipped (0 = none)"
    )
    a = p.parse_args(argv)
    require_isolation()
    recipes = sorted(load_pool(a.pool), key=play_order)[: a.limit or None]
    try:  # refuse a pool that holds a held-out project before playing anything
        check_training_only(
            [
                {"id": r.id, "project": r.project, "recipe": r.to_dict(), "task": r.id}
                for r in recipes
            ]
        )
        require_test_deps({r.project for r in recipes})  # cached here, or stop before playing
    except (ValueError, MissingTestDeps) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    jobs = [(r, k) for r in recipes for k in range(a.per_task)]
    try:  # jobs an earlier run (killed, over its budget, or a smaller pool) already played
        played, cut = load_progress(progress_path(a.out), a.mistake_rate)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    reused = sum(job_id(r, k) in played for r, k in jobs)
    print(f"{reused} of {len(jobs)} jobs played before ({progress_path(a.out)}; {cut} cut short)")
    t0 = time.monotonic()

    def play(job):
        if a.time_budget and time.monotonic() - t0 > a.time_budget:
            return None, "skipped"
        return expert_trace(job[0], job[1], a.mistake_rate)

    # Every played job is appended to the progress file as it ends, so a killed run loses only
    # the episodes in flight; the output is written whole, in job order, at the end.
    pool = ThreadPoolExecutor(a.workers)  # sandboxed commands overlap in threads
    try:
        with open(progress_path(a.out), "a", encoding="utf-8") as progress:
            if cut and progress.tell():  # end the line a kill cut short before appending
                progress.write("\n")
            futures = {pool.submit(play, j): j for j in jobs if job_id(*j) not in played}
            for future in as_completed(futures):
                (trace, outcome), (r, k) = future.result(), futures[future]
                if outcome == "skipped":  # over the time budget: not played, not counted
                    continue
                row = {"job": job_id(r, k), "mistake_rate": a.mistake_rate, "outcome": outcome}
                progress.write(json.dumps({**row, "trace": trace}, ensure_ascii=False) + "\n")
                progress.flush()
                played[job_id(r, k)] = (trace, outcome)
                print(f"{r.id} #{k}: {outcome}", flush=True)
    finally:  # Ctrl-C or an error: the episodes in flight end, the queued ones are not started
        pool.shutdown(wait=True, cancel_futures=True)
    results = [played[job_id(*j)] for j in jobs if job_id(*j) in played]
    traces = [trace for trace, _ in results if trace]
    outcomes = [outcome for _, outcome in results]
    write_traces(a.out, traces)
    print(summary(outcomes, traces))
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{len(traces)} traces -> {a.out} ({os.path.getsize(a.out) / 1e6:.2f} MB), "
        f"{time.monotonic() - t0:.0f} s, {a.workers} workers, load {load} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
