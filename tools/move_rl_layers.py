"""The scripted move of issue 49 (points 1 and 2): rl/ in layers, rl/envs by role, the vendored
projects and committed suites out of the Python package into data/repos/.

    python tools/move_rl_layers.py            # move what is not moved yet, rewrite every reference
    python tools/move_rl_layers.py --check    # list what a run would change; exit 1 if anything

Re-runnable: a MOVES entry whose target exists and whose source is gone is skipped, and the
rewrite only touches names that are still old, so a second run on a moved tree changes nothing,
and a run after other branches merge catches the old names in files this script never saw.
The .py files it changed then go through `ruff check --select I --fix` and `ruff format` (a split
import is sorted, a lengthened line wrapped); run `ruff check . && ruff format --check .` and the
tests after it.

What the rewrite changes, in every tracked text file (.py .md .toml .cfg .ini .txt .sh .ipynb,
.ci/run) except vendored code and this file:
  - `from pkg import name` where pkg.name is a moved module: split into one import per new
    parent package (`from rl.envs import tools, search` -> `from rl.envs.agent import ...`);
    .py files through their syntax tree (multi-line imports too), other files line by line;
  - dotted module names (`rl.envs.sandbox.Limits`, `python -m rl.envs.repos.projects`, mock
    targets in strings): an old name not preceded by a name character or a dot;
  - file and folder paths (`rl/envs/sandbox.py`, `rl/envs/repos/vendor/...`).
No new name starts with an old name plus a dot, and no new name is an old one (checked below),
which is what makes the rewrite idempotent.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# old path -> new path (relative to the repo root; .py modules, packages and data alike)
MOVES = {
    # rl/episodes: the bottom layer every rl/ folder may import
    "rl/learning/records.py": "rl/episodes/records.py",
    "rl/learning/rewards.py": "rl/episodes/rewards.py",
    "rl/learning/episode_metrics.py": "rl/episodes/episode_metrics.py",
    "rl/learning/passk.py": "rl/episodes/passk.py",
    "rl/timeline.py": "rl/episodes/timeline.py",
    # top-level rl modules into the layer that uses them
    "rl/run_config.py": "rl/sampling/run_config.py",  # samplers and trainer: below learning
    "rl/loop.py": "rl/learning/loop.py",  # the trainer's wiring; serve/realtime builds on it
    "rl/serve/metrics.py": "rl/serve/server_metrics.py",  # not train/metrics.py's concept
    # rl/envs/isolation: the sandbox and its limits
    "rl/envs/sandbox.py": "rl/envs/isolation/sandbox.py",
    "rl/envs/cgroups.py": "rl/envs/isolation/cgroups.py",
    # rl/envs/grading: tasks, their grading and hardening, the oracle gates
    "rl/envs/tasks.py": "rl/envs/grading/tasks.py",
    "rl/envs/harden.py": "rl/envs/grading/harden.py",
    "rl/envs/grader": "rl/envs/grading/grader",
    "rl/envs/verify.py": "rl/envs/grading/verify.py",
    "rl/envs/families.py": "rl/envs/grading/dispatch.py",
    "rl/envs/devops.py": "rl/envs/grading/grade_devops.py",
    "rl/envs/review.py": "rl/envs/grading/grade_review.py",
    # rl/envs/agent: the agent-facing environment, its tools and the scripted policies
    "rl/envs/env.py": "rl/envs/agent/env.py",
    "rl/envs/tools.py": "rl/envs/agent/tools.py",
    "rl/envs/search.py": "rl/envs/agent/search.py",
    "rl/envs/summary.py": "rl/envs/agent/summary.py",
    "rl/envs/scripted.py": "rl/envs/agent/scripted.py",
    "rl/envs/snapshot.py": "rl/envs/agent/snapshot.py",
    # rl/envs/repos (real repositories) and rl/envs/taskgen (generators): names said once
    "rl/envs/repos/families.py": "rl/envs/repos/review_devops.py",
    "rl/envs/taskgen/common.py": "rl/envs/taskgen/helpers.py",
    # data, not code: vendored third-party projects and the committed specs and suites
    "rl/envs/repos/vendor": "data/repos/vendor",
    "rl/envs/repos/specs": "data/repos/specs",
    "rl/envs/repos/suite.jsonl": "data/repos/suite.jsonl",
    "rl/envs/repos/families.json": "data/repos/families.json",
}

# New packages: their __init__ docstrings (written once, when missing).
NEW_PACKAGES = {
    "rl/episodes": """The bottom layer of rl/: what every other rl/ folder may import and that imports
