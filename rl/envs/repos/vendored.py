"""The vendored projects (data/repos/vendor/, each under its own license) and their cached
environment specs (data/repos/specs/<project>.json): the leaf that projects.py (suite, pools) and
review_devops.py (review + DevOps tasks) both read."""

from __future__ import annotations

from pathlib import Path

from rl.envs.repos.spec import EnvSpec, read_tree

# Data, not code: found from the repository root by the paths the scripted moves
# (tools/move_rl_layers.py) rewrite, so a move of the data is one table entry.
ROOT = Path(__file__).resolve().parents[3]
VENDOR = ROOT / "data/repos/vendor"
SPECS = ROOT / "data/repos/specs"
SUITE_PROJECTS = ("inflection", "semver", "parse", "roman")  # the committed suite's (suite.jsonl)
# Added through `python -m rl.envs.repos.scale try` (the `add` path, no hand edits) and mined into
# data/repos/pool.jsonl; data/repos/vendor/README.md lists versions, licenses and test styles.
ADDED_PROJECTS = (
    "addict",
    "cachetools",
    "first",
    "isodate",
    "jmespath",
    "jsonpointer",
    "ordered-set",
    "schema",
    "toml",
    "validators",
    "webcolors",
    "xmltodict",
    # admitted by the h50g re-run (grader and setup-agent fixes)
    "decorator",
    "funcy",
    "munch",
    "six",
    "voluptuous",
    # admitted by session s28b's re-run (a test module calling unittest.main() at import)
    "toposort",
)
PROJECTS = SUITE_PROJECTS + ADDED_PROJECTS


def project_files(name: str) -> dict[str, str]:
    if name not in PROJECTS:
        raise ValueError(f"unknown project {name!r}; vendored: {', '.join(PROJECTS)}")
    return read_tree(VENDOR / name)


def require_test_deps(projects) -> None:
    """Start-up check: each project's declared test-dependency set (its spec's `test_deps`) is in
    this machine's cache, else MissingTestDeps naming the project and the set."""
    from rl.envs.isolation.dep_cache import MissingTestDeps, host_dir

    for name in sorted(set(projects)):
        try:
            host_dir(load_spec(name).test_deps)
        except MissingTestDeps as e:
            raise MissingTestDeps(f"{name}: {e}") from None


def load_spec(name: str) -> EnvSpec:
    path = SPECS / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no spec (python -m rl.envs.repos.projects specs)")
    return EnvSpec.from_json(path.read_text())
