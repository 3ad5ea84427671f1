"""Agent environments: sandboxed execution, tool protocol, coding tasks, verification, episodes.

    from rl.envs import Sandbox, CodingEnv, generate_tasks, verify_tasks
"""
from rl.envs.env import CodingEnv, EpisodeRecord, run_episode
from rl.envs.sandbox import Limits, RunResult, Sandbox, backend
from rl.envs.scripted import OraclePolicy
from rl.envs.taskgen import TEMPLATES, generate_task, generate_tasks
from rl.envs.tasks import Grade, Task, apply_solution, grade_repo, load_tasks, save_tasks
from rl.envs.tools import TOOL_SCHEMAS, parse_turn
from rl.envs.verify import Verdict, verify_task, verify_tasks

__all__ = [
    "CodingEnv", "EpisodeRecord", "Grade", "Limits", "OraclePolicy", "RunResult", "Sandbox", "TEMPLATES",
    "TOOL_SCHEMAS", "Task", "Verdict", "apply_solution", "backend", "generate_task", "generate_tasks",
    "grade_repo", "load_tasks", "parse_turn", "run_episode", "save_tasks", "verify_task", "verify_tasks",
]
