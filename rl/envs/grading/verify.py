"""Verification gate: a task enters the pool only if it is well-posed in a real sandbox.

Checks, in order: every hidden test file can be hardened with canaries (a file whose tests all
`return` or `yield` cannot); every setup command succeeds; the hidden tests do not all pass on the
untouched repo (else the task teaches nothing); they all pass once the reference solution is
applied (else it is unsolvable as specified), and without tripping the grader's tamper checks
(hidden tests whose canaries pass on an honest repo, or that compare builtin values to other types
with ==, are not gradable). Accepted tasks get `meta["hidden_test_count"]` (test functions; a
parametrized test counts once), the total a grading reports when the runner's summary is lost.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

from rl.envs.grading.grade_devops import verify_devops
from rl.envs.grading.grade_review import verify_review
from rl.envs.grading.harden import harden_suite
from rl.envs.grading.tasks import Task, apply_solution, deps_of, grade_in
from rl.envs.isolation.sandbox import Limits, Sandbox


@dataclasses.dataclass(frozen=True)
class Verdict:
    task_id: str
    accepted: bool
    reason: str  # "ok" or why it was rejected, one line


def verify_task(task: Task, timeout_s: float = 60.0, limits: Limits = Limits()) -> Verdict:
    """The gate for every grader (rl/envs/grading/dispatch.py): DevOps tasks by their own gate;
    review tasks must have a real defect (their hidden tests fail with it, pass without: the checks
    below) and a well-posed location grading."""
    grader = task.meta.get("grader")
    if grader == "devops":
        return Verdict(task.id, *verify_devops(task, timeout_s, limits))
    if grader not in (None, "review"):
        return Verdict(task.id, False, f"unknown grader {grader!r}")
    verdict = _verify_hidden(task, timeout_s, limits)
    if verdict.accepted and grader == "review":
        problem = verify_review(task)
        if problem:
            return Verdict(task.id, False, problem)
    return verdict


def _verify_hidden(task: Task, timeout_s: float, limits: Limits) -> Verdict:
    problem = _unhardenable(task.hidden_tests)
    if problem:
        return Verdict(task.id, False, problem)
    with Sandbox.from_files(task.files, limits=limits, test_deps=deps_of(task)) as box:
        for i, command in enumerate(task.setup):
            result = box.run(command, timeout_s)
            if not result.ok:
                return Verdict(
                    task.id,
                    False,
                    f"setup command {i} ({command!r}) ended {result.status}: "
                    f"{_last_line(result.output)}",
                )
        with Sandbox(box.root, limits=limits, test_deps=deps_of(task)) as before:
            untouched = grade_in(before, task, timeout_s)
        if untouched.total == 0:
            return Verdict(task.id, False, f"no hidden tests ran: {_last_line(untouched.output)}")
        if untouched.all_pass:
            return Verdict(
                task.id,
                False,
                f"hidden tests already pass on the untouched repo "
                f"({untouched.passed}/{untouched.total})",
            )
        try:
            apply_solution(box, task.solution)
        except (OSError, ValueError) as e:
            return Verdict(task.id, False, f"reference solution does not apply: {e}")
        solved = grade_in(box, task, timeout_s)
        if solved.tampered:  # e.g. a canary that passes: the hidden tests cannot be hardened
            reasons = "; ".join(solved.tamper_reasons)
            return Verdict(task.id, False, f"reference solution graded as tampering: {reasons}")
        if not solved.all_pass:
            return Verdict(
                task.id,
                False,
                f"reference solution fails hidden tests "
                f"({solved.passed}/{solved.total}): {_last_line(solved.output)}",
            )
    task.meta["hidden_test_count"] = solved.total
    return Verdict(task.id, True, "ok")


def verify_tasks(
    tasks: list[Task], workers: int = 2, timeout_s: float = 60.0
) -> tuple[list[Task], list[Verdict]]:
    """Returns (accepted tasks, rejected verdicts), each in input order."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        verdicts = list(pool.map(lambda t: verify_task(t, timeout_s), tasks))
    accepted = [t for t, v in zip(tasks, verdicts) if v.accepted]
    return accepted, [v for v in verdicts if not v.accepted]


def _unhardenable(hidden: dict[str, str]) -> str | None:
    """Why the hidden tests cannot be graded safely (None when they can): a file does not parse,
    or one has tests but none a canary can be built from (all of them `return` or `yield`), so a
    forged all-passed report of it would go unnoticed."""
    try:
        layout, _ = harden_suite(hidden)
    except SyntaxError as e:
        return f"hidden test file {e.filename or ''} does not parse: {e}"
    for rel, hardened in sorted(layout.items()):
        if hardened.real and not hardened.canaries:
            return (
                f"hidden test file {rel} has no test a canary can be built from "
                "(every test returns or yields): its reports could be forged unnoticed"
            )
    return None


def _last_line(output: str) -> str:
    lines = [l for l in output.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else "(no output)"
