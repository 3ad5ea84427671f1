"""A scripted expert for mined real-repository tasks: works a bug the way an engineer does.

It knows the fix (the task's reference solution, as the procedural oracle does) but reaches it
through the tools and reacts to what they return, so its traces teach the moves a policy needs:

1. sometimes a look at the files and a first test run (the visible tests pass: the failing ones
   are hidden, so the statement is the bug report);
2. a reproduction when the statement quotes a call and its expected value
   (`run python3 -c "from MOD import f; print(repr(f(...)))"`): the wrong value, or a traceback;
3. `search` for the definition the statement names (`def name\\b`), or a ranked `code_search`
   on the statement's words, and the hit that holds the function is picked from the OUTPUT (no
   hit: the episode gives up, and no trace is written);
4. `read_file` with a line range: the function (a window around the change when the function is
   over READ_MAX lines), never the whole file, so episodes stay ~3-6k byte tokens;
5. `edit` with text copied from what it read (the smallest unique whole-line search/replace);
6. the reproduction again, the tests, `submit`.

Mistakes and recoveries (`mistake`, chosen by the caller with a seeded rng):
- "syntax": the first edit drops a bracket or colon; the test rerun shows the SyntaxError (its
  line taken from the traceback), the expert re-reads those lines and edits them right;
- "edit_old": the first edit's old text is indented one level too deep, so the tool answers
  "found 0 times"; the expert re-reads the lines and copies them exactly.
The mistaken turn is not trained (trained=False -> "weight": 0 in the trace); the recovery is.

`ExpertPolicy(tok, task, rng, mistake)` is a `policy(context_ids) -> emitted_ids` for
rl.envs.run_episode; `plan` holds (text, tool, arguments, trained) per turn as played.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Generator

from data.chat import tool_call_text
from data.tokenizers import Tokenizer
from rl.envs.agent.scripted import minimal_edit
from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.tasks import Task
from rl.envs.repos.mine import functions

READ_MAX = 60  # lines: a longer function is read as a window around the change
WINDOW = 20  # lines of context each side of the change in that window
MISTAKES = ("syntax", "edit_old")

Step = tuple[str, str, dict, bool]  # (sentence, tool, arguments, trained)


class GaveUp(Exception):
    """The expert could not find the code from what the tools showed (no trace is written)."""


class ExpertPolicy:
    def __init__(self, tok: Tokenizer, task: Task, rng, mistake: str | None = None):
        if mistake not in (None, *MISTAKES):
            raise ValueError(f"unknown mistake {mistake!r}; known: {', '.join(MISTAKES)}")
        self.tok, self.task, self.mistake = tok, task, mistake
        self.plan: list[Step] = []
        self._flow = _work(task, rng, mistake)
        self._seen = 0  # context tokens already answered

    def __call__(self, context: list[int]) -> list[int]:
        obs = self._last_observation(context)
        step = next(self._flow) if not self.plan else self._flow.send(obs)
        self.plan.append(step)
        text, name, args, _ = step
        ids = self.tok.encode(text) + self.tok.encode(
            tool_call_text(name, args), allow_special=True
        )
        ids.append(self.tok.special_id("end"))
        self._seen = len(context) + len(ids)
        return ids

    def _last_observation(self, context: list[int]) -> str:
        """The tool result the environment appended since the last turn (text, untrimmed tokens
        as the context holds them)."""
        tok, new = self.tok, context[self._seen :]
        open_, close = tok.special_id("tool_result"), tok.special_id("/tool_result")
        if open_ not in new:
            return ""
        i = new.index(open_)
        return tok.decode(new[i + 1 : new.index(close, i)])


# ---------------------------------------------------------------- the work, step by step


def _work(task: Task, rng, mistake: str | None) -> Generator[Step, str, None]:
    path = next(iter(task.solution))
    old_file, new_file = task.files[path], task.solution[path]
    edit = minimal_edit(old_file, new_file)
    if edit is None:
        raise GaveUp(f"{task.id}: no unique search/replace for the fix")
    symbol = task.meta["symbol"]
    fn_lo, fn_hi = _function_lines(old_file, symbol)
    ed_lo = old_file[: old_file.index(edit[0])].count("\n") + 1
    ed_hi = ed_lo + edit[0].count("\n") - 1
    lo, hi = _read_range(fn_lo, fn_hi, ed_lo, ed_hi)

    if rng.random() < 0.5:
        yield (rng.choice(LOOK), "list_files", {}, True)
    if rng.random() < 0.6:
        out = yield (rng.choice(FIRST_RUN), "run_tests", {}, True)
        note = _tests_note(out)
    else:
        note = ""
    repro = _repro_command(task, path)
    if repro:
        out = yield (note + "Reproducing the report first.", "run", {"command": repro}, True)
        note = _repro_note(out)
    name = symbol.split(".")[-1]
    found = False
    if rng.random() < 0.3:  # ranked search on the statement's words
        said = re.findall(r"[A-Za-z_]\w{2,}", task.prompt)
        words = list(dict.fromkeys([name] + [w for w in said if w.lower() not in STOP]))[:8]
        out = yield (
            note + "Looking for the code this is about.",
            "code_search",
            {"query": " ".join(words)},
            True,
        )
        found = _chunk_holds(out, path, fn_lo)
        note = "" if found else "Not in those results. "
    if not found:
        out = yield (
            note + f"Searching for the definition of {name}.",
            "search",
            {"pattern": rf"def {name}\b"},
            True,
        )
        if f"{path}:{fn_lo}:" not in out:
            raise GaveUp(f"{task.id}: {path}:{fn_lo} not in the search output")
    whole = (lo, hi) == (fn_lo, fn_hi)
    what = f"{symbol} is at {path}:{fn_lo}" + ("." if whole else "; reading around the change.")
    yield (what, "read_file", {"path": path, "start_line": lo, "end_line": hi}, True)
    fixed = (yield from _mistake(mistake, path, old_file, edit)) if mistake else False
    if not fixed:
        args = {"path": path, "old": edit[0], "new": edit[1]}
        yield (rng.choice(FIX).format(name=name), "edit", args, True)
    if repro:
        yield ("Checking the reproduction again.", "run", {"command": repro}, True)
    out = yield (rng.choice(CHECK), "run_tests", {}, True)
    yield ("The tests pass. Done." if " passed" in out else "Done.", "submit", {}, True)


def _mistake(kind: str, path: str, old_file: str, edit: tuple[str, str]):
    """The mistaken edit (not trained) and the turns that recover from it; returns whether the
    right text is in the file now (the syntax slip's recovery edit puts it there)."""
    old, new = edit
    if kind == "edit_old":
        bad = _over_indented(old, old_file)
        yield ("Changing the line.", "edit", {"path": path, "old": bad, "new": new}, False)
        lo = old_file[: old_file.index(old)].count("\n") + 1
        hi = max(lo, lo + old.count("\n") - 1)
        yield (
            "That old text is not in the file: the indentation is off. Re-reading those "
            "lines to copy them exactly.",
            "read_file",
            {"path": path, "start_line": lo, "end_line": hi},
            True,
        )
        return False
    bad = _syntax_slip(old_file, old, new)
    yield ("Changing the line.", "edit", {"path": path, "old": old, "new": bad}, False)
    out = yield ("Running the tests.", "run_tests", {}, True)
    if "SyntaxError" not in out:  # the tests never import the file: no honest way to notice
        raise GaveUp(f"{path}: the slip did not show in the test run")
    line = _syntax_error_line(out, path)
    start = old_file[: old_file.index(old)].count("\n") + 1
    if line is None:
        line = start
    after = old_file.replace(old, bad, 1)
    n = after.count("\n")
    lo, hi = max(1, min(line, start) - 1), min(n, max(line, start + bad.count("\n") - 1) + 1)
    yield (
        f"A SyntaxError in {path} near line {line}: my edit broke it. Reading those lines.",
        "read_file",
        {"path": path, "start_line": lo, "end_line": hi},
        True,
    )
    yield ("Fixing my edit.", "edit", {"path": path, "old": bad, "new": new}, True)
    return True


def _function_lines(source: str, symbol: str) -> tuple[int, int]:
    for sym, node in functions(parse_python(source)):
        if sym == symbol:
            return node.lineno, node.end_lineno
    raise GaveUp(f"{symbol} is not a function of the file")


def _read_range(fn_lo: int, fn_hi: int, ed_lo: int, ed_hi: int) -> tuple[int, int]:
    """The function, or a WINDOW each side of the edit when the function is long; always
    covering the edit's old text (the expert copies it from what it read)."""
    if fn_hi - fn_lo + 1 <= READ_MAX and fn_lo <= ed_lo and ed_hi <= fn_hi:
        return fn_lo, fn_hi
    return min(max(fn_lo, ed_lo - WINDOW), ed_lo), max(min(fn_hi, ed_hi + WINDOW), ed_hi)


def _chunk_holds(out: str, path: str, line: int) -> bool:
    """Whether a code_search hit ("path:lo-hi (score): ...") spans `line` of `path`."""
    for m in re.finditer(rf"^{re.escape(path)}:(\d+)-(\d+) ", out, re.M):
        if int(m.group(1)) <= line <= int(m.group(2)):
            return True
    return False


def _tests_note(out: str) -> str:
    """What a first test run says: all pass (the failing tests are hidden), or how many fail and
    the first failing test's name (pytest's "___ name ___" header)."""
    m = re.search(r"(\d+) failed", out)
    if not m:
        return "The visible tests pass, so the report is all I have. "
    first = re.search(r"^_{3,} (\S+) _{3,}$", out, re.M)
    where = f", first {first.group(1)}" if first else ""
    return f"{m.group(1)} tests fail{where}. "


def _module_of(path: str) -> str:
    mod = path.removeprefix("src/").removesuffix(".py").removesuffix("/__init__")
    return mod.replace("/", ".")


def _repro_command(task: Task, path: str) -> str | None:
    """A one-line reproduction of the statement's quoted call, or None (no quoted call, a call
    through a name the module does not define, or text a shell double-quote would change)."""
    m = re.search(r"`([A-Za-z_]\w*)((?:\.\w+)*\(.*?\))` should return `(.+?)`", task.prompt)
    if not m:
        return None
    head, call = m.group(1), m.group(1) + m.group(2)
    tree = parse_python(task.files[path])
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if head not in defined or any(c in call for c in '"$`\\!'):
        return None
    return f'python3 -c "from {_module_of(path)} import {head}; print(repr({call}))"'


def _repro_note(out: str) -> str:
    """A sentence about what the reproduction printed (its last line)."""
    lines = [x for x in out.splitlines()[1:] if x.strip()]
    if not lines:
        return "It prints nothing. "
    last = lines[-1].strip()
    if "Error" in last:
        return f"It fails: {last[:120]}. "
    return f"It gives {last[:80]}, not what the report expects. "


def _over_indented(old: str, old_file: str) -> str:
    """`old` with its first line indented 4 more spaces: text the file does not hold."""
    bad = "    " + old
    if old_file.count(bad) != 0:
        bad = "\t" + old
    return bad


def _syntax_slip(old_file: str, old: str, new: str) -> str:
    """`new` with one closing bracket or line-ending colon dropped, such that the file no longer
    parses and the slipped text is unique in it (the recovery edit needs that)."""
    for i in range(len(new) - 1, -1, -1):
        if new[i] in ")]}" or (new[i] == ":" and new[i + 1 : i + 2] == "\n"):
            bad = new[:i] + new[i + 1 :]
            after = old_file.replace(old, bad, 1)
            try:
                parse_python(after)
            except SyntaxError:
                if after.count(bad) == 1:
                    return bad
    return new.rstrip("\n") + " (\n"  # an unclosed bracket always breaks the file


def _syntax_error_line(out: str, path: str) -> int | None:
    m = re.search(rf'{re.escape(path.split("/")[-1])}", line (\d+)', out)
    return int(m.group(1)) if m else None


STOP = frozenset(
    "the and but for not now with this that there some which should would please fix bug "
    "wrong results inputs rest behaviour fine other functions without changing expected come "
    "back shows through gives has regression something calling raises implemented implement "
    "existing callers work again its it".split()
)
LOOK = ("Let me look at the repository.", "First, the files.")
FIRST_RUN = ("Running the tests to see where things stand.", "Let me run the tests first.")
FIX = ("Fixing {name}.", "Changing that line of {name}.", "The fix in {name}.")
CHECK = ("Now the tests.", "Running the tests.", "Checking with the tests.")
