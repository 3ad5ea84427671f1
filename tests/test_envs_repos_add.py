"""`python -m rl.envs.repos add` from every source (NAME==VERSION through pip, a git checkout),
the bad inputs a user brings (tests that need the network, a C extension that does not build, a
release pip cannot fetch, a ref a checkout lacks), DevOps grading of a repository whose setup
makes files (a src layout's link), and a model behind an OpenAI-compatible endpoint as the setup
agent: a local endpoint that answers with a scripted correct setup, endpoints that fail or answer
badly, and this project's own server on the `tiny` preset. No network: pip is given a local
directory, or its runner is replaced at the subprocess boundary."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import shutil
import subprocess
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from data.tokenizers import ByteTokenizer
from rl.envs.repos import fetch as F
from rl.envs.repos.add import AddError, add, load_source, main
from rl.envs.repos.chat_policy import ChatPolicy, SetupModelError, context_messages, openai_tools
from rl.envs.repos.spec import SPEC_FILE, EnvSpec, read_tree

TOK = ByteTokenizer()
SHELF = pathlib.Path(__file__).parent / "envs_fixtures" / "shelf"  # unittest style, src layout


def _sdist(where: pathlib.Path, version: str = "0.1.0") -> pathlib.Path:
    sdist = where / f"shelf-{version}.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        t.add(SHELF, arcname=f"shelf-{version}")
    return sdist


# ---------------------------------------------------------------- sources


def test_requirement_is_fetched_by_pip_download_once_into_the_cache(tmp_path):
    built = _sdist(tmp_path)
    calls = []

    def pip(argv, **kw):  # the subprocess boundary: pip's own download, given a local "index"
        calls.append(argv)
        dest = pathlib.Path(argv[argv.index("-d") + 1])
        shutil.copy(built, dest)
        return subprocess.CompletedProcess(argv, 0, "", "")

    cache = tmp_path / "cache"
    first = F.fetch_sdist("Shelf==0.1.0", cache, run=pip)
    again = F.fetch_sdist("Shelf==0.1.0", cache, run=pip)
    assert first == again == cache / "shelf-0.1.0" / "shelf-0.1.0.tar.gz" and len(calls) == 1
    argv = calls[0]
    assert argv[1:4] == ["-m", "pip", "download"] and "Shelf==0.1.0" in argv
    assert {"--no-deps", "--no-binary", ":all:"} <= set(argv)
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no staging left


def test_a_release_pip_cannot_fetch_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    def pip(argv, **kw):
        err = "ERROR: No matching distribution found for nosuch==9.9\n"
        return subprocess.CompletedProcess(argv, 1, "", "Looking in indexes: x\n" + err)

    monkeypatch.setattr(F.subprocess, "run", pip)
    with pytest.raises(AddError) as e:
        load_source("nosuch==9.9", tmp_path / "cache", log=lambda _: None)
    assert str(e.value) == (
        "pip download nosuch==9.9 failed: ERROR: No matching distribution found for nosuch==9.9"
    )
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("setuptools", "wheel")),
    reason="pip builds an sdist's metadata with setuptools and wheel, not both installed here",
)
def test_requirement_through_the_real_pip_from_a_local_find_links_dir(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    _sdist(index)
    # pip's own settings apply unchanged: here, offline, from a local directory
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")
    name, files, source = load_source("shelf==0.1.0", tmp_path / "cache", log=lambda _: None)
    assert name == "shelf" and files == read_tree(SHELF)
    assert source == str(tmp_path / "cache" / "shelf-0.1.0" / "shelf-0.1.0.tar.gz")


@pytest.mark.network
def test_requirement_from_the_package_index(tmp_path):
    name, files, _ = load_source("roman==4.2", tmp_path / "cache", log=lambda _: None)
    assert name == "roman" and "src/roman.py" in files


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_a_git_checkout_gives_the_tracked_files_at_a_commit(tmp_path):
    repo = tmp_path / "shelf"
    shutil.copytree(SHELF, repo)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    _git(repo, "tag", "v1")
    (repo / "notes.txt").write_text("untracked\n")  # not part of the environment
    (repo / "README.md").write_text("edited, not committed\n")
    name, files, source = load_source(str(repo), log=lambda _: None)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True)
    assert name == "shelf" and source == f"{repo}@{commit.stdout.strip()}"
    assert files == read_tree(SHELF)  # tracked, as committed
    (repo / "src/shelf/extra.py").write_text("X = 1\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    assert "src/shelf/extra.py" in load_source(str(repo), log=lambda _: None)[1]
    _, old, _ = load_source(f"{repo}@v1", log=lambda _: None)  # a ref: the tree as tagged
    assert old == read_tree(SHELF)
    assert load_source(source, log=lambda _: None)[1] == old  # the recorded source reloads
    cache = tmp_path / "cache"  # a git URL (file:// here: no network) is cloned into the cache
    name, cloned, where = load_source(f"file://{repo}@v1", cache, log=lambda _: None)
    assert name == "shelf" and cloned == old and where.startswith(f"{cache}/git/shelf@")
    with pytest.raises(AddError, match=r"^git rev-parse v9 in .*: fatal: "):
        load_source(f"{repo}@v9", log=lambda _: None)


# ---------------------------------------------------------------- bad input


def _folder(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    root.mkdir()
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


def _add_fails(path, specs, capsys) -> str:
    code = main(["add", str(path), "--specs", str(specs), "--timeout", "30", "--tasks", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_a_c_extension_that_does_not_build_is_named(tmp_path, capsys):
    ext = _folder(
        tmp_path / "fast",
        {
            "setup.py": 'from setuptools import Extension, setup\n\nsetup(name="fast", '
            'ext_modules=[Extension("fast", ["fast.c"])])\n',
            "fast.c": "this is not C;\n",
            "test_fast.py": "import fast\n\n\ndef test_add():\n    assert fast.add(1, 2) == 3\n",
        },
    )
    specs = tmp_path / "specs"
    err = _add_fails(ext, specs, capsys)
    assert "the C extension does not build (" in err, err
    assert [p.name for p in specs.iterdir()] == ["fast.rejected.json"]  # no spec, the reason kept


@pytest.mark.long  # 34 s at load 19 (the gate grades twice); fast sibling: the one that fails
@pytest.mark.skipif(not importlib.util.find_spec("setuptools"), reason="no setuptools to build")
def test_a_c_extension_that_builds_is_built_by_setup(tmp_path):
    fast = _folder(
        tmp_path / "fast",
        {
            "setup.py": 'from setuptools import Extension, setup\n\nsetup(name="fast", '
            'ext_modules=[Extension("fast", ["fast.c"])])\n',
            "fast.c": FAST_C,
            "test_fast.py": "import fast\n\n\ndef test_add():\n    assert fast.add(1, 2) == 3\n",
        },
    )
    out = tmp_path / "pool.jsonl"
    spec = add(str(fast), specs=tmp_path / "specs", out=out, tasks=0, timeout_s=60, log=len)
    assert spec.setup == ["python3 setup.py -q build_ext --inplace"]
    assert spec.baseline == {"test_fast.py::test_add": True}


FAST_C = """#include <Python.h>

