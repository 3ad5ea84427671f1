"""A model behind any OpenAI-compatible chat endpoint as a policy: this project's own server
(rl/serve), or any other. It plays the setup agent (or any episode) through the same tools.

    policy = ChatPolicy(tok, openai.OpenAI(base_url=URL, api_key=KEY), model="composer")
    run_episode(SetupEnv(tok), setup_task(name, files), policy)
    python -m rl.envs.repos add PATH --setup-model http://127.0.0.1:8000/v1 --setup-model-name M

Each turn the episode's context (token ids) is read back into chat messages: the system prompt
(its tool list left out: the tools go as OpenAI function schemas built from the tool protocol's
own, rl/envs/agent/tools.py TOOL_SCHEMAS), the task, and every earlier turn as an assistant message
with `tool_calls` followed by one `tool` message per call. The endpoint's tool calls come back as
the protocol's call text (<|tool_call|>{"name", "arguments"}<|/tool_call|>) and its text as plain
bytes, so the environment's strict parser judges a model's turn exactly as a sampled one: a call
with wrong arguments is malformed, a turn with no call ends the episode, and the environment's
limits (turns, context tokens, command timeouts) hold as for any policy. The policy adds its own:
`max_tokens` per turn, `timeout_s` per request, no retries. A model whose context is full
(`context_length_exceeded`, as this project's server and OpenAI say it) ends its episode with an
empty turn, the reason kept in `stopped`; an endpoint that fails otherwise (unreachable, refused,
another error status) raises SetupModelError with the endpoint's one-line reason.

Its proposal is untrusted like any policy's: the gate (rl/envs/repos/spec.py admit) decides.
"""

from __future__ import annotations

import json
import re

from data.chat import tool_call_text
from data.tokenizers import Tokenizer, special_text
from rl.envs.agent import tools as T

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


class SetupModelError(RuntimeError):
    """The model's endpoint failed (one line: which endpoint, what it said)."""


