"""Grain pipelines: sources -> documents -> tokens -> packed rows -> mixture -> per-host batches.

    it = train_iterator(DataConfig(...), counters)     # infinite; it.get_state() / it.set_state()
    batch = next(it)                                   # dict of numpy arrays,
                                                         [B / process_count, T]
    for batch in held_out_batches(cfg): ...            # finite, one deterministic pass

Per source (one grain chain each):
  range(len(source))[process_index::process_count]   host shard: each host reads its own documents
  .shuffle(seed_i).repeat()                          a new document order every epoch (train only)
  .map(load + split filter + tokenize)               skipped documents become None and are counted
  .to_iter_dataset(ReadOptions(num_threads))         threads read files ahead, order stays fixed
  PackIterDataset(seq_len)                           full rows, document boundaries in segment_ids
Then the sources' rows are mixed by weight (grain's deterministic interleave; weights are shares
of rows, hence of tokens) and batched to [B / process_count, T].

Every stage is a grain iterator with get_state/set_state, so the whole state is a small JSON
dict that grain.checkpoint.CheckpointSave / CheckpointRestore write next to the Orbax checkpoint
(one file per process).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grain
import numpy as np

from data.packing import ROW_KEYS, PackIterDataset, empty_row, tokenize_document
from data.sources import DataCounters, DataError, SourceSpec, is_held_out, open_source
from data.tokenizers import Tokenizer, load_tokenizer, token_byte_lengths

TRAIN, HELD_OUT = "train", "held_out"
_PREFETCH = 64  # documents each source's reader threads may read ahead


@dataclasses.dataclass(frozen=True)
class DataConfig:
    sources: tuple[SourceSpec, ...] = (SourceSpec("stdlib"),)
    tokenizer: Any = "byte"  # a load_tokenizer spec: 'byte' | 'hf:PATH' | 'tiktoken:PATH' | dict
    seq_len: int = 256  # T
    global_batch_size: int = 8  # B over all hosts; each host yields B / process_count rows
    seed: int = 0
    held_out_fraction: float = 0.01  # share of documents (by content hash) kept out of training
    strict: bool = False  # True: bad input raises (file:line); False: skip and count
    avoid_splitting: bool = False  # keep documents that fit in one row whole (SFT)
    # Chat rows: each tool result trimmed to this many tokens (data/chat.py trim_tool_output, the
    # environment's own trim); 0 = as written.
    tool_output_budget: int = 0
    num_threads: int = 4  # reader threads per source
    process_index: int | None = None  # None: jax.process_index()
    process_count: int | None = None  # None: jax.process_count()

    def __post_init__(self):
        sources = tuple(_as_source_spec(s) for s in self.sources)
        object.__setattr__(self, "sources", sources)
        if not sources:
            raise ValueError("DataConfig.sources is empty")
        if self.seq_len < 1 or self.global_batch_size < 1:
            raise ValueError(
                f"DataConfig: seq_len={self.seq_len} and global_batch_size="
                f"{self.global_batch_size} must be >= 1"
            )
        if self.tool_output_budget < 0:
            raise ValueError(
                f"DataConfig.tool_output_budget={self.tool_output_budget} must be >= 0 (0 = off)"
            )
        if not 0 <= self.held_out_fraction < 1:
            raise ValueError(
                f"DataConfig.held_out_fraction={self.held_out_fraction} must be in [0, 1)"
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DataConfig:
        """From a plain/ml_collections dict; unknown keys are an error naming them."""
        d = dict(d)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"DataConfig: unknown keys {sorted(unknown)}")
        if "sources" in d:
            d["sources"] = tuple(d["sources"])
        return cls(**d)


def _as_source_spec(s: SourceSpec | Mapping[str, Any]) -> SourceSpec:
    if isinstance(s, SourceSpec):
        return s
    s = dict(s)
    unknown = set(s) - {f.name for f in dataclasses.fields(SourceSpec)}
    if unknown:
        raise ValueError(f"source {s.get('name') or s.get('kind')}: unknown keys {sorted(unknown)}")
    if "paths" in s and not isinstance(s["paths"], str):
        s["paths"] = tuple(s["paths"])
    return SourceSpec(**s)


def _process_index_and_count(cfg: DataConfig) -> tuple[int, int]:
    if cfg.process_index is not None and cfg.process_count is not None:
        index, count = cfg.process_index, cfg.process_count
    else:
        import jax  # only here: the data package itself does not need jax

        index, count = jax.process_index(), jax.process_count()
    if not 0 <= index < count:
        raise ValueError(f"process_index={index} must be in [0, process_count={count})")
    if cfg.global_batch_size % count:
        raise ValueError(
            f"global_batch_size={cfg.global_batch_size} is not divisible by process_count={count}"
        )
    return index, count


class _DocLoader:
    """Index -> tokenized document of the wanted split, or None (skipped/other split; counted).

    Raises when more than two passes' worth of documents in a row yield nothing (all bad, or all
    in the other split), which would otherwise spin forever on an infinite repeat.
    """

    def __init__(self, source, tok: Tokenizer, split: str, cfg: DataConfig, counters: DataCounters):
        self._source, self._tok, self._split, self._cfg, self._counters = (
            source,
            tok,
            split,
            cfg,
            counters,
        )
        self._label = source.label
        self._misses, self._lock = 0, threading.Lock()

    def __call__(self, i: int) -> dict[str, np.ndarray] | None:
        tokens = self._load(int(i))
        with self._lock:
            self._misses = 0 if tokens is not None else self._misses + 1
            # A usable document recurs once per epoch, so between two of them at most 2 * (len - 1)
            # documents miss (end of one shuffled epoch + start of the next); reader threads finish
            # out of order by at most their look-ahead (_PREFETCH elements).
            if self._misses > 2 * len(self._source) + 2 * _PREFETCH:
                raise DataError(
                    "no_documents",
                    self._label,
                    f"source {self._label}: a whole pass yielded no {self._split} document",
                )
        return tokens

    def _load(self, i: int) -> dict[str, np.ndarray] | None:
        try:
            doc = self._source.read(i)
            if not doc.value:
                raise DataError("empty", doc.where, "empty document")
            if is_held_out(doc, self._cfg.held_out_fraction) != (self._split == HELD_OUT):
                return None
            tokens = tokenize_document(self._tok, doc, self._cfg.tool_output_budget)
        except DataError as e:
            if self._cfg.strict and e.kind != "empty":  # empty files are normal (__init__.py)
                raise
            self._counters.skipped(self._label, e)
            return None
        self._counters.add(f"{self._label}/documents")
        self._counters.add(f"{self._label}/tokens", len(tokens["ids"]) - 1)
        return tokens


def _source_rows(
    spec: SourceSpec,
    source_number: int,
    tok: Tokenizer,
    byte_lengths: np.ndarray,
    split: str,
    cfg: DataConfig,
    counters: DataCounters,
    host: tuple[int, int],
) -> grain.IterDataset:
    """One source's packed rows for this host (train: shuffled, repeated; held-out: one pass)."""
    source = open_source(spec)
    index, count = host
    docs = grain.MapDataset.range(len(source))[index::count]
    if not len(docs):
        raise ValueError(
            f"source {spec.label}: {len(source)} documents cannot be shared by {count} hosts"
        )
    if split == TRAIN:
        seed = int(np.random.SeedSequence([cfg.seed, source_number]).generate_state(1)[0])
        docs = docs.shuffle(seed=seed).repeat()
    docs = docs.map(_DocLoader(source, tok, split, cfg, counters))
    stream = docs.to_iter_dataset(
        grain.ReadOptions(num_threads=cfg.num_threads, prefetch_buffer_size=_PREFETCH)
    )
    if split == HELD_OUT:  # ~99% of documents belong to the other split: expected, not a warning
        stream = grain.experimental.WithOptionsIterDataset(
            stream, grain.experimental.DatasetOptions(filter_warn_threshold_ratio=None)
        )
    return PackIterDataset(
        stream,
        seq_len=cfg.seq_len,
        pad_id=tok.pad_id,
        byte_lengths=byte_lengths,
        avoid_splitting=cfg.avoid_splitting,
    )


