"""The copy rate (issue 52): how often the policy's `edit` copies the buggy line exactly from what
it read. A small model is expected to know *that* a line must change before it can reproduce the
line character for character; this separates the two.

    copy_stats(tok, records, tasks) -> {"edits", "edits_copied", "edits_on_bug", "copy_rate"}

Per `edit` call the policy made (parsed from its turns, rl.envs.agent.tools.parse_turn):
- copied: its `old` text is non-empty and occurs verbatim in what the episode showed the policy
  before that call (the observations: every env-written token after the first policy token; the
  prompt is left out, it is the statement, not something the policy read);
- on the bug: `old` holds a buggy line whole, with its indentation (a line of the task's file
  that the reference solution removes or changes: difflib over the file's lines).
copy_rate = edits both copied and on the bug / all edits (None when no edit was made: 0/0 is not
a rate). A record's turns are its maximal runs of mask == 1; its observations the mask == 0 runs
between them (chains: each segment is read on its own).

    search_stats(tok, records, tasks) -> {"searches", "searches_naming", "search_name_rate"}

The copy that comes first: does the episode's first `search` / `code_search` call name a symbol
the statement names (a backticked span of the task's prompt, reduced to its last identifier:
`Dict._hook` -> `_hook`, `parse()` -> `parse`) as a whole identifier in its arguments
(`parse_version` does not name `parse`)? The scripted expert always does (1,412 of 1,412
committed traces); a policy that searches for names from other repositories never finds the code."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence

from data.rename import whole_word
from data.tokenizers import Tokenizer
from rl.envs.agent.tools import parse_turn


def buggy_lines(task) -> set[str]:
    """Lines of the task's files (no newline) that its solution deletes or replaces."""
    out = set()
    for path, new in task.solution.items():
        old = task.files.get(path)
        if old is None or new is None:
            continue
        a, b = old.splitlines(), new.splitlines()
        for op, i1, i2, _, _ in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if op in ("replace", "delete"):
                out.update(x for x in a[i1:i2] if x.strip())
    return out


def mask_runs(mask: Sequence[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of the maximal runs of equal mask values."""
    runs, start = [], 0
    for t in range(1, len(mask) + 1):
        if t == len(mask) or mask[t] != mask[start]:
            runs.append((int(mask[start]), start, t))
            start = t
    return runs


def edit_calls(tok: Tokenizer, record: Mapping) -> list[tuple[str, str]]:
    """(old text, what the policy had read before the call) per well-formed `edit` call."""
    tokens, read, out, seen_policy = list(record["tokens"]), "", [], False
    for value, lo, hi in mask_runs(list(record["mask"])):
        if value == 0:
            if seen_policy:
                read += tok.decode(tokens[lo:hi])
            continue
        seen_policy = True
        for call in parse_turn(tok, tokens[lo:hi]).calls:
            if call.name == "edit" and isinstance(call.arguments.get("old"), str):
                out.append((call.arguments["old"], read))
    return out


def copy_stats(tok: Tokenizer, records: Sequence[Mapping], tasks: Sequence) -> dict:
    """The module docstring's counts over `records` (each with task_id, tokens, mask); a record
    of a task not in `tasks` is an error that names it."""
    by_id = {t.id: t for t in tasks}
    edits = copied = on_bug = both = 0
    for rec in records:
        if rec["task_id"] not in by_id:
            raise ValueError(f"copy_stats: record of unknown task {rec['task_id']!r}")
        bug = buggy_lines(by_id[rec["task_id"]])
        for old, read in edit_calls(tok, rec):
            is_copy = bool(old) and old in read
            hits = any(line in old.splitlines() for line in bug)
            edits, copied, on_bug = edits + 1, copied + is_copy, on_bug + hits
            both += is_copy and hits
    return {
        "edits": edits,
        "edits_copied": copied,
        "edits_on_bug": on_bug,
        "copy_rate": both / edits if edits else None,
    }


SEARCH_TOOLS = ("search", "code_search")  # rl.envs.agent.tools' extra tools: named to parse


def statement_names(prompt: str) -> set[str]:
    """The identifiers a statement names: each backticked span's last identifier."""
    names = set()
    for span in re.findall(r"`([^`]+)`", prompt):
        found = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)
        names.update(found[-1:])
    return names


def first_search(tok: Tokenizer, record: Mapping) -> dict | None:
    """The arguments of the record's first well-formed `search` or `code_search` call."""
    tokens = list(record["tokens"])
    for value, lo, hi in mask_runs(list(record["mask"])):
        if value == 1:
            for call in parse_turn(tok, tokens[lo:hi], SEARCH_TOOLS).calls:
                if call.name in SEARCH_TOOLS:
                    return dict(call.arguments)
    return None


def search_stats(tok: Tokenizer, records: Sequence[Mapping], tasks: Sequence) -> dict:
    """The module docstring's first-search counts over `records` (task_id, tokens, mask) whose
    statement names a symbol."""
    by_id = {t.id: t for t in tasks}
    searches = naming = 0
    for rec in records:
        if rec["task_id"] not in by_id:
            raise ValueError(f"search_stats: record of unknown task {rec['task_id']!r}")
        names, args = statement_names(by_id[rec["task_id"]].prompt), first_search(tok, rec)
        if args is None or not names:  # no search, or nothing named to copy: not counted
            continue
        text = json.dumps(args, ensure_ascii=False)
        searches += 1
        naming += any(re.search(whole_word(re.escape(n)), text) for n in names)
    return {
        "searches": searches,
        "searches_naming": naming,
        "search_name_rate": naming / searches if searches else None,
    }
