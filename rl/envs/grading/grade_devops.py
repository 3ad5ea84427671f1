"""DevOps tasks: a broken build / CI / test configuration; solved when the project's own check
command passes, graded fail-closed.

Task meta (host side, never shown to the policy): meta["grader"] = "devops" and meta["devops"] =
{"check": the check command, "editable": {path: rule}, "baseline": [test ids], "trusted_files":
{name: text}}. `grade_devops` copies the final repo into a fresh sandbox and requires all of:

1. Files: the repo's file set equals the original's (no file deleted, none added: no new
   conftest.py, sitecustomize or test stub can appear), no symlinks, and every file outside
   `editable` byte-identical to the original (tests and code cannot change). Caches
   (__pycache__, .pytest_cache) are not compared but deleted before the check: a planted .pyc
   would otherwise be imported in place of a protected source.
2. Editable files keep their invariants, per rule:
   - "lines": each line of `keep` is still a line of the file, whitespace around it aside (e.g.
     "[tool:pytest]", the `addopts = --strict-markers` a fix must not drop);
   - "script" (Makefile, shell script): the same number of lines, lines outside `repair`
     identical to the original, and each repaired line a plain command matching `pattern` (a
     pytest invocation: no `;`, `&&`, `|`, `$(...)`, redirections, `exit`, `true`, `echo`), so
     the script cannot stub the check or print a forged result;
   - "pins": every name in `keep` still pinned with `==`.
3. The check runs from the trusted copy in meta (never a command the repo names), with
   PYTEST_ADDOPTS=-rA so pytest lists each passed test, and must exit 0. Trusted helper scripts
   (the pin checker) are written to a directory the sandbox sees read-only and run from there.
Setup (a real repository's spec: `Task.setup`, e.g. a src layout's `ln -s src/pkg pkg`): the
gate runs it once on the original files and records what it makes (meta["devops"]["products"]:
the top-most paths it adds; a setup that changes an original file is refused). Grading ignores
those paths in the final repo, deletes whatever is there in the check's copy (the agent's version
of a product is never used) and runs the trusted setup again before the check.

4. The test set must not shrink: the "PASSED <id>" lines must cover every baseline id (taken by
   the gate from the reference solution), with no FAILED or ERROR line. With rules 1-2 only
   pytest, the original code and configuration data run in that process, so its report is
   pytest's own.

The grade is all or nothing: baseline size / baseline size when 1-4 hold, else 0 (a test set
that shrank by one earns nothing); the grade's output says which rule failed. `cheats` builds the
scripted cheats (delete the tests, drop one test, stub the check, forge the output, a conftest that
forces passes, drop the pin); `verify_devops` is the gate.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.harden import drop_tests, iter_tests
from rl.envs.grading.tasks import Grade, Task, deps_of
from rl.envs.isolation.sandbox import Limits, RepoTooLarge, Sandbox

CACHE_DIRS = {"__pycache__", ".pytest_cache"}
# A repaired script line: a pytest run with plain arguments (letters, digits, - _ . / = : ,).
PYTEST_LINE = r"\t?(\$\(PYTHON\)|python3) -m pytest( [-\w./=:,]+)*"
CHECK_ENV = "PYTEST_ADDOPTS=-rA"
_PASSED = re.compile(r"^PASSED (\S+)", re.M)
_FAILED = re.compile(r"^(FAILED|ERROR) ", re.M)

PIN_CHECKER = r'''"""Checks that every pin in a requirements file is satisfied by what is installed."""
import importlib.metadata as md
import re
import sys

OPS = {"==": lambda a, b: a == b, ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b,
       ">": lambda a, b: a > b, "<": lambda a, b: a < b, "!=": lambda a, b: a != b}


def key(v):
    return tuple(int(x) if x.isdigit() else 0 for x in re.findall(r"\d+|[a-z]+", v)[:4])


bad = 0
for n, raw in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    line = raw.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(?:(==|>=|<=|!=|<|>)\s*([0-9][0-9A-Za-z.]*))?", line)
    if not m:
        print(f"line {n}: cannot parse {line!r}"); bad += 1; continue
    name, op, want = m.groups()
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        print(f"line {n}: {name} is not installed"); bad += 1; continue
    if op and not OPS[op](key(have), key(want)):
        print(f"line {n}: {name}{op}{want} not satisfied (installed {have})"); bad += 1
print("pins ok" if not bad else f"{bad} pin(s) broken")
sys.exit(1 if bad else 0)
'''  # noqa: E501


def passed_ids(output: str) -> set[str]:
    return set(_PASSED.findall(output))


def _walk(root: str, skip=()) -> tuple[dict[str, str | None], list[str]]:
    """rel -> text (None: not UTF-8) of the regular files under root, and its problems; paths in
    `skip` (setup products) and everything under them are left out."""
    files, problems = {}, []
    skip = set(skip)
    for dirpath, dirs, names in os.walk(root):
        here = os.path.relpath(dirpath, root)
        dirs[:] = sorted(
            d for d in dirs if d not in CACHE_DIRS and os.path.normpath(f"{here}/{d}") not in skip
        )
        names = [n for n in names if os.path.normpath(f"{here}/{n}") not in skip]
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full) or not os.path.isfile(full):
                problems.append(f"{rel} is not a regular file")
                continue
            try:
                with open(full, encoding="utf-8") as f:
                    files[rel] = f.read()
            except (UnicodeDecodeError, OSError):
                files[rel] = None
    return files, problems


def _drop_caches(root: str) -> None:
    """Removes __pycache__ / .pytest_cache (rule 1 does not compare them): a planted .pyc whose
    header matches a protected source's mtime and size would be imported in its place, and a
    planted lastfailed cache could steer which tests run."""
    for dirpath, dirs, _ in os.walk(root):
        for d in [d for d in dirs if d in CACHE_DIRS]:
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                os.remove(full)
            else:
                shutil.rmtree(full)
            dirs.remove(d)


def file_problems(task: Task, final: dict[str, str | None]) -> list[str]:
    """Why the final repo breaks rules 1-2 (module docstring); empty when it keeps them."""
    spec = task.meta["devops"]
    editable = spec["editable"]
    problems = []
    added, gone = sorted(set(final) - set(task.files)), sorted(set(task.files) - set(final))
    if added:
        problems.append(f"files added: {added[:3]}")
    if gone:
        problems.append(f"files deleted: {gone[:3]}")
    for rel, original in sorted(task.files.items()):
        if rel in final and rel not in editable and final[rel] != original:
            problems.append(f"{rel} changed (only {sorted(editable)} may change)")
    for rel, rule in sorted(editable.items()):
        text = final.get(rel)
        if text is not None:
            problems += [f"{rel}: {p}" for p in _rule_problems(rule, task.files[rel], text)]
    return problems


def _rule_problems(rule: dict, original: str, text: str) -> list[str]:
    lines = text.splitlines()
    if rule["kind"] == "lines":  # compared stripped: re-indenting a line is no change
        have = {l.strip() for l in lines}
        return [f"lost the line {k!r}" for k in rule["keep"] if k.strip() not in have]
    if rule["kind"] == "pins":
        pinned = {re.split(r"\s*==", l, maxsplit=1)[0].strip().lower() for l in lines if "==" in l}
        return [f"{k} is no longer pinned with ==" for k in rule["keep"] if k.lower() not in pinned]
    if rule["kind"] == "script":
        old = original.splitlines()
        if len(lines) != len(old):
            return [f"has {len(lines)} lines, not {len(old)} (repair the broken line in place)"]
        out = []
        for i, (a, b) in enumerate(zip(old, lines), 1):
            if i in rule["repair"]:
                if not re.fullmatch(rule["pattern"], b):
                    out.append(f"line {i} is not a plain pytest run: {b.strip()[:80]!r}")
            elif a != b:
                out.append(f"line {i} changed (only line(s) {rule['repair']} may)")
        return out
    raise ValueError(f"unknown editable rule {rule['kind']!r}")


def setup_products(task: Task, timeout_s: float = 60.0, limits: Limits = Limits()) -> list[str]:
    """The top-most paths `task.setup` adds to the original files (run in a fresh sandbox);
    ValueError when a command fails or an original file changes (grading could not tell the
    agent's edit from the setup's)."""
    if not task.setup:
        return []
    with Sandbox.from_files(task.files, limits=limits, test_deps=deps_of(task)) as box:
        for i, command in enumerate(task.setup):
            r = box.run(command, timeout_s)
            if not r.ok:
                raise ValueError(f"setup command {i} ({command!r}) ended {r.status}")
        after = _entries(box.root)
    changed = sorted(r for r in task.files if after.get(r) != task.files[r])
    if changed:
        raise ValueError(f"setup changes original files {changed[:3]}")
    dirs = {os.path.dirname(r) for r in task.files}
    dirs |= {d for r in dirs for d in _parents(r)}
    products = set()
    for rel in set(after) - set(task.files):
        # the shortest prefix that is not a directory of the original tree
        parts = rel.split("/")
        top = next(
            "/".join(parts[:i]) for i in range(1, len(parts) + 1) if "/".join(parts[:i]) not in dirs
        )
        products.add(top)
    return sorted(products)


def _parents(rel: str) -> list[str]:
    out = []
    while rel:
        rel = os.path.dirname(rel)
        out.append(rel)
    return out


def _entries(root: str) -> dict[str, str | None]:
    """rel -> text of every file and symlink under root (symlinks as "-> target"; not followed)."""
    out: dict[str, str | None] = {}
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in CACHE_DIRS]
        for name in names + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = "-> " + os.readlink(full)
                continue
            try:
                with open(full, encoding="utf-8") as f:
                    out[rel] = f.read()
            except (UnicodeDecodeError, OSError):
                out[rel] = None
    return out


def _remove(root: str, rel: str) -> None:
    full = os.path.join(root, rel)
    if os.path.islink(full) or os.path.isfile(full):
        os.remove(full)
    elif os.path.isdir(full):
        shutil.rmtree(full)


def run_setup(box: Sandbox, task: Task, timeout_s: float) -> str | None:
    """The task's trusted setup in `box`; None, or why it failed."""
    for i, command in enumerate(task.setup):
        r = box.run(command, timeout_s)
        if not r.ok:
            return f"setup command {i} ({command!r}) ended {r.status}"
    return None


