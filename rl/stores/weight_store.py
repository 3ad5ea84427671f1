"""Versioned weight store on a tensorstore kvstore, shard by shard: every trainer process writes
only the shards it owns; a sampler reads only the slices its own devices need, on its own mesh.
Full snapshots every K versions, lossless deltas in between, in the dtype the samplers hold
(bfloat16 on accelerators, float32 allowed).

    w = WeightWriter(store, dtype="bfloat16", full_every=10)   # every trainer process
    w.publish(state.params, version)                           # global (sharded) or host arrays
    r = WeightReader(store)                                    # sampler
    params, version = r.fetch()                  # newest: nested dict of numpy (whole arrays)
    params, version = r.fetch(shardings=tree)    # global jax arrays on the sampler's mesh

`store` is a local path, a URL tensorstore parses (`gs://b/x`, `s3://b/x`, `memory://`), or a
tensorstore kvstore spec as JSON (`{"driver": "s3", "bucket": "b", "path": "run/",
"endpoint": "http://127.0.0.1:8333", "aws_region": "us-east-1"}`). Every store operation is
bounded (rl/stores/kvstore.py, shared with the rollout store): requests retry a few times and each
waits at most `timeout` seconds, so an unreachable store fails with a one-line `StoreError`.

Layout (keys):
    blobs/<version:012d>/<nonce>/<leaf#>/<shard start>   one encoded shard (immutable once written)
    blobs/<version:012d>/<nonce>/part-<process>.json      what one process wrote (multi-process)
    manifests/<version:012d>.json                         written LAST, in one atomic kvstore write

A shard is one distinct slice of a global array: of `array.addressable_shards`, each process
writes those with `replica_id == 0`, so every distinct slice has exactly one writer and replicas
never write twice; a host numpy array is one shard (the whole array), written by process 0. A
manifest lists, for each leaf, its global shape and, for each shard, its slice (`index`:
[start, stop) per dim) and the chain that rebuilds it (the shard's last full snapshot, then every
delta up to this version), each blob with its sha256. With several processes each writes its
blobs and a part file listing them, all meet at a barrier, then process 0 merges the parts into
the manifest, and a second barrier returns `publish` everywhere once the version is readable: no
process ever holds more than its own shards. The nonce is one per writer run
(process 0's, broadcast), so a restarted run never mixes with a killed one's blobs.

Atomic publication: blobs go under keys nobody references until the manifest appears (the file
driver writes via temp file + rename; an S3 PUT is atomic per object), so a writer killed
mid-publish leaves only unreferenced blobs and the previous manifest stays the newest; a reader
verifies every blob's hash, so it never assembles a mix of versions. A restarted writer first
deletes manifests newer than the version it restarts from (`rewind`).

Hygiene (garbage collection), run by process 0 after each manifest it writes (version v):
  1. keep the manifests of the newest `keep` versions (readers may still ask for them) and of
     the newest *promoted* version <= v (`Promotions`: the version servers run), delete the
     other older manifests;
  2. delete every blob under a version <= v that no kept manifest references: a kept manifest
     references its shards' chains back to their full snapshots, so everything a reader of a
     kept version needs stays; what goes is old chains, killed writers' orphans and part files.
     Blobs of versions > v wait (nothing can reference them yet, and nothing is deleted that
     might be a version still being written); a killed run's there go once v passes them.
Damage: a manifest that does not parse or a blob that fails its hash, while its version is still
listed (not a race with the collector), is reported in one line and the reader falls back to the
newest intact version (and skips the damaged one from then on); asking for it by number raises.

Delta encoding ('rans'; a shard under SMALL_SHARD elements takes format 4's zlib codings,
cheaper there), lossless on the bit patterns (the reader reproduces the sampler-dtype arrays
bitwise), per shard: every element's zigzag bit difference z (new - old as an integer:
0 = unchanged, a change of k ulps ~ 2k), visited in the exponent order of its old value
(`exponent_order`: the reader recomputes it from the bits it holds), entropy-coded with one static
distribution per exponent (rl/stores/weight_store_rans.py: a hybrid-uint token per z, numpy rANS
over interleaved lanes). Whether an element moves, and by how many ulps, depends mostly on its
exponent (its ulp): an update of ~lr moves every bf16 weight below ~512 lr in magnitude and few
above. So the coder pays about the conditional entropy H(z | exponent): on a trained small model
11-17% fewer bytes than format 4's zlib'd gaps and byte planes (bf16, lr 1e-5: 4.54% of a snapshot
on the first step after a fresh optimizer state, where format 4 paid 5.45%; bench/RESULTS_LOG.md).
  - 'same': an unchanged shard (frozen parameters; the MTP heads when rl.mtp_weight is 0, as
    RL's self-distillation term is what moves them) is an empty blob.
  - a delta that would not be smaller than the shard's raw bytes is written as a full snapshot
    ('raw', restarting the shard's chain): a delta never costs more than a snapshot.
Full snapshots store the raw bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
import uuid
import zlib

import jax
import numpy as np

from rl.episodes import timeline
from rl.stores import weight_store_rans
from rl.stores.kvstore import Kv, StoreError

FORMAT = 5  # 5: rANS per exponent (4: zlib in exponent order; 3: storage order; 2: raw / XOR)
# Encoded blobs waiting for their writes: bounded, so a full snapshot of a host's share of a big
# model (e.g. 1.04T params x 2 bytes / 64 hosts = 32 GB) is not held twice in host memory.
INFLIGHT_BYTES = 1 << 30


class StaleManifest(Exception):
    """A key a manifest names is gone: the writer collected or replaced that version."""


class DamagedVersion(Exception):
    """A listed version's manifest or one of its blobs is damaged (truncated, hash mismatch)."""


