"""Document sources: random-access lists of documents read lazily from local files.

A source is `len(source)` documents; `source.read(i) -> Document` reads one on demand (nothing is
loaded or tokenized up front: indexing the 1.8k-file stdlib is a directory walk, ~0.1 s).
A document's value is either text (str) or a chat (list of message dicts, rendered with
data/chat.py so that only assistant tokens are trained).

Kinds (SourceSpec.kind):
  files         paths are globs ('**' recurses) or directories (every file below them); one file =
              one text.
  stdlib        the Python standard library's own .py files (site-packages excluded): real code
                on every machine, no download. The default pretraining corpus.
  jsonl         one JSON object per line; `field` names the document ('text' or 'messages').
  parquet       one row = one document; `field` names the column (needs pyarrow).
  array_record  one record = one JSON object (like a JSONL line); field='' reads the record as raw
              text.

Bad input raises `DataError` naming file and line (or row/record); the pipeline either re-raises
it (strict) or skips the document and counts it under `DataError.kind`.
The train/held-out split is a hash of the document's content, so it does not depend on file
order, seeds or machine paths, and duplicate documents land in the same split.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import hashlib
import json
import logging
import mmap
import os
import sysconfig
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from model.errors import DataError

SOURCE_KINDS = ("files", "stdlib", "jsonl", "parquet", "array_record")


@dataclasses.dataclass(frozen=True)
class SourceSpec:
    kind: str
    paths: tuple[str, ...] = ()
    weight: float = 1.0  # mixture weight: share of packed rows (= of tokens) from this source
    field: str = "text"  # jsonl key / parquet column / array_record JSON key
    name: str = ""  # used in counters and errors; defaults to the kind

    def __post_init__(self):
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"source kind {self.kind!r} is not one of {SOURCE_KINDS}")
        if isinstance(self.paths, str):
            object.__setattr__(self, "paths", (self.paths,))
        if self.kind != "stdlib" and not self.paths:
            raise ValueError(f"source {self.label}: needs at least one path")
        if not self.weight > 0:
            raise ValueError(f"source {self.label}: weight must be > 0, got {self.weight}")

    @property
    def label(self) -> str:
        return self.name or self.kind


@dataclasses.dataclass(frozen=True)
class Document:
    value: str | list  # text, or a list of chat messages
    where: str  # 'path', 'path:line 7', 'path:row 3', for errors


class DataCounters:
    """Thread-safe counts of documents read, tokens produced and documents skipped, per source.

    Keys look like 'stdlib/documents', 'stdlib/tokens', 'traces/skipped_bad_json'. `snapshot()`
    is what the loop logs. Reader threads run ahead of training, so counts include prefetched docs;
    counts start at zero in each process (they are not checkpointed), and a restore re-reads the
    document it resumes inside, counting it again.
    """

    _LOGGED_PER_KEY = 3  # log the first few skips of each kind with their location, then count only

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()

    def add(self, key: str, n: int = 1) -> int:
        with self._lock:
            self._counts[key] += n
            return self._counts[key]

    def skipped(self, source: str, error: DataError) -> None:
        if self.add(f"{source}/skipped_{error.kind}") <= self._LOGGED_PER_KEY:
            logging.warning("data: skipped a document (%s): %s", error.kind, error)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))


def is_held_out(doc: Document, fraction: float) -> bool:
    """Stable split: the first 8 bytes of blake2b(content) as a number in [0, 1) vs `fraction`."""
    if fraction <= 0:
        return False
    if isinstance(doc.value, str):
        content = doc.value.encode("utf-8")
    else:
        content = json.dumps(doc.value, sort_keys=True, ensure_ascii=False).encode("utf-8")
    digest = hashlib.blake2b(content, digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64 < fraction


# ------------------------------------------------------------------------------ file listing


def stdlib_root() -> str:
    return sysconfig.get_paths()["stdlib"]


def _walk_files(root: str, suffix: str = "") -> list[str]:
    """Files below root, sorted; skips hidden dirs, caches and installed third-party packages."""
    skip = {"site-packages", "dist-packages", "__pycache__"}
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip and not d.startswith(".")]
        found.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(suffix))
    return sorted(found)


def resolve_paths(patterns: Sequence[str], label: str) -> list[str]:
    """Expands globs and directories to a sorted list of files; a pattern matching nothing is an
    error."""
    files: list[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            matched = _walk_files(pattern)
        else:
            matched = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not matched:
            raise FileNotFoundError(f"source {label}: {pattern!r} matches no file")
        files.extend(matched)
    return sorted(set(files))


def _decode_utf8(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(
            "undecodable",
            f"{where}:{line}",
            f"not UTF-8 (byte {e.start}: {data[e.start : e.start + 4]!r})",
        ) from None


def _field_value(record: Any, field: str, where: str) -> str | list:
    if not isinstance(record, dict) or field not in record:
        raise DataError("bad_field", where, f"expected a JSON object with key {field!r}")
    value = record[field]
    if not isinstance(value, (str, list)):
        raise DataError(
            "bad_field",
            where,
            f"{field!r} must be a string or a list of messages, got {type(value).__name__}",
        )
    return value


def _json_field(text: str, field: str, where: str) -> str | list:
    """The `field` of the JSON object `text` (one record); a DataError naming `where` otherwise."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError("bad_json", where, f"invalid JSON ({e.msg} at column {e.colno})") from None
    return _field_value(record, field, where)


class _MultiFileIndex:
    """Maps a global document index to (file number, index within that file)."""

    def __init__(self, counts: Sequence[int]):
        self.ends = np.cumsum(counts)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def locate(self, i: int) -> tuple[int, int]:
        f = int(np.searchsorted(self.ends, i, side="right"))
        return f, i - (int(self.ends[f - 1]) if f else 0)


