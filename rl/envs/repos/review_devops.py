"""Code review and DevOps tasks mined from the vendored real projects
(rl/envs/grading/grade_review.py and rl/envs/grading/grade_devops.py grade them; the task gate,
rl/envs/grading/verify.py, checks them all).

- Review (`review_task`): a mined mutation recipe (mine.Recipe, ops in review.REVIEW_OPS) becomes
  a patch that implements the mutated function: the diff goes from the function stubbed out
  (`raise NotImplementedError`, the feature-removal operator) to its mutated body, applied in the
  repo. The answer is the mutated statement's line span; the recipe's fail->pass tests (hidden)
  are what the gate runs to check the defect is real.
- DevOps, two kinds:
  - `config_task`: the project's own pytest configuration as shipped, when it is broken offline:
    addopts naming options of plugins that are not installed (semver's setup.cfg passes
    --cov... without pytest-cov; the setup agent had worked around it with `-o addopts=`). The
    check is the plain `python3 -m pytest -q`; the reference drops those options and keeps the
    rest (doctests included), which must stay.
  - `makefile_task`: a Makefile whose `test` target runs the project's test command, broken the
    way real ones break (pytest misspelt, a test path misspelt); the check is `make test`.
  - `ini_task`: a project with no pytest configuration at all gets a pytest.ini broken the way
    a CI config breaks offline (a required plugin that is not installed, `-p` of a missing
    plugin, a minversion typo); the check is the spec's own test command.
  Projects with setup commands (a src layout's link) are mined too: the task runs the spec's
  setup, and grading ignores and re-creates what it makes (rl/envs/grading/grade_devops.py).
  The check is the spec's test command: it must pass with the reference (the gate checks).

`families_of(files, spec, recipes)` gives any admitted repository's review and DevOps tasks
(`python -m rl.envs.repos add` and `... suite` use it); `devops_tasks` / `review_tasks` read the
vendored projects.
"""

from __future__ import annotations

import importlib.util
import random
import re

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.grade_devops import PYTEST_LINE
from rl.envs.grading.grade_review import REVIEW_OPS, answer_span, unified_diff
from rl.envs.grading.tasks import Task
from rl.envs.repos import mine as M
from rl.envs.repos.spec import EnvSpec
from rl.envs.repos.vendored import load_spec, project_files

# addopts options that belong to a plugin, by the module that provides them.
PLUGIN_OPTIONS = {"pytest_cov": ("--cov", "--no-cov"), "xdist": ("-n", "--dist")}


def stub_function(source: str, symbol: str) -> str:
    """`source` with `symbol`'s body (after its docstring) replaced by raise NotImplementedError."""
    for sym, func in M.functions(parse_python(source)):
        body = M._body(func)
        if sym == symbol and body:
            span = (
                body[0].lineno,
                body[0].col_offset,
                body[-1].end_lineno,
                body[-1].end_col_offset,
            )
            return M.splice(source, span, "raise NotImplementedError")
    raise ValueError(f"{symbol}: no function body to stub")


def review_task(recipe: M.Recipe, files: dict[str, str], spec: EnvSpec) -> Task | None:
    """The review task of a mutation recipe (None for ops that move lines: dropped branches,
    removals)."""
    site = recipe.site
    if site.op not in REVIEW_OPS:
        return None
    task = M.build_task(recipe, files, spec)
    patched = task.files[site.path]
    base = stub_function(patched, site.symbol)
    lo, hi = answer_span(patched, site.span[0])
    name = site.symbol.split(".")[-1]
    task.id = f"{recipe.id}-review"
    task.kind = "review"
    task.prompt = (
        f"Review this patch (it is applied in the repo): it implements {name}(). One line of it "
        "has a bug: report that file and line with the report tool, then submit.\n\n"
        f"```diff\n{unified_diff(site.path, base, patched)}```"
    )
    task.meta.update(
        template="repo_review",
        grader="review",
        review={"path": site.path, "lines": [lo, hi], "op": site.op},
        review_base={site.path: base},
        tools=["report", "search", "code_search"],
    )
    return task