def _np_dtype(name: str):
    import ml_dtypes

    if name == "bfloat16":
        return ml_dtypes.bfloat16, np.uint16
    if name == "float32":
        return np.float32, np.uint32
    raise ValueError(f"weight store dtype={name!r}: expected 'bfloat16' or 'float32'")


def weight_store_path(rl, workdir: str) -> str:
    """`rl.weight_store` of configs/rl.py: '' = <workdir>/weights, else the path/URL/JSON spec."""
    return rl.weight_store or os.path.join(workdir, "weights")


def flatten(params) -> dict:
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


def unflatten(flat: dict) -> dict:
    out: dict = {}
    for path, v in flat.items():
        node = out
        *parents, leaf = path.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v
    return out


# --- encodings (bits: 1-D unsigned int views of the sampler-dtype arrays) -------------------------


# Deltas code each element by its bit-pattern difference new - old (wrapping integer subtraction,
# zigzag-mapped so -1 -> 1, 1 -> 2, ...): for a float of the same sign that is the change in
# ulps, a small number (an RL step moves a bf16 weight by 1-2 ulps), where an XOR would flip a
# whole carry chain.
SIGNED = {2: np.int16, 4: np.int32}


def _zigzag(new_bits: np.ndarray, old_bits: np.ndarray) -> np.ndarray:
    d = (new_bits - old_bits).view(SIGNED[new_bits.dtype.itemsize])  # wraps: exact mod 2^bits
    shift = 8 * new_bits.itemsize - 1
    return ((d << 1) ^ (d >> shift)).view(new_bits.dtype)


def _unzigzag(z: np.ndarray, old_bits: np.ndarray) -> np.ndarray:
    d = (z >> 1) ^ (-(z & 1).view(SIGNED[z.itemsize])).view(z.dtype)
    return old_bits + d


# The delta coding visits the elements grouped by the exponent of their OLD value (a stable order
# the reader recomputes from the bits it already holds, so it costs no bytes), and models each
# exponent's differences separately: whether an element changes, and by how many ulps, depends
# mostly on its ulp, i.e. its exponent: an update of ~lr moves every weight below ~512 lr by
# >= half an ulp and almost none above.
EXPONENT_SHIFT = weight_store_rans.EXPONENT_SHIFT  # bits below the exponent, per itemsize


def exponent_order(old_bits: np.ndarray) -> np.ndarray:
    """[N] bit patterns -> the permutation sorting them by exponent (stable: ties keep storage
    order). uint8 keys make numpy's stable sort a radix sort: O(N)."""
    exponent = (old_bits >> EXPONENT_SHIFT[old_bits.itemsize]) & 0xFF
    return np.argsort(exponent.astype(np.uint8), kind="stable")


def encode_rans(new_bits: np.ndarray, old_bits: np.ndarray, order=None) -> bytes:
    """Every element's zigzag difference, in exponent order, entropy-coded per exponent.
    `order`: exponent_order(old_bits) if the caller has it."""
    order = exponent_order(old_bits) if order is None else order
    old = old_bits[order]
    return weight_store_rans.encode(_zigzag(new_bits[order], old), old)


