"""Token-level episodes driven by scripted agents through the real tool protocol.

The scripted agent emits token ids (text + tool calls encoded with the special tokens + <|end|>),
exactly like a sampler would; the env parses, executes and appends observations.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from data.chat import generation_prompt, tool_call_text
from data.tokenizers import ByteTokenizer
from rl.envs import TEMPLATES, CodingEnv, OraclePolicy, Task, generate_task, run_episode
from rl.envs.agent.env import DEFAULT_SYSTEM
from rl.envs.agent.scripted import minimal_edit

TOK = ByteTokenizer()
END = TOK.special_id("end")


class ScriptedAgent:
    """Looks around, applies `edits` with edit/write_file/run, runs the tests, submits."""

    def __init__(self, task, edits):
        self.task, self.edits = task, edits
        self.turns = iter(self._plan())
        self.contexts, self.emitted, self.calls = [], [], 0

    def _plan(self):
        yield "Let me see the repo. " + self._call("list_files", {})
        first = next((p for p in self.edits if p in self.task.files), None)
        if first:
            yield self._call("read_file", {"path": first, "start_line": 1, "end_line": 400})
            assert self.task.files[first] in TOK.decode(
                self.contexts[-1][-4000:]
            )  # saw the real file
        for path, content in self.edits.items():
            if content is None:
                yield self._call("run", {"command": f"rm {path}"})
            elif path in self.task.files and minimal_edit(self.task.files[path], content):
                old, new = minimal_edit(self.task.files[path], content)
                yield "Fixing it.\n" + self._call("edit", {"path": path, "old": old, "new": new})
            else:
                yield self._call("write_file", {"path": path, "content": content})
        yield self._call("run_tests", {})
        yield "Done. " + self._call("submit", {})

    def _call(self, name, args):
        self.calls += 1
        return tool_call_text(name, args)

    def __call__(self, context):
        self.contexts.append(list(context))
        ids = TOK.encode(next(self.turns), allow_special=True) + [END]
        self.emitted.append(ids)
        return ids


def _episode(task, edits, **env_kwargs):
    agent = ScriptedAgent(task, edits)
    record = run_episode(CodingEnv(TOK, **env_kwargs), task, agent)
    return agent, record


# one task per template, difficulties spread over 1..3
TASKS = [generate_task(name, seed=7, difficulty=1 + i % 3) for i, name in enumerate(TEMPLATES)]


def test_scripted_agents_solve_every_template_through_the_tools():
    with ThreadPoolExecutor(2) as pool:  # concurrent episodes, as rollout workers run them
        results = list(pool.map(lambda t: _episode(t, t.solution), TASKS))
    for task, (agent, rec) in zip(TASKS, results):
        assert rec.done_reason == "submit" and rec.all_pass, (task.id, rec)
        assert (
            rec.malformed_calls == 0
            and rec.tool_calls == agent.calls
            and rec.turns == len(agent.emitted)
        )
        _check_token_record(task, agent, rec)


def _check_token_record(task, agent, rec):
    prompt = generation_prompt(
        TOK,
        [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": task.prompt}],
    )
    assert rec.tokens[: rec.prompt_len] == prompt and rec.prompt_len == len(prompt)
    # The record is exactly what the policy saw, then what it emitted last: no re-tokenization.
    assert rec.tokens == agent.contexts[-1] + agent.emitted[-1]
    assert len(rec.mask) == len(rec.tokens) and sum(rec.mask) == sum(map(len, agent.emitted))
    assert rec.turn_spans == [
        (len(c), len(c) + len(e)) for c, e in zip(agent.contexts, agent.emitted)
    ]
    for context, emitted in zip(agent.contexts, agent.emitted):
        span = slice(len(context), len(context) + len(emitted))
        assert rec.tokens[span] == emitted and all(rec.mask[span])
        assert rec.mask[len(context) - 1] == 0 and rec.tokens[len(context) - 1] == TOK.special_id(
            "assistant"
        )
    assert 0 < rec.tool_io_tokens < len(rec.tokens) - rec.prompt_len


def test_wrong_solutions_score_zero_and_doing_nothing_fails():
    picked = [
        t
        for t in TASKS
        if t.meta["template"]
        in ("boundary", "rename", "write_tests", "readme_example", "api_migration")
    ]
    broken = lambda t: {
        p: "raise ImportError('broken')\n" for p, c in t.solution.items() if c is not None
    }
    with ThreadPoolExecutor(2) as pool:
        wrong = list(pool.map(lambda t: _episode(t, broken(t))[1], picked))
        idle = list(pool.map(lambda t: _episode(t, {})[1], picked))
    for task, rec in zip(picked, wrong):
        assert rec.tests_passed == 0 and not rec.all_pass and rec.tests_total > 0, (task.id, rec)
    for task, rec in zip(picked, idle):
        assert not rec.all_pass and rec.tests_passed < rec.tests_total, (task.id, rec)


SIMPLE = Task(
    id="simple",
    prompt="make f return 2",
    files={"m.py": "def f():\n    return 1\n"},
    hidden_tests={"test_m.py": "from m import f\n\ndef test_f():\n    assert f() == 2\n"},
    solution={"m.py": "def f():\n    return 2\n"},
)


def test_malformed_calls_are_flagged_and_the_episode_continues():
    env = CodingEnv(TOK, system_prompt=None)
    env.reset(SIMPLE)
    bad = TOK.encode(
        '<|tool_call|>{"name": "edit", "arguments": {"path": "m.py"}}<|/tool_call|>',
        allow_special=True,
    ) + [END]
    obs, done = env.step(bad)
    obs_lens = [len(obs) - 1]  # minus the next "<|assistant|>" header
    text = TOK.decode(obs)
    assert (
        not done
        and '"error": "malformed_tool_call"' in text
        and "missing required argument 'old'" in text
    )
    assert obs[-1] == TOK.special_id("assistant")
    cut = TOK.encode(
        tool_call_text("read_file", {"path": "m.py"}), allow_special=True
    )  # no <|end|>
    obs, done = env.step(cut)
    obs_lens.append(len(obs) - 2)  # minus the env-inserted <|end|> and the header
    assert (
        not done and obs[0] == END and "return 1" in TOK.decode(obs)
    )  # env closes the turn (mask 0)
    fix = TOK.encode(
        tool_call_text("write_file", {"path": "m.py", "content": "def f():\n    return 2\n"})
        + tool_call_text("submit", {}),
        allow_special=True,
    ) + [END]
    obs, done = env.step(fix)
    rec = env.record()
    assert done and obs == [] and rec.all_pass and rec.done_reason == "submit"
    assert (
        rec.malformed_calls == 1
        and rec.malformed_turns == [0, 1]
        and rec.tool_calls == 3
        and rec.turns == 3
    )
    assert sum(rec.mask) == len(bad) + len(cut) + len(fix)
    # tool I/O = every emitted call span (tags included, <|end|> not) + every tool message
    assert rec.tool_io_tokens == (len(bad) - 1) + len(cut) + (len(fix) - 1) + sum(obs_lens)
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(fix)
    row = json.loads(json.dumps(rec.to_dict()))
    # the grade, not a score of the env's own: the reward is rl/episodes/rewards.py's
    # (rl/episodes/records.py)
    assert row["tokens"] == rec.tokens and row["all_pass"] is True and "reward" not in row
    assert (row["tests_passed"], row["tests_total"], row["tampered"]) == (1, 1, False)


def test_setup_runs_at_reset_and_oracle_policy_solves():
    task = Task(
        id="setup",
        prompt="make f return 2",
        files=dict(SIMPLE.files),
        hidden_tests={
            "test_m.py": "import pathlib\nfrom m import f\n\ndef test_f():\n"
            "    assert f() == 2 and pathlib.Path('gen.txt').read_text() == 'ok'\n"
        },
        solution=dict(SIMPLE.solution),
        setup=["printf ok > gen.txt"],
    )
    rec = run_episode(CodingEnv(TOK), task, OraclePolicy(TOK, task))
    assert rec.all_pass and rec.tool_calls == 4
    failing = Task(
        id="bad-setup", prompt="x", files={}, hidden_tests={}, solution={}, setup=["exit 7"]
    )
    env = CodingEnv(TOK)
    with pytest.raises(
        RuntimeError, match=r"task bad-setup: setup command 0 \('exit 7'\) ended exit:7"
    ):
        env.reset(failing)
    assert env.sandbox is None


def test_turn_limit_and_no_tool_call_end_the_episode():
    env = CodingEnv(TOK, max_turns=2, system_prompt=None)
    env.reset(SIMPLE)
    look = TOK.encode(tool_call_text("list_files", {}), allow_special=True) + [END]
    assert env.step(look)[1] is False
    assert env.step(look) == ([], True)
    assert env.record().done_reason == "turn_limit" and env.record().tests_passed == 0
    env.reset(SIMPLE)
    assert env.step(TOK.encode("I think it's fine.") + [END]) == ([], True)
    assert env.record().done_reason == "no_tool_call" and env.record().turns == 1
    env.reset(SIMPLE)
    with pytest.raises(ValueError, match="emitted token id 272 is outside the vocab"):
        env.step([65, 272])
    env.close()


def test_malformed_streak_ends_the_episode_only_after_consecutive_broken_turns():
    broken = TOK.encode('<|tool_call|>{"name": "list_files"<|/tool_call|>', allow_special=True)
    broken += [END]
    look = TOK.encode(tool_call_text("list_files", {}), allow_special=True) + [END]
    cut_off = TOK.encode(tool_call_text("list_files", {}), allow_special=True)  # no <|end|>
    env = CodingEnv(TOK, max_turns=6, system_prompt=None, max_malformed_streak=2)
    env.reset(SIMPLE)
    # broken, good, broken: never two in a row, the episode goes on
    assert [env.step(ids)[1] for ids in (broken, look, broken)] == [False] * 3
    assert env.step(cut_off) == ([], True)  # a turn without <|end|> counts as broken too
    rec = env.record()
    assert rec.done_reason == "malformed_streak" and rec.turns == 4
    assert rec.malformed_turns == [0, 2, 3] and rec.tests_total == 1  # graded as usual
    env = CodingEnv(TOK, max_turns=3, system_prompt=None)  # default 0: only the turn limit
    env.reset(SIMPLE)
    assert [env.step(broken)[1] for _ in range(3)] == [False, False, True]
    assert env.record().done_reason == "turn_limit" and env.record().malformed_calls == 3
    with pytest.raises(ValueError, match="max_malformed_streak=-1 must be >= 0"):
        CodingEnv(TOK, max_malformed_streak=-1)


CHEAT_CONFTEST = """import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
CHEAT_PYTEST = """import pathlib, sys
pathlib.Path('.hidden_results.xml').write_text('<testsuite><testcase name="x"/></testsuite>')
sys.exit(0)
"""


