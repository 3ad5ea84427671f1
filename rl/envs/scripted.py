"""An oracle policy for smoke tests and benchmarks: emits real tool-call token ids that apply a
task's reference solution with write_file, run the tests, and submit. Not a learned agent."""

from __future__ import annotations

from data.chat import tool_call_text
from data.tokenizers import Tokenizer
from rl.envs.tasks import Task


class OraclePolicy:
    """`policy(context_ids) -> emitted_ids`, one tool call per turn."""

    def __init__(self, tok: Tokenizer, task: Task, edits: dict[str, str | None] | None = None):
        edits = task.solution if edits is None else edits
        calls = [("list_files", {})]
        for path, content in edits.items():
            calls.append(
                ("run", {"command": f"rm -f {path}"})
                if content is None
                else ("write_file", {"path": path, "content": content})
            )
        calls += [("run_tests", {}), ("submit", {})]
        self._turns = [
            tok.encode(tool_call_text(n, a), allow_special=True) + [tok.special_id("end")]
            for n, a in calls
        ]

    def __call__(self, context: list[int]) -> list[int]:
        if not self._turns:
            raise RuntimeError("OraclePolicy called after its submit turn")
        return self._turns.pop(0)
