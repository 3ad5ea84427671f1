"""SFT: the loss mask covers exactly the assistant tokens after packing; the shipped traces are
sound."""

import dataclasses
import json
import os
import random

import numpy as np
import pytest

import data
from configs import sft
from data import DataConfig, SourceSpec, train_iterator
from data.chat import render_messages
from data.packing import iter_pieces, join_pieces
from data.tokenizers import ByteTokenizer
from rl.envs import TEMPLATES, TOOL_SCHEMAS, CodingEnv, generate_task, parse_turn, run_episode
from rl.envs.agent.env import DEFAULT_SYSTEM
from rl.envs.agent.scripted import MISTAKES
from train.batches import data_config

TOK = ByteTokenizer()
TRACES = os.path.join(data.TRACES_DIR, "coding_traces.jsonl")
SUMMARY_TRACES = os.path.join(data.TRACES_DIR, "summary_traces.jsonl")
TOOL_TRACES = os.path.join(data.TRACES_DIR, "tool_traces.jsonl")
REPO_TRACES = os.path.join(data.TRACES_DIR, "repo_expert_traces.jsonl")


def load_traces(path=TRACES):
    with open(path) as f:
        return [json.loads(line) for line in f]


def expected_by_ids(path=TRACES):
    """ids of each rendered trace -> its target weights (assistant mask shifted by one)."""
    out = {}
    for trace in load_traces(path):
        ids, mask = render_messages(TOK, trace["messages"])
        out[tuple(ids)] = np.asarray(mask[1:], np.float32)
    return out


def _sft_data(seq_len: int, batch_size: int, leave_out: tuple[str, ...] = ()):
    """configs/sft.py's data spec (the trace files at their weights, those named in `leave_out`
    dropped), one process, no hold-out."""
    cfg = data_config(sft.get_config())
    sources = tuple(s for s in cfg.sources if s.name not in leave_out)
    return dataclasses.replace(
        cfg,
        sources=sources,
        seq_len=seq_len,
        global_batch_size=batch_size,
        held_out_fraction=0.0,
        strict=True,
        process_index=0,
        process_count=1,
    )


def test_packed_loss_mask_is_exactly_the_assistant_tokens():
    # rows of 4096 byte tokens hold every trace (coding 1.1k-3.8k, summary segments 1.4k-2.7k) whole
    expected = {
        **expected_by_ids(TRACES),
        **expected_by_ids(SUMMARY_TRACES),
        **expected_by_ids(TOOL_TRACES),
    }
    # the real-repository expert traces (3-8k tokens) do not fit 4096: tests/test_expert_traces.py
    it = train_iterator(_sft_data(4096, 2, leave_out=("repo_expert_traces",)))
    checked = 0
    for _ in range(10):
        for piece in iter_pieces(next(it)):
            assert piece["ids"][0] == TOK.bos_id  # avoid_splitting: traces stay whole
            np.testing.assert_array_equal(piece["weights"], expected[tuple(piece["ids"])])
            checked += 1
    assert checked >= 10


def _row_source(row_ids: np.ndarray, haystacks: dict) -> list[str]:
    """The trace files whose rendered documents contain the row's first piece (as int32 bytes)."""
    key = row_ids.astype(np.int32).tobytes()
    return [name for name, hay in haystacks.items() if key in hay]


