import glob
import logging
import os

import jax
import numpy as np
import pytest
from test_train_standin import STANDIN_RULES, standin_setup

from model import export, presets
from train import checkpoint, trainer
from train import sharding as shd
from train import synthetic_data as sd


def _mesh(shape):
    return shd.make_mesh(dict(zip(shd.MESH_AXES, shape)), jax.devices()[: int(np.prod(shape))])


def _train_and_save(workdir, shape, steps):
    su = standin_setup()
    mesh = _mesh(shape)
    sh = _shardings(su, mesh)
    state = trainer.init_state(su.init_fn, su.tx, sh, mesh, STANDIN_RULES, seed=0)
    step = trainer.jit_train_step(su.loss_fn, sh, mesh, STANDIN_RULES, bias_update=su.bias_update)
    it = sd.lm_batches(sd.synthetic_tokens(4000, 64, 0), batch_size=8, seq_len=16, seed=0)
    with checkpoint.Checkpointer(str(workdir), keep=2) as ckpt:
        for _ in range(steps):
            state, _ = step(state, shd.global_batch(next(it), mesh))
            ckpt.save(state, it.get_state(), {"note": "test"})
        ckpt.wait()
        steps_saved = ckpt.all_steps()
    return su, state, it, steps_saved


def _shardings(su, mesh):
    return trainer.state_shardings(su.init_fn, su.logical_specs, su.tx, mesh, STANDIN_RULES)


def _restore(reader, su, mesh):
    return reader.restore_latest(trainer.abstract_state(su.init_fn, su.tx), _shardings(su, mesh))


def _tree_equal(a, b):
    for x, y in zip(jax.tree.leaves(jax.device_get(a)), jax.tree.leaves(jax.device_get(b))):
        np.testing.assert_array_equal(x, y)


def test_roundtrip_keep_n_and_restore_onto_other_meshes(tmp_path):
    su, state, it, steps_saved = _train_and_save(tmp_path, (8, 1, 1, 1), steps=3)
    assert steps_saved == [2, 3]  # keep=2
    for shape in [(1, 1, 1, 1), (1, 2, 2, 2)]:  # other device count, other mesh
        mesh = _mesh(shape)
        with checkpoint.Checkpointer(str(tmp_path)) as reader:
            restored, data_state, config = _restore(reader, su, mesh)
        _tree_equal(restored.params, state.params)
        _tree_equal(restored.opt_state, state.opt_state)
        np.testing.assert_array_equal(restored.rng, state.rng)
        assert (
            int(restored.step) == 3 and data_state == it.get_state() and config == {"note": "test"}
        )
        want = {**dict.fromkeys(shd.MESH_AXES, 1), **dict(zip(shd.MESH_AXES, shape))}  # context 1
        assert restored.params["experts"].sharding.mesh.shape == want


def test_corrupted_latest_checkpoint_falls_back_with_warning(tmp_path, caplog):
    su, state, it, _ = _train_and_save(tmp_path, (1, 1, 1, 1), steps=2)
    data_files = glob.glob(
        str(tmp_path / "checkpoints" / "2" / "state" / "**" / "d" / "*"), recursive=True
    )
    assert data_files
    for f in data_files:  # truncate every array data file of the latest checkpoint
        os.truncate(f, 7)
    mesh = _mesh((1, 1, 1, 1))
    with caplog.at_level(logging.WARNING), checkpoint.Checkpointer(str(tmp_path)) as reader:
        restored, data_state, _ = _restore(reader, su, mesh)
    assert int(restored.step) == 1 and data_state == {"next_index": 1}
    assert any("checkpoints/2 is unreadable" in r.getMessage() for r in caplog.records)


def test_every_checkpoint_unreadable_is_a_one_line_error_not_a_fresh_start(tmp_path):
    from model.errors import InputError

    su, _, _, steps = _train_and_save(tmp_path, (1, 1, 1, 1), steps=2)
    for f in glob.glob(
        str(tmp_path / "checkpoints" / "*" / "state" / "**" / "d" / "*"), recursive=True
    ):
        os.truncate(f, 7)
    with checkpoint.Checkpointer(str(tmp_path)) as reader:
        with pytest.raises(
            InputError,
            match=r"no checkpoint under .* restores into this run's state \(steps \[1, 2\]",
        ):
            _restore(reader, su, _mesh((1, 1, 1, 1)))
        assert reader.all_steps() == steps


def test_a_checkpoint_of_another_optimizer_is_a_one_line_error_and_stays(tmp_path):
    """Resuming AdamW checkpoints with Muon (another optimizer-state tree) is not corruption: no
    fallback to an older checkpoint (they share the layout) and no fresh start over them."""
    from model.errors import ConfigError

    su, _, _, steps = _train_and_save(tmp_path, (1, 1, 1, 1), steps=2)
    muon = standin_setup(optimizer="muon")
    with checkpoint.Checkpointer(str(tmp_path)) as reader:
        with pytest.raises(ConfigError, match=r"checkpoints/2 holds a training state of another"):
            _restore(reader, muon, _mesh((1, 1, 1, 1)))
        assert reader.all_steps() == steps == [1, 2]
    with checkpoint.Checkpointer(str(tmp_path)) as reader:  # the same config still resumes
        assert int(_restore(reader, su, _mesh((1, 1, 1, 1)))[0].step) == 2


def test_no_checkpoint_gives_none(tmp_path):
    su = standin_setup()
    with checkpoint.Checkpointer(str(tmp_path)) as reader:
        assert _restore(reader, su, _mesh((1, 1, 1, 1))) is None


def test_params_only_export_roundtrip(tmp_path):
    su = standin_setup()
    mesh = _mesh((2, 2, 2, 1))
    sh = _shardings(su, mesh)
    state = trainer.init_state(su.init_fn, su.tx, sh, mesh, STANDIN_RULES, seed=3)
    export.save_params(str(tmp_path / "params"), presets.get("tiny"), state.params)
    target = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), state.params, sh.params
    )
    loaded = export.restore_params(str(tmp_path / "params"), target)
    _tree_equal(loaded, state.params)
    assert set(loaded) == set(state.params)  # params only: no optimizer state


def test_small_replicated_arrays_are_written_whole_and_large_ones_split(tmp_path, monkeypatch):
    """model/orbax_io.py: Orbax's replica-parallel save slices a replicated array per replica with
    eager jax ops; under MIN_REPLICA_SLICE_BYTES a slice is not worth it, so one replica writes
    the array whole. Counts the slices Orbax makes and checks both arrays round-trip bitwise."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from model import orbax_io

    sliced = []
    real_slice = jax.lax.slice_in_dim
    monkeypatch.setattr(
        jax.lax, "slice_in_dim", lambda x, *a, **k: sliced.append(x.shape) or real_slice(x, *a, **k)
    )
    replicated = NamedSharding(_mesh((8, 1, 1, 1)), P())  # 8 replicas of every array
    rows = 2 * 8 * orbax_io.MIN_REPLICA_SLICE_BYTES // (4 * 256)  # 2 MiB a replica's slice
    arrays = {
        "norm": jax.device_put(np.arange(64, dtype=np.float32), replicated),
        "embed": jax.device_put(np.ones((rows, 256), np.float32), replicated),
    }
    export.save_params(str(tmp_path / "p"), presets.get("tiny"), arrays)
    assert sliced == [(rows, 256)] * 8  # the big array split over 8 replicas, the small one not
    _tree_equal(export.restore_params(str(tmp_path / "p")), arrays)