def decode_rans(blob: bytes, old_bits: np.ndarray) -> np.ndarray:
    order = exponent_order(old_bits)
    old = old_bits[order]
    out = np.empty_like(old_bits)
    out[order] = _unzigzag(weight_store_rans.decode(blob, old), old)
    return out


DECODERS = {"rans": decode_rans, "same": lambda blob, old: old}


# --- format 4's codings (zlib): small shards' deltas (SMALL_SHARD), and the baseline the tests
# hold 'rans' to.
# Changed positions as gaps and differences as byte planes (most significant first, so runs of
# zero high bytes are contiguous), each zlib'd: zlib's Huffman stage cannot code a byte in under a
# bit, and its LZ stage finds little in near-random low planes: ~20% above the entropy on trained
# weights.
ZLIB_LEVEL = 6


def _planes(x: np.ndarray) -> bytes:
    """[N] unsigned ints -> zlib of their byte planes (most significant plane first)."""
    b = x.view(np.uint8).reshape(-1, x.itemsize)[:, ::-1]  # [N, bytes], little-endian reversed
    return zlib.compress(np.ascontiguousarray(b.T).tobytes(), ZLIB_LEVEL)


def _unplanes(blob: bytes, dtype) -> np.ndarray:
    k = np.dtype(dtype).itemsize
    planes = np.frombuffer(zlib.decompress(blob), np.uint8).reshape(k, -1)[::-1]  # [bytes, N]
    return np.ascontiguousarray(planes.T).view(dtype).reshape(-1)


def _gaps(positions: np.ndarray) -> bytes:
    """Increasing positions -> zlib'd byte planes of the gaps between them (0 = the next one)."""
    return _planes(np.diff(positions, prepend=-1).astype(np.uint32) - 1)


def _positions(blob: bytes) -> np.ndarray:
    return np.cumsum(_unplanes(blob, np.uint32).astype(np.int64) + 1) - 1


def encode_sparse(new_bits: np.ndarray, old_bits: np.ndarray, order=None) -> bytes:
    """Changed elements' ranks in exponent order (as gaps) and their zigzag differences, each as
    byte planes + zlib. `order`: exponent_order(old_bits) if the caller has it."""
    order = exponent_order(old_bits) if order is None else order
    ranks = np.flatnonzero((new_bits != old_bits)[order])  # gathers one bool per element
    where = order[ranks]  # the changed elements, in exponent order
    gz = _gaps(ranks)
    head = np.array([ranks.size, len(gz)], np.uint64).tobytes()
    return head + gz + _planes(_zigzag(new_bits[where], old_bits[where]))


def decode_sparse(blob: bytes, old_bits: np.ndarray) -> np.ndarray:
    n, nz = np.frombuffer(blob[:16], np.uint64).astype(np.int64)
    ranks = _positions(blob[16 : 16 + nz])
    z = _unplanes(blob[16 + nz :], old_bits.dtype)
    if ranks.size != n or z.size != n or (n and ranks[-1] >= old_bits.size):
        raise ValueError("weight store: corrupt sparse delta")
    where = exponent_order(old_bits)[ranks]
    out = old_bits.copy()
    out[where] = _unzigzag(z, old_bits[where])
    return out


def encode_diff(new_bits: np.ndarray, old_bits: np.ndarray, order=None) -> bytes:
    """Every element's zigzag difference in exponent order (dense changes: float32 samplers,
    early bf16 steps)."""
    order = exponent_order(old_bits) if order is None else order
    return _planes(_zigzag(new_bits[order], old_bits[order]))


def decode_diff(blob: bytes, old_bits: np.ndarray) -> np.ndarray:
    order = exponent_order(old_bits)
    out = np.empty_like(old_bits)
    out[order] = _unzigzag(_unplanes(blob, old_bits.dtype), old_bits[order])
    return out


ZLIB_CODINGS = {"sparse": (encode_sparse, decode_sparse), "diff": (encode_diff, decode_diff)}
DECODERS.update({name: code[1] for name, code in ZLIB_CODINGS.items()})
# Below this many elements a shard's delta is coded with zlib (the smaller of 'sparse' and 'diff'):
# rANS's fixed costs (>= MIN_LANES lane states, its tables, a Python loop of >= MIN_STEPS numpy
# steps) outweigh its ~17% saving there, in bytes (scattered small shards: 1.08 vs 0.96 bytes per
# changed element) and in time (the tiny preset's whole model: 0.24 s publish / 0.32 s fetch per
# version with rANS on every shard, 0.07 / 0.02 s with zlib).
SMALL_SHARD = weight_store_rans.MIN_LANES * weight_store_rans.MIN_STEPS


