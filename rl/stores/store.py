"""Rollout store: one object per group of episodes on a tensorstore kvstore (rl/stores/kvstore.py: a
local directory, or S3/GCS where samplers and the trainer run on different hosts).

    groups/<group id>.npz     every episode's arrays + a JSON metadata blob (no pickle: a store
                              shared between machines never executes what it reads)
    trainer.json              the trainer's progress (groups consumed, version), for backpressure

    RolloutStore(rollout_store_path(config.rl, workdir))   # '' = <workdir>/rollouts

Records (rl/episodes/records.py, the one record form) are stored as they are: ARRAY_FIELDS as
arrays, every other field as JSON. Groups written before records had one form read back unchanged
and train the same (their arrays, reward, reward_terms, group_id and chain fields are the fields
read now); their single-turn records lack malformed_mask, which the collator takes as all 0.

Atomicity: a group is one kvstore write of its whole .npz (the file driver writes a temporary
file and renames it over the key; an S3 PUT replaces the whole object), so a reader lists and
reads a whole group or none, and a killed sampler leaves nothing a reader lists. Every operation
is bounded in time and fails with a one-line `StoreError` naming the store.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np

from rl.episodes.records import ARRAY_FIELDS
from rl.stores.kvstore import Kv

GROUPS = "groups/"


class DamagedGroup(Exception):
    """A listed group's object does not parse (it cannot be half-written: someone else wrote it)."""


def rollout_store_path(rl, workdir: str) -> str:
    """`rl.rollout_store` of configs/rl.py: '' = <workdir>/rollouts, else a path/URL/JSON spec."""
    return rl.rollout_store or os.path.join(workdir, "rollouts")


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def encode_group(group_id: str, records: list[dict]) -> bytes:
    """Records -> one .npz (arrays '<episode>/<field>' + 'meta': the other fields as JSON)."""
    arrays, meta = {}, []
    for i, rec in enumerate(records):
        m = {}
        for k, v in rec.items():
            if k in ARRAY_FIELDS:
                a = np.asarray(v)
                if a.dtype.hasobject:  # would need pickle, which readers refuse
                    raise ValueError(
                        f"rollout store: group {group_id} episode {i} field {k}: "
                        "object array (give numbers)"
                    )
                arrays[f"{i}/{k}"] = a
            else:
                m[k] = _jsonable(v)
        meta.append(m)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def decode_group(group_id: str, raw: bytes) -> list[dict]:
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes())
            for i, m in enumerate(meta):
                for k in ARRAY_FIELDS:
                    if f"{i}/{k}" in z:
                        m[k] = z[f"{i}/{k}"]
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError) as e:
        raise DamagedGroup(
            f"rollout store: group {group_id} damaged ({len(raw)} bytes: {e})"
        ) from None
    return meta


class RolloutStore:
    def __init__(self, store: str, *, timeout: float = 60.0):
        self.kv = Kv(store, timeout, "rollout store")

    def put(self, group_id: str, records: list[dict]) -> None:
        self.kv.put(f"{GROUPS}{group_id}.npz", encode_group(group_id, records))

    def get(self, group_id: str) -> list[dict]:
        raw = self.kv.read(f"{GROUPS}{group_id}.npz")
        if raw is None:
            raise KeyError(f"rollout store: no group {group_id}")
        return decode_group(group_id, raw)

    def list(self) -> list[str]:
        keys = self.kv.list(GROUPS, GROUPS[:-1] + "0")  # every key under groups/
        return [k[len(GROUPS) : -4] for k in keys if k.endswith(".npz")]

    def write_progress(self, progress: dict) -> None:
        self.kv.put("trainer.json", json.dumps(progress).encode())

    def progress(self) -> dict:
        raw = self.kv.read("trainer.json")
        return json.loads(raw) if raw is not None else {"consumed": 0, "version": -1}
