"""Data: tokenizers, document sources, Grain pipelines (tokenize -> pack -> mix -> shard -> batch).

Quick use
    from data import DataConfig, SourceSpec, DataCounters, train_iterator, held_out_batches
    cfg = DataConfig(sources=(SourceSpec('stdlib'),), seq_len=256, global_batch_size=8, seed=0)
    counters = DataCounters()
    it = train_iterator(cfg, counters)          # infinite, deterministic given cfg
    batch = next(it)                            # this host's [B / process_count, T] slice
    state = it.get_state(); it.set_state(state) # exact resume (JSON-able dict)
    for batch in held_out_batches(cfg): ...     # finite, one deterministic pass
    log(counters.snapshot())                    # {'stdlib/documents': ..,
                                                  'stdlib/skipped_undecodable': ..}

Checkpointing with Orbax (grain's handler writes one JSON file per process):
    mngr.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(train_state),
                                            data=grain.checkpoint.CheckpointSave(it)))
    mngr.restore(step, args=ocp.args.Composite(state=...,
                                               data=grain.checkpoint.CheckpointRestore(it)))

Batch contract (numpy; B = global_batch_size / process_count, T = seq_len)
    tokens       int32   [B, T]  input ids (pad_id where empty)
    targets      int32   [B, T]  next token of the same document
    segment_ids  int32   [B, T]  1, 2, .. per document piece in the row; 0 = padding
    positions    int32   [B, T]  restart at 0 for each piece
    loss_mask    float32 [B, T]  1 where targets is a trained real next token: 0 on padding; chats
                                 (SFT) 0 unless the target is an assistant token
    target_bytes int32   [B, T]  UTF-8 bytes each target covers (0: specials, padding);
                                 bits/byte = sum(nll * loss_mask) / ln 2
                                             / sum(target_bytes * loss_mask)

Document boundaries: a text document is [bos] + ids + [eos]; a chat is data/chat.py's rendering
(bos first). A document of n ids is packed as its n-1 (input, target) pairs, so each document's
last token (eos) only appears as a target: "loss_mask 0 at a document's last token" holds because
that token is never an input. Documents longer than the room in a row are split; the remainder
starts the next row as a new piece (new segment id, positions from 0). Nothing is dropped.

Sources (SourceSpec.kind): files (globs/directories), stdlib (default pretraining corpus: the
interpreter's own .py files), jsonl, parquet, array_record. field='messages' (a list of chat
messages) makes a source SFT data: loss only on assistant tokens. data/traces/ ships a generated
set: SourceSpec('jsonl', (data.traces_path(),), field='messages'); the SFT run's spec is
configs/sft.py (train.batches.data_config(sft.get_config()) gives its DataConfig).
The train/held-out split hashes each document's content (is_held_out), so it is stable.

Bad input: missing paths and empty sources fail when the iterator is built, naming the path.
Per document (undecodable bytes, invalid JSON line, missing field, unknown chat role): with
strict=True a DataError naming file:line; otherwise the document is skipped and counted in
DataCounters ('<source>/skipped_<kind>'; the first few are also logged with their location).
Empty documents (stdlib has empty __init__.py files) are always skipped and counted.

Tokenizers: data.tokenizers.load_tokenizer('byte' | 'hf:PATH' | 'tiktoken:PATH'); local files only.
Inspection: data.packing.iter_pieces(batch) / join_pieces(...) undo the packing (used by the tests).
"""

import importlib
import os

# Lazy exports: `import data.chat` (used by rl/) must not pay for importing grain (~1.3 s).
_EXPORTS = {
    "DataConfig": "data.pipeline",
    "held_out_batches": "data.pipeline",
    "train_iterator": "data.pipeline",
    "DataCounters": "data.sources",
    "DataError": "data.sources",
    "SourceSpec": "data.sources",
    "is_held_out": "data.sources",
    "load_tokenizer": "data.tokenizers",
}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'data' has no attribute {name!r}")


TRACES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "traces")


def traces_path() -> str:
    """Glob of the shipped generated agent traces (JSONL of chat messages with tool calls)."""
    return os.path.join(TRACES_DIR, "*.jsonl")


__all__ = [
    "DataConfig",
    "DataCounters",
    "DataError",
    "SourceSpec",
    "held_out_batches",
    "is_held_out",
    "load_tokenizer",
    "train_iterator",
    "traces_path",
]
