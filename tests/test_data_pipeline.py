"""Packing, determinism, exact resume (also through Orbax), host sharding, mixtures, held-out
pass."""

import json
import os

import grain
import numpy as np
import pytest

from data import DataConfig, DataCounters, SourceSpec, held_out_batches, train_iterator
from data.packing import PackIterDataset, iter_pieces, join_pieces
from data.tokenizers import ByteTokenizer

TOK = ByteTokenizer()


def texts(n, seed=0, max_len=90):
    """n distinct documents of 1..max_len characters, several longer than the test rows."""
    rng = np.random.default_rng(seed)
    return [
        f"{i}:" + "".join(rng.choice(list("abcdefgh \n"), size=rng.integers(1, max_len)))
        for i in range(n)
    ]


def write_jsonl(path, docs, field="text"):
    with open(path, "w") as f:
        for d in docs:
            f.write(json.dumps({field: d}) + "\n")
    return str(path)


def config(paths, **kw):
    base = dict(
        sources=(SourceSpec("jsonl", paths),),
        seq_len=32,
        global_batch_size=4,
        seed=0,
        held_out_fraction=0.0,
        process_index=0,
        process_count=1,
        num_threads=2,
    )
    return DataConfig(**{**base, **kw})


def take(it, n):
    return [next(it) for _ in range(n)]


def doc_ids(text):
    return [TOK.bos_id, *text.encode(), TOK.eos_id]


def test_batch_contract_shapes_and_dtypes(tmp_path):
    batch = next(train_iterator(config((write_jsonl(tmp_path / "a.jsonl", texts(20)),))))
    expect = {
        "tokens": np.int32,
        "targets": np.int32,
        "segment_ids": np.int32,
        "positions": np.int32,
        "loss_mask": np.float32,
        "target_bytes": np.int32,
    }
    assert {k: v.dtype for k, v in batch.items()} == expect
    assert all(v.shape == (4, 32) for v in batch.values())


