"""Generates data/traces/coding_traces.jsonl: agent traces that solve small coding tasks with tools.

    python data/traces/make_traces.py            # rewrites the file (deterministic, ~30 s)

Each trace is a chat ({"messages": [...]}, rendered by data/chat.py) in which the assistant uses
three tools, read_file(path), write_file(path, content) and run_command(command), to implement a
stub or fix a bug in a small repository (a module plus a test script), then runs the tests.
Every tool result is real: the files are written to a temporary directory and the test command
is actually executed with this interpreter, so outputs and tracebacks are what Python prints.
A trace is kept only if its final test run passes (and a deliberately wrong first attempt fails).

Flows: "implement" (stub -> code -> tests pass), "retry" (a first attempt with a plausible bug
fails, the agent reads the traceback and fixes it) and "fix" (tests fail on a buggy module; the
agent runs them, reads the code, fixes it).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tasks import MODULES, TASKS  # noqa: E402  (sibling module; the script runs from anywhere)

OUT_PATH = os.path.join(HERE, "coding_traces.jsonl")
NUM_TRACES = 336  # 28 tasks x 12
SEED = 0

SYSTEM = (
    "You are a coding agent working in a small Python repository. Use the tools to inspect and "
    "change files and to run commands: read_file(path), write_file(path, content), "
    "run_command(command). Keep changes minimal and make the tests pass."
)

IMPLEMENT_ASKS = [
    "Implement `{func}` in `{path}`; it is only a stub. `{cmd}` should pass.",
    "`{func}` in {path} raises NotImplementedError. Please implement it so that `{cmd}` passes.",
    "Can you fill in the `{func}` function in {path}? The tests are in {test_path}.",
    "Please write the body of {func} ({path}). Run `{cmd}` to check.",
]
FIX_ASKS = [
    "`{cmd}` is failing. Something is wrong with `{func}` in {path}; please fix it.",
    "There's a bug in `{func}` ({path}): the tests in {test_path} fail. Fix it.",
    "Please fix {func} in {path} so that `{cmd}` passes again.",
]
OPENERS = [
    "Let me look at the stub first.",
    "I'll start by reading {path}.",
    "Reading the module.",
    "First, the current code in {path}.",
]
TEST_LOOKS = [
    "Now the tests, to see the expected behaviour.",
    "Let me check what the tests expect.",
    "And the test file.",
]
RUN_LINES = ["Now I'll run the tests.", "Running the tests.", "Let me verify with the test script."]


def function_source(func: str, args: str, doc: str, body: str) -> str:
    return f'def {func}({args}):\n    """{doc}"""\n{textwrap.indent(body, "    ")}\n'


def test_source(module: str, func: str, cases: list[str]) -> str:
    tests = "\n\n".join(
        f"def test_{func}_{i}():\n    assert {case}\n" for i, case in enumerate(cases, 1)
    )
    return (
        f"import sys\nimport traceback\n\n"
        f'sys.path.insert(0, "{os.path.dirname(module)}")  # run from the repository root\n'
        f"from {os.path.basename(module)[:-3]} import {func}  # noqa: E402\n\n\n{tests}\n\n"
        'if __name__ == "__main__":\n'
        "    failed = 0\n"
        '    tests = [(n, f) for n, f in list(globals().items()) if n.startswith("test_")]\n'
        "    for name, test in tests:\n"
        "        try:\n"
        "            test()\n"
        '            print("PASS", name)\n'
        "        except Exception:\n"
        "            failed += 1\n"
        '            print("FAIL", name)\n'
        "            traceback.print_exc(file=sys.stdout)\n"
        '    print(f"{len(tests) - failed} passed, {failed} failed")\n'
        "    sys.exit(1 if failed else 0)\n"
    )


class Repo:
    """A throwaway directory holding the task's files; run() executes for real."""

    def __init__(self, root: str):
        self.root = root

    def write(self, path: str, content: str) -> str:
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)
        return f"Wrote {len(content.encode())} bytes to {path}."

    def read(self, path: str) -> str:
        with open(os.path.join(self.root, path)) as f:
            return f.read()

    def run(self, command: str) -> tuple[str, int]:
        proc = subprocess.run(
            [sys.executable, *command.split()[1:]],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1"},
        )
        out = (proc.stdout + proc.stderr).replace(self.root + os.sep, "")
        return f"{out}[exit code {proc.returncode}]", proc.returncode


