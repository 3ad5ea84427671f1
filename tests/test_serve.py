"""The OpenAI-compatible server (rl/serve) on loopback, driven by the `openai` client package: the
real tiny model on the one decode engine, real uvicorn on a free port in a thread.

Greedy responses equal model.generate; streaming equals non-streaming; tools in the OpenAI shape
render exactly as the chat template renders the same conversation; feedback is logged (404 for an
unknown id); bad requests get OpenAI-shaped 4xx errors; a hot swap to a newly promoted version in
the middle of streams drops no request and every token is the argmax of the version it records.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import jax
import ml_collections
import numpy as np
import openai
import pytest

from data.chat import generation_prompt, tool_call_text
from data.tokenizers import ByteTokenizer
from model import generate, init_params, presets
from model.engine import RolloutEngine
from rl.serve import protocol as pr
from rl.serve.app import make_app
from rl.serve.follow import PromotedFollower
from rl.serve.interaction_log import read_log
from rl.serve.server import build, start_http
from rl.weight_store import Promotions, WeightWriter

MODEL = "composer-tiny"
TOK = ByteTokenizer()
STOPS = [TOK.special_id("end"), TOK.eos_id]


def serve_block(**kw):
    base = dict(
        model_name=MODEL, tokenizer="byte", slots=4, cache_len=256, min_bucket=16,
        temperature=0.0, seed=0, max_new_tokens=12, speculative_k=2, stream_every=4,
        log_max_bytes=1 << 20,
    )  # fmt: skip
    return ml_collections.ConfigDict(dict(base, **kw))


@pytest.fixture(scope="module")
def tiny():
    cfg = presets.get("tiny")
    return cfg, jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    cfg, params = tiny
    root = tmp_path_factory.mktemp("serve")
    server = build(serve_block(), cfg, params, TOK, log_dir=str(root / "log"))
    server.loop.start()
    store = str(root / "weights")
    follower = PromotedFollower(store, server.loop, poll_s=0.05, log=lambda _: None).start()
    http, _, port = start_http(make_app(server), "127.0.0.1", 0)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)
    yield dict(server=server, client=client, port=port, store=store, log=str(root / "log"))
    http.should_exit = True
    follower.stop()
    server.loop.stop()


def reference(cfg, params, prompt, max_new):
    out = generate(cfg, params, [prompt], max_new, stop_tokens=STOPS, valid_vocab=TOK.vocab_size)
    return out.sequences[0].tokens


def http(port: int, path: str, data: bytes | None = None) -> tuple[int, str]:
    """A raw request (what the openai client cannot send: malformed JSON, /health, /metrics)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", data=data) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


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


def test_tools_render_as_the_chat_template(served):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]  # fmt: skip
    call = {"id": "call_0", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}  # fmt: skip
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
    """The output side of the mapping on ids (a random tiny model emits no calls): a well-formed
    call of a declared tool becomes a tool call, anything else stays text."""
    good = TOK.encode(tool_call_text("get_weather", {"city": "Paris"}), allow_special=True)
    bad = TOK.encode(tool_call_text("rm_rf", {}), allow_special=True)
    ids = TOK.encode("ok ") + good + bad
    content, calls = pr.split_calls(TOK, ids, ["get_weather"])
    assert TOK.decode(content) == "ok " + TOK.decode(bad)
    assert calls == [{"id": "call_0", "type": "function", "function": {
        "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]  # fmt: skip
    assert pr.finish_reason("stop", calls) == "tool_calls"


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
        (dict(messages=[{"role": "user", "content": "a" * 300}]), openai.BadRequestError, "context"),
        (dict(messages=[{"role": "robot", "content": "hi"}]), openai.BadRequestError, "role"),
        (dict(messages=[]), openai.BadRequestError, "non-empty"),
        (dict(tools=[{"type": "function", "function": {"name": "a b"}}]), openai.BadRequestError, "name"),
        (dict(temperature=0.7), openai.BadRequestError, "temperature"),
        (dict(max_tokens=0), openai.BadRequestError, "max_tokens"),
        (dict(top_p=0.5), openai.BadRequestError, "top_p"),
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
                 "serve_params_version", 'serve_request_latency_seconds{quantile="0.99"}'):  # fmt: skip
        assert name in metrics
    assert 'endpoint="/v1/chat/completions",status="200"' in metrics
    assert 'endpoint="/v1/completions",status="200"' in metrics


def replay(cfg, params0, params1, prompt, head, max_new):
    """A swap from params0 to params1 after the tokens `head` (teacher-forced under params0),
    on a fresh plain engine (greedy speculative decoding emits exactly the plain greedy tokens;
    a plain step emits one token per iteration, so the swap lands after exactly len(head))."""
    engine = RolloutEngine(cfg, params0, slots=1, cache_len=256, temperature=0.0,
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
    client, n = served["client"], 4
    started, ids, results = threading.Event(), [], {}

    def stream(i):
        messages = [{"role": "user", "content": f"request {i}"}]
        chunks = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=40, stream=True
        )
        for c in chunks:
            started.set()
            ids.append(c.id)
            if c.choices and c.choices[0].finish_reason:
                results[i] = c.model_extra["params_versions"]

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(stream, i) for i in range(n)]
        started.wait(60)
        WeightWriter(served["store"], dtype="float32").publish(params1, 1)
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


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--mode=serve", "--params=/nonexistent/params"], "error: --params=/nonexistent/params"),
        (["--mode=rl", "--config=configs/realtime.py"], "config error: realtime.params"),
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
