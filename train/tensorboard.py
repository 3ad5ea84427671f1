"""A minimal TensorBoard scalar writer (and reader, for tests) without tensorflow.

Event files are TFRecords of `Event` protos:
  record = uint64 len | uint32 masked_crc32c(len) | data | uint32 masked_crc32c(data)
  Event   { 1: double wall_time, 2: int64 step, 3: string file_version, 5: Summary summary }
  Summary { 1: repeated Value value };  Value { 1: string tag, 2: float simple_value }
Only the fields above are written; TensorBoard reads such files.
"""

from __future__ import annotations

import os
import socket
import struct
import time


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli polynomial, reflected
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 two's complement, as protobuf does
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _event(
    step: int, wall_time: float, *, scalars: dict | None = None, file_version: str | None = None
) -> bytes:
    msg = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step)
    if file_version is not None:
        msg += _len_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _len_field(1, _len_field(1, tag.encode()) + b"\x15" + struct.pack("<f", float(v)))
            for tag, v in scalars.items()
        )
        msg += _len_field(5, values)
    return msg


class SummaryWriter:
    """Writes scalars to <logdir>/events.out.tfevents.<time>.<host>; flushes every write."""

    def __init__(self, logdir: str):
        os.makedirs(logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        self.path = os.path.join(logdir, name)
        self._f = open(self.path, "ab")
        self._write(_event(0, time.time(), file_version="brain.Event:2"))

    def _write(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._f.write(
            header
            + struct.pack("<I", _masked_crc(header))
            + data
            + struct.pack("<I", _masked_crc(data))
        )
        self._f.flush()

    def scalars(self, step: int, values: dict) -> None:
        self._write(_event(step, time.time(), scalars=values))

    def close(self) -> None:
        self._f.close()


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[i]
        n |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return n, i


def _fields(buf: bytes):
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i)
        elif wire == 1:
            v, i = buf[i : i + 8], i + 8
        elif wire == 5:
            v, i = buf[i : i + 4], i + 4
        elif wire == 2:
            n, i = _read_varint(buf, i)
            v, i = buf[i : i + n], i + n
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, v


def read_scalars(path: str) -> list[tuple[int, str, float]]:
    """(step, tag, value) for every scalar in an event file; checks both CRCs of every record."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        header = data[i : i + 8]
        (n,) = struct.unpack("<Q", header)
        if struct.unpack("<I", data[i + 8 : i + 12])[0] != _masked_crc(header):
            raise ValueError(f"{path}: bad length crc at byte {i}")
        record = data[i + 12 : i + 12 + n]
        if struct.unpack("<I", data[i + 12 + n : i + 16 + n])[0] != _masked_crc(record):
            raise ValueError(f"{path}: bad data crc at byte {i}")
        i += 16 + n
        step = 0
        for field, v in _fields(record):
            if field == 2:
                step = v
            elif field == 5:
                for _, value in _fields(v):
                    parts = dict(_fields(value))
                    out.append((step, parts[1].decode(), struct.unpack("<f", parts[2])[0]))
    return out
