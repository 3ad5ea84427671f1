"""Streamed, sharded HF loading and export (model/hf_stream.py): bitwise equal to the whole-model
loader / byte-identical to the whole-model exporter, and host memory bounded by what the devices
hold + the largest tensor + a fixed buffer, measured in two jax.distributed CPU processes x 4
devices on a multi-file checkpoint larger than that bound. The same two processes then take a
train step's gradient through the all-to-all MoE (vs GSPMD) and save an Orbax checkpoint that one
process restores onto 8 devices.

Run as a script, this file is one worker:  python tests/test_hf_stream.py PORT ID CKPT OUT
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from xla_env import xla_flags

_TESTS = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_TESTS)
FIXTURES = os.path.join(_TESTS, "fixtures", "hf")
MESH = (1, 2, 2, 2)  # data, fsdp, expert, tensor over 8 devices (2 processes x 4)
# Fixed allowance on top of device bytes + largest tensor: this host's slice of one (leaf, layer)
# piece being staged, allocator slack, Python objects. XLA's compiles (hf_stream.prepare, one
# program per stacked-leaf shape: a cost of the architecture, not of the checkpoint's size) are
# measured separately, before the load.
BUFFER = 48 << 20
SHARD = 32 << 20  # safetensors file size of the two-process test's checkpoint (several files)


def _assert_shards_equal(ref, got):
    import jax

    assert jax.tree.structure(ref) == jax.tree.structure(got)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(ref), jax.tree.leaves(got)):
        assert a.shape == b.shape, path
        for s in b.addressable_shards:
            assert np.array_equal(np.asarray(s.data), a[s.index]), jax.tree_util.keystr(path)


@pytest.mark.parametrize("name", ["sharded_fp8", "mtp"])
def test_streamed_load_is_bitwise_equal_in_one_process(name):
    import jax

    from model import sharding as sh
    from model.hf import load_hf_checkpoint
    from model.hf_stream import load_hf_checkpoint_sharded

    mesh = jax.make_mesh((*MESH, 1), sh.MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * 5)
    cfg, ref = load_hf_checkpoint(os.path.join(FIXTURES, name))
    cfg2, got = load_hf_checkpoint_sharded(os.path.join(FIXTURES, name), mesh, sh.DEFAULT_RULES)
    assert cfg2 == cfg
    _assert_shards_equal(ref, got)
    wi = got["moe_layers"]["moe"]["wi_gate"]  # [L, E, D, F] over (-, expert, fsdp, tensor)
    assert wi.addressable_shards[0].data.size * 8 == wi.size


def _same_files(a, b):
    """Two HF folders hold the same files, byte for byte."""
    assert sorted(os.listdir(a)) == sorted(os.listdir(b))
    for name in os.listdir(a):
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            assert fa.read() == fb.read(), name


@pytest.mark.parametrize("name", ["tiny", "mtp"])
def test_streamed_export_is_byte_identical_in_one_process(name, tmp_path):
    import jax

    from model import init_params, presets
    from model import sharding as sh
    from model.hf import config_to_hf, load_hf_checkpoint, save_hf_checkpoint
    from model.hf_stream import _shardings, load_hf_checkpoint_sharded, save_hf_checkpoint_sharded

    mesh = jax.make_mesh((*MESH, 1), sh.MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * 5)
    if name == "tiny":  # the real preset, random weights, laid out on the mesh
        cfg = presets.get("tiny")
        # An unsharded init placed on the mesh: a sharded init's bits (threefry is partitionable)
        # from the one init program the suite shares, not a compile per mesh.
        params = jax.device_put(
            init_params(cfg, jax.random.PRNGKey(1)), _shardings(cfg, mesh, sh.DEFAULT_RULES)
        )
    else:  # a checkpoint with an MTP module (its own MoE block, shared embed/head)
        cfg, params = load_hf_checkpoint_sharded(
            os.path.join(FIXTURES, name), mesh, sh.DEFAULT_RULES
        )
        assert cfg.num_mtp_modules > 0
    host = jax.device_get(params)
    for shard_bytes in (4 << 30, 200_000):  # one file; several (with an index)
        ref, got = tmp_path / f"ref{shard_bytes}", tmp_path / f"got{shard_bytes}"
        save_hf_checkpoint(cfg, host, str(ref), max_shard_bytes=shard_bytes)
        save_hf_checkpoint_sharded(cfg, params, str(got), max_shard_bytes=shard_bytes)
        _same_files(ref, got)
    assert len(os.listdir(got)) > 3  # config, index and at least two shard files
    cfg2, back = load_hf_checkpoint(str(got))
    assert config_to_hf(cfg2) == config_to_hf(cfg)  # runtime knobs (dtype, moe_impl) are not saved
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a, b), host, back)


# --- two processes ------------------------------------------------------------------------------


def _big_config():
    from model import presets

    # ~63M routed-expert params (252 MB float32) in 16 experts x 5 MoE layers; largest tensor 2 MB
    # (the embedding). Few, wide experts: the same bytes in fewer tensors (the streamed export
    # gathers one tensor per cross-process program, so its time goes with the tensor count).
    return presets.get(
        "tiny",
        hidden_size=256,
        moe_intermediate_size=1024,
        n_routed_experts=16,
        n_group=1,
        topk_group=1,
        num_hidden_layers=6,
        vocab_size=2048,
        num_mtp_modules=0,
    )


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss(fn):
    """(fn(), peak RSS sampled every 2 ms while it ran)."""
    peak, done = [_rss()], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        result = fn()
    finally:
        done.set()
        thread.join()
    return result, peak[0]


def _worker(port, process_id, ckpt, out):
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=process_id)
    sys.path[:0] = [_ROOT]
    from model import hf_stream
    from model import sharding as sh
    from model.hf import load_hf_checkpoint, read_config
    from model.safetensors_io import SafetensorsFile

    mesh = jax.make_mesh((*MESH, 1), sh.MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * 5)
    before = _rss()
    cfg = read_config(ckpt)[0]
    hf_stream.prepare(cfg, mesh, sh.DEFAULT_RULES)  # XLA compiles: a fixed cost
    compiled = _rss() - before
    base = _rss()
    params, peak = _peak_rss(
        lambda: hf_stream.load_hf_checkpoint_sharded(ckpt, mesh, sh.DEFAULT_RULES)[1]
    )
    # Streamed export of the loaded params: its compiles first (a fixed cost, as for the load),
    # then the export's peak, on the same base as the load's (device bytes are host memory here).
    export_compiled = _rss()
    hf_stream.prepare_export(cfg, params)
    export_compiled, export_start, t0 = _rss() - export_compiled, _rss(), time.time()
    export_dir = os.path.join(os.path.dirname(out), "export")
    _, export_peak = _peak_rss(
        lambda: hf_stream.save_hf_checkpoint_sharded(cfg, params, export_dir, max_shard_bytes=SHARD)
    )
    export_s = time.time() - t0
    print(f"[{process_id}] loaded and exported in {export_s:.1f} s", flush=True)
    on_devices = sum(s.data.nbytes for x in jax.tree.leaves(params) for s in x.addressable_shards)
    largest, total = 0, 0
    for file in sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors")):
        st = SafetensorsFile(os.path.join(ckpt, file))
        for name in st.keys():
            size = int(np.prod(st.header[name]["shape"])) * 4  # as float32
            largest, total = max(largest, size), total + size
        st.close()
    _, ref = load_hf_checkpoint(ckpt)  # after measuring: the whole-model loader to compare with
    _assert_shards_equal(ref, params)
    del ref
    from model.export import save_params

    print(f"[{process_id}] loaded and compared; saving", flush=True)
    save_params(os.path.join(os.path.dirname(out), "orbax"), read_config(ckpt)[0], params)
    print(f"[{process_id}] saved; train steps", flush=True)
    step = {c: _lm_step(c, mesh) for c in ("gspmd", "alltoall")}
    print(f"[{process_id}] steps {step}", flush=True)
    with open(out, "w") as f:
        json.dump(
            dict(
                peak=peak - base,
                export_peak=export_peak - base - export_compiled,  # as the load: no compiles
                export_growth=export_peak - export_start,
                on_devices=on_devices,
                largest=largest,
                total=total,
                compiled=compiled,
                export_compiled=export_compiled,
                export_s=export_s,
                step=step,
            ),
            f,
        )


def _lm_step(moe_comm, mesh):
    """(loss, grad norm) of next-token cross-entropy of the tiny preset on a fixed batch, jitted on
    the mesh: the gradient computation of a train step, through the chosen MoE dispatch."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from model import Transformer, init_params, presets
    from model import sharding as sh
    from model.hf_stream import _shardings

    cfg = presets.get("tiny", moe_comm=moe_comm, moe_impl="dense")
    # The suite's shared unsharded init program, placed (not a sharded init compiled per mesh).
    params = jax.device_put(
        init_params(cfg, jax.random.PRNGKey(0)), _shardings(cfg, mesh, sh.DEFAULT_RULES)
    )
    tokens = jax.random.randint(jax.random.PRNGKey(0), (4, 16), 0, cfg.vocab_size)

    def loss(p):
        logits = Transformer(cfg).apply({"params": p}, tokens, with_mtp=False).logits[:, :-1]
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, tokens[:, 1:, None], -1).mean()

    def loss_and_grad_norm(p):
        value, grads = jax.value_and_grad(loss)(p)
        return value, jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))

    # One program: eager ops on arrays spanning processes are each a separate multi-process
    # computation, and two processes dispatching them asynchronously can deadlock in the CPU
    # collectives (seen: one process in a multiply, the other in an add).
    with jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
        value, norm = jax.jit(loss_and_grad_norm)(params)
    return [float(value), float(norm)]


