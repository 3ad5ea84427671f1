"""The OpenAI-compatible HTTP API (FastAPI) over the engine loop, logging every exchange.

    POST /v1/chat/completions   (stream: SSE chunks, then `data: [DONE]`)
    POST /v1/completions
    GET  /v1/models
    POST /v1/feedback           {"response_id", "choice"?, "signal", ...}: 404 for an unknown one
    GET  /health, /metrics      (Prometheus text)

Every /v1 route needs `Authorization: Bearer KEY` when the server has keys (rl/serve/auth.py;
401 otherwise); /health is open, /metrics needs a key unless serve.metrics_open. Each request
is admitted by its key's rate limit and, for generation, its concurrency limit (429 with
Retry-After); its body is read up to serve.max_body_bytes (413 past it) and its counts are
bounded (protocol.check_limits, 400). Every logged exchange and feedback record carries the key
id. Feedback is taken only from the key that received the response (403 otherwise) and within
serve.feedback_window_s of it; a later signal on the same (response, choice) replaces the
earlier, and its record names the one it replaces (`replaces`).

A client that disconnects cancels its request: the engine ends its turn at the next round
(engine_loop.py "Cancellation") and frees the slot.

Handlers run on the event loop; generation runs on the engine thread (rl/serve/engine_loop.py),
whose events come back through an asyncio queue. A response is logged (fsync'd) before it is
returned, or before the stream's last chunk, so feedback may follow at once. Responses carry
`params_versions` (the versions that produced their tokens) and `system_fingerprint` 'v<newest>'.

A request with `n` > 1 runs n engine jobs (one slot each, rl/serve/protocol.py "Choices"); each
choice is logged as its own exchange record under the response id with its `choice` index, which
feedback names (default 0). Usage counts the prompt once (OpenAI's and vLLM's convention: it is
one input) and sums the choices' completion tokens. Log-probs: protocol.py "Log-probs".
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from rl.episodes.records import completion_record, to_json
from rl.serve import protocol as pr
from rl.serve.auth import Keys, Limiter
from rl.serve.engine_loop import Job, Result
from rl.serve.interaction_log import InteractionLog
from rl.serve.server_metrics import Metrics


@dataclasses.dataclass
class Server:
    tok: object
    loop: object  # EngineLoop
    log: InteractionLog
    model: str
    temperature: float  # a request's when it names none
    cache_len: int
    max_new_default: int
    max_n: int = 1  # choices a request may ask for (<= the engine's slots)
    metrics: Metrics = dataclasses.field(default_factory=Metrics)
    keys: Keys = dataclasses.field(default_factory=lambda: Keys({}))
    limiter: Limiter = dataclasses.field(
        default_factory=lambda: Limiter(rate_per_s=0, burst=1, max_concurrent=0)
    )
    limits: pr.Limits = pr.Limits()
    max_body_bytes: int = 1 << 20
    metrics_open: bool = False
    feedback_window_s: float = 7 * 24 * 3600.0
    tool_budget: int = 0  # tool messages trimmed to this many tokens (data/chat.py); 0 = as sent

    @property
    def stops(self) -> list[int]:
        return [self.tok.special_id("end"), self.tok.eos_id]


def _error(e: pr.ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


def _too_large(limit: int) -> pr.ApiError:
    return pr.ApiError(413, f"request body is over {limit} bytes", code="request_too_large")


async def _body(request: Request, limit: int):
    """The JSON body, read up to `limit` bytes (413 past it: a declared Content-Length over it is
    refused before anything is read, and a chunked body is cut once it passes it)."""
    size = request.headers.get("content-length", "")
    if size.isdigit() and int(size) > limit:
        raise _too_large(limit)
    chunks, n = [], 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise pr.ApiError(400, "request body is not valid JSON") from None


def _key(server: Server, request: Request) -> str:
    """The request's key id (401 without a valid key when the server has keys)."""
    return server.keys.check(request.headers.get("authorization"))


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body is read: what comes next is its disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _released(gen, release):
    """A stream that gives back its concurrency slot however it ends (done, error, client gone)."""
    try:
        async for x in gen:
            yield x
    finally:
        release()


