"""The scripted expert's traces on mined real-repository tasks (rl/envs/repos/expert.py,
rl/envs/repo_traces.py, data/traces/repo_expert_traces.jsonl): strict-protocol turns, solved when
replayed through the environment under the real grader, never from a held-out repository."""

import ast
import json
import os

import pytest

import data
from data.chat import render_messages, tool_call_text
from data.tokenizers import ByteTokenizer
from rl.envs import CodingEnv, parse_turn, run_episode
from rl.envs.repo_traces import check_training_only, recipe_task, write_traces
from rl.envs.repos import holdout, training_pool
from rl.envs.repos import mine as M
from rl.envs.repos.expert import MISTAKES, _read_range, _syntax_slip

TOK = ByteTokenizer()
PATH = os.path.join(data.TRACES_DIR, "repo_expert_traces.jsonl")


def traces():
    with open(PATH, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def turn_ids(message) -> list[int]:
    """An assistant message's ids as the policy emitted them (sentence, calls, <|end|>)."""
    ids = TOK.encode(message["content"])
    for call in message["tool_calls"]:
        ids += TOK.encode(tool_call_text(call["name"], call["arguments"]), allow_special=True)
    return ids + [TOK.special_id("end")]


def test_every_turn_parses_under_the_strict_protocol_and_reads_a_range():
    """Each assistant turn is exactly one well-formed call with the trace's tools; every file read
    is a line range (the function, not the file); the grade is all-pass; a mistaken turn is
    untrained and is followed by trained turns."""
    ts = traces()
    assert len(ts) >= 50
    for t in ts:
        reads = 0
        assistant = [m for m in t["messages"] if m["role"] == "assistant"]
        for m in assistant:
            parsed = parse_turn(TOK, turn_ids(m), tuple(t["tools"]))
            assert parsed.terminated and not parsed.malformed and len(parsed.calls) == 1, t["id"]
            call = parsed.calls[0]
            if call.name == "read_file":
                reads += 1
                assert {"start_line", "end_line"} <= set(call.arguments), t["id"]
        assert reads >= 1 and assistant[-1]["tool_calls"][0]["name"] == "submit"
        assert t["grade"][0] == t["grade"][1] > 0
        untrained = [i for i, m in enumerate(assistant) if m.get("weight") == 0]
        assert len(untrained) == (1 if t["mistake"] else 0), t["id"]
        assert t["mistake"] in (None, *MISTAKES)


def test_traces_come_from_training_repositories_only():
    """No trace's project is held out (read at test time), no task is a suite task, and no
    held-out project's source is in the file (the contamination check, on this file)."""
    ts = traces()
    check_training_only(ts)  # raises on a held-out project or a suite id
    assert {t["project"] for t in ts} <= set(training_pool.training_projects())
    hits = holdout.contamination(
        holdout.held_out_index(holdout.HELD_OUT_REPOS), holdout.trace_documents(PATH)
    )
    assert hits == []


def test_builder_refuses_a_planted_held_out_trace(tmp_path):
    t = dict(traces()[0])
    out = str(tmp_path / "t.jsonl")
    write_traces(out, [t])  # a training trace is written
    planted = dict(t, project="roman", recipe=dict(t["recipe"], project="roman"))
    with pytest.raises(ValueError, match="held-out repository 'roman'"):
        write_traces(out, [t, planted])
    with pytest.raises(ValueError, match=f"held-out repository '{t['project']}'"):
        write_traces(out, [t], held_out=(t["project"],))  # the list is read when it runs
    suite_id = next(iter(training_pool.suite_ids()))
    with pytest.raises(ValueError, match="suite task"):
        write_traces(out, [dict(t, task=suite_id)])
    assert [json.loads(x)["id"] for x in open(out)] == [t["id"]]  # refused: nothing written


def test_training_projects_follow_the_held_out_list(monkeypatch):
    projects = training_pool.training_projects()
    assert not set(projects) & set(holdout.HELD_OUT_REPOS)
    monkeypatch.setattr(holdout, "HELD_OUT_REPOS", (*holdout.HELD_OUT_REPOS, projects[0]))
    assert projects[0] not in training_pool.training_projects()


def test_sft_rows_train_exactly_the_assistant_tokens_of_the_expert_traces():
    """configs/sft.py's repo_expert_traces source packed into 10,240-token rows (every trace whole:
    the longest is 8,809 tokens): each piece is a whole trace, its loss weights its assistant
    mask (mistaken turns untrained)."""
    import dataclasses

    import numpy as np

    from configs import sft
    from data import train_iterator
    from data.packing import iter_pieces
    from train.batches import data_config

    expected = {}
    for t in traces():
        ids, mask = render_messages(TOK, t["messages"])
        assert len(ids) <= 10240
        expected[tuple(ids)] = np.asarray(mask[1:], np.float32)
    cfg = data_config(sft.get_config())
    (source,) = [s for s in cfg.sources if s.name == "repo_expert_traces"]
    assert source.paths == ("data/traces/repo_expert_traces.jsonl",)
    cfg = dataclasses.replace(
        cfg,
        sources=(source,),
        seq_len=10240,
        global_batch_size=2,
        held_out_fraction=0.0,
        strict=True,
        process_index=0,
        process_count=1,
    )
    it, checked = train_iterator(cfg), 0
    for _ in range(4):
        for piece in iter_pieces(next(it)):
            assert piece["ids"][0] == TOK.bos_id
            np.testing.assert_array_equal(piece["weights"], expected[tuple(piece["ids"])])
            checked += 1
    assert checked >= 8


def test_syntax_slip_breaks_the_file_and_read_range_covers_the_edit():
    source = "def f(x):\n    if x > 1:\n        return g(x, 2)\n    return 0\n"
    old, new = "        return g(x, 2)\n", "        return g(2, x)\n"
    bad = _syntax_slip(source, old, new)
    after = source.replace(old, bad, 1)
    with pytest.raises(SyntaxError):
        ast.parse(after)
    assert after.count(bad) == 1 and after.replace(bad, new, 1) == source.replace(old, new, 1)
    assert _read_range(1, 4, 3, 3) == (1, 4)  # a short function: all of it
    assert _read_range(1, 200, 150, 151) == (130, 171)  # a long one: a window around the edit
    assert _read_range(10, 20, 25, 25) == (10, 25)  # the edit is always inside


def replay(trace):
    """The trace's assistant turns replayed through CodingEnv on its rebuilt task."""
    recipe = M.Recipe.from_dict(trace["recipe"])
    task = recipe_task(recipe, trace["statement"])
    turns = [turn_ids(m) for m in trace["messages"] if m["role"] == "assistant"]
    rec = run_episode(CodingEnv(TOK), task, lambda ctx: turns.pop(0))
    return rec


def _pick(mistake):
    return next(t for t in traces() if t["mistake"] == mistake)


def test_a_syntax_slip_trace_replays_to_its_ids_and_solves():
    """Replayed through the environment: the same token ids as the trace renders to, a submit,
    the real grader passing every hidden test after the slip and its recovery."""
    t = _pick("syntax")
    rec = replay(t)
    assert rec.done_reason == "submit" and rec.all_pass and not rec.tampered
    assert rec.malformed_calls == 0
    assert render_messages(TOK, t["messages"])[0] == rec.tokens


@pytest.mark.long
@pytest.mark.parametrize("mistake", [None, "edit_old"])
def test_other_traces_replay_and_solve(mistake):
    t = _pick(mistake)
    rec = replay(t)
    assert rec.done_reason == "submit" and rec.all_pass and not rec.tampered
    assert render_messages(TOK, t["messages"])[0] == rec.tokens


def test_reproduction_command_of_a_quoted_call():
    """A statement that quotes a call and its value gets a one-line reproduction importing the
    call's head from the changed module (src/ layout and package __init__ resolved); none when
    the module does not define the head (no trace in the committed file has a quoted call: the
    mined projects' tests are parametrized, so their statements quote no literal example)."""
    from types import SimpleNamespace

    from rl.envs.repos.expert import _repro_command

    prompt = "`format_version(3, 4, 5)` should return `'3.4.5'`, but it no longer does."
    task = SimpleNamespace(
        prompt=prompt, files={"src/semver/__init__.py": "def format_version(): 0\n"}
    )
    cmd = _repro_command(task, "src/semver/__init__.py")
    assert cmd == (
        'python3 -c "from semver import format_version; print(repr(format_version(3, 4, 5)))"'
    )
    task.files["src/semver/__init__.py"] = "def other(): 0\n"
    assert _repro_command(task, "src/semver/__init__.py") is None
