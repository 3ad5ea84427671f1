"""Tool protocol: strict parsing of tool calls from emitted token ids, and the tools themselves.

A model turn is token ids ending at <|end|> (or <|eos|>). Tool calls are
    <|tool_call|>{"name": "read_file", "arguments": {"path": "a.py"}}<|/tool_call|>
with the JSON between the two special tokens. Parsing is strict: the body must be one JSON object
with exactly the keys "name" and "arguments", the name a known tool, the arguments exactly the
tool's parameters with the right types. Anything else is a malformed call: it yields a structured
error observation and is counted on the episode (RL uses it as a negative example).

Parsing works on ids, not text, so a file that merely contains the string "<|tool_call|>" (encoded
as bytes) can never be mistaken for a call.

A summary turn (<|summary|>text<|/summary|><|end|>, self-summarization) is not a tool call: the
environment recognizes it before parsing (rl/envs/agent/summary.py) when summaries are on; here its
control tokens are malformed like any other.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from data.chat import trim_tool_output
from data.tokenizers import SPECIAL_TOKENS, Tokenizer, special_text
from rl.envs.agent import search
from rl.envs.grading import grade_review as review

# name -> {argument: (type(s), required)}. bool is excluded from int explicitly below.
TOOL_SCHEMAS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "list_files": {"path": ((str,), False)},
    "read_file": {
        "path": ((str,), True),
        "start_line": ((int,), False),
        "end_line": ((int,), False),
    },
    "write_file": {"path": ((str,), True), "content": ((str,), True)},
    "edit": {"path": ((str,), True), "old": ((str,), True), "new": ((str,), True)},
    "run": {"command": ((str,), True), "timeout_s": ((int, float), False)},
    "run_tests": {"path": ((str,), False)},
    "submit": {},
}

# Tools a task switches on by name (Task.meta["tools"]): the system prompt then gains their help
# lines (extra_help) and the parser accepts them; elsewhere they are unknown tools, so the
# procedural families' prompts and protocol stay as they were.
EXTRA_SCHEMAS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    **search.SCHEMAS,
    **review.SCHEMA,
}
EXTRA_HELP = {**search.HELP, **review.HELP}


def extra_help(names) -> str:
    """Help lines of the extra tools `names`, in EXTRA_SCHEMAS order ("" for none)."""
    unknown = sorted(set(names) - set(EXTRA_SCHEMAS))
    if unknown:
        raise ValueError(f"unknown extra tool(s) {unknown}; known: {', '.join(EXTRA_SCHEMAS)}")
    return "".join("\n" + EXTRA_HELP[n] for n in EXTRA_SCHEMAS if n in names)


TOOLS_HELP = """Tools (call as <|tool_call|>{"name": ..., "arguments": {...}}<|/tool_call|>):
- list_files {path?}: files under a directory
- read_file {path, start_line?, end_line?}: file text (1-based inclusive line range)
- write_file {path, content}: create or overwrite a file
- edit {path, old, new}: replace the one exact occurrence of old with new
- run {command, timeout_s?}: shell command in the repo (no network)
- run_tests {path?}: run the repo's tests
- submit {}: finish; hidden tests then grade the repo"""


@dataclasses.dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    n_tokens: int  # tokens of the call, tags included (tool I/O accounting)


@dataclasses.dataclass(frozen=True)
class Malformed:
    detail: str
    n_tokens: int


@dataclasses.dataclass(frozen=True)
class ParsedTurn:
    items: list  # ToolCall | Malformed, in emission order
    terminated: bool  # ended with <|end|> or <|eos|>

    @property
    def calls(self) -> list[ToolCall]:
        return [i for i in self.items if isinstance(i, ToolCall)]

    @property
    def malformed(self) -> list[Malformed]:
        return [i for i in self.items if isinstance(i, Malformed)]


def parse_turn(tok: Tokenizer, ids: Sequence[int], extra: Sequence[str] = ()) -> ParsedTurn:
    """Splits a turn into tool calls and malformed fragments, strictly. `extra`: the names of
    EXTRA_SCHEMAS tools this episode has (others of them are unknown tools)."""
    ids = [int(i) for i in ids]
    end_ids = {tok.special_id("end"), tok.eos_id}
    terminated = bool(ids) and ids[-1] in end_ids
    body = ids[:-1] if terminated else ids
    open_id, close_id = tok.special_id("tool_call"), tok.special_id("/tool_call")
    specials = _special_ids(tok)
    allowed_free = {tok.special_id("think"), tok.special_id("/think")}
    items: list = []
    i = 0
    while i < len(body):
        t = body[i]
        if t == open_id:
            j = i + 1
            while j < len(body) and body[j] != close_id and body[j] != open_id:
                j += 1
            if j == len(body) or body[j] != close_id:
                items.append(
                    Malformed("tool call opened with <|tool_call|> but never closed", j - i)
                )
                i = j
                continue
            items.append(_parse_call(tok, body[i + 1 : j], specials, j - i + 1, tuple(extra)))
            i = j + 1
        elif t == close_id:
            items.append(Malformed("<|/tool_call|> without a matching <|tool_call|>", 1))
            i += 1
        elif t in specials and t not in allowed_free:
            items.append(
                Malformed(
                    f"unexpected control token {special_text(specials[t])} inside the turn", 1
                )
            )
            i += 1
        else:
            i += 1
    return ParsedTurn(items, terminated)


def _special_ids(tok: Tokenizer) -> dict[int, str]:
    """id -> name of every control token (works for any tokenizer, not just the byte one)."""
    return {tok.special_id(name): name for name in SPECIAL_TOKENS}


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    duplicated = sorted({k for k in keys if keys.count(k) > 1})
    if duplicated:
        raise ValueError(f"duplicate key(s) {duplicated}")
    return dict(pairs)


def _parse_call(
    tok: Tokenizer, body_ids: list[int], specials: dict[int, str], n_tokens: int, extra=()
) -> ToolCall | Malformed:
    if any(t in specials for t in body_ids):
        return Malformed("control token inside tool call JSON", n_tokens)
    text = tok.decode(body_ids)
    try:
        obj = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as e:
        return Malformed(f"tool call is not valid JSON: {e}", n_tokens)
    if not isinstance(obj, dict) or set(obj) != {"name", "arguments"}:
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        return Malformed(
            f'tool call must be an object with exactly "name" and "arguments", got {keys}', n_tokens
        )
    name, args = obj["name"], obj["arguments"]
    if not isinstance(name, str) or not (name in TOOL_SCHEMAS or name in extra):
        known = [*TOOL_SCHEMAS, *(n for n in EXTRA_SCHEMAS if n in extra)]
        return Malformed(f"unknown tool {name!r}; tools: {', '.join(known)}", n_tokens)
    if not isinstance(args, dict):
        return Malformed(
            f"{name}: arguments must be an object, got {type(args).__name__}", n_tokens
        )
    problem = _check_arguments(name, args)
    if problem:
        return Malformed(f"{name}: {problem}", n_tokens)
    return ToolCall(name, args, n_tokens)


def _check_arguments(name: str, args: dict[str, Any]) -> str | None:
    schema = TOOL_SCHEMAS[name] if name in TOOL_SCHEMAS else EXTRA_SCHEMAS[name]
    unknown = sorted(set(args) - set(schema))
    if unknown:
        return f"unknown argument(s) {unknown}; expected {sorted(schema)}"
    for arg, (types, required) in schema.items():
        if arg not in args:
            if required:
                return f"missing required argument {arg!r}"
            continue
        value = args[arg]
        if isinstance(value, bool) or not isinstance(value, types):
            return (
                f"argument {arg!r} must be {'/'.join(t.__name__ for t in types)}, "
                f"got {type(value).__name__}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            return f"argument {arg!r} must be finite"
    return None


def malformed_observation(detail: str) -> str:
    return json.dumps({"error": "malformed_tool_call", "detail": detail})


def truncate_to_budget(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of a tool result as it enters the context: data/chat.py's trim_tool_output (the
    one trim SFT rows, the server's prompts and the agent command share), then encoded."""
    return tok.encode(trim_tool_output(tok, text, budget))


