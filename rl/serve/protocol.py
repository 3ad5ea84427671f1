"""OpenAI request bodies -> prompt token ids (data/chat.py's template, rl/envs/agent/tools.py's call
syntax), and emitted ids -> OpenAI message content + tool_calls. Pure functions; every bad input
raises ApiError with the OpenAI error shape and a 4xx status (never a deep crash).

Tools. A request's `tools` ([{"type": "function", "function": {name, description?,
parameters?}}]) are described to the model in a system message (merged into the first system
message if there is one), one line per tool, with the project's call syntax
    <|tool_call|>{"name": ..., "arguments": {...}}<|/tool_call|>
An assistant message's `tool_calls` ({"id", "type": "function", "function": {"name",
"arguments": JSON text}}) render through the chat template's tool calls; a `tool` message renders
as a tool result. In a completion, a <|tool_call|> span whose JSON is an object with exactly
"name" (one of the request's tools) and "arguments" (an object) becomes an OpenAI tool call; any
other span stays in the content as text (a malformed call is shown, not dropped).

Sampling. Each request samples with its own `temperature` (0 = greedy; default: the server's),
`top_p`, `top_k` (a vLLM-style extra; <= 0 = off), `seed` (the same seed and request give the same
tokens, whatever else is being decoded) and `max_tokens`; the engine decodes them in one batch,
each slot with its own settings. `stop` (a string or up to 4) ends the completion where a
stop string first appears in its text; the returned text stops before it, the logged tokens
end with the token that completed it (what was sampled), finish_reason 'stop'.

Choices. `n` (1 to the server's slots: each choice decodes in a slot of its own, so n choices of
a prompt that fits one slot always fit the engine) asks for n independent completions; with a
`seed`, choice 0 uses it and choice i > 0 the seed `choice_seed(seed, i)` derives, so every choice
is reproducible and no two share a stream.

Log-probs. Chat: `logprobs: true` (+ `top_logprobs`: 0..20) -> choice.logprobs.content = [{token,
logprob, bytes, top_logprobs: [{token, logprob, bytes}] (k, largest first)}]; completions:
`logprobs: k` (0..20) -> choice.logprobs = {tokens, token_logprobs, top_logprobs: [{token:
logprob} of the top k and the sampled token], text_offset}. One entry per emitted token but a
final <|end|>/<|eos|> (no text in the response; a stop string's completing token is kept, as in
the log). The log-probs are the model's own distribution (log_softmax of the logits over the
tokenizer's ids, before temperature and top-k/top-p), vLLM's default (`logprobs_mode=
'raw_logprobs'`: "Use the original logits (before any penalties or temperature scaling) for the
top-k logprobs", vllm/v1/sample/sampler.py), not the sampler's filtered ones the log keeps for
RL. A token that is not whole UTF-8 (a byte of a multi-byte character) is named 'bytes:\\xNN'
(vLLM's convention); `bytes` are exact for the byte tokenizer, the token text's UTF-8 otherwise.
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import json
import re
from typing import Any

from data.chat import generation_prompt
from data.tokenizers import ByteTokenizer
from model.engine import Sampling

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, param=None, code=None, kind=None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.kind = kind or ("not_found_error" if status == 404 else "invalid_request_error")
        self.headers: dict[str, str] = {}  # e.g. a 429's Retry-After

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclasses.dataclass
class Request:
    """A validated generation request."""

    prompt: list[int]
    max_new: int
    stream: bool
    tools: list[str]  # names the model may call ([] = no tool parsing)
    messages: list[dict] | None  # chat: the rendered conversation (for the log); None: completion
    sampling: Sampling = Sampling()
    stop: list[str] = dataclasses.field(default_factory=list)  # stop strings
    n: int = 1  # choices
    logprobs: int | None = None  # top alternatives per token to report (None: no log-probs)
    key_id: str | None = None  # the API key's id that sent it (rl/serve/auth.py), for the log


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def check_common(body: Any, *, model: str) -> None:
    """Fields every generation endpoint shares that are not sampling settings."""
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    if body.get("model") != model:
        raise ApiError(
            404,
            f"model {body.get('model')!r} does not exist; this server serves {model!r}",
            param="model",
            code="model_not_found",
        )


@dataclasses.dataclass(frozen=True)
class Limits:
    """A request's bounds (configs/serve.py): counts past them get a 400 naming the field."""

    max_messages: int = 128
    max_tools: int = 32
    max_stop: int = 4
    max_tokens: int = 1024