class Trace:
    """Builds the message list while performing each tool call on the repo."""

    def __init__(self, repo: Repo, ask: str):
        self.repo = repo
        self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]

    def call(self, say: str, name: str, **arguments) -> str:
        self.messages.append(
            {
                "role": "assistant",
                "content": say,
                "tool_calls": [{"name": name, "arguments": arguments}],
            }
        )
        if name == "read_file":
            result, rc = self.repo.read(arguments["path"]), 0
        elif name == "write_file":
            result, rc = self.repo.write(arguments["path"], arguments["content"]), 0
        else:
            result, rc = self.repo.run(arguments["command"])
        self.messages.append({"role": "tool", "content": result})
        return rc

    def say(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})


def make_trace(rng: random.Random, task: tuple, flow: str, root: str) -> dict:
    theme, func, args, doc, good, bad, cases = task
    path = rng.choice(MODULES[theme])
    test_path = f"tests/test_{os.path.basename(path)}"
    cmd = f"python {test_path}"
    fmt = dict(func=func, path=path, test_path=test_path, cmd=cmd)
    stub = function_source(func, args, doc, "raise NotImplementedError")
    repo = Repo(root)
    repo.write(path, stub if flow != "fix" else function_source(func, args, doc, bad))
    repo.write(test_path, test_source(path, func, cases))
    asks = FIX_ASKS if flow == "fix" else IMPLEMENT_ASKS
    t = Trace(repo, rng.choice(asks).format(**fmt))
    if flow == "fix":
        rc = t.call("Let me reproduce the failure first.", "run_command", command=cmd)
        assert rc != 0, f"{func}: the bug passes its tests"
        t.call(
            "The failing assertion points at the logic. Let me read the function.",
            "read_file",
            path=path,
        )
    else:
        t.call(rng.choice(OPENERS).format(**fmt), "read_file", path=path)
        if rng.random() < 0.5:
            t.call(rng.choice(TEST_LOOKS), "read_file", path=test_path)
    if flow == "retry":
        t.call(
            f"Implementing `{func}`.",
            "write_file",
            path=path,
            content=function_source(func, args, doc, bad),
        )
        rc = t.call(rng.choice(RUN_LINES), "run_command", command=cmd)
        assert rc != 0, f"{func}: the bug passes its tests"
        say = "A test fails: my first version mishandles that case. Fixing the function."
    else:
        say = f"Writing the {'fix' if flow == 'fix' else 'implementation'} of `{func}`."
    t.call(say, "write_file", path=path, content=function_source(func, args, doc, good))
    rc = t.call(rng.choice(RUN_LINES), "run_command", command=cmd)
    assert rc == 0, f"{func}: the correct body fails its tests:\n{t.messages[-1]['content']}"
    done = "Fixed" if flow == "fix" else "Implemented"
    t.say(f"{done} `{func}` in {path}. All {len(cases)} tests in {test_path} pass.")
    return {"id": None, "task": func, "flow": flow, "messages": t.messages}


def main() -> None:
    rng = random.Random(SEED)
    flows = ["implement", "retry", "fix"]
    traces = []
    for n in range(NUM_TRACES):
        task = TASKS[n % len(TASKS)]
        with tempfile.TemporaryDirectory() as root:
            trace = make_trace(
                rng, task, flows[(n // len(TASKS)) % len(flows)], os.path.realpath(root)
            )
        trace["id"] = f"coding-{n:04d}"
        traces.append(trace)
    with open(OUT_PATH, "w") as f:
        for trace in traces:
            f.write(json.dumps(trace, ensure_ascii=False) + "\n")
    print(f"wrote {len(traces)} traces, {os.path.getsize(OUT_PATH) / 1e6:.2f} MB, to {OUT_PATH}")


if __name__ == "__main__":
    main()
