"""Tiny deterministic batch iterators in the data contract, until data/ lands.

Batch contract (per host slice of the global batch), numpy:
  tokens, targets, segment_ids, positions  int32 [B, T]
  loss_mask                                float32 [B, T]
The iterators are Grain `DatasetIterator`s, so `get_state()/set_state()` give exact resume and
Grain's Orbax handler (or ours) can checkpoint them.

Two sources:
- `synthetic_tokens`: a seeded random stream with a learnable rule (next = (prev * 7 + 3) % V
  half of the time), so loss can go down in a few steps.
- `local_text_tokens`: real local text (this repo's and the Python stdlib's .py files) through the
  byte tokenizer; used by the default main job until the embedded code corpus lands.
"""

from __future__ import annotations

import glob
import os

import grain
import numpy as np


def synthetic_tokens(num_tokens: int, vocab_size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    toks = rng.integers(0, vocab_size, size=num_tokens, dtype=np.int64)
    follow_rule = rng.random(num_tokens) < 0.5
    for i in range(1, num_tokens):  # sequential on purpose: the rule depends on the previous token
        if follow_rule[i]:
            toks[i] = (toks[i - 1] * 7 + 3) % vocab_size
    return toks.astype(np.int32)


def local_text_tokens(max_bytes: int, roots: list[str] | None = None) -> np.ndarray:
    """Bytes of local .py files (sorted, so deterministic), as byte-tokenizer ids (0..255)."""
    if roots is None:
        roots = [os.path.dirname(os.__file__)]
    files = []
    for root in roots:
        files += sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True))
    chunks, total = [], 0
    for path in files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        chunks.append(np.frombuffer(data, dtype=np.uint8))
        total += len(data)
        if total >= max_bytes:
            break
    if not chunks:
        raise ValueError(f"local_text_tokens: no .py files under {roots}")
    return np.concatenate(chunks)[:max_bytes].astype(np.int32)


def _window_to_example(window: np.ndarray) -> dict[str, np.ndarray]:
    seq_len = window.shape[0] - 1
    return {
        "tokens": window[:-1].astype(np.int32),
        "targets": window[1:].astype(np.int32),
        "segment_ids": np.ones(seq_len, np.int32),
        "positions": np.arange(seq_len, dtype=np.int32),
        "loss_mask": np.ones(seq_len, np.float32),
    }


def lm_batches(
    tokens: np.ndarray,
    *,
    batch_size: int,
    seq_len: int,
    seed: int,
    shard_index: int = 0,
    shard_count: int = 1,
    shuffle: bool = True,
):
    """Infinite iterator of per-host batches of `batch_size // shard_count` rows.

    Windows of seq_len + 1 tokens are cut from `tokens`, shuffled with `seed`, and host i takes
    windows i, i + n, ... so hosts never see the same window within an epoch.
    """
    if batch_size % shard_count:
        raise ValueError(f"batch_size {batch_size} not divisible by {shard_count} hosts")
    num_windows = (len(tokens) - 1) // seq_len
    if num_windows < batch_size:
        raise ValueError(
            f"{len(tokens)} tokens give {num_windows} windows < batch_size {batch_size}"
        )
    ds = grain.MapDataset.range(num_windows)
    if shuffle:
        ds = ds.shuffle(seed=seed)
    ds = ds[shard_index::shard_count].repeat(None)
    ds = ds.map(lambda w: _window_to_example(tokens[w * seq_len : (w + 1) * seq_len + 1]))
    ds = ds.batch(batch_size // shard_count, drop_remainder=True)
    return iter(ds.to_iter_dataset())
