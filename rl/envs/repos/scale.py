"""Many projects through the `add` path, and a task pool mined across worker processes.

    python -m rl.envs.repos.scale try dist/*.tar.gz --specs /tmp/specs --table table.json
    python -m rl.envs.repos.scale mine --workers 2 --per-project 30 --tries 90 --out pool.jsonl
    python -m rl.envs.repos.scale mine --resume ...   # keep the pool, skip what was tried, add more
    python -m rl.envs.repos.scale counts                # the committed pool's tasks per family

`try` runs `add` (setup agent, proposal, gate; no mining) on each source in its own worker process
and writes one row per source: admitted or rejected with add's one-line reason, the number of
baseline tests, the seconds it took. Nothing is edited by hand: the row is what a user gets.

`mine` mines the vendored projects (vendored.PROJECTS; their specs in data/repos/specs/) with one
unit of work per candidate site, spread over `--workers` processes: the mutation's fail->pass run,
then for a kept candidate the task gate (rl/envs/grading/verify.py) and the scripted cheats
(mine.cheats_fail). A project stops getting work once it has `--per-project` verified tasks or
`--tries` candidates were tried. Then, per project, review tasks of its first REVIEW_PER_PROJECT
verified line-keeping mutations and its DevOps tasks (review_devops.py), each through the task
gate too. The committed suite's recipe ids are skipped (held out by site). Every line of the pool
names its split: "heldout" for a project in holdout.HELD_OUT_REPOS (held out by repository),
else "train". A line is a recipe (bugfix, feature, review: rebuilt by mine.build_task /
review_devops.review_task from the vendored files, no sandbox) or a DevOps task's id with its gated
baseline (rebuilt by review_devops.devops_tasks).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from rl.envs.repos.vendored import PROJECTS, ROOT

POOL = ROOT / "data/repos/pool.jsonl"
TABLE = ROOT / "data/repos/projects_tried.json"
REVIEW_PER_PROJECT = 2
DEVOPS_SEEDS = (0,)  # makefile breakages (review_devops.makefile_task: seed % 3)


# ---------------------------------------------------------------- try: the add path per source


def try_one(source: str, specs: str, timeout_s: float) -> dict:
    """One source through `add` without mining: the table's row."""
    from rl.envs.repos.add import AddError, add

    t0 = time.monotonic()
    row = {"source": Path(source).name}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            spec = add(source, specs=Path(specs), out=Path(tmp) / "t.jsonl", tasks=0,
                       timeout_s=timeout_s, log=lambda *_: None)  # fmt: skip
            row.update(name=spec.name, admitted=True, reason="ok", tests=len(spec.baseline))
            row["passing"] = len(spec.passing())
            row["notes"] = spec.notes
            if spec.test_deps:  # declared test dependencies add installed (dep_fetch.py)
                row["test_deps"] = spec.test_deps
        except AddError as e:
            row.update(admitted=False, reason=str(e), tests=0)
        except Exception as e:  # a crash of the path itself is a rejection the table must show
            row.update(admitted=False, reason=f"add crashed: {type(e).__name__}: {e}", tests=0)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def try_sources(sources, specs: str, workers: int, timeout_s: float = 120.0, log=print):
    rows = []
    with ProcessPoolExecutor(workers) as pool:
        for row in pool.map(try_one, sources, [specs] * len(sources), [timeout_s] * len(sources)):
            log(json.dumps(row))
            rows.append(row)
    return rows


# ---------------------------------------------------------------- mine: candidates in workers

_CACHE: dict = {}


def _project(name: str):
    from rl.envs.repos.vendored import load_spec, project_files

    if name not in _CACHE:
        _CACHE[name] = (project_files(name), load_spec(name))
    return _CACHE[name]


def check_site(project: str, site: dict) -> tuple[dict | None, str]:
    """One candidate, in a worker: (recipe dict, "ok") when it gives a verified task, else
    (None, why not)."""
    from rl.envs.grading.verify import verify_task
    from rl.envs.repos import mine as M

    files, spec = _project(project)
    site = M.Site(**dict(site, span=tuple(site["span"])))
    f2p = M.fail_to_pass(site, files, spec)
    passing = len(spec.passing())
    if not f2p or len(f2p) == passing and passing > 2:
        return None, f"{len(f2p)} fail->pass of {passing}"
    kind = "feature" if site.op == "remove_body" else "bugfix"
    recipe = M.Recipe(M.site_id(spec.name, site), spec.name, kind, site, f2p)
    recipe.prompt = M.statement(recipe, files, spec)
    task = M.build_task(recipe, files, spec)
    verdict = verify_task(task)
    if not verdict.accepted:
        return None, f"task gate: {verdict.reason}"
    cheat = M.cheats_fail(task)
    if cheat:
        return None, f"scripted cheat {cheat} passes"
    return recipe.to_dict(), "ok"


