"""Rollout store: one file per group of episodes in a shared directory, written atomically.

    groups/<group id>.npz     every episode's arrays + a JSON metadata blob (no pickle: a store
                              shared between machines never executes what it reads)
    trainer.json              the trainer's progress (groups consumed, version), for backpressure

Atomicity: a group is written to a temporary name in the same directory and renamed over its
final name (os.replace is atomic on POSIX), so a reader sees a whole group or none; a killed
sampler leaves at most a stray temporary file, which readers ignore.
"""

from __future__ import annotations

import io
import json
import os
import uuid

import numpy as np

from rl.records import ARRAY_FIELDS


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


class RolloutStore:
    def __init__(self, root: str):
        self.root = root
        self.groups_dir = os.path.join(root, "groups")
        os.makedirs(self.groups_dir, exist_ok=True)

    def put(self, group_id: str, records: list[dict]) -> None:
        arrays, meta = {}, []
        for i, rec in enumerate(records):
            m = {}
            for k, v in rec.items():
                if k in ARRAY_FIELDS:
                    arrays[f"{i}/{k}"] = np.asarray(v)
                else:
                    m[k] = _jsonable(v)
            meta.append(m)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        _atomic_write(os.path.join(self.groups_dir, f"{group_id}.npz"), buf.getvalue())

    def get(self, group_id: str) -> list[dict]:
        with np.load(os.path.join(self.groups_dir, f"{group_id}.npz"), allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            for i, m in enumerate(meta):
                for k in ARRAY_FIELDS:
                    if f"{i}/{k}" in z:
                        m[k] = z[f"{i}/{k}"]
        return meta

    def list(self) -> list[str]:
        return sorted(n[:-4] for n in os.listdir(self.groups_dir) if n.endswith(".npz"))

    def write_progress(self, progress: dict) -> None:
        _atomic_write(os.path.join(self.root, "trainer.json"), json.dumps(progress).encode())

    def progress(self) -> dict:
        try:
            with open(os.path.join(self.root, "trainer.json")) as f:
                return json.load(f)
        except FileNotFoundError:
            return {"consumed": 0, "version": -1}
