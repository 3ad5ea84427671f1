"""Training recipes for the expert traces: mined from the repositories not held out, resumably.

    python -m rl.envs.repos.training_pool --out POOL.jsonl --per-project 60 --workers 2

Each line of POOL.jsonl is a mine.Recipe (rebuilt into its Task by mine.build_task from the
vendored files, no sandbox). Which projects: every vendored project except those
holdout.HELD_OUT_REPOS names, read when this runs (never a fixed list: another project held out
later is left out the next time). Which sites: the seeded candidate order of mine.candidate_sites,
every committed suite id skipped (held out by site). A candidate is kept on mine.mine's rule:
some, not all, baseline-passing tests fail with it. The file is appended to as candidates are
tried, and tried ids (kept or not) are listed in POOL.jsonl.tried, so a killed run resumes
where it stopped (--per-project counts every try: the same value finishes a killed run, a larger
one extends the pool; a line the kill cut short is dropped and its site tried again); projects
are interleaved candidate by candidate so a partial pool covers each.

Not done here (the expert's solve replaces it for SFT): the task gate and the scripted cheats
(projects.gated) that RL pools pass; an expert trace is kept only when the real grader passes
the expert's episode, which needs the fail->pass tests to pass again with the reference fix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from rl.envs.isolation.dep_cache import MissingTestDeps
from rl.envs.repos import holdout
from rl.envs.repos import mine as M
from rl.envs.repos.vendored import PROJECTS, load_spec, project_files, require_test_deps

SEED = 7  # candidate order, apart from the suite's (0) and `make --repos`'s default (1)


def training_projects(held_out=None) -> list[str]:
    """Vendored projects not held out by repository (holdout.HELD_OUT_REPOS at call time)."""
    held = holdout.HELD_OUT_REPOS if held_out is None else held_out
    return holdout.split_projects(PROJECTS, held)[0]


def suite_ids() -> frozenset[str]:
    from rl.envs.repos.projects import SUITE, load_recipes

    return frozenset(r.id for r in load_recipes()) if SUITE.exists() else frozenset()


def candidates(projects, per_project: int, seed: int = SEED, skip=frozenset(), tried=frozenset()):
    """(project, site) pairs, projects interleaved: each project's first `per_project` candidates
    not in `skip` (the suite's sites), less those already `tried`, so a rerun with the same
    --per-project finishes what a killed run left and a larger one extends it."""
    queues = []
    for name in projects:
        files, spec = project_files(name), load_spec(name)
        sites = [s for s in M.candidate_sites(files, spec, seed) if M.site_id(name, s) not in skip]
        queues.append([(name, s) for s in sites[:per_project] if M.site_id(name, s) not in tried])
    for i in range(max((len(q) for q in queues), default=0)):
        for q in queues:
            if i < len(q):
                yield q[i]


def try_site(name: str, site: M.Site) -> M.Recipe | None:
    """The recipe of one candidate site, or None when no (or every) passing test fails."""
    files, spec = project_files(name), load_spec(name)
    f2p = M.fail_to_pass(site, files, spec)
    passing = len(spec.passing())
    if not f2p or len(f2p) == passing and passing > 2:  # mine.mine's rule
        return None
    kind = "feature" if site.op == "remove_body" else "bugfix"
    recipe = M.Recipe(M.site_id(name, site), name, kind, site, f2p)
    recipe.prompt = M.statement(recipe, files, spec)
    return recipe


def load_pool(path: str) -> list[M.Recipe]:
    """The recipes in `path`. A line a killed run cut short is skipped with a warning: its site
    was not yet listed as tried (that line is written after the recipe's), so mining tries it
    again."""
    if not os.path.exists(path):
        return []
    recipes = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                recipes.append(M.Recipe.from_dict(json.loads(line)))
            except json.JSONDecodeError:
                print(f"warning: {path}:{n}: cut short (a killed run?); skipped", file=sys.stderr)
    return recipes


def drop_cut_lines(path: str) -> None:
    """Rewrites `path` (whole: tmp + rename) without the lines a killed run cut short (warning
    about each, as load_pool does), so the lines appended next start lines of their own."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    whole = []
    for n, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except json.JSONDecodeError:
            print(f"warning: {path}:{n}: cut short (a killed run?); dropped", file=sys.stderr)
            continue
        whole.append(line)
    if len(whole) < len(lines):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in whole))
        os.replace(path + ".tmp", path)


def mine_pool(out: str, per_project: int, workers: int = 2, seed: int = SEED, log=print) -> int:
    """Appends the kept recipes of untried candidates to `out`; returns how many it holds."""
    held = set(holdout.HELD_OUT_REPOS)
    tried_path = out + ".tried"
    drop_cut_lines(out)  # a recipe line a kill cut short: its site is tried again
    listed = open(tried_path).read() if os.path.exists(tried_path) else ""
    if listed and not listed.endswith("\n"):  # a cut id matches no site: only end its line
        with open(tried_path, "a") as f:
            f.write("\n")
    tried = set(listed.split())
    todo = list(candidates(training_projects(), per_project, seed, suite_ids(), tried))
    log(f"{len(todo)} candidate sites to try ({len(tried)} tried before)")
    lock = threading.Lock()

    def one(item):
        name, site = item
        recipe = try_site(name, site)
        with lock:
            if recipe is not None:
                assert recipe.project not in held, recipe.id  # never a held-out repository
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(recipe.to_dict(), sort_keys=True) + "\n")
            with open(tried_path, "a") as f:
                f.write(M.site_id(name, site) + "\n")
            log(f"{M.site_id(name, site)}: {'kept' if recipe else 'no fail->pass'}")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, todo))
    return len(load_pool(out))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m rl.envs.repos.training_pool")
    p.add_argument("--out", required=True, help="recipes, one JSON line each (appended)")
    p.add_argument(
        "--per-project", type=int, default=60, help="candidate sites tried per project, in all"
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=SEED)
    a = p.parse_args(argv)
    try:  # every sandbox of a project mounts its declared test dependencies: cached, or stop
        require_test_deps(training_projects())
    except MissingTestDeps as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n = mine_pool(a.out, a.per_project, a.workers, a.seed)
    print(f"{n} recipes in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
