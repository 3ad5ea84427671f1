"""An oracle policy for smoke tests and benchmarks: emits real tool-call token ids that apply a
task's reference solution with write_file, run the tests, and submit. Not a learned agent."""

from __future__ import annotations

import re

from data.chat import tool_call_text
from data.tokenizers import Tokenizer
from rl.envs.agent.summary import instruction_ids, summary_turn_ids
from rl.envs.grading.grade_review import reference_report as review_answer
from rl.envs.grading.tasks import Task


class OraclePolicy:
    """`policy(context_ids) -> emitted_ids`, one tool call per turn."""

    def __init__(self, tok: Tokenizer, task: Task, edits: dict[str, str | None] | None = None):
        edits = task.solution if edits is None else edits
        calls = [("list_files", {})]
        if task.meta.get("grader") == "review":  # review: report the defect, change nothing
            path, line = review_answer(task)
            calls += [("read_file", {"path": path}), ("report", {"path": path, "line": line})]
            edits = {}
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
    first, search for what the statement names (tasks with the search tools: `locate`), read each
    file it will change, apply the reference solution (edit where a small unique
    search/replace exists, else write_file; `run rm` for deletions), run the tests, submit.
    Each turn is one short sentence + one tool call + <|end|>; `plan` keeps (text, name, arguments,
    trained) so a trace can be written as chat messages that render to exactly these ids
    (data/chat.py).

    With probability `mistake_rate` the episode holds one mistake of the kind a sampled policy makes
    (one wrong byte in a read's path, an edit's path or an edit's old text), the environment's error
    observation, and the recovery (the right call, after a look at the file list for some wrong
    reads). The mistaken turn has trained=False:
    SFT shows it in the context but teaches only the recovery. `mistake` names the kind, or None."""

    def __init__(self, tok: Tokenizer, task: Task, rng, mistake_rate: float = 0.0):
        self.flow = "reproduce" if rng.random() < 0.4 else "direct"
        self.mistake = (
            None  # set when the planned mistake is made (a task may have no place for it)
        )
        planned = None
        if mistake_rate > 0 and rng.random() < mistake_rate:  # no draw at 0: same traces as before
            planned = rng.choice(MISTAKES)
        plan = [(rng.choice(LOOK), "list_files", {}, True)]
        if self.flow == "reproduce":
            plan.append((rng.choice(REPRODUCE), "run_tests", {}, True))
        plan += locate(task)  # search tools, where the task has them (no rng draw: see locate)
        for path in task.meta.get("read_first", ()):  # long_lookup: the facts the fix needs
            plan.append((f"Reading {path}.", "read_file", {"path": path}, True))
        if task.meta.get("grader") == "review":  # review: read the file, report, submit
            path, line = review_answer(task)
            plan.append((f"Reading {path}.", "read_file", {"path": path}, True))
            plan.append(
                (f"The defect is on line {line}.", "report", {"path": path, "line": line}, True)
            )
        for path, content in {} if task.meta.get("grader") == "review" else task.solution.items():
            old = task.files.get(path)
            if content is None:
                plan.append(
                    (f"{path} is no longer needed.", "run", {"command": f"rm -f {path}"}, True)
                )
                continue
            if old is not None:
                text = f"Reading {path}."
                if planned == "read_path":
                    wrong, text = _wrong_read(path, task, rng)
                    plan += wrong
                    self.mistake, planned = planned, None  # one mistake per episode
                plan.append((text, "read_file", {"path": path}, True))
            edit = minimal_edit(old, content) if old is not None else None
            if edit:
                args = {"path": path, "old": edit[0], "new": edit[1]}
                text = f"Changing {path}."
                if planned in ("edit_path", "edit_old"):
                    wrong, text = _wrong_edit(planned, args, old, task, rng)
                    plan.append(wrong)
                    self.mistake, planned = planned, None
                plan.append((text, "edit", args, True))
            else:
                plan.append(
                    (f"Writing {path}.", "write_file", {"path": path, "content": content}, True)
                )
        plan += [(rng.choice(CHECK), "run_tests", {}, True), ("Done.", "submit", {}, True)]
        self.plan = plan
        self._turns = [
            tok.encode(text)
            + tok.encode(tool_call_text(n, a), allow_special=True)
            + [tok.special_id("end")]
            for text, n, a, _ in plan
        ]
        self._next = 0

    def __call__(self, context: list[int]) -> list[int]:
        if self._next == len(self._turns):
            raise RuntimeError("TracePolicy called after its submit turn")
        self._next += 1
        return self._turns[self._next - 1]


def named_symbol(task: Task) -> str | None:
    """The function a statement names, from its words only (never the task's meta: the trace must
    search for what a user wrote): the first backticked name ("`toRoman` has a regression. It
    shows up through `main()`": the function to fix comes first; `Cache.get` -> get), else the
    first `name(` ("fromRoman() is broken"), else the first snake_case identifier that is not part
    of a path ("order_total in shop/pricing.py"), or None."""
    text = task.prompt.split("```", 1)[0]
    m = (
        re.search(r"`(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)(?:\(\))?`", text)
        or re.search(r"\b([A-Za-z_]\w*)\(", text)
        or re.search(r"(?<![\w/.])([A-Za-z_]\w*_\w*)\b(?![/.]\w)", text)
    )
    return m.group(1) if m else None


def locate(task: Task) -> list[tuple]:
    """Plan turns that find the code before any file is opened, as an engineer with search tools
    does from a terse statement: `search` for the function it names, else a ranked `code_search`
    with the statement's words. Only for tasks that switch the tools on (Task.meta["tools"]; the
    procedural families do not, so their traces are unchanged) and not for review (its patch
    names the file). Draws nothing from the policy's rng (the other traces stay byte-identical)."""
    tools = set(task.meta.get("tools", ()))
    if task.meta.get("grader") == "review":
        return []
    name = named_symbol(task)
    if "search" in tools and name:
        return [(f"Searching for {name}.", "search", {"pattern": rf"\b{name}\b"}, True)]
    if "code_search" in tools:
        words = re.findall(r"[A-Za-z_]\w{2,}", task.prompt.split("```", 1)[0])[:8]
        if words:
            query = " ".join(words)
            return [("Looking for the code this is about.", "code_search", {"query": query}, True)]
    return []


MISTAKES = ("read_path", "edit_path", "edit_old")


def one_byte_off(text: str, rng, avoid) -> str:
    """`text` with one letter or digit substituted, dropped or doubled, such that `avoid(result)` is
    false (e.g. the result names no file of the repo): the typo a byte-level sampler makes."""
    spots = [i for i, ch in enumerate(text) if ch.isalnum()]
    for _ in range(100):
        i = rng.choice(spots)
        op = rng.choice(("sub", "drop", "double"))
        if op == "sub":
            ch = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != text[i]])
            out = text[:i] + ch + text[i + 1 :]
        else:
            out = text[:i] + (text[i] * 2 if op == "double" else "") + text[i + 1 :]
        if out != text and not avoid(out):
            return out
    raise ValueError(f"no one-byte typo of {text!r} found")