def _manifest_key(version: int) -> str:
    return f"manifests/{version:012d}.json"


def _blob_dir(version: int) -> str:
    return f"blobs/{version:012d}/"


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# --- shards: (index, data) with index = ((start, stop), ...) per dim of the global shape ----------


def _norm_index(index, shape) -> tuple:
    return tuple(tuple(int(i) for i in s.indices(n)[:2]) for s, n in zip(index, shape))


def owned_shards(x) -> list[tuple[tuple, object]]:
    """The distinct slices of `x` this process writes: of a jax.Array, its addressable shards with
    replica_id 0 (exactly one in the world per distinct slice); of host data, the whole array,
    on process 0 only (every process holds the same copy)."""
    if isinstance(x, jax.Array):
        return [
            (_norm_index(s.index, x.shape), s.data)
            for s in x.addressable_shards
            if s.replica_id == 0
        ]
    if jax.process_index() != 0:
        return []
    x = np.asarray(x)
    return [(tuple((0, n) for n in x.shape), x)]


def _overlap(a: tuple, b: tuple) -> tuple | None:
    o = tuple((max(s0, s1), min(e0, e1)) for (s0, e0), (s1, e1) in zip(a, b))
    return o if all(s < e for s, e in o) else None


def _local(o: tuple, origin: tuple) -> tuple:
    """Slice `o` (global coordinates) as a numpy index into a block starting at `origin`."""
    return tuple(slice(s - b, e - b) for (s, e), (b, _) in zip(o, origin))


def _shape(index: tuple) -> tuple:
    return tuple(e - s for s, e in index)