def tool_descriptions() -> dict[str, str]:
    """name -> the help line's description (TOOLS_HELP and the extra tools' help)."""
    out = {}
    for line in [*T.TOOLS_HELP.splitlines(), *T.EXTRA_HELP.values()]:
        m = re.match(r"- (\w+) \{[^}]*\}: (.*)", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def openai_tools(extra=()) -> list[dict]:
    """The protocol's tools (and the named extra ones) as OpenAI function schemas."""
    described = tool_descriptions()
    schemas = {**T.TOOL_SCHEMAS, **{n: T.EXTRA_SCHEMAS[n] for n in extra}}
    out = []
    for name, params in schemas.items():
        props, required = {}, []
        for arg, (types, needed) in params.items():
            kinds = sorted({_JSON_TYPES[t] for t in types})
            props[arg] = {"type": "number" if "number" in kinds else kinds[0]}
            if needed:
                required.append(arg)
        schema = {"type": "object", "properties": props, "required": required}
        fn = {"name": name, "description": described.get(name, name), "parameters": schema}
        out.append({"type": "function", "function": fn})
    return out


def context_messages(tok: Tokenizer, ids: list[int], tool_help: str = T.TOOLS_HELP) -> list[dict]:
    """The episode's context (rendered by data/chat.py) as OpenAI chat messages. Tool calls get
    ids call_0, call_1, ... in order; each tool result answers the next unanswered call (the
    environment returns one result per call, in order); `tool_help` is cut from the system text."""
    special = {tok.special_id(r): r for r in ("system", "user", "assistant", "tool")}
    end = tok.special_id("end")
    messages, role, body = [], None, []
    for t in ids:
        if role is None and t in special:
            role, body = special[t], []
        elif role is not None and t == end:
            messages.append((role, body))
            role = None
        elif role is not None:
            body.append(t)
    out, pending, n = [], [], 0
    for role, body in messages:
        if role == "assistant":
            text, calls = _split_calls(tok, body)
            msg = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = []
                for name, args in calls:
                    call_id = f"call_{n}"
                    n += 1
                    pending.append(call_id)
                    fn = {"name": name, "arguments": args}
                    msg["tool_calls"].append({"id": call_id, "type": "function", "function": fn})
            out.append(msg)
        elif role == "tool":
            text = _strip(tok, body, "tool_result")
            if pending:
                out.append({"role": "tool", "tool_call_id": pending.pop(0), "content": text})
            else:  # a result with no call to answer (e.g. a malformed turn's): plain user text
                out.append({"role": "user", "content": text})
        else:
            text = tok.decode(body)
            if role == "system":
                text = text.replace(tool_help, "").strip()
            out.append({"role": role, "content": text})
    return out


def _strip(tok: Tokenizer, body: list[int], tag: str) -> str:
    a, b = tok.special_id(tag), tok.special_id("/" + tag)
    return tok.decode([t for t in body if t not in (a, b)])


def _split_calls(tok: Tokenizer, body: list[int]) -> tuple[str, list[tuple[str, str]]]:
    """(text outside calls, [(name, arguments JSON)]) of an assistant turn's ids."""
    open_, close = tok.special_id("tool_call"), tok.special_id("/tool_call")
    text, calls, i = [], [], 0
    while i < len(body):
        if body[i] == open_ and close in body[i:]:
            j = body.index(close, i)
            raw = tok.decode(body[i + 1 : j])
            try:
                obj = json.loads(raw)
                calls.append((str(obj["name"]), json.dumps(obj["arguments"])))
            except (ValueError, KeyError, TypeError):
                calls.append(("malformed", json.dumps({"text": raw})))
            i = j + 1
        else:
            text.append(body[i])
            i += 1
    return tok.decode(text), calls


class ChatPolicy:
    """`policy(context_ids) -> emitted_ids` through an OpenAI-compatible chat endpoint."""

    def __init__(
        self,
        tok: Tokenizer,
        client,
        model: str,
        *,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        timeout_s: float = 120.0,
        extra_tools=(),
    ):
        self.tok, self.client, self.model = tok, client, model
        self.max_tokens, self.temperature, self.timeout_s = max_tokens, temperature, timeout_s
        self.tools = openai_tools(extra_tools)
        self.requests = 0  # chat requests sent (one per turn)
        self.usage = []  # completion tokens per turn, as the endpoint reports them
        self.stopped = ""  # why the model could not take another turn ("": it always could)

    def messages(self, context: list[int]) -> list[dict]:
        return context_messages(self.tok, context)

    def __call__(self, context: list[int]) -> list[int]:
        import openai

        self.requests += 1
        try:
            r = self.client.chat.completions.create(
                model=self.model,
                messages=self.messages(context),
                tools=self.tools,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                timeout=self.timeout_s,
            )
        except openai.BadRequestError as e:
            if getattr(e, "code", None) != "context_length_exceeded":
                raise SetupModelError(self._why(e)) from None
            # The model's own context is full: its episode ends here, like the environment's
            # context_limit (an empty turn: no call), and the reason is kept for the verdict.
            self.stopped = f"the model's context is full: {self._why(e)}"
            return [self.tok.special_id("end")]
        except openai.APIError as e:
            raise SetupModelError(self._why(e)) from None
        if r.usage is not None:
            self.usage.append(r.usage.completion_tokens)
        msg = r.choices[0].message
        ids = self.tok.encode(msg.content or "")  # plain text: never a control token
        for call in msg.tool_calls or ():
            try:
                args = json.loads(call.function.arguments or "{}")
                text = tool_call_text(call.function.name, args)
            except ValueError:  # not JSON: emitted as is, the strict parser calls it malformed
                body = f'{{"name": {json.dumps(call.function.name)}, "arguments": '
                body += f"{call.function.arguments}}}"
                text = special_text("tool_call") + body + special_text("/tool_call")
            ids += self.tok.encode(text, allow_special=True)
        return ids + [self.tok.special_id("end")]

    def _why(self, e) -> str:
        where = getattr(self.client, "base_url", "the endpoint")
        why = " ".join(str(getattr(e, "message", e)).split())[:300]
        return f"{where}: {type(e).__name__}: {why}"


def add_model_arguments(p) -> None:
    p.add_argument(
        "--setup-model",
        default="",
        help="base URL of an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1) whose "
        "model plays the setup agent; default: the scripted agent",
    )
    p.add_argument("--setup-model-name", default="", help="the model name the endpoint serves")
    p.add_argument("--setup-api-key-env", default="OPENAI_API_KEY", help="env var with the key")
    p.add_argument("--setup-max-tokens", type=int, default=1024, help="tokens per model turn")


def model_policy(args):
    """None (the scripted agent) or a factory tok -> ChatPolicy for the endpoint args name."""
    if not args.setup_model:
        return None
    import os

    import openai

    key = os.environ.get(args.setup_api_key_env, "") or "none"
    client = openai.OpenAI(base_url=args.setup_model, api_key=key, max_retries=0)
    name = args.setup_model_name or "default"
    return lambda tok: ChatPolicy(tok, client, name, max_tokens=args.setup_max_tokens)