def _post(aloop, q: asyncio.Queue, i: int, ev: tuple) -> None:
    """An engine event to its request's queue, from the engine thread. After the server's event
    loop closed (shutdown) nobody waits for it: dropped, never raised into the engine thread."""
    try:
        aloop.call_soon_threadsafe(q.put_nowait, (i, ev))
    except RuntimeError:  # 'Event loop is closed'
        pass


def _sampling(req: pr.Request, i: int):
    """Choice i's sampling settings (its own seed, protocol.choice_seed)."""
    return dataclasses.replace(req.sampling, seed=pr.choice_seed(req.sampling.seed, i))


async def _events(server: Server, rid: str, req: pr.Request):
    """Engine events of a request's choices as (choice, event): ('delta', ids, raw log-probs |
    None)..., then ('done', Result) | ('error', msg) for each; ends when every choice has."""
    q: asyncio.Queue = asyncio.Queue()
    aloop = asyncio.get_running_loop()
    stop_at = functools.partial(pr.stop_cut, server.tok, stops=req.stop) if req.stop else None
    for i in range(req.n):
        sink = functools.partial(_post, aloop, q, i)
        job = Job(f"{rid}/{i}", req.prompt, req.max_new, server.stops, sink, _sampling(req, i),
                  stop_at=stop_at, logprobs=req.logprobs is not None)  # fmt: skip
        server.loop.submit(job)
    live = set(range(req.n))
    try:
        while live:
            i, ev = await q.get()
            if ev[0] != "delta":
                live.discard(i)
            yield i, ev
    finally:  # the consumer stopped early (client gone, cancelled task): stop decoding for it
        for i in live:
            server.loop.cancel(f"{rid}/{i}")


def _exchange(
    server: Server, rid: str, i: int, endpoint: str, req: pr.Request, res: Result, text: str
):
    """Choice i's log record: an RL record (rl.episodes.records.completion_record over prompt +
    completion, its reward None until a user's signal arrives: rl/serve/feedback.py) with the
    exchange's facts."""
    record = completion_record(
        req.prompt,
        res.tokens,
        res.logprobs,
        res.versions,
        res.experts,  # [n_moe, plen + n, k]
        group_id=rid,  # the response's n choices
        reward=None,
        reward_terms=None,
        kind="exchange",
        id=rid,
        choice=i,
        time=time.time(),
        endpoint=endpoint,
        model=server.model,
        messages=req.messages,
        prompt_len=len(req.prompt),
        completion_text=text,
        # What the log-probs are of (model/sampling.py): the request's own settings.
        sampling=dataclasses.asdict(_sampling(req, i)),
        stop=req.stop,
        finish_reason=res.finish_reason,
        latency_s=res.seconds,
        key_id=req.key_id,  # who received it: only this key may post feedback on it
    )
    return to_json(record)


class _Text:
    """Incremental text of streamed ids: holds back an unfinished UTF-8 character, with tools
    everything from a <|tool_call|> on (it may become a tool call), and with stop strings any
    ending that may be the start of one (nothing from a stop string on is ever sent)."""

    def __init__(self, tok, tools: list[str], stops: list[str]):
        self.tok, self.ids, self.sent, self.stop = tok, [], "", stops
        self.hold = tok.special_id("tool_call") if tools else None
        self.stops = {tok.special_id("end"), tok.eos_id}

    def push(self, ids: list[int]) -> str:
        self.ids += ids
        visible = [t for t in self.ids if t not in self.stops]
        if self.hold in visible:
            visible = visible[: visible.index(self.hold)]
        text = self.tok.decode(visible)
        if text.endswith("\ufffd"):
            text = text.rstrip("\ufffd")
        return self.take(_hold_stop_prefix(pr.before_stop(text, self.stop), self.stop))

    def take(self, text: str) -> str:
        new = text[len(self.sent) :] if text.startswith(self.sent) else ""
        self.sent += new
        return new