def _pytest_section(text: str) -> bool:
    return "[tool:pytest]" in text or "[pytest]" in text


def config_task(project: str, files: dict[str, str], spec: EnvSpec) -> Task | None:
    """The project's shipped pytest config, when its addopts name options of missing plugins."""
    for rel in ("setup.cfg", "tox.ini", "pytest.ini"):
        text = files.get(rel, "")
        if not _pytest_section(text):
            continue
        missing = [p for p, opts in PLUGIN_OPTIONS.items() if not _importable(p)]
        prefixes = tuple(o for p in missing for o in PLUGIN_OPTIONS[p])
        lines = text.splitlines(keepends=True)
        bad = [l for l in lines if l.strip().startswith(prefixes) and l[:1] in " \t"]
        if not bad:
            continue
        fixed = "".join(l for l in lines if l not in bad)
        section = fixed.split("[tool:pytest]" if "[tool:pytest]" in fixed else "[pytest]")[1]
        section = section.split("\n[", 1)[0]
        keep = [l.strip() for l in section.splitlines() if l.strip()]
        header = "[tool:pytest]" if "[tool:pytest]" in fixed else "[pytest]"
        return _devops_task(
            project,
            f"{project}-devops-config",
            "`python3 -m pytest` doesn't even start here (CI is offline, nothing new can "
            "be installed). fix the pytest config, keep everything else it runs",
            dict(files),
            {rel: fixed},
            check="python3 -m pytest -q",
            editable={rel: {"kind": "lines", "keep": [header, *keep]}},
            spec=spec,
        )
    return None


def has_pytest_config(files: dict[str, str]) -> bool:
    return (
        "pytest.ini" in files
        or _pytest_section(files.get("setup.cfg", "") + files.get("tox.ini", ""))
        or "[tool.pytest.ini_options]" in files.get("pyproject.toml", "")
    )


def check_command(spec: EnvSpec) -> str | None:
    """The spec's test command when it runs pytest (the DevOps check), else None. Not narrowed to
    the tests that pass at baseline: the graded baseline can differ from pytest's own run (parse's
    test_too_many_fields fails graded, passes in pytest), and the committed DevOps tasks run the
    whole command; a repository whose pytest run fails gets no DevOps task (the gate says why)."""
    return spec.test_command if "-m pytest" in spec.test_command else None


# pytest plugins a CI config names (module, distribution): a broken config names one not installed.
PLUGINS = (
    ("pytest_timeout", "pytest-timeout"),
    ("pytest_randomly", "pytest-randomly"),
    ("xdist", "pytest-xdist"),
    ("pytest_rerunfailures", "pytest-rerunfailures"),
)


def ini_task(project: str, files: dict[str, str], spec: EnvSpec, seed: int = 0) -> Task | None:
    """A pytest.ini for a project that has no pytest configuration, broken one way (seed % 3: a
    required plugin not installed, `-p` of a missing plugin, a minversion typo)."""
    check = check_command(spec)
    if check is None or has_pytest_config(files):
        return None
    missing = [(m, d) for m, d in PLUGINS if not _importable(m)]
    variant = seed % 3 if missing else 2
    module, dist = missing[seed % len(missing)] if missing else ("", "")
    head, fixed = "[pytest]\n", "[pytest]\nminversion = 6.0\n"
    broken = (
        f"{head}minversion = 6.0\nrequired_plugins = {dist}\n",
        f"{head}minversion = 6.0\naddopts = -p {module}\n",
        f"{head}minversion = 60.0\n",
    )[variant]
    rng = random.Random(f"{project}:ini:{seed}")
    return _devops_task(
        project,
        f"{project}-devops-ini-s{seed}",
        rng.choice(
            (
                "the test run is broken by pytest.ini (CI is offline: nothing can be installed). "
                "fix the config, not the tests",
                "pytest fails before running any test, fix the config",
            )
        ),
        {**files, "pytest.ini": broken},
        {"pytest.ini": fixed},
        check=check,
        editable={"pytest.ini": {"kind": "lines", "keep": ["[pytest]"]}},
        spec=spec,
    )


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


MAKEFILE = "PYTHON ?= python3\n\n.PHONY: test\n\ntest:\n{}\n"


