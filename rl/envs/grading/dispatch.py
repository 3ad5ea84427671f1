"""Which grader a task uses: hidden tests (the default), a review report, or a DevOps check.

`Task.meta["grader"]`: absent = the hidden tests (rl.envs.grading.tasks.grade_repo), "review" = the
location of the policy's first `report` call (rl/envs/grading/grade_review.py), "devops" = the
trusted check command with the file rules and the baseline test set
(rl/envs/grading/grade_devops.py). Any other value grades 0 (fail closed).
"""

from __future__ import annotations

from rl.envs.grading import grade_devops as devops
from rl.envs.grading import grade_review as review
from rl.envs.grading.tasks import Grade, Task, grade_repo
from rl.envs.isolation.sandbox import Limits

GRADERS = ("review", "devops")


def grade_episode(
    task: Task,
    repo_dir: str,
    report: tuple[str, int] | None = None,
    timeout_s: float = 60.0,
    limits: Limits = Limits(),
) -> Grade:
    """The episode's grade: `report` is the first report the environment recorded (host side)."""
    kind = task.meta.get("grader")
    if kind is None:
        return grade_repo(task, repo_dir, timeout_s, limits)
    if kind == "review":
        return review.grade_report(task, report)
    if kind == "devops":
        return devops.grade_devops(task, repo_dir, timeout_s, limits)
    return Grade(0, 1, f"[rejected] unknown grader {kind!r}; known: {', '.join(GRADERS)}")