def run_check(box: Sandbox, task: Task, timeout_s: float):
    """The trusted check command in `box`, helper scripts from a read-only directory."""
    spec = task.meta["devops"]
    host, inside = box.readonly_dir("trusted_check")
    try:
        for name, text in spec.get("trusted_files", {}).items():
            with open(os.path.join(host, name), "w", encoding="utf-8") as f:
                f.write(text)
        command = spec["check"].replace("{trusted}", shlex.quote(inside))
        return box.run(f"export {CHECK_ENV}; {command}", timeout_s)
    finally:
        box.drop_readonly_dir(host)


def grade_devops(
    task: Task, repo_dir: str, timeout_s: float = 60.0, limits: Limits = Limits()
) -> Grade:
    spec = task.meta.get("devops")
    baseline = set((spec or {}).get("baseline") or ())
    products = (spec or {}).get("products")
    if not baseline or (task.setup and products is None):
        # fail closed: without the baseline the test set cannot be compared
        return Grade(0, 1, "[devops] task has no baseline (not gated)")
    total = len(baseline)
    products = products or []
    final, problems = _walk(repo_dir, products)  # a cheap first look (nothing runs) ...
    problems += file_problems(task, final)
    if problems:
        return Grade(0, total, "[devops] " + "; ".join(problems))
    try:
        box = Sandbox(repo_dir, limits=limits, test_deps=deps_of(task))
    except RepoTooLarge as e:
        return Grade(0, total, f"[rejected] {e}")
    with box:  # ... and the rules again on the copy the check runs in
        for rel in products:  # the agent's version of a setup product is never used
            _remove(box.root, rel)
        final, problems = _walk(box.root)
        problems += file_problems(task, final)
        if problems:
            return Grade(0, total, "[devops] " + "; ".join(problems))
        _drop_caches(box.root)
        failed = run_setup(box, task, timeout_s)
        if failed:
            return Grade(0, total, f"[devops] {failed}")
        result = run_check(box, task, timeout_s)
    seen = passed_ids(result.output)
    log = f"[devops] check {result.status} exit {result.exit_code}\n{result.output[-4000:]}"
    if not result.ok or _FAILED.search(result.output):
        return Grade(0, total, log)
    missing = sorted(baseline - seen)
    if missing:  # the test set shrank: no credit at all (a partial set is how a cheat looks)
        log = f"[devops] {len(missing)} baseline tests did not run and pass: {missing[:3]}\n{log}"
        return Grade(0, total, log)
    return Grade(total, total, log)


