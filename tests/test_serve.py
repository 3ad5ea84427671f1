"""The OpenAI-compatible server (rl/serve) on loopback, driven by the `openai` client package: the
real tiny model on the one decode engine, real uvicorn on a free port in a thread.

Greedy responses equal model.generate; streaming equals non-streaming; concurrent requests sample
with their own settings in one batch (a greedy one still equals model.generate, the others' logged
log-probs equal the filtered forward's under their own settings); stop strings; tools in the
OpenAI shape render exactly as the chat template renders the same conversation, and a tool call
the model emits comes back as OpenAI tool_calls; feedback is logged (404 for an unknown id); bad
requests get OpenAI-shaped 4xx errors; a hot swap to a newly promoted version in the middle of
streams drops no request and every token is the argmax of the version it records. Log-probs
(chat and legacy shapes, streamed and not) equal a float64 reference of the model's raw
distribution; n choices are independent, seeded-reproducible and logged per choice; the server
and any process that never stopped its threads exit cleanly.

Exposed (issue 54; the fixture serves two API keys from a file): 401 without a valid key, /health
open, /metrics keyed; feedback only from the key that got the response (403), one signal per
(response, choice) with the replacement logged, the feedback window; keys never in the log in
clear; 413 / 400 / 429 limits; a client that disconnects (streamed or not) or stops reading
frees its slot; a public bind without keys is refused; the load bench's tiny run with SIGTERM.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import glob
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import jax
import jax.numpy as jnp
import numpy as np
import openai
import optax
import pytest

from configs import serve as serve_config
from data.chat import generation_prompt, render_messages, tool_call_text
from data.tokenizers import ByteTokenizer
from model import Transformer, generate, init_params, presets
from model.engine import RolloutEngine
from rl.serve import protocol as pr
from rl.serve.app import make_app
from rl.serve.auth import key_id, load_keys
from rl.serve.follow import PromotedFollower
from rl.serve.interaction_log import read_log
from rl.serve.server import build, start_http
from rl.stores.weight_store import Promotions, WeightWriter

MODEL = "composer-tiny"
TOK = ByteTokenizer()
STOPS = [TOK.special_id("end"), TOK.eos_id]


SERVED_CACHE_LEN = 256  # the served engine's, also generate's and replay's: programs shared
KEY_A, KEY_B = "sk-test-alice-0123456789", "sk-test-bob-9876543210"  # the fixture's two keys


def serve_block(**kw):
    """configs/serve.py's block with the tests' sizes; no rate or concurrency limit (the tests
    that check them set their own on the running server)."""
    s = serve_config.get_config().serve
    s.update(
        dict(
            model_name=MODEL,
            tokenizer="byte",
            slots=4,
            cache_len=SERVED_CACHE_LEN,
            min_bucket=64,  # short requests: 16 compiled 31 programs in this module, 64: 19
            temperature=0.0,
            seed=0,
            max_new_tokens=12,
            speculative_k=2,
            stream_every=4,
            log_max_bytes=1 << 20,
            rate_per_s=0.0,
            max_concurrent=0,
        ),  # fmt: skip
        **kw,
    )
    return s


@pytest.fixture(scope="module")
def tiny():
    cfg = presets.get("tiny")
    return cfg, jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    cfg, params = tiny
    root = tmp_path_factory.mktemp("serve")
    (root / "keys").write_text(f"# the tests' keys\n{KEY_A}\n{KEY_B}\n")
    keys = load_keys(str(root / "keys"))
    server = build(serve_block(), cfg, params, TOK, log_dir=str(root / "log"), keys=keys)
    server.loop.start()
    store = str(root / "weights")
    follower = PromotedFollower(store, server.loop, poll_s=0.05, log=lambda _: None).start()
    http, _, port = start_http(make_app(server), "127.0.0.1", 0)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY_A, max_retries=0)
    yield dict(server=server, client=client, port=port, store=store, log=str(root / "log"))
    http.should_exit = True
    follower.stop()
    server.loop.stop()


def reference(cfg, params, prompt, max_new):
    """generate's tokens; every call on the served cache length (one set of compiled programs, the
    replay engine's too, instead of one per rounded prompt length)."""
    out = generate(cfg, params, [prompt], max_new, stop_tokens=STOPS, valid_vocab=TOK.vocab_size,
                   cache_len=SERVED_CACHE_LEN)  # fmt: skip
    return out.sequences[0].tokens


def http(port: int, path: str, data: bytes | None = None, key: str | None = KEY_A, headers=None):
    """A raw request (what the openai client cannot send: malformed JSON, /health, /metrics)
    -> (status, body text[, headers if `headers` is "return"])."""
    head = {"Authorization": f"Bearer {key}"} if key else {}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=head)
    try:
        with urllib.request.urlopen(req) as r:
            out = r.status, r.read().decode(), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        out = e.code, e.read().decode(), {k.lower(): v for k, v in e.headers.items()}
    return out if headers == "return" else out[:2]


def logged(log_dir: str) -> dict:
    return {r["id"]: r for _, r in read_log(log_dir) if r["kind"] == "exchange"}


def test_chat_greedy_equals_generate_and_is_logged(served, tiny):
    cfg, params = tiny
    messages = [{"role": "user", "content": "def add(a, b):"}]
    r = served["client"].chat.completions.create(model=MODEL, messages=messages, max_tokens=12)
    prompt = generation_prompt(TOK, messages)
    want = reference(cfg, params, prompt, 12)
    text = TOK.decode(pr.strip_stop(TOK, want))
    assert r.choices[0].message.content == text
    assert r.choices[0].finish_reason == ("stop" if want[-1] in STOPS else "length")
    assert r.usage.completion_tokens == len(want) and r.usage.prompt_tokens == len(prompt)
    assert r.model_extra["params_versions"] == [0]
    rec = logged(served["log"])[r.id]  # token-exact, with what RL needs per token
    assert rec["tokens"] == prompt + want and rec["prompt_len"] == len(prompt)
    assert rec["versions"] == [-1] * len(prompt) + [0] * len(want)
    assert np.asarray(rec["experts"]).shape == (cfg.num_moe_layers, len(prompt) + len(want), 2)
    assert all(lp < 0 for lp in rec["logprobs"][len(prompt) :])