# ---------------------------------------------------------------- executing calls


@dataclasses.dataclass(frozen=True)
class ToolOutput:
    text: str
    ok: bool
    submitted: bool = False


def execute(
    sandbox, call: ToolCall, *, test_command: str, command_timeout_s: float, test_timeout_s: float
) -> ToolOutput:
    """Runs one well-formed call against a Sandbox. Tool-level failures (missing file, edit text not
    found) are ordinary observations with ok=False, not malformed calls."""
    a = call.arguments
    try:
        if call.name == "list_files":
            files = sandbox.list_files(a.get("path", "."))
            return ToolOutput("\n".join(files) if files else "(no files)", True)
        if call.name == "read_file":
            return _read_file(sandbox, a["path"], a.get("start_line"), a.get("end_line"))
        if call.name == "write_file":
            sandbox.write_text(a["path"], a["content"])
            return ToolOutput(f"wrote {a['path']} ({len(a['content'].splitlines())} lines)", True)
        if call.name == "edit":
            return _edit(sandbox, a["path"], a["old"], a["new"])
        if call.name == "run":
            timeout = min(max(float(a.get("timeout_s", command_timeout_s)), 0.1), command_timeout_s)
            return _command_output(sandbox.run(a["command"], timeout))
        if call.name == "run_tests":
            command = test_command + (f" {_shell_quote(a['path'])}" if "path" in a else "")
            return _command_output(sandbox.run(command, test_timeout_s))
        if call.name == "submit":
            return ToolOutput("submitted", True, submitted=True)
        if call.name == "report":  # recorded by the environment, on the host (CodingEnv)
            return ToolOutput("error: report is recorded by the environment", False)
        if call.name in search.SCHEMAS:  # run in the sandbox: the pattern is the policy's
            r = sandbox.run(
                search.command(), command_timeout_s, stdin=search.arguments(call.name, a)
            )
            return ToolOutput(r.output if r.ok else f"[{r.status}] {r.output}", r.ok)
    except OSError as e:
        return ToolOutput(f"error: {_os_error_text(e, a)}", False)
    except (ValueError, UnicodeError) as e:
        return ToolOutput(f"error: {e}", False)
    raise AssertionError(f"unhandled tool {call.name}")