def check_limits(body: dict, limits: Limits) -> None:
    """The sizes a client chooses, bounded before anything is parsed or tokenized."""
    for name, most in (("messages", limits.max_messages), ("tools", limits.max_tools)):
        x = body.get(name)
        if isinstance(x, list) and len(x) > most:
            raise _bad(f"{name}: {len(x)} given, this server takes at most {most}", name)
    stop = body.get("stop")
    if isinstance(stop, list) and len(stop) > limits.max_stop:
        raise _bad(f"stop: {len(stop)} strings given, at most {limits.max_stop}", "stop")
    n = body.get("max_completion_tokens", body.get("max_tokens"))
    if isinstance(n, int) and not isinstance(n, bool) and n > limits.max_tokens:
        raise _bad(f"max_tokens={n}: this server allows at most {limits.max_tokens}", "max_tokens")


def choices(body: dict, max_n: int) -> int:
    n = body.get("n")
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= max_n:
        raise _bad(f"n={n!r}: must be an integer in [1, {max_n}] (one slot per choice)", "n")
    return n


def choice_seed(seed: int | None, i: int) -> int | None:
    """Choice i's seed: the request's for choice 0, else one derived from (seed, i) by a hash
    (not seed + i, which would give choice 1 of seed s the stream of choice 0 of seed s + 1)."""
    if seed is None or i == 0:
        return seed
    digest = hashlib.sha256(f"{seed}/{i}".encode()).digest()
    return int.from_bytes(digest[:4], "little") % 2**31


MAX_TOP_LOGPROBS = 20  # OpenAI's bound for top_logprobs and for legacy logprobs


