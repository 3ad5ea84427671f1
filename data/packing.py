"""Tokenizing documents and packing them into fixed-length rows (a grain IterDataset).

Document layout
  text  -> [bos] + encode(text) + [eos]
  chat  -> render_messages(...): starts with bos, ends with the last message's <|end|>
A document of n ids is n-1 (input, target) pairs: inputs ids[:-1], targets ids[1:]. Rows are filled
with these pairs end to end, so every target is the real next token of its own document and no
slot is spent on a token without a target (the final eos is a target, never an input).

Row fields (each [T]; see data/__init__.py for the batch contract):
  tokens, targets     int32 (pad_id where empty)
  segment_ids         int32, 1, 2, .. per document piece in the row, 0 = padding
  positions           int32, restart at 0 for each piece
  loss_mask           float32, 1 on trained targets: 0 on padding; for chats 0 unless the target
                      token is an assistant token
  target_bytes        int32, UTF-8 bytes of text each target token covers (0 for special tokens and
                      padding): sum(nll) / ln 2 / sum(target_bytes) is bits per byte

Splitting: a document longer than the room left in the row is split; its remainder opens the next
row as a new piece (new segment, positions from 0), so nothing is dropped and rows are full.
With avoid_splitting=True a document that would fit in an empty row is moved to the next row
instead (the rest of this row is padding): chats then keep their context whole.

Checkpointing: between rows, the only carried state is the document being split. The iterator
state is (the parent's state just before that document was read, how many pairs were consumed),
so set_state re-reads the document and resumes mid-document: batches after a restore are exactly
those of an uninterrupted run.
"""

from __future__ import annotations

from typing import Any

import grain
import numpy as np

from data.chat import render_messages
from data.sources import DataError, Document
from data.tokenizers import Tokenizer, encode_array

ROW_KEYS = ("tokens", "targets", "segment_ids", "positions", "loss_mask", "target_bytes")


def tokenize_document(tok: Tokenizer, doc: Document, tool_budget: int = 0) -> dict[str, np.ndarray]:
    """{'ids': int32 [n], 'weights': float32 [n-1] (loss weight of each target ids[1:])}.
    tool_budget: chat tool results trimmed to that many tokens (data/chat.py; 0 = as written)."""
    if isinstance(doc.value, str):
        ids = np.concatenate([[tok.bos_id], encode_array(tok, doc.value), [tok.eos_id]]).astype(
            np.int32
        )
        return {"ids": ids, "weights": np.ones(len(ids) - 1, np.float32)}
    if not all(isinstance(m, dict) for m in doc.value):
        raise DataError("bad_chat", doc.where, "messages must be JSON objects")
    try:
        ids, assistant = render_messages(tok, doc.value, where=doc.where, tool_budget=tool_budget)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # unknown role, bad tool call
        message = (
            str(e) if isinstance(e, ValueError) else f"malformed message ({type(e).__name__}: {e})"
        )
        raise DataError("bad_chat", doc.where, message.removeprefix(f"{doc.where}: ")) from None
    if len(ids) < 2:
        raise DataError("empty", doc.where, "conversation has no messages")
    return {"ids": np.asarray(ids, np.int32), "weights": np.asarray(assistant[1:], np.float32)}


def empty_row(seq_len: int, pad_id: int) -> dict[str, np.ndarray]:
    return {
        "tokens": np.full(seq_len, pad_id, np.int32),
        "targets": np.full(seq_len, pad_id, np.int32),
        "segment_ids": np.zeros(seq_len, np.int32),
        "positions": np.zeros(seq_len, np.int32),
        "loss_mask": np.zeros(seq_len, np.float32),
        "target_bytes": np.zeros(seq_len, np.int32),
    }