def test_streaming_equals_non_streaming(served):
    client, messages = served["client"], [{"role": "user", "content": "print("}]
    full = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10)
    chunks = list(
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10, stream=True)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == full.choices[0].finish_reason
    assert len({c.id for c in chunks}) == 1 and chunks[0].id in logged(served["log"])


def test_completions_equal_generate(served, tiny):
    cfg, params = tiny
    r = served["client"].completions.create(model=MODEL, prompt="import os\n", max_tokens=8)
    want = reference(cfg, params, [TOK.bos_id] + TOK.encode("import os\n"), 8)
    assert r.choices[0].text == TOK.decode(pr.strip_stop(TOK, want))
    streamed = served["client"].completions.create(
        model=MODEL, prompt="import os\n", max_tokens=8, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed) == r.choices[0].text


REF_LEN = 64  # one shape for the reference forwards (prompt + completion of these tests fit)


@functools.partial(jax.jit, static_argnums=0)
def _ref_logits(cfg, params, ids, forced):
    return Transformer(cfg).apply({"params": params}, ids, forced_experts=forced).logits


def filtered_reference(cfg, params, rec, temperature, top_k, top_p):
    """Log-probs of a logged completion's tokens under the distribution its settings define,
    from a float64 numpy filter over the full forward's logits (the logged routing replayed):
    valid ids, / temperature, top-k, then the top-p nucleus (the crossing token kept)."""
    plen, tokens = rec["prompt_len"], rec["tokens"]
    n = len(tokens) - 1
    ids = np.zeros((1, REF_LEN), np.int32)  # right-padded: causal, earlier logits unchanged
    ids[0, :n] = tokens[:-1]
    forced = np.zeros((cfg.num_moe_layers, 1, REF_LEN, cfg.num_experts_per_tok), np.int32)
    forced[:, 0, :n] = np.asarray(rec["experts"])[:, :-1]  # the logged routing, replayed
    logits = _ref_logits(cfg, params, jnp.asarray(ids), jnp.asarray(forced))[0, plen - 1 : n]
    want = []
    for z, t in zip(np.asarray(logits, np.float64), tokens[plen:]):
        z = np.where(np.arange(z.size) < TOK.vocab_size, z, -np.inf) / temperature
        order = np.argsort(-z)[: top_k or None]
        p = np.exp(z[order] - z[order[0]])
        p /= p.sum()
        kept = order if top_p >= 1 else order[(np.cumsum(p) - p) < top_p]
        zk = z[kept] - z[kept].max()
        lse = np.log(np.exp(zk).sum()) + z[kept].max()
        want.append(z[t] - lse if t in kept else -np.inf)
    return np.array(want)


def test_concurrent_requests_sample_with_their_own_settings(served, tiny):
    """A greedy request and two sampled ones (temperature 1; temperature 0.7 with top_p 0.9 and
    top_k 40) sent at once, decoded together (their lifetimes overlap; speculative, K=2): the
    greedy one equals model.generate, and each sampled one's logged log-probs equal the forward's
    under its own settings (float32 engine vs float64 reference, atol 1e-4)."""
    cfg, params = tiny
    client = served["client"]
    messages = [{"role": "user", "content": "def mul(a, b):"}]
    settings = [dict(temperature=0.0), dict(temperature=1.0),
                dict(temperature=0.7, top_p=0.9, extra_body={"top_k": 40})]  # fmt: skip
    go = threading.Barrier(len(settings))

    def send(kw):
        go.wait()
        return client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, **kw)

    with concurrent.futures.ThreadPoolExecutor(len(settings)) as pool:
        greedy, hot, nucleus = pool.map(send, settings)
    want = reference(cfg, params, generation_prompt(TOK, messages), 12)
    assert greedy.choices[0].message.content == TOK.decode(pr.strip_stop(TOK, want))
    log = logged(served["log"])
    recs = [log[r.id] for r in (greedy, hot, nucleus)]
    spans = [(r["time"] - r["latency_s"], r["time"]) for r in recs]
    assert max(a for a, _ in spans) < min(b for _, b in spans)  # all three in flight at once
    assert recs[2]["sampling"] == {"temperature": 0.7, "top_k": 40, "top_p": 0.9, "seed": None}
    for rec, (t, k, p) in zip(recs[1:], [(1.0, 0, 1.0), (0.7, 40, 0.9)]):
        got = np.asarray(rec["logprobs"][rec["prompt_len"] :])
        np.testing.assert_allclose(got, filtered_reference(cfg, params, rec, t, k, p), atol=1e-4)
    assert recs[1]["tokens"] != recs[2]["tokens"]


def test_a_seeded_request_samples_the_same_tokens_alone_or_in_company(served):
    """temperature 1, seed 7: the same completion sent alone and beside two other requests (other
    slots, another row bucket) -> the same tokens; seed 8 -> other tokens."""
    client = served["client"]
    kw = dict(model=MODEL, prompt="def f(", max_tokens=10, temperature=1.0)
    alone = client.completions.create(seed=7, **kw)
    go = threading.Barrier(3)

    def send(seed):
        go.wait()
        return client.completions.create(seed=seed, **kw)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        together, other, _ = pool.map(send, [7, 8, None])
    log = logged(served["log"])
    ids = lambda r: log[r.id]["tokens"][log[r.id]["prompt_len"] :]
    assert ids(together) == ids(alone) and ids(other) != ids(alone)
    assert log[alone.id]["sampling"]["seed"] == 7


