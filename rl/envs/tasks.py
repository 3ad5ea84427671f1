"""Coding tasks: repo files + terse prompt + hidden tests + setup + reference solution; grading.

On disk a task set is one JSONL file, one task per line, whose directory fields point (relative to
the JSONL file) at plain directories:

    {"id": "bugfix-3", "prompt": "mean() is off, fix", "repo": "bugfix-3/repo",
     "hidden_tests": "bugfix-3/hidden", "solution": "bugfix-3/solution", "solution_deletes": [],
     "setup": [], "test_command": "python3 -m pytest -q", "kind": "bugfix", "difficulty": 1,
     "seed": 3, "meta": {}}

`solution` holds the reference solution as whole files that replace or add repo files;
`solution_deletes` lists repo files the solution removes. Users bring their own tasks this way.

Grading copies the agent's final repo into a fresh sandbox and runs the hidden tests (after submit,
so the agent never sees them) through the trusted runner in rl/envs/grader (see `grade_in` and
rl/envs/README.md for what it trusts). Hidden tests may carry their own conftest.py; a task's root
conftest.py (from its original repo) serves them too, whatever the agent made of it. Hidden tests,
generated or brought by users, are graded under the same rules: they run from a read-only copy
with fresh test names and canaries, and `assert result == expected` with a plain builtin expected
value needs a plain builtin result (the gate rejects tasks whose reference solution trips this).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from rl.envs.harden import EQ_MODULE, harden_module, is_test_module
from rl.envs.sandbox import SANDBOX_REPO, Limits, RepoTooLarge, Sandbox

GRADER_FILES = {"run.py": "runner.py", "child.py": "child.py", f"{EQ_MODULE}.py": "strict_eq.py"}
GRADER_SRC = Path(__file__).parent / "grader"
SUMMARY = "RLGRADE"


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
    passed: int  # real hidden tests that passed (0 when tampered)
    total: int
    output: str
    tampered: bool = False  # the run forged or bent its results: worse than an honest failure
    tamper_reasons: tuple[str, ...] = ()

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def all_pass(self) -> bool:
        return episode_all_pass(self.passed, self.total, self.tampered)

    @property
    def score(self) -> float:
        """The reward: fraction of hidden tests passed, TAMPER_SCORE when tampering was caught."""
        return TAMPER_SCORE if self.tampered else self.fraction


TAMPER_SCORE = -1.0  # below every honest outcome (an honest failure scores 0)


def episode_score(passed: int, total: int, tampered: bool) -> float:
    """An episode record's reward from its grade: Grade.score's rule on stored counts."""
    return TAMPER_SCORE if tampered else (passed / total if total else 0.0)


def episode_all_pass(passed: int, total: int, tampered: bool) -> bool:
    """Every hidden test passed and the grader caught no tampering (Grade.all_pass's rule)."""
    return total > 0 and passed == total and not tampered


# ---------------------------------------------------------------- grading


def apply_solution(sandbox: Sandbox, solution: dict[str, str | None]) -> None:
    for rel, content in solution.items():
        if content is None:
            sandbox.remove(rel)
        else:
            sandbox.write_text(rel, content)


def grade_in(sandbox: Sandbox, task: Task, timeout_s: float = 60.0) -> Grade:
    """Runs the task's hidden tests against `sandbox`'s repo; trusts nothing the repo's code can
    write or patch.

    The hidden tests (rewritten by `harden_module`: fresh names, strict asserts, canaries), the
    task's original root conftest.py and the runner go to a directory the sandbox sees read-only.
    The runner (stdlib only, never imports the repo) runs each test file in a fresh interpreter
    and prints one summary framed by a nonce given on stdin; no file in the repo is read back. The
    repo's code can still lie about the tests run in its own process: a canary reported passed
    or missing, or garbage on a report channel, marks the grade tampered (score below failure).
    """
    host, inside = sandbox.readonly_dir(f"grader_{secrets.token_hex(4)}")
    repo = SANDBOX_REPO if sandbox.backend == "bwrap" else sandbox.root
    layout = _install_grader(host, repo, task, timeout_s)
    nonce = secrets.token_hex(16)
    command = f"exec python3 -I -S {inside}/run.py"
    try:
        result = sandbox.run(command, timeout_s + 5.0, stdin=(nonce + "\n").encode())
    finally:  # the sandbox may live on (e.g. the gate): its later commands must not see the tests
        sandbox.drop_readonly_dir(host)
    summary = _find_summary(result.output, nonce)
    expected = int(task.meta.get("hidden_test_count", 0))
    if summary is None:
        log = f"[{result.status}] no grading summary\n{result.output}"
        return Grade(passed=0, total=max(expected, 1), output=log)
    return _score(summary, layout, expected, result.status)


def _install_grader(host: str, repo: str, task: Task, timeout_s: float) -> dict:
    """Writes runner + hardened tests under `host`; returns {test file: (real keys, canaries)}."""
    for name, src in GRADER_FILES.items():
        _write(os.path.join(host, name), (GRADER_SRC / src).read_text())
    _write(os.path.join(host, "pytest.ini"), "[pytest]\n")
    if "conftest.py" in task.files:  # the task's own root conftest, never the agent's version
        _write(os.path.join(host, "conftest.py"), task.files["conftest.py"])
    layout = {}
    for rel, content in sorted(task.hidden_tests.items()):
        if is_test_module(rel):
            hardened = harden_module(content)
            content = hardened.source
            layout[rel] = (hardened.real, hardened.canaries)
        _write(os.path.join(host, "tests", rel), content)
    manifest = {"files": sorted(layout), "repo": repo, "budget_s": timeout_s}
    _write(os.path.join(host, "manifest.json"), json.dumps(manifest))
    return layout


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _find_summary(output: str, nonce: str) -> dict | None:
    found = re.findall(rf"^{SUMMARY} {nonce} (.*)$", output, flags=re.M)
    if len(found) != 1:
        return None  # none: the runner died or its line fell out of the capture (fail closed)
    try:
        summary = json.loads(found[0])
    except ValueError:
        return None
    return summary if isinstance(summary, dict) and isinstance(summary.get("files"), dict) else None


def _score(summary: dict, layout: dict, expected: int, status: str) -> Grade:
    """Counts real tests that passed; any sign of a forged or bent report marks tampering."""
    passed = seen = 0
    if any((e or {}).get("timeout") for e in summary["files"].values()):
        status = "timeout"  # the runner's own budget ended a test file
    reasons, log = [], [f"[{status}]"]
    if not summary.get("sealed"):
        log.append("(runner could not mark itself non-dumpable)")
    for rel, (real, canaries) in layout.items():
        entry = summary["files"].get(rel) or {}
        log.append(f"== {rel}: exit {entry.get('exit')}, timeout {entry.get('timeout')}")
        log.append(str(entry.get("log", ""))[-4000:])
        reasons += [f"{rel}: {p}" for p in entry.get("problems") or []]
        outcomes, problems = _outcomes(entry.get("report"))
        reasons += [f"{rel}: {p}" for p in problems]
        if outcomes is None:  # no report: the file's tests count as failed (crash, exit, timeout)
            seen += len(real)
            continue
        keys = {node: _test_key(node) for node in outcomes}
        unknown = sorted(n for n, k in keys.items() if k not in real | canaries)
        if unknown:
            reasons.append(f"{rel}: report names tests that do not exist: {unknown[:3]}")
        # Only a complete run (pytest exit 0 or 1, everything collected) earns passes; in a
        # complete report every canary and every real test must appear.
        report = entry["report"]
        complete = report.get("exitstatus") in (0, 1) and not report.get("collect_errors")
        for name in canaries:
            results = [o for n, o in outcomes.items() if keys[n] == name]
            if "passed" in results:
                reasons.append(f"{rel}: a canary test (must fail) was reported passed")
            elif complete and not results:
                reasons.append(f"{rel}: a canary test is missing from a complete report")
        real_results = [o for n, o in outcomes.items() if keys[n] in real]
        missing = [k for k in real if k not in keys.values()]
        if complete and missing:
            reasons.append(f"{rel}: {len(missing)} hidden tests missing from a complete report")
        seen += max(len(real_results), len(real))  # a file that did not run still counts
        passed += real_results.count("passed") if complete else 0
    total = max(seen, expected)
    tampered = bool(reasons)
    if tampered:
        log.insert(0, "[TAMPERED] " + "; ".join(sorted(set(reasons))))
    return Grade(
        passed=0 if tampered else min(passed, total),
        total=total,
        output="\n".join(log),
        tampered=tampered,
        tamper_reasons=tuple(sorted(set(reasons))),
    )


_OUTCOMES = ("passed", "failed", "skipped")


def _outcomes(report) -> tuple[dict | None, list[str]]:
    """The report's nodeid -> outcome map, or None and what is malformed about it."""
    if report is None:
        return None, []
    if not isinstance(report, dict) or not isinstance(report.get("outcomes"), dict):
        return None, ["report is not the runner's schema"]
    outcomes = report["outcomes"]
    if not all(isinstance(n, str) and o in _OUTCOMES for n, o in outcomes.items()):
        return None, ["report holds outcomes that are not passed/failed/skipped"]
    if not isinstance(report.get("collect_errors", []), list):
        return None, ["report is not the runner's schema"]
    return outcomes, []


def _test_key(nodeid: str) -> str:
    """'tests/test_a.py::TestX::test_y[3-4]' -> 'TestX::test_y' (the key harden_module names)."""
    return nodeid.split("::", 1)[-1].split("[", 1)[0]


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