class PackIterDataset(grain.IterDataset):
    """Packs a stream of tokenized documents ({'ids', 'weights'}) into rows of seq_len pairs."""

    def __init__(
        self,
        parent: grain.IterDataset,
        *,
        seq_len: int,
        pad_id: int,
        byte_lengths: np.ndarray,
        avoid_splitting: bool = False,
    ):
        super().__init__(parent)
        self._args = dict(
            seq_len=seq_len,
            pad_id=pad_id,
            byte_lengths=byte_lengths,
            avoid_splitting=avoid_splitting,
        )

    def __iter__(self) -> grain.DatasetIterator:
        return _PackIterator(self._parent.__iter__(), **self._args)


class _PackIterator(grain.DatasetIterator):
    def __init__(
        self,
        parent: grain.DatasetIterator,
        *,
        seq_len: int,
        pad_id: int,
        byte_lengths: np.ndarray,
        avoid_splitting: bool,
    ):
        super().__init__(parent)
        self._seq_len, self._pad_id, self._avoid_splitting = seq_len, pad_id, avoid_splitting
        self._byte_lengths = byte_lengths
        self._arange = np.arange(seq_len, dtype=np.int32)
        self._doc: dict[str, np.ndarray] | None = None  # the document being laid out
        self._doc_state: dict[str, Any] | None = None  # parent state just before it was read
        self._offset = 0  # pairs of it already laid out

    def _fetch(self) -> None:
        state = self._parent.get_state()
        doc = next(self._parent)  # StopIteration ends a finite stream
        self._doc, self._doc_state, self._offset = doc, state, 0

    def __next__(self) -> dict[str, np.ndarray]:
        T = self._seq_len
        row = empty_row(T, self._pad_id)
        fill = segment = 0
        while fill < T:
            if self._doc is None:
                try:
                    self._fetch()
                except StopIteration:
                    if fill == 0:
                        raise
                    break
            ids, weights, o = self._doc["ids"], self._doc["weights"], self._offset
            pairs = len(ids) - 1
            if self._avoid_splitting and fill and o == 0 and fill + pairs > T >= pairs:
                break  # it fits an empty row: start it there
            k = min(pairs - o, T - fill)
            segment += 1
            row["tokens"][fill : fill + k] = ids[o : o + k]
            row["targets"][fill : fill + k] = ids[o + 1 : o + k + 1]
            row["loss_mask"][fill : fill + k] = weights[o : o + k]
            row["segment_ids"][fill : fill + k] = segment
            row["positions"][fill : fill + k] = self._arange[:k]
            fill += k
            self._offset += k
            if self._offset == pairs:
                self._doc = None
        row["target_bytes"][:fill] = self._byte_lengths[row["targets"][:fill]]
        return row

    def get_state(self) -> dict[str, Any]:
        if self._doc is None:
            return {"parent": self._parent.get_state(), "offset": -1}
        return {"parent": self._doc_state, "offset": self._offset}

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state["parent"])
        self._doc = None
        if state["offset"] >= 0:
            self._fetch()
            self._offset = state["offset"]


def iter_pieces(batch: dict[str, np.ndarray]):
    """Inverse of packing, for tests and inspection: yields each document piece of a batch in order
    as {'ids': its tokens plus its last target, 'weights', 'positions', 'row'}."""
    for b in range(batch["tokens"].shape[0]):
        segments = batch["segment_ids"][b]
        for s in range(1, int(segments.max(initial=0)) + 1):
            idx = segments == s
            yield {
                "ids": np.append(batch["tokens"][b][idx], batch["targets"][b][idx][-1]),
                "weights": batch["loss_mask"][b][idx],
                "positions": batch["positions"][b][idx],
                "row": b,
            }


def join_pieces(pieces, bos_id: int) -> list[np.ndarray]:
    """Reassembles split documents: a piece that does not start with bos continues the previous
    one."""
    docs: list[np.ndarray] = []
    for piece in pieces:
        if piece["ids"][0] == bos_id or not docs:
            docs.append(piece["ids"])
        else:
            docs[-1] = np.concatenate([docs[-1], piece["ids"][1:]])
    return docs
