"""Two CPU processes (jax.distributed, gloo, 2 devices each) publish global arrays sharded over an
fsdp=4 mesh to one local store: each process writes only the shards it owns (its bytes are its
shards', the manifest's are every distinct shard once: the replicated leaf is written once), then
each fetches onto another mesh (expert=2 across the processes x tensor=2 within one) and reads
only the published shards its own devices overlap (half of the sharded leaf, partly written by
the other process), bitwise equal to what was published, a full version then a delta.

Run as a script, this file is one worker:  python tests/test_rl_weight_store_multiprocess.py PORT ID
STORE OUT
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
from xla_env import xla_flags

_TESTS = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_TESTS)
SHAPE = (64, 32)  # w: float32 [64, 32] = 8 KiB; fsdp=4 -> four 16-row shards of 2 KiB


def _ref(v: int) -> dict:
    rng = np.random.default_rng(0)
    w = rng.normal(size=SHAPE).astype(np.float32)
    s = rng.normal(size=(32,)).astype(np.float32)
    if v:
        w[::7, 3] += 0.25 * v  # a delta: 10 of 2048 elements change
    return {"w": w, "n": {"scale": s + v}}


def _worker(port: int, pid: int, store: str, out: str) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=pid)
    sys.path[:0] = [_ROOT]
    import ml_dtypes
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from rl.stores.weight_store import WeightReader, WeightWriter

    d = jax.devices()  # process 0: d[0], d[1]; process 1: d[2], d[3]
    assert [x.process_index for x in d] == [0, 0, 1, 1]
    # Trainer: fsdp over [d0, d2, d1, d3]: process 0 owns rows 0-15 and 32-47.
    train = Mesh(np.array([d[0], d[2], d[1], d[3]]), ("fsdp",))
    tsh = {"w": NamedSharding(train, P("fsdp", None)), "n": {"scale": NamedSharding(train, P())}}
    # Sampler: expert over processes, tensor within one: process 0 needs rows 0-31 (all columns).
    samp = Mesh(np.array([[d[0], d[1]], [d[2], d[3]]]), ("expert", "tensor"))
    ssh = {
        "w": NamedSharding(samp, P("expert", "tensor")),
        "n": {"scale": NamedSharding(samp, P("tensor"))},
    }
    w = WeightWriter(store, dtype="bfloat16", full_every=10)
    r = WeightReader(store)
    res = []
    for v in range(2):
        ref = _ref(v)
        params = jax.tree.map(
            lambda x, sh: jax.make_array_from_callback(x.shape, sh, lambda i, x=x: x[i]), ref, tsh
        )
        stats = w.publish(params, v)
        r.bytes_read = r.blobs_read = 0
        got, gv = r.fetch(v, shardings=ssh)
        equal = all(
            np.array_equal(
                np.asarray(sh.data).view(np.uint16),
                x[sh.index].astype(ml_dtypes.bfloat16).view(np.uint16),
            )
            for g, x in ((got["w"], ref["w"]), (got["n"]["scale"], ref["n"]["scale"]))
            for sh in g.addressable_shards
        )
        res.append(dict(stats, version=gv, equal=equal, blobs_read=r.blobs_read))
    with open(out, "w") as f:
        json.dump(res, f)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_write_own_shards_and_read_only_needed_slices(tmp_path):
    port, store = _free_port(), str(tmp_path / "w")
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags(2))
    outs = [str(tmp_path / f"out{i}.json") for i in range(2)]
    procs = [
        subprocess.Popen([sys.executable, __file__, str(port), str(i), store, outs[i]], env=env)
        for i in range(2)
    ]
    try:
        assert [p.wait(timeout=180) for p in procs] == [0, 0]
    finally:
        for p in procs:  # a worker that failed leaves its peer waiting at a barrier
            p.kill()
    r0, r1 = (json.load(open(o)) for o in outs)
    w_bf16, s_bf16 = 64 * 32 * 2, 32 * 2
    # Full version 0: process 1 wrote its two 16-row shards of w (2 x 16 x 32 x 2 bytes), not the
    # replicated scale (its owner, replica 0, is on process 0); process 0 reports the whole store:
    # every distinct shard once (w + one scale), nothing twice.
    assert r1[0]["full_bytes"] == w_bf16 // 2 and r1[0]["kind"] == "full"
    assert r0[0]["full_bytes"] == w_bf16 + s_bf16
    # Version 1 is a delta on every shard, on both processes.
    assert r0[1]["kind"] == r1[1]["kind"] == "delta"
    assert r0[1]["bytes"] < r0[0]["bytes"] // 4
    for res in (r0, r1):
        assert [x["version"] for x in res] == [0, 1] and all(x["equal"] for x in res)
        # Each process reads the manifest, 2 of the 4 shards of w (its rows: one its own, one the
        # other process's) and the one scale blob: 4 reads, not 6.
        assert [x["blobs_read"] for x in res] == [4, 4]


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
