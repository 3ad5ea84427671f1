"""The vendored projects as environments: cached specs, the held-out suite, training pools.

    python -m rl.envs.repos.projects specs          # setup agent + gate per project -> specs
    python -m rl.envs.repos.projects suite          # mine + gate the held-out suite -> suite.jsonl
    python -m rl.envs.repos.projects families       # its review + DevOps tasks -> families.json
    python -m rl.envs.repos.projects counts         # the suite's tasks per family
    python -m rl.envs make --repos 8 --out pool/    # a training pool (suite tasks left out)

data/repos/specs/<project>.json, suite.jsonl and families.json are committed data: built once
(minutes, sandboxed), they make the suite a pure function of the vendored files (no sandbox
needed to load it; `--mode=eval` with `eval.repos.verify=True` gates every task again). Each suite
line is a mine.Recipe; its Task is rebuilt by mine.build_task. Training pools mine the projects not
held out by repository (holdout.HELD_OUT_REPOS) from another seed and skip every suite id (held out
by site), so no held-out task is ever trained on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from rl.envs.grading.tasks import Task
from rl.envs.repos import mine as M
from rl.envs.repos.holdout import HELD_OUT_REPOS, split_projects
from rl.envs.repos.spec import Admission
from rl.envs.repos.vendored import (
    PROJECTS,
    ROOT,
    SPECS,
    SUITE_PROJECTS,
    load_spec,
    project_files,
)

SUITE = ROOT / "data/repos/suite.jsonl"
# The suite's review and DevOps tasks: review tasks of the first REVIEW_PER_PROJECT suite recipes
# per project whose op keeps line numbers, and the mined DevOps tasks with their gated baselines
# (committed: the eval rebuilds them without a sandbox). `python -m ... projects families`.
FAMILIES = ROOT / "data/repos/families.json"
REVIEW_PER_PROJECT = 2
SUITE_PER_PROJECT, SUITE_TRIES = 18, 45  # recipes kept / candidate sites tried per project


def build_specs(projects=PROJECTS, log=print) -> list[Admission]:
    """Setup agent + gate per project; admitted specs are written to specs/."""
    from data.tokenizers import ByteTokenizer
    from rl.envs.repos.setup import setup_repo

    out = []
    SPECS.mkdir(exist_ok=True)
    for name in projects:
        a = setup_repo(name, project_files(name), ByteTokenizer(), source=f"vendor/{name}")
        log(f"{name}: {'admitted' if a.admitted else 'REJECTED'}: {a.reason}")
        if a.admitted:
            (SPECS / f"{name}.json").write_text(a.spec.to_json())
        out.append(a)
    return out


def load_recipes(path: str | os.PathLike = SUITE) -> list[M.Recipe]:
    with open(path, encoding="utf-8") as f:
        return [M.Recipe.from_dict(json.loads(line)) for line in f if line.strip()]


def tasks_from_recipes(recipes: list[M.Recipe]) -> list[Task]:
    files, specs, out = {}, {}, []
    for r in recipes:
        if r.project not in files:
            files[r.project], specs[r.project] = project_files(r.project), load_spec(r.project)
        out.append(M.build_task(r, files[r.project], specs[r.project]))
    return out


def suite_tasks(projects=(), limit: int = 0) -> list[Task]:
    """The held-out real-repository suite (all projects, or those named), first `limit` tasks."""
    recipes = [r for r in load_recipes() if not projects or r.project in projects]
    return tasks_from_recipes(recipes[:limit] if limit else recipes)


def gated(
    recipes: list[M.Recipe], workers: int = 2, log=print
) -> tuple[list[M.Recipe], list[Task]]:
    """Recipes whose tasks pass the task gate (rl/envs/grading/verify.py) and whose cheats all
    fail."""
    from concurrent.futures import ThreadPoolExecutor

    from rl.envs.grading.verify import verify_task

    tasks = tasks_from_recipes(recipes)

    def check(task):
        verdict = verify_task(task)
        if not verdict.accepted:
            return verdict.reason
        cheat = M.cheats_fail(task)
        return f"scripted cheat {cheat} passes" if cheat else "ok"

    with ThreadPoolExecutor(workers) as pool:
        reasons = list(pool.map(check, tasks))
    keep = []
    for r, t, why in zip(recipes, tasks, reasons):
        if why != "ok":
            log(f"REJECTED {r.id}: {why}")
        else:
            keep.append((r, t))
    return [r for r, _ in keep], [t for _, t in keep]


def mine_projects(
    per_project: int, tries: int, seed: int, skip=frozenset(), projects=PROJECTS, log=print
) -> list[M.Recipe]:
    out = []
    for name in projects:
        recipes = M.mine(project_files(name), load_spec(name), per_project, tries, seed, skip)
        log(f"{name}: {len(recipes)} candidates with fail->pass tests")
        out += recipes
    return out


def build_suite(per_project: int = SUITE_PER_PROJECT, tries: int = SUITE_TRIES, log=print):
    mined = mine_projects(per_project, tries, seed=0, projects=SUITE_PROJECTS, log=log)
    recipes, _ = gated(mined, log=log)
    with open(SUITE, "w", encoding="utf-8") as f:
        for r in recipes:
            f.write(json.dumps(r.to_dict(), sort_keys=True) + "\n")
    log(f"suite: {len(recipes)} tasks -> {SUITE}")
    return recipes


def pool(
    per_project: int, seed: int = 1, workers: int = 2, log=print, held_out=HELD_OUT_REPOS
) -> tuple[list[M.Recipe], list[Task]]:
    """(recipes, tasks) of a training pool, gated: mined from every project not held out by
    repository (`held_out`), with the suite's tasks (held out by site) left out."""
    skip = frozenset(r.id for r in load_recipes()) if SUITE.exists() else frozenset()
    train, _ = split_projects(PROJECTS, held_out)
    recipes = mine_projects(per_project, 3 * per_project, seed, skip, train, log=log)
    return gated(recipes, workers, log=log)


