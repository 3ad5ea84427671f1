"""One bounded tensorstore kvstore for both RL stores (weights: rl/stores/weight_store.py, episodes:
rl/stores/store.py): a local path, a URL tensorstore parses (`gs://b/x`, `s3://b/x`, `memory://`),
or a kvstore spec as JSON (`{"driver": "s3", "bucket": "b", "path": "run/", "endpoint":
"http://127.0.0.1:8333", "aws_region": "us-east-1"}`).

Every operation is bounded: object-store requests retry a few times (S3_RETRIES) and each waits at
most `timeout` seconds, so an unreachable store fails with a one-line `StoreError` naming the
store, never hangs. A single `write` is atomic (the file driver writes a temp file and renames it;
an S3 PUT replaces the whole object), which is what both stores' visibility rules rest on.
"""

from __future__ import annotations

import json

import tensorstore as ts

from model.errors import StoreError

# Bounded retries for object stores: tensorstore's default (32 tries, backoff to 32 s) makes an
# unreachable endpoint look like a hang; 4 tries with 0.1 -> 1 s backoff give up in ~2 s.
S3_RETRIES = {"max_retries": 4, "initial_delay": "0.1s", "max_delay": "1s"}
CONTEXT = {"s3_request_retries": S3_RETRIES, "gcs_request_retries": S3_RETRIES}


def store_spec(store: str, label: str = "store"):
    """A local path, a URL or a kvstore spec as JSON -> what ts.KvStore.open takes."""
    s = store.strip()
    if not s:
        raise ValueError(f"{label}: empty store (give a path, a URL or a kvstore JSON spec)")
    if s.startswith("{"):
        try:
            return json.loads(s)
        except json.JSONDecodeError as e:
            raise ValueError(f"{label} spec {s[:80]!r}: not valid JSON ({e})") from None
    if "://" in s and not s.startswith("file://"):
        return s  # gs://, s3://, memory:// ... tensorstore parses the URL
    return {"driver": "file", "path": s.removeprefix("file://").rstrip("/") + "/"}


def _where(spec) -> str:
    if isinstance(spec, str):
        return spec
    return str(spec.get("endpoint") or spec.get("bucket") or spec.get("path") or spec)


class Kv:
    """A kvstore whose every operation is bounded in time and fails with a one-line StoreError
    that starts with `label` (e.g. 'weight store') and names where the store is."""

    def __init__(self, store: str, timeout: float, label: str = "store"):
        self.spec, self.timeout = store_spec(store, label), timeout
        self.where = f"{label} {_where(self.spec)}"
        try:
            opening = ts.KvStore.open(self.spec, context=ts.Context(CONTEXT))
        except ValueError as e:  # a spec tensorstore rejects before any request
            raise StoreError(f"{self.where}: bad spec: {e}") from None
        self.kv = self._wait(opening, "open")

    def _wait(self, future, what: str):
        try:
            return future.result(timeout=self.timeout)
        except TimeoutError:
            raise StoreError(f"{self.where}: {what} timed out after {self.timeout:g} s") from None
        except (ValueError, RuntimeError, OSError) as e:
            first = (str(e).splitlines() or [type(e).__name__])[0]
            raise StoreError(f"{self.where}: {what} failed: {first}") from None

    def read(self, key: str) -> bytes | None:
        r = self._wait(self.kv.read(key), f"read {key}")
        return bytes(r.value) if r.state == "value" else None

    def write(self, key: str, value: bytes):
        return self.kv.write(key, value)  # a future: callers write many keys at once

    def put(self, key: str, value: bytes) -> None:
        """One atomic write, waited for."""
        self._wait(self.kv.write(key, value), f"write {key}")

    def wait(self, futures, what: str) -> None:
        for f in futures:
            self._wait(f, what)

    def list(self, lo: str, hi: str) -> list[str]:
        keys = self._wait(self.kv.list(ts.KvStore.KeyRange(lo, hi)), f"list {lo}")
        return sorted(k.decode() for k in keys)

    def delete(self, lo: str, hi: str | None = None) -> None:
        hi = lo + "\0" if hi is None else hi  # one key: [key, key + '\0')
        self._wait(self.kv.delete_range(ts.KvStore.KeyRange(lo, hi)), f"delete {lo}")
