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
so the agent never sees them) through the trusted runner in rl/envs/grading/grader (see `grade_in`
and rl/envs/README.md for what it trusts). Hidden tests may carry their own conftest.py; a task's
root conftest.py (from its original repo) serves them too, whatever the agent made of it. Hidden
tests, generated or brought by users, are graded under the same rules: they run from a read-only
copy with fresh test names and canaries; `assert result == <literal>` is sealed (the expected value
stays on the host, which compares it with the value the sandbox recorded), and other `==` asserts
with a plain builtin expected value need a plain builtin result (the gate rejects tasks whose
reference solution trips this). Each test function counts once in the grade, parametrized or not.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from rl.envs.grading.grader import plain_values, shared_files
from rl.envs.grading.grader.strict_eq import OVERFLOW, RECORD_NODES, REFUSED
from rl.envs.grading.harden import (
    EQ_MODULE,
    PARAMETRIZE_WORDS,
    Hardened,
    harden_suite,
    is_test_module,
)
from rl.envs.isolation.dep_cache import MissingTestDeps
from rl.envs.isolation.dep_cache import host_dir as deps_host_dir
from rl.envs.isolation.sandbox import SANDBOX_REPO, Limits, RepoTooLarge, Sandbox
from rl.episodes.schema import all_pass, partial_credit

GRADER_FILES = {"run.py": "runner.py", "child.py": "child.py", f"{EQ_MODULE}.py": "strict_eq.py"}
GRADER_FILES |= {name: os.path.basename(src) for name, src in shared_files().items()}
GRADER_SRC = Path(__file__).parent / "grader"
SUMMARY = "RLGRADE"
# Output kept from the grading run: the runner fits its one-line summary into half of it (the
# capture keeps a head and a tail half), so a big report cannot push the summary out of sight.
GRADE_OUTPUT_BYTES = 8 << 20
SUMMARY_CAP = GRADE_OUTPUT_BYTES // 2 - (64 << 10)


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
    # ("<hidden file>::<test as written>", passed) per real test, from complete untampered runs
    # (a crash or an incomplete run lists none of its file's tests): per-test baselines
    results: tuple[tuple[str, bool], ...] = ()

    @property
    def fraction(self) -> float:
        # the one partial credit (rl/episodes/schema.py): 0 when tampered, whatever `passed` says
        return partial_credit(self.passed, self.total, self.tampered)

    @property
    def all_pass(self) -> bool:
        # the one rule: rl/episodes/schema.py
        return all_pass(self.passed, self.total, self.tampered)


# ---------------------------------------------------------------- grading


def deps_of(task: Task) -> tuple[str, ...]:
    """The task's pinned test-dependency set (meta "test_deps"; rl/envs/isolation/dep_cache.py):
    every sandbox of the task opens with it."""
    return tuple(task.meta.get("test_deps") or ())


def require_test_deps(tasks) -> None:
    """Start-up check for a task set: every test-dependency set its tasks name is in this
    machine's cache, else MissingTestDeps (one line: the set, how many tasks need it, how to
    fetch it), before any model loads rather than at the first episode of such a task."""
    needs: dict[tuple[str, ...], list[str]] = {}
    for task in tasks:
        if deps_of(task):
            needs.setdefault(tuple(sorted(deps_of(task))), []).append(task.id)
    for pins, ids in sorted(needs.items()):
        try:
            deps_host_dir(list(pins))
        except MissingTestDeps as e:
            raise MissingTestDeps(f"{len(ids)} tasks (e.g. {ids[0]}): {e}") from None


def apply_solution(sandbox: Sandbox, solution: dict[str, str | None]) -> None:
    for rel, content in solution.items():
        if content is None:
            sandbox.remove(rel)
        else:
            sandbox.write_text(rel, content)


