"""Minimal safetensors reader over mmap: one tensor at a time, any dtype the format stores
(bfloat16 and float8 through ml_dtypes, which numpy lacks), with errors that name file and tensor.

Format: 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, raw
bytes.
"""

from __future__ import annotations

import json
import mmap
import os
import struct

import ml_dtypes
import numpy as np

DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E5M2": ml_dtypes.float8_e5m2,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


class SafetensorsFile:
    def __init__(self, path: str):
        self.path = path
        try:
            self._file = open(path, "rb")
        except OSError as e:
            raise FileNotFoundError(
                f"{path}: cannot open safetensors file ({e.strerror})"
            ) from None
        size = os.fstat(self._file.fileno()).st_size
        if size < 8:
            raise ValueError(f"{path}: truncated safetensors file ({size} bytes)")
        (header_len,) = struct.unpack("<Q", self._file.read(8))
        if header_len > size - 8:
            raise ValueError(f"{path}: header length {header_len} exceeds file size {size}")
        try:
            header = json.loads(self._file.read(header_len))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: corrupt safetensors header ({e.msg})") from None
        header.pop("__metadata__", None)
        self.header = header
        self._data_start = 8 + header_len
        self._size = size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)

    def keys(self):
        return self.header.keys()

    def get(self, name: str) -> np.ndarray:
        """A zero-copy view into the memory map (pages stay resident while the file is open)."""
        start, count, dtype, shape = self._locate(name)
        return np.frombuffer(self._map, dtype=dtype, count=count, offset=start).reshape(shape)

    def read(self, name: str) -> np.ndarray:
        """A fresh copy read with pread: nothing stays resident after the caller drops it (the
        streamed loader's way to keep host memory at one tensor, not the touched part of a map)."""
        start, count, dtype, shape = self._locate(name)
        out = np.empty(count, dtype)
        view, done = memoryview(out.view(np.uint8)), 0
        while done < out.nbytes:
            got = os.preadv(self._file.fileno(), [view[done:]], start + done)
            if got <= 0:
                raise ValueError(f"{self.path}: tensor {name} is truncated")
            done += got
        return out.reshape(shape)

    def _locate(self, name: str):
        info = self.header[name]
        dtype = DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{self.path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = (self._data_start + o for o in info["data_offsets"])
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end > self._size or end - start != count * np.dtype(dtype).itemsize:
            raise ValueError(
                f"{self.path}: tensor {name} is truncated or its offsets do not match its shape"
            )
        return start, count, dtype, info["shape"]

    def close(self):
        self._map.close()
        self._file.close()
