"""bench/bench_rl_repos.py's task sets (chosen in bench/rl_stages.py), without a model: the RL
pool, the held-out sites and the held-out repositories are disjoint the way issue 52 asks (the
whole path is tests/test_bench_tiny_rl.py's -m long smoke run)."""

import os

from bench import rl_stages as b
from data.rename import backticked_names
from rl.envs.repos import holdout


def test_pool_sites_and_repositories_are_disjoint():
    pool, sets = b.select(6, 6)
    held = set(holdout.HELD_OUT_REPOS)
    projects = lambda ds: {d["project"] for d in ds}  # noqa: E731
    assert pool and not projects(pool) & held
    assert len(sets["sites"]) == 6 and not projects(sets["sites"]) & held
    assert len(sets["repos"]) == 6 and projects(sets["repos"]) <= held
    assert not {d["id"] for d in pool} & {d["id"] for s in sets.values() for d in s}
    assert {d["family"] for d in pool} == set(b.KINDS)  # the expert's kinds: no review, DevOps
    # round robin: the first 3 held-out sites come from 3 different training projects
    assert len(projects(sets["sites"][:3])) == 3
    (task,) = b.build(sets["repos"][:1])  # a line builds into its task
    assert task.id == sets["repos"][0]["id"] and task.solution


def test_pool_lines_whose_test_dependencies_are_not_cached_here_are_left_out_and_counted(
    tmp_path, monkeypatch
):
    from rl.envs.isolation.dep_cache import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty"))  # a machine without whatever==0.7
    lines = [{"project": "funcy", "id": "f1"}, {"project": "addict", "id": "a1"}]
    said = []
    assert b.runnable_here(lines, log=said.append) == lines[1:]
    assert said == [
        "left out 1 pool lines of funcy: their declared test dependencies are not cached here "
        "(python -m rl.envs.repos deps whatever==0.7)"
    ]


def test_interleave_takes_projects_in_turn():
    items = [{"project": p, "id": f"{p}{i}"} for p, i in ("a0", "a1", "a2", "b0", "c0", "c1")]
    assert [d["id"] for d in b.interleave(items, 5)] == ["a0", "b0", "c0", "a1", "c1"]


def test_time_bounded_stage_reuses_its_latest_export(tmp_path, monkeypatch):
    """A wall-bounded SFT (--sft_minutes) stops at whatever step it reached: a re-run must reuse
    that export (the highest step), not train again toward train.steps; a step-bounded one still
    looks for params_<steps> only."""
    import ml_collections

    from train import trainer

    for step in (3, 16):
        os.makedirs(tmp_path / "export" / f"params_{step}")
        (tmp_path / "export" / f"params_{step}" / "model_config.json").write_text("{}")
    trained = []
    monkeypatch.setattr(trainer, "train", lambda c, w: trained.append(w))
    c = ml_collections.ConfigDict(dict(train=dict(steps=120, max_seconds=960.0), checkpoint={}))
    assert b.train_and_export(c, str(tmp_path)) == str(tmp_path / "export" / "params_16")
    assert not trained
    c.train.max_seconds = 0.0  # step-bounded: params_120 is missing, so it trains
    monkeypatch.setattr("train.convert.export_latest", lambda c, w: "exported")
    assert b.train_and_export(c, str(tmp_path)) == "exported" and trained == [str(tmp_path)]


def test_context_extension_is_the_long_context_stage_rule(tmp_path):
    """SFT from an exported policy (--init) extends its context the way configs/long_context.py
    extends pretraining's: YaRN with factor new / trained context; an extended model keeps its
    original context as the base; a long enough one is left alone."""
    import dataclasses

    from configs import long_context
    from model import export, presets
    from model.config import RopeScaling

    def exported(name, **fields):
        os.makedirs(tmp_path / name)
        cfg = dataclasses.replace(presets.get("tiny"), **fields)
        (tmp_path / name / "model_config.json").write_text(export.config_to_json(cfg))
        return str(tmp_path / name)

    trained = exported("short", max_position_embeddings=long_context.ORIGINAL_CONTEXT)
    stage = long_context.long_context_overrides().to_dict()["rope_scaling"]
    assert b.context_extension(trained, long_context.LONG_CONTEXT) == {"rope_scaling": stage}
    rope = dict(factor=16.0, original_max_position_embeddings=128)
    extended = exported("long", max_position_embeddings=2048, rope_scaling=RopeScaling(**rope))
    assert b.context_extension(extended, 8192) == {
        "rope_scaling": dict(factor=64.0, original_max_position_embeddings=128)
    }
    assert b.context_extension(extended, 2048) == {}


