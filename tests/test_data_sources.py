"""Sources: every format reads the same documents; the split is stable; bad input is named or
counted."""

import json
import os

import numpy as np
import pytest

from data import DataConfig, DataCounters, DataError, SourceSpec, is_held_out, train_iterator
from data.sources import Document, open_source

DOCS = ["first document\n", "second: héllo 日本\n", "third"]


def read_all(spec):
    source = open_source(spec)
    return [source.read(i).value for i in range(len(source))]


def write(path, data: bytes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_files_globs_and_directories(tmp_path):
    for i, d in enumerate(DOCS):
        write(tmp_path / "code" / f"sub{i}" / f"m{i}.py", d.encode())
    write(tmp_path / "code" / "notes.txt", b"not python")
    assert read_all(SourceSpec("files", (str(tmp_path / "code" / "**" / "*.py"),))) == DOCS
    assert len(read_all(SourceSpec("files", (str(tmp_path / "code"),)))) == 4


def test_jsonl_and_array_record_read_the_same_documents(tmp_path):
    jsonl = write(
        tmp_path / "d.jsonl", "".join(json.dumps({"text": d}) + "\n" for d in DOCS).encode()
    )
    assert read_all(SourceSpec("jsonl", (jsonl,))) == DOCS

    from array_record.python.array_record_module import ArrayRecordWriter

    path = str(tmp_path / "d.array_record")
    writer = ArrayRecordWriter(path, "group_size:1")
    for d in DOCS:
        writer.write(json.dumps({"text": d}).encode())
    writer.close()
    assert read_all(SourceSpec("array_record", (path,))) == DOCS


def test_parquet_reads_the_same_documents_across_row_groups(tmp_path):
    pq = pytest.importorskip(
        "pyarrow.parquet", reason="Parquet needs pyarrow (not a core dependency)"
    )
    import pyarrow as pa

    parquet = str(tmp_path / "d.parquet")
    pq.write_table(pa.table({"text": DOCS, "n": [1, 2, 3]}), parquet, row_group_size=2)
    assert read_all(SourceSpec("parquet", (parquet,))) == DOCS
    with pytest.raises(DataError, match=r"d.parquet: no column 'body'"):
        open_source(SourceSpec("parquet", (parquet,), field="body"))


def test_jsonl_line_numbers_survive_blank_lines_and_missing_final_newline(tmp_path):
    path = write(tmp_path / "d.jsonl", b'{"text": "a"}\n\n{"text": "b"}')
    source = open_source(SourceSpec("jsonl", (path,)))
    assert source.read(0).where == f"{path}:1" and source.read(2).where == f"{path}:3"
    with pytest.raises(DataError, match=":2: blank line"):
        source.read(1)


def test_split_depends_only_on_content():
    doc = Document("def f():\n    return 1\n", "a.py")
    moved = Document("def f():\n    return 1\n", "elsewhere/b.py")
    assert is_held_out(doc, 0.5) == is_held_out(moved, 0.5)
    # Pinned values: changing the hash would silently move documents between the splits.
    flags = [is_held_out(Document(f"doc {i}", ""), 0.3) for i in range(8)]
    assert flags == [False, True, False, True, False, True, False, False]
    share = np.mean([is_held_out(Document(f"document number {i}", ""), 0.1) for i in range(5000)])
    assert share == pytest.approx(0.1, abs=0.015)
    assert not any(is_held_out(Document(f"d{i}", ""), 0.0) for i in range(100))


def test_split_of_chats_ignores_key_order():
    a = Document([{"role": "user", "content": "hi"}], "x")
    b = Document([{"content": "hi", "role": "user"}], "y")
    assert [is_held_out(a, f / 10) for f in range(10)] == [
        is_held_out(b, f / 10) for f in range(10)
    ]


# ------------------------------------------------------------------------------ bad input


def config(path, strict, **kw):
    return DataConfig(
        sources=(SourceSpec(kw.pop("kind", "jsonl"), (path,), **kw),),
        seq_len=16,
        global_batch_size=1,
        held_out_fraction=0.0,
        strict=strict,
        process_index=0,
        process_count=1,
        num_threads=1,
    )


def test_missing_path_fails_at_build_naming_it(tmp_path):
    missing = str(tmp_path / "nope" / "*.jsonl")
    with pytest.raises(FileNotFoundError, match="nope"):
        train_iterator(config(missing, strict=False))


def test_empty_jsonl_file_fails_at_build(tmp_path):
    path = write(tmp_path / "empty.jsonl", b"")
    with pytest.raises(FileNotFoundError, match="empty.jsonl holds no lines"):
        train_iterator(config(path, strict=False))


BAD_LINES = [
    ("bad_json", b'{"text": "unterminated\n', ":2: invalid JSON"),
    ("bad_field", b'{"body": "x"}\n', ":2: expected a JSON object with key 'text'"),
    ("undecodable", b'{"text": "caf\xe9"}\n', ":2:1: not UTF-8"),
    (
        "bad_chat",
        b'{"text": [{"role": "robot", "content": "x"}]}\n',
        ":2: message 0 has unknown role 'robot'",
    ),
    ("empty", b'{"text": ""}\n', None),
]


@pytest.mark.parametrize("kind, line, message", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_bad_jsonl_line_strict_raises_with_file_and_line(tmp_path, kind, line, message):
    path = write(tmp_path / "d.jsonl", b'{"text": "good one"}\n' + line + b'{"text": "good two"}\n')
    it = train_iterator(config(path, strict=True))
    if message is None:  # empty documents are skipped even when strict
        next(it)
        return
    with pytest.raises(DataError, match=f"d.jsonl{message}"):
        for _ in range(20):
            next(it)


@pytest.mark.parametrize("kind, line, message", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_bad_jsonl_line_lenient_is_skipped_and_counted(tmp_path, kind, line, message):
    path = write(tmp_path / "d.jsonl", b'{"text": "good one"}\n' + line + b'{"text": "good two"}\n')
    counters = DataCounters()
    it = train_iterator(config(path, strict=False), counters)
    rows = [next(it) for _ in range(12)]  # several epochs of the 3 lines
    text = "".join(chr(t) for r in rows for t in r["tokens"].ravel() if t < 256)
    assert "good one" in text and "good two" in text
    snap = counters.snapshot()
    assert snap[f"jsonl/skipped_{kind}"] >= 1
    assert snap["jsonl/documents"] >= 2


def test_undecodable_and_empty_files_are_named_or_counted(tmp_path):
    write(tmp_path / "src" / "ok.py", b"x = 1\n")
    write(tmp_path / "src" / "empty.py", b"")
    write(tmp_path / "src" / "latin.py", b"# ok\ns = 'caf\xe9'\n")
    pattern = str(tmp_path / "src" / "*.py")
    with pytest.raises(DataError, match=r"latin.py:2: not UTF-8"):
        it = train_iterator(config(pattern, strict=True, kind="files"))
        for _ in range(10):
            next(it)
    counters = DataCounters()
    it = train_iterator(config(pattern, strict=False, kind="files"), counters)
    for _ in range(5):
        next(it)
    snap = counters.snapshot()
    assert snap["files/skipped_undecodable"] >= 1 and snap["files/skipped_empty"] >= 1


def test_a_source_with_no_usable_document_raises_instead_of_spinning(tmp_path):
    path = write(tmp_path / "d.jsonl", b"not json\nnor this\n")
    it = train_iterator(config(path, strict=False))
    with pytest.raises(DataError, match="a whole pass yielded no train document"):
        next(it)


def test_chat_with_malformed_tool_call_is_named(tmp_path):
    chat = [{"role": "assistant", "content": "x", "tool_calls": [{"arguments": {}}]}]
    path = write(tmp_path / "c.jsonl", (json.dumps({"messages": chat}) + "\n").encode())
    it = train_iterator(config(path, strict=True, field="messages"))
    with pytest.raises(DataError, match=r"c.jsonl:1: malformed message"):
        next(it)


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 26])
def test_jsonl_line_index_is_independent_of_the_scan_chunk(chunk):
    from data.sources import _line_bounds

    for data in [b"", b"a", b"a\n", b"\n", b"ab\n\ncd\nef", b"x\ny\n"]:
        bounds = _line_bounds(data, chunk=chunk)
        lines = [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        assert b"".join(lines) == data
        assert [line.rstrip(b"\n") for line in lines] == data.splitlines()
