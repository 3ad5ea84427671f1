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
    """configs/sft.py's repo_expert_traces source packed into rows that hold the longest trace
    whole: each piece is a whole trace, its loss weights its assistant mask (mistaken turns
    untrained)."""
    import dataclasses

    import numpy as np

    from configs import sft
    from data import train_iterator
    from data.packing import iter_pieces
    from train.batches import data_config

    expected = {}
    for t in traces():
        ids, mask = render_messages(TOK, t["messages"])
        expected[tuple(ids)] = np.asarray(mask[1:], np.float32)
    row = -(-max(map(len, expected)) // 1024) * 1024  # the longest trace, whole
    cfg = data_config(sft.get_config())
    (source,) = [s for s in cfg.sources if s.name == "repo_expert_traces"]
    assert source.paths == ("data/traces/repo_expert_traces.jsonl",)
    cfg = dataclasses.replace(
        cfg,
        sources=(source,),
        seq_len=row,
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


def _pick(mistake, project="semver"):
    """The first trace with `mistake` in `project` (one whose tests run in ~1 s)."""
    return next(t for t in traces() if t["mistake"] == mistake and t["project"] == project)


@pytest.mark.needs_bwrap
def test_a_syntax_slip_trace_replays_to_its_ids_and_solves():
    """Replayed through the environment: the same token ids as the trace renders to, a submit,
    the real grader passing every hidden test after the slip and its recovery. The trace was
    recorded in bubblewrap's sandbox: its tracebacks name the sandbox's paths, which the
    unisolated fallback's differ from."""
    t = _pick("syntax")
    rec = replay(t)
    assert rec.done_reason == "submit" and rec.all_pass and not rec.tampered
    assert rec.malformed_calls == 0
    assert render_messages(TOK, t["messages"])[0] == rec.tokens


@pytest.mark.long
@pytest.mark.needs_bwrap
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


def test_a_killed_trace_run_resumes_without_replaying_what_it_played(tmp_path, monkeypatch):
    """rl.envs.repo_traces main: a run killed after 3 episodes (KeyboardInterrupt from the 4th)
    leaves those 3 in OUT.progress; the rerun plays only the others (a line the kill cut short is
    played again) and writes the same OUT as an uninterrupted run; another --mistake-rate than the
    progress file's is refused in one line. The expert is replaced by a recorder here: what is
    tested is the bookkeeping around it (the expert itself: the tests above)."""
    from rl.envs import repo_traces

    recipes = {t["recipe"]["id"]: t["recipe"] for t in traces()}
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps(r) + "\n" for r in list(recipes.values())[:4]))
    calls, kill_at, failing = [], [4], list(recipes)[1]

    def fake_expert(recipe, k, mistake_rate):
        calls.append((recipe.id, k))
        if len(calls) == kill_at[0]:
            raise KeyboardInterrupt
        if k == 1 and recipe.id == failing:  # a function of the job, like the real expert
            return None, "failed: a planted failure"
        trace = {"id": f"expert-{recipe.id}-{k}", "task": recipe.id, "project": recipe.project,
                 "recipe": recipe.to_dict(), "tokens": 100 + k, "mistake": None}  # fmt: skip
        return trace, "solved"

    monkeypatch.setattr(repo_traces, "expert_trace", fake_expert)
    monkeypatch.setattr(repo_traces, "require_isolation", lambda: None)
    monkeypatch.setattr(repo_traces, "require_test_deps", lambda projects: None)
    argv = lambda out, rate="0.25": ["--pool", str(pool), "--out", str(out), "--per-task", "2",  # noqa: E731
                                     "--workers", "1", "--mistake-rate", rate]  # fmt: skip

    whole = tmp_path / "whole.jsonl"
    kill_at[0] = 0
    assert repo_traces.main(argv(whole)) == 0
    assert len(calls) == 8
    calls.clear()
    kill_at[0] = 4
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        repo_traces.main(argv(out))
    assert not out.exists()
    progress = tmp_path / "out.jsonl.progress"
    lines = progress.read_text().splitlines()
    assert len(lines) == 3
    progress.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # the third cut short
    played_before = calls[:2]
    calls.clear()
    kill_at[0] = 0
    assert repo_traces.main(argv(out)) == 0
    assert not set(calls) & set(played_before) and len(calls) == 6
    assert out.read_text() == whole.read_text() != ""
    calls.clear()
    assert repo_traces.main(argv(out)) == 0 and calls == []  # everything played: nothing again
    assert out.read_text() == whole.read_text()
    assert repo_traces.main(argv(out, rate="0.5")) == 2 and calls == []


def test_a_pool_line_cut_short_is_skipped_and_its_site_mined_again(tmp_path, monkeypatch, capsys):
    """training_pool.mine_pool killed while appending a recipe (its line cut short, its site not
    yet listed as tried): load_pool skips that line with a warning naming it, and the next
    mine_pool tries only that site again and ends the cut line first, so the pool is whole. The
    sandboxed fail->pass check is replaced by a recorder (the bookkeeping is what is tested)."""
    calls = []

    def fake_try_site(name, site):
        calls.append(M.site_id(name, site))
        return M.Recipe(M.site_id(name, site), name, "bugfix", site, ["tests/t.py::test"], "fix")

    monkeypatch.setattr(training_pool, "try_site", fake_try_site)
    monkeypatch.setattr(training_pool, "training_projects", lambda: ["first", "toposort"])
    out = str(tmp_path / "pool.jsonl")
    assert training_pool.mine_pool(out, per_project=2, workers=1, log=lambda m: None) == 4
    whole = [r.to_dict() for r in training_pool.load_pool(out)]
    with open(out) as f:
        lines = f.read().splitlines()
    with open(out, "w") as f:  # the kill: the last recipe half written, its site not tried yet
        f.write("\n".join(lines[:-1]) + "\n" + lines[-1][:50])
    with open(out + ".tried") as f:
        tried = f.read().splitlines()
    with open(out + ".tried", "w") as f:
        f.write("\n".join(tried[:-1]) + "\n")
    assert [r.to_dict() for r in training_pool.load_pool(out)] == whole[:-1]
    assert f"{out}:4: cut short" in capsys.readouterr().err
    calls.clear()
    assert training_pool.mine_pool(out, per_project=2, workers=1, log=lambda m: None) == 4
    assert calls == [tried[-1]]
    assert f"{out}:4: cut short" in capsys.readouterr().err  # said once more, then dropped
    assert [r.to_dict() for r in training_pool.load_pool(out)] == whole
    assert "cut short" not in capsys.readouterr().err
