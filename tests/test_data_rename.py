"""data/rename.py: renamed SFT traces are the committed expert traces with fresh names, exactly."""

import json
import os
import random
import re

import numpy as np
import pytest

from data.chat import render_messages
from data.rename import (
    backticked_names,
    fresh_name,
    identifier_words,
    renamable,
    rename_messages,
    renamed_trace,
    word_count,
)
from data.tokenizers import ByteTokenizer

TRACES = os.path.join(os.path.dirname(__file__), "..", "data/traces/repo_expert_traces.jsonl")


def committed(n: int) -> list[dict]:
    with open(TRACES, encoding="utf-8") as f:
        rows = [json.loads(x) for x in f if x.strip()]
    return random.Random(0).sample(rows, n)


def whole(name: str, text: str) -> int:
    return len(re.findall(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text))


def test_whole_identifiers_only_in_contents_and_nested_arguments():
    messages = [
        {"role": "user", "content": "fix `parse` (parse_version is fine; see test_parse)"},
        {
            "role": "assistant",
            "content": "parse.",
            "tool_calls": [{"name": "edit", "arguments": {"old": "x = parse(y)", "k": [" parse"]}}],
            "weight": 0,
        },
    ]
    out = rename_messages(messages, {"parse": "zobu_ka"})
    assert out[0]["content"] == "fix `zobu_ka` (parse_version is fine; see test_parse)"
    assert out[1]["content"] == "zobu_ka."
    assert out[1]["tool_calls"][0] == {
        "name": "edit",
        "arguments": {"old": "x = zobu_ka(y)", "k": [" zobu_ka"]},
    }
    assert out[1]["weight"] == 0 and messages[1]["content"] == "parse."  # input untouched


@pytest.mark.parametrize(
    "name, ok",
    [("singularize", True), ("_validate_netloc", True), ("OrderedSet", True), ("__init__", False),
     ("get", False), ("copy", False), ("update", False), ("len", False), ("ab", False)],
)  # fmt: skip
def test_only_names_safe_to_rename(name, ok):
    assert renamable(name) is ok


def test_statement_names_and_fresh_names_keep_the_style():
    text = "There is a bug in `OrderedSet.difference`. It shows up through `copy()`, `_hook`."
    # `difference` and `copy` also name set and dict methods the shown code may call: kept
    assert backticked_names(text) == ["OrderedSet", "_hook"]
    rng, taken = random.Random(1), {"x"}
    camel, private = fresh_name("OrderedSet", rng, taken), fresh_name("_hook", rng, taken)
    assert camel[0].isupper() and "_" not in camel
    assert private.startswith("_") and not private.startswith("__") and renamable(private)


def test_renamed_committed_traces_round_trip_and_render():
    """Each renamed trace: no old name left as a whole identifier, each new name exactly where
    the old one was, renaming back gives the trace byte for byte, and it renders to as many
    assistant (trained) turns as the original."""
    tok = ByteTokenizer()
    renamed = 0
    for i, trace in enumerate(committed(40)):
        new = renamed_trace(trace, random.Random(i))
        if new is None:  # the statement backticks no renamable name
            assert not backticked_names(trace["messages"][1]["content"])
            continue
        renamed += 1
        before, after = json.dumps(trace["messages"]), json.dumps(new["messages"])
        for fresh, old in new["renamed"].items():
            assert whole(old, after) == 0 and whole(fresh, after) == whole(old, before) > 0
        back = {fresh: old for fresh, old in new["renamed"].items()}
        assert rename_messages(new["messages"], back) == trace["messages"]
        _, mask = render_messages(tok, new["messages"])
        trained_runs = sum(1 for a, b in zip([0] + mask, mask) if b and not a)
        weighted = [m for m in trace["messages"] if m["role"] == "assistant" and m.get("weight", 1)]
        assert trained_runs == len(weighted)
    assert renamed >= 30


def test_identifier_words_split_snake_and_camel_case():
    got = identifier_words("def parseHTTPHeader_v2(self, max_len): x = 1")
    assert got == ["def", "parse", "http", "header", "self", "max", "len"]


def test_fresh_names_of_pool_words_keep_the_style_and_default_stream():
    """With a pool, a fresh name is 2-3 of its words in the old name's style; without one, the
    syllable names of the same seed as before pools existed (the probe's fresh names)."""
    words = np.asarray(["cache", "header", "parse"])
    pool = (words, np.asarray([0.5, 0.75, 1.0]))
    rng, taken = random.Random(2), {"cache_header"}
    for _ in range(20):
        snake = fresh_name("parse_line", rng, taken, pool)
        assert 2 <= len(snake.split("_")) <= 3 and set(snake.split("_")) <= set(words)
        assert snake != "cache_header"
        camel = fresh_name("_OrderedSet", rng, taken, pool)
        parts = re.findall(r"[A-Z][a-z]+", camel)
        assert camel.startswith("_") and camel[1:] == "".join(parts)
        assert {p.lower() for p in parts} <= set(words)
    # the syllable stream is the one the committed probe rows were drawn from
    assert fresh_name("parse_line", random.Random(0), set()) == "boze_keta_ziji"


@pytest.mark.parametrize(
    "old, count, drawn",
    [("toposort", 1, 1), ("Dict", 1, 1), ("parse_line", 2, 2), ("FixedTzOffset", 3, 3),
     ("_parse_v2", 3, 3), ("parseHTTPHeader_v2", 5, 3), ("toRoman", 2, 2)],
)  # fmt: skip
def test_matched_fresh_names_have_the_old_names_word_count(old, count, drawn):
    """match: a one-word symbol gets a one-word name, of pool words or of syllables (lowercase
    letters: word_count splits them the same way), in its style, lowerCamel included; over 3
    words are drawn as 3."""
    assert word_count(old) == count
    pool = (np.asarray(["cache", "header", "parse"]), np.asarray([0.5, 0.75, 1.0]))
    rng = random.Random(3)
    for words in (pool, None):
        for _ in range(10):
            new = fresh_name(old, rng, {"cache"}, words, match=True)
            assert word_count(new) == drawn and new != "cache" and renamable(new)
            assert new[0].isupper() == old[0].isupper() and new.startswith("_") == (old[0] == "_")
            assert "_" in old.lstrip("_") or "_" not in new.lstrip("_")  # toRoman: cacheHeader
