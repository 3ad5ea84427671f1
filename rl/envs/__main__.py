"""Task-pool tool: generate, verify and save tasks, or verify a user's task set.

    python3 -m rl.envs make --n 100 --seed 0 --out tasks/      # generate -> gate -> tasks/tasks.jsonl
    python3 -m rl.envs make --n 100 --repos 8 --out tasks/     # + 8 mined tasks per vendored project
    python3 -m rl.envs verify tasks/tasks.jsonl                # gate an existing (user) task set

Rejected tasks are printed one per line with the reason; `make` saves only accepted ones.
"""

from __future__ import annotations

import argparse
import os
import sys

from rl.envs.sandbox import SandboxUnavailable, require_isolation
from rl.envs.taskgen import generate_tasks
from rl.envs.tasks import load_tasks, save_tasks
from rl.envs.verify import verify_tasks


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
    else:
        tasks = load_tasks(args.jsonl)
    accepted, rejected = verify_tasks(tasks, workers=args.workers)
    for verdict in rejected:
        print(f"REJECTED {verdict.task_id}: {verdict.reason}")
    if args.cmd == "make" and args.repos > 0:
        from rl.envs.repos.projects import pool_tasks

        mined = pool_tasks(args.repos, seed=args.seed + 1, workers=args.workers)  # gated there
        accepted += mined
        tasks += mined
    if args.cmd == "make":
        save_tasks(accepted, os.path.join(args.out, "tasks.jsonl"))
    print(f"{len(accepted)}/{len(tasks)} tasks accepted")
    return 0 if not rejected else 1


if __name__ == "__main__":
    sys.exit(main())
