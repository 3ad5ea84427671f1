"""The agent command's policies (rl/serve/agent.py) besides in-process params: scripted tool
calls, and any OpenAI-compatible endpoint, whose requests carry the environment's context as chat
messages that the server's chat template renders back to the same ids."""

from __future__ import annotations

import json
import urllib.request

from data.chat import tool_call_text
from data.tokenizers import Tokenizer
from model.errors import InputError
from rl.envs.agent import tools


class ScriptedTurns:
    """`policy(context_ids) -> emitted_ids`: one tool call per turn from a list of
    {"name", "arguments"} (a test's stand-in for a model; the env parses them as it would)."""

    def __init__(self, tok: Tokenizer, calls: list[dict]):
        self._turns = [
            tok.encode(tool_call_text(c["name"], c.get("arguments", {})), allow_special=True)
            + [tok.special_id("end")]
            for c in calls
        ]

    def __call__(self, context: list[int]) -> list[int]:
        return self._turns.pop(0) if self._turns else []  # out of calls: an empty, ending turn


def load_scripted(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            calls = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"--scripted={path}: {e}") from None
    if not isinstance(calls, list) or not all(isinstance(c, dict) and "name" in c for c in calls):
        raise InputError(f'--scripted={path}: expected a JSON list of {{"name", "arguments"}}')
    return calls


def context_messages(tok: Tokenizer, ids: list[int], extra: tuple[str, ...]) -> list[dict]:
    """The environment's context (bos, messages, trailing "<|assistant|>") as OpenAI chat
    messages that the server's chat template renders back to these ids: an assistant turn's
    well-formed calls become tool_calls (the rest of the turn its content), a tool result a tool
    message (already trimmed: the server's trim leaves it as it is)."""
    roles = {tok.special_id(r): r for r in ("system", "user", "assistant", "tool")}
    end, out, i = tok.special_id("end"), [], 1  # past <|bos|>
    while i < len(ids) and ids[i] in roles:
        if end not in ids[i + 1 :]:
            break  # the closing "<|assistant|>" the next turn is generated after
        j = ids.index(end, i + 1)
        role, body = roles[ids[i]], ids[i + 1 : j]
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": f"call_{len(out)}",
                    "content": tok.decode(body[1:-1]),
                }
            )
        elif role == "assistant":
            out.append(_assistant_message(tok, body, extra, len(out)))
        else:
            out.append({"role": role, "content": tok.decode(body)})
        i = j + 1
    return out


def _assistant_message(tok: Tokenizer, body: list[int], extra, n: int) -> dict:
    open_, close = tok.special_id("tool_call"), tok.special_id("/tool_call")
    calls = [c for c in tools.parse_turn(tok, body + [tok.special_id("end")], extra).calls]
    text = []
    inside = False
    for t in body:  # the text outside call spans
        if t == open_:
            inside = True
        elif t == close:
            inside = False
        elif not inside:
            text.append(t)
    message = {"role": "assistant", "content": tok.decode(text)}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}_{k}",
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": json.dumps(c.arguments, ensure_ascii=False),
                },
            }
            for k, c in enumerate(calls)
        ]
    return message


class EndpointPolicy:
    """`policy(context_ids) -> emitted_ids` through an OpenAI-compatible chat endpoint (the
    `openai` client). No `tools` are sent: the system prompt already describes RL's tools, and
    the server returns the turn's text with its call spans, re-encoded here as the policy emitted
    them. `response_ids` collects every response's id (for feedback)."""

    def __init__(
        self, tok, url: str, *, extra, model: str, api_key: str, max_tokens: int, temperature
    ):
        import openai

        self.tok, self.model, self.temperature = tok, model, temperature
        self.max_tokens = max_tokens
        self.extra = tuple(extra)  # the episode's extra tools (to parse its turns' calls)
        self.client = openai.OpenAI(base_url=url, api_key=api_key, max_retries=0, timeout=600)
        self.url, self.api_key = url.rstrip("/"), api_key
        self.response_ids: list[str] = []

    def __call__(self, context: list[int]) -> list[int]:
        import openai

        try:
            r = self.client.chat.completions.create(
                model=self.model,
                messages=context_messages(self.tok, context, self.extra),
                max_tokens=self.max_tokens,
                temperature=self.temperature,
            )
        except openai.OpenAIError as e:
            raise InputError(f"--endpoint={self.url}: {' '.join(str(e).split())[:300]}") from None
        self.response_ids.append(r.id)
        choice = r.choices[0]
        ids = self.tok.encode(choice.message.content or "", allow_special=True)
        # "stop": the turn ended at <|end|> (the server strips it); "length": cut off, as in RL
        return ids + ([self.tok.special_id("end")] if choice.finish_reason != "length" else [])

    def feedback(self, signal: str) -> None:
        """POST /v1/feedback {response_id, signal} for every turn's response."""
        for rid in self.response_ids:
            body = json.dumps({"response_id": rid, "signal": signal}).encode()
            req = urllib.request.Request(
                f"{self.url}/feedback",
                data=body,
                headers={
                    "Content-Type": "application/json",
                    "Authorization": f"Bearer {self.api_key}",
                },
            )
            with urllib.request.urlopen(req, timeout=60) as resp:
                resp.read()
