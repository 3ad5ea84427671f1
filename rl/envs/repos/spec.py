"""Environment spec of a real repository, and the gate that admits it.

An `EnvSpec` says how a repository runs as an environment: the setup commands (run in a fresh
sandbox at every episode start), the test command (the `run_tests` tool), the baseline (each test's
outcome on the untouched repository, as the trusted grader sees it) and timings. The setup agent
(rl/envs/repos/setup.py) proposes the commands; `admit` checks everything itself in a fresh
sandbox, trusting nothing the proposal or the repository's code says:

- every setup command succeeds within SETUP_TIMEOUT_S;
- the test command completes within TEST_TIMEOUT_S with pytest's exit status 0 or 1 (tests ran);
- the baseline, taken twice through the hardened grader (rl.envs.grading.tasks.grade_in:
  canaries, sealed asserts, one interpreter per test file), agrees test by test (determinism),
  and at least one test passes; a grading run takes at most GRADE_TIMEOUT_S.

Test files are graded under names the grader treats as test modules (`hidden_rel`): roman's
`src/tests.py` is graded as `src/test_tests.py`. Test ids in the baseline are
"<graded file>::<test as written>" ("test_a.py::TestX::test_y").
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import time
from pathlib import Path

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.harden import harden_suite, is_test_module
from rl.envs.grading.tasks import Grade, Task, grade_in
from rl.envs.isolation.sandbox import Limits, Sandbox

SETUP_TIMEOUT_S = 120.0
TEST_TIMEOUT_S = 120.0
GRADE_TIMEOUT_S = 120.0
SPEC_FILE = ".rl_env.json"  # where the setup agent writes its proposal (in the sandbox)
SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".tox", "build", "dist", ".eggs"}


@dataclasses.dataclass
class EnvSpec:
    name: str
    setup: list[str]
    test_command: str
    test_files: list[str]  # repo paths of the test modules the baseline grades
    baseline: dict[str, bool] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    source: str = ""  # where the snapshot came from
    notes: list[str] = dataclasses.field(default_factory=list)  # what the setup agent found/did
    # pinned declared test dependencies every sandbox of the repository mounts (key: their hash;
    # rl/envs/isolation/dep_cache.py); [] for none
    test_deps: list[str] = dataclasses.field(default_factory=list)

    def passing(self) -> set[str]:
        return {t for t, ok in self.baseline.items() if ok}

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> EnvSpec:
        return cls(**json.loads(text))


@dataclasses.dataclass(frozen=True)
class Admission:
    name: str
    admitted: bool
    reason: str  # "ok" or why not, one line
    spec: EnvSpec | None


def read_tree(root: str | os.PathLike) -> dict[str, str]:
    """path -> text of the repository's files (text only: binary files are left out)."""
    root, out = Path(root), {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not p.is_symlink() and not SKIP_DIRS & set(rel.parts):
            try:
                out[str(rel)] = p.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return out


def hidden_rel(path: str) -> str:
    """The name a repository test file is graded under: itself when the grader treats it as a
    test module, else with a test_ prefix on its file name."""
    if is_test_module(path):
        return path
    head, _, name = path.rpartition("/")
    return f"{head}/test_{name}" if head else f"test_{name}"


def graded_source(path: str, files: dict[str, str]) -> str:
    """A test file's source as the grader installs it: a relative import that leaves the test
    directories (webencodings/tests.py: `from . import lookup`, the package under test) becomes
    absolute (`from webencodings import lookup`), so the graded copy imports the repository's
    package (the agent's code), not a copy beside the hidden tests. Lines keep their numbers."""
    text = files[path]
    try:
        tree = parse_python(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level):
            continue
        base = os.path.dirname(path)
        for _ in range(node.level - 1):
            base = os.path.dirname(base)
        package = _package_name(base, files)
        if _test_dir(base) or not package:
            continue
        target = ".".join(filter(None, [package, node.module]))
        i, col = node.lineno - 1, node.col_offset
        head = re.match(r"from\s+\.+\s*[\w.]*\s+import\b", lines[i][col:])
        if head:
            lines[i] = f"{lines[i][:col]}from {target} import{lines[i][col + head.end() :]}"
    return "".join(lines)


def _package_name(directory: str, files: dict[str, str]) -> str:
    """The dotted name a package directory imports under from the repository root (a src/
    layout's link names it without src/), "" when it is no package."""
    parts = []
    while directory and f"{directory}/__init__.py" in files:
        directory, name = os.path.split(directory)
        parts.insert(0, name)
    return ".".join(parts) if directory in ("", "src") else ""


def graded_tests(files: dict[str, str], test_files: list[str]) -> dict[str, str]:
    """Graded name (`hidden_rel`) -> graded source of each test file."""
    return {hidden_rel(t): graded_source(t, files) for t in test_files if t in files}


def support_files(files: dict[str, str], test_files: list[str]) -> dict[str, str]:
    """What the test files import from beside them, graded from the original (never the agent's
    copy): conftest.py / __init__.py beside the test files and in the test directories above
    them (below the root: the grader installs the task's root conftest.py itself), and helper
    modules (mixins, base classes) in test directories and their test subdirectories, at the
    same paths. A package's own `__init__.py` beside a test file inside it (webencodings/tests.py)
    is the code under test: never a support file (`graded_source` imports it from the
    repository)."""
    dirs = {os.path.dirname(t) for t in test_files} - {""}
    for d in list(dirs):
        while "/" in d:
            d = os.path.dirname(d)
            if _test_dir(d):
                dirs.add(d)
    out = {}
    for path, text in files.items():
        d, name = os.path.split(path)
        # a helper package inside a test directory (contextlib2's test/support/, CPython's
        # layout: `from test.support import os_helper`) is imported from beside the tests too
        inside = _test_dir(d) and any(d.startswith(t + "/") for t in dirs if _test_dir(t))
        if (d not in dirs and not inside) or path in test_files or not name.endswith(".py"):
            continue
        if name == "conftest.py" or (_test_dir(d) and not is_test_module(path)):
            out[path] = text
    return dict(sorted(out.items()))


def _test_dir(d: str) -> bool:
    """A directory that holds tests by name (tests/, test/, testing/, tests/unit/)."""
    return any(part.startswith("test") for part in d.split("/"))


def suite_task(name: str, files: dict[str, str], spec: EnvSpec, tests: dict[str, str]) -> Task:
    """A task whose hidden tests are `tests` (graded name -> source) plus their support files:
    grading it is a run of the repository's own tests through the trusted grader."""
    hidden = dict(tests)
    hidden.update(support_files(files, spec.test_files))
    return Task(
        id=f"suite-{name}",
        prompt="",
        files=files,
        hidden_tests=hidden,
        solution={},
        setup=list(spec.setup),
        test_command=spec.test_command,
        meta={"test_deps": list(spec.test_deps)} if spec.test_deps else {},
    )


def run_baseline(box: Sandbox, files: dict[str, str], spec: EnvSpec) -> tuple[Grade, float]:
    """The repository's own tests graded in `box` (setup already run): (grade, seconds)."""
    tests = graded_tests(files, spec.test_files)
    t0 = time.monotonic()
    grade = grade_in(box, suite_task(spec.name, files, spec, tests), GRADE_TIMEOUT_S)
    return grade, time.monotonic() - t0


def admit(files: dict[str, str], spec: EnvSpec, limits: Limits = Limits()) -> Admission:
    """The gate: runs the proposal in a fresh sandbox; fills spec.baseline and spec.timings."""
    name = spec.name
    missing = [t for t in spec.test_files if t not in files]
    if not spec.test_files or missing:
        why = f"test files not in the repository: {missing}" if missing else "no test files"
        return Admission(name, False, why, None)
    graded: dict[str, str] = {}
    for t in spec.test_files:
        other = graded.setdefault(hidden_rel(t), t)
        if other != t:  # first's first.py (doctests) would have replaced its test_first.py
            why = (
                f"test files {other} and {t} would both be graded as {hidden_rel(t)}: "
                "rename one, or leave out a file that only holds doctests"
            )
            return Admission(name, False, why, None)
    with Sandbox.from_files(files, limits=limits, test_deps=spec.test_deps) as box:
        t0 = time.monotonic()
        for i, command in enumerate(spec.setup):
            r = box.run(command, SETUP_TIMEOUT_S)
            if not r.ok:
                why = f"setup command {i} ({command!r}) ended {r.status}: {_last_line(r.output)}"
                return Admission(name, False, why, None)
        setup_s = time.monotonic() - t0
        r = box.run(spec.test_command, TEST_TIMEOUT_S)
        if r.timed_out or r.limit or r.exit_code not in (0, 1):
            why = f"test command ({spec.test_command!r}) ended {r.status}: {_last_line(r.output)}"
            return Admission(name, False, why, None)
        tests_s = r.duration_s
        for _ in range(2):  # a second try without test files the grader cannot run soundly
            (first, grade_s), (second, _) = (run_baseline(box, files, spec) for _ in range(2))
            unsound = _unsound_files(first, second, spec)
            if not unsound or unsound == set(spec.test_files):
                break
            kept = [t for t in spec.test_files if t not in unsound]
            why = unsound_reason(first.tamper_reasons + second.tamper_reasons, files, spec)
            note = f"left out {sorted(unsound)}: {why}"
            spec = dataclasses.replace(spec, test_files=kept, notes=[*spec.notes, note])
    problem = _baseline_problem(first, second, grade_s, files, spec)
    if problem:
        return Admission(name, False, problem, None)
    spec = dataclasses.replace(spec, baseline=dict(first.results))
    spec.timings = {"setup_s": round(setup_s, 3), "tests_s": round(tests_s, 3)}
    spec.timings["grade_s"] = round(grade_s, 3)
    return Admission(name, True, "ok", spec)


def _unsound_files(first: Grade, second: Grade, spec: EnvSpec) -> set[str]:
    """Test files (repo paths) a tampering verdict on an untouched repo names: tests the grader
    cannot harden (e.g. unittest classes not named Test*, inherited test methods)."""
    by_rel = {hidden_rel(t): t for t in spec.test_files}
    named = {r.split(": ", 1)[0] for r in first.tamper_reasons + second.tamper_reasons}
    return {by_rel[n] for n in named if n in by_rel}


def _baseline_problem(
    first: Grade, second: Grade, grade_s: float, files: dict[str, str], spec: EnvSpec
) -> str | None:
    if first.tampered or second.tampered:
        return unsound_reason(first.tamper_reasons + second.tamper_reasons, files, spec)
    if grade_s > GRADE_TIMEOUT_S:
        return f"a graded run of the tests took {grade_s:.0f} s (limit {GRADE_TIMEOUT_S:.0f} s)"
    a, b = dict(first.results), dict(second.results)
    differ = sorted(t for t in a.keys() | b.keys() if a.get(t) != b.get(t))
    if differ:
        return (
            f"baseline not deterministic: {len(differ)} tests differ between two runs ({differ[0]})"
        )
    if not any(a.values()):
        return f"no test passes at baseline ({len(a)} graded): {_last_line(first.output)}"
    return None


ADVICE = (
    "what to change: keep test methods in the test modules or in classes of the test directories "
    "(a tests package's __init__.py, helper modules beside the tests), not in the project's own "
    "code (which the agent edits); give each test a statement that always runs (no early "
    "return or yield); tests the project only runs as doctests are not graded"
)


def unsound_reason(tamper_reasons, files: dict[str, str], spec: EnvSpec) -> str:
    """The whole reason the grader cannot run the tests soundly, file by file, with what it
    could not resolve statically and what the user can change (one line, not cut)."""
    by_file: dict[str, list[str]] = {}
    for reason in tamper_reasons:
        rel, _, why = reason.partition(": ")
        if why not in by_file.setdefault(rel, []):
            by_file[rel].append(why)
    tests = graded_tests(files, spec.test_files)
    tests.update(support_files(files, spec.test_files))
    try:
        layout, _ = harden_suite(tests)
    except (SyntaxError, ValueError):
        layout = {}
    parts = []
    for rel, whys in sorted(by_file.items()):
        extra = layout[rel].unresolved if rel in layout else []
        parts.append(f"{rel} ({'; '.join(whys + extra)})")
    return f"the grader cannot run the repository's tests soundly: {', '.join(parts)}; {ADVICE}"


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
