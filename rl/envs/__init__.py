"""Agent environments: sandboxed execution, tool protocol, coding tasks, verification, episodes."""
from rl.envs.sandbox import Limits, RunResult, Sandbox, backend

__all__ = ["Limits", "RunResult", "Sandbox", "backend"]
