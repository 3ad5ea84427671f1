"""Real-repository environments: snapshot / restore vs fresh setup, per vendored project.

    python bench/bench_repos.py                       # every project, 5 repeats, K=4 branches
    python bench/bench_repos.py --projects roman --repeats 2
    python bench/bench_repos.py --tiny          # smoke: the first project, 1 repeat, K=2
    python bench/bench_repos.py --scale dist/*.tar.gz --workers 2    # issue 50's scale table
    python bench/bench_repos.py --scale dist/six-1.16.0.tar.gz --tiny  # one source, 2 tasks

For each project (data/repos/vendor, spec in data/repos/specs) it times, on a quiet machine:
- fresh: what an episode start costs without snapshots: a Sandbox from the repo's files plus the
  spec's setup commands (CodingEnv.reset on the project's first suite task);
- snapshot: rl.envs.agent.snapshot.snapshot of that episode after its first tool call;
- restore: one branch (a fresh Sandbox from the snapshot, episode state copied);
- branch K: K branches (best-of-K from a shared prefix).
Medians in milliseconds, one JSON line per project, then a markdown table for bench/RESULTS.md.

--scale SOURCES: each sdist through the `add` path (rl/envs/repos/scale.py `try`: setup agent and
gate, no hand edits), then the vendored projects mined over --workers processes into a gated pool
(`mine`), printing the per-project table, the setup rate, tasks per family and project, tasks per
minute, and the statements' length quartiles. --tiny: 2 tasks from one vendored project (minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import parse_tiny  # noqa: E402
from data.chat import tool_call_text  # noqa: E402
from data.tokenizers import ByteTokenizer  # noqa: E402
from rl.envs import CodingEnv, require_isolation  # noqa: E402
from rl.envs.agent.snapshot import branch, restore, snapshot  # noqa: E402
from rl.envs.repos.projects import SUITE_PROJECTS, suite_tasks  # noqa: E402


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t0) * 1e3, out


def bench_project(name: str, repeats: int, k: int, tok) -> dict:
    (task,) = suite_tasks((name,), limit=1)
    first = tok.encode(tool_call_text("list_files", {}), allow_special=True)
    first.append(tok.special_id("end"))
    rows = {"fresh_ms": [], "snapshot_ms": [], "restore_ms": [], f"branch{k}_ms": []}
    for _ in range(repeats):
        env = CodingEnv(tok)
        ms, _ = timed(env.reset, task)
        rows["fresh_ms"].append(ms)
        env.step(first)
        ms, snap = timed(snapshot, env)
        rows["snapshot_ms"].append(ms)
        other = CodingEnv(tok)
        ms, _ = timed(restore, other, snap)
        rows["restore_ms"].append(ms)
        ms, envs = timed(branch, snap, k, lambda: CodingEnv(tok))
        rows[f"branch{k}_ms"].append(ms)
        for e in [env, other, *envs]:
            e.close()
        snap.close()
    out = {"project": name, "files": len(task.files), "setup_commands": len(task.setup)}
    out.update({key: round(statistics.median(v), 1) for key, v in rows.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--projects", default=",".join(SUITE_PROJECTS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--scale", nargs="*", help="sdists for the scale table (issue 50)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="/tmp/bench_repos_pool.jsonl")
    args = parse_tiny(parser, dict(projects=SUITE_PROJECTS[0], repeats=1, k=2))
    if args.scale is not None:
        return bench_scale(args)
    print(f"sandbox: {require_isolation()}")
    tok, results = ByteTokenizer(), []
    for name in args.projects.split(","):
        results.append(bench_project(name, args.repeats, args.k, tok))
        print(json.dumps(results[-1]), flush=True)
    keys = [key for key in results[0] if key.endswith("_ms")]
    print("\n| project | files | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for r in results:
        print(
            f"| {r['project']} | {r['files']} | " + " | ".join(str(r[key]) for key in keys) + " |"
        )


def bench_scale(args) -> None:
    """The scale table: sources through `add`, then the vendored projects mined in workers."""
    import subprocess
    import tempfile

    from rl.envs.repos import scale
    from rl.envs.repos.vendored import ADDED_PROJECTS

    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"load before: {load}")
    specs = tempfile.mkdtemp(prefix="bench_scale_specs_")
    rows = scale.try_sources(args.scale, specs, args.workers) if args.scale else []
    print("\n| source | verdict | tests | s |\n|---|---|---:|---:|")
    for r in rows:
        print(f"| {r['source']} | {'admitted' if r['admitted'] else r['reason']} | {r['tests']} "
              f"| {r['seconds']} |")  # fmt: skip
    if rows:
        admitted = sum(r["admitted"] for r in rows)
        print(f"setup rate: {admitted}/{len(rows)} = {admitted / len(rows):.0%} (no hand edits)")
    projects = ADDED_PROJECTS[:1] if args.tiny else scale.PROJECTS
    per, tries = (2, 6) if args.tiny else (30, 90)
    lines, stats = scale.mine_pool(projects, per, tries, args.workers, log=lambda *_: None)
    scale.write_pool(lines, __import__("pathlib").Path(args.out))
    print(json.dumps(dict(stats, tasks=len(lines), **scale.counts(lines))))
    lengths = sorted(
        len(t.prompt) for t in scale.pool_tasks(lines) if t.kind in ("bugfix", "feature")
    )
    if lengths:
        q = [lengths[int(f * (len(lengths) - 1))] for f in (0, 0.25, 0.5, 0.75, 1)]
        print(f"statement characters min/q1/median/q3/max: {q}")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"load after: {load}")


if __name__ == "__main__":
    main()
