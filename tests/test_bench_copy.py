"""bench/bench_copy.py: its rows score exactly the bytes a copier can know; its smoke run prints
the table and both probes; bench/bench_sft_tokenizers.py's smoke run prints both arms (-m long:
they compile the tiny preset)."""

import re

import numpy as np
import pytest
from bench_tiny_common import NUM, run_tiny

from bench import bench_copy as b


def test_fixed_rows_score_the_copied_half():
    tokens, scored = b.fixed_row(np.random.default_rng(0), 16)
    assert (tokens[16:] == tokens[:16]).all() and scored.tolist() == [0] * 16 + [1] * 16


def test_induction_rows_score_only_bytes_an_earlier_occurrence_gives():
    """Every scored target is, after the byte before it, what followed that byte in a name's
    earlier occurrence; the first byte of each repeated name is not scored."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        tokens, scored = b.induction_row(rng, 64)
        assert len(tokens) == len(scored) == 128 and scored.sum() >= 4 * 4
        starts = [t for t in range(1, 128) if tokens[t - 1] == b.SPACE and tokens[t] != b.SPACE]
        second = starts[-4]  # the shuffled list's first name
        for t in np.flatnonzero(scored):
            assert t > second and tokens[t - 1] != b.SPACE
            back = tokens[max(0, t - 12) : t]  # the name so far, from its leading space
            name = back[np.flatnonzero(back == b.SPACE)[-1] + 1 :]
            first = tokens[:second].tolist()
            found = [
                j for j in range(len(first)) if first[j : j + len(name) + 1] == [*name, tokens[t]]
            ]
            assert found, (t, name)
        assert all(scored[s] == 0 for s in starts[-4:])


def test_keyed_copy_nll_against_counts_by_hand():
    """In 1 2 7 1 2 8 3 2 7, the last 7 after key '2' (followed earlier by 7 and by 8): ln 2; after
    key '3 2' (never seen): the no-copy bound; the 8 after key '1 2' (followed earlier by 7 only):
    a miss. On the induction rows a 2-byte key nearly solves the copy and a 1-byte key half does."""
    row = np.asarray([[1, 2, 7, 1, 2, 8, 3, 2, 7]])
    mask = np.zeros((1, 9))
    mask[0, 8] = 1
    assert np.isclose(b.keyed_copy_nll(row, mask, 1), np.log(2))
    assert np.isclose(b.keyed_copy_nll(row, mask, 2), b.NO_COPY)
    mask[0, 5] = 1
    assert b.keyed_copy_nll(row, mask, 2) == np.inf
    tokens, scored = b.batch(b.row_maker("induction", 64), np.random.default_rng(1), 32)
    two, one = b.keyed_copy_nll(tokens, scored, 2), b.keyed_copy_nll(tokens, scored, 1)
    assert 0 < two < 0.2 < 0.8 < one < 1.6 < b.NO_COPY


def test_keyed_copy_hits_by_hand():
    """After key '2' the earlier continuations are 7 then 8: a tie goes to the latest (8); key
    '1 2' was followed by 7 once; key '3 2' never occurred (a miss)."""
    ids = [1, 2, 7, 1, 2, 8, 3, 2, 7]
    assert b.keyed_copy_hits(ids, [8], 1) == [False]
    assert b.keyed_copy_hits(ids[:8] + [8], [8], 1) == [True]
    assert b.keyed_copy_hits(ids, [5, 8], 2) == [False, False]
    assert b.keyed_copy_hits(ids[:5] + [7], [5], 2) == [True]
    rows = {"r": [(ids[:5] + [7], 3, 3)]}  # the "name" 1 2 7 at 3..5: bytes 2 and 7 scored
    assert b.keyed_probe(rows, key_lens=(1, 2)) == "r: 1-byte 1.00, 2-byte 0.50"


def test_override_parses_numbers_and_names_a_bad_one():
    assert b.parse_override("num_hidden_layers=2") == ("num_hidden_layers", 2)
    assert b.parse_override("initializer_range=0.02") == ("initializer_range", 0.02)
    assert isinstance(b.parse_override("rope_theta=1e4")[1], float)
    with pytest.raises(SystemExit, match="want FIELD=NUMBER"):
        b.parse_override("initializer_range")


def test_drills_are_the_induction_rows_in_chat_form(tmp_path):
    """A drill's user message is an induction row's context and its assistant message that row's
    names in their new order; the file reads back through data/'s jsonl source (the SFT mix's
    reader) whole."""
    from data.sources import SourceSpec, open_source

    doc = b.drill_document(np.random.default_rng(3), 64)
    tokens, scored = b.induction_row(np.random.default_rng(3), 64)
    user, assistant = (m["content"].encode() for m in doc["messages"])
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant"]
    assert bytes(tokens[: len(user)].tolist()) == user
    assert bytes(tokens[len(user) : len(user) + 1 + len(assistant)].tolist()) == b" " + assistant
    for name in assistant.split(b" "):
        assert b" " + name in user  # each name copies an earlier occurrence
    path = b.write_drills(str(tmp_path / "drills.jsonl"), 7, half=64, seed=0)
    source = open_source(SourceSpec("jsonl", (path,), field="messages", name="drills"))
    assert len(source) == 7 and all(len(source.read(i).value) == 2 for i in range(7))
    again = b.write_drills(str(tmp_path / "again.jsonl"), 7, half=64, seed=0)
    assert open(path).read() == open(again).read()  # seeded: reproducible


def test_sft_mix_gives_the_drills_their_share_and_the_traces_the_rest():
    from bench.rl_stages import sft_config

    options = dict(preset="tiny", mtp_modules=0, max_tokens=512, steps=1, lr=1e-3)
    c = sft_config("T.jsonl", mix=(("copy_drills", "D.jsonl", 0.25),), **options)
    got = [(s["paths"], s["weight"], s["field"]) for s in c.data.sources]
    assert got == [(["T.jsonl"], 0.75, "messages"), (["D.jsonl"], 0.25, "messages")]
    assert [(s["paths"], s["weight"]) for s in sft_config("T.jsonl", **options).data.sources] == [
        (["T.jsonl"], 1.0)
    ]
    with pytest.raises(ValueError, match="leave the traces a share"):
        sft_config("T.jsonl", mix=(("d", "D.jsonl", 1.0),), **options)


@pytest.mark.long
def test_smoke_run_prints_the_table_and_both_probes():
    out = run_tiny("bench_copy.py")
    rows = re.findall(rf"^\| (\d+) \| {NUM} \| {NUM} \| - \| \d+ \|$", out, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2"], out
    assert all(0 <= float(share) <= 1 for _, _, share in rows), out
    for when in ("before", "after"):
        names = rf"exact {NUM} bytes {NUM} first {NUM}"
        line = re.search(
            rf"name-copy probe {when}: trained names: {names}; fresh names: {names}", out
        )
        assert line and all(0 <= float(x) <= 1 for x in line.groups()), out


@pytest.mark.long
def test_tokenizer_arms_print_both_rows_on_the_same_names(tmp_path):
    """bench/bench_sft_tokenizers.py --tiny: a byte row and a code BPE row, the same probe names
    in both (rows counted alike), bits/byte and shares in range."""
    out = run_tiny("bench_sft_tokenizers.py", "--workdir", str(tmp_path))
    x = r"[\d.]+"  # a figure, not captured
    rows = re.findall(
        rf"^\| (byte|code BPE 512) \| (\d+) \| 2 x (\d+) \| 2 \| ({x}) \| "
        rf"{x} \(({x})\) / {x} \(({x})\) \| .* \| (\d+) \| \d+ \| {x} \|$",
        out,
        re.M,
    )
    assert [r[0] for r in rows] == ["byte", "code BPE 512"], out
    (_, byte_ids, byte_len, *_, byte_rows), (_, bpe_ids, bpe_len, *_, bpe_rows) = rows
    assert (byte_ids, bpe_ids, byte_len, bpe_len) == ("272", "512", "512", "128")
    assert byte_rows == bpe_rows and int(byte_rows) > 0
    for r in rows:
        assert 0 < float(r[3]) < 9 and all(0 <= float(v) <= 1 for v in r[4:6])
    assert "1-byte" in out and "1-token" in out


@pytest.mark.long
def test_smoke_run_of_the_mention_task_reads_its_pointer_columns():
    """--task mention in bytes (rows of 8 filler words fit 320 bytes): the control cell is the
    asked-for first tokens written on marked rows / rows with no mark, each a share of the
    --held 8 rows' one asked-for name each (not of tiny's batch of 2)."""
    args = ("--task", "mention", "--half", "160", "--words", "8", "--held", "8")
    out = run_tiny("bench_copy.py", *args)
    rows = re.findall(rf"^\| (\d+) \| {NUM} \| {NUM} \| {NUM} / {NUM} \| \d+ \|$", out, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2"], out
    assert all(0 <= float(x) <= 1 for r in rows for x in r[2:]), out
    assert "held-out rows: 8 (tokens of 320), control rows: 8" in out, out