def grade_in(sandbox: Sandbox, task: Task, timeout_s: float = 60.0) -> Grade:
    """Runs the task's hidden tests against `sandbox`'s repo; trusts nothing the repo's code can
    write or patch.

    The hidden tests (rewritten by `harden_suite`: fresh names, sealed and strict asserts,
    canaries), the task's original root conftest.py and the runner go to a directory the sandbox
    sees read-only; the expected values of sealed asserts stay here. The runner (stdlib only,
    never imports the repo) runs each test file in a fresh interpreter and prints one summary
    framed by a nonce given on stdin; no file in the repo is read back. The repo's code can still
    lie about the tests run in its own process: a canary reported passed or missing, garbage on a
    report channel, or a runner that ends without its summary marks the grade tampered
    (rl/episodes/rewards.py rewards it below failure); a sealed value that differs from the expected
    one fails its test.
    """
    if sorted(sandbox.test_deps) != sorted(deps_of(task)):  # a call site that forgot the mount
        raise ValueError(
            f"task {task.id}: its test dependencies {sorted(deps_of(task))} are not the "
            f"sandbox's {sorted(sandbox.test_deps)}: open the sandbox with test_deps=deps_of(task)"
        )
    host, inside = sandbox.readonly_dir(f"grader_{secrets.token_hex(4)}")
    repo = SANDBOX_REPO if sandbox.backend == "bwrap" else sandbox.root
    layout = _install_grader(host, repo, task, timeout_s, sandbox.deps_lib)
    nonce = secrets.token_hex(16)
    command = f"exec python3 -I -S {inside}/run.py"
    try:
        result = sandbox.run(
            command, timeout_s + 5.0, stdin=(nonce + "\n").encode(), output_bytes=GRADE_OUTPUT_BYTES
        )
    finally:  # the sandbox may live on (e.g. the gate): its later commands must not see the tests
        sandbox.drop_readonly_dir(host)
    summary = _find_summary(result.output, nonce)
    expected = int(task.meta.get("hidden_test_count", 0))
    if summary is None:
        total = max(sum(len(h.real) for h in layout.values()), expected, 1)
        log = f"[{result.status}] no grading summary\n{result.output[-8000:]}"
        if result.timed_out:  # a slow machine is no sign of tampering: an honest failure
            return Grade(passed=0, total=total, output=log)
        # The runner always prints its summary (it fits the capture) unless something killed it
        # or starved it of processes or memory: only the code under test runs beside it.
        reason = f"the grading runner ended without its summary ({result.status})"
        return Grade(0, total, f"[TAMPERED] {reason}\n{log}", True, (reason,))
    return _score(summary, layout, expected, result.status)


def _install_grader(
    host: str, repo: str, task: Task, timeout_s: float, deps: str | None = None
) -> dict[str, Hardened]:
    """Writes runner + hardened tests under `host`; returns {test file: its Hardened}. `deps`:
    the sandbox's read-only test-dependency lib/, which each child appends to sys.path."""
    for name, src in GRADER_FILES.items():
        _write(os.path.join(host, name), (GRADER_SRC / src).read_text())
    _write(os.path.join(host, "pytest.ini"), "[pytest]\n")
    if "conftest.py" in task.files:  # the task's own root conftest, never the agent's version
        _write(os.path.join(host, "conftest.py"), task.files["conftest.py"])
    # Can a conftest or helper module parametrize tests from outside (fixture params, hooks)?
    support = [c for r, c in task.hidden_tests.items() if not is_test_module(r)]
    support.append(task.files.get("conftest.py", ""))
    elsewhere = any(word in text for text in support for word in PARAMETRIZE_WORDS)
    layout, support = harden_suite(task.hidden_tests, parametrized_elsewhere=elsewhere)
    for rel, content in sorted(task.hidden_tests.items()):
        content = layout[rel].source if rel in layout else support.get(rel, content)
        _write(os.path.join(host, "tests", rel), content)
    manifest = {
        "files": sorted(layout),
        "repo": repo,
        "budget_s": timeout_s,
        "summary_cap": SUMMARY_CAP,
        "deps": deps or "",
    }
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


def _score(summary: dict, layout: dict[str, Hardened], expected: int, status: str) -> Grade:
    """Counts real tests that passed; any sign of a forged or bent report marks tampering."""
    if any((e or {}).get("timeout") for e in summary["files"].values()):
        status = "timeout"  # the runner's own budget ended a test file
    passed, reasons, log, results = 0, [], [f"[{status}]"], []
    if not summary.get("sealed"):
        log.append("(runner could not mark itself non-dumpable)")
    for rel, hard in layout.items():
        entry = summary["files"].get(rel) or {}
        log.append(f"== {rel}: exit {entry.get('exit')}, timeout {entry.get('timeout')}")
        log.append(str(entry.get("log", ""))[-4000:])
        file_passed, problems = _score_file(rel, hard, entry, log, results)
        passed += len(file_passed)
        reasons += [f"{rel}: {p}" for p in problems]
    # Every real test counts, whether or not its file ran (a crash scores its tests failed).
    total = sum(len(h.real) for h in layout.values()) if layout else expected
    reasons = sorted(set(reasons))
    if reasons:
        log.insert(0, "[TAMPERED] " + "; ".join(reasons))
    return Grade(
        passed=0 if reasons else min(passed, total),
        total=total,
        output="\n".join(log),
        tampered=bool(reasons),
        tamper_reasons=tuple(reasons),
        results=() if reasons else tuple(sorted(results)),
    )