def _error_part(log: str) -> str:
    """A worker log's Python traceback if it has one (the runtime's shutdown noise follows it),
    else its tail."""
    at = log.find("Traceback (most recent call last)")
    return log[at : at + 4000] if at >= 0 else log[-2000:]


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.long  # ~40 s of CPU per process; minutes of wall time on a loaded machine
def test_two_process_streamed_load_bounds_host_memory(tmp_path):
    import jax

    from model.hf import save_hf_checkpoint
    from model.params import param_shapes

    cfg = _big_config()
    rng = np.random.default_rng(0)
    params = jax.tree.map(
        lambda s: rng.standard_normal(s.shape, dtype=np.float32), param_shapes(cfg)
    )
    save_hf_checkpoint(cfg, params, str(tmp_path / "ckpt"), max_shard_bytes=SHARD)
    del params
    assert os.path.exists(tmp_path / "ckpt" / "model.safetensors.index.json")  # multi-file
    port = _free_port()
    # MALLOC_MMAP_THRESHOLD_: a fixed glibc mmap threshold, so freed tensor-sized buffers go back
    # to the OS and RSS measures what is held. With glibc's default (a dynamic threshold that
    # rises to the largest block freed, up to 32 MB), the export's freed tensor-sized gathered
    # pieces stay in the heap as free chunks: ~90 MiB more RSS measured (a 64-expert version of
    # this checkpoint); slack, not a leak (fetching the same pieces again adds nothing).
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=xla_flags(4),
        MALLOC_MMAP_THRESHOLD_="65536",
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                str(port),
                str(i),
                str(tmp_path / "ckpt"),
                str(tmp_path / f"{i}.json"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=540)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    # Both workers' tails: a failure in one shows up in the other as a coordination error.
    tails = "\n".join(f"--- worker {i} ---\n{_error_part(log)}" for i, log in enumerate(logs))
    assert all(p.returncode == 0 for p in procs), tails
    for i in range(2):
        r = json.loads((tmp_path / f"{i}.json").read_text())
        bound = r["on_devices"] + r["largest"] + BUFFER
        print(f"process {i}: {r} bound {bound}")
        assert r["total"] > bound  # the checkpoint could not fit under the bound
        assert r["on_devices"] <= 0.55 * r["total"]  # each process holds about half (8-way split)
        assert 0 < r["peak"] <= bound, (r, bound)
        # A train step's loss and gradient through the all-to-all MoE across the two processes.
        np.testing.assert_allclose(r["step"]["alltoall"], r["step"]["gspmd"], rtol=1e-5)
        # The streamed export of the loaded params: bounded like the load; no more than a
        # gathered tensor and the buffer above what this process held when it started.
        assert 0 < r["export_peak"] <= bound, (r, bound)
        assert r["export_growth"] <= r["largest"] + BUFFER, r
    # ... and its files are the source checkpoint's, byte for byte (same planner, same shards).
    _same_files(tmp_path / "ckpt", tmp_path / "export")
    # The checkpoint the two processes saved, restored by one process onto 8 devices (another
    # process count and another mesh), equals the whole-model loader's params.
    from model import sharding as sh
    from model.export import load_params
    from model.hf import load_hf_checkpoint
    from model.hf_stream import _shardings

    mesh = jax.make_mesh(
        (2, 1, 4, 1, 1), sh.MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * 5
    )
    _, restored = load_params(str(tmp_path / "orbax"), _shardings(cfg, mesh, sh.DEFAULT_RULES))
    _assert_shards_equal(load_hf_checkpoint(str(tmp_path / "ckpt"))[1], restored)