def test_stop_strings_end_the_completion_before_them(served, tiny):
    """A stop string taken from the greedy continuation: the text ends just before it (streamed
    the same), finish_reason 'stop', and the log keeps the tokens up to the one completing it."""
    cfg, params = tiny
    prompt = [TOK.bos_id] + TOK.encode("x = ")
    want = TOK.decode(pr.strip_stop(TOK, reference(cfg, params, prompt, 12)))
    k = next(i for i in range(2, len(want)) if want[i] not in want[:i] + "\ufffd")
    stop = want[k]
    r = served["client"].completions.create(model=MODEL, prompt="x = ", max_tokens=12, stop=[stop])
    assert r.choices[0].text == want[:k] and r.choices[0].finish_reason == "stop"
    rec = logged(served["log"])[r.id]
    assert TOK.decode(rec["tokens"][len(prompt) :]).endswith(stop)
    streamed = served["client"].completions.create(
        model=MODEL, prompt="x = ", max_tokens=12, stop=stop, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed) == want[:k]


def test_tools_render_as_the_chat_template(served):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
              "parameters": {"type": "object",
                             "properties": {"city": {"type": "string"}}}}}]  # fmt: skip
    call = {"id": "call_0", "type": "function",
            "function": {"name": "get_weather",
                         "arguments": json.dumps({"city": "Paris"})}}  # fmt: skip
    messages = [
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
    ]
    r = served["client"].chat.completions.create(
        model=MODEL, messages=messages, tools=tools, max_tokens=4
    )
    template = [
        {"role": "system", "content": pr.tools_text(pr.parse_tools(tools, None))},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        },  # fmt: skip
        {"role": "tool", "content": "sunny"},
    ]
    prompt = generation_prompt(TOK, template)
    assert logged(served["log"])[r.id]["tokens"][: len(prompt)] == prompt


def test_emitted_tool_calls_become_openai_tool_calls():
    """The output side of the mapping on ids: a well-formed call of a declared tool becomes a tool
    call, anything else stays text (the HTTP test below has a model emit one)."""
    good = TOK.encode(tool_call_text("get_weather", {"city": "Paris"}), allow_special=True)
    bad = TOK.encode(tool_call_text("rm_rf", {}), allow_special=True)
    ids = TOK.encode("ok ") + good + bad
    content, calls = pr.split_calls(TOK, ids, ["get_weather"])
    assert TOK.decode(content) == "ok " + TOK.decode(bad)
    assert calls == [{"id": "call_0", "type": "function", "function": {
        "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]  # fmt: skip
    assert pr.finish_reason("stop", calls) == "tool_calls"


WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
            "parameters": {"type": "object",
                           "properties": {"city": {"type": "string"}}}}}]  # fmt: skip
ASK = [{"role": "user", "content": "weather in Paris?"}]
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


@pytest.fixture(scope="module")
def tool_caller(tiny):
    """Tiny params trained (Adam, full batch of one conversation) until the teacher-forced argmax
    of every assistant token is right: the conversation is ASK with WEATHER declared, rendered as
    the server renders it, answered by one call of get_weather and <|end|>. -> (params, the
    assistant's ids). Tens of steps on a 2-core CPU: a model that really emits a tool call, not a
    hand-written token list."""
    cfg, params = tiny
    messages = pr.chat_messages(ASK, pr.parse_tools(WEATHER, None))
    ids, mask = render_messages(TOK, messages + [{"role": "assistant", "tool_calls": [CALL]}])
    tokens, targets = jnp.asarray([ids[:-1]]), jnp.asarray([ids[1:]])
    weight = jnp.asarray([mask[1:]], jnp.float32)
    opt = optax.adam(3e-3)

    def loss(p):
        logits = Transformer(cfg).apply({"params": p}, tokens).logits
        nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], -1)[..., 0]
        return jnp.sum(nll * weight) / jnp.sum(weight), logits

    @jax.jit
    def step(p, s):
        (_, logits), g = jax.value_and_grad(loss, has_aux=True)(p)
        right = jnp.all((jnp.argmax(logits, -1) == targets) | (weight == 0))
        updates, s = opt.update(g, s)
        return optax.apply_updates(p, updates), s, right

    state = opt.init(params)
    for _ in range(300):
        new, state, right = step(params, state)
        if right:  # params (before this update) already emit the call greedily
            break
        params = new
    assert right, "300 steps did not teach the tiny model the tool call"
    first = mask.index(1)
    return jax.device_get(params), ids[first:]


def test_a_tool_call_the_model_emits_comes_back_as_openai_tool_calls(tiny, tool_caller, tmp_path):
    """The model (tool_caller: trained to call get_weather) is served; greedy, it emits the call
    itself, and the openai client receives message.tool_calls in the OpenAI shape with
    finish_reason 'tool_calls', whole and streamed; the log holds the emitted ids."""
    cfg, _ = tiny
    params, emitted = tool_caller
    server = build(serve_block(), cfg, params, TOK, log_dir=str(tmp_path / "log"))
    server.loop.start()
    http, _, port = start_http(make_app(server), "127.0.0.1", 0)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)
        kw = dict(model=MODEL, messages=ASK, tools=WEATHER, max_tokens=len(emitted) + 4)
        r = client.chat.completions.create(**kw)
        (call,) = r.choices[0].message.tool_calls
        assert call.type == "function" and call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None
        rec = logged(str(tmp_path / "log"))[r.id]
        assert rec["tokens"][rec["prompt_len"] :] == emitted  # the model's own tokens
        chunks = list(client.chat.completions.create(stream=True, **kw))
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
        assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [
            ("get_weather", {"city": "Paris"})
        ]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
    finally:
        http.should_exit = True
        server.loop.stop()


