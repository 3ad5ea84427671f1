"""Weight store: 20 versions of real RL updates (tiny preset, MTP heads distilled as with
speculative samplers) rebuild bitwise in bf16 and f32; a
writer killed with SIGKILL mid-publication never yields a mixed or torn version."""

import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from configs import rl as rl_config
from rl.learning import batch as rb
from rl.learning.loop import state_and_step
from rl.stores.weight_store import WeightReader, WeightWriter, flatten


def _rl_state_and_step(params=None, lr=1e-3, microbatches=1, speculative_k=0):
    """The RL trainer's state and step on one device, for batches of 4 rows x 16 tokens;
    speculative_k > 0: speculative samplers, so the step's MTP self-distillation moves the MTP
    heads (issue 44)."""
    c = rl_config.get_config()
    c.rl.update(group_size=4, groups_per_batch=1, max_tokens=16, speculative_k=speculative_k)
    c.train.update(lr=lr, microbatches=microbatches)
    c.trainer_devices = 1
    return state_and_step(c, params)


def _records(rng, cfg, n=4):
    recs = []
    for i in range(n):
        toks = rng.integers(1, cfg.vocab_size, size=12)
        recs.append(
            dict(
                tokens=toks,
                mask=np.r_[np.zeros(4), np.ones(8)],
                logprobs=np.r_[np.zeros(4), np.full(8, -np.log(cfg.vocab_size))],
                experts=rng.integers(0, 8, size=(cfg.num_moe_layers, 12, 2)),
                reward=float(i % 2),
                group_id="g",
            )
        )
    return recs


def _bits(x, dtype):
    bits = np.uint16 if dtype == ml_dtypes.bfloat16 else np.uint32
    return np.asarray(x).astype(dtype).view(bits)


def test_twenty_rl_versions_rebuild_bitwise(tmp_path):
    from model import presets

    cfg = presets.get("tiny")
    state, step = _rl_state_and_step(speculative_k=2)
    init = flatten(jax.device_get(state.params))
    rng = np.random.default_rng(0)
    writers = {
        "bfloat16": WeightWriter(str(tmp_path / "bf16"), dtype="bfloat16", full_every=8),
        "float32": WeightWriter(str(tmp_path / "f32"), dtype="float32", full_every=8),
    }
    readers = {
        k: WeightReader(str(tmp_path / ("bf16" if k == "bfloat16" else "f32"))) for k in writers
    }
    dtypes = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
    delta_frac = []
    for v in range(20):
        b = rb.collate(_records(rng, cfg), seq_len=16, rows=4, n_moe_layers=1, k=2)
        state, _ = step(state, {k: jnp.asarray(x) for k, x in b.items()})
        host = jax.device_get(state.params)
        for name, w in writers.items():
            stats = w.publish(host, v)
            if stats["kind"] == "delta":
                delta_frac.append(stats["bytes"] / stats["full_bytes"])
            got, gv = readers[name].fetch()
            assert gv == v
            for path, x in flatten(host).items():
                np.testing.assert_array_equal(
                    _bits(flatten(got)[path], dtypes[name]), _bits(x, dtypes[name]), err_msg=path
                )
    # Deltas are smaller than full copies (at lr 1e-3 on a random tiny model most bf16 elements
    # still change; the bench measures realistic RL learning rates).
    assert max(delta_frac) < 1.0
    # The MTP heads the step distills reach the samplers: they moved, and rebuilt bitwise above
    # (with rl.mtp_weight 0 they were 'same' in every version).
    mtp = [p for p in init if p.startswith("mtp_")]
    assert mtp and sum(not np.array_equal(init[p], flatten(host)[p]) for p in mtp) > len(mtp) // 2
    # A fresh reader asking for an older version of the live chain gets it bitwise too.
    old, _ = WeightReader(str(tmp_path / "f32")).fetch(17)
    assert set(flatten(old)) == set(flatten(host))


_WRITER = r"""
import sys, numpy as np
from rl.stores.weight_store import WeightWriter
path, start = sys.argv[1], int(sys.argv[2])
w = WeightWriter(path, dtype="float32", full_every=3)
w.rewind(start - 1)
base = np.random.default_rng(0).normal(size=(4, 250_000)).astype(np.float32)
v = start
while True:
    # version v: every element of leaf i holds base + v (+ i): a torn read shows mixed values
    w.publish({"a": base + v, "b": {"c": base[:2] + 2 * v}}, v)
    v += 1
"""


def _check(params, v, base):
    np.testing.assert_array_equal(params["a"], base + v)
    np.testing.assert_array_equal(params["b"]["c"], base[:2] + 2 * v)


def test_killed_writer_never_yields_a_mixed_version(tmp_path):
    path = str(tmp_path / "store")
    base = np.random.default_rng(0).normal(size=(4, 250_000)).astype(np.float32)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    reader = WeightReader(path)
    start, seen = 0, 0
    for cycle in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, path, str(start)], env=env)
        deadline = time.time() + 60
        while time.time() < deadline and (reader.latest_version() or -1) < start + 3:
            time.sleep(0.05)
        for _ in range(3):  # reads racing the live writer
            p, v = reader.fetch()
            _check(p, v, base)
            seen += 1
        time.sleep(0.05 * (cycle + 1))
        proc.send_signal(signal.SIGKILL)  # most likely mid-publication (publishing is continuous)
        proc.wait()
        p, v = WeightReader(path).fetch()  # the newest complete version, never a torn one
        _check(p, v, base)
        start = v + 1  # a restarted writer continues after what readers could see
    assert seen == 9


def test_microbatched_rl_step_equals_the_whole_batch(tiny_model):
    """train.microbatches=2 (memory for big coding batches) makes the same update as one batch."""
    cfg, params = tiny_model
    rng = np.random.default_rng(1)
    recs = _records(rng, cfg)
    for i, r in enumerate(recs):  # unequal lengths: a wrong per-microbatch weighting would show
        r["mask"][4 : 12 - 2 * i] = 1
        r["mask"][12 - 2 * i :] = 0
    b = rb.collate(recs, seq_len=16, rows=4, n_moe_layers=1, k=2)
    b = {k: jnp.asarray(x) for k, x in b.items()}
    out = {}
    for n in (1, 2):
        state, step = _rl_state_and_step(params, microbatches=n)
        state, metrics = step(state, b)
        out[n] = (jax.device_get(state.params), float(metrics["loss"]))
    assert abs(out[1][1] - out[2][1]) < 1e-6
    # Params after one Adam step of lr 1e-3: equal to 1% of the step (Adam's first step is
    # ~lr * sign(grad), so float32 summation-order noise in a near-zero grad shows up at ~1e-6).
    for path, x in flatten(out[1][0]).items():
        np.testing.assert_allclose(flatten(out[2][0])[path], x, atol=1e-5, err_msg=path)
