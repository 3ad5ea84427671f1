"""The weight store on a real S3 server (SeaweedFS on loopback, tests/s3_fixture.py), named by a
tensorstore kvstore spec as JSON: arrays published shard by shard from an fsdp=4 mesh are fetched
bitwise onto a tensor=2 x expert=2 mesh (the tiny preset's own leaves: test_rl_weight_store.py); the
collector leaves no unreferenced object; a truncated newest manifest falls back; an unreachable or
silent endpoint fails in bounded time with a one-line error; a stopped server leaves no socket
in /tmp."""

import json
import os
import socket
import time

import jax
import numpy as np
import pytest
import tensorstore as ts
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from s3_fixture import (  # noqa: F401 (s3_server: the session fixture)
    GRPC_SOCKET,
    SERVERS,
    _free_ports,
    closed_port,
    nobody_home_spec,
    s3_server,
    weed_server,
)
from test_rl_weight_store import _assert_bitwise, _step

from model.sharding import role_mesh
from rl.stores.weight_store import StoreError, WeightReader, WeightWriter

DEV = jax.devices()


def _keys(spec: dict, prefix: str) -> list[str]:
    kv = ts.KvStore.open(spec).result()
    return sorted(
        k.decode() for k in kv.list(ts.KvStore.KeyRange(prefix, prefix[:-1] + "0")).result()
    )


def _referenced(spec: dict) -> set[str]:
    kv = ts.KvStore.open(spec).result()
    refs = set()
    for k in _keys(spec, "manifests/"):
        m = json.loads(kv.read(k).result().value)
        refs |= {
            c["key"] for leaf in m["leaves"].values() for s in leaf["shards"] for c in s["chain"]
        }
    return refs


def test_sharded_publish_and_resharded_fetch_on_s3(s3_server):  # noqa: F811
    spec = s3_server("run1/")
    store = json.dumps(spec)  # what --config.rl.weight_store= takes
    src, dst = role_mesh({"fsdp": 4}, DEV[0:4]), role_mesh({"tensor": 2, "expert": 2}, DEV[4:8])
    rng = np.random.default_rng(0)
    params = {
        "w": jax.device_put(rng.normal(size=(64, 32)), NamedSharding(src, P("fsdp", None))),
        "n": {"scale": jax.device_put(rng.normal(size=(32,)), NamedSharding(src, P()))},
    }
    target = {
        "w": NamedSharding(dst, P("tensor", "expert")),
        "n": {"scale": NamedSharding(dst, P("expert"))},
    }
    w = WeightWriter(store, dtype="bfloat16", full_every=2, keep=2)
    r = WeightReader(store)
    for v in range(4):
        params = _step(params, v)
        w.publish(params, v)
        got, gv = r.fetch(shardings=target)
        assert gv == v
        _assert_bitwise(got, jax.device_get(params), "bfloat16")
    # A writer that died after its blobs, before its manifest (version 4), then the trainer's 4, 5.
    WeightWriter(store, dtype="bfloat16").write_shards(jax.device_get(params), 4)
    assert set(_keys(spec, "blobs/")) - _referenced(spec)  # the dead writer's objects
    for v in (4, 5):
        params = _step(params, v)
        w.publish(params, v)
    assert _keys(spec, "manifests/") == [
        "manifests/000000000004.json",
        "manifests/000000000005.json",
    ]
    assert set(_keys(spec, "blobs/")) == _referenced(spec)  # nothing unreferenced is left
    # A truncated newest manifest: one line, the newest intact version instead.
    kv = ts.KvStore.open(spec).result()
    raw = kv.read("manifests/000000000005.json").result().value
    kv.write("manifests/000000000005.json", raw[:100]).result()
    lines = []
    got, gv = WeightReader(store, log=lines.append).fetch(shardings=target)
    assert gv == 4 and len(lines) == 1 and "version 5 damaged" in lines[0]


def test_unreachable_store_fails_fast_in_one_line():
    """A closed port: connection refused, retried 4 times with 0.1 -> 1 s backoff (~2 s)."""
    port = closed_port()
    spec = nobody_home_spec(port)
    t0 = time.perf_counter()
    with pytest.raises(StoreError) as e:
        WeightReader(json.dumps(spec)).fetch()
    assert time.perf_counter() - t0 < 20
    msg = str(e.value)
    assert "\n" not in msg and f"127.0.0.1:{port}" in msg and "list manifests/" in msg


def test_silent_store_times_out_in_one_line():
    """A port that accepts connections and never answers: each operation's own timeout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        spec = nobody_home_spec(s.getsockname()[1])
        t0 = time.perf_counter()
        with pytest.raises(StoreError, match="timed out after 2 s") as e:
            WeightReader(json.dumps(spec), timeout=2).latest_version()
        assert time.perf_counter() - t0 < 10 and "\n" not in str(e.value)


def test_a_stopped_server_leaves_no_socket_in_tmp():
    """weed puts a filer, a gateway and four gRPC sockets in /tmp by default and never removes
    them when killed (hundreds had piled up); the fixture's server leaves none. Its own ports name
    them (other workers' servers come and go in /tmp meanwhile)."""
    ports = _free_ports(8)
    grpc = [GRPC_SOCKET.format(name, port) for name, port in zip(SERVERS, ports[1::2])]
    default = [f"/tmp/seaweedfs-filer-{ports[4]}.sock", f"/tmp/seaweedfs-s3-{ports[6]}.sock"]
    try:
        with weed_server(ports):
            during = [os.path.exists(p) for p in grpc + default]
    except RuntimeError as e:
        pytest.skip(str(e))
    assert during == [True] * 4 + [False] * 2  # the gRPC ones have no flag: there while it runs
    assert not any(os.path.exists(p) for p in grpc + default)  # ... removed when it stops