class WeightWriter:
    """The trainer side: every trainer process makes one (collectively, in the same order) and
    calls `publish` with the same version. Not thread-safe: one writer run per store."""

    def __init__(
        self,
        store: str,
        *,
        dtype: str = "bfloat16",
        full_every: int = 10,
        keep: int = 4,
        timeout: float = 60.0,
    ):
        if full_every < 1:
            raise ValueError(f"weight store full_every={full_every}: must be >= 1")
        if keep < 1:
            raise ValueError(f"weight store keep={keep}: must be >= 1")
        self.kv = Kv(store, timeout, "weight store")
        self.dtype, self.bits_dtype = _np_dtype(dtype)
        self.dtype_name, self.full_every, self.keep = dtype, full_every, keep
        self.nonce = _shared_nonce()
        self.prev: dict[tuple, np.ndarray] = {}  # (leaf, index) -> bits of the last version
        self.chains: dict[tuple, list[dict]] = {}  # (leaf, index) -> its blobs since its full
        self.referenced: dict[int, set[str]] = {}  # version -> blob keys its manifest names
        self.last_version: int | None = None

    def rewind(self, version: int) -> None:
        """Deletes manifests newer than `version` (a restarted trainer's discarded future)."""
        if jax.process_index() == 0:
            self.kv.delete(_manifest_key(version + 1), "manifests0")

    def _bits(self, data) -> np.ndarray:
        return np.asarray(data).astype(self.dtype).reshape(-1).view(self.bits_dtype)

    def _encode(self, key: tuple, bits: np.ndarray, full: bool) -> tuple[bytes, str, int]:
        """-> (blob, encoding, changed elements); encoding 'raw' starts the shard's chain anew."""
        if full:
            return bits.tobytes(), "raw", bits.size
        old = self.prev[key]
        changed = int(np.count_nonzero(bits != old))
        if changed == 0:  # e.g. the MTP heads, which the RL loss never trains: no bytes at all
            return b"", "same", 0
        order = exponent_order(old)  # once for whichever codings run
        if bits.size < SMALL_SHARD:  # the smaller of the two zlib codings
            coded = {name: code[0](bits, old, order) for name, code in ZLIB_CODINGS.items()}
            enc = min(coded, key=lambda name: len(coded[name]))
            blob = coded[enc]
        else:
            blob, enc = encode_rans(bits, old, order), "rans"
        if len(blob) >= bits.nbytes:  # e.g. a re-initialised leaf: a snapshot is cheaper
            return bits.tobytes(), "raw", changed
        return blob, enc, changed

    def write_shards(self, params, version: int) -> dict:
        """Encodes and writes this process's shards (no manifest) -> its part: {leaves, stats}."""
        full_version = version % self.full_every == 0
        prefix = f"{_blob_dir(version)}{self.nonce}"
        leaves, futures, seen = {}, [], set()
        stats = {"bytes": 0, "full_bytes": 0, "changed": 0, "elements": 0, "deltas": 0}
        for i, (path, x) in enumerate(flatten(params).items()):
            shards = []
            for index, data in owned_shards(x):
                key, bits = (path, index), self._bits(data)
                full = full_version or key not in self.prev
                blob, enc, changed = self._encode(key, bits, full)
                full = enc == "raw"
                name = f"{prefix}/{i}/{'_'.join(str(s) for s, _ in index) or '0'}"
                link = {"key": name, "enc": enc, "sha256": _sha(blob), "bytes": len(blob)}
                chain = [link] if full else self.chains[key] + [link]
                futures.append((self.kv.write(name, blob), len(blob)))
                while sum(n for _, n in futures) > INFLIGHT_BYTES and len(futures) > 1:
                    self.kv.wait([futures.pop(0)[0]], f"write {prefix}")
                shards.append({"index": [list(r) for r in index], "chain": chain})
                self.prev[key], self.chains[key] = bits, chain
                seen.add(key)
                stats["bytes"] += len(blob)
                stats["full_bytes"] += bits.nbytes
                stats["elements"] += bits.size
                stats["changed"] += changed
                stats["deltas"] += not full
            leaves[path] = {"shape": list(np.shape(x)), "shards": shards}
        for key in set(self.prev) - seen:  # shards this process no longer owns (resharded)
            del self.prev[key], self.chains[key]
        self.kv.wait([f for f, _ in futures], f"write {prefix}")
        return {"leaves": leaves, "stats": stats}

    def publish(self, params, version: int) -> dict:
        """Writes `version` (every process calls this) -> stats {kind, bytes, full_bytes,
        seconds, changed_frac}: the whole store's on process 0, this process's elsewhere."""
        t0 = time.perf_counter()
        part = self.write_shards(params, version)
        parts = self._gather_parts(part, version)
        stats = part["stats"]
        if parts is not None:
            stats = self._write_manifest(parts, version)
            self._collect(version)
        if jax.process_count() > 1:  # returns on every process once the version is readable
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"weight store published {version}")
        self.last_version = version
        return {
            "kind": "delta" if stats["deltas"] else "full",
            "bytes": stats["bytes"],
            "full_bytes": stats["full_bytes"],
            "seconds": time.perf_counter() - t0,
            "changed_frac": stats["changed"] / max(stats["elements"], 1),
        }

    def _gather_parts(self, part: dict, version: int) -> list[dict] | None:
        """One process: its own part. Several: each writes its part file, all meet at a barrier
        (every blob is in), process 0 reads them all. -> the parts on process 0, else None."""
        n = jax.process_count()
        if n == 1:
            return [part]
        from jax.experimental import multihost_utils

        key = f"{_blob_dir(version)}{self.nonce}/part-{{}}.json"
        me = jax.process_index()
        self.kv.wait([self.kv.write(key.format(me), json.dumps(part).encode())], "write part")
        multihost_utils.sync_global_devices(f"weight store publish {version}")
        if me != 0:
            return None
        parts = [part]
        for p in range(1, n):
            raw = self.kv.read(key.format(p))
            if raw is None:
                raise StoreError(f"weight store: process {p}'s part of version {version} missing")
            parts.append(json.loads(raw))
        return parts

    def _write_manifest(self, parts: list[dict], version: int) -> dict:
        leaves: dict[str, dict] = {}
        for part in parts:
            for path, leaf in part["leaves"].items():
                entry = leaves.setdefault(path, {"shape": leaf["shape"], "shards": []})
                entry["shards"] += leaf["shards"]
        stats = {k: sum(p["stats"][k] for p in parts) for k in parts[0]["stats"]}
        manifest = {
            "format": FORMAT,
            "version": int(version),
            "dtype": self.dtype_name,
            "nonce": self.nonce,
            "leaves": leaves,
        }
        self.kv.wait(
            [self.kv.write(_manifest_key(version), json.dumps(manifest).encode())],
            f"write {_manifest_key(version)}",
        )
        self.referenced[version] = _blob_keys(manifest)
        return stats

    def _collect(self, version: int) -> None:
        """The hygiene rule of the module docstring, after manifest `version` is in."""
        listed = [
            int(k[10:22]) for k in self.kv.list("manifests/", "manifests0") if k.endswith(".json")
        ]
        recent = [v for v in listed if v <= version][-self.keep :]
        promoted = [v for v in Promotions.marked(self.kv) if v <= version and v in listed]
        kept = sorted(set(recent) | set(promoted[-1:]))  # servers keep reading a promoted one
        for v in listed:
            if v < recent[0] and v not in kept:
                self.kv.delete(_manifest_key(v))
                self.referenced.pop(v, None)
        refs = set()
        for v in kept:
            if v not in self.referenced:  # written by an earlier run of this store
                raw = self.kv.read(_manifest_key(v))
                self.referenced[v] = _blob_keys(json.loads(raw)) if raw else set()
            refs |= self.referenced[v]
        blobs = self.kv.list("blobs/", _blob_dir(version + 1))
        dirs: dict[str, list[str]] = {}
        for k in blobs:
            dirs.setdefault(k[: len("blobs/") + 13], []).append(k)
        for d, keys in dirs.items():
            dead = [k for k in keys if k not in refs]
            if len(dead) == len(keys):
                self.kv.delete(d, d[:-1] + "0")  # the whole version directory in one request
            else:
                for k in dead:
                    self.kv.delete(k)