def test_feedback_is_logged_and_unknown_id_is_404(served):
    client = served["client"]
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=3
    )
    body = {"response_id": r.id, "signal": "edited", "final_text": "y = 1"}
    out = client.post("/feedback", body=body, cast_to=object)
    assert out["response_id"] == r.id
    fb = [rec for _, rec in read_log(served["log"]) if rec["kind"] == "feedback"]
    assert fb[-1]["response_id"] == r.id and fb[-1]["final_text"] == "y = 1"
    with pytest.raises(openai.NotFoundError):
        client.post("/feedback", body={"response_id": "nope", "signal": "accepted"}, cast_to=object)
    with pytest.raises(openai.BadRequestError, match="rating"):
        client.post(
            "/feedback", body={"response_id": r.id, "signal": "rating", "rating": 9}, cast_to=object
        )


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        (dict(model="gpt-5"), openai.NotFoundError, "does not exist"),
        (dict(messages=[{"role": "user", "content": "a" * 300}]),
         openai.BadRequestError, "context"),
        (dict(messages=[{"role": "robot", "content": "hi"}]), openai.BadRequestError, "role"),
        (dict(messages=[]), openai.BadRequestError, "non-empty"),
        (dict(tools=[{"type": "function", "function": {"name": "a b"}}]),
         openai.BadRequestError, "name"),
        (dict(temperature=2.5), openai.BadRequestError, "temperature"),
        (dict(max_tokens=0), openai.BadRequestError, "max_tokens"),
        (dict(top_p=0), openai.BadRequestError, "top_p"),
        (dict(extra_body={"top_k": 1.5}), openai.BadRequestError, "top_k"),
        (dict(stop=["a", "b", "c", "d", "e"]), openai.BadRequestError, "stop"),
        (dict(seed=-1), openai.BadRequestError, "seed"),
        (dict(n=0), openai.BadRequestError, "n=0"),
        (dict(n=5), openai.BadRequestError, r"n=5: must be an integer in \[1, 4\]"),
        (dict(logprobs=True, top_logprobs=21), openai.BadRequestError, "top_logprobs=21"),
        (dict(top_logprobs=2), openai.BadRequestError, "top_logprobs needs logprobs"),
        (dict(extra_body={"logprobs": 3}), openai.BadRequestError, "logprobs=3: must be true"),
    ],
)  # fmt: skip
def test_bad_requests_get_openai_errors(served, kwargs, error, text):
    args = dict(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    with pytest.raises(error, match=text) as e:
        served["client"].chat.completions.create(**dict(args, **kwargs))
    assert e.value.body["type"] in ("invalid_request_error", "not_found_error")


def test_models_health_metrics_and_malformed_json(served):
    assert [m.id for m in served["client"].models.list()] == [MODEL]
    port = served["port"]
    assert json.loads(http(port, "/health")[1])["status"] == "ok"
    status, body = http(port, "/v1/chat/completions", b"{not json")
    assert status == 400 and "JSON" in json.loads(body)["error"]["message"]
    metrics = http(port, "/metrics")[1]
    for name in ("serve_requests_total", "serve_tokens_per_second", "serve_queue_depth",
                 "serve_params_version",
                 'serve_request_latency_seconds{quantile="0.99"}'):  # fmt: skip
        assert name in metrics
    assert 'endpoint="/v1/chat/completions",status="200"' in metrics
    assert 'endpoint="/v1/completions",status="200"' in metrics
    # speculative decoding (K=2): the engine's counters, read after the requests above decoded
    value = {ln.split()[0]: float(ln.split()[1]) for ln in metrics.splitlines() if ln[0] != "#"}
    drafted, accepted = (
        value["serve_spec_drafted_tokens_total"],
        value["serve_spec_accepted_tokens_total"],
    )
    assert drafted > 0 and 0 <= accepted <= drafted
    assert value["serve_spec_acceptance"] == pytest.approx(accepted / drafted, abs=1e-6)
    assert 1.0 <= value["serve_tokens_per_verify_step"] <= 3.0  # K=2: at most 2 drafts + 1


NAMES = {pr.token_text(TOK, t)[0]: t for t in range(TOK.vocab_size)}  # OpenAI name -> id


def raw_reference(cfg, params, rec):
    """[n,V] float64 log-probs of the model's own distribution (valid ids, no temperature or
    filter) at each of a logged completion's positions, and the completion's own."""
    plen, tokens = rec["prompt_len"], rec["tokens"]
    n = len(tokens) - 1
    ids = np.zeros((1, REF_LEN), np.int32)
    ids[0, :n] = tokens[:-1]
    forced = np.zeros((cfg.num_moe_layers, 1, REF_LEN, cfg.num_experts_per_tok), np.int32)
    forced[:, 0, :n] = np.asarray(rec["experts"])[:, :-1]
    z = np.asarray(_ref_logits(cfg, params, jnp.asarray(ids), jnp.asarray(forced))[0], np.float64)
    z = np.where(np.arange(z.shape[-1]) < TOK.vocab_size, z[plen - 1 : n], -np.inf)
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def check_top(ref_row, top: list[tuple[int, float]], k: int, sampled: int, atol=1e-4):
    """top (ids, log-probs) are k, sorted, the reference's k largest (ties within atol), at the
    reference's values; the sampled token is among them when the reference ranks it in the k."""
    ids, lps = [t for t, _ in top], np.array([lp for _, lp in top])
    assert len(top) == k and np.all(np.diff(lps) <= 0)
    np.testing.assert_allclose(lps, ref_row[ids], atol=atol)
    kth = np.sort(ref_row)[::-1][k - 1] if k else np.inf
    assert np.all(ref_row[ids] >= kth - atol)
    if ref_row[sampled] > kth + atol:
        assert sampled in ids


def test_chat_logprobs_are_the_raw_model_distribution(served, tiny):
    """logprobs + top_logprobs=5 at temperature 0.7 (speculative, K=2: accepted drafts report the
    main model's): each token's log-prob and its top 5 equal the float64 forward's log_softmax at
    temperature 1 without filters (vLLM's raw_logprobs), not the sampler's (logged) ones; the
    stream's chunks reassemble to the whole response, log-probs included."""
    cfg, params = tiny
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "def f(x):"}], max_tokens=10,
              temperature=0.7, seed=3, logprobs=True, top_logprobs=5)  # fmt: skip
    r = served["client"].chat.completions.create(**kw)
    rec = logged(served["log"])[r.id]
    ref, got = raw_reference(cfg, params, rec), r.choices[0].logprobs.content
    emitted = pr.strip_stop(TOK, rec["tokens"][rec["prompt_len"] :])
    assert [NAMES[e.token] for e in got] == emitted
    lps = np.array([e.logprob for e in got])
    np.testing.assert_allclose(lps, ref[np.arange(len(emitted)), emitted], atol=1e-4)
    sampler = np.array(rec["logprobs"][rec["prompt_len"] :][: len(emitted)])
    assert np.abs(lps - sampler).max() > 1e-2  # temperature 0.7's are another distribution
    for row, e, t in zip(ref, got, emitted):
        assert e.bytes == pr.token_text(TOK, t)[1]
        check_top(row, [(NAMES[a.token], a.logprob) for a in e.top_logprobs], 5, t)
    chunks = list(served["client"].chat.completions.create(stream=True, **kw))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs
                for e in c.choices[0].logprobs.content]  # fmt: skip
    assert [e.token for e in streamed] == [e.token for e in got]
    np.testing.assert_allclose([e.logprob for e in streamed], lps, atol=1e-5)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == r.choices[0].message.content