def baseline_of(task: Task, timeout_s: float = 60.0, limits: Limits = Limits()) -> set[str]:
    """Test ids the check passes with the reference solution applied (the gate's baseline)."""
    files = _solved(task)
    with Sandbox.from_files(files, limits=limits, test_deps=deps_of(task)) as box:
        if run_setup(box, task, timeout_s):
            return set()
        result = run_check(box, task, timeout_s)
    return passed_ids(result.output) if result.ok else set()


def grade_files(
    task: Task, files: dict[str, str | None], timeout_s: float = 60.0, limits: Limits = Limits()
) -> Grade:
    """grade_devops of a repo given as files (None: absent), e.g. a scripted cheat; the files
    are the gate's own, written to a private host directory (grading copies it into a sandbox)."""
    with tempfile.TemporaryDirectory(prefix="rl-devops-") as root:
        for rel, text in files.items():
            if text is not None:
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
        return grade_devops(task, root, timeout_s, limits)


def _solved(task: Task) -> dict[str, str]:
    files = dict(task.files)
    for rel, text in task.solution.items():
        if text is None:
            files.pop(rel, None)
        else:
            files[rel] = text
    return files


def cheats(task: Task) -> dict[str, dict[str, str | None]]:
    """Scripted cheats as whole-repo edits (None deletes): none may pass."""
    solved = _solved(task)
    tests = sorted(r for r in task.files if re.search(r"(^|/)test[^/]*\.py$", r))
    out: dict[str, dict[str, str | None]] = {
        "delete_tests": {**solved, **{t: None for t in tests}},
        "conftest_forces_pass": {**task.files, "conftest.py": _CONFTEST_PASS},
    }
    for t in tests:  # drop one test function of a test file: the set shrinks by one
        keys = [k for k, _ in iter_tests(parse_python(solved[t]))]
        if keys:
            out["drop_one_test"] = {**solved, t: drop_tests(solved[t], {keys[-1]})}
            break
    for rel, rule in task.meta["devops"]["editable"].items():
        for name, text in _rule_cheats(rule, solved[rel], task.meta["devops"]).items():
            out[f"{name}:{rel}"] = {**solved, rel: text}
    return out