if __name__ == "__main__":
    port_, id_, ckpt_, out_ = sys.argv[1:]
    _worker(int(port_), int(id_), ckpt_, out_)


def test_config_json_missing_fields_is_one_line_checkpoint_error(tmp_path):
    from model.hf import CheckpointError, read_config

    raw = json.loads(open(os.path.join(FIXTURES, "noqlora_yarn", "config.json")).read())
    for field in ("vocab_size", "max_position_embeddings"):
        broken = dict(raw)
        del broken[field]
        if field == "max_position_embeddings":  # only needed to infer a missing yarn factor
            broken["rope_parameters"] = {
                k: v for k, v in raw["rope_parameters"].items() if k != "factor"
            }
        (tmp_path / "config.json").write_text(json.dumps(broken))
        with pytest.raises(CheckpointError) as e:
            read_config(str(tmp_path))
        assert field in str(e.value) and "\n" not in str(e.value)


def test_unused_checkpoint_tensors_are_reported(tmp_path, caplog):
    import shutil

    from safetensors.numpy import save_file

    from model.hf import load_hf_checkpoint

    dst = tmp_path / "m"
    shutil.copytree(os.path.join(FIXTURES, "qlora_group"), dst)
    save_file({"model.extra.weight": np.zeros((2, 2), np.float32)}, str(dst / "extra.safetensors"))
    with caplog.at_level("WARNING"):
        load_hf_checkpoint(str(dst))
    assert "1 checkpoint tensor(s) not used: model.extra.weight" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_hf_checkpoint(os.path.join(FIXTURES, "mtp"))  # MTP's shared embed/head copies: claimed
    assert "not used" not in caplog.text
