"""The interaction log: every served exchange, token-exact, and the feedback users attach to it.

    log = InteractionLog(dir, max_bytes=64 << 20)
    log.append({"kind": "exchange", "id": "chatcmpl-..", "tokens": [...], ...})  # durable
                                                                                  on return
    log.append({"kind": "feedback", "response_id": "chatcmpl-..", "signal": "accepted"})
    for position, record in read_log(dir): ...     # every intact record, oldest first

Files: `<dir>/log-<seq:06d>.bin`, append-only; a new file starts when the current one passes
`max_bytes` (rotation by size: a reader of the old files is never disturbed by new writes).

Framing (why a SIGKILL loses at most the record being written): each record is

    MAGIC (4 bytes) | n = payload length (uint32 LE) | crc32(payload) (uint32 LE)
        | payload (n bytes JSON)

written with one write() call and fsync'd before `append` returns, so every record acknowledged
before the kill is on disk whole. A write cut by the kill leaves a torn tail: a short header, a
short payload or a checksum mismatch. Readers stop reading a file at its first bad frame (counted
in `stats['torn']`): nothing after it was acknowledged (appends are serialized). A writer that
reopens the log starts a new file, so a torn tail is never followed by good records in one file.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import threading
import zlib

MAGIC = b"CJL1"
HEADER = struct.Struct("<4sII")  # magic, payload length, crc32
MAX_RECORD = 1 << 30  # a length field above this is a torn/garbled header, not a record


def _files(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, "log-*.bin")))


def frame(record: dict) -> bytes:
    payload = json.dumps(record, separators=(",", ":")).encode()
    return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def read_file(path: str, start: int = 0, stats: dict | None = None):
    """Yields (offset, record) of the intact records of one file from byte `start`; stops at the
    first torn or corrupt frame (counted in stats['torn'])."""
    with open(path, "rb") as f:
        f.seek(start)
        offset = start
        while True:
            head = f.read(HEADER.size)
            if not head:
                return
            magic, n, crc = HEADER.unpack(head) if len(head) == HEADER.size else (b"", 0, 0)
            payload = f.read(n) if magic == MAGIC and n <= MAX_RECORD else b""
            if magic != MAGIC or len(payload) != n or zlib.crc32(payload) != crc:
                if stats is not None:
                    stats["torn"] = stats.get("torn", 0) + 1
                return
            yield offset, json.loads(payload)
            offset += HEADER.size + n


def read_log(directory: str, since: dict | None = None, stats: dict | None = None):
    """Yields ((file name, offset), record) for every intact record, oldest first. `since` maps a
    file name to the byte offset to resume from (a cursor from `end_positions`)."""
    for path in _files(directory):
        name = os.path.basename(path)
        for offset, rec in read_file(path, (since or {}).get(name, 0), stats):
            yield (name, offset), rec


def end_positions(directory: str) -> dict:
    """{file name: size}: a cursor past everything written so far."""
    return {os.path.basename(p): os.path.getsize(p) for p in _files(directory)}


def exchange_key(record: dict) -> tuple[str, int]:
    """(response id, choice index) of an exchange record (records before `n` had no choice: 0)."""
    return record["id"], record.get("choice", 0)


def feedback_key(record: dict) -> tuple[str, int]:
    """The exchange a feedback record addresses, as exchange_key names it."""
    return record["response_id"], record.get("choice", 0)


class InteractionLog:
    """The writer (one per directory; thread-safe). `ids` holds every exchange id in the log and
    `keys` every (id, choice index) (a response of n choices logs n exchanges under one id), so
    feedback for an unknown one is refused (the server answers 404). `owners` maps each
    (id, choice) to (the key id that received it, its time), for the server's feedback checks,
    and `signals` to the id of its latest feedback record (the one a new signal replaces)."""

    def __init__(self, directory: str, *, max_bytes: int = 64 << 20):
        if max_bytes <= 0:
            raise ValueError(f"interaction log max_bytes={max_bytes}: must be > 0")
        os.makedirs(directory, exist_ok=True)
        self.directory, self.max_bytes = directory, max_bytes
        self.stats: dict = {}
        self.owners: dict[tuple[str, int], tuple[str | None, float]] = {}
        self.signals: dict[tuple[str, int], str] = {}
        for _, r in read_log(directory, stats=self.stats):
            self._index(r)
        self.keys = set(self.owners)
        self.ids = {rid for rid, _ in self.keys}
        files = _files(directory)
        self.seq = int(os.path.basename(files[-1])[4:10]) + 1 if files else 0
        self.lock = threading.Lock()
        self.fd = None
        self._open()

    def _open(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        path = os.path.join(self.directory, f"log-{self.seq:06d}.bin")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        dir_fd = os.open(self.directory, os.O_RDONLY)  # the new file's name survives a crash
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def append(self, record: dict) -> None:
        """Appends one record; returns once it is on disk (fsync)."""
        with self.lock:
            self._write(record)

    def append_signal(self, record: dict) -> dict:
        """Appends a feedback record ({"kind": "feedback", "id", "response_id", "choice", ...})
        with `replaces`: the id of the signal on the same (response, choice) it supersedes, or
        None (read and written under one lock: two racing signals chain, neither is lost).
        -> the record as logged."""
        with self.lock:
            record = dict(record, replaces=self.signals.get(feedback_key(record)))
            self._write(record)
        return record

    def _write(self, record: dict) -> None:
        data = frame(record)
        if self.size and self.size + len(data) > self.max_bytes:
            self.seq += 1
            self._open()
        view = memoryview(data)
        while view:  # a regular file takes it in one write; loop anyway (short writes)
            view = view[os.write(self.fd, view) :]
        os.fsync(self.fd)
        self.size += len(data)
        self._index(record)
        if record.get("kind") == "exchange":
            self.ids.add(record["id"])
            self.keys.add(exchange_key(record))

    def _index(self, r: dict) -> None:
        if r.get("kind") == "exchange":
            self.owners[exchange_key(r)] = (r.get("key_id"), r.get("time", 0.0))
        elif r.get("kind") == "feedback" and "id" in r:
            self.signals[feedback_key(r)] = r["id"]

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