def check_family_task(project: str, recipe: dict | None, devops_seed: int | None) -> dict | None:
    """A review task (of `recipe`) or a DevOps task (makefile seed, -1: the config task) through
    the task gate, in a worker: its pool line, or None when it has none or it is rejected."""
    from rl.envs.grading.verify import verify_task
    from rl.envs.repos import mine as M
    from rl.envs.repos import review_devops as F

    files, spec = _project(project)
    if recipe is not None:
        task = F.review_task(M.Recipe.from_dict(recipe), files, spec)
    elif devops_seed == -1:
        task = F.config_task(project, files, spec)
    else:
        task = F.makefile_task(project, files, spec, devops_seed)
    if task is None or not verify_task(task).accepted:
        return None
    if recipe is not None:
        return dict(recipe, family="review")
    baseline = task.meta["devops"]["baseline"]
    return {"family": "devops", "id": task.id, "project": project, "baseline": baseline}


def _candidates(project: str, seed: int, skip: frozenset) -> list[dict]:
    import dataclasses

    from rl.envs.repos import mine as M

    files, spec = _project(project)
    out = []
    for site in M.candidate_sites(files, spec, seed):
        if M.site_id(spec.name, site) not in skip:
            out.append(dataclasses.asdict(site))
    return out


def mine_pool(
    projects,
    per_project: int,
    tries: int,
    workers: int,
    seed: int = 1,
    minutes: float = 0.0,
    partial: Path | None = None,
    log=print,
    verified: list[dict] | None = None,
    known: list[dict] | None = None,
    tried_log: Path | None = None,
    reviews: int = REVIEW_PER_PROJECT,
    devops_seeds: tuple = DEVOPS_SEEDS,
):
    """Pool lines (dicts) of `projects`, mined over `workers` processes; and the stats. With
    `minutes`, no new candidate starts after that long (those running finish); with `partial`,
    each verified line is appended there as it comes (a killed run keeps what it verified).
    `verified`: code tasks already verified (a partial file's lines): only the review and
    DevOps stage runs. `known`: a pool already mined (resume): its tasks are neither tried nor
    returned again, they count toward `per_project` and `reviews`; with `tried_log`, every site
    tried is appended there and a site listed there is not tried again."""
    from rl.envs.repos.holdout import HELD_OUT_REPOS
    from rl.envs.repos.projects import FAMILIES, SUITE, load_recipes

    skip = frozenset(r.id for r in load_recipes(SUITE)) if SUITE.exists() else frozenset()
    known = known or []
    skip |= {d["id"] for d in known} | _tried(tried_log)
    # the suite's DevOps tasks are held out by site like its recipes: never a pool line
    suite_devops = set(json.loads(FAMILIES.read_text())["devops"]) if FAMILIES.exists() else set()
    known_ids = {(d["family"], d["id"]) for d in known} | {("devops", i) for i in suite_devops}
    have = {p: sum(d["project"] == p and d["family"] in ("bugfix", "feature") for d in known)
            for p in projects}  # fmt: skip
    kept: dict[str, list[dict]] = {p: [] for p in projects}
    if verified is not None:
        for d in verified:
            if d["family"] in ("bugfix", "feature") and d["project"] in kept:
                kept[d["project"]].append({k: v for k, v in d.items() if k != "family"})
    # projects with verified code tasks already given only get the review and DevOps stage
    queues = {p: [] if kept[p] else _candidates(p, seed, skip)[:tries] for p in projects}
    t0, tried = time.monotonic(), 0
    with ProcessPoolExecutor(workers) as pool:
        running = {}

        turn = [0]  # round robin across projects: each pass starts after the last served

        def feed():
            if minutes and time.monotonic() - t0 > 60 * minutes:
                return
            cap, served = max(1, workers // 2), True
            while served and len(running) < 2 * workers:
                served = False
                for _ in range(len(projects)):
                    p = projects[turn[0] % len(projects)]
                    turn[0] += 1
                    busy = sum(1 for q, _ in running.values() if q == p)
                    if len(running) >= 2 * workers:
                        break
                    if queues[p] and len(kept[p]) + have[p] < per_project and busy < cap:
                        site = queues[p].pop(0)
                        running[pool.submit(check_site, p, site)] = (p, site)
                        served = True

        feed()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                p, site = running.pop(fut)
                tried += 1
                recipe, why = fut.result()
                if recipe is not None and len(kept[p]) + have[p] < per_project:
                    kept[p].append(recipe)
                    _append(partial, dict(recipe, family=recipe["kind"]))
                _append(tried_log, {"id": _site_id(p, site), "why": why})  # after: kill-safe
                log(f"{p}: {len(kept[p])} kept, {why}")
            feed()
        code_s = time.monotonic() - t0
        jobs = []
        for p in projects:
            from rl.envs.grading.grade_review import REVIEW_OPS

            done_reviews = sum(d["project"] == p and d["family"] == "review" for d in known)
            mined = [_recipe(d) for d in known if d["project"] == p and d["family"] != "review"]
            picked = [
                r
                for r in mined + kept[p]
                if r.get("site", {}).get("op") in REVIEW_OPS
                and ("review", r["id"]) not in known_ids
            ][: max(0, reviews - done_reviews)]
            jobs += [pool.submit(check_family_task, p, r, None) for r in picked]
            seeds = [
                s for s in (-1, *devops_seeds) if ("devops", _devops_id(p, s)) not in known_ids
            ]
            jobs += [pool.submit(check_family_task, p, None, s) for s in seeds]
        extra = []
        for job in jobs:
            line = job.result()
            if line is not None and (line["family"], line["id"]) not in known_ids:
                extra.append(line)
                _append(partial, line)
    lines = [dict(r, family=r["kind"]) for p in projects for r in kept[p]] + extra
    for line in lines:
        line["split"] = "heldout" if line["project"] in HELD_OUT_REPOS else "train"
    total_s = time.monotonic() - t0
    stats = {"candidates": tried, "code_s": round(code_s, 1), "total_s": round(total_s, 1)}
    stats["tasks_per_min"] = round(len(lines) / (total_s / 60), 2)
    return lines, stats


def _recipe(line: dict) -> dict:
    return {k: v for k, v in line.items() if k not in ("family", "split")}


def _site_id(project: str, site: dict) -> str:
    from rl.envs.repos import mine as M

    return M.site_id(project, M.Site(**dict(site, span=tuple(site["span"]))))


def _devops_id(project: str, seed: int) -> str:
    """The id check_family_task's DevOps task of `seed` gets (-1: the config task)."""
    return f"{project}-devops-config" if seed == -1 else f"{project}-devops-makefile-s{seed}"


def _tried(path: Path | None) -> set[str]:
    if path is None or not path.exists():
        return set()
    with open(path, encoding="utf-8") as f:
        return {json.loads(x)["id"] for x in f if x.strip()}


def _append(path: Path | None, line: dict) -> None:
    if path is not None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")


def write_pool(lines: list[dict], out: Path) -> None:
    from rl.envs.repos.add import write_whole

    order = {"bugfix": 0, "feature": 1, "review": 2, "devops": 3}
    lines = sorted(lines, key=lambda d: (d["project"], order[d["family"]], d["id"]))
    write_whole(out, "".join(json.dumps(d, sort_keys=True) + "\n" for d in lines))


# ---------------------------------------------------------------- reading the pool back


def load_pool(path: Path = POOL, split: str = "") -> list[dict]:
    """The pool's lines (all, or one split: "train" | "heldout")."""
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(x) for x in f if x.strip()]
    return [d for d in lines if not split or d["split"] == split]