def train_iterator(
    cfg: DataConfig, counters: DataCounters | None = None, tok: Tokenizer | None = None
) -> grain.DatasetIterator:
    """Infinite iterator of this host's batches ([B / process_count, T] numpy dicts).

    Deterministic given cfg (seed, sources, process index/count). Save/restore its position with
    it.get_state()/it.set_state(state) or grain.checkpoint.CheckpointSave(it)/CheckpointRestore(it).
    """
    tok = tok or load_tokenizer(cfg.tokenizer)
    counters = counters if counters is not None else DataCounters()
    host = _process_index_and_count(cfg)
    byte_lengths = token_byte_lengths(tok)
    rows = [
        _source_rows(s, n, tok, byte_lengths, TRAIN, cfg, counters, host)
        for n, s in enumerate(cfg.sources)
    ]
    mixed = (
        rows[0] if len(rows) == 1 else grain.IterDataset.mix(rows, [s.weight for s in cfg.sources])
    )
    return iter(mixed.batch(cfg.global_batch_size // host[1], drop_remainder=True))


def held_out_batches(
    cfg: DataConfig,
    counters: DataCounters | None = None,
    tok: Tokenizer | None = None,
    num_batches: int | None = None,
) -> Iterator[dict[str, np.ndarray]]:
    """One deterministic pass over this host's held-out documents, source after source.

    The last batch is filled with empty rows (loss_mask 0) so every batch has the training shape.
    num_batches: yield exactly this many (truncating, or adding all-padding batches). Multi-host
    evaluation needs it: hosts hold different amounts of held-out data but must run the same
    number of steps. Without it, a source whose held-out split is empty yields no batch.
    """
    tok = tok or load_tokenizer(cfg.tokenizer)
    counters = counters if counters is not None else DataCounters()
    host = _process_index_and_count(cfg)
    local_batch = cfg.global_batch_size // host[1]
    byte_lengths = token_byte_lengths(tok)
    rows = (
        row
        for n, s in enumerate(cfg.sources)
        for row in _source_rows(s, n, tok, byte_lengths, HELD_OUT, cfg, counters, host)
    )
    yielded = 0
    while num_batches is None or yielded < num_batches:
        batch = [row for _, row in zip(range(local_batch), rows)]
        if not batch and num_batches is None:
            return
        batch += [empty_row(cfg.seq_len, tok.pad_id)] * (local_batch - len(batch))
        yield stack_rows(batch)
        yielded += 1


def stack_rows(rows: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([r[k] for r in rows]) for k in ROW_KEYS}