def makefile_task(project: str, files: dict[str, str], spec: EnvSpec, seed: int = 0) -> Task | None:
    """A `make test` target for the project's test command, broken one way (seed % 3: pytest
    misspelt, the first test path misspelt, an undefined make variable)."""
    check = check_command(spec)
    if check is None or "Makefile" in files:
        return None
    args = check.split("-m pytest", 1)[1].split()
    named = [a for a in args if not a.startswith("-") and a.endswith(".py")]
    # A command that names its test files keeps them alone: pytest given src/tests.py and src/
    # as well counts the file once, under src/, where its name does not match, and runs nothing.
    paths = named or sorted({p.split("/")[0] if "/" in p else p for p in spec.test_files})
    good = "\t$(PYTHON) -m pytest " + " ".join(args + ([] if named else paths))
    if not re.fullmatch(PYTEST_LINE, good):
        return None
    rng = random.Random(f"{project}:makefile:{seed}")
    target = paths[0]
    typo = target[:-3] + "s.py" if target.endswith(".py") else target.rstrip("s")
    breakages = (  # seed picks one: seed 0 (the suite's) and a pool's seed 1, 2 differ
        good.replace("-m pytest", "-m pytset"),
        good.replace(target, typo),
        good.replace("$(PYTHON)", "$(PYTON)"),
    )
    bad = breakages[seed % len(breakages)]
    return _devops_task(
        project,
        f"{project}-devops-makefile-s{seed}",
        rng.choice(("`make test` fails, fix the Makefile", "make test is broken. fix")),
        {**files, "Makefile": MAKEFILE.format(bad)},
        {"Makefile": MAKEFILE.format(good)},
        check="make test",
        editable={"Makefile": {"kind": "script", "repair": [6], "pattern": PYTEST_LINE}},
        spec=spec,
    )


def _devops_task(project, task_id, prompt, files, solution, *, check, editable, spec) -> Task:
    """A mined DevOps task: graded by its trusted `check` command (rl/envs/grading/grade_devops.py),
    the agent editing only what `editable` allows; no hidden tests. The spec's setup runs at the
    episode's start and again by grading; its test dependencies are in every sandbox."""
    return Task(
        id=task_id,
        prompt=prompt,
        files=files,
        hidden_tests={},
        solution=solution,
        kind="devops",
        setup=list(spec.setup),
        meta={
            **M.deps_meta(spec),
            "template": "repo_devops",
            "project": project,
            "grader": "devops",
            "devops": {"check": check, "editable": editable},
            "tools": ["search", "code_search"],
        },
    )


def devops_tasks(projects, seed: int = 0) -> list[Task]:
    """The mined DevOps tasks of `projects` (ungated: rl/envs/grading/verify.py takes their
    baseline)."""
    out = []
    for name in projects:
        files, spec = project_files(name), load_spec(name)
        out += [
            t for t in (config_task(name, files, spec), makefile_task(name, files, spec, seed)) if t
        ]
    return out


def families_of(
    files: dict[str, str], spec: EnvSpec, recipes: list[M.Recipe], seed: int = 0
) -> list[Task]:
    """Any admitted repository's review tasks (of `recipes` whose op keeps line numbers) and
    DevOps tasks (its shipped config when broken offline, else a broken pytest.ini; a Makefile);
    ungated: rl/envs/grading/verify.py takes their baselines."""
    out = [t for r in recipes if (t := review_task(r, files, spec)) is not None]
    ini = config_task(spec.name, files, spec) or ini_task(spec.name, files, spec, seed)
    return out + [t for t in (ini, makefile_task(spec.name, files, spec, seed)) if t]


def review_tasks(recipes: list[M.Recipe]) -> list[Task]:
    """Review tasks of the recipes whose op keeps line numbers (ungated)."""
    files, specs, out = {}, {}, []
    for r in recipes:
        if r.project not in files:
            files[r.project], specs[r.project] = project_files(r.project), load_spec(r.project)
        task = review_task(r, files[r.project], specs[r.project])
        if task is not None:
            out.append(task)
    return out