def build_families(log=print) -> dict:
    """Gates the suite's review and DevOps tasks and writes FAMILIES (ids and baselines)."""
    from rl.envs.grading.verify import verify_task
    from rl.envs.repos import review_devops as families

    picked, count = [], {}
    for r in load_recipes():
        if r.site.op in families.REVIEW_OPS and count.get(r.project, 0) < REVIEW_PER_PROJECT:
            picked.append(r)
            count[r.project] = count.get(r.project, 0) + 1
    out = {"review": [], "devops": {}}
    for task in families.review_tasks(picked) + families.devops_tasks(PROJECTS):
        verdict = verify_task(task)
        log(f"{task.id}: {verdict.reason}")
        if not verdict.accepted:
            continue
        if task.meta["grader"] == "review":
            out["review"].append(task.id.removesuffix("-review"))
        else:
            out["devops"][task.id] = task.meta["devops"]["baseline"]
    FAMILIES.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def family_tasks(projects=()) -> list[Task]:
    """The suite's review and DevOps tasks (FAMILIES), rebuilt without a sandbox."""
    from rl.envs.repos import review_devops as families

    if not FAMILIES.exists():
        return []
    saved = json.loads(FAMILIES.read_text())
    keep = lambda name: not projects or name in projects  # noqa: E731
    ids = set(saved["review"])
    recipes = [r for r in load_recipes() if r.id in ids and keep(r.project)]
    out = families.review_tasks(recipes)
    for task in families.devops_tasks([p for p in PROJECTS if keep(p)]):
        if task.id in saved["devops"]:
            task.meta["devops"]["baseline"] = saved["devops"][task.id]
            out.append(task)
    return out


def family_of(task: Task) -> str:
    """bugfix | feature | review | devops: the family a suite task belongs to."""
    grader = task.meta.get("grader")
    return grader if grader in ("review", "devops") else task.kind


def family_counts(tasks: list[Task]) -> dict[str, int]:
    """Tasks per family (`python -m rl.envs.repos.projects counts` prints the suite's)."""
    out: dict[str, int] = {}
    for task in tasks:
        out[family_of(task)] = out.get(family_of(task), 0) + 1
    return dict(sorted(out.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.envs.repos.projects")
    parser.add_argument("what", choices=("specs", "suite", "families", "counts"))
    parser.add_argument("--projects", default=",".join(PROJECTS))
    args = parser.parse_args(argv)
    if args.what == "specs":
        admissions = build_specs(tuple(args.projects.split(",")))
        return 0 if all(a.admitted for a in admissions) else 1
    if args.what == "counts":
        print(json.dumps(family_counts(suite_tasks() + family_tasks()), sort_keys=True))
        return 0
    if args.what == "families":
        build_families()
        return 0
    build_suite()
    return 0


if __name__ == "__main__":
    sys.exit(main())