def _os_error_text(e: OSError, arguments: dict) -> str:
    """The path as the policy wrote it and the reason, e.g. "a/b.py: No such file or directory".
    str(e) would name the sandbox's host path, which differs per episode (an observation must be a
    function of the repo and the calls) and says where on the host the sandbox lives."""
    if e.strerror and isinstance(arguments.get("path"), str):
        return f"{arguments['path']}: {e.strerror}"
    return e.strerror or type(e).__name__


def _read_file(sandbox, path: str, start: int | None, end: int | None) -> ToolOutput:
    lines = sandbox.read_text(path).splitlines(keepends=True)
    start = 1 if start is None else start
    end = len(lines) if end is None else end
    if start < 1 or end < start - 1:
        return ToolOutput(f"error: bad line range {start}..{end} ({len(lines)} lines)", False)
    return ToolOutput("".join(lines[start - 1 : end]), True)


def _edit(sandbox, path: str, old: str, new: str) -> ToolOutput:
    text = sandbox.read_text(path)
    count = text.count(old) if old else 0
    if count != 1:
        why = (
            "old text is empty"
            if not old
            else f"old text found {count} times (must be exactly once)"
        )
        return ToolOutput(f"error: edit {path}: {why}", False)
    sandbox.write_text(path, text.replace(old, new, 1))
    return ToolOutput(f"edited {path}", True)


# Wall-clock durations that pytest (and unittest) print: the summary's "in 0.01s" (with " (0:01:05)"
# past a minute), "--durations" rows "0.12s call ...", and "(0.03s)". They differ between two runs
# of the same command, so an observation would too: they become DURATION, keeping the episode (and
# an eval report) a function of the checkpoint and the seed. pytest's "slowest durations" section
# also varies in which rows it shows, their order and its "(N durations < 0.005s hidden ...)" count,
# so its body becomes one fixed line.
DURATION = "X.XXs"
DURATIONS_SECTION_BODY = "(durations omitted: they differ between runs)\n"
_DURATIONS = (
    (
        re.compile(r"(?ms)^(=+ slowest (?:\d+ )?durations =+\n).*?(?=^=+ |\Z)"),
        rf"\g<1>{DURATIONS_SECTION_BODY}",
    ),
    (re.compile(r"\bin \d+\.\d+s(?: \(\d+:\d\d:\d\d\))?"), f"in {DURATION}"),
    (re.compile(r"(?m)^(\s*)\d+\.\d+s(?= +(?:call|setup|teardown)\b)"), rf"\g<1>{DURATION}"),
    (re.compile(r"\(\d+\.\d+s\)"), f"({DURATION})"),
)


def mask_durations(text: str) -> str:
    """`text` with test-runner durations replaced by DURATION (see _DURATIONS)."""
    for pattern, repl in _DURATIONS:
        text = pattern.sub(repl, text)
    return text


def _command_output(result) -> ToolOutput:
    head = f"[{result.status}] exit_code={result.exit_code}\n"
    return ToolOutput(head + mask_durations(result.output), result.ok)


def _shell_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
