"""Coding tasks: repo files + terse prompt + hidden tests + setup + reference solution; grading.

On disk a task set is one JSONL file, one task per line, whose directory fields point (relative to
the JSONL file) at plain directories:

    {"id": "bugfix-3", "prompt": "mean() is off, fix", "repo": "bugfix-3/repo",
     "hidden_tests": "bugfix-3/hidden", "solution": "bugfix-3/solution", "solution_deletes": [],
     "setup": [], "test_command": "python3 -m pytest -q", "kind": "bugfix", "difficulty": 1,
     "seed": 3, "meta": {}}

`solution` holds the reference solution as whole files that replace or add repo files;
`solution_deletes` lists repo files the solution removes. Users bring their own tasks this way.

Grading copies the agent's final repo into a fresh sandbox, adds the hidden tests (after submit, so
the agent never sees them), and runs them with pytest (see `grade_in` for what it guards against).
Limitation: the code under test runs inside the pytest process, so a policy could still tamper with
the run from there (e.g. a repo module shadowing a stdlib module pytest imports late); hidden tests
from users cannot rely on a conftest.py of their own beyond the repo's original root one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rl.envs.sandbox import Limits, RepoTooLarge, Sandbox

HIDDEN_DIR = ".hidden_tests"
RESULTS_FILE = ".hidden_results.xml"


@dataclasses.dataclass
class Task:
    id: str
    prompt: str
    files: dict[str, str]
    hidden_tests: dict[str, str]
    solution: dict[str, str | None]  # path -> new content, None = delete
    setup: list[str] = dataclasses.field(default_factory=list)
    test_command: str = "python3 -m pytest -q"
    kind: str = "custom"
    difficulty: int = 1
    seed: int | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Grade:
    passed: int
    total: int
    output: str

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def all_pass(self) -> bool:
        return self.total > 0 and self.passed == self.total


# ---------------------------------------------------------------- grading


def apply_solution(sandbox: Sandbox, solution: dict[str, str | None]) -> None:
    for rel, content in solution.items():
        if content is None:
            sandbox.remove(rel)
        else:
            sandbox.write_text(rel, content)


def grade_in(sandbox: Sandbox, task: Task, timeout_s: float = 60.0) -> Grade:
    """Adds the hidden tests to `sandbox` (whose repo is consumed) and runs them.

    Cheap defences against a repo that games its grading: names the grader uses are replaced, the
    root conftest.py is reset to the task's original (or removed), the interpreter runs isolated
    (-I: the repo's own `pytest.py` or `sitecustomize.py` are not importable before pytest is), and
    the repo's pytest config is ignored (-c). The repo root is put on sys.path by our own ini.
    """
    for name in (HIDDEN_DIR, RESULTS_FILE, "conftest.py"):
        _remove_entry(sandbox.root, name)  # lstat-based: the agent may have planted symlinks
    if "conftest.py" in task.files:
        sandbox.write_text("conftest.py", task.files["conftest.py"])
    for rel, content in task.hidden_tests.items():
        sandbox.write_text(f"{HIDDEN_DIR}/{rel}", content)
    sandbox.write_text(f"{HIDDEN_DIR}/pytest.ini", "[pytest]\npythonpath = ..\n")
    command = (
        f"python3 -I -m pytest -q -p no:cacheprovider -c {HIDDEN_DIR}/pytest.ini "
        f"--rootdir=. --confcutdir=. --junitxml={RESULTS_FILE} {HIDDEN_DIR}"
    )
    result = sandbox.run(command, timeout_s)
    passed, total = _junit_counts(sandbox, RESULTS_FILE)
    expected = int(task.meta.get("hidden_test_count", 0))
    return Grade(
        passed=passed, total=max(total, expected), output=f"[{result.status}]\n{result.output}"
    )


def _remove_entry(root: str, name: str) -> None:
    path = os.path.join(root, name)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def grade_repo(
    task: Task, repo_dir: str, timeout_s: float = 60.0, limits: Limits = Limits()
) -> Grade:
    """Reward function: hidden tests run on a fresh copy of the agent's final repo."""
    try:
        box = Sandbox(repo_dir, limits=limits)
    except RepoTooLarge as e:
        return Grade(
            passed=0,
            total=max(int(task.meta.get("hidden_test_count", 0)), 1),
            output=f"[rejected] {e}",
        )
    with box:
        return grade_in(box, task, timeout_s)


def _junit_counts(sandbox: Sandbox, rel: str) -> tuple[int, int]:
    try:
        root = ET.fromstring(sandbox.read_text(rel))
    except (OSError, ValueError, ET.ParseError):
        return 0, 0
    cases = list(root.iter("testcase"))
    bad = sum(1 for c in cases if any(ch.tag in ("failure", "error", "skipped") for ch in c))
    return len(cases) - bad, len(cases)


# ---------------------------------------------------------------- JSONL + files

_DIR_FIELDS = ("repo", "hidden_tests", "solution")


def save_tasks(tasks: list[Task], jsonl_path: str | os.PathLike) -> None:
    jsonl_path = Path(jsonl_path)
    root = jsonl_path.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(jsonl_path, "w", encoding="utf-8") as out:
        for task in tasks:
            _write_tree(root / task.id / "repo", task.files)
            _write_tree(root / task.id / "hidden", task.hidden_tests)
            _write_tree(
                root / task.id / "solution",
                {k: v for k, v in task.solution.items() if v is not None},
            )
            row = {
                "id": task.id,
                "prompt": task.prompt,
                "repo": f"{task.id}/repo",
                "hidden_tests": f"{task.id}/hidden",
                "solution": f"{task.id}/solution",
                "solution_deletes": sorted(k for k, v in task.solution.items() if v is None),
                "setup": task.setup,
                "test_command": task.test_command,
                "kind": task.kind,
                "difficulty": task.difficulty,
                "seed": task.seed,
                "meta": task.meta,
            }
            out.write(json.dumps(row, sort_keys=True) + "\n")


def load_tasks(jsonl_path: str | os.PathLike) -> list[Task]:
    jsonl_path = Path(jsonl_path)
    tasks = []
    with open(jsonl_path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                tasks.append(_task_from_row(line, jsonl_path, lineno))
    return tasks


def _task_from_row(line: str, jsonl_path: Path, lineno: int) -> Task:
    where = f"{jsonl_path}:{lineno}"
    try:
        row = json.loads(line)
    except ValueError as e:
        raise ValueError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object")
    for field in ("id", "prompt", *_DIR_FIELDS):
        if not isinstance(row.get(field), str) or not row[field]:
            raise ValueError(f"{where}: field {field!r} must be a non-empty string")
    dirs = {}
    for field in _DIR_FIELDS:
        path = jsonl_path.parent / row[field]
        if not path.is_dir():
            raise ValueError(f"{where}: field {field!r} names {path}, which is not a directory")
        dirs[field] = _read_tree(path)
    solution: dict[str, str | None] = dict(dirs["solution"])
    for rel in row.get("solution_deletes", []):
        solution[rel] = None
    setup = row.get("setup", [])
    if not isinstance(setup, list) or not all(isinstance(s, str) for s in setup):
        raise ValueError(f"{where}: field 'setup' must be a list of shell commands")
    return Task(
        id=row["id"],
        prompt=row["prompt"],
        files=dirs["repo"],
        hidden_tests=dirs["hidden_tests"],
        solution=solution,
        setup=setup,
        test_command=row.get("test_command", Task.test_command),
        kind=row.get("kind", "custom"),
        difficulty=int(row.get("difficulty", 1)),
        seed=row.get("seed"),
        meta=dict(row.get("meta") or {}),
    )


def _write_tree(root: Path, files: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def _read_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
