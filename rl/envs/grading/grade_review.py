"""Code review tasks: a patch with one planted defect; the policy reports where it is.

The repository holds the patch applied (the prompt shows it as a unified diff). The defect is one
AST mutation of rl/envs/repos/mine.py (flipped comparison, off-by-one, swapped arguments, flipped
and/or) inside the patch's added lines. The policy calls

    report {path, line}      # the file and the 1-based line of the defect

as often as it likes, but only the FIRST report counts: the environment records it on the host
(CodingEnv._report, never a file the policy's code can write, never read back from the sandbox) and
grades it when the episode ends. The observation says only that the report was recorded, never
whether it is right.

Tolerance (`answer_span`): the path must equal the defect's file (after stripping "./"), and the
line must lie in the mutated statement's line span: for a simple statement, its lines (a statement
spanning 3 lines accepts any of them); for a compound statement whose header holds the defect
(`if x < y:`, `for i in range(n - 1):`), the header's lines only, not its body. One line off
outside the span is a miss.

Task meta (host side, never shown to the policy): meta["grader"] = "review", meta["review"] =
{"path", "lines": [lo, hi], "op"}. The task's hidden tests and solution (the file without the
defect) are there for the gate, which checks that the defect is real (verify.py: the hidden tests
fail with it and pass without it) before it checks the location grading (`verify_review`).
"""

from __future__ import annotations

import ast
import difflib
import posixpath

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.tasks import Grade, Task

SCHEMA = {"report": {"path": ((str,), True), "line": ((int,), True)}}
HELP = {
    "report": "- report {path, line}: report the defect's file and line (the first report counts)"
}
# Mutation operators that keep the line count (the reported line means the same in both files).
REVIEW_OPS = ("flip_comparison", "off_by_one", "swap_args", "flip_bool_op")


def answer_span(source: str, line: int) -> tuple[int, int]:
    """(lo, hi) lines accepted for a defect on `line` of `source` (see the module docstring)."""
    best = None
    for node in ast.walk(parse_python(source)):
        if isinstance(node, ast.stmt) and node.lineno <= line <= node.end_lineno:
            if best is None or (node.lineno, -node.end_lineno) > (best.lineno, -best.end_lineno):
                best = node  # the innermost statement holding the line
    if best is None:
        raise ValueError(f"line {line} is in no statement")
    body = getattr(best, "body", None)
    if isinstance(body, list) and body and line < body[0].lineno:
        return best.lineno, max(best.lineno, body[0].lineno - 1)  # the header only
    return best.lineno, best.end_lineno


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
    )


def added_lines(before: str, after: str) -> set[int]:
    """1-based lines of `after` that the patch adds or changes."""
    sm = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    out = set()
    for tag, _, _, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return out


def normalize_path(path: str) -> str:
    return posixpath.normpath(path.strip()).lstrip("/") if path.strip() else ""


def grade_report(task: Task, report: tuple[str, int] | None) -> Grade:
    """1/1 when the first report hits the defect's span, else 0/1 (no report: 0)."""
    answer = task.meta.get("review")
    if not isinstance(answer, dict):  # fail closed: a review task without its answer
        return Grade(0, 1, "[review] task has no answer (meta['review'])")
    lo, hi = answer["lines"]
    if report is None:
        return Grade(0, 1, "[review] no report")
    path, line = report
    hit = normalize_path(path) == answer["path"] and lo <= line <= hi
    where = f"{path}:{line}"
    return Grade(int(hit), 1, f"[review] first report {where}: {'hit' if hit else 'miss'}")


def reference_report(task: Task) -> tuple[str, int]:
    answer = task.meta["review"]
    return answer["path"], answer["lines"][0]


def cheat_reports(task: Task) -> dict[str, list[tuple[str, int]]]:
    """Scripted cheats, as report sequences (only the first counts): none may earn credit."""
    path, (lo, hi) = task.meta["review"]["path"], task.meta["review"]["lines"]
    right = (path, lo)
    return {
        "line_above_span": [(path, lo - 1)],
        "line_below_span": [(path, hi + 1)],
        "wrong_file_right_line": [("README.md", lo)],
        "first_line": [(path, 1)] if lo > 1 else [(path, hi + 1)],
        "spray_wrong_first": [(path, hi + 1), right, (path, lo - 1)],
        # a file in the repo naming the answer: the grade reads nothing from the repo
        "answer_in_a_file": [],
    }


def verify_review(task: Task) -> str | None:
    """None when the location grading is well-posed, else why not: the answer lies inside the
    patched file's changed lines, the reference report hits, no report and every cheat miss."""
    answer = task.meta.get("review")
    if not isinstance(answer, dict) or answer.get("path") not in task.files:
        return "review task without an answer in a repo file"
    lo, hi = answer["lines"]
    n_lines = len(task.files[answer["path"]].splitlines())
    if not 1 <= lo <= hi <= n_lines:
        return f"answer span {lo}-{hi} outside the file ({n_lines} lines)"
    before = task.meta.get("review_base", {}).get(answer["path"])
    if before is not None and not set(range(lo, hi + 1)) & added_lines(
        before, task.files[answer["path"]]
    ):
        return "answer span is not among the patch's added lines"
    if not grade_report(task, reference_report(task)).all_pass:
        return "reference report misses"
    if grade_report(task, None).passed:
        return "no report earns credit"
    for name, reports in cheat_reports(task).items():
        if grade_report(task, reports[0] if reports else None).passed:
            return f"scripted cheat {name} earns credit"
    return None
