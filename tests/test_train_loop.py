"""The loop end to end with the stand-in model: exact resume (in process and after SIGKILL),
SIGTERM save, non-finite stop, logs and TensorBoard events.

Run as a script, this file trains in a subprocess:  python tests/test_train_loop.py WORKDIR OUT
"""

import glob
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_TESTS), _TESTS]  # this checkout first (also as a script)
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
from test_train_standin import STANDIN_RULES, standin_handle, tiny_run_config  # noqa: E402


def _train(workdir, steps=12, every=4, **kw):
    from train import loop

    lines = []
    log = kw.pop("log", lines.append)
    state = loop.train(
        tiny_run_config(steps, every),
        str(workdir),
        handle=standin_handle(),
        rules=STANDIN_RULES,
        log=log,
        **kw,
    )
    return jax.device_get(state.params), lines


def _assert_bitwise(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


def test_resume_is_bitwise_and_logs(tmp_path):
    full, lines = _train(tmp_path / "a")
    assert any(l.startswith("step 12/12 (100%") and "tok/s" in l and "mfu" in l for l in lines)
    assert any("held-out loss" in l for l in lines)
    from train.tensorboard import read_scalars

    events = read_scalars(glob.glob(str(tmp_path / "a" / "tb" / "events.*"))[0])
    losses = [v for s, t, v in events if t == "loss"]
    assert len(losses) == 12 and losses[-1] < losses[0]
    # --mode=convert: params-only export of the newest checkpoint, equal to the final params.
    from train import checkpoint, convert

    path = convert.export_latest(
        tiny_run_config(), str(tmp_path / "a"), handle=standin_handle(), rules=STANDIN_RULES
    )
    assert path.endswith("params_12")
    _assert_bitwise(checkpoint.load_params(path), full)
    _train(tmp_path / "b", stop_after_steps=5)  # stops after step 5; last save at step 4
    resumed, lines = _train(tmp_path / "b")
    assert any("resumed" in l and "at step 4" in l for l in lines), lines[:3]
    _assert_bitwise(full, resumed)


def _spawn(workdir, out):
    return subprocess.Popen(
        [sys.executable, __file__, str(workdir), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _step_losses(stdout):
    """{step: logged loss text} from log lines 'step N/40 (...) loss X ...'."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("step ") and "/" in line.split()[1] and " loss " in line:
            out.setdefault(int(line.split()[1].split("/")[0]), []).append(
                line.split(" loss ")[1].split()[0]
            )
    return out


def _wait_for_checkpoint(workdir, proc, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if glob.glob(os.path.join(workdir, "checkpoints", "*", "commit_success.txt")):
            return
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read())
        time.sleep(0.05)
    raise AssertionError("no checkpoint appeared")


def test_sigkill_then_restart_matches_uninterrupted_run(tmp_path):
    ref = _spawn(tmp_path / "ref", tmp_path / "ref.npz")
    killed = _spawn(tmp_path / "run", tmp_path / "run.npz")
    _wait_for_checkpoint(str(tmp_path / "run"), killed)
    time.sleep(0.3)  # somewhere after the first checkpoint, mid-step or mid-save
    killed.send_signal(signal.SIGKILL)
    killed_stdout, _ = killed.communicate()
    assert not (tmp_path / "run.npz").exists()  # it really died before the end
    out = subprocess.run(
        [sys.executable, __file__, str(tmp_path / "run"), str(tmp_path / "run.npz")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "resumed" in out.stdout, out.stdout
    ref_stdout, _ = ref.communicate(timeout=120)
    assert ref.returncode == 0, ref_stdout
    # Data order: every step, whether run before the kill or (again) after the restart, logged
    # the same loss as the uninterrupted run.
    ref_losses = _step_losses(ref_stdout)
    assert sorted(ref_losses) == list(range(1, 41))
    for step, values in {**_step_losses(killed_stdout), **_step_losses(out.stdout)}.items():
        assert set(values) == set(ref_losses[step]), (step, values, ref_losses[step])
    a, b = np.load(tmp_path / "ref.npz"), np.load(tmp_path / "run.npz")
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)  # params and the data order


def test_sigterm_saves_and_exits(tmp_path):
    proc = _spawn(tmp_path / "run", tmp_path / "run.npz")
    _wait_for_checkpoint(str(tmp_path / "run"), proc)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, stdout
    assert "preempted: saved step" in stdout
    step = int(stdout.split("preempted: saved step ")[1].split(",")[0])
    assert step < 40
    steps = sorted(
        int(os.path.basename(d))
        for d in glob.glob(str(tmp_path / "run" / "checkpoints" / "*"))
        if os.path.basename(d).isdigit()
    )
    assert steps[-1] == step


def test_non_finite_losses_stop_the_run_and_never_reach_a_checkpoint(tmp_path):
    from train import loop
    from train.checkpoint import Checkpointer

    h = standin_handle()

    def nan_apply(params, tokens, positions=None, segment_ids=None):
        out = h.apply(params, tokens, positions, segment_ids)
        out.logits = out.logits * jnp.nan
        return out

    bad = h.__class__(**{**h.__dict__, "apply": nan_apply})
    config = tiny_run_config(steps=10, every=1)
    config.train.max_nonfinite_in_a_row = 3
    with pytest.raises(loop.NonFiniteLossError, match="3 non-finite steps in a row at step 3"):
        loop.train(config, str(tmp_path), handle=bad, rules=STANDIN_RULES, log=lambda _: None)
    ckpt = Checkpointer(str(tmp_path))
    assert ckpt.all_steps() == [1, 2]  # steps 1 and 2 saved; the run stopped at step 3
    from train import build
    from train import sharding as shd

    tx, _ = loop.build_optimizer(config, h)
    mesh = shd.make_mesh({"data": -1})
    init = jax.device_get(build.init_state(h, tx, mesh, STANDIN_RULES, config.train.seed)[0].params)
    with ckpt:
        state, _, _ = ckpt.restore_latest(
            build.abstract_state(h, tx), build.state_shardings(h, tx, mesh, STANDIN_RULES)
        )
    assert int(state.skipped_steps) == 2
    _assert_bitwise(state.params, init)  # skipped steps left params exactly at init


def test_hf_folder_as_model_initializes_params(tmp_path):
    """config.model = an HF folder: the model config and the initial params come from it."""
    from configs import default
    from model import hf, init_params, presets
    from train import checkpoint, loop
    from train import sharding as shd

    cfg = presets.get("tiny")
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(7)))
    hf.save_hf_checkpoint(cfg, params, str(tmp_path / "hf"))
    config = default.get_config()
    config.model = str(tmp_path / "hf")
    handle = loop.model_handle(config)
    assert handle.cfg.hidden_size == cfg.hidden_size
    tx, _ = loop.build_optimizer(config, handle)
    mesh = shd.make_mesh({"fsdp": 2, "expert": 2, "tensor": 2})
    from model import sharding as msh

    with checkpoint.Checkpointer(str(tmp_path / "run")) as ckpt:
        state, _ = loop.restore_or_init(
            config, handle, tx, mesh, msh.DEFAULT_RULES, ckpt, train_it=None, log=lambda _: None
        )
    _assert_bitwise(state.params, params)
    assert state.params["lm_head"].sharding.spec == jax.sharding.PartitionSpec("fsdp", "tensor")


def _script(workdir, out):
    """Subprocess body: 40 slow-ish steps (log sleeps) so a kill lands mid-run, on batches from
    data/'s Grain pipeline (the embedded stdlib corpus), whose state is checkpointed with the run."""
    from test_train_standin import StandInConfig

    from train import loop

    def slow_log(line):
        print(line, flush=True)
        time.sleep(0.05)

    config = tiny_run_config(steps=40, every=5)
    config.data.source = "pipeline"
    state = loop.train(
        config,
        workdir,
        handle=standin_handle(StandInConfig(vocab_size=320)),
        rules=STANDIN_RULES,
        log=slow_log,
    )
    if int(state.step) < config.train.steps:
        return  # preempted
    flat = {
        jax.tree_util.keystr(p): np.asarray(x)
        for p, x in jax.tree_util.tree_leaves_with_path(jax.device_get(state.params))
    }
    # The data order: the iterator state the run ended with must match too.
    flat["rng"] = np.asarray(jax.device_get(state.rng))
    np.savez(out, **flat)


if __name__ == "__main__":
    _script(sys.argv[1], sys.argv[2])