def test_hidden_tests_are_invisible_and_planted_cheats_do_not_pay():
    env = CodingEnv(TOK, system_prompt=None)
    env.reset(SIMPLE)
    calls = (
        tool_call_text("run", {"command": "ls -a; ls -a .hidden_tests"})
        + tool_call_text("write_file", {"path": "conftest.py", "content": CHEAT_CONFTEST})
        + tool_call_text(
            "write_file", {"path": "test_vis.py", "content": "def test_v():\n    assert False\n"}
        )
        + tool_call_text("run_tests", {})
    )
    obs, _ = env.step(TOK.encode(calls, allow_special=True) + [END])
    text = TOK.decode(obs)
    assert "test_m.py" not in text
    assert "1 passed" in text  # the conftest cheat really flips outcomes in an ordinary run ...
    cheat_pytest = tool_call_text("write_file", {"path": "pytest.py", "content": CHEAT_PYTEST})
    env.step(TOK.encode(cheat_pytest + tool_call_text("submit", {}), allow_special=True) + [END])
    # ... but grading resets conftest.py and runs pytest isolated from the repo's own modules.
    assert env.record().tests_passed == 0 and env.record().tests_total == 1


def test_call_limit_per_turn_and_undecodable_file_names():
    env = CodingEnv(TOK, system_prompt=None, max_calls_per_turn=2)
    env.reset(SIMPLE)
    make_odd = tool_call_text("run", {"command": "touch \"$(printf 'bad\\377name')\""})
    look = tool_call_text("list_files", {})
    obs, done = env.step(TOK.encode(make_odd + look + look, allow_special=True) + [END])
    text = TOK.decode(obs)
    assert not done and "bad\ufffdname" in text and "more than 2 tool calls in one turn" in text
    assert text.count("<|tool_result|>") == 3
    rec = env.record()
    assert rec.tool_calls == 2 and rec.malformed_calls == 1 and rec.malformed_turns == [0]
    env.close()
