"""Procedural Python coding tasks, reproducible by (template, seed, difficulty).

Kinds and templates (the kinds the Composer report names):
    bugfix    off_by_one, boundary, mutable_default
    feature   add_function, add_option
    refactor  rename, extract_helper
    tests     write_tests, regression_test
    docs      docstrings, readme_example
    migration api_migration
    review    review_patch (TOOL_FAMILY_TEMPLATES: a planted defect, reported with `report`)
    devops    devops_pytest_config, devops_makefile, devops_requirements, devops_script
              (TOOL_FAMILY_TEMPLATES: a broken config, graded by the trusted check)
    context   long_lookup (LONG_CONTEXT_TEMPLATES: needs more context than a small budget holds;
              not in TEMPLATES, so default pools and traces stay as they were; name it to use it)

Difficulty 1..3 makes the prompt vaguer (d1 names the file and symptom, d3 only the symptom) and
the repo bigger (d-1 distractor modules; more callers for rename/migration; more mutants for
write_tests). Names and constants are drawn from `random.Random` seeded by the arguments only, so
the same arguments give byte-identical tasks. Each template returns the repo, a terse prompt, hidden
tests and the reference solution as whole-file edits; the verification gate checks them all.

A template is `make(rng, pkg, difficulty) -> (files, prompt, hidden_tests, solution)` (all
path -> text dicts but the prompt); add one by writing it in the module of its kind and listing it
in TEMPLATES below.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from rl.envs.grading.tasks import Task
from rl.envs.taskgen import (
    bugfix,
    devops,
    feature,
    lookup,
    migration,
    refactor,
    review,
    tests_docs,
)
from rl.envs.taskgen.helpers import PACKAGES

TEMPLATES: dict[str, tuple[str, Callable]] = {
    "off_by_one": ("bugfix", bugfix.off_by_one),
    "boundary": ("bugfix", bugfix.boundary),
    "mutable_default": ("bugfix", bugfix.mutable_default),
    "add_function": ("feature", feature.add_function),
    "add_option": ("feature", feature.add_option),
    "rename": ("refactor", refactor.rename),
    "extract_helper": ("refactor", refactor.extract_helper),
    "write_tests": ("tests", tests_docs.write_tests),
    "regression_test": ("tests", tests_docs.regression_test),
    "docstrings": ("docs", tests_docs.docstrings),
    "readme_example": ("docs", tests_docs.readme_example),
    "api_migration": ("migration", migration.api_migration),
}
# Families that need more context than a small budget: their `make` also returns the task's meta
# (rl/envs/taskgen/lookup.py). Named explicitly (generate_task, templates=...), never by default.
LONG_CONTEXT_TEMPLATES: dict[str, tuple[str, Callable]] = {
    "long_lookup": ("context", lookup.long_lookup),
}
# Code review and DevOps (rl/envs/grading/grade_review.py, rl/envs/grading/grade_devops.py): graded
# by the reported location or by the trusted check, not by hidden tests; their `make` also returns
# the task's meta. Named explicitly (generate_task, templates=...,
# `python -m rl.envs make --families`), never by default, so the default pools, traces and their
# tests stay as they were.
TOOL_FAMILY_TEMPLATES: dict[str, tuple[str, Callable]] = {
    "review_patch": ("review", review.review_patch),
    "devops_pytest_config": ("devops", devops.devops_pytest_config),
    "devops_makefile": ("devops", devops.devops_makefile),
    "devops_requirements": ("devops", devops.devops_requirements),
    "devops_script": ("devops", devops.devops_script),
}
# Families an RL task pool leaves out: the agentic eval (eval/agentic.py) measures transfer on them.
HELD_OUT_TEMPLATES = ("api_migration", "regression_test")


def training_templates() -> tuple[str, ...]:
    """The task templates a training pool may use (all but the held-out families)."""
    return tuple(t for t in TEMPLATES if t not in HELD_OUT_TEMPLATES)


def generate_task(
    template: str, seed: int, difficulty: int = 1, package: str | None = None
) -> Task:
    """`package` replaces the drawn package name (same task otherwise): SFT traces with many
    names teach a model to copy the name from the repo instead of recalling one of PACKAGES."""
    known = {**TEMPLATES, **LONG_CONTEXT_TEMPLATES, **TOOL_FAMILY_TEMPLATES}
    if template not in known:
        raise ValueError(f"unknown task template {template!r}; known: {', '.join(known)}")
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty!r}")
    if package is not None and not (package.isidentifier() and package.islower()):
        raise ValueError(f"package {package!r}: expected a lowercase Python identifier")
    kind, make = known[template]
    rng = random.Random(f"{template}:{seed}:{difficulty}")
    pkg = rng.choice(PACKAGES)  # drawn either way: the rest of the task stays the same
    pkg = package or pkg
    files, prompt, hidden, solution, *extra = make(rng, pkg, difficulty)
    return Task(
        id=f"{template}-s{seed}-d{difficulty}",
        prompt=prompt,
        files=files,
        hidden_tests=hidden,
        solution=solution,
        kind=kind,
        difficulty=difficulty,
        seed=seed,
        meta={"template": template, "package": pkg, **(extra[0] if extra else {})},
    )


def generate_tasks(
    n: int,
    seed: int = 0,
    difficulties: tuple[int, ...] = (1, 2, 3),
    templates: tuple[str, ...] | None = None,
) -> list[Task]:
    """n tasks cycling through templates (so every kind appears), difficulty drawn per task."""
    names = list(templates or TEMPLATES)
    rng = random.Random(seed)
    return [
        generate_task(
            names[i % len(names)], seed=rng.randrange(1 << 30), difficulty=rng.choice(difficulties)
        )
        for i in range(n)
    ]