def _blob_keys(manifest: dict) -> set[str]:
    return {
        link["key"]
        for leaf in manifest["leaves"].values()
        for shard in leaf["shards"]
        for link in shard["chain"]
    }


def _shared_nonce() -> str:
    """A fresh id for this writer run, the same on every process (process 0's, broadcast)."""
    nonce = uuid.uuid4().hex[:12]
    if jax.process_count() == 1:
        return nonce
    from jax.experimental import multihost_utils

    b = np.frombuffer(nonce.encode(), np.uint8)
    return np.asarray(multihost_utils.broadcast_one_to_all(b)).tobytes().decode()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class WeightReader:
    """The sampler side: newest (or a given) version, rebuilt bitwise, whole or as global arrays on
    given shardings; caches each shard's chain it holds so a newer version on the same chain costs
    only the new deltas. `bytes_read` / `blobs_read` count what it read."""

    def __init__(self, store: str, *, timeout: float = 60.0, log=_stderr):
        self.kv = Kv(store, timeout, "weight store")
        self.log = log
        self.cache: dict[tuple, tuple[list[str], np.ndarray]] = {}  # (leaf, index) -> chain, bits
        self.damaged: set[int] = set()
        self.bytes_read, self.blobs_read = 0, 0

    def versions(self) -> list[int]:
        keys = self.kv.list("manifests/", "manifests0")
        return [int(k[10:22]) for k in keys if k.endswith(".json")]

    def latest_version(self) -> int | None:
        v = [v for v in self.versions() if v not in self.damaged]
        return v[-1] if v else None

    def _read(self, key: str) -> bytes:
        raw = self.kv.read(key)
        if raw is None:
            raise StaleManifest(key)
        self.bytes_read += len(raw)
        self.blobs_read += 1
        return raw

    def _manifest(self, v: int) -> dict:
        raw = self._read(_manifest_key(v))
        try:
            m = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DamagedVersion(f"{_manifest_key(v)}: not JSON ({len(raw)} bytes; {e})") from None
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            got = m.get("format") if isinstance(m, dict) else None
            raise DamagedVersion(
                f"{_manifest_key(v)}: format {got}, this reader reads format {FORMAT} "
                "(a store written by another version of rl/stores/weight_store.py: publish afresh)"
            )
        return m

    def _shard_bits(self, path: str, shard: dict, bits_dtype) -> np.ndarray:
        """One published shard's bits at the manifest's version, from the cache + new blobs."""
        ckey = (path, tuple(tuple(r) for r in shard["index"]))
        chain = shard["chain"]
        keys = [link["key"] for link in chain]
        have_keys, bits = self.cache.get(ckey, ([], None))
        start = len(have_keys) if have_keys and keys[: len(have_keys)] == have_keys else 0
        for link in chain[start:]:
            blob = self._read(link["key"])
            if _sha(blob) != link["sha256"]:
                raise DamagedVersion(f"{link['key']}: sha256 mismatch")
            if link["enc"] == "raw":
                bits = np.frombuffer(blob, bits_dtype).copy()
            else:
                bits = DECODERS[link["enc"]](blob, bits)
        self.cache[ckey] = (keys, bits)
        return bits

    def _assemble(self, path: str, leaf: dict, targets: list[tuple], m: dict) -> dict:
        """-> {target index: numpy block} from the published shards overlapping each target."""
        dt, bits_dtype = _np_dtype(m["dtype"])
        out = {t: np.empty(_shape(t), dt) for t in targets}
        filled = dict.fromkeys(targets, 0)
        for shard in leaf["shards"]:
            src = tuple(tuple(r) for r in shard["index"])
            hits = [(t, o) for t in targets if (o := _overlap(t, src)) is not None]
            if not hits:
                continue  # no device of this process needs this slice: never read
            block = self._shard_bits(path, shard, bits_dtype).view(dt).reshape(_shape(src))
            for t, o in hits:
                out[t][_local(o, t)] = block[_local(o, src)]
                filled[t] += int(np.prod(_shape(o)))
        for t, n in filled.items():  # published shards are disjoint: they must tile each target
            if n != int(np.prod(_shape(t))):
                raise DamagedVersion(f"{path}: published shards cover {n} of slice {list(t)}")
        return out

    def _build(self, m: dict, shardings) -> dict:
        flat_sh = flatten(shardings) if shardings is not None else None
        out = {}
        for path, leaf in m["leaves"].items():
            shape = tuple(leaf["shape"])
            whole = tuple((0, n) for n in shape)
            if flat_sh is None:
                out[path] = self._assemble(path, leaf, [whole], m)[whole]
                continue
            sh = flat_sh.get(path)
            if sh is None:
                raise KeyError(f"weight store: shardings have no entry for published leaf {path}")
            dev_index = {
                d: _norm_index(idx, shape)
                for d, idx in sh.addressable_devices_indices_map(shape).items()
            }
            blocks = self._assemble(path, leaf, sorted(set(dev_index.values())), m)
            arrays = [jax.device_put(blocks[t], d) for d, t in dev_index.items()]
            out[path] = jax.make_array_from_single_device_arrays(shape, sh, arrays)
        return unflatten(out)

    def _load(self, v: int, shardings) -> dict:
        m = self._manifest(v)
        out = self._build(m, shardings)
        live = {
            (p, tuple(map(tuple, s["index"]))) for p, f in m["leaves"].items() for s in f["shards"]
        }
        for key in set(self.cache) - live:  # shards the writer no longer publishes (resharded)
            del self.cache[key]
        return out

    def fetch(self, version: int | None = None, shardings=None, retries: int = 20):
        """-> (params, version). params: a nested dict of sampler-dtype numpy arrays, or with
        `shardings` (a pytree of jax.sharding.Sharding like the params) global jax arrays on
        them, each process reading only the published shards its own devices overlap."""
        for _ in range(retries):
            v = self.latest_version() if version is None else version
            if v is None:
                if self.damaged:
                    raise DamagedVersion(
                        f"weight store: no intact version ({sorted(self.damaged)} damaged)"
                    )
                raise FileNotFoundError("weight store: no version published yet")
            try:
                return self._load(v, shardings), v
            except (StaleManifest, DamagedVersion) as e:
                listed = self.versions()
                if v not in listed:
                    if version is not None:
                        what = "collected" if listed and v < listed[-1] else "not published"
                        raise StaleManifest(f"weight store: version {v} {what}") from None
                    time.sleep(0.05)  # the writer collected this chain meanwhile: take the newest
                    continue
                if isinstance(e, StaleManifest):
                    e = DamagedVersion(f"{e.args[0]}: listed manifest names a missing blob")
                if version is not None:
                    raise DamagedVersion(f"weight store: version {v} damaged: {e}") from None
                self.damaged.add(v)
                self.log(f"weight store: version {v} damaged ({e}); falling back to an older one")
        raise TimeoutError("weight store: could not read a consistent version")


