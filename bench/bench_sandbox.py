"""Sandbox overhead and concurrent-episode throughput.

    python3 bench/bench_sandbox.py [--commands 200] [--episodes 8]

1. Per-command overhead: median wall time of `true` through Sandbox.run minus the median of the
   same command run bare with subprocess (`/bin/sh -c true`), measured interleaved in one run, for
   each backend that works here (bwrap; rlimit fallback). Target: <= 50 ms.
2. Throughput: 8 episodes (oracle policy through the token-level CodingEnv: list_files, write_file,
   run_tests, submit, hidden-test grading) run one after another, then all 8 concurrently in
   threads; reports episodes/s for both and the ratio.
3. Grading overhead per episode (--grading N, default 24): a fresh sandbox copy of a solved repo +
   its hidden tests, graded by today's grader and by an older one (--baseline: a git revision,
   default the pre-hardening db350dc, or a directory with a copy of an older tree), interleaved
   task by task on the same tasks; also the cost of the per-episode caps (cgroup + tmpfs) in
   Sandbox construction, with and without them.

    python3 bench/bench_sandbox.py --only-grading --grading 24 --baseline /tmp/before12
    python3 bench/bench_sandbox.py --tiny   # smoke: 5 commands, 2 episodes, 2 gradings vs this tree

    python3 bench/bench_sandbox.py --verify 200   # only: reference solutions of 200 generated
                                                  # tasks (all families) must grade 100%, untampered
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import parse_tiny  # noqa: E402
from data.tokenizers import ByteTokenizer  # noqa: E402
from rl.envs import (  # noqa: E402
    TEMPLATES,
    CodingEnv,
    OraclePolicy,
    Sandbox,
    backend,
    generate_tasks,
    run_episode,
)
from rl.envs.grading.tasks import apply_solution, grade_in  # noqa: E402
from rl.envs.isolation import cgroups  # noqa: E402


class _NoCaps:
    """Within: new sandboxes get neither cgroups nor a tmpfs quota (as on a machine without
    them)."""

    def __enter__(self):
        self.saved = cgroups.probe, cgroups.can_mount_tmpfs
        cgroups.probe = lambda: ("", "bench: off")
        cgroups.can_mount_tmpfs = lambda: (False, "bench: off")

    def __exit__(self, *exc):
        cgroups.probe, cgroups.can_mount_tmpfs = self.saved


def _box(name: str) -> Sandbox:
    if name.endswith(" no caps"):
        with _NoCaps():
            return Sandbox(backend_name=name.split()[0])
    return Sandbox(backend_name=name)


def command_overhead(n: int) -> dict[str, tuple[float, float, float]]:
    """backend -> (median sandboxed ms, p90 sandboxed ms, median bare ms), interleaved so both see
    the same machine load. "no caps" rows: the same backend without the per-episode cgroup."""
    out = {}
    names = [backend(), f"{backend()} no caps", "rlimit", "rlimit no caps"]
    for name in dict.fromkeys(names):
        with _box(name) as box:
            box.run("true", 5)  # warm up
            boxed, bare = [], []
            for _ in range(n):
                t = time.perf_counter()
                box.run("true", 5)
                boxed.append(time.perf_counter() - t)
                t = time.perf_counter()
                subprocess.run(
                    ["/bin/sh", "-c", "true"], stdin=subprocess.DEVNULL, capture_output=True
                )
                bare.append(time.perf_counter() - t)
        p90 = statistics.quantiles(boxed, n=10)[-1]
        out[name] = (1e3 * statistics.median(boxed), 1e3 * p90, 1e3 * statistics.median(bare))
    return out


def episodes(n: int, workers: int) -> tuple[float, list[float]]:
    from rl.episodes.records import episode_facts
    from rl.episodes.rewards import RewardConfig

    tok = ByteTokenizer()
    tasks = generate_tasks(n, seed=123, difficulties=(1,))

    def one(task):
        rec = run_episode(CodingEnv(tok), task, OraclePolicy(tok, task))
        return episode_facts(rec, tok, RewardConfig()).reward  # the RL reward (rewards.py)

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        rewards = list(pool.map(one, tasks))
    return time.perf_counter() - t, rewards


def _baseline_grade_in(base: str):
    """grade_in as it was in an older tree: `base` is a git revision (e.g. db350dc, before the
    hardening) or a directory holding a copy of the tree (e.g. one made before a change). Its
    tasks.py, harden.py and grader/ (rl/envs/, or rl/envs/grading/ after the issue-49 move; where it
    has them) are loaded under other names; the sandbox is today's."""
    import importlib.util
    import tempfile

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isdir(base):  # a revision: its rl/envs, extracted
        tree = tempfile.mkdtemp()
        archive = subprocess.run(
            ["git", "-C", root, "archive", base, "rl/envs"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        base = tree
    envs = os.path.join(base, "rl", "envs")
    if os.path.exists(os.path.join(envs, "grading", "tasks.py")):  # the layered tree
        envs = os.path.join(envs, "grading")
    from tools.move_rl_layers import rewrite  # an old tree's imports, in today's module names

    renames = {}
    for name in ("harden", "tasks"):  # harden first: the old tasks.py imports it
        path = os.path.join(envs, f"{name}.py")
        if not os.path.exists(path):
            continue
        src = rewrite(open(path).read(), is_py=True)
        for old, new in renames.items():
            src = src.replace(old, new)
        module = importlib.util.module_from_spec(
            importlib.util.spec_from_loader(f"baseline_{name}", loader=None)
        )
        module.__file__ = path  # the old tasks.py finds its grader/ beside it
        sys.modules[module.__name__] = module
        exec(compile(src, path, "exec"), module.__dict__)
        renames[f"rl.envs.grading.{name} "] = f"baseline_{name} "
    return sys.modules["baseline_tasks"].grade_in


def _median_ms(xs: list[float]) -> str:
    return f"{1e3 * statistics.median(xs):.0f}"


def grading_overhead(n: int, base: str) -> None:
    old_grade_in = _baseline_grade_in(base)
    tasks = generate_tasks(n, seed=321)
    times = {"before": [], "after": []}
    for task in tasks:
        for label, grade in (("before", old_grade_in), ("after", grade_in)):
            with Sandbox.from_files(task.files) as solved:
                apply_solution(solved, task.solution)
                t = time.perf_counter()
                with Sandbox(solved.root) as box:  # what grade_repo does: copy, then grade
                    result = grade(box, task, 60.0)
                times[label].append(time.perf_counter() - t)
            assert result.all_pass, (label, task.id, result.output[-500:])
    load = os.getloadavg()
    print(f"\n| grading ({n} solved tasks, all families) | median ms / episode | p90 ms |")
    print("|---|---|---|")
    for label, xs in times.items():
        p90 = 1e3 * statistics.quantiles(xs, n=10)[-1]
        print(f"| {label} | {_median_ms(xs)} | {p90:.0f} |")
    ratio = statistics.median(times["after"]) / statistics.median(times["before"])
    print(f"after / before (medians): {ratio:.2f}x  (load average {load[0]:.1f} {load[1]:.1f})")
    print("\n| family | tasks | before median ms | after median ms |\n|---|---|---|---|")
    for kind in sorted({t.kind for t in tasks}):
        rows = [i for i, t in enumerate(tasks) if t.kind == kind]
        before, after = ([times[k][i] for i in rows] for k in ("before", "after"))
        print(f"| {kind} | {len(rows)} | {_median_ms(before)} | {_median_ms(after)} |")

    caps = {"with caps": [], "without caps": []}
    for _ in range(max(n, 20)):
        for label in caps:
            t = time.perf_counter()
            if label == "with caps":
                Sandbox.from_files(tasks[0].files).close()
            else:
                with _NoCaps():
                    Sandbox.from_files(tasks[0].files).close()
            caps[label].append(time.perf_counter() - t)
    print(f"\ncaps here: {cgroups.probe()[1]}; disk: {cgroups.can_mount_tmpfs()[1]}")
    print("| Sandbox create + close | median ms |\n|---|---|")
    for label, xs in caps.items():
        print(f"| {label} | {_median_ms(xs)} |")


def verify_references(n: int, workers: int) -> int:
    tasks = generate_tasks(n, seed=2026)

    def one(task):
        with Sandbox.from_files(task.files) as box:
            apply_solution(box, task.solution)
            return grade_in(box, task, 60.0)

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        grades = list(pool.map(one, tasks))
    by_family: dict[str, list[int]] = {}
    for task, grade in zip(tasks, grades):
        by_family.setdefault(task.kind, [0, 0])[0] += grade.all_pass
        by_family[task.kind][1] += 1
    bad = [(t.id, g.output[-300:]) for t, g in zip(tasks, grades) if not g.all_pass]
    tampered = sum(g.tampered for g in grades)
    print(
        f"templates: {len(TEMPLATES)}; families: "
        + ", ".join(f"{k} {ok}/{total}" for k, (ok, total) in sorted(by_family.items()))
    )
    print(
        f"reference solutions graded 100%: {n - len(bad)}/{n}, tampered: {tampered}, "
        f"{time.perf_counter() - t:.0f} s with {workers} workers "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    for task_id, tail in bad:
        print(f"FAILED {task_id}: {tail}")
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--grading", type=int, default=24)
    parser.add_argument(
        "--baseline", default="db350dc", help="git revision, or a directory with an older tree"
    )
    parser.add_argument("--verify", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only-grading", action="store_true")
    parser.add_argument("--only-commands", action="store_true")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tiny = dict(commands=5, episodes=2, grading=2, baseline=root)  # graded against itself
    args = parse_tiny(parser, tiny)
    if args.verify:
        sys.exit(verify_references(args.verify, args.workers))
    if args.only_commands:
        print(f"backend: {backend()}  load average at start: {os.getloadavg()[0]:.1f}")
        for name, (boxed, p90, bare) in command_overhead(args.commands).items():
            print(f"| {name} | {boxed:.1f} | {p90:.1f} | {bare:.1f} | {boxed - bare:.1f} |")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
        return
    if args.only_grading:
        print(f"backend: {backend()}  load average at start: {os.getloadavg()[0]:.1f}")
        grading_overhead(args.grading, args.baseline)
        return
    print(
        f"backend: {backend()}  cpus: {os.cpu_count()}  python: {sys.version.split()[0]}  "
        f"load average at start: {os.getloadavg()[0]:.1f}"
    )
    print(
        "\n| backend | median `true` sandboxed (ms) | p90 sandboxed (ms) | median bare (ms) | "
        "median overhead (ms) |"
    )
    print("|---|---|---|---|---|")
    for name, (boxed, p90, bare) in command_overhead(args.commands).items():
        print(f"| {name} | {boxed:.1f} | {p90:.1f} | {bare:.1f} | {boxed - bare:.1f} |")
    serial_s, serial_rewards = episodes(args.episodes, workers=1)
    conc_s, conc_rewards = episodes(args.episodes, workers=args.episodes)
    n = args.episodes
    print(f"\n| {n} episodes (oracle, d1) | wall (s) | episodes/s | mean reward |")
    print("|---|---|---|---|")
    print(
        f"| sequential | {serial_s:.2f} | {n / serial_s:.2f} | "
        f"{statistics.mean(serial_rewards):.2f} |"
    )
    print(
        f"| {n} concurrent | {conc_s:.2f} | {n / conc_s:.2f} | "
        f"{statistics.mean(conc_rewards):.2f} |"
    )
    print(
        f"\nconcurrent / sequential throughput: {serial_s / conc_s:.2f}x  "
        f"(load average at end: {os.getloadavg()[0]:.1f})"
    )
    grading_overhead(args.grading, args.baseline)


if __name__ == "__main__":
    main()