def _score_file(
    rel: str, hard: Hardened, entry: dict, log: list[str], results: list
) -> tuple[set[str], list[str]]:
    """(real tests of one file that passed, signs of tampering in its report); appends
    (file::test as written, passed) for each real test to `results` when the run was complete.

    Each real test counts once, however many ids the report gives it (a parametrized test passes
    only if every instance passed: padding the report with fake instances earns nothing), and only
    if its sealed asserts recorded exactly the expected values."""
    problems = list(entry.get("problems") or [])
    outcomes, malformed = _outcomes(entry.get("report"))
    if outcomes is None:  # no report: the file's tests count as failed (crash, exit, timeout)
        return set(), problems + malformed
    by_key: dict[str, list[tuple[str, str]]] = {}
    for node, outcome in outcomes.items():
        by_key.setdefault(_test_key(node), []).append((node, outcome))
    prefix = f"tests/{rel}::"  # how pytest names this file's tests (rootdir: the grader dir)
    known = hard.real | hard.canaries
    unknown = sorted(n for n in outcomes if not n.startswith(prefix) or _test_key(n) not in known)
    if unknown:
        problems.append(f"report names tests that do not exist: {unknown[:3]}")
    # Only a complete run (pytest exit 0 or 1, everything collected) earns passes; in a complete
    # report every canary and every real test must appear.
    report = entry["report"]
    complete = report.get("exitstatus") in (0, 1) and not report.get("collect_errors")
    for name in hard.canaries:
        seen = [o for _, o in by_key.get(name, [])]
        if "passed" in seen:
            problems.append("a canary test (must fail) was reported passed")
        elif complete and not seen:
            problems.append("a canary test is missing from a complete report")
    # A conditionally defined test (collect.always_bound) may be absent: it then counts failed.
    missing = [k for k in hard.real - hard.conditional if k not in by_key]
    if complete and missing:
        problems.append(f"{len(missing)} hidden tests missing from a complete report")
    problems += _instance_problems(hard, by_key)
    records, bad_records = _records(report.get("seal_records"), hard)
    problems += bad_records
    passed = set()
    for key in sorted(hard.real & by_key.keys()) if complete else ():
        if not all(o == "passed" for _, o in by_key[key]):
            continue
        unrun, wrong = _sealed_problem(hard, key, records)
        if unrun:  # a passed test ran all its top-level statements: impossible honestly
            problems.append(f"a test reported passed without recording {unrun}")
        elif wrong:  # an honest failure: the sandbox cannot tell, only the host knows the answer
            log.append(f"{key}: reported passed, but {wrong}")
        else:
            passed.add(key)
    if complete:
        results += [(f"{rel}::{hard.origin.get(k, k)}", k in passed) for k in hard.real]
    return passed, problems


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


def _instance_problems(hard: Hardened, by_key: dict) -> list[str]:
    """Report ids pytest cannot produce for these tests: "[...]" instances of a test that takes
    no parameters (padding the report with fake instances), or a test reported both ways."""
    problems = []
    for key, nodes in by_key.items():
        if key not in hard.real:
            continue
        suffixed = sum(node.split("::", 1)[-1] != key for node, _ in nodes)
        if suffixed and key in hard.plain:
            problems.append("report holds parameter ids of a test that has no parameters")
        elif 0 < suffixed < len(nodes):
            problems.append("report holds a test both with and without parameter ids")
    return sorted(set(problems))


_MISMATCH = object()  # a record that is a marker (refused / overflow): never equals anything


def _records(raw, hard: Hardened) -> tuple[dict[str, list], list[str]]:
    """Sealed id -> values the sandbox recorded (decoded), for this file's real sealed asserts."""
    if raw is None:
        return {}, []
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        return {}, ["sealed records are not the runner's schema"]
    records, problems = {}, []
    for sid, values in raw.items():
        if sid not in hard.sealed and sid not in hard.canary_seals:
            problems.append("report holds records of sealed asserts that do not exist")
            continue
        decoded = []
        for value in values:
            if value in (REFUSED, OVERFLOW):
                decoded.append(_MISMATCH)
                continue
            try:
                decoded.append(plain_values.decode(value, RECORD_NODES))
            except (ValueError, TypeError, IndexError, OverflowError, RecursionError):
                problems.append("report holds sealed records the grader cannot have written")
                break
        records[sid] = decoded
    return records, sorted(set(problems))


def _sealed_problem(hard: Hardened, key: str, records: dict[str, list]) -> tuple[str, str]:
    """(what a passed test failed to record, why its recorded values fail), empty when fine.

    Every sealed assert among a test's top-level statements runs whenever the test passes, so
    each must have recorded something (else the recording was suppressed: tampering); every
    recorded value must equal the expected one (builtin values of exact types; the host compares,
    nothing of the sandbox's runs here)."""
    required, ids = hard.checks.get(key, (frozenset(), frozenset()))
    # a test defined in several branches ran one of them: one definition's set must be whole
    options = hard.either.get(key, (required,))
    unrun = min(sum(not records.get(sid) for sid in option) for option in options)
    if unrun:
        return f"{unrun} of its sealed asserts", ""
    for sid in sorted(ids):
        expected = hard.sealed[sid]
        # Both sides are plain builtin values built here (strict_eq.eq's rule holds already).
        if any(v is _MISMATCH or v != expected for v in records.get(sid, [])):
            return "", "a sealed assert recorded a value other than the expected one"
    return "", ""


def grade_repo(
    task: Task, repo_dir: str, timeout_s: float = 60.0, limits: Limits = Limits()
) -> Grade:
    """Reward function: hidden tests run on a fresh copy of the agent's final repo."""
    try:
        box = Sandbox(repo_dir, limits=limits, test_deps=deps_of(task))
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
