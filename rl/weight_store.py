"""Versioned weight store on a tensorstore kvstore: full snapshots every K versions, lossless deltas
in between, in the dtype the samplers hold (bfloat16 on accelerators, float32 allowed).

    w = WeightWriter("/tmp/run/weights", dtype="bfloat16", full_every=10)   # trainer
    w.publish(params, version)                                              # after each step
    r = WeightReader("/tmp/run/weights")                                    # sampler
    params, version = r.fetch()            # newest (or r.fetch(v)); bitwise the published arrays

The path is any tensorstore kvstore spec: a local directory now, `gs://bucket/x` / `s3://...`
(tensorstore's gcs/s3 drivers) at scale, with no code change.

Layout (keys):
    blobs/<writer nonce>/<version>/<leaf>    one encoded leaf (immutable once written)
    manifests/<version:012d>.json            written LAST, in one atomic kvstore write

A manifest lists the chain that rebuilds its version: the last full snapshot then every delta up
to it, each blob with its sha256. Atomic publication: blobs go under keys nobody references until
the manifest appears (tensorstore's file driver writes a key via a temp file + rename), so a writer
killed mid-publish leaves only unreferenced blobs and the previous manifest stays the newest; a
reader verifies every blob's hash, so it can never assemble a mix of versions. A restarted writer
uses a new nonce and first deletes manifests newer than the version it restarts from.

Delta encodings, lossless on the bit patterns (the reader reproduces the sampler-dtype arrays
bitwise):
  - 'sparse' (bfloat16): at RL learning rates most bf16 elements do not change between versions
    (an update below half an ulp, |w|/256, is absorbed by rounding); store the changed flat indices
    (delta-coded uint32, zlib) + their new 16-bit values. A leaf where more than 1/16 of the
    elements changed is also XOR-encoded (below) and the smaller blob is kept.
  - 'xor' (float32): almost every f32 element changes, but only in low mantissa bits: XOR the bit
    patterns with the previous version, byte-shuffle (all high bytes, then ..., then low bytes, so
    the runs of zero high bytes are contiguous) and zlib.
Full snapshots store the raw bytes.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
import zlib

import numpy as np
import tensorstore as ts


def _np_dtype(name: str):
    import ml_dtypes  # pylint: disable=import-outside-toplevel

    if name == "bfloat16":
        return ml_dtypes.bfloat16, np.uint16
    if name == "float32":
        return np.float32, np.uint32
    raise ValueError(f"weight store dtype={name!r}: expected 'bfloat16' or 'float32'")


def _kvstore(path: str):
    if "://" in path and not path.startswith("file://"):
        spec = path  # gs://, s3://, memory:// ... tensorstore parses the URL
    else:
        spec = {"driver": "file", "path": path.removeprefix("file://").rstrip("/") + "/"}
    return ts.KvStore.open(spec).result()


def flatten(params) -> dict[str, np.ndarray]:
    """Nested dict of arrays -> {'a/b/c': array} (the params pytree of model/)."""
    out = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            for k in sorted(node):
                walk(node[k], f"{prefix}{k}/")
        else:
            out[prefix[:-1]] = node

    walk(params, "")
    return out


def unflatten(flat: dict[str, np.ndarray]) -> dict:
    out: dict = {}
    for path, v in flat.items():
        node = out
        *parents, leaf = path.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v
    return out


# --- encodings (bits: 1-D unsigned int views of the sampler-dtype arrays) -------------------------


def encode_sparse(new_bits: np.ndarray, old_bits: np.ndarray) -> bytes:
    idx = np.flatnonzero(new_bits != old_bits).astype(np.uint32)
    gaps = np.diff(idx, prepend=np.uint32(0)).astype(np.uint32)  # small numbers: compress well
    gz = zlib.compress(gaps.tobytes(), 1)
    head = np.array([idx.size, len(gz)], np.uint64).tobytes()
    return head + gz + new_bits[idx].tobytes()


def decode_sparse(blob: bytes, old_bits: np.ndarray) -> np.ndarray:
    n, nz = np.frombuffer(blob[:16], np.uint64).astype(np.int64)
    idx = np.cumsum(np.frombuffer(zlib.decompress(blob[16 : 16 + nz]), np.uint32), dtype=np.int64)
    vals = np.frombuffer(blob[16 + nz :], old_bits.dtype)
    if idx.size != n or vals.size != n:
        raise ValueError("weight store: corrupt sparse delta")
    out = old_bits.copy()
    out[idx] = vals
    return out


def encode_xor(new_bits: np.ndarray, old_bits: np.ndarray) -> bytes:
    x = (new_bits ^ old_bits).view(np.uint8).reshape(-1, new_bits.itemsize)  # [N, bytes]
    return zlib.compress(np.ascontiguousarray(x.T).tobytes(), 1)  # byte planes


def decode_xor(blob: bytes, old_bits: np.ndarray) -> np.ndarray:
    planes = np.frombuffer(zlib.decompress(blob), np.uint8).reshape(old_bits.itemsize, -1)
    x = np.ascontiguousarray(planes.T).view(old_bits.dtype).reshape(-1)
    return old_bits ^ x


ENCODERS = {"sparse": encode_sparse, "xor": encode_xor}
DECODERS = {"sparse": decode_sparse, "xor": decode_xor}


def _manifest_key(version: int) -> str:
    return f"manifests/{version:012d}.json"


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class WeightWriter:
    """The trainer side. Not thread-safe: one writer per store."""

    def __init__(self, path: str, *, dtype: str = "bfloat16", full_every: int = 10):
        if full_every < 1:
            raise ValueError(f"weight store full_every={full_every}: must be >= 1")
        self.kv = _kvstore(path)
        self.dtype, self.bits_dtype = _np_dtype(dtype)
        self.dtype_name, self.full_every = dtype, full_every
        self.nonce = uuid.uuid4().hex[:12]
        self.prev: dict[str, np.ndarray] | None = None  # bits of the last published version
        self.chain: list[dict] = []
        self.retired: list[
            dict
        ] = []  # the chain before the current one (collected at the next full)
        self.chain_versions: list[int] = []
        self.retired_versions: list[int] = []
        self.last_version: int | None = None

    def _bits(self, params) -> dict[str, np.ndarray]:
        return {
            k: np.asarray(v).astype(self.dtype).reshape(-1).view(self.bits_dtype)
            for k, v in flatten(params).items()
        }

    def rewind(self, version: int) -> None:
        """Deletes manifests newer than `version` (a restarted trainer's discarded future)."""
        self.kv.delete_range(ts.KvStore.KeyRange(_manifest_key(version + 1), "manifests0")).result()

    def publish(self, params, version: int) -> dict:
        """Writes `version`; -> stats {kind, bytes, full_bytes, seconds, changed_frac}."""
        t0 = time.perf_counter()
        flat = flatten(params)
        bits = self._bits(params)
        full = self.prev is None or version % self.full_every == 0 or set(bits) != set(self.prev)
        prefix = f"blobs/{self.nonce}/{version}"
        link = {"prefix": prefix, "kind": "full" if full else "delta", "leaves": {}}
        writes, nbytes, changed = [], 0, 0
        enc = "sparse" if self.dtype_name == "bfloat16" else "xor"
        for i, (k, b) in enumerate(bits.items()):
            if full:
                blob, e = b.tobytes(), "raw"
            else:
                n_changed = int(np.count_nonzero(b != self.prev[k]))
                changed += n_changed
                blob, e = ENCODERS[enc](b, self.prev[k]), enc
                if enc == "sparse" and n_changed > b.size // 16:
                    # Dense changes (early steps, high lr): XOR + shuffle + zlib may be smaller.
                    alt = encode_xor(b, self.prev[k])
                    blob, e = (alt, "xor") if len(alt) < len(blob) else (blob, e)
            key = f"{prefix}/{i}"
            link["leaves"][k] = {"key": key, "enc": e, "sha256": _sha(blob)}
            writes.append(self.kv.write(key, blob))
            nbytes += len(blob)
        for w in writes:
            w.result()
        chain = [link] if full else self.chain + [link]
        manifest = {
            "version": int(version),
            "dtype": self.dtype_name,
            "nonce": self.nonce,
            "shapes": {k: list(np.shape(v)) for k, v in flat.items()},
            "chain": chain,
        }
        self.kv.write(_manifest_key(version), json.dumps(manifest).encode()).result()
        if full:
            # Keep one finished chain for readers still fetching it; drop the one before.
            self._collect(self.retired, self.retired_versions)
            self.retired, self.retired_versions = self.chain, self.chain_versions
            self.chain_versions = []
        self.chain_versions.append(version)
        self.prev, self.chain, self.last_version = bits, chain, version
        total = sum(b.nbytes for b in bits.values())
        return {
            "kind": link["kind"],
            "bytes": nbytes,
            "full_bytes": total,
            "seconds": time.perf_counter() - t0,
            "changed_frac": changed / max(sum(b.size for b in bits.values()), 1)
            if not full
            else 1.0,
        }

    def _collect(self, chain: list[dict], versions: list[int]) -> None:
        """Drops an old chain's manifests, then its blobs (a reader mid-fetch retries the newest)."""
        for v in versions:
            self.kv.delete_range(
                ts.KvStore.KeyRange(_manifest_key(v), _manifest_key(v) + "\0")
            ).result()
        for link in chain:
            p = link["prefix"]
            self.kv.delete_range(ts.KvStore.KeyRange(p + "/", p + "0")).result()


class StaleManifest(Exception):
    pass


class WeightReader:
    """The sampler side: newest (or a given) version, rebuilt bitwise; caches the chain it holds so
    a newer version on the same chain costs only the new deltas."""

    def __init__(self, path: str):
        self.kv = _kvstore(path)
        self.cache_chain: list[str] = []
        self.cache_bits: dict[str, np.ndarray] = {}
        self.bytes_read = 0

    def versions(self) -> list[int]:
        keys = self.kv.list(ts.KvStore.KeyRange("manifests/", "manifests0")).result()
        return sorted(int(k.decode()[10:22]) for k in keys if k.decode().endswith(".json"))

    def latest_version(self) -> int | None:
        v = self.versions()
        return v[-1] if v else None

    def _read(self, key: str) -> bytes:
        r = self.kv.read(key).result()
        if r.state != "value":
            raise StaleManifest(key)
        self.bytes_read += len(r.value)
        return bytes(r.value)

    def _rebuild(self, m: dict) -> dict[str, np.ndarray]:
        _, bits_dtype = _np_dtype(m["dtype"])
        prefixes = [link["prefix"] for link in m["chain"]]
        n = len(self.cache_chain)
        if n and prefixes[:n] == self.cache_chain:
            start, bits = n, dict(self.cache_bits)
        else:
            start, bits = 0, {}
        for link in m["chain"][start:]:
            for k, leaf in link["leaves"].items():
                blob = self._read(leaf["key"])
                if _sha(blob) != leaf["sha256"]:
                    raise StaleManifest(f"{leaf['key']}: hash mismatch")
                if leaf["enc"] == "raw":
                    bits[k] = np.frombuffer(blob, bits_dtype).copy()
                else:
                    bits[k] = DECODERS[leaf["enc"]](blob, bits[k])
        self.cache_chain, self.cache_bits = prefixes, bits
        return bits

    def fetch(self, version: int | None = None, retries: int = 20) -> tuple[dict, int]:
        """-> (params as nested dict of sampler-dtype numpy arrays, version)."""
        for _ in range(retries):
            v = self.latest_version() if version is None else version
            if v is None:
                raise FileNotFoundError("weight store: no version published yet")
            try:
                m = json.loads(self._read(_manifest_key(v)))
                bits = self._rebuild(m)
            except StaleManifest:
                if version is not None:
                    raise
                time.sleep(0.05)  # the writer replaced or collected this chain: take the newest
                continue
            dt, _ = _np_dtype(m["dtype"])
            flat = {k: b.view(dt).reshape(m["shapes"][k]) for k, b in bits.items()}
            return unflatten(flat), v
        raise TimeoutError("weight store: could not read a consistent version")


class Follower:
    """What a sampler holds: the newest params and version, polled between decode iterations.
    `cast` converts fetched arrays (e.g. to float32 jnp arrays for the engine)."""

    def __init__(self, reader: WeightReader, cast=None):
        self.reader, self.cast = reader, cast or (lambda p: p)
        self.fetch_seconds, self.fetches = 0.0, 0

    def latest(self) -> tuple[dict, int]:
        t0 = time.perf_counter()
        while self.reader.latest_version() is None:
            time.sleep(0.05)
        p, v = self.reader.fetch()
        self.fetch_seconds += time.perf_counter() - t0
        self.fetches += 1
        return self.cast(p), v

    def poll(self, current: int):
        v = self.reader.latest_version()
        if v is None or v <= current:
            return None
        return self.latest()
