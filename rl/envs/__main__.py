"""Task-pool tool: generate, verify and save tasks, or verify a user's task set.

    python3 -m rl.envs make --n 100 --seed 0 --out tasks/      # generate -> gate
                                                                 -> tasks/tasks.jsonl
    python3 -m rl.envs make --n 100 --repos 8 --out tasks/     # + 8 mined tasks
                                                                 per vendored project
    python3 -m rl.envs make --n 20 --families 4 --out tasks/   # + 4 of each review/DevOps template
                                                               # (+ mined ones with --repos)
    python3 -m rl.envs verify tasks/tasks.jsonl                # gate an existing (user) task set

Rejected tasks are printed one per line with the reason; `make` saves only accepted ones.
"""

from __future__ import annotations

import argparse
import os
import sys

from rl.envs.grading.tasks import load_tasks, save_tasks
from rl.envs.grading.verify import verify_tasks
from rl.envs.isolation.sandbox import SandboxUnavailable, require_isolation
from rl.envs.taskgen import TOOL_FAMILY_TEMPLATES, generate_tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m rl.envs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    make = sub.add_parser("make", help="generate tasks, keep those that pass the gate")
    make.add_argument("--n", type=int, default=20)
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--difficulties", default="1,2,3")
    make.add_argument("--out", required=True, help="directory; writes OUT/tasks.jsonl + task dirs")
    make.add_argument(
        "--repos",
        type=int,
        default=0,
        help="also mine up to N tasks per vendored real project (rl/envs/repos; the held-out "
        "suite's tasks are left out; gated with the scripted cheats too)",
    )
    make.add_argument(
        "--families",
        type=int,
        default=0,
        help="also N tasks of each code review / DevOps template (rl.envs.taskgen."
        "TOOL_FAMILY_TEMPLATES); with --repos, also the mined review and DevOps tasks of the "
        "vendored projects (review tasks from the pool's recipes, never the held-out suite's)",
    )
    check = sub.add_parser("verify", help="run the gate over a tasks.jsonl")
    check.add_argument("jsonl")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--allow-unisolated",
        action="store_true",
        help="run without bubblewrap (rlimits only) if it is missing",
    )
    args = parser.parse_args(argv)
    try:  # fail before any work if task code could not be isolated
        require_isolation(args.allow_unisolated)
    except SandboxUnavailable as e:
        print(e, file=sys.stderr)
        return 2

    if args.cmd == "make":
        difficulties = tuple(int(d) for d in args.difficulties.split(","))
        tasks = generate_tasks(args.n, seed=args.seed, difficulties=difficulties)
        if args.families > 0:
            tasks += generate_tasks(
                args.families * len(TOOL_FAMILY_TEMPLATES),
                seed=args.seed,
                difficulties=difficulties,
                templates=tuple(TOOL_FAMILY_TEMPLATES),
            )
    else:
        tasks = load_tasks(args.jsonl)
    accepted, rejected = verify_tasks(tasks, workers=args.workers)
    for verdict in rejected:
        print(f"REJECTED {verdict.task_id}: {verdict.reason}")
    if args.cmd == "make" and args.repos > 0:
        from rl.envs.repos.projects import pool

        # gated there (task gate + the mining cheats)
        recipes, mined = pool(args.repos, seed=args.seed + 1, workers=args.workers)
        tasks += mined
        if args.families > 0:  # review tasks from the same (non-suite) recipes, DevOps tasks
            extra = _mined_families(recipes, args.seed + 1)
            ok, bad = verify_tasks(extra, workers=args.workers)
            for verdict in bad:
                print(f"REJECTED {verdict.task_id}: {verdict.reason}")
            mined, rejected, tasks = mined + ok, rejected + bad, tasks + extra
        accepted += mined
    if args.cmd == "make":
        save_tasks(accepted, os.path.join(args.out, "tasks.jsonl"))
    print(f"{len(accepted)}/{len(tasks)} tasks accepted")
    return 0 if not rejected else 1


def _mined_families(recipes: list, seed: int) -> list:
    """Review tasks of a pool's recipes (the suite's are held out) and the DevOps tasks of the
    vendored projects that the suite does not hold (same broken files = the same task), ungated."""
    from rl.envs.repos import review_devops as families
    from rl.envs.repos.holdout import split_projects
    from rl.envs.repos.projects import PROJECTS, family_tasks

    def broken(task):  # what a DevOps task is: its project's broken editable files
        return task.meta["project"], tuple(
            task.files[r] for r in sorted(task.meta["devops"]["editable"])
        )

    held_out = {broken(t) for t in family_tasks() if t.meta["grader"] == "devops"}
    train, _ = split_projects(PROJECTS)  # a held-out repository gives no training task
    devops = [t for t in families.devops_tasks(train, seed) if broken(t) not in held_out]
    return families.review_tasks(recipes) + devops


if __name__ == "__main__":
    sys.exit(main())
