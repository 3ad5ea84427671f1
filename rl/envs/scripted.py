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


def minimal_edit(old_text: str, new_text: str) -> tuple[str, str] | None:
    """The smallest whole-line search/replace (grown with context until its search text is unique)
    that turns old_text into new_text, or None."""
    a, b = old_text.splitlines(keepends=True), new_text.splitlines(keepends=True)
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    for ctx in range(len(a) + 1):
        lo, cut = max(p - ctx, 0), max(s - ctx, 0)
        old, new = "".join(a[lo : len(a) - cut]), "".join(b[lo : len(b) - cut])
        if old and old_text.count(old) == 1 and old_text.replace(old, new, 1) == new_text:
            return old, new
    return None


class TracePolicy:
    """An oracle with a realistic flow, for SFT traces: look at the repo, sometimes run the tests
    first, read each file it will change, apply the reference solution (edit where a small unique
    search/replace exists, else write_file; `run rm` for deletions), run the tests, submit.
    Each turn is one short sentence + one tool call + <|end|>; `plan` keeps (text, name, arguments)
    so a trace can be written as chat messages that render to exactly these ids (data/chat.py)."""

    def __init__(self, tok: Tokenizer, task: Task, rng):
        self.flow = "reproduce" if rng.random() < 0.4 else "direct"
        plan = [(rng.choice(LOOK), "list_files", {})]
        if self.flow == "reproduce":
            plan.append((rng.choice(REPRODUCE), "run_tests", {}))
        for path, content in task.solution.items():
            old = task.files.get(path)
            if content is None:
                plan.append((f"{path} is no longer needed.", "run", {"command": f"rm -f {path}"}))
                continue
            if old is not None:
                plan.append((f"Reading {path}.", "read_file", {"path": path}))
            edit = minimal_edit(old, content) if old is not None else None
            if edit:
                plan.append(
                    (f"Changing {path}.", "edit", {"path": path, "old": edit[0], "new": edit[1]})
                )
            else:
                plan.append((f"Writing {path}.", "write_file", {"path": path, "content": content}))
        plan += [(rng.choice(CHECK), "run_tests", {}), ("Done.", "submit", {})]
        self.plan = plan
        self._turns = [
            tok.encode(text)
            + tok.encode(tool_call_text(n, a), allow_special=True)
            + [tok.special_id("end")]
            for text, n, a in plan
        ]
        self._next = 0

    def __call__(self, context: list[int]) -> list[int]:
        if self._next == len(self._turns):
            raise RuntimeError("TracePolicy called after its submit turn")
        self._next += 1
        return self._turns[self._next - 1]


LOOK = ("Let me look at the repository.", "First, the files.", "Looking around the repo.")
REPRODUCE = ("Running the tests to see what fails.", "Let me run the tests first.")
CHECK = ("Now the tests.", "Running the tests.", "Checking with the tests.")