def _hold_stop_prefix(text: str, stops: list[str]) -> str:
    """text without its longest ending that is a proper prefix of a stop string."""
    for k in range(min(len(text), max((len(x) for x in stops), default=1) - 1), 0, -1):
        if any(x.startswith(text[-k:]) for x in stops):
            return text[:-k]
    return text


def _output(server: Server, req: pr.Request, res: Result):
    """-> (content text, tool calls, finish reason) of a finished request."""
    content, calls = pr.split_calls(server.tok, pr.strip_stop(server.tok, res.tokens), req.tools)
    text = pr.before_stop(server.tok.decode(content), req.stop)
    return text, calls, pr.finish_reason(res.finish_reason, calls)


def _usage(req: pr.Request, results: list[Result]) -> dict:
    n = sum(len(res.tokens) for res in results)
    return {
        "prompt_tokens": len(req.prompt),
        "completion_tokens": n,
        "total_tokens": len(req.prompt) + n,
    }


def _versions(results: list[Result]) -> list[int]:
    return sorted({v for res in results for v in res.versions})


def _logprobs(server: Server, req: pr.Request, endpoint: str) -> pr.TokenLogprobs | None:
    if req.logprobs is None:
        return None
    return pr.TokenLogprobs(server.tok, req.logprobs, chat=endpoint == "chat")


PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def _sse(obj) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def make_app(server: Server) -> FastAPI:
    app = FastAPI(title="composer-jax serve")

    @app.exception_handler(pr.ApiError)
    async def api_error(request: Request, e: pr.ApiError):
        server.metrics.request(request.url.path, e.status)
        return _error(e)

    @app.get("/v1/models")
    async def models(request: Request):
        _key(server, request)
        return {
            "object": "list",
            "data": [
                {"id": server.model, "object": "model", "created": 0, "owned_by": "composer-jax"}
            ],
        }

    @app.get("/health")
    async def health():
        ok = server.loop.alive
        body = {"status": "ok" if ok else "engine stopped", "params_version": server.loop.version}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics(request: Request):
        if not server.metrics_open:
            _key(server, request)
        waiting, running = server.loop.depth
        return PlainTextResponse(
            server.metrics.text(
                waiting=waiting,
                running=running,
                version=server.loop.version,
                decode=server.loop.counters,
            )
        )

    @app.post("/v1/feedback")
    async def feedback(request: Request):
        kid = _key(server, request)
        server.limiter.admit(kid)
        fb = pr.feedback_request(await _body(request, server.max_body_bytes))
        owner, at = _owner(server, fb)
        if owner != kid:
            raise pr.ApiError(
                403,
                f"response {fb['response_id']!r} was not served to this API key",
                param="response_id",
                kind="permission_error",
            )
        if time.time() - at > server.feedback_window_s:
            raise pr.ApiError(
                400,
                f"response {fb['response_id']!r} is older than the feedback window "
                f"({server.feedback_window_s:g} s)",
                param="response_id",
            )
        record = {"kind": "feedback", "id": f"fb-{uuid.uuid4().hex}", "time": time.time(),
                  "key_id": kid, **fb}  # fmt: skip
        record = await asyncio.to_thread(server.log.append_signal, record)
        server.metrics.request("/v1/feedback", 200)
        return {
            "object": "feedback",
            "id": record["id"],
            "response_id": fb["response_id"],
            "choice": fb["choice"],
            "signal": fb["signal"],
            "replaces": record["replaces"],  # the earlier signal this one supersedes, or null
        }

    async def respond(request: Request, parse, endpoint: str):
        """One generation endpoint: the key checked and admitted, the body checked and parsed by
        `parse` (rl/serve/protocol.py) under the server's defaults and limits, then generated
        (streamed or not) and logged, holding one of the key's concurrency slots throughout."""
        kid = _key(server, request)
        server.limiter.admit(kid)
        body = await _body(request, server.max_body_bytes)
        pr.check_common(body, model=server.model)
        pr.check_limits(body, server.limits)
        req = parse(
            server.tok,
            body,
            max_new_default=min(server.max_new_default, server.limits.max_tokens),
            temperature=server.temperature,
            max_n=server.max_n,
        )
        req = dataclasses.replace(req, key_id=kid)
        server.limiter.enter(kid)
        release = functools.partial(server.limiter.leave, kid)
        try:
            out = await _generate(server, req, endpoint, request)
        except BaseException:
            release()
            raise
        if isinstance(out, StreamingResponse):
            out.body_iterator = _released(out.body_iterator, release)
        else:
            release()
        return out

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        parse = functools.partial(pr.chat_request, tool_budget=server.tool_budget)
        return await respond(request, parse, "chat")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await respond(request, pr.completion_request, "completions")

    return app


