"""Packing isolates documents *through the model*: a packed row gives each document the same logits
as running it alone, and changing one document changes no other document's logits.

Needs the model package (model/ on main, MODEL_CONTRACT.md); skipped with a reason until it lands.
"""

import dataclasses
import json

import numpy as np
import pytest

try:
    import jax

    from model import Transformer, param_shapes, presets
except ImportError as e:  # the model lands on main separately from the data layer
    pytest.skip(f"needs `from model import Transformer, presets` ({e})", allow_module_level=True)

from data import DataConfig, SourceSpec, train_iterator
from data.tokenizers import ByteTokenizer

TOK = ByteTokenizer()


@pytest.fixture(scope="module")
def forward():
    """One jitted forward of the tiny preset, called with a single shape [2, 48] (one compile)."""
    cfg = presets.get("tiny")
    fields = {f.name for f in dataclasses.fields(cfg)}
    changes = {"vocab_size": TOK.vocab_size, "dtype": "float32"}
    cfg = dataclasses.replace(cfg, **{k: v for k, v in changes.items() if k in fields})
    # Random weights from the abstract shapes: any weights must keep documents apart, and this
    # skips compiling the model's initializer (10-15 s on 2 cores).
    rng = np.random.default_rng(0)
    params = jax.tree.map(
        lambda x: jax.numpy.asarray(rng.normal(0, 0.05, x.shape), x.dtype), param_shapes(cfg)
    )
    apply = jax.jit(
        lambda p, t, pos, seg: Transformer(cfg).apply(
            {"params": p}, t, positions=pos, segment_ids=seg
        )
    )

    def run(tokens, positions, segment_ids):
        """(logits [B,T,V], mtp_logits [M,B,T,V] or None), B a multiple of 2 (rows run 2 at a
        time)."""
        outs = [
            apply(params, tokens[i : i + 2], positions[i : i + 2], segment_ids[i : i + 2])
            for i in range(0, len(tokens), 2)
        ]
        logits = np.concatenate([np.asarray(o.logits) for o in outs])
        mtp = (
            None
            if outs[0].mtp_logits is None
            else np.concatenate([np.asarray(o.mtp_logits) for o in outs], 1)
        )
        return logits, mtp

    return run


def packed_batch(tmp_path):
    docs = [f"doc {i}: " + "xyz " * (i % 4 + 1) for i in range(12)]  # 12..24 tokens: 2-4 per row
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    cfg = DataConfig(
        sources=(SourceSpec("jsonl", (str(path),)),),
        seq_len=48,
        global_batch_size=2,
        held_out_fraction=0.0,
        process_index=0,
        process_count=1,
    )
    batch = next(train_iterator(cfg))
    assert (batch["segment_ids"].max(axis=1) >= 2).all(), "each row should hold several documents"
    return batch


def test_each_packed_document_sees_only_itself(tmp_path, forward):
    batch = packed_batch(tmp_path)
    packed, packed_mtp = forward(batch["tokens"], batch["positions"], batch["segment_ids"])
    # Every document alone, each at the start of its own row (the rest is padding, segment 0):
    # one call, one shape. Causal attention keeps the trailing padding out of the comparison.
    pieces = [
        (b, np.flatnonzero(batch["segment_ids"][b] == s))
        for b in range(len(batch["tokens"]))
        for s in range(1, batch["segment_ids"][b].max() + 1)
    ]
    T = batch["tokens"].shape[1]
    tokens = np.full(
        (len(pieces) + len(pieces) % 2, T), TOK.pad_id, np.int32
    )  # an even number of rows
    positions, segments = np.zeros_like(tokens), np.zeros_like(tokens)
    for i, (b, slots) in enumerate(pieces):
        tokens[i, : len(slots)] = batch["tokens"][b][slots]
        positions[i, : len(slots)] = np.arange(len(slots))
        segments[i, : len(slots)] = 1
    alone, alone_mtp = forward(tokens, positions, segments)
    for i, (b, slots) in enumerate(pieces):
        np.testing.assert_allclose(
            packed[b, slots],
            alone[i, : len(slots)],
            atol=2e-4,
            rtol=2e-4,
            err_msg=f"row {b}, document at slots {slots[0]}..{slots[-1]}",
        )
        # MTP head k at t also reads tokens t+1..t+k+1, so its last k+1 outputs in a document
        # see the next document's tokens; their targets are beyond the document (loss 0 there).
        for k in range(0 if packed_mtp is None else len(packed_mtp)):
            inside = slots[: len(slots) - (k + 1)]
            np.testing.assert_allclose(
                packed_mtp[k][b, inside],
                alone_mtp[k][i, : len(inside)],
                atol=2e-4,
                rtol=2e-4,
                err_msg=f"mtp {k}, row {b}",
            )


def test_changing_one_document_changes_no_other(tmp_path, forward):
    batch = packed_batch(tmp_path)
    before, _ = forward(batch["tokens"], batch["positions"], batch["segment_ids"])
    tokens = batch["tokens"].copy()
    first = batch["segment_ids"][0] == 1
    tokens[0][first] = (tokens[0][first] + 7) % 256  # rewrite document 1 of row 0
    after, _ = forward(tokens, batch["positions"], batch["segment_ids"])
    assert not np.allclose(before[0][first], after[0][first])  # the edit is visible to itself
    np.testing.assert_allclose(
        before[0][~first & (batch["segment_ids"][0] > 0)],
        after[0][~first & (batch["segment_ids"][0] > 0)],
        atol=1e-5,
    )
    np.testing.assert_allclose(before[1], after[1], atol=1e-5)  # and the other row is untouched