def test_completion_logprobs_in_the_legacy_shape(served, tiny):
    """logprobs=3: tokens, token_logprobs (= the raw reference), top_logprobs (the top 3 and the
    sampled token), text_offset (where each token's text starts); streamed the same."""
    cfg, params = tiny
    kw = dict(model=MODEL, prompt="x = [", max_tokens=8, temperature=1.0, seed=1, logprobs=3)
    r = served["client"].completions.create(**kw)
    lp, rec = r.choices[0].logprobs, logged(served["log"])[r.id]
    ref = raw_reference(cfg, params, rec)
    emitted = pr.strip_stop(TOK, rec["tokens"][rec["prompt_len"] :])
    assert [NAMES[t] for t in lp.tokens] == emitted
    np.testing.assert_allclose(lp.token_logprobs, ref[np.arange(len(emitted)), emitted], atol=1e-4)
    for row, top, t in zip(ref, lp.top_logprobs, emitted):
        # the top 3 and the sampled token: a 4th entry ranks below the 3
        assert len(top) in (3, 4) and pr.token_text(TOK, t)[0] in top
        check_top(
            row, sorted(((NAMES[a], b) for a, b in top.items()), key=lambda x: -x[1])[:3], 3, t
        )
    text = TOK.decode(emitted)
    assert r.choices[0].text == text and lp.text_offset[0] == 0
    for i, off in enumerate(lp.text_offset):  # the text before token i is final up to its offset
        assert TOK.decode(emitted[:i])[:off] == text[:off] and off <= len(text)
    assert lp.text_offset == sorted(lp.text_offset)
    chunks = [c.choices[0] for c in served["client"].completions.create(stream=True, **kw)]
    assert "".join(c.text for c in chunks) == text
    for name in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        joined = [x for c in chunks if c.logprobs for x in getattr(c.logprobs, name)]
        if name == "token_logprobs":
            np.testing.assert_allclose(joined, getattr(lp, name), atol=1e-5)
        elif name != "top_logprobs":
            assert joined == getattr(lp, name)


def test_text_offsets_count_whole_characters():
    """A 2-byte character's bytes both start where it does; the final <|end|> is not reported."""
    ids = TOK.encode("é a") + [TOK.special_id("end")]
    raw = (np.zeros(5), np.zeros((5, 1), np.int32), np.zeros((5, 1)))
    lp = pr.TokenLogprobs(TOK, 1, chat=False).push(ids, raw)
    assert lp["tokens"] == ["bytes:\\xc3", "bytes:\\xa9", " ", "a"]
    assert lp["text_offset"] == [0, 0, 1, 2]


def test_n_choices(served, tiny):
    """n=3: temperature 1 with a seed gives 3 different choices, the same 3 again (streamed too:
    chunks reassemble per index); temperature 0 gives 3 copies of model.generate's output. Each
    choice is logged under the response id with its index, which feedback addresses."""
    cfg, params = tiny
    client = served["client"]
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=8, n=3)
    a = client.chat.completions.create(temperature=1.0, seed=11, **kw)
    b = client.chat.completions.create(temperature=1.0, seed=11, **kw)
    texts = [c.message.content for c in a.choices]
    assert [c.index for c in a.choices] == [0, 1, 2] and len(set(texts)) == 3
    assert [c.message.content for c in b.choices] == texts
    chunks = list(client.chat.completions.create(temperature=1.0, seed=11, stream=True, **kw))
    streamed = ["".join(c.choices[0].delta.content or "" for c in chunks
                        if c.choices and c.choices[0].index == i) for i in range(3)]  # fmt: skip
    assert streamed == texts
    log = [rec for _, rec in read_log(served["log"]) if rec.get("id") == a.id]
    assert sorted(rec["choice"] for rec in log) == [0, 1, 2]
    assert a.usage.completion_tokens == sum(len(r["tokens"]) - r["prompt_len"] for r in log)
    assert a.usage.prompt_tokens == log[0]["prompt_len"]
    greedy = client.chat.completions.create(temperature=0.0, **kw)
    want = reference(cfg, params, generation_prompt(TOK, kw["messages"]), 8)
    assert [c.message.content for c in greedy.choices] == [TOK.decode(pr.strip_stop(TOK, want))] * 3
    out = client.post("/feedback", body={"response_id": a.id, "choice": 2, "signal": "accepted"},
                      cast_to=object)  # fmt: skip
    assert out["choice"] == 2
    with pytest.raises(openai.NotFoundError, match="choice 3"):
        client.post("/feedback", body={"response_id": a.id, "choice": 3, "signal": "accepted"},
                    cast_to=object)  # fmt: skip