def pool_tasks(lines: list[dict]):
    """The pool's Tasks, rebuilt from the vendored files without a sandbox."""
    from rl.envs.repos import mine as M
    from rl.envs.repos import review_devops as F

    out = []
    for d in lines:
        files, spec = _project(d["project"])
        if d["family"] == "devops":
            task = _devops(d, files, spec)
        else:
            recipe = M.Recipe.from_dict(
                {k: v for k, v in d.items() if k not in ("family", "split")}
            )
            if d["family"] == "review":
                task = F.review_task(recipe, files, spec)
            else:
                task = M.build_task(recipe, files, spec)
        task.meta["split"] = d["split"]
        out.append(task)
    return out


def _devops(d: dict, files, spec):
    from rl.envs.repos import review_devops as F

    if d["id"].endswith("-devops-config"):
        task = F.config_task(d["project"], files, spec)
    else:
        task = F.makefile_task(d["project"], files, spec, int(d["id"].rsplit("-s", 1)[1]))
    task.meta["devops"]["baseline"] = d["baseline"]
    return task


def counts(lines: list[dict]) -> dict:
    """Tasks per family, per project and per split."""
    out: dict = {"family": {}, "project": {}, "split": {}}
    for d in lines:
        for key in out:
            value = d[key] if key != "family" else d["family"]
            out[key][value] = out[key].get(value, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in out.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.envs.repos.scale")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("try", help="sources through `add` (no mining) -> a table of verdicts")
    t.add_argument("sources", nargs="+")
    t.add_argument("--specs", default=str(Path(tempfile.gettempdir()) / "rl_scale_specs"))
    t.add_argument("--table", default=str(TABLE))
    t.add_argument("--workers", type=int, default=2)
    t.add_argument("--timeout", type=float, default=120.0)
    m = sub.add_parser("mine", help="the vendored projects -> a gated pool, over worker processes")
    m.add_argument("--projects", default=",".join(PROJECTS))
    m.add_argument("--per-project", type=int, default=30)
    m.add_argument("--tries", type=int, default=90)
    m.add_argument("--workers", type=int, default=2)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--out", default=str(POOL))
    m.add_argument("--minutes", type=float, default=0.0, help="no new candidate after this")
    m.add_argument("--families-from", default="", help="verified code tasks (a .partial file)")
    m.add_argument("--resume", action="store_true",
                   help="keep --out's tasks (and a killed run's .partial), skip the sites in "
                        "--out.tried, mine more and write the union")  # fmt: skip
    m.add_argument("--reviews", type=int, default=REVIEW_PER_PROJECT, help="review tasks a project")
    m.add_argument("--devops-seeds", default=",".join(map(str, DEVOPS_SEEDS)),
                   help="makefile breakages (seed %% 3) a project")  # fmt: skip
    c = sub.add_parser("counts", help="a pool's tasks per family, project and split")
    c.add_argument("--pool", default=str(POOL))
    args = parser.parse_args(argv)
    if args.command == "try":
        rows = try_sources(args.sources, args.specs, args.workers, args.timeout)
        Path(args.table).write_text(json.dumps(rows, indent=1) + "\n")
        admitted = sum(r["admitted"] for r in rows)
        print(f"admitted {admitted}/{len(rows)} ({admitted / len(rows):.0%}) -> {args.table}")
        return 0
    if args.command == "counts":
        print(json.dumps(counts(load_pool(Path(args.pool))), indent=1))
        return 0
    projects = tuple(p for p in args.projects.split(",") if p)
    partial = Path(args.out + ".partial")
    known = resume_lines(Path(args.out), partial) if args.resume else []
    if known:  # written now: the .partial may go, nothing verified is lost if this run dies
        write_pool(known, Path(args.out))
    partial.unlink(missing_ok=True)
    verified = load_pool(Path(args.families_from)) if args.families_from else None
    seeds = tuple(int(x) for x in args.devops_seeds.split(",") if x)
    lines, stats = mine_pool(
        projects, args.per_project, args.tries, args.workers, args.seed, args.minutes, partial,
        verified=verified, known=known, reviews=args.reviews, devops_seeds=seeds,
        tried_log=Path(args.out + ".tried") if args.resume else None,
    )  # fmt: skip
    write_pool(known + lines, Path(args.out))
    print(json.dumps(dict(stats, tasks=len(lines), **counts(lines))))
    if known:
        print(json.dumps(dict(pool=len(known) + len(lines), **counts(known + lines))))
    return 0


def resume_lines(out: Path, partial: Path) -> list[dict]:
    """A pool to resume: `out`'s lines and a killed run's `partial` lines (split added), each
    (family, id) once, less any DevOps task that is the committed suite's (held out by site)."""
    from rl.envs.repos.holdout import HELD_OUT_REPOS
    from rl.envs.repos.projects import FAMILIES

    lines = load_pool(out) if out.exists() else []
    if partial.exists():
        for d in load_pool(partial):
            d.setdefault("split", "heldout" if d["project"] in HELD_OUT_REPOS else "train")
            lines.append(d)
    suite = set(json.loads(FAMILIES.read_text())["devops"]) if FAMILIES.exists() else set()
    seen, out_lines = set(), []
    for d in lines:
        key = (d["family"], d["id"])
        if key in seen or d["family"] == "devops" and d["id"] in suite:
            continue
        seen.add(key)
        out_lines.append(d)
    return out_lines


if __name__ == "__main__":
    sys.exit(main())