def _owner(server: Server, fb: dict) -> tuple[str | None, float]:
    """(key id, time) of the exchange a feedback body names; 404 for an unknown one."""
    rid, choice = fb["response_id"], fb["choice"]
    if rid not in server.log.ids:
        raise pr.ApiError(404, f"no response with id {rid!r}", param="response_id")
    if (rid, choice) not in server.log.owners:
        raise pr.ApiError(404, f"response {rid!r} has no choice {choice}", param="choice")
    return server.log.owners[(rid, choice)]


async def _whole(server: Server, req: pr.Request, rid: str, endpoint: str) -> list[Result]:
    """The results of a non-streamed request's choices (500 if one failed)."""
    results: dict[int, Result] = {}
    async for i, ev in _events(server, rid, req):
        if ev[0] == "error":
            server.metrics.request(PATHS[endpoint], 500)
            raise pr.ApiError(500, ev[1], kind="server_error")
        if ev[0] == "done":
            results[i] = ev[1]
    return [results[i] for i in range(req.n)]


async def _generate(server: Server, req: pr.Request, endpoint: str, request: Request):
    pr.check_fits(req, cache_len=server.cache_len, vocab=server.tok.vocab_size)
    if not server.loop.alive:
        raise pr.ApiError(503, "engine is not running", kind="server_error")
    rid = f"{'chatcmpl' if endpoint == 'chat' else 'cmpl'}-{uuid.uuid4().hex}"
    if req.stream:
        gen = (
            _stream_chat(server, req, rid) if endpoint == "chat" else _stream_text(server, req, rid)
        )
        return StreamingResponse(gen, media_type="text/event-stream")
    work = asyncio.ensure_future(_whole(server, req, rid, endpoint))
    gone = asyncio.ensure_future(_disconnected(request))
    await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    if not work.done():  # the client went away: cancelling the work cancels its engine jobs
        work.cancel()
        server.metrics.request(PATHS[endpoint], 499)  # nginx's "client closed request"
        return JSONResponse({}, status_code=499)  # nobody reads it
    gone.cancel()
    done = work.result()
    choices = [await _choice(server, req, rid, endpoint, i, res) for i, res in enumerate(done)]
    server.metrics.request(PATHS[endpoint], 200, max(res.seconds for res in done))
    return dict(_head(server, rid, endpoint, done), choices=choices, usage=_usage(req, done))


async def _choice(server: Server, req: pr.Request, rid: str, endpoint: str, i: int, res: Result):
    """Choice i of a whole response, logged first."""
    text, calls, reason = _output(server, req, res)
    await asyncio.to_thread(server.log.append, _exchange(server, rid, i, endpoint, req, res, text))
    tl = _logprobs(server, req, endpoint)
    lp = None if tl is None else tl.push(res.tokens, res.raw) or _empty(endpoint)
    if endpoint == "completions":
        return {"index": i, "text": text, "logprobs": lp, "finish_reason": reason}
    message = {"role": "assistant", "content": text if (text or not calls) else None}
    if calls:
        message["tool_calls"] = calls
    return {"index": i, "message": message, "logprobs": lp, "finish_reason": reason}


