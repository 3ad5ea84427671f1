"""The agent command (rl/serve/agent.py, `main.py --mode=agent`): one episode on a user's folder
in RL's harness. Scripted turns in-process and through an OpenAI-compatible endpoint (a scripted
stub, and this project's server on loopback with the tiny random model): the diff, the folder
untouched without --apply and changed exactly as the diff says with it, the record in the
interaction log read back by the feedback source, and the one-line errors for bad input."""

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

from configs import agent as agent_config
from configs import realtime as realtime_config
from data.chat import generation_prompt, tool_call_text
from data.tokenizers import ByteTokenizer, load_tokenizer
from model.errors import InputError
from rl.serve import agent
from rl.serve import feedback as fbk
from rl.serve.interaction_log import end_positions, read_log

TOK = ByteTokenizer()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
CALLS = [
    {"name": "read_file", "arguments": {"path": "calc.py"}},
    {"name": "edit", "arguments": {"path": "calc.py", "old": "a - b", "new": "a + b"}},
    {"name": "run_tests", "arguments": {}},
    {"name": "submit", "arguments": {}},
]


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    (d / "calc.py").write_text(BUGGY)
    (d / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (d / "data.bin").write_bytes(b"\xff\xfe\x00binary")  # not text: never copied nor touched
    return d


def digest(folder) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, names in sorted(os.walk(folder)):
        dirnames.sort()
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            h.update(p.encode() + b"\0" + open(p, "rb").read())
    return h.hexdigest()


def block(**kw):
    a = agent_config.get_config().agent
    a.update(dict(max_tokens=8192, test_timeout_s=30.0), **kw)
    return a


def scripted_file(tmp_path, calls=CALLS) -> str:
    path = tmp_path / "calls.json"
    path.write_text(json.dumps(calls))
    return str(path)


def feedback_records(log_dir):
    rt = realtime_config.get_config().realtime.copy_and_resolve_references()
    rt.update(dict(max_key_share=1.0))  # one user (no API key): the guard's share is moot here
    return fbk.training_records(
        log_dir, {}, end_positions(log_dir), base_version=0, rt=rt, max_tokens=8192
    )


def test_scripted_episode_diff_then_apply_and_the_record_feeds_rl(repo, tmp_path):
    log_dir, before = str(tmp_path / "log"), digest(repo)
    kw = dict(tok=TOK, log_dir=log_dir, policy_kind="scripted", scripted=scripted_file(tmp_path))
    o = agent.run("add() subtracts; make it add", str(repo), block(), **kw)
    assert (
        "--- a/calc.py\n+++ b/calc.py\n" in o.diff
        and "-    return a - b\n+    return a + b\n" in o.diff
    )
    assert o.env_record.done_reason == "submit" and o.env_record.tool_calls == 4
    assert digest(repo) == before and o.applied == [] and o.signal is None  # no --apply: untouched
    # The same harness as RL: the system prompt with the search tools, the request as the task.
    prompt = generation_prompt(
        TOK,
        [
            {"role": "system", "content": agent.system_prompt(agent.agent_task("x", {}, "p", "t"))},
            {"role": "user", "content": "add() subtracts; make it add"},
        ],
    )
    assert o.env_record.tokens[: o.env_record.prompt_len] == prompt
    assert "- search {" in TOK.decode(prompt)
    (rec,) = [r for _, r in read_log(log_dir)]
    assert rec["kind"] == "exchange" and rec["completion_text"] == o.diff
    assert rec["tokens"] == o.env_record.tokens and rec["mask"] == o.env_record.mask
    assert feedback_records(log_dir)[0] == []  # no signal yet: nothing to train on

    o2 = agent.run("add() subtracts; make it add", str(repo), block(), apply=True, **kw)
    assert o2.diff == o.diff and o2.applied == ["calc.py"] and o2.signal == "accepted"
    assert (repo / "calc.py").read_text() == FIXED and (repo / "data.bin").read_bytes()[
        :2
    ] == b"\xff\xfe"
    records, stats = feedback_records(log_dir)
    (r,) = records  # the accepted episode, as the real-time cycle trains on it
    assert (
        r["id"] == o2.record["id"] and r["reward"] == 1.0 and stats["by_signal"] == {"accepted": 1}
    )
    assert list(r["tokens"]) == o2.env_record.tokens and int(r["mask"].sum()) == sum(
        o2.env_record.mask
    )


def test_reject_logs_the_signal_and_leaves_the_folder(repo, tmp_path):
    log_dir, before = str(tmp_path / "log"), digest(repo)
    o = agent.run(
        "fix add",
        str(repo),
        block(),
        tok=TOK,
        log_dir=log_dir,
        policy_kind="scripted",
        scripted=scripted_file(tmp_path),
        reject=True,
    )
    assert o.signal == "rejected" and digest(repo) == before
    (r,), _ = feedback_records(log_dir)
    assert r["reward"] == -1.0


@pytest.mark.parametrize(
    "case, message",
    [
        ("file", "is not a folder"),
        ("missing", "does not exist"),
        ("large", "too large for the sandbox"),
        ("long_request", "the request does not fit"),
        ("both", "contradict"),
        ("changed", "changed while the agent ran; nothing applied"),
    ],
)
def test_bad_input_is_one_line_and_the_folder_is_untouched(repo, tmp_path, case, message):
    log_dir, before = str(tmp_path / "log"), digest(repo)
    path, a, request, kw = str(repo), block(), "fix add", {}
    if case == "file":
        path = str(repo / "calc.py")
    elif case == "missing":
        path = str(repo / "nope")
    elif case == "large":
        a = block(max_repo_bytes=100)
    elif case == "long_request":
        request = "please " * 2000
    elif case == "both":
        kw = dict(apply=True, reject=True)
    policy = scripted_file(tmp_path)
    if case == "changed":  # the user edits the file while the episode runs: nothing is applied
        kw = dict(apply=True)
        calls = CALLS[:2] + [{"name": "run", "arguments": {"command": "true"}}]
        policy = scripted_file(tmp_path, calls)
        real = agent.run_episode

        def meddle(env, task, pol):
            (repo / "calc.py").write_text(BUGGY + "# mine\n")
            return real(env, task, pol)

        agent.run_episode = meddle
    try:
        with pytest.raises(InputError, match=message) as e:
            agent.run(
                request,
                path,
                a,
                tok=TOK,
                log_dir=log_dir,
                policy_kind="scripted",
                scripted=policy,
                **kw,
            )
    finally:
        agent.run_episode = real if case == "changed" else agent.run_episode
    assert "\n" not in str(e.value)
    if case == "changed":
        assert (repo / "calc.py").read_text() == BUGGY + "# mine\n"
    else:
        assert digest(repo) == before


class _Stub(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint with scripted turns: answers /v1/chat/completions with the
    next turn's text (tool-call spans as the server returns them: their surface text, no `tools`
    sent) and records each request's messages and each /v1/feedback body."""

    turns: list = []
    seen: list = []
    signals: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/v1/feedback":
            type(self).signals.append(body)
            out = {"object": "feedback"}
        else:
            type(self).seen.append(body["messages"])
            text = type(self).turns.pop(0)
            out = {
                "id": f"chatcmpl-{len(self.seen)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text},
                    }
                ],
            }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_endpoint_turns_render_to_the_env_context_and_apply(repo, tmp_path):
    """Through an endpoint each request's messages render (the chat template, the tool budget)
    to exactly the context the environment holds; --apply applies the diff and posts the signal
    for every turn's response."""
    _Stub.turns = ["Reading. " + tool_call_text(c["name"], c["arguments"]) for c in CALLS]
    _Stub.seen, _Stub.signals = [], []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        a = block(obs_token_budget=64)  # calc.py's read and the test run are cut: the trim shows
        o = agent.run(
            "fix add",
            str(repo),
            a,
            tok=TOK,
            log_dir=str(tmp_path / "log"),
            policy_kind="endpoint",
            endpoint=url,
            apply=True,
        )
    finally:
        httpd.shutdown()
    assert (repo / "calc.py").read_text() == FIXED and o.applied == ["calc.py"]
    assert [s["signal"] for s in _Stub.signals] == ["accepted"] * 4
    assert [s["response_id"] for s in _Stub.signals] == [f"chatcmpl-{i}" for i in range(1, 5)]
    rec = o.env_record
    for k, messages in enumerate(_Stub.seen):  # request k: the context before turn k
        rendered = generation_prompt(TOK, agent_messages(messages), a.obs_token_budget)
        start = rec.turn_spans[k][0]
        assert rendered == rec.tokens[:start], f"request {k}"
    assert "characters cut" in TOK.decode(rec.tokens)
    assert not os.path.exists(tmp_path / "log")  # the server logs; the agent posts feedback