def test_one_epoch_of_rows_rebuilds_every_document_exactly_once(tmp_path):
    docs = texts(40)  # 1..90 chars vs 32-token rows: many are split
    cfg = config((write_jsonl(tmp_path / "a.jsonl", docs),))
    total_pairs = sum(len(doc_ids(d)) - 1 for d in docs)
    rows_per_epoch = -(-total_pairs // 32)
    batches = take(train_iterator(cfg), -(-rows_per_epoch // 4))
    rebuilt = join_pieces([p for b in batches for p in iter_pieces(b)], TOK.bos_id)
    first_epoch = sorted(TOK.decode(ids) for ids in rebuilt[: len(docs)])
    assert first_epoch == sorted(TOK.decode(doc_ids(d)) for d in docs)


def test_row_invariants(tmp_path):
    cfg = config((write_jsonl(tmp_path / "a.jsonl", texts(30)),))
    for batch in take(train_iterator(cfg), 6):
        seg, pos = batch["segment_ids"], batch["positions"]
        for b in range(seg.shape[0]):
            used = seg[b] > 0
            assert used.all() or not used[np.argmin(used) :].any()  # padding only at the end
            assert np.all(np.diff(seg[b][used]) >= 0) and np.all(np.diff(seg[b][used]) <= 1)
            for s in range(1, seg[b].max() + 1):  # positions restart per piece
                np.testing.assert_array_equal(pos[b][seg[b] == s], np.arange((seg[b] == s).sum()))
            same = seg[b][:-1] == seg[b][1:]  # targets = next token inside a piece
            np.testing.assert_array_equal(
                batch["targets"][b][:-1][same], batch["tokens"][b][1:][same]
            )
        np.testing.assert_array_equal(batch["loss_mask"], (seg > 0).astype(np.float32))
        np.testing.assert_array_equal(batch["target_bytes"], ((batch["targets"] < 256) & (seg > 0)))


def test_target_bytes_count_the_documents_utf8_bytes():
    docs = ["héllo wörld", "日本語のテキスト", "x"]
    stream = grain.MapDataset.source(
        [
            {
                "ids": np.array(doc_ids(d), np.int32),
                "weights": np.ones(len(doc_ids(d)) - 1, np.float32),
            }
            for d in docs
        ]
    )
    packed = PackIterDataset(
        stream.to_iter_dataset(),
        seq_len=16,
        pad_id=TOK.pad_id,
        byte_lengths=np.r_[np.ones(256), np.zeros(16)].astype(np.int32),
    )
    rows = list(packed)
    assert sum(r["target_bytes"].sum() for r in rows) == sum(len(d.encode()) for d in docs)
    assert sum((r["segment_ids"] > 0).sum() for r in rows) == sum(len(doc_ids(d)) - 1 for d in docs)


def test_avoid_splitting_starts_fitting_documents_in_a_new_row():
    lengths = [10, 12, 7, 30]  # pairs = len + 1; the 30-char doc (31 pairs) > T must split
    docs = [
        {"ids": np.arange(n + 2, dtype=np.int32), "weights": np.ones(n + 1, np.float32)}
        for n in lengths
    ]
    packed = PackIterDataset(
        grain.MapDataset.source(docs).to_iter_dataset(),
        seq_len=20,
        pad_id=-1,
        byte_lengths=np.ones(64, np.int32),
        avoid_splitting=True,
    )
    pieces = [
        [int((r["segment_ids"] == s).sum()) for s in range(1, r["segment_ids"].max() + 1)]
        for r in packed
    ]
    assert pieces == [[11], [13], [8, 12], [19]]  # 13+8 > 20: next row; 31 > 20: split anyway


def test_same_config_same_batches_other_seed_other_batches(tmp_path):
    cfg = config((write_jsonl(tmp_path / "a.jsonl", texts(30)),))
    a, b = take(train_iterator(cfg), 5), take(train_iterator(cfg), 5)
    c = take(train_iterator(DataConfig(**{**cfg.__dict__, "seed": 1})), 5)
    assert all(np.array_equal(x["tokens"], y["tokens"]) for x, y in zip(a, b))
    assert not all(np.array_equal(x["tokens"], y["tokens"]) for x, y in zip(a, c))


def assert_same_batches(xs, ys):
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


@pytest.mark.parametrize("stop_after", [1, 3, 7])
def test_resume_is_exact_mid_document_and_across_epochs(tmp_path, stop_after):
    a = write_jsonl(tmp_path / "a.jsonl", texts(12))
    b = write_jsonl(tmp_path / "b.jsonl", texts(9, seed=1))
    cfg = config((a,), sources=(SourceSpec("jsonl", (a,), weight=3), SourceSpec("jsonl", (b,))))
    it = train_iterator(cfg)
    take(it, stop_after)
    state = json.loads(
        json.dumps(it.get_state())
    )  # the state survives JSON (grain's checkpoint format)
    expected = take(it, 8)  # 12 short docs: this crosses epoch boundaries
    resumed = train_iterator(cfg)
    resumed.set_state(state)
    assert_same_batches(take(resumed, 8), expected)


def test_resume_through_orbax_checkpoint_manager(tmp_path):
    import orbax.checkpoint as ocp

    cfg = config((write_jsonl(tmp_path / "a.jsonl", texts(25)),))
    it = train_iterator(cfg)
    take(it, 4)
    with ocp.CheckpointManager(tmp_path / "ckpt") as mngr:
        mngr.save(4, args=ocp.args.Composite(data=grain.checkpoint.CheckpointSave(it)))
        mngr.wait_until_finished()
    expected = take(it, 5)
    fresh = train_iterator(cfg)
    with ocp.CheckpointManager(tmp_path / "ckpt") as mngr:
        mngr.restore(4, args=ocp.args.Composite(data=grain.checkpoint.CheckpointRestore(fresh)))
    assert_same_batches(take(fresh, 5), expected)


def test_hosts_read_disjoint_documents_and_together_cover_all(tmp_path):
    docs = texts(24, max_len=20)
    path = write_jsonl(tmp_path / "a.jsonl", docs)
    seen = []
    for host in range(2):
        cfg = config((path,), process_index=host, process_count=2, seq_len=64)
        batches = take(train_iterator(cfg), 6)  # > one epoch of its 12 docs
        assert batches[0]["tokens"].shape == (2, 64)  # B / process_count rows
        rebuilt = join_pieces([p for b in batches for p in iter_pieces(b)], TOK.bos_id)
        seen.append({TOK.decode(ids) for ids in rebuilt[:12]})
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == {TOK.decode(doc_ids(d)) for d in docs}


def test_mixture_weights_are_shares_of_rows(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", ["a" * 40] * 5)
    b = write_jsonl(tmp_path / "b.jsonl", ["b" * 40] * 5)
    cfg = config(
        (a,), sources=(SourceSpec("jsonl", (a,), weight=3.0), SourceSpec("jsonl", (b,), weight=1.0))
    )
    rows = np.concatenate([x["tokens"] for x in take(train_iterator(cfg), 10)])
    from_a = np.mean([(r == ord("a")).any() for r in rows])
    assert from_a == pytest.approx(0.75, abs=0.05)


def test_held_out_pass_is_finite_deterministic_and_disjoint_from_training(tmp_path):
    docs = texts(200, max_len=30)
    cfg = config((write_jsonl(tmp_path / "a.jsonl", docs),), held_out_fraction=0.2, seq_len=64)
    first, second = list(held_out_batches(cfg)), list(held_out_batches(cfg))
    assert_same_batches(first, second)
    held = {
        TOK.decode(ids)
        for ids in join_pieces([p for b in first for p in iter_pieces(b)], TOK.bos_id)
    }
    assert 20 <= len(held) <= 60  # ~20% of 200 documents
    train = {
        TOK.decode(ids)
        for ids in join_pieces(
            [p for b in take(train_iterator(cfg), 40) for p in iter_pieces(b)], TOK.bos_id
        )
        if ids[-1] == TOK.eos_id
    }  # complete documents only
    assert not held & train
    assert held | train == {TOK.decode(doc_ids(d)) for d in docs}
    assert first[-1]["tokens"].shape == (4, 64)  # the last batch is padded, not ragged


def test_held_out_num_batches_pads_or_truncates(tmp_path):
    cfg = config(
        (write_jsonl(tmp_path / "a.jsonl", texts(100, max_len=30)),), held_out_fraction=0.2
    )
    full = list(held_out_batches(cfg))
    padded = list(held_out_batches(cfg, num_batches=len(full) + 2))
    assert_same_batches(padded[: len(full)], full)
    assert all(b["loss_mask"].sum() == 0 for b in padded[len(full) :])
    assert_same_batches(list(held_out_batches(cfg, num_batches=1)), full[:1])


def test_counters_count_documents_and_tokens(tmp_path):
    docs = texts(10)
    counters = DataCounters()
    cfg = config((write_jsonl(tmp_path / "a.jsonl", docs),), seq_len=4096, global_batch_size=1)
    next(train_iterator(cfg, counters))
    snap = counters.snapshot()
    assert snap["jsonl/documents"] >= 10
    assert snap["jsonl/tokens"] >= sum(len(d.encode()) + 1 for d in docs)


def test_config_from_dict_rejects_unknown_keys():
    cfg = DataConfig.from_dict({"sources": [{"kind": "stdlib", "weight": 2}], "seq_len": 64})
    assert cfg.sources[0].weight == 2 and cfg.seq_len == 64
    with pytest.raises(ValueError, match="seqlen"):
        DataConfig.from_dict({"seqlen": 64})
    with pytest.raises(ValueError, match="weights"):
        DataConfig.from_dict({"sources": [{"kind": "stdlib", "weights": 2}]})
    with pytest.raises(ValueError, match="not divisible"):
        train_iterator(DataConfig(global_batch_size=3, process_index=0, process_count=2))


def test_stdlib_is_the_default_corpus():
    from data.sources import open_source

    cfg = DataConfig(seq_len=128, global_batch_size=4, process_index=0, process_count=1)
    assert cfg.sources[0].kind == "stdlib"
    pieces = [p for p in iter_pieces(next(train_iterator(cfg))) if p["ids"][0] == TOK.bos_id]
    assert pieces, "no document starts in the first batch"
    source = open_source(cfg.sources[0])
    assert len(source) > 500 and not any("site-packages" in f for f in source.files)
    openings = {open(f, "rb").read(60).decode("utf-8", "replace")[:20] for f in source.files}
    assert all(TOK.decode(p["ids"][1:21]) in openings for p in pieces if len(p["ids"]) > 21)


@pytest.mark.parametrize("spec", ["byte", "hf", "tiktoken"])
def test_held_out_target_bytes_equal_the_documents_bytes_for_every_tokenizer(tmp_path, spec):
    from data.sources import Document, is_held_out

    fixtures = os.path.join(os.path.dirname(__file__), "fixtures", "data")
    tokenizer = {
        "byte": "byte",
        "hf": f"hf:{fixtures}/tokenizer.json",
        "tiktoken": f"tiktoken:{fixtures}/tiktoken.model",
    }[spec]
    docs = [d + " déjà 日本" for d in texts(60, max_len=40)]
    cfg = config(
        (write_jsonl(tmp_path / "a.jsonl", docs),),
        held_out_fraction=0.5,
        seq_len=64,
        tokenizer=tokenizer,
    )
    held = [d for d in docs if is_held_out(Document(d, ""), 0.5)]
    batches = list(held_out_batches(cfg))
    assert 10 < len(held) < 50
    assert sum(int(b["target_bytes"].sum()) for b in batches) == sum(len(d.encode()) for d in held)