def _empty(endpoint: str) -> dict:
    """The logprobs object of a completion with no token to report."""
    if endpoint == "chat":
        return {"content": []}
    return {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}


def _head(server: Server, rid: str, endpoint: str, results: list[Result] | None, chunk=False):
    kind = "chat.completion" if endpoint == "chat" else "text_completion"
    head = {
        "id": rid,
        "object": kind + (".chunk" if chunk and endpoint == "chat" else ""),
        "created": int(time.time()),
        "model": server.model,
    }
    if results:
        versions = _versions(results)
        head.update(params_versions=versions, system_fingerprint=f"v{max(versions, default=-1)}")
    return head


async def _stream_pieces(server: Server, req: pr.Request, rid: str, endpoint: str):
    """A streamed request's engine events as (choice, 'text', new text, logprobs | None) |
    (choice, 'error', message) | (choice, 'done', result, the text not yet sent, tool calls,
    finish reason); each choice is logged once it ends, and the request counted once all have,
    as for a whole response."""
    tools = req.tools if endpoint == "chat" else []
    texts = [_Text(server.tok, tools, req.stop) for _ in range(req.n)]
    lps = [_logprobs(server, req, endpoint) for _ in range(req.n)]
    seconds = []
    async for i, ev in _events(server, rid, req):
        if ev[0] == "delta":
            new = texts[i].push(ev[1])
            lp = lps[i].push(ev[1], ev[2]) if lps[i] else None
            if new or lp:
                yield (i, "text", new, lp)
        elif ev[0] == "error":
            yield (i, *ev)
        else:
            res = ev[1]
            content, calls, reason = _output(server, req, res)
            await asyncio.to_thread(
                server.log.append, _exchange(server, rid, i, endpoint, req, res, content)
            )
            seconds.append(res.seconds)
            if len(seconds) == req.n:
                server.metrics.request(PATHS[endpoint], 200, max(seconds))
            yield (i, "done", res, texts[i].take(content), calls, reason)


def _stream_error(message: str) -> str:
    return _sse({"error": {"message": message, "type": "server_error"}})


async def _stream_chat(server: Server, req: pr.Request, rid: str):
    def chunk(i, delta, res=None, reason=None, lp=None):
        choice = {"index": i, "delta": delta, "logprobs": lp, "finish_reason": reason}
        return _sse(dict(_head(server, rid, "chat", res and [res], True), choices=[choice]))

    for i in range(req.n):
        yield chunk(i, {"role": "assistant", "content": ""})
    async for ev in _stream_pieces(server, req, rid, "chat"):
        i = ev[0]
        if ev[1] == "text":
            yield chunk(i, {"content": ev[2]} if ev[2] else {}, lp=ev[3])
        elif ev[1] == "error":
            yield _stream_error(ev[2])
        else:
            _, _, res, rest, calls, reason = ev
            if rest:
                yield chunk(i, {"content": rest})
            if calls:
                yield chunk(i, {"tool_calls": [dict(c, index=j) for j, c in enumerate(calls)]})
            yield chunk(i, {}, res, reason)
    yield "data: [DONE]\n\n"


async def _stream_text(server: Server, req: pr.Request, rid: str):
    def chunk(i, text, res=None, reason=None, lp=None):
        choice = {"index": i, "text": text, "logprobs": lp, "finish_reason": reason}
        return _sse(dict(_head(server, rid, "completions", res and [res], True), choices=[choice]))

    async for ev in _stream_pieces(server, req, rid, "completions"):
        i = ev[0]
        if ev[1] == "text":
            yield chunk(i, ev[2], lp=ev[3])
        elif ev[1] == "error":
            yield _stream_error(ev[2])
        else:
            _, _, res, rest, _, reason = ev
            yield chunk(i, rest, res, reason)
    yield "data: [DONE]\n\n"
