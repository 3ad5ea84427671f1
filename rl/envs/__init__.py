"""Agent environments for RL and evaluation: sandbox, tool protocol, tasks, verification, episodes.

    from rl.envs import CodingEnv, Sandbox, generate_tasks, verify_tasks, run_episode

    tasks, rejected = verify_tasks(generate_tasks(100, seed=0))   # the gate: only well-posed tasks
    env = CodingEnv(tokenizer)                                     # one per rollout worker thread
    record = run_episode(env, tasks[0], policy)                    # policy(context_ids)
                                                                     -> emitted_ids
    record.tokens, record.mask, record.all_pass, record.tests_passed  # exactly these ids;
                                                                       the grade

Entry points that run model-written code call `require_isolation()` first: it raises
`SandboxUnavailable` (install bubblewrap, or opt in to unisolated runs) before any model loads.

Sub-packages by role, in layers (each imports only itself and the ones before it; checked by
tests/test_imports.py; this __init__, __main__ and traces.py wire them):

    isolation/  sandbox (bubblewrap confinement; rlimits only by opt-in), cgroups (per-episode
                memory/process/CPU/disk caps)
    grading/    tasks (Task, JSONL + files, grading: `Grade` holds the hidden tests' passed / total
                and `tampered`), harden + grader/ (tamper-resistant hidden-test runs),
                grade_review / grade_devops (code review graded by the first `report`, DevOps by a
                trusted check command), dispatch (which grader a task uses), verify (the gate)
    agent/      env (token-level episodes; they report the grade, the reward is
                rl/episodes/rewards.py's), tools + search (strict tool-call parsing + the tools),
                summary (self-summarization: episodes longer than the context as chains of
                segments), scripted (oracle policies for smoke tests and benchmarks), snapshot
    repos/      real repositories as environments (setup agent, spec, gate, mined tasks); the
                vendored projects and committed suites are data, in data/repos/
    taskgen/    procedural task templates
"""

from rl.envs.agent.env import CodingEnv, run_episode
from rl.envs.agent.scripted import OraclePolicy
from rl.envs.agent.summary import SummaryConfig
from rl.envs.agent.tools import TOOL_SCHEMAS, parse_turn
from rl.envs.grading.tasks import (
    Grade,
    Task,
    apply_solution,
    grade_repo,
    load_tasks,
    save_tasks,
)
from rl.envs.grading.verify import Verdict, verify_task, verify_tasks
from rl.envs.isolation import cgroups
from rl.envs.isolation.sandbox import (
    Limits,
    RunResult,
    Sandbox,
    SandboxUnavailable,
    backend,
    require_isolation,
)
from rl.envs.taskgen import TEMPLATES, generate_task, generate_tasks
from rl.episodes.schema import EpisodeRecord

__all__ = [
    "CodingEnv",
    "EpisodeRecord",
    "Grade",
    "Limits",
    "OraclePolicy",
    "RunResult",
    "Sandbox",
    "SandboxUnavailable",
    "SummaryConfig",
    "TEMPLATES",
    "TOOL_SCHEMAS",
    "Task",
    "Verdict",
    "apply_solution",
    "backend",
    "cgroups",
    "generate_task",
    "generate_tasks",
    "grade_repo",
    "load_tasks",
    "parse_turn",
    "require_isolation",
    "run_episode",
    "save_tasks",
    "verify_task",
    "verify_tasks",
]