class FixedWeights:
    """A sampler's weight source (Follower's latest/poll) that never changes: held-out
    evaluation and tests play episodes with one params version."""

    def __init__(self, params, version: int = 0):
        self.params, self.version = params, version

    def latest(self) -> tuple[dict, int]:
        return self.params, self.version

    def poll(self, current: int):
        return None


class Follower:
    """What a sampler holds: the newest params and version, polled between decode iterations.
    `cast` converts fetched arrays (e.g. to float32 jnp arrays for the engine); `shardings` (a
    pytree like the params) makes the reader fetch global arrays on the sampler's mesh.

    prefetch=True (the samplers' in-flight update): a poll that sees a newer version starts its
    fetch on a background thread and returns at once, so the engine keeps decoding while the
    version downloads; a later poll hands it over, and the sampler's pause per swap is only its
    `set_params` (measured in bench/bench_weight_sync.py). A failed background fetch raises from
    the next poll."""

    def __init__(self, reader: WeightReader, cast=None, shardings=None, prefetch: bool = False):
        self.reader, self.cast, self.shardings = reader, cast or (lambda p: p), shardings
        self.prefetch = prefetch
        self.fetch_seconds, self.fetches = 0.0, 0
        self._thread: threading.Thread | None = None
        self._ready: tuple | None = None  # (params, version) or (None, exception)
        self._timeline = timeline.recorder()  # a background fetch records its span there

    def latest(self) -> tuple[dict, int]:
        self._join()  # the reader is not thread-safe: no background fetch beside this one
        return self._fetch()

    def _fetch(self) -> tuple[dict, int]:
        with timeline.span("weight_fetch"):  # download and cast
            t0 = time.perf_counter()
            while self.reader.latest_version() is None:
                time.sleep(0.05)
            p, v = self.reader.fetch(shardings=self.shardings)
            self.fetch_seconds += time.perf_counter() - t0
            self.fetches += 1
            return self.cast(p), v

    def poll(self, current: int):
        if not self.prefetch:
            return self._newer(current)
        if self._thread is not None and not self._thread.is_alive():
            self._thread.join()
            self._thread, (params, got) = None, self._ready
            if params is None:
                raise got  # the background fetch's error, in the sampler's thread
            if got is not None and got > current:
                return params, got
        v = self.reader.latest_version() if self._thread is None else None
        if v is not None and v > current:
            self._thread = threading.Thread(target=self._background, args=(current,), daemon=True)
            self._thread.start()
        return None

    def _newer(self, current: int):
        v = self.reader.latest_version()
        if v is None or v <= current:
            return None
        p, got = self._fetch()
        return None if got <= current else (p, got)  # a damaged newest fell back to an older one

    def _background(self, current: int) -> None:
        timeline.adopt(self._timeline)
        try:
            newer = self._newer(current)
            self._ready = newer if newer is not None else ({}, None)
        except Exception as e:
            self._ready = (None, e)

    def close(self) -> None:
        """Waits for a background fetch (a process must not exit while one runs)."""
        self._join()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class Promotions:
    """Which published versions are *promoted* (passed rl/serve/realtime.py's eval gate): servers
    follow only those. A marker is one small key, `promoted/<version:012d>.json` (the gate's note),
    in a key range the writer's collector never touches; the collector keeps the newest promoted
    version's manifest (and so its chain of blobs) however many versions follow it, and a marker
    whose manifest was collected (an older promotion) no longer counts, so `latest()` is always
    a version a reader can fetch.

        Promotions(store).promote(7, {"why": "no gated metric regressed"})
        Promotions(store).latest()    # -> 7 (None before any promotion)
    """

    def __init__(self, store: str, *, timeout: float = 60.0):
        self.kv = Kv(store, timeout, "weight store")

    def promote(self, version: int, note: dict | None = None) -> None:
        if self.kv.read(_manifest_key(version)) is None:
            raise ValueError(f"weight store: cannot promote version {version}: not published")
        key = f"promoted/{version:012d}.json"
        self.kv.wait([self.kv.write(key, json.dumps(note or {}).encode())], f"write {key}")

    @staticmethod
    def marked(kv: Kv) -> list[int]:
        """Every version with a promotion marker, oldest first (listed or not)."""
        return sorted(
            int(k[9:21]) for k in kv.list("promoted/", "promoted0") if k.endswith(".json")
        )

    def promoted(self) -> list[int]:
        """Promoted versions whose manifests are still listed, oldest first."""
        listed = {int(k[10:22]) for k in self.kv.list("manifests/", "manifests0")}
        return [v for v in self.marked(self.kv) if v in listed]

    def latest(self) -> int | None:
        v = self.promoted()
        return v[-1] if v else None