def _wrong_read(path: str, task: Task, rng) -> tuple[list[tuple], str]:
    """A read of a mistyped path (not trained), half the time a look at the file list, and the
    sentence that opens the right read. No trained sentence repeats the typo: a trained copy of it
    teaches the model to write typos (run 10 in bench/RESULTS_LOG.md)."""
    typo = one_byte_off(path, rng, lambda p: p in task.files)
    turns = [(f"Reading {typo}.", "read_file", {"path": typo}, False)]
    if rng.random() < 0.5:
        turns.append(("That file does not exist. Listing the files.", "list_files", {}, True))
        return turns, f"Reading {path}."
    return turns, f"No such file. The path is {path}."


def _wrong_edit(kind: str, args: dict, old_text: str, task: Task, rng) -> tuple[tuple, str]:
    """An edit with a mistyped path or old text (not trained), and the sentence that opens the right
    edit, copied from the file already read (a re-read would not fit the benchmark's 2048-token
    context)."""
    path = args["path"]
    if kind == "edit_path":
        wrong = dict(args, path=one_byte_off(path, rng, lambda p: p in task.files))
        why = f"Wrong path; the file is {path}."
    else:
        wrong = dict(args, old=one_byte_off(args["old"], rng, lambda o: old_text.count(o) == 1))
        why = "That old text is not in the file. Copying it exactly."
    return (f"Changing {wrong['path']}.", "edit", wrong, False), why


LOOK = ("Let me look at the repository.", "First, the files.", "Looking around the repo.")
REPRODUCE = ("Running the tests to see what fails.", "Let me run the tests first.")
CHECK = ("Now the tests.", "Running the tests.", "Checking with the tests.")


class SummarizingPolicy:
    """A TracePolicy that answers the environment's summarize instruction (rl/envs/agent/summary.py)
    with a summary turn and then goes on with its plan: the oracle of self-summarization, for tests
    and SFT traces. Its summary keeps what the rest of the plan needs: the steps done, the facts of
    the files read so far (task.meta["facts"], long_lookup) and the next step. `summaries` holds
    (plan turns done, text) of each summary it wrote."""

    def __init__(self, tok: Tokenizer, inner: TracePolicy, task: Task):
        self.tok, self.inner, self.facts = tok, inner, task.meta.get("facts", {})
        self._ask = instruction_ids(tok) + [tok.special_id("assistant")]
        self.summaries: list[tuple[int, str]] = []

    def __call__(self, context: list[int]) -> list[int]:
        if context[-len(self._ask) :] == self._ask:
            text = self.summary_text()
            self.summaries.append((self.inner._next, text))
            return summary_turn_ids(self.tok, text)
        return self.inner(context)

    def summary_text(self) -> str:
        plan, n = self.inner.plan, self.inner._next
        done = [f"{name} {args.get('path', '')}".strip() for _, name, args, _ in plan[:n]]
        read = [args["path"] for _, name, args, _ in plan[:n] if name == "read_file"]
        facts = [self.facts[p] for p in read if p in self.facts]
        text = "Done: " + ", ".join(done) + "."
        if facts:
            text += " Facts: " + "; ".join(facts) + "."
        return text + (f" Next: {plan[n][0]}" if n < len(plan) else "")