none of them. The episode record (per-token fields written once, by every sampler), the reward (a
pure function of an episode's grade and counts), episode metrics and the pass@k estimator, and the
run's timeline (spans of every process and thread -> a Chrome trace).
""",  # noqa: E501
    "rl/envs/isolation": """The sandbox and its limits: one episode's repository in an isolated process
(namespaces, seccomp, rlimits), cgroup v2 limits where the host delegates them.
""",  # noqa: E501
    "rl/envs/grading": """Tasks and their grading: the Task and Grade types, hidden tests hardened
against tampering (harden.py) and run by the grader child process (grader/), the per-family
dispatch (dispatch.py: tests, code review, DevOps), and the oracle gates a task must pass before
it is used (verify.py).
""",
    "rl/envs/agent": """The agent-facing environment: the multi-turn coding env and its episode
record (env.py), the tools and their schemas (tools.py, search.py), the self-summary protocol
(summary.py), scripted policies (scripted.py) and copy-on-write episode branches (snapshot.py).
""",
}
TEXT_SUFFIXES = (".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".sh", ".ipynb")
TEXT_FILES = (".ci/run",)
SKIP_DIRS = ("rl/envs/repos/vendor/", "data/repos/vendor/", "tests/fixtures/")
SELF = "tools/move_rl_layers.py"


def dotted(path: str) -> str:
    """rl/envs/sandbox.py -> rl.envs.sandbox; a package folder -> its dotted name."""
    return path.removesuffix(".py").replace("/", ".")


MODULES = {dotted(o): dotted(n) for o, n in MOVES.items() if not n.startswith("data/")}


def check_table() -> None:
    """The two properties that make the rewrite idempotent."""
    olds = set(MODULES) | {o.removesuffix(".py") for o in MOVES}
    for new in list(MODULES.values()) + [n.removesuffix(".py") for n in MOVES.values()]:
        bad = [o for o in olds if o in new]
        assert not bad, f"new name {new} contains an old name {bad}: not idempotent"


# ------------------------------------------------------------------------------------ moving


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def clear_bytecode_only(path: str) -> None:
    """Remove an untracked folder left by an earlier run that holds only __pycache__ folders."""
    if not os.path.isdir(path):
        return
    for dirpath, _, files in os.walk(path):
        if files and "__pycache__" not in dirpath.split(os.sep):
            sys.exit(f"{path} exists with untracked files: move them by hand, then rerun")
    shutil.rmtree(path)


def move_files(dry: bool) -> list[str]:
    done = []
    for old, new in MOVES.items():
        dst = os.path.join(ROOT, new)
        if not git("ls-files", old):
            continue  # moved already (or never here); an untracked __pycache__ may be left
        if git("ls-files", new):
            sys.exit(f"both {old} and {new} exist: merge them by hand, then rerun")
        done.append(f"git mv {old} {new}")
        if not dry:
            clear_bytecode_only(dst)  # else `git mv dir dst` would move dir *into* dst
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            git("mv", old, new)
    for pkg, doc in NEW_PACKAGES.items():
        init = f"{pkg}/__init__.py"
        if os.path.isdir(os.path.join(ROOT, pkg)) and not os.path.exists(os.path.join(ROOT, init)):
            done.append(f"create {init}")
            if not dry:
                with open(os.path.join(ROOT, init), "w") as f:
                    f.write(f'"""{doc}"""\n')
                git("add", init)
    return done


# ---------------------------------------------------------------------------------- rewriting


def _name_re(old: str, sep: str) -> re.Pattern:
    """An old dotted name or path as a whole name: not inside a longer one. A path may be followed
    by ".py" or by punctuation, not by another suffix (families.json is not families.py)."""
    if sep == ".":
        return re.compile(r"(?<![\w.])" + re.escape(old) + r"(?!\w)")
    return re.compile(r"(?<![\w.-])" + re.escape(old) + r"(?!\w)(?!\.(?!py\b)\w)")


def _path_rules() -> list[tuple[re.Pattern, str]]:
    rules = []
    for old, new in MOVES.items():  # data files (with a suffix) first, then modules and folders
        if not old.endswith(".py"):
            rules.append((_name_re(old, "/"), new))
    for old, new in MOVES.items():
        if old.endswith(".py"):
            rules.append((_name_re(old[:-3], "/"), new[:-3]))
    return rules


DOT_RULES = [(_name_re(o, "."), n) for o, n in MODULES.items()]
PATH_RULES = _path_rules()
FROM_LINE = re.compile(r"^([ \t]*)from ([\w.]+) import ([\w ,]+?)([ \t]*#.*)?$", re.M)


def _split_from(indent: str, base: str, names: list[tuple[str, str | None]]) -> list[str] | None:
    """`from base import names` as statements for the moved names' new homes; None if none moved.
    names: (name, alias)."""
    keep, moved = [], {}
    for name, alias in names:
        new = MODULES.get(f"{base}.{name}")
        if new is None:
            keep.append(name if alias is None else f"{name} as {alias}")
            continue
        parent, _, leaf = new.rpartition(".")
        as_name = alias or name
        moved.setdefault(parent, []).append(leaf if leaf == as_name else f"{leaf} as {as_name}")
    if not moved:
        return None
    out = [f"{indent}from {base} import {', '.join(keep)}"] if keep else []
    out += [f"{indent}from {p} import {', '.join(ns)}" for p, ns in moved.items()]
    return out


def with_comment(statements: list[str], comment: str) -> list[str]:
    """A split statement's trailing comment: a `noqa` on each part, any other on the first."""
    if "noqa" in comment:
        return [s + comment for s in statements]
    return [statements[0] + comment, *statements[1:]]


def split_from_imports_py(text: str) -> str:
    """.py files: every `from pkg import ...` naming a moved module (multi-line too)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return split_from_imports_lines(text)
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            first = lines[node.lineno - 1]
            indent = first[: len(first) - len(first.lstrip())]
            new = _split_from(indent, node.module, [(a.name, a.asname) for a in node.names])
            if new is not None:
                comment = re.search(r"\s+#.*$", first.rstrip("\n"))  # the comment after `import (`
                if comment:
                    new = with_comment(new, comment.group(0))
                edits.append((node.lineno, node.end_lineno, new))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1 : end] = [ln + "\n" for ln in new]
    return "".join(lines)


def split_from_imports_lines(text: str) -> str:
    """Other files (docs, notebooks' JSON strings): one-line `from pkg import a, b` statements."""

    def one(m: re.Match) -> str:
        names = []
        for part in m.group(3).split(","):
            words = part.split()
            if len(words) == 3 and words[1] == "as":
                names.append((words[0], words[2]))
            elif len(words) == 1:
                names.append((words[0], None))
            else:
                return m.group(0)
        new = _split_from(m.group(1), m.group(2), names)
        if new is None:
            return m.group(0)
        return "\n".join(with_comment(new, m.group(4) or ""))

    return FROM_LINE.sub(one, text)


def rewrite(text: str, is_py: bool) -> str:
    text = split_from_imports_py(text) if is_py else split_from_imports_lines(text)
    for pattern, new in DOT_RULES + PATH_RULES:
        text = pattern.sub(new, text)
    return text


def text_files() -> list[str]:
    out = []
    for rel in git("ls-files").splitlines():
        if rel == SELF or rel.startswith(SKIP_DIRS) or not os.path.exists(os.path.join(ROOT, rel)):
            continue
        if rel.endswith(TEXT_SUFFIXES) or rel in TEXT_FILES:
            out.append(rel)
    return out


def rewrite_files(dry: bool) -> list[str]:
    changed = []
    for rel in text_files():
        path = os.path.join(ROOT, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = rewrite(text, rel.endswith(".py"))
        if new != text:
            changed.append(rel)
            if not dry:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args()
    check_table()
    moved = move_files(args.check)
    changed = rewrite_files(args.check)
    py = [rel for rel in changed if rel.endswith(".py")]
    if py and not args.check:  # split imports sorted, lengthened lines wrapped: ruff's own rules
        subprocess.run(["ruff", "check", "--select", "I", "--fix", "-q", *py], cwd=ROOT)
        subprocess.run(["ruff", "format", "-q", *py], cwd=ROOT)
    for line in moved:
        print(line)
    for rel in changed:
        print(f"rewrote {rel}")
    if args.check and (moved or changed):
        sys.exit(1)


if __name__ == "__main__":
    main()