def test_transcript_splits_an_episode_into_policy_and_environment_turns():
    from data.tokenizers import ByteTokenizer

    tok = ByteTokenizer()
    parts = [("prompt", 0), ("call a", 1), ("result", 0), ("call b", 1)]
    ids = [i for text, _ in parts for i in tok.encode(text)]
    mask = [m for text, m in parts for _ in tok.encode(text)]
    record = dict(task_id="t", done_reason="submit", tokens=ids, mask=mask, prompt_len=6)
    out = b.transcript(tok, dict(record, tests_passed=2, tests_total=3, malformed_turns=[1]))
    assert out["turns"] == [["policy", "call a"], ["env", "result"], ["policy", "call b"]]
    assert (out["task_id"], out["done_reason"], out["malformed_turns"]) == ("t", "submit", [1])
    assert (out["tests_passed"], out["tests_total"]) == (2, 3)
    assert b.transcript(tok, dict(record, prompt_len=len(ids)))["turns"] == []


TRACES = os.path.join(os.path.dirname(__file__), "..", "data/traces/repo_expert_traces.jsonl")


def committed_traces(n: int) -> list[dict]:
    import json

    with open(TRACES, encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def test_sft_documents_cut_and_renamed_copies():
    from data.chat import render_messages
    from data.tokenizers import ByteTokenizer

    traces = committed_traces(6)
    assert b.sft_traces(traces, renamed=0, turns=0, seed=0) == traces  # as played
    docs = b.sft_traces(traces, renamed=2, turns=2, seed=0)
    assert len(docs) == 12 and len({d["id"] for d in docs}) == 12
    tok = ByteTokenizer()
    for d in docs:
        assert [m["role"] for m in d["messages"]].count("assistant") == 2
        assert d["messages"][-1]["role"] == "assistant" and d["renamed"]
        assert d["tokens"] == len(render_messages(tok, d["messages"])[0])
    assert b.sft_traces(traces, renamed=2, turns=2, seed=0) == docs  # seeded


def test_keep_played_puts_each_trace_beside_its_renamed_copies():
    """--sft_keep_played: each renamable trace as played plus its copies, none of them lost."""
    traces = committed_traces(6)
    docs = b.sft_traces(traces, renamed=2, turns=0, seed=0, keep=True)
    played = [d for d in docs if "renamed" not in d]
    assert sorted(d["id"] for d in played) == sorted(t["id"] for t in traces)
    renamable = sum(bool(backticked_names(t["messages"][1]["content"])) for t in traces)
    assert len(docs) == len(traces) + 2 * renamable and renamable >= 4


def test_renamed_copies_take_pool_words_with_a_pool():
    """--sft_rename_words: each new name is 2-3 of the pool's words (snake or Camel case)."""
    import re

    import numpy as np

    words = ["cache", "header", "parse", "token"]
    pool = (np.asarray(words), np.asarray([0.25, 0.5, 0.75, 1.0]))
    docs = b.sft_traces(committed_traces(6), renamed=1, turns=1, seed=0, pool=pool)
    for d in docs:
        for new in d["renamed"]:
            parts = [p.lower() for p in re.findall(r"[A-Za-z][a-z]*", new)]
            assert 2 <= len(parts) <= 3 and set(parts) <= set(words), new


def test_probe_rows_fresh_names_are_in_no_committed_trace():
    from data.tokenizers import ByteTokenizer

    rows = b.name_probe_rows(TRACES, n=16, seq_len=2048)
    assert len(rows["trained names"]) >= 10 and len(rows["fresh names"]) >= 10
    text = open(TRACES, encoding="utf-8").read()
    tok = ByteTokenizer()
    for ids, start, n in rows["fresh names"]:
        assert tok.decode(ids[start : start + n]) not in text
    for ids, start, n in rows["trained names"]:
        assert tok.decode(ids[start : start + n]) in text


def test_sft_with_a_bpe_vocabulary_trains_on_its_ids(tmp_path):
    """--code_bpe's SFT config: data.tokenizer is the vocabulary, a random init is sized to it,
    and train/'s rows are that tokenizer's ids of the traces, with the
    documents' "tokens" counted in them (sft_traces)."""
    import json

    from data.chat import render_messages
    from data.tokenizers import load_tokenizer
    from train.batches import data_iterators

    spec = "hf:" + os.path.join(os.path.dirname(__file__), "fixtures/data/tokenizer.json")
    tok = load_tokenizer(spec)
    docs = b.sft_traces(committed_traces(4), renamed=1, turns=1, seed=0, tok=tok)
    assert all(d["tokens"] == b.count_tokens(tok, d) < len(json.dumps(d)) for d in docs)
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    options = dict(preset="tiny", mtp_modules=0, max_tokens=512, steps=1, lr=1e-3, batch_size=2)
    c = b.sft_config(str(path), tokenizer=spec, tool_output_budget=300, **options)
    assert c.data.tokenizer == spec and c.model_overrides["vocab_size"] == tok.vocab_size
    assert c.data.tool_output_budget == 300  # RL's obs_token_budget, the one trim
    assert "vocab_size" not in b.sft_config(str(path), **options).model_overrides  # bytes: preset
    train_it, _ = data_iterators(c, tok.vocab_size)
    rows = next(iter(train_it))["tokens"]
    text = tok.decode([int(t) for t in rows[0] if t != tok.pad_id])
    rendered = [tok.decode(render_messages(tok, d["messages"])[0]) for d in docs]
    assert any(text[:1000] in r for r in rendered), text  # a document's text under `tok`