static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}

static PyMethodDef methods[] = {{"add", add, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit_fast(void) { return PyModule_Create(&module); }
"""


@pytest.mark.needs_bwrap  # unisolated, the sandbox would reach a network where there is one
def test_tests_that_need_the_network_are_named(tmp_path, capsys):
    net = _folder(
        tmp_path / "net",
        {
            "client.py": "import socket\n\n\ndef resolve(host):\n"
            "    return socket.getaddrinfo(host, 443)[0][4][0]\n",
            "test_client.py": "from client import resolve\n\n\ndef test_resolve():\n"
            '    assert resolve("pypi.org")\n',
        },
    )
    specs = tmp_path / "specs"
    err = _add_fails(net, specs, capsys)
    assert "tests need the network, which the sandbox does not have" in err, err
    assert [p.name for p in specs.iterdir()] == ["net.rejected.json"]


# ---------------------------------------------------------------- DevOps on a src layout


def test_devops_grading_remakes_the_setup_products_and_ignores_the_agents(tmp_path):
    """The src layout's link (setup) is a product: grading deletes what the agent left there and
    runs the setup again, so a planted package at that path is never imported, and a task with
    setup but no recorded products is not graded (fail closed)."""
    import os

    from rl.envs.grading import grade_devops as G
    from rl.envs.repos.review_devops import ini_task

    files = read_tree(SHELF)
    spec = EnvSpec("shelf", ["ln -s src/shelf shelf"], "python3 -m pytest -q", ["t"], {"t": True})
    task = ini_task("shelf", files, spec, seed=2)  # pytest.ini's minversion typo
    assert task.setup == spec.setup and task.meta["devops"]["check"] == "python3 -m pytest -q"
    assert G.grade_files(task, files).output.startswith("[devops] task has no baseline")
    task.meta["devops"]["products"] = G.setup_products(task)
    assert task.meta["devops"]["products"] == ["shelf"]
    task.meta["devops"]["baseline"] = sorted(G.baseline_of(task))
    assert len(task.meta["devops"]["baseline"]) == 17
    solved = {**task.files, **task.solution}
    planted = {"shelf/__init__.py": "raise SystemExit('planted')\n"}  # a dir where the link was
    assert G.grade_files(task, {**solved, **planted}).all_pass
    assert not G.grade_files(task, {**task.files, **planted}).passed
    root = tmp_path / "repo"
    for rel, text in solved.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    os.symlink("src/shelf", root / "shelf")  # what the episode's setup made: fine
    assert G.grade_devops(task, str(root)).all_pass
    os.symlink("src/shelf", root / "other")  # anything else the rules refuse, as before
    assert "other is not a regular file" in G.grade_devops(task, str(root)).output


# ---------------------------------------------------------------- a model as the setup agent


def _shelf_proposal():
    return {
        "setup": ["ln -s src/shelf shelf"],
        "test_command": "python3 -m pytest -q",
        "test_files": ["tests/test_eviction.py", "tests/test_stats.py"],
        "notes": ["src layout linked"],
    }


def correct_setup(messages):
    """A scripted correct setup, one tool call per turn, chosen by the number of results."""
    steps = [
        ("list_files", {}),
        ("run", {"command": "ln -s src/shelf shelf"}),
        ("run", {"command": "python3 -m pytest -q --collect-only -q"}),
        ("write_file", {"path": SPEC_FILE, "content": json.dumps(_shelf_proposal())}),
        ("submit", {}),
    ]
    return steps[sum(m["role"] == "tool" for m in messages)]


class Endpoint:
    """An OpenAI-compatible chat endpoint on loopback: `answer(messages)` -> (tool name, args),
    None (text only) or an int (that HTTP status). Keeps every request body."""

    def __init__(self, answer):
        self.answer, self.requests = answer, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                got = outer.answer(body["messages"])
                if got == 400:  # what this project's server (and OpenAI) say of a full context
                    error = {"message": "prompt of 905 tokens leaves no room in the context of 512 "
                             "tokens", "type": "invalid_request_error",
                             "code": "context_length_exceeded"}  # fmt: skip
                    out, status = {"error": error}, got
                elif isinstance(got, int):
                    out, status = {"error": {"message": "overloaded", "type": "server"}}, got
                else:
                    out, status = outer.completion(body, got), 200
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def completion(self, body, got):
        msg = {"role": "assistant", "content": "no idea"}
        if got is not None:
            fn = {"name": got[0], "arguments": json.dumps(got[1])}
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{len(self.requests)}", "type": "function", "function": fn}
            ]}  # fmt: skip
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        choice = {"index": 0, "message": msg, "finish_reason": "stop"}
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [choice], "usage": usage}  # fmt: skip

    def policy(self, max_tokens=64):
        import openai

        client = openai.OpenAI(base_url=self.url, api_key="none", max_retries=0)
        return lambda tok: ChatPolicy(tok, client, "setup-model", max_tokens=max_tokens)

    def close(self):
        self.http.shutdown()


def test_context_reads_back_into_openai_messages():
    from data.chat import render_messages
    from rl.envs.agent.tools import TOOL_SCHEMAS, TOOLS_HELP

    conversation = [
        {"role": "system", "content": "Be brief.\n" + TOOLS_HELP},
        {"role": "user", "content": "set it up"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"name": "list_files", "arguments": {}}],
        },
        {"role": "tool", "content": "a.py\nb.py"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"name": "run", "arguments": {"command": "ls"}},
                {"name": "read_file", "arguments": {"path": "a.py"}},
            ],
        },  # fmt: skip
        {"role": "tool", "content": "[ok] exit_code=0"},
        {"role": "tool", "content": "X = 1"},
    ]
    ids, _ = render_messages(TOK, conversation)
    got = context_messages(TOK, ids + [TOK.special_id("assistant")])
    assert got[0] == {"role": "system", "content": "Be brief."}  # tools go as schemas instead
    calls = [c for m in got if m.get("tool_calls") for c in m["tool_calls"]]
    assert [c["id"] for c in calls] == ["call_0", "call_1", "call_2"]
    assert json.loads(calls[1]["function"]["arguments"]) == {"command": "ls"}
    answered = [(m["tool_call_id"], m["content"]) for m in got if m["role"] == "tool"]
    assert answered == [
        ("call_0", "a.py\nb.py"),
        ("call_1", "[ok] exit_code=0"),
        ("call_2", "X = 1"),
    ]
    assert [t["function"]["name"] for t in openai_tools()] == list(TOOL_SCHEMAS)


def test_a_model_behind_a_local_endpoint_sets_up_the_repository(tmp_path):
    endpoint = Endpoint(correct_setup)
    try:
        specs, lines = tmp_path / "specs", []
        spec = add(str(SHELF), specs=specs, out=tmp_path / "pool.jsonl", tasks=0, timeout_s=60,
                   log=lines.append, policy=endpoint.policy())  # fmt: skip
    finally:
        endpoint.close()
    assert (spec.setup, spec.test_command, spec.test_files) == tuple(
        _shelf_proposal()[k] for k in ("setup", "test_command", "test_files")
    )
    assert len(spec.baseline) == 17 and all(spec.baseline.values())  # as the scripted agent's
    first, second = endpoint.requests[:2]
    assert first["max_tokens"] == 64 and first["model"] == "setup-model"
    assert [t["function"]["name"] for t in first["tools"]][:3] == [
        "list_files",
        "read_file",
        "write_file",
    ]
    assert "<|tool_call|>" not in first["messages"][0]["content"]  # the protocol's syntax: not sent
    result = second["messages"][-1]  # the sandbox's listing came back as the call's result
    assert result["role"] == "tool" and "src/shelf/cache.py" in result["content"]
    assert result["tool_call_id"] == second["messages"][-2]["tool_calls"][0]["id"]
    assert len(endpoint.requests) == 5  # one per turn, submit last


def test_a_model_setup_is_gated_and_its_failures_are_one_line(tmp_path):
    specs = tmp_path / "specs"
    wrong = _shelf_proposal() | {"test_files": ["tests/test_nothing.py"]}
    answers = {
        "wrong": lambda m: (
            correct_setup(m)
            if correct_setup(m)[0] != "write_file"
            else ("write_file", {"path": SPEC_FILE, "content": json.dumps(wrong)})
        ),
        "silent": lambda m: None,  # text, no tool call: the episode ends, nothing proposed
        "full": lambda m: correct_setup(m) if len(m) < 4 else 400,  # its context fills up
        "down": lambda m: 503,
    }
    errors = {}
    for name, answer in answers.items():
        endpoint = Endpoint(answer)
        try:
            with pytest.raises(AddError) as e:
                add(str(SHELF), name=name, specs=specs, out=tmp_path / "p.jsonl", tasks=0,
                    timeout_s=60, log=lambda _: None, policy=endpoint.policy())  # fmt: skip
        finally:
            endpoint.close()
        errors[name] = str(e.value)
        assert "\n" not in errors[name]
    assert "rejected by the gate" in errors["wrong"] and "test_nothing.py" in errors["wrong"]
    assert errors["silent"] == f"silent: rejected: the setup agent wrote no {SPEC_FILE}"
    assert errors["full"].startswith(
        f"full: rejected: the setup agent wrote no {SPEC_FILE} (the model's context is full: "
    ) and errors["full"].endswith("leaves no room in the context of 512 tokens)")
    assert errors["down"].startswith("down: the setup model failed: http://127.0.0.1:")
    assert "InternalServerError" in errors["down"] or "APIStatusError" in errors["down"]
    # the verdicts the gate reached are kept; an endpoint that failed judged nothing
    kept = sorted(p.name for p in specs.iterdir())
    assert kept == ["full.rejected.json", "silent.rejected.json", "wrong.rejected.json"]
    assert not (tmp_path / "p.jsonl").exists()


@pytest.fixture(scope="module")  # builds the tiny model's server: ~35 s at load 19 on 2 cores
def tiny_server(tmp_path_factory):
    import jax

    from configs import serve as serve_config
    from model import init_params, presets
    from rl.serve.app import make_app
    from rl.serve.server import build, start_http

    # tiny's 512 positions hold less than the setup prompt (905 byte tokens): 1024 here (rope)
    cfg = dataclasses.replace(presets.get("tiny"), max_position_embeddings=1024)
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))
    block = serve_config.get_config().serve
    block.update(model_name="composer-tiny", tokenizer="byte", slots=2, cache_len=4096,
                 min_bucket=16, temperature=0.0, seed=0, max_new_tokens=16, speculative_k=0,
                 rate_per_s=0.0, max_concurrent=0)  # fmt: skip
    log = tmp_path_factory.mktemp("serve") / "log"
    server = build(block, cfg, params, TOK, log_dir=str(log), keys=None)
    server.loop.start()
    http, _, port = start_http(make_app(server), "127.0.0.1", 0)
    yield f"http://127.0.0.1:{port}/v1", str(log)
    http.should_exit = True
    server.loop.stop()


@pytest.mark.long  # fast siblings: the local endpoint tests above (same policy, same plumbing)
def test_this_projects_tiny_model_as_the_setup_agent_is_rejected_within_its_limits(
    tiny_server, tmp_path
):
    """The plumbing end to end: the setup prompt and tools reach this project's server, its
    untrained model's turn comes back through the strict parser, the per-turn token limit holds,
    and the repository is rejected (nothing set up), with the verdict kept."""
    import openai

    from rl.serve.interaction_log import read_log

    url, log = tiny_server
    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
    made = []

    def policy(tok):
        made.append(ChatPolicy(tok, client, "composer-tiny", max_tokens=8))
        return made[0]

    specs = tmp_path / "specs"
    with pytest.raises(AddError) as e:
        add(str(SHELF), specs=specs, out=tmp_path / "pool.jsonl", tasks=0, timeout_s=60,
            log=lambda _: None, policy=policy)  # fmt: skip
    assert str(e.value).startswith("shelf: rejected: ")
    assert [p.name for p in specs.iterdir()] == ["shelf.rejected.json"]
    (policy,) = made
    assert 1 <= policy.requests <= 40 and all(n <= 8 for n in policy.usage), policy.usage
    exchanges = [r for _, r in read_log(log) if r["kind"] == "exchange"]
    assert len(exchanges) == policy.requests
    assert "Set up this repository" in json.dumps(exchanges[0])


def test_an_unreachable_endpoint_is_one_line(tmp_path):
    import socket

    import openai

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    policy = ChatPolicy(TOK, client, "m", timeout_s=5)
    with pytest.raises(SetupModelError, match=r"^http://127\.0\.0\.1:\d+/v1/: APIConnectionError"):
        policy([TOK.bos_id])


def test_rl_trains_on_a_task_file(tmp_path):
    """rl.coding.tasks: the pool is the file's tasks (e.g. `add`'s pool), checked before any
    model loads."""
    from configs import rl as rl_config
    from model.errors import ConfigError
    from rl.envs import generate_tasks, save_tasks
    from rl.sampling.rl_tasks import rl_task

    tasks = generate_tasks(3, seed=5)
    save_tasks(tasks, tmp_path / "pool.jsonl")
    config = rl_config.get_config()
    config.rl.task, config.rl.pool_size = "coding", 3
    config.rl.coding.tasks = str(tmp_path / "pool.jsonl")
    spec = rl_task("coding")
    spec.resolve(config)
    assert [spec.make_task(config.rl, j).id for j in range(3)] == [t.id for t in tasks]
    config.rl.pool_size = 4
    with pytest.raises(ConfigError, match=r"^rl.pool_size=4: rl.coding.tasks=.*pool.jsonl holds 3"):
        spec.resolve(config)


def test_a_single_module_src_layout_is_linked_to_the_root():
    """roman 4.2's sdist ships src/roman.py beside src/tests.py: pytest imports it from there,
    the grader only from the root (the gate refused it, 0 graded, before the link)."""
    from rl.envs.repos.setup import src_modules

    files = ["src/roman.py", "src/tests.py", "src/conftest.py", "src/test_x.py", "src/setup.py"]
    assert src_modules(files + ["src/lib_test.py", "src/pkg/__init__.py"]) == ["roman.py"]
    assert src_modules(files + ["roman.py"]) == []  # a copy at the root already


def test_the_command_line_hands_setup_to_the_endpoint(tmp_path, capsys, monkeypatch):
    endpoint = Endpoint(lambda m: None)  # answers in text: nothing set up
    monkeypatch.setenv("SETUP_KEY", "sk-local")
    argv = ["add", str(SHELF), "--specs", str(tmp_path / "specs"), "--tasks", "0"]
    argv += ["--setup-model", endpoint.url, "--setup-model-name", "m", "--setup-max-tokens", "32"]
    try:
        assert main([*argv, "--setup-api-key-env", "SETUP_KEY"]) == 2
    finally:
        endpoint.close()
    assert (
        capsys.readouterr().err == f"error: shelf: rejected: the setup agent wrote no {SPEC_FILE}\n"
    )
    (request,) = endpoint.requests
    assert request["model"] == "m" and request["max_tokens"] == 32