def agent_messages(openai_messages):
    """The OpenAI messages as the server's protocol reads them (rl/serve/protocol.py)."""
    from rl.serve import protocol as pr

    return pr.chat_messages(openai_messages, [])


def test_main_py_agent_mode_prints_the_diff_and_one_line_errors(repo, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    base = [
        sys.executable,
        os.path.join(ROOT, "main.py"),
        "--mode=agent",
        f"--workdir={tmp_path / 'w'}",
    ]
    out = subprocess.run(
        base + [f"--repo={repo}", f"--scripted={scripted_file(tmp_path)}", "fix", "add"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("--- a/calc.py") and (repo / "calc.py").read_text() == BUGGY
    assert "not applied (--apply applies it)" in out.stderr
    assert len(list(read_log(str(tmp_path / "w" / "interactions")))) == 1
    bad = subprocess.run(
        base + [f"--repo={repo / 'calc.py'}", "--scripted=x", "fix"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "is not a folder" in bad.stderr


@pytest.fixture(scope="module")
def tiny():
    import jax

    from model import init_params, presets

    cfg = presets.get("tiny", max_position_embeddings=2048)
    return cfg, jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))


# ~60 s: compiles a 2,048-token engine. Fast siblings: the stub endpoint and scripted tests.
@pytest.mark.long
def test_through_this_projects_server_the_turns_are_logged_with_the_users_signal(
    repo, tmp_path, tiny
):
    """The server (rl/serve) on loopback with the tiny random model: its output is garbage, so
    the episode ends after a turn or two with no change; what is asserted is the plumbing: the
    server logged each turn, its first prompt is the environment's prompt token for token, the
    folder is untouched, and the user's reject reaches the feedback source."""
    from configs import serve as serve_config
    from rl.serve.app import make_app
    from rl.serve.server import build, start_http

    cfg, params = tiny
    s = serve_config.get_config().serve
    s.update(dict(slots=1, cache_len=2048, min_bucket=64, temperature=0.0, max_new_tokens=8,
                  rate_per_s=0.0, max_concurrent=0, follow=False))  # fmt: skip
    log_dir = str(tmp_path / "served")
    server = build(s, cfg, params, TOK, log_dir=log_dir)
    server.loop.start()
    http_server, _, port = start_http(make_app(server), "127.0.0.1", 0)
    before = digest(repo)
    try:
        a = block(max_tokens=2048, max_turn_tokens=8, max_turns=2, model_name=s.model_name)
        o = agent.run("fix add", str(repo), a, tok=TOK, log_dir=str(tmp_path / "log"),
                      policy_kind="endpoint", endpoint=f"http://127.0.0.1:{port}/v1",
                      reject=True)  # fmt: skip
    finally:
        http_server.should_exit = True
        server.loop.stop()
    assert digest(repo) == before and o.applied == [] and o.signal == "rejected"
    exchanges = [r for _, r in read_log(log_dir) if r["kind"] == "exchange"]
    assert len(exchanges) == o.env_record.turns >= 1
    first = exchanges[0]
    assert first["tokens"][: first["prompt_len"]] == o.env_record.tokens[: o.env_record.prompt_len]
    records, stats = feedback_records(log_dir)
    assert len(records) == len(exchanges) and {r["reward"] for r in records} == {-1.0}


# ~60 s: compiles a 2,048-token engine. Fast siblings: the stub endpoint and scripted tests.
@pytest.mark.long
def test_in_process_params_play_on_the_engine_and_log_sampler_facts(repo, tmp_path, tiny):
    """--params: the rollout driver on the decode engine (RL's sampler path). The tiny random
    model's turns are garbage; the record holds the engine's log-probs and experts, the folder
    is untouched, and an accepted signal is read back by the feedback source."""
    from model.engine_config import EngineConfig, build_engine

    cfg, params = tiny
    a = block(max_tokens=2048, cache_len=2048, max_turn_tokens=8, max_turns=2, min_bucket=64)
    engine = build_engine(cfg, params, EngineConfig.from_block(a, cfg), valid_vocab=TOK.vocab_size)
    before, log_dir = digest(repo), str(tmp_path / "log")
    o = agent.run("fix add", str(repo), a, tok=TOK, log_dir=log_dir, policy_kind="params",
                  engine=engine, reject=True)  # fmt: skip
    assert digest(repo) == before and o.record["policy"] == "params"
    (r,), _ = feedback_records(log_dir)
    assert list(r["tokens"]) == o.env_record.tokens and r["reward"] == -1.0
    policy = r["mask"] == 1
    assert policy.any() and (r["logprobs"][policy] < 0).all()  # the sampler's own log-probs
    assert r["experts"].shape[0] > 0 and r["experts"].shape[1] == len(r["tokens"])


def test_the_agent_reads_with_the_tokenizer_its_params_were_trained_on(tmp_path):
    """agent.tokenizer '' (the default): the --params export's recorded vocabulary; bytes
    without --params; a contradicting spec or a folder that is no export: one line."""
    from data.export_tokenizer import record_tokenizer
    from model import presets
    from model.export import config_to_json

    fixture = os.path.join(ROOT, "tests/fixtures/data/tokenizer.json")
    export = tmp_path / "export"
    export.mkdir()
    (export / "model_config.json").write_text(config_to_json(presets.get("tiny", vocab_size=400)))
    record_tokenizer(str(export), f"hf:{fixture}")
    want = load_tokenizer(f"hf:{fixture}").encode("def add(a, b):")
    assert agent._tokenizer("", str(export)).encode("def add(a, b):") == want
    assert agent._tokenizer("", "").vocab_size == TOK.vocab_size  # an endpoint: bytes
    with pytest.raises(InputError, match="agent.tokenizer: .* was trained with hf:"):
        agent._tokenizer("byte", str(export))
    with pytest.raises(InputError, match=f"--params={tmp_path}: .*model_config.json: not found"):
        agent._tokenizer("", str(tmp_path))