def _top(x: Any, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_TOP_LOGPROBS:
        raise _bad(f"{name}={x!r}: must be an integer in [0, {MAX_TOP_LOGPROBS}]", name)
    return x


def chat_logprobs(body: dict) -> int | None:
    """Chat `logprobs` (bool) and `top_logprobs` -> alternatives per token (None: off)."""
    on, top = body.get("logprobs"), body.get("top_logprobs")
    if on is not None and not isinstance(on, bool):
        raise _bad(f"logprobs={on!r}: must be true or false", "logprobs")
    if top is not None and not on:
        raise _bad("top_logprobs needs logprobs: true", "top_logprobs")
    return (_top(top, "top_logprobs") if top is not None else 0) if on else None


def completion_logprobs(body: dict) -> int | None:
    """Legacy completions `logprobs` (an integer k, or null) -> k (None: off)."""
    k = body.get("logprobs")
    return None if k is None else _top(k, "logprobs")


def _number(body: dict, name: str, default, lo: float, hi: float, lo_open: bool = False):
    x = body.get(name)
    if x is None:
        return default
    ok = isinstance(x, (int, float)) and not isinstance(x, bool)
    if not ok or not (lo < x if lo_open else lo <= x) or not x <= hi:
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise _bad(f"{name}={x!r}: must be a number in {bound}", name)
    return x


def sampling(body: dict, *, temperature: float) -> Sampling:
    """The request's sampling settings; temperature: the server's default."""
    t = _number(body, "temperature", temperature, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True)
    top_k = body.get("top_k", 0)
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise _bad(f"top_k={top_k!r}: must be an integer (<= 0: off)", "top_k")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad(f"seed={seed!r}: must be an integer in [0, 2**31)", "seed")
    if seed is not None and not 0 <= seed < 2**31:
        raise _bad(f"seed={seed!r}: must be an integer in [0, 2**31)", "seed")
    return Sampling(float(t), max(top_k, 0), float(top_p), seed)


def stop_strings(body: dict) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if (
        not isinstance(stops, list)
        or not 1 <= len(stops) <= 4
        or not all(isinstance(x, str) and x for x in stops)
    ):
        raise _bad(f"stop={stop!r}: a non-empty string or a list of 1 to 4 of them", "stop")
    return stops


def max_new_tokens(body: dict, default: int) -> int:
    n = body.get("max_completion_tokens", body.get("max_tokens"))
    if n is None:
        return default
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise _bad(f"max_tokens={n!r}: must be a positive integer", "max_tokens")
    return n


def _text(content: Any, where: str) -> str:
    """A message's content: a string, null, or a list of {"type": "text", "text": ...} parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _bad(f"{where}: only text content parts are supported", "messages")
            if not isinstance(part.get("text"), str):
                raise _bad(f"{where}: a text part needs a string 'text'", "messages")
            parts.append(part["text"])
        return "".join(parts)
    raise _bad(f"{where}: content must be a string or a list of text parts", "messages")


def _tool_calls(calls: Any, where: str) -> list[dict]:
    """OpenAI assistant tool_calls -> the chat template's [{"name", "arguments": dict}]."""
    if not isinstance(calls, list):
        raise _bad(f"{where}: tool_calls must be a list", "messages")
    out = []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _bad(f"{where}: tool_calls[{j}] needs function.name", "messages")
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (TypeError, ValueError):
            raise _bad(
                f"{where}: tool_calls[{j}].function.arguments is not JSON", "messages"
            ) from None
        if not isinstance(args, dict):
            raise _bad(f"{where}: tool_calls[{j}] arguments must be a JSON object", "messages")
        out.append({"name": fn["name"], "arguments": args})
    return out


def parse_tools(tools: Any, tool_choice: Any) -> list[dict]:
    """-> [{"name", "description", "parameters"}] the model is told about ([] with none)."""
    if tool_choice not in (None, "auto", "none"):
        raise _bad(
            f"tool_choice={tool_choice!r}: only 'auto' and 'none' are supported", "tool_choice"
        )
    if tools is None or tool_choice == "none":
        return []
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise _bad(f'tools[{i}]: expected {{"type": "function", "function": {{...}}}}', "tools")
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise _bad(
                f"tools[{i}]: function.name {name!r} must match {TOOL_NAME.pattern}", "tools"
            )
        params = fn.get("parameters", {})
        if not isinstance(params, dict):
            raise _bad(f"tools[{i}] ({name}): parameters must be a JSON Schema object", "tools")
        out.append(
            {"name": name, "description": str(fn.get("description", "")), "parameters": params}
        )
    return out


def tools_text(tools: list[dict]) -> str:
    lines = ['Tools (call as <|tool_call|>{"name": ..., "arguments": {...}}<|/tool_call|>):']
    for t in tools:
        props = sorted((t["parameters"].get("properties") or {}).keys())
        lines.append(f"- {t['name']} {{{', '.join(props)}}}: {t['description']}".rstrip(": "))
    return "\n".join(lines)


def chat_messages(messages: Any, tools: list[dict]) -> list[dict]:
    """OpenAI messages (+ the tools' description) -> the chat template's messages."""
    if not isinstance(messages, list) or not messages:
        raise _bad("messages must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role == "developer":  # OpenAI's newer name for system
            role = "system"
        if role not in ("system", "user", "assistant", "tool"):
            raise _bad(f"{where}: unknown role {role!r}", "messages")
        msg = {"role": role, "content": _text(m.get("content"), where)}
        if role == "assistant" and m.get("tool_calls"):
            msg["tool_calls"] = _tool_calls(m["tool_calls"], where)
        out.append(msg)
    if tools:
        text = tools_text(tools)
        if out[0]["role"] == "system":
            out[0] = dict(out[0], content=(out[0]["content"] + "\n\n" + text).strip())
        else:
            out.insert(0, {"role": "system", "content": text})
    return out


def chat_request(
    tok,
    body: dict,
    *,
    max_new_default: int,
    temperature: float,
    max_n: int = 1,
    tool_budget: int = 0,
) -> Request:
    """tool_budget > 0: each tool message trimmed to that many tokens, as the environment trims
    its observations (data/chat.py trim_tool_output)."""
    tools = parse_tools(body.get("tools"), body.get("tool_choice"))
    messages = chat_messages(body.get("messages"), tools)
    prompt = generation_prompt(tok, messages, tool_budget)
    names = [t["name"] for t in tools]
    return Request(
        prompt,
        max_new_tokens(body, max_new_default),
        bool(body.get("stream")),
        names,
        messages,
        sampling(body, temperature=temperature),
        stop_strings(body),
        choices(body, max_n),
        chat_logprobs(body),
    )


def completion_request(
    tok, body: dict, *, max_new_default: int, temperature: float, max_n: int = 1
) -> Request:
    """/v1/completions: `prompt` is a string (encoded after <|bos|>, as training documents start)
    or a list of token ids."""
    p = body.get("prompt")
    if isinstance(p, str) and p:
        prompt = [tok.bos_id] + tok.encode(p)
    elif (
        isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p)
    ):
        prompt = list(p)
    else:
        raise _bad("prompt must be a non-empty string or a non-empty list of token ids", "prompt")
    return Request(
        prompt,
        max_new_tokens(body, max_new_default),
        bool(body.get("stream")),
        [],
        None,
        sampling(body, temperature=temperature),
        stop_strings(body),
        choices(body, max_n),
        completion_logprobs(body),
    )


def check_fits(req: Request, *, cache_len: int, vocab: int) -> None:
    bad = [t for t in req.prompt if not 0 <= t < vocab]
    if bad:
        raise _bad(f"prompt token id {bad[0]} is outside [0, {vocab})", "prompt")
    if len(req.prompt) + 1 > cache_len:
        raise ApiError(
            400,
            f"prompt of {len(req.prompt)} tokens leaves no room in the context of {cache_len} "
            "tokens",
            param="messages" if req.messages is not None else "prompt",
            code="context_length_exceeded",
        )


# -- output


def split_calls(tok, ids: list[int], tools: list[str]) -> tuple[list[int], list[dict]]:
    """Emitted ids (without the final <|end|>/<|eos|>) -> (content ids, OpenAI tool calls)."""
    if not tools:
        return ids, []
    open_id, close_id = tok.special_id("tool_call"), tok.special_id("/tool_call")
    content, calls, i = [], [], 0
    while i < len(ids):
        if ids[i] != open_id or close_id not in ids[i + 1 :]:
            content.append(ids[i])
            i += 1
            continue
        j = ids.index(close_id, i + 1)
        call = _call(tok.decode(ids[i + 1 : j]), tools, len(calls))
        if call is None:
            content += ids[i : j + 1]
        else:
            calls.append(call)
        i = j + 1
    return content, calls


def _call(text: str, tools: list[str], index: int) -> dict | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or set(obj) != {"name", "arguments"}:
        return None
    if obj["name"] not in tools or not isinstance(obj["arguments"], dict):
        return None
    return {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": obj["name"], "arguments": json.dumps(obj["arguments"])},
    }


def stop_cut(tok, ids: list[int], stops: list[str]) -> int | None:
    """-> n: the first n emitted ids are the shortest prefix whose text holds a stop string (None:
    no stop string in them)."""
    if not any(x in tok.decode(ids) for x in stops):
        return None
    return next(n for n in range(1, len(ids) + 1) if any(x in tok.decode(ids[:n]) for x in stops))


def before_stop(text: str, stops: list[str]) -> str:
    """text up to the first stop string in it (all of it without one)."""
    at = [text.find(x) for x in stops if x in text]
    return text[: min(at)] if at else text


def strip_stop(tok, ids: list[int]) -> list[int]:
    stops = (tok.special_id("end"), tok.eos_id)
    return ids[:-1] if ids and ids[-1] in stops else ids


def finish_reason(engine_reason: str, calls: list[dict]) -> str:
    return "tool_calls" if calls else engine_reason


def token_text(tok, t: int) -> tuple[str, list[int]]:
    """-> (the token's OpenAI name, its UTF-8 bytes); see the module docstring, "Log-probs"."""
    if isinstance(tok, ByteTokenizer) and t < 256:
        raw = [t]
        try:
            return bytes(raw).decode("utf-8"), raw
        except UnicodeDecodeError:
            return f"bytes:\\x{t:02x}", raw
    text = tok.decode([t])
    return text, list(text.encode("utf-8"))


class TokenLogprobs:
    """One choice's log-probs in the endpoint's OpenAI shape, token by token: `push(ids, raw)`
    (the engine's raw log-probs of those ids) -> the logprobs object of those tokens (None: none
    to report). Pushing a completion in pieces gives the pieces of what pushing it whole gives
    (text offsets run on across pushes), so streamed chunks reassemble to the whole response."""

    def __init__(self, tok, k: int, chat: bool):
        self.tok, self.k, self.chat = tok, k, chat
        self.skip = {tok.special_id("end"), tok.eos_id}  # a final stop token: no text
        self.chars = codecs.getincrementaldecoder("utf-8")("replace")
        self.offset = 0  # characters of whole text before the next token

    def push(self, ids: list[int], raw: tuple) -> dict | None:
        lps, top_ids, top_lps = raw
        rows = [(t, float(lp), ti[: self.k], tl[: self.k])
                for t, lp, ti, tl in zip(ids, lps, top_ids, top_lps)
                if t not in self.skip]  # fmt: skip
        if not rows:
            return None
        return self._chat(rows) if self.chat else self._legacy(rows)

    def _named(self, t: int, lp: float) -> dict:
        name, raw = token_text(self.tok, int(t))
        return {"token": name, "logprob": float(lp), "bytes": raw}

    def _chat(self, rows) -> dict:
        content = [
            dict(self._named(t, lp), top_logprobs=[self._named(a, b) for a, b in zip(ti, tl)])
            for t, lp, ti, tl in rows
        ]
        return {"content": content}

    def _legacy(self, rows) -> dict:
        out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for t, lp, ti, tl in rows:
            name, raw = token_text(self.tok, int(t))
            top = {token_text(self.tok, int(a))[0]: float(b) for a, b in zip(ti, tl)}
            top.setdefault(name, lp)  # "the logprob of the sampled token" is always there
            out["tokens"].append(name)
            out["token_logprobs"].append(lp)
            out["top_logprobs"].append(top)
            out["text_offset"].append(self.offset)
            self.offset += len(self.chars.decode(bytes(raw)))
        return out


# -- feedback

SIGNALS = ("accepted", "rejected", "edited", "dissatisfied", "rating")


def feedback_request(body: Any) -> dict:
    """POST /v1/feedback body -> the log's feedback record fields.
    {"response_id", "choice" (which of its n choices; default 0), "signal": one of SIGNALS,
    "final_text" (edited: the text the user kept), "rating" (rating: a number in [1, 5])}."""
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    rid, signal = body.get("response_id"), body.get("signal")
    if not isinstance(rid, str) or not rid:
        raise _bad("response_id must be a non-empty string", "response_id")
    if signal not in SIGNALS:
        raise _bad(f"signal={signal!r}: expected one of {', '.join(SIGNALS)}", "signal")
    choice = body.get("choice", 0)
    if isinstance(choice, bool) or not isinstance(choice, int) or choice < 0:
        raise _bad(f"choice={choice!r}: must be a choice index (an integer >= 0)", "choice")
    out = {"response_id": rid, "choice": choice, "signal": signal}
    if signal == "edited":
        if not isinstance(body.get("final_text"), str):
            raise _bad("signal 'edited' needs final_text (the text the user kept)", "final_text")
        out["final_text"] = body["final_text"]
    if signal == "rating":
        r = body.get("rating")
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 1 <= r <= 5:
            raise _bad(f"rating={r!r}: a number in [1, 5]", "rating")
        out["rating"] = float(r)
    return out
