"""DevOps templates: a small project whose build / CI / test configuration is broken; solved when
its check command passes (graded by rl/envs/grading/grade_devops.py: trusted check, file rules, test
set).

    devops_pytest_config   setup.cfg [tool:pytest]: test files not collected, a plugin that is
                           not installed (required_plugins, addopts -p), a minversion typo
    devops_makefile        Makefile `test` target: pytest misspelt, a wrong test directory
    devops_requirements    requirements.txt pins a pytest version that is not installed (offline)
    devops_script          scripts/ci.sh: the interpreter misspelt, a wrong test directory

The expected test set (meta["devops"]["expected"]) is known by construction; the gate checks that
the reference passes exactly it and takes it as the baseline.
"""

from __future__ import annotations

import importlib.metadata

from rl.envs.grading.grade_devops import PIN_CHECKER, PYTEST_LINE
from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt


def _project(rng, pkg, difficulty):
    """(files, expected test ids): a tiny package with two test files."""
    files = base_repo(rng, pkg, difficulty)
    k = rng.randint(2, 9)
    files[f"{pkg}/core.py"] = dedent(f"""
        def scale(x):
            return x * {k}


        def clip(x, hi):
            return x if x < hi else hi
        """)
    files["tests/test_core.py"] = (
        f"import pytest\n\nfrom {pkg}.core import clip, scale\n\n\n"
        f"def test_scale():\n    assert scale(2) == {2 * k}\n\n\n"
        f"def test_clip():\n    assert clip(5, 3) == 3\n"
    )
    files["tests/test_more.py"] = (
        f"from {pkg}.core import clip\n\n\ndef test_clip_below():\n    assert clip(1, 3) == 1\n"
    )
    ids = ["tests/test_core.py::test_scale", "tests/test_core.py::test_clip"]
    return files, ids + ["tests/test_more.py::test_clip_below"]


def _meta(check, editable, expected):
    return {
        "grader": "devops",
        "devops": {"check": check, "editable": editable, "expected": sorted(expected)},
    }


def devops_pytest_config(rng, pkg, difficulty):
    variant = rng.choice(("python_files", "required_plugin", "missing_plugin", "minversion"))
    files, ids = _project(rng, pkg, difficulty)
    head = f"[metadata]\nname = {pkg}\n\n[tool:pytest]\ntestpaths = tests\n"
    plugin = rng.choice(("timeout", "xdist", "randomly"))
    if variant == "python_files":
        broken = head + "python_files = check_*.py\n"
        fixed = head + "python_files = test_*.py\n"
    elif variant == "required_plugin":
        broken, fixed = head + f"required_plugins = pytest-{plugin}\n", head
    elif variant == "missing_plugin":
        module = {"timeout": "pytest_timeout", "randomly": "pytest_randomly"}.get(plugin, plugin)
        broken, fixed = head + f"addopts = -p {module}\n", head
    else:
        broken = head + f"minversion = {rng.randint(20, 99)}.0\n"
        fixed = head + "minversion = 6.0\n"
    files["setup.cfg"] = broken
    prompt = pick_prompt(
        difficulty,
        (
            "`python3 -m pytest` fails because of the pytest config in setup.cfg (CI is offline: "
            "nothing can be installed). fix the config, not the tests",
            "the test run is broken by the pytest settings, fix the config",
            "pytest is broken in CI, fix",
        ),
    )
    keep = ["[tool:pytest]", "testpaths = tests"]
    meta = _meta("python3 -m pytest -q", {"setup.cfg": {"kind": "lines", "keep": keep}}, ids)
    return files, prompt, {}, {"setup.cfg": fixed}, meta


def _script_rule(line: int) -> dict:
    return {"kind": "script", "repair": [line], "pattern": PYTEST_LINE}


def _broken_command(rng, pkg, difficulty, *, path, text, good, bad, prompts, command, line):
    """A project whose `command` runs the tests through the file `path` (`text` with one command
    line at `line`), broken by one of `bad`; the fix restores `good`. The task generators below are
    this with their own file."""
    files, ids = _project(rng, pkg, difficulty)
    files[path] = text.format(rng.choice(bad))
    prompt = pick_prompt(difficulty, prompts)
    meta = _meta(command, {path: _script_rule(line)}, ids)
    return files, prompt, {}, {path: text.format(good)}, meta


def devops_makefile(rng, pkg, difficulty):
    return _broken_command(
        rng,
        pkg,
        difficulty,
        path="Makefile",
        text="PYTHON ?= python3\n\n.PHONY: test\n\ntest:\n{}\n",
        good="\t$(PYTHON) -m pytest -q tests",
        bad=("\t$(PYTHON) -m pytset -q tests", "\t$(PYTHON) -m pytest -q test"),
        prompts=(
            "`make test` fails: fix the test target in the Makefile",
            "make test is broken, fix the Makefile",
            "make test fails, fix",
        ),
        command="make test",
        line=6,
    )


def devops_script(rng, pkg, difficulty):
    return _broken_command(
        rng,
        pkg,
        difficulty,
        path="scripts/ci.sh",
        text="#!/bin/sh\n# CI entry point: run the test suite\nset -e\n{}\n",
        good="python3 -m pytest -q tests",
        bad=("pyhton3 -m pytest -q tests", "python3 -m pytest -q tsets"),
        prompts=(
            "CI runs `sh scripts/ci.sh` and it fails. fix the script",
            "scripts/ci.sh is broken, fix it",
            "CI script fails, fix",
        ),
        command="sh scripts/ci.sh",
        line=4,
    )


def devops_requirements(rng, pkg, difficulty):
    files, ids = _project(rng, pkg, difficulty)
    have = importlib.metadata.version("pytest")  # what this machine (and its sandbox) has
    major = int(have.split(".")[0])
    bad = rng.choice((f"{major + 1}.0.0", f"{major + 2}.1.0", f"{max(major - 3, 1)}.0.1"))
    text = "# test dependencies (CI installs offline from what the image has)\npytest=={}\n"
    files["requirements.txt"] = text.format(bad)
    files["ci/check_pins.py"] = PIN_CHECKER
    prompt = pick_prompt(
        difficulty,
        (
            "CI fails at `python3 ci/check_pins.py requirements.txt`: the pytest pin doesn't "
            "match the installed version. fix the pin (keep it an exact == pin)",
            "the requirements pin check fails, fix the pin (exact pins only)",
            "requirements check is red, fix (keep exact pins)",
        ),
    )
    # The project's check, run from the grader's trusted copy of ci/check_pins.py.
    check = "python3 -I {trusted}/check_pins.py requirements.txt && python3 -m pytest -q"
    meta = _meta(check, {"requirements.txt": {"kind": "pins", "keep": ["pytest"]}}, ids)
    meta["devops"]["trusted_files"] = {"check_pins.py": PIN_CHECKER}
    return files, prompt, {}, {"requirements.txt": text.format(have)}, meta
