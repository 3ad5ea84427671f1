"""eval/name_copy.py: rows point at the name in the naming turn; the probe's teacher-forced
argmax agrees with greedy decoding on the real tiny preset."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from data.chat import render_messages
from data.rename import backticked_names
from data.tokenizers import ByteTokenizer
from eval.name_copy import first_token_odds, name_copy_probe, naming_rows
from model import Transformer, init_params, presets

TRACES = os.path.join(os.path.dirname(__file__), "..", "data/traces/repo_expert_traces.jsonl")


def test_rows_point_at_the_statement_name_in_the_naming_turn():
    tok = ByteTokenizer()
    with open(TRACES, encoding="utf-8") as f:
        traces = [json.loads(next(f)) for _ in range(12)]
    rows = naming_rows(tok, traces, seq_len=4096)
    assert len(rows) >= 8
    for ids, start, n in rows:
        text = tok.decode(ids)
        statement = text[: text.index(tok.decode(ids[start - 1 : start + n]))]
        assert tok.decode(ids[start : start + n]) in backticked_names(statement)
        assert ids[-1] == tok.special_id("end")  # the prefix ends with the naming turn


def test_probe_counts_a_name_greedy_decoding_writes_and_not_one_it_does_not():
    tok, cfg = ByteTokenizer(), presets.get("tiny")
    params = init_params(cfg, jax.random.PRNGKey(0))
    step = jax.jit(lambda p, t: jnp.argmax(Transformer(cfg).apply({"params": p}, t).logits, -1))
    ids = tok.encode("fix `abc` please") + [tok.special_id("assistant")]
    start, seq_len = len(ids), 64
    for _ in range(5):  # greedy: each next byte the argmax after the bytes before it
        tokens = np.zeros((1, seq_len), np.int32)
        tokens[0, : len(ids)] = ids
        ids = ids + [int(step(params, tokens)[0, len(ids) - 1])]
    wrong = ids[:-1] + [(ids[-1] + 1) % 256]  # its last byte is not the argmax; the rest is
    first_wrong = ids[:start] + [(ids[start] + 1) % 256] + ids[start + 1 :]
    rows = [(ids, start, 5), (wrong, start, 5), (first_wrong, start, 5)]
    probe = name_copy_probe(cfg, params, rows, seq_len, batch=2)
    # first_wrong: its first byte is not the argmax; the bytes after it may be or not (their
    # argmax follows a changed prefix), so its share is bounded, not fixed
    assert (probe["names"], probe["names_exact"], probe["name_first"]) == (3, 1 / 3, 2 / 3)
    assert (1 + 0.8) / 3 - 1e-9 <= probe["name_bytes"] <= (1 + 0.8 + 0.8) / 3 + 1e-9


def test_first_token_odds_are_the_models_log_softmax_at_the_names_start():
    cfg = presets.get("tiny")
    params = init_params(cfg, jax.random.PRNGKey(1))
    rng, seq_len = np.random.default_rng(0), 64
    rows = [(list(rng.integers(0, 256, n)), start, 3) for n, start in ((40, 30), (64, 9), (20, 17))]
    odds = first_token_odds(cfg, params, rows, seq_len, batch=2)  # 2 batches, the last padded
    forward = jax.jit(lambda p, t: Transformer(cfg).apply({"params": p}, t).logits)
    tokens = np.zeros((len(rows), seq_len), np.int32)
    for b, (ids, _, _) in enumerate(rows):
        tokens[b, : len(ids)] = ids
    logits = forward(params, tokens).astype(jnp.float32)  # the reference, one row a batch entry
    for b, ((ids, start, _), rank, prob, written) in enumerate(zip(rows, *odds.values())):
        logp = np.asarray(jax.nn.log_softmax(logits[b, start - 1]))
        assert rank == int((logp > logp[ids[start]]).sum()) and written == int(logp.argmax())
        np.testing.assert_allclose(prob, np.exp(logp[ids[start]]), rtol=1e-5)
    probe = name_copy_probe(cfg, params, rows, seq_len, batch=2)  # rank 0: the argmax writes it
    assert probe["name_first"] == np.mean([r == 0 for r in odds["ranks"]])
    rigged = [(ids[:start] + [written] + ids[start + 1 :], start, n)
              for (ids, start, n), written in zip(rows, odds["written"])]  # fmt: skip
    assert first_token_odds(cfg, params, rigged, seq_len, batch=2)["ranks"] == [0, 0, 0]


def test_a_name_inside_a_longer_identifier_is_not_the_name():
    tok = ByteTokenizer()
    messages = [
        {"role": "system", "content": "tools"},
        {"role": "user", "content": "fix `parse`"},
        {"role": "assistant", "content": "parse_version is fine."},  # names no symbol whole
        {"role": "tool", "content": "ok"},
        {"role": "assistant", "content": "see parse_version, then parse."},
    ]
    ((ids, start, n),) = naming_rows(tok, [{"messages": messages}], seq_len=512)
    assert n == 5 and tok.decode(ids[start - 5 : start + n + 1]) == "then parse."
    assert len(ids) == len(render_messages(tok, messages)[0])  # cut after the naming turn


def test_a_bpe_vocabulary_finds_the_same_names_by_their_tokens(tmp_path):
    """naming_rows locates the name by characters: with a data/code_bpe.py vocabulary (a name's
    first token can carry the space or quote before it) every trace the byte rows hold is found,
    and the span writes that name whole and nothing of another identifier."""
    import itertools
    import random
    import re

    from data.code_bpe import corpus, train_bpe
    from data.rename import renamed_trace
    from data.tokenizers import load_tokenizer

    texts = itertools.islice(corpus([], TRACES), 2000)
    bpe = load_tokenizer("hf:" + train_bpe(texts, 1000, str(tmp_path / "bpe.json")))
    with open(TRACES, encoding="utf-8") as f:
        traces = [json.loads(next(f)) for _ in range(24)]
    fresh = [renamed_trace(t, random.Random(i)) for i, t in enumerate(traces)]
    traces += [t for t in fresh if t]
    by_bytes = naming_rows(ByteTokenizer(), traces, seq_len=10**6)
    by_bpe = naming_rows(bpe, traces, seq_len=10**6)
    assert len(by_bpe) == len(by_bytes) >= 30
    for (b_ids, b_start, b_n), (ids, start, n) in zip(by_bytes, by_bpe):
        name = bytes(b_ids[b_start : b_start + b_n]).decode()
        assert re.fullmatch(rf"\W*{re.escape(name)}\W*", bpe.decode(ids[start : start + n]))
    tokens, nbytes = sum(r[2] for r in by_bpe), sum(r[2] for r in by_bytes)
    assert tokens < nbytes  # a name takes fewer tokens than bytes (spans are not padded out)


def test_statement_ids_tell_whether_a_copy_of_ids_can_write_the_name(tmp_path):
    """same_ids_as_statement: bytes and an 'identifiers' vocabulary write every name as the
    statement's ids; cl100k's pre-tokenizer (a word takes the space or quote before it) does not
    for most: the quantity data/code_bpe.py's 'identifiers' pattern exists for."""
    import itertools

    from data.code_bpe import corpus, train_bpe
    from data.tokenizers import load_tokenizer
    from eval.name_copy import same_ids_as_statement

    with open(TRACES, encoding="utf-8") as f:
        traces = [json.loads(next(f)) for _ in range(12)]
    got = {
        "byte": same_ids_as_statement(ByteTokenizer(), naming_rows(ByteTokenizer(), traces, 10**6))
    }
    for pattern in ("cl100k", "identifiers"):
        texts = itertools.islice(corpus([], TRACES), 2000)
        path = train_bpe(texts, 1000, str(tmp_path / f"{pattern}.json"), pattern)
        tok = load_tokenizer(f"hf:{path}")
        got[pattern] = same_ids_as_statement(tok, naming_rows(tok, traces, 10**6))
    assert got["byte"] == got["identifiers"] == {"first": 1.0, "whole": 1.0}
    assert got["cl100k"]["first"] < 0.8 and got["cl100k"]["whole"] <= got["cl100k"]["first"]