def test_plain_decoding_records_raw_logprobs_only_when_asked(tiny):
    """The engine without speculation (the served engine speculates): raw log-probs equal the
    reference; a decode call with no request asking is the program without them."""
    cfg, params = tiny
    engine = RolloutEngine(cfg, params, slots=2, cache_len=64, temperature=1.0,
                           valid_vocab=TOK.vocab_size, stop_width=2, top_logprobs=4)  # fmt: skip
    prompt = [TOK.bos_id] + TOK.encode("def g(")
    engine.submit("quiet", prompt, max_new=3, stop_tokens=STOPS)
    assert engine.step() and all(len(k) == 3 for k in engine.programs if k[0] == "decode")
    engine.submit("asks", prompt, max_new=6, stop_tokens=STOPS, logprobs=True)
    (turn,) = engine.step()
    raw, ids, lps = engine.raw_logprobs("asks", turn.start, turn.start + len(turn.tokens))
    experts = engine.finish("asks")
    tokens = prompt + turn.tokens
    rec = dict(prompt_len=len(prompt), tokens=tokens,
               experts=np.moveaxis(np.concatenate([experts, experts[-1:]]), 1, 0))  # fmt: skip
    ref = raw_reference(cfg, params, rec)
    np.testing.assert_allclose(raw, ref[np.arange(len(turn.tokens)), turn.tokens], atol=1e-4)
    for row, i, lp, t in zip(ref, ids, lps, turn.tokens):
        check_top(row, list(zip(i.tolist(), lp.tolist())), 4, t)
    assert any(k[0] == "decode" and k[-1] == "raw_logprobs" for k in engine.programs)


def replay(cfg, params0, params1, prompt, head, max_new):
    """A swap from params0 to params1 after the tokens `head` (teacher-forced under params0),
    on a fresh plain engine (greedy speculative decoding emits exactly the plain greedy tokens;
    a plain step emits one token per iteration, so the swap lands after exactly len(head))."""
    engine = RolloutEngine(cfg, params0, slots=1, cache_len=SERVED_CACHE_LEN, temperature=0.0,
                           valid_vocab=TOK.vocab_size, stop_width=2)  # fmt: skip
    engine.submit(0, prompt, max_new=max_new, stop_tokens=STOPS, forced=head)
    turns = engine.step(len(head)) if head else []
    engine.set_params(params1, 1)
    while not turns:
        turns = engine.step()
    return turns[0].tokens


def test_hot_swap_mid_stream_drops_and_corrupts_nothing(served, tiny):
    """Runs last in this module (it promotes version 1 to the module's server)."""
    cfg, params0 = tiny
    params1 = jax.device_get(init_params(cfg, jax.random.PRNGKey(1)))
    WeightWriter(served["store"], dtype="float32").publish(params0, 0)
    # Written before the streams start, promoted once they run: the swap then waits only for the
    # follower's poll (0.05 s), and 200-token streams outlast it by far on a loaded machine.
    WeightWriter(served["store"], dtype="float32").publish(params1, 1)
    client, n = served["client"], 4
    started, ids, results = threading.Event(), [], {}

    def stream(i):
        messages = [{"role": "user", "content": f"request {i}"}]
        chunks = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=200, stream=True
        )
        for c in chunks:
            started.set()
            ids.append(c.id)
            if c.choices and c.choices[0].finish_reason:
                results[i] = c.model_extra["params_versions"]

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(stream, i) for i in range(n)]
        started.wait(60)
        Promotions(served["store"]).promote(1)
        for f in futures:
            f.result(timeout=120)
    assert sorted(results) == list(range(n))  # every request finished
    assert any(v == [0, 1] for v in results.values())  # some were swapped mid-stream
    log = logged(served["log"])
    for rid in set(ids):
        rec = log[rid]
        plen, vers = rec["prompt_len"], rec["versions"][rec["prompt_len"] :]
        got = rec["tokens"][plen:]
        n0 = vers.count(0)
        assert vers == [0] * n0 + [1] * (len(vers) - n0)  # one swap, between two tokens
        want = replay(cfg, params0, params1, rec["tokens"][:plen], got[:n0], len(got))
        assert got == want  # the exact tokens of a swap at that point: nothing corrupted
    assert json.loads(http(served["port"], "/health")[1])["params_version"] == 1


def test_load_bench_tiny_then_sigterm_under_load():
    """bench/load_serve.py --tiny: `main.py --mode=serve` (tiny params, keys from an environment
    variable) under 4 clients over 2 keys with a share of invalid requests, then SIGTERM with
    streams in flight. Every status is a deliberate one (no 500, no cut stream), no accepted
    response is missing from the log, each in-flight stream completes or gets a clean error, and
    the server exits 0 with no C++ abort at interpreter exit (every thread that enters JAX or
    tensorstore is stopped and joined first, server.py `serve`), its log intact."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "bench/load_serve.py", "--tiny"], cwd=root,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["accepted"] > 0 and set(r["status"]) <= {"200", "400", "401", "404", "413", "429"}
    assert r["missing"] == 0 and r["completed_missing"] == 0 and r["torn"] == 0
    assert r["sigterm_outcomes"] and all(
        x == "completed" or x.startswith("clean error") for x in r["sigterm_outcomes"]
    )
    assert r["exit"] == 0 and not r["abort"] and not r["keys_in_stderr"]


UNSTOPPED = """
import atexit, tempfile
from rl.serve.engine_loop import EngineLoop
from rl.serve.follow import PromotedFollower

class Engine:  # a stand-in: an idle loop reads only .version and the speculative counters
    def counters(self):
        return {}

    version = 0