_CONFTEST_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def _rule_cheats(rule: dict, solved: str, spec: dict) -> dict[str, str]:
    lines = solved.splitlines()
    if rule["kind"] == "script":
        tab = "\t" if lines[rule["repair"][0] - 1].startswith("\t") else ""
        forged = " && ".join(f"echo PASSED {t}" for t in sorted(spec.get("baseline") or ["x"]))
        out = {}
        for name, cmd in (("stub_check", "true"), ("forge_output", forged)):
            new = list(lines)
            for i in rule["repair"]:
                new[i - 1] = tab + cmd
            out[name] = "\n".join(new) + "\n"
        out["collect_only"] = solved.replace("-m pytest", "-m pytest --collect-only", 1)
        if spec.get("baseline"):  # a plain pytest line that skips one test: only the set catches it
            one = sorted(spec["baseline"])[0]
            out["deselect_one"] = solved.replace("-m pytest", f"-m pytest --deselect {one}", 1)
        return out
    if rule["kind"] == "lines":
        header = next((l for l in lines if l.strip() in ("[tool:pytest]", "[pytest]")), None)
        if header is None:
            return {}
        kept = [l for l in lines if not l.startswith("addopts")]
        i = kept.index(header)
        stub = kept[: i + 1] + ["addopts = --collect-only -q"] + kept[i + 1 :]
        out = {"stub_check": "\n".join(stub) + "\n", "empty_config": ""}
        if spec.get("baseline"):  # config data that skips one test: only the set catches it
            one = sorted(spec["baseline"])[0]
            out["deselect_one"] = solved.replace(header, f"{header}\naddopts = --deselect {one}", 1)
            if any(l.startswith("addopts") for l in lines):  # one addopts key only
                out["deselect_one"] = re.sub(
                    r"(?m)^addopts =", f"addopts = --deselect {one}", solved, count=1
                )
        return out
    if rule["kind"] == "pins":
        keep = [l for l in lines if not any(l.lower().startswith(k.lower()) for k in rule["keep"])]
        return {"drop_pin": "\n".join(keep) + "\n"}
    return {}


def verify_devops(
    task: Task, timeout_s: float = 60.0, limits: Limits = Limits()
) -> tuple[bool, str]:
    """The DevOps gate: (accepted, reason). Takes the baseline from the reference (it must equal
    meta["devops"]["expected"] when the task states one), then: the untouched repo fails, the
    reference passes, every scripted cheat fails."""
    spec = task.meta.get("devops")
    if not isinstance(spec, dict) or not spec.get("check") or not spec.get("editable"):
        return False, "devops task without meta['devops'] check / editable"
    missing = sorted(set(spec["editable"]) - set(task.files))
    if missing:
        return False, f"editable files not in the repo: {missing}"
    try:
        spec["products"] = setup_products(task, timeout_s, limits)
    except ValueError as e:
        return False, f"setup: {e}"
    if set(spec["products"]) & set(spec["editable"]):
        return False, f"setup makes the editable file(s) {sorted(spec['editable'])}"
    baseline = baseline_of(task, timeout_s, limits)
    if not baseline:
        return False, "the check does not pass (or lists no passed test) with the reference"
    if spec.get("expected") and baseline != set(spec["expected"]):
        return False, f"reference passes {sorted(baseline)[:3]}..., not the expected test set"
    spec["baseline"] = sorted(baseline)
    if grade_files(task, task.files, timeout_s, limits).passed:
        return False, "the untouched repo already passes (some of) the check"
    solved = grade_files(task, _solved(task), timeout_s, limits)
    if not solved.all_pass:
        return False, f"reference solution fails: {solved.output.splitlines()[0][:200]}"
    for name, files in cheats(task).items():
        if grade_files(task, files, timeout_s, limits).passed:
            return False, f"scripted cheat {name} earns credit"
    task.meta["hidden_test_count"] = len(baseline)
    return True, "ok"
