"""Gated task sets from admitted specs: a user's pool (`add`) and a held-out suite from any set of
specs (`python -m rl.envs.repos suite`).

    python -m rl.envs.repos suite --specs specs/a.json specs/b.json --out suite/tasks.jsonl
        [--per-repo 10] [--tries 30] [--seed 0] [--no-families] [--exclude pool/tasks.jsonl]

Each spec's files are loaded again from its `source` (the folder, the cached sdist, PATH@COMMIT of
a checkout: what `add` recorded), mined (rl/envs/repos/mine.py: bugfix and feature-removal tasks),
joined by its review and DevOps tasks (review_devops.families_of), and every task must pass the
task gate (rl/envs/grading/verify.py); bugfix and feature tasks must also fail the scripted cheats.
The suite is a task file (rl/envs/grading/tasks.py's format) that `--mode=eval` plays with
`--config.eval.agentic.tasks_jsonl=suite/tasks.jsonl`. `--exclude` leaves out the tasks (by id) of
task files already used for training, so a repository can be both trained on and held out by site.
The file is written whole or not at all.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from rl.envs.grading.tasks import Task, load_tasks, save_tasks
from rl.envs.repos.fetch import AddError, load_source
from rl.envs.repos.spec import EnvSpec


def gate(tasks: list[Task], log=print) -> list[Task]:
    """The tasks that pass the task gate (bugfix/feature ones: and whose scripted cheats fail)."""
    from rl.envs.grading.verify import verify_task
    from rl.envs.repos import mine as M

    kept = []
    for task in tasks:
        verdict = verify_task(task)
        hidden = task.meta.get("grader") is None
        cheat = M.cheats_fail(task) if verdict.accepted and hidden else None
        if verdict.accepted and cheat is None:
            kept.append(task)
        else:
            log(f"{task.id}: left out: {verdict.reason if cheat is None else cheat + ' passes'}")
    return kept


def mine_tasks(
    files: dict[str, str],
    spec: EnvSpec,
    tasks: int,
    tries: int,
    seed: int = 0,
    families: bool = True,
    skip: frozenset[str] = frozenset(),
    log=print,
) -> list[Task]:
    """Up to `tasks` mined bugfix/feature tasks of one admitted repository, then (`families`) its
    review and DevOps tasks, all gated."""
    from rl.envs.repos import mine as M
    from rl.envs.repos.review_devops import families_of

    recipes = M.mine(files, spec, tasks, tries, seed, skip, log=log)
    out = [M.build_task(r, files, spec) for r in recipes]
    if families:
        out += [t for t in families_of(files, spec, recipes, seed) if t.id not in skip]
    return gate(out, log)


def save_whole(tasks: list[Task], out: Path) -> None:
    """save_tasks through a staging folder: task folders by renames, then the JSONL that names
    them (last, whole), so a failure leaves the previous file as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=".staging-"))
    try:
        save_tasks(tasks, staging / out.name)
        for item in staging.iterdir():
            target = out.parent / item.name
            if target.is_dir():
                shutil.rmtree(target)
            if item.name != out.name:
                os.replace(item, target)
        os.replace(staging / out.name, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_spec_file(path: str) -> EnvSpec:
    try:
        return EnvSpec.from_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AddError(
            f"{path} does not exist (give specs that `add` kept: DIR/NAME.json)"
        ) from None
    except (ValueError, TypeError) as e:
        raise AddError(f"{path} is not an env spec ({e})") from None


def build_suite(
    spec_paths: list[str],
    out: Path,
    per_repo: int = 10,
    tries: int = 30,
    seed: int = 0,
    families: bool = True,
    exclude: list[str] = (),
    cache: Path | None = None,
    log=print,
) -> list[Task]:
    """The held-out suite of the specs' repositories; returns its tasks (also saved to `out`)."""
    skip = frozenset(t.id for path in exclude for t in load_tasks(path))
    specs = [load_spec_file(p) for p in spec_paths]
    tasks = []
    for spec in specs:
        if not spec.baseline:
            raise AddError(f"{spec.name}: the spec has no baseline (not admitted by the gate)")
        _, files, _ = load_source(spec.source, cache, log)
        missing = [t for t in spec.test_files if t not in files]
        if missing:
            raise AddError(
                f"{spec.name}: {spec.source} no longer holds {missing[:3]}: add it again"
            )
        got = mine_tasks(files, spec, per_repo, tries, seed, families, skip, log)
        log(f"{spec.name}: {len(got)} tasks")
        tasks += got
    save_whole(tasks, out)
    log(f"suite: {len(tasks)} tasks from {len(specs)} repositories -> {out}")
    return tasks


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--specs", nargs="+", required=True, help="spec files (DIR/NAME.json)")
    p.add_argument("--out", required=True, help="the suite's task file (JSONL)")
    p.add_argument("--per-repo", type=int, default=10, help="mined bugfix/feature tasks per repo")
    p.add_argument("--tries", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-families", action="store_true", help="no review / DevOps tasks")
    p.add_argument("--exclude", nargs="*", default=[], help="task files whose ids to leave out")
    p.add_argument("--cache", default="", help="download / clone cache")


def run(args) -> None:
    build_suite(
        args.specs,
        Path(args.out),
        args.per_repo,
        args.tries,
        args.seed,
        not args.no_families,
        args.exclude,
        Path(args.cache) if args.cache else None,
    )