loop = EngineLoop(Engine()).start()
follower = PromotedFollower(tempfile.mkdtemp(), loop, poll_s=1e-4, log=lambda _: None).start()
atexit._run_exitfuncs()  # what interpreter exit runs before finalizing
print(loop.thread.is_alive(), follower.thread.is_alive())
"""


def test_unstopped_threads_are_joined_at_exit():
    """The engine loop and the follower, never stopped, are stopped and joined by the exit
    handlers, before CPython finalizes: a daemon thread still inside tensorstore or JAX then is
    killed there and aborts the process ('terminate called without an active exception', exit
    134: the bench's abort, whose follower polled tensorstore every 0.1 s and was never
    stopped; an exit with such a follower aborted 3 times in 6)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", UNSTOPPED], cwd=root, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stderr[-2000:]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--mode=serve", "--params=/nonexistent/params"], "error: --params=/nonexistent/params"),
        (["--mode=rl", "--config=configs/realtime.py"], "config error: realtime.params"),
        (
            ["--mode=serve", "--config=configs/serve.py", "--config.serve.host=0.0.0.0"],
            "config error: serve.host=0.0.0.0: a non-loopback bind needs serve.api_keys",
        ),
        (
            ["--mode=serve", "--config=configs/serve.py", f"--config.serve.api_keys={KEY_A}"],
            "config error: serve.api_keys: not 'env:NAME' nor an existing file",
        ),
    ],
)
def test_cli_bad_input_is_one_line(args, expected, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "main.py", *args, f"--workdir={tmp_path}"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [line for line in out.stderr.splitlines() if "error: " in line]
    assert out.returncode == 2 and len(lines) == 1 and expected in lines[0], out.stderr[-2000:]
    assert KEY_A not in out.stderr + out.stdout


# -- exposing the server (issue 54): keys, attribution, limits, vanished clients


def test_keys_401_without_a_valid_key_health_open_metrics_keyed(served):
    port, base = served["port"], f"http://127.0.0.1:{served['port']}/v1"
    args = dict(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    for key in ("sk-wrong-key-000000", ""):
        c = openai.OpenAI(base_url=base, api_key=key or "-", max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="API key") as e:
            c.chat.completions.create(**args)
        assert e.value.body["type"] == "invalid_request_error"
        assert e.value.body["code"] == "invalid_api_key"
    for path in ("/v1/models", "/v1/completions", "/v1/feedback", "/metrics"):
        status, body = http(port, path, b"{}" if "v1/c" in path or "feed" in path else None, None)
        assert status == 401 and "Authorization: Bearer" in json.loads(body)["error"]["message"]
    assert http(port, "/health", key=None)[0] == 200  # a load balancer's probe needs no key
    assert http(port, "/metrics")[0] == 200
    bob = openai.OpenAI(base_url=base, api_key=KEY_B, max_retries=0)
    assert bob.chat.completions.create(**args).choices  # every configured key works


def test_feedback_only_from_the_key_that_got_the_response(served):
    """403 for another key's response; one signal per (response, choice): a later one replaces
    the earlier, the log says which, and the cycle reads only the latest; the window refuses
    feedback on an older response; every record carries the key id, never the key."""
    from rl.serve.auth import key_id
    from rl.serve.feedback import read_signals
    from rl.serve.interaction_log import end_positions

    alice, server = served["client"], served["server"]
    bob = openai.OpenAI(base_url=str(alice.base_url), api_key=KEY_B, max_retries=0)
    r = alice.completions.create(model=MODEL, prompt="fb", max_tokens=3)
    start = end_positions(served["log"])
    with pytest.raises(openai.PermissionDeniedError, match="not served to this API key"):
        bob.post("/feedback", body={"response_id": r.id, "signal": "accepted"}, cast_to=object)
    first = alice.post(
        "/feedback", body={"response_id": r.id, "signal": "accepted"}, cast_to=object
    )
    second = alice.post(
        "/feedback", body={"response_id": r.id, "signal": "rejected"}, cast_to=object
    )
    assert first["replaces"] is None and second["replaces"] == first["id"]
    log = [rec for _, rec in read_log(served["log"])]
    ex = next(x for x in log if x["kind"] == "exchange" and x["id"] == r.id)
    fbs = [x for x in log if x["kind"] == "feedback" and x["response_id"] == r.id]
    assert ex["key_id"] == key_id(KEY_A) and [f["key_id"] for f in fbs] == [key_id(KEY_A)] * 2
    assert [f["replaces"] for f in fbs] == [None, first["id"]]  # bob's 403 was never logged
    _, latest = read_signals(served["log"], start, end_positions(served["log"]))
    assert latest[(r.id, 0)]["signal"] == "rejected"
    server.feedback_window_s = 1e-3  # the response is older than that by now
    try:
        with pytest.raises(openai.BadRequestError, match="older than the feedback window"):
            alice.post(
                "/feedback", body={"response_id": r.id, "signal": "accepted"}, cast_to=object
            )
    finally:
        server.feedback_window_s = serve_block().feedback_window_s


def test_keys_are_never_in_the_log_or_the_server_in_clear(served):
    served["client"].completions.create(model=MODEL, prompt="k", max_tokens=2)
    blob = b"".join(open(p, "rb").read() for p in glob.glob(os.path.join(served["log"], "*")))
    assert KEY_A.encode() not in blob and KEY_B.encode() not in blob
    assert KEY_A not in repr(vars(served["server"].keys))


@pytest.fixture
def limited(served):
    """The running server with small limits, restored afterwards (no second engine to compile)."""
    from rl.serve.auth import Limiter

    server = served["server"]
    saved = server.limits, server.max_body_bytes, server.max_n, server.limiter
    server.limits = pr.Limits(max_messages=3, max_tools=1, max_stop=2, max_tokens=20)
    server.max_body_bytes, server.max_n = 4096, 2
    server.limiter = Limiter(rate_per_s=0.2, burst=3, max_concurrent=1)
    yield served
    server.limits, server.max_body_bytes, server.max_n, server.limiter = saved


def test_limits_413_400_and_429_with_retry_after(limited):
    from rl.serve.auth import Limiter

    port, server = limited["port"], limited["server"]
    server.limiter.rate = 0  # the size limits first
    status, body = http(port, "/v1/completions", b'{"prompt": "' + b"a" * 5000 + b'"}')
    assert status == 413 and "over 4096 bytes" in json.loads(body)["error"]["message"]
    tool = {"type": "function", "function": {"name": "f"}}
    many = [{"role": "user", "content": "x"}] * 4
    for kw, text in [(dict(messages=many), "messages: 4 given"), (dict(tools=[tool] * 2), "tools"),
                     (dict(stop=["a", "b", "c"]), "stop: 3"), (dict(n=3), "n=3"),
                     (dict(max_tokens=21),
                      "max_tokens=21: this server allows at most 20")]:  # fmt: skip
        args = dict(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        with pytest.raises(openai.BadRequestError, match=text) as e:
            limited["client"].chat.completions.create(**dict(args, **kw))
        assert "\n" not in e.value.body["message"]  # one line
    # a bucket of 2 refilled at 0.2/s: two requests pass (here to a 404), the third waits 5 s
    server.limiter = Limiter(rate_per_s=0.2, burst=2, max_concurrent=0)
    assert [http(port, "/v1/completions", b"{}")[0] for _ in range(2)] == [404, 404]
    status, body, head = http(port, "/v1/completions", b"{}", headers="return")
    assert status == 429 and json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    assert 4 <= int(head["retry-after"]) <= 5
    assert http(port, "/v1/completions", b"{}", key=KEY_B)[0] == 404  # per key: bob's is full


def test_concurrency_limit_and_a_vanished_client_frees_its_slot(limited):
    """max_concurrent 1: a second request of the key while a stream is open gets 429; the first
    client then disconnects mid-stream: the engine ends its turn at the next round (the job is
    cancelled, not finished: nothing logged), the slot and the key's concurrency are freed."""
    import socket
    import time

    server, port = limited["server"], limited["port"]
    server.limiter.rate = 0  # only the concurrency limit here
    server.limits = dataclasses.replace(server.limits, max_tokens=200)
    args = dict(model=MODEL, prompt="long", max_tokens=200, temperature=1.0)
    seed = next(s for s in range(20)  # one whose completion runs to max_tokens (seeded: again)
                if limited["client"].completions.create(**args, seed=s).usage.completion_tokens
                == 200)  # fmt: skip
    before = server.loop.cancels
    body = json.dumps(dict(args, stream=True, seed=seed)).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Authorization: Bearer {KEY_A}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                 + body)  # fmt: skip
    got = b""
    while b"data: " not in got:  # streaming: its slot is held
        got += sock.recv(4096)
    rid = json.loads(got.split(b"data: ")[1].split(b"\n")[0])["id"]
    with pytest.raises(openai.RateLimitError, match="concurrency limit") as e:
        limited["client"].completions.create(model=MODEL, prompt="x", max_tokens=2)
    assert e.value.response.headers["Retry-After"] == "1"
    sock.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (server.loop.cancels == before
                                           or server.loop.depth != (0, 0)
                                           or server.limiter.running[key_id(KEY_A)]):  # fmt: skip
        time.sleep(0.02)
    assert server.loop.depth == (0, 0) and server.limiter.running[key_id(KEY_A)] == 0
    assert server.loop.cancels == before + 1  # ended by the cancel, not by its 200 tokens
    assert rid not in logged(limited["log"])  # never answered, never logged
    # the same request whole (not streamed): the client goes once it is decoding
    sock = socket.create_connection(("127.0.0.1", port))
    body = json.dumps(dict(args, seed=seed)).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Authorization: Bearer {KEY_A}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                 + body)  # fmt: skip
    while server.loop.depth[1] == 0 and time.monotonic() < deadline + 30:
        time.sleep(0.01)
    sock.close()
    while server.loop.cancels == before + 1 and time.monotonic() < deadline + 60:
        time.sleep(0.02)
    assert server.loop.cancels == before + 2
    # a client that stops reading holds its slot until serve.request_timeout_s at most
    server.loop.timeout_s = 0.05
    try:
        with pytest.raises(openai.InternalServerError, match=r"cancelled: past 0.05 s"):
            limited["client"].completions.create(**args, seed=seed)
    finally:
        server.loop.timeout_s = serve_block().request_timeout_s
    assert server.loop.cancels == before + 3
    assert limited["client"].completions.create(model=MODEL, prompt="x", max_tokens=2).choices


def test_public_bind_needs_keys_and_keys_come_from_a_file_or_the_environment(tmp_path):
    from model.errors import ConfigError
    from rl.serve.auth import check_bind, load_keys

    with pytest.raises(ConfigError, match=r"serve.host=0.0.0.0: a non-loopback bind needs"):
        check_bind("0.0.0.0", load_keys(""), allow_open=False)
    check_bind("0.0.0.0", load_keys(""), allow_open=True)  # said explicitly
    check_bind("::1", load_keys(""), allow_open=False)  # loopback
    os.environ["TEST_SERVE_KEYS"] = f"{KEY_A},{KEY_B}"
    try:
        keys = load_keys("env:TEST_SERVE_KEYS")
    finally:
        del os.environ["TEST_SERVE_KEYS"]
    assert keys.check(f"Bearer {KEY_B}") == key_id(KEY_B) != key_id(KEY_A)
    check_bind("0.0.0.0", keys, allow_open=False)
    with pytest.raises(ConfigError, match="not 'env:NAME' nor an existing file") as e:
        load_keys(KEY_A)  # a key typed on the command line: refused, never echoed
    assert KEY_A not in str(e.value)


def test_bad_serve_limits_are_one_line_config_errors():
    from model.errors import ConfigError
    from rl.serve.server import check_block

    check_block(serve_block())
    for name, value, text in [("max_body_bytes", 0, "must be a number > 0"),
                              ("rate_per_s", -1.0, "must be a number >= 0"),
                              ("max_stop", 5, "at most 4")]:  # fmt: skip
        with pytest.raises(ConfigError, match=f"serve.{name}={value}: .*{text}"):
            check_block(serve_block(**{name: value}))


def test_rate_limit_bucket_refills_at_its_rate():
    """The token bucket by hand (a stand-in clock): burst 2 at 0.5 requests/s."""
    from rl.serve.auth import Limiter

    now = [0.0]
    lim = Limiter(rate_per_s=0.5, burst=2, max_concurrent=0, clock=lambda: now[0])
    lim.admit("a"), lim.admit("a")
    with pytest.raises(pr.ApiError) as e:
        lim.admit("a")
    assert e.value.status == 429 and e.value.headers == {"Retry-After": "2"}  # 1 token / 0.5
    lim.admit("b")  # another key's bucket is its own
    now[0] = 1.0  # half a token back: still 429, a second to go
    with pytest.raises(pr.ApiError) as e:
        lim.admit("a")
    assert e.value.headers == {"Retry-After": "1"}
    now[0] = 2.0
    lim.admit("a")