def test_sft_mix_holds_summary_traces_at_their_weight_with_summaries_trained():
    """configs/sft.py's default mix at its own row length: summary_traces.jsonl at
    sft.SUMMARY_WEIGHT and tool_traces.jsonl at sft.TOOL_WEIGHT of the rows (grain's interleave is
    deterministic), and a row of a chain's non-final segment trains its summary turn while the next
    segment's copy of it stays untrained."""
    weights = {s["name"]: s["weight"] for s in sft.get_config().data.sources}
    assert weights == {
        "traces": weights["traces"],
        "summary_traces": sft.SUMMARY_WEIGHT,
        "tool_traces": sft.TOOL_WEIGHT,
        "repo_expert_traces": sft.REPO_EXPERT_WEIGHT,
    }
    assert weights["traces"] == pytest.approx(
        1 - sft.SUMMARY_WEIGHT - sft.TOOL_WEIGHT - sft.REPO_EXPERT_WEIGHT
    )
    haystacks = {}
    paths = (("traces", TRACES), ("summary_traces", SUMMARY_TRACES), ("tool_traces", TOOL_TRACES))
    paths += (("repo_expert_traces", REPO_TRACES),)
    for name, path in paths:
        docs = [render_messages(TOK, t["messages"])[0] for t in load_traces(path)]
        haystacks[name] = b"".join(np.asarray([-1, *d], np.int32).tobytes() for d in docs)
    cfg = _sft_data(sft.get_config().train.seq_len, 8)
    it = train_iterator(cfg)
    sources = []
    for _ in range(5):
        b = next(it)
        for r in range(len(b["tokens"])):
            first = b["tokens"][r][b["segment_ids"][r] == 1]
            found = _row_source(first, haystacks)
            # a row that starts with the tail of a split trace may be text two files share (a
            # coding and a tool trace of the same kind of task end alike): counted as either
            sources.append(found[0] if len(found) == 1 else tuple(found))
    assert sources.count("summary_traces") == sft.SUMMARY_WEIGHT * len(sources)  # 10 of 40 rows
    shared = sum(isinstance(s, tuple) and "tool_traces" in s for s in sources)
    tool = sources.count("tool_traces")
    assert tool <= sft.TOOL_WEIGHT * len(sources) <= tool + shared  # 4 of 40 rows
    shared = sum(isinstance(s, tuple) and "repo_expert_traces" in s for s in sources)
    repo = sources.count("repo_expert_traces")
    assert repo <= sft.REPO_EXPERT_WEIGHT * len(sources) <= repo + shared  # 6 of 40 rows
    # whole rows (4096): a summary turn <|summary|> .. <|/summary|><|end|> is trained where a
    # segment ends with it, and untrained where the next segment's rebuilt context holds it
    open_, close, header = (TOK.special_id(n) for n in ("summary", "/summary", "assistant"))
    trained = untrained = 0
    it = train_iterator(dataclasses.replace(cfg, seq_len=4096, global_batch_size=2))
    for _ in range(16):
        for piece in iter_pieces(next(it)):
            targets, w = np.asarray(piece["ids"][1:]), piece["weights"]
            for a in np.flatnonzero(targets == open_):
                assert targets[a - 1] == header  # an assistant turn, never text in a prompt
                b = a + int(np.flatnonzero(targets[a:] == close)[0])
                span = w[a : b + 2]  # through <|/summary|><|end|>
                assert span.min() == span.max()  # a summary turn is trained whole or not at all
                trained += int(span[0] == 1)
                untrained += int(span[0] == 0)
    assert trained >= 2 and untrained >= 2


def test_loss_mask_survives_splitting_a_chat_across_rows(tmp_path):
    chats = [
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": f"add {i} and 2"},
            {
                "role": "assistant",
                "content": "calling",
                "tool_calls": [{"name": "add", "arguments": {"a": i}}],
            },
            {"role": "tool", "content": f"{i + 2}"},
            {"role": "assistant", "content": f"It is {i + 2}."},
        ]
        for i in range(6)
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in chats))
    cfg = DataConfig(
        sources=(SourceSpec("jsonl", (str(path),), field="messages"),),
        seq_len=48,
        global_batch_size=2,
        held_out_fraction=0.0,
        strict=True,
        process_index=0,
        process_count=1,
    )
    it = train_iterator(cfg)
    pieces = [p for _ in range(12) for p in iter_pieces(next(it))]
    weights = {}
    for piece in pieces:  # rebuild weights alongside the ids
        if piece["ids"][0] == TOK.bos_id or not weights:
            weights[len(weights)] = [piece["weights"]]
        else:
            weights[len(weights) - 1].append(piece["weights"])
    docs = join_pieces(pieces, TOK.bos_id)
    for i, chat in enumerate(chats):
        ids, mask = render_messages(TOK, chat)
        k = next(k for k, d in enumerate(docs) if list(d) == ids)  # every chat appears whole
        np.testing.assert_array_equal(np.concatenate(weights[k]), mask[1:])
        trained = TOK.decode([t for t, w in zip(ids[1:], mask[1:]) if w])
        assert trained == (
            f'calling<|tool_call|>{{"name": "add", "arguments": {{"a": {i}}}}}<|/tool_call|><|end|>'
            f"It is {i + 2}.<|end|>"
        )


def _turn_ids(message):
    """The ids an assistant message renders to after its "<|assistant|>" header (what the policy
    emits)."""
    ids, _ = render_messages(TOK, [message])
    return ids[2:]  # drop <|bos|><|assistant|>


