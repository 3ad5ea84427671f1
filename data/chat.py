"""Chat template shared by SFT (data/) and RL environments (rl/envs).

One message renders as   <|role|> content <|end|>
An assistant message may carry tool calls, rendered inside its content as
    <|tool_call|>{"name": "read_file", "arguments": {"path": "a.py"}}<|/tool_call|>
A tool result is a message with role "tool":   <|tool|><|tool_result|>...<|/tool_result|><|end|>
A summary turn (self-summarization, rl/envs/agent/summary.py) is an assistant message with a
"summary"
key and nothing else:   <|assistant|><|summary|>text<|/summary|><|end|>
The conversation starts with <|bos|>. Generation for the assistant starts after "<|assistant|>".

`render_messages` returns the token ids and a 0/1 mask that is 1 exactly on tokens the assistant
produced (its content, tool calls and its closing <|end|>), so SFT trains on what the policy
would emit and RL's "model-generated" mask means the same thing. An assistant message with
`"weight": 0` (the key axolotl uses) stays in the context but is not trained on: a trace can show a
mistake and its recovery while SFT teaches only the recovery.

Long tool outputs: `trim_tool_output` is the one function that cuts a tool result to a token
budget (its head and tail, joined by a note of how many characters were cut). Everything that puts
a tool result into a context goes through it: the environment's observations (RL, eval, traces,
the agent command: rl/envs/agent/tools.py), `render_messages(..., tool_budget=B)` (SFT rows:
DataConfig.tool_output_budget; the server's prompts: serve.tool_output_budget). A result that fits
is left as it is, so trimming twice with one budget changes nothing.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from typing import Any

from data.tokenizers import Tokenizer, special_text

ROLES = ("system", "user", "assistant", "tool")


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """The exact text of one tool call (what the model must emit)."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{special_text('tool_call')}{body}{special_text('/tool_call')}"


def summary_ids(tok: Tokenizer, text: str) -> list[int]:
    """<|summary|> text <|/summary|>: the body of a summary turn (before its <|end|>)."""
    return [tok.special_id("summary")] + tok.encode(text) + [tok.special_id("/summary")]


def cut_note(n_chars: int) -> str:
    """What stands in for the `n_chars` characters a trim removed."""
    return f"\n[... {n_chars} characters cut ...]\n"


def trim_tool_output(tok: Tokenizer, text: str, budget: int, max_chars_per_token: int = 32) -> str:
    """`text` if it encodes to at most `budget` tokens, else head + cut_note(n) + tail, the longest
    head and tail (about half the room each) whose whole encodes within `budget`; n is exactly
    len(text) - len(head) - len(tail). Cuts fall between characters, never inside one.

    Undecodable bytes (surrogate escapes from file names or outputs) become U+FFFD first, and the
    character counts are of that text. Cost is O(budget), not O(len(text)): a text longer than
    `max_chars_per_token * budget` characters cannot fit (no token spans more than that many
    characters), so it is never tokenized whole (a 60 MB file)."""
    if budget < 1:
        raise ValueError(f"tool output budget={budget}: must be >= 1 token")
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    limit = max_chars_per_token * budget
    if len(text) <= limit and len(tok.encode(text)) <= budget:
        return text
    room = max(budget - len(tok.encode(cut_note(len(text)))), 0)  # the widest note
    h = _longest(lambda k: len(tok.encode(text[:k])), min(len(text), limit), room // 2)
    t = _longest(
        lambda k: len(tok.encode(text[len(text) - k :])),
        min(len(text) - h, limit),
        room - room // 2,
    )
    while True:  # a subword tokenizer may merge across the joins: shrink until the whole fits
        out = text[:h] + cut_note(len(text) - h - t) + text[len(text) - t :]
        if len(tok.encode(out)) <= budget or h + t == 0:
            return out
        h, t = h * 7 // 8, t * 7 // 8


def _longest(n_tokens, most: int, budget: int) -> int:
    """The largest k in [0, most] with n_tokens(k) <= budget (n_tokens grows with k)."""
    return bisect.bisect_right(range(most + 1), budget, key=n_tokens) - 1


def _content_ids(tok: Tokenizer, message: dict[str, Any], tool_budget: int = 0) -> list[int]:
    role = message["role"]
    content = message.get("content") or ""
    if role == "tool":
        if tool_budget:
            content = trim_tool_output(tok, content, tool_budget)
        return (
            [tok.special_id("tool_result")] + tok.encode(content) + [tok.special_id("/tool_result")]
        )
    if "summary" in message:
        if role != "assistant" or content or message.get("tool_calls"):
            raise ValueError("a summary is an assistant message with no content or tool calls")
        return summary_ids(tok, message["summary"])
    ids = tok.encode(content)  # raw text never yields control tokens
    for call in message.get("tool_calls") or ():
        ids += tok.encode(
            tool_call_text(call["name"], call.get("arguments", {})), allow_special=True
        )
    return ids


def render_messages(
    tok: Tokenizer,
    messages: Sequence[dict[str, Any]],
    *,
    where: str = "messages",
    tool_budget: int = 0,
) -> tuple[list[int], list[int]]:
    """Renders a conversation to (ids, assistant_mask). `where` names the source in errors;
    `tool_budget` > 0 trims each tool result to that many tokens (trim_tool_output; 0 = as is)."""
    ids, mask = [tok.bos_id], [0]
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            raise ValueError(
                f"{where}: message {i} has unknown role {role!r} (expected one of {ROLES})"
            )
        header = [tok.special_id(role)]
        body = _content_ids(tok, message, tool_budget) + [tok.special_id("end")]
        weight = _weight(message, i, where)  # checked on every role: a weight elsewhere is an error
        trained = weight if role == "assistant" else 0
        ids += header + body
        mask += [0] * len(header) + [trained] * len(body)
    return ids, mask


def _weight(message: dict[str, Any], i: int, where: str) -> int:
    """An assistant message's loss weight: 1 unless the message says "weight": 0."""
    if "weight" not in message:
        return 1
    if message["role"] != "assistant" or message["weight"] not in (0, 1):
        raise ValueError(
            f"{where}: message {i} ({message['role']}) has weight {message['weight']!r}: "
            "only assistant messages take a weight, and it is 0 or 1"
        )
    return int(message["weight"])


def generation_prompt(
    tok: Tokenizer, messages: Sequence[dict[str, Any]], tool_budget: int = 0
) -> list[int]:
    """Ids of the conversation so far followed by the assistant header, ready for sampling."""
    ids, _ = render_messages(tok, messages, tool_budget=tool_budget)
    return ids + [tok.special_id("assistant")]