# ------------------------------------------------------------------------------ sources


class FilesSource:
    """One file = one text document."""

    def __init__(self, files: Sequence[str], label: str):
        self.files, self.label = list(files), label

    def __len__(self) -> int:
        return len(self.files)

    def read(self, i: int) -> Document:
        path = self.files[i]
        with open(path, "rb") as f:
            return Document(_decode_utf8(f.read(), path), path)


def _line_bounds(data, chunk: int = 1 << 26) -> np.ndarray:
    """Start offset of every line, then len(data): scanned 64 MiB at a time, so indexing a large
    file costs no memory beyond the index itself."""
    starts = [np.zeros(1, np.int64)]
    for lo in range(0, len(data), chunk):
        piece = np.frombuffer(data, np.uint8, count=min(chunk, len(data) - lo), offset=lo)
        starts.append(np.flatnonzero(piece == ord("\n")).astype(np.int64) + lo + 1)
    starts = np.concatenate(starts)
    if starts[-1] >= len(data):  # a final newline (or an empty file) starts no line
        starts = starts[:-1]
    return np.append(starts, len(data))


class JsonlSource:
    """One line = one JSON object; lines are indexed by byte offset (files are memory-mapped)."""

    def __init__(self, files: Sequence[str], field: str, label: str):
        self.files, self.field, self.label = list(files), field, label
        self._maps, self._starts = [], []
        for path in self.files:
            with open(path, "rb") as f:
                data = (
                    mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    if os.path.getsize(path)
                    else b""
                )
            self._maps.append(data)
            self._starts.append(_line_bounds(data))
        self._index = _MultiFileIndex([len(s) - 1 for s in self._starts])
        if not len(self._index):
            raise FileNotFoundError(f"source {label}: {', '.join(self.files)} holds no lines")

    def __len__(self) -> int:
        return len(self._index)

    def read(self, i: int) -> Document:
        f, line = self._index.locate(i)
        where = f"{self.files[f]}:{line + 1}"
        start, end = self._starts[f][line], self._starts[f][line + 1]
        text = _decode_utf8(bytes(self._maps[f][start:end]), where).strip()
        if not text:
            raise DataError("empty", where, "blank line")
        return Document(_json_field(text, self.field, where), where)


class ParquetSource:
    """One row = one document, from column `field`; recently read row groups are cached."""

    def __init__(self, files: Sequence[str], field: str, label: str):
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise ImportError(
                f"source {label}: reading Parquet needs pyarrow (pip install pyarrow)"
            ) from e
        self.files, self.field, self.label = list(files), field, label
        self._readers = [pq.ParquetFile(p) for p in self.files]
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[tuple[int, int], list] = collections.OrderedDict()
        group_rows = []  # per file: cumulative row counts of its row groups
        for path, reader in zip(self.files, self._readers):
            if field not in reader.schema_arrow.names:
                raise DataError(
                    "bad_field", path, f"no column {field!r} (columns: {reader.schema_arrow.names})"
                )
            group_rows.append(
                [reader.metadata.row_group(g).num_rows for g in range(reader.num_row_groups)]
            )
        self._groups = [_MultiFileIndex(rows) for rows in group_rows]
        self._index = _MultiFileIndex([len(g) for g in self._groups])

    def __len__(self) -> int:
        return len(self._index)

    def _row_group(self, f: int, g: int) -> list:
        with self._lock:
            if (f, g) in self._cache:
                self._cache.move_to_end((f, g))
                return self._cache[(f, g)]
            rows = self._readers[f].read_row_group(g, columns=[self.field]).column(0).to_pylist()
            self._cache[(f, g)] = rows
            if len(self._cache) > 8:
                self._cache.popitem(last=False)
            return rows

    def read(self, i: int) -> Document:
        f, row = self._index.locate(i)
        g, row_in_group = self._groups[f].locate(row)
        where = f"{self.files[f]}:row {row}"
        value = self._row_group(f, g)[row_in_group]
        if value is None:
            raise DataError("empty", where, f"{self.field!r} is null")
        return Document(_field_value({self.field: value}, self.field, where), where)


class ArrayRecordSource:
    """One record = one JSON object (or raw UTF-8 text when field == '')."""

    def __init__(self, files: Sequence[str], field: str, label: str):
        import grain

        self.files, self.field, self.label = list(files), field, label
        self._readers = [grain.sources.ArrayRecordDataSource([p]) for p in self.files]
        self._index = _MultiFileIndex([len(r) for r in self._readers])

    def __len__(self) -> int:
        return len(self._index)

    def read(self, i: int) -> Document:
        f, record = self._index.locate(i)
        where = f"{self.files[f]}:record {record}"
        text = _decode_utf8(self._readers[f][record], where)
        if not self.field:
            return Document(text, where)
        return Document(_json_field(text, self.field, where), where)


def open_source(spec: SourceSpec):
    """Builds the reader for one spec. Missing paths and empty sources fail here, naming the
    path."""
    if spec.kind == "stdlib":
        roots = spec.paths or (stdlib_root(),)
        files = [f for root in roots for f in _walk_files(root, ".py")]
        if not files:
            raise FileNotFoundError(f"source {spec.label}: no .py files under {roots}")
        return FilesSource(files, spec.label)
    files = resolve_paths(spec.paths, spec.label)
    if spec.kind == "files":
        return FilesSource(files, spec.label)
    if spec.kind == "jsonl":
        return JsonlSource(files, spec.field, spec.label)
    if spec.kind == "parquet":
        return ParquetSource(files, spec.field, spec.label)
    return ArrayRecordSource(files, spec.field, spec.label)