def test_shipped_traces_are_valid_and_small():
    traces = load_traces()
    assert 300 <= len(traces) and os.path.getsize(TRACES) < 2_000_000
    assert len({t["id"] for t in traces}) == len(traces)
    assert {t["flow"] for t in traces} == {"direct", "reproduce"}
    assert len({t["template"] for t in traces}) == len(TEMPLATES)
    for t in traces:
        messages = t["messages"]
        ids, mask = render_messages(TOK, messages, where=t["id"])  # unknown roles would raise here
        assert sum(mask) > 0 and len(ids) < 4096
        assert [m["content"] for m in messages[:1]] == [DEFAULT_SYSTEM]  # the environment's prompt
        turns = [parse_turn(TOK, _turn_ids(m)) for m in messages if m["role"] == "assistant"]
        assert all(p.terminated and not p.malformed and len(p.calls) == 1 for p in turns)
        names = [p.calls[0].name for p in turns]
        assert set(names) <= set(TOOL_SCHEMAS) and names[-1] == "submit"
        results = [m for m in messages if m["role"] == "tool"]
        assert len(results) == len(names) - 1  # each call answered once; submit ends the episode
        assert t["grade"][0] == t["grade"][1] > 0  # the final repo passed every hidden test


def test_shipped_traces_replay_token_exactly_in_the_environment():
    """Two traces played again through CodingEnv on their regenerated tasks: the episode's ids are
    the rendered trace (rl/envs/traces.py asserts exact equality when it writes them), and the
    hidden tests pass (real sandbox)."""
    traces = load_traces()
    for t in (traces[0], traces[len(traces) // 2 + 1]):
        task = generate_task(t["template"], seed=t["seed"], difficulty=t["difficulty"])
        assert task.id == t["task"]
        turns = [_turn_ids(m) for m in t["messages"] if m["role"] == "assistant"]
        rec = run_episode(CodingEnv(TOK), task, lambda context, turns=turns: turns.pop(0))
        # token-exact: test-runner durations are masked in observations (rl.envs.agent.tools), both
        # here and in the shipped traces
        shipped = render_messages(TOK, t["messages"])[0]
        assert TOK.decode(rec.tokens) == TOK.decode(shipped)
        assert rec.tokens == shipped
        assert rec.done_reason == "submit" and rec.all_pass and rec.malformed_calls == 0


def test_weight_zero_keeps_a_message_in_context_but_out_of_the_loss():
    turn = {"role": "assistant", "content": "Reading a.py.", "tool_calls": [{"name": "list_files"}]}
    mistake = dict(turn, content="Reading b.py.", weight=0)
    chat = [{"role": "user", "content": "fix it"}, mistake, {"role": "tool", "content": "x"}, turn]
    ids, mask = render_messages(TOK, chat)
    unweighted = [{k: v for k, v in m.items() if k != "weight"} for m in chat]
    plain_ids, plain_mask = render_messages(TOK, unweighted)
    assert ids == plain_ids  # the mistake stays in the context
    trained = [i for i, m in enumerate(mask) if m]
    assert ids[trained[0] : trained[-1] + 1] == _turn_ids(turn) == ids[-len(trained) :]
    assert sum(plain_mask) == sum(mask) + len(_turn_ids(mistake))  # only the mistake left the loss
    assert (
        render_messages(TOK, [dict(m, weight=1) for m in chat[1:2]])[1]
        == render_messages(TOK, unweighted[1:2])[1]
    )
    for bad in ({"role": "tool", "content": "x", "weight": 0}, dict(turn, weight=0.5)):
        with pytest.raises(ValueError, match=r"trace-7: message 1 .* has weight"):
            render_messages(TOK, [chat[0], bad], where="trace-7")


def test_recovery_traces_hold_one_untrained_mistake_then_the_right_call():
    """TracePolicy with mistake_rate=1 on one family: each kind of mistake appears; the mistaken
    call (weight 0) is one byte off the right one and draws the environment's error; the rest of the
    episode is the clean oracle's and passes the hidden tests (task_trace also asserts the trace
    renders to exactly the episode's ids)."""
    from rl.envs import traces as make_traces

    kinds = set()
    for seed in range(40):
        if kinds == set(MISTAKES):
            break
        task = generate_task("boundary", seed=seed, difficulty=1)
        t = make_traces.task_trace(task, random.Random(seed), f"r{seed}", mistake_rate=1.0)
        assert t is not None and t["grade"][0] == t["grade"][1] > 0
        kinds.add(t["mistake"])
        messages = t["messages"]
        (i,) = [i for i, m in enumerate(messages) if m.get("weight") == 0]
        wrong, error = messages[i]["tool_calls"][0], messages[i + 1]["content"]
        right = next(
            m["tool_calls"][0]
            for m in messages[i + 2 :]
            if m["role"] == "assistant" and m["tool_calls"][0]["name"] == wrong["name"]
        )
        assert error.startswith("error:")
        diff = [k for k in wrong["arguments"] if wrong["arguments"][k] != right["arguments"][k]]
        assert len(diff) == 1
        a, b = wrong["arguments"][diff[0]], right["arguments"][diff[0]]
        assert abs(len(a) - len(b)) <= 1 and _one_edit_apart(a, b)
    assert kinds == set(MISTAKES)


def _one_edit_apart(a: str, b: str) -> bool:
    """True when one substitution, deletion or insertion turns a into b."""
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def test_tool_traces_search_before_opening_files_report_and_pass():
    """data/traces/tool_traces.jsonl (python -m rl.envs.traces --tools): the system prompt lists
    the trace's extra tools and every turn is one well-formed call under the strict protocol with
    them; search / code_search come before the first read, review traces report the defect, every
    template appears and every episode passed; two traces (a search one, a review one) replay
    token-exactly through CodingEnv on their regenerated tasks and pass again (real sandbox)."""
    from rl.envs.agent import tools
    from rl.envs.traces import TOOL_TEMPLATES, with_search

    traces = load_traces(TOOL_TRACES)
    assert {t["template"] for t in traces} == set(TOOL_TEMPLATES)
    assert os.path.getsize(TOOL_TRACES) < 1_000_000 and len({t["id"] for t in traces}) == len(
        traces
    )
    calls = {}
    for t in traces:
        messages, extra = t["messages"], t["tools"]
        assert {"search", "code_search"} <= set(extra)
        assert messages[0]["content"] == DEFAULT_SYSTEM + tools.extra_help(extra)
        turns = [parse_turn(TOK, _turn_ids(m), extra) for m in messages if m["role"] == "assistant"]
        assert all(p.terminated and not p.malformed and len(p.calls) == 1 for p in turns)
        names = calls[t["id"]] = [p.calls[0].name for p in turns]
        assert names[-1] == "submit" and t["grade"][0] == t["grade"][1] > 0
        if "report" in extra:  # review: the patch names the file; read, report
            assert names.index("read_file") < names.index("report")
        elif "read_file" in names:
            first = min(names.index(n) for n in ("search", "code_search") if n in names)
            assert first < names.index("read_file")
    assert {"search", "code_search", "report"} <= {n for names in calls.values() for n in names}
    search = next(t for t in traces if "search" in calls[t["id"]])
    review = next(t for t in traces if "report" in calls[t["id"]])
    for t in (search, review):
        task = with_search(generate_task(t["template"], seed=t["seed"], difficulty=t["difficulty"]))
        assert task.id == t["task"] and task.meta["tools"] == t["tools"]
        turns = [_turn_ids(m) for m in t["messages"] if m["role"] == "assistant"]
        rec = run_episode(CodingEnv(TOK), task, lambda context, turns=turns: turns.pop(0))
        assert rec.tokens == render_messages(TOK, t["messages"])[0]
        assert rec.done_reason == "submit" and rec.all_pass and rec.malformed_calls == 0


def test_the_oracle_searches_for_what_the_statement_names():
    """rl.envs.agent.scripted.locate: a mined repository task (search tools on) searches for the
    function its statement names to fix (not the call that shows the bug), from the words (not
    the mutated function in its meta);
    without a named function, a ranked code search on the words; nothing for tasks without the
    tools (the shipped coding traces) or for review (the patch names the file)."""
    from rl.envs.agent.scripted import locate
    from rl.envs.repos.projects import suite_tasks
    from rl.envs.traces import with_search

    tasks = suite_tasks(("roman",))
    # The statement names the function to fix first and the call that shows it second.
    bug = next(t for t in tasks if "`toRoman`" in t.prompt and "`main()`" in t.prompt)
    assert bug.prompt.index("`toRoman`") < bug.prompt.index("`main()`")
    want = [("Searching for toRoman.", "search", {"pattern": r"\btoRoman\b"}, True)]
    assert locate(bug) == want
    words_only = dataclasses.replace(bug, meta={**bug.meta, "symbol": "fromRoman"})
    assert locate(words_only) == want  # from the words, never the meta
    plain = generate_task("boundary", seed=0, difficulty=3)  # "... kicks in one item late"
    assert locate(plain) == []
    ((_, name, args, _),) = locate(with_search(plain))
    assert name == "code_search" and args["query"].split()[:2] == plain.prompt.split()[:2]
    assert locate(with_search(generate_task("review_patch", seed=0))) == []
