"""The loop end to end on model/'s real `tiny` preset (MLA, MoE routing with router-bias updates,
an MTP module trained with CE): exact resume in process, corrupt-checkpoint fallback, SIGKILL and
SIGTERM, non-finite stop, logs and TensorBoard events. Short runs (seq 32, batch 8).

Run as a script, this file trains in a subprocess:  python tests/test_train_loop.py WORKDIR OUT
"""

import dataclasses
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
from xla_env import xla_flags

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_TESTS), _TESTS]  # this checkout first (also as a script)
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def tiny_run_config(steps=8, every=4, log_every=1):
    """configs/default.py on the tiny preset: MoE + bias updates + MTP (CE) on, synthetic data."""
    from configs import default

    c = default.get_config()
    c.model = "tiny"
    c.train.update(
        steps=steps,
        batch_size=8,
        seq_len=32,
        warmup_steps=2,
        log_every=log_every,
        eval_every=steps,
        eval_batches=1,
        lr=1e-2,
        mtp_mode="ce",
        bias_update_rate=1e-2,
    )
    c.data.source = "synthetic"
    c.checkpoint.every_steps = every
    return c


def _train(workdir, config=None, **kw):
    from train import trainer

    lines = []
    state = trainer.train(config or tiny_run_config(), str(workdir), log=lines.append, **kw)
    return jax.device_get(state), lines


def _assert_bitwise(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


def _router_bias(params):
    return np.asarray(params["moe_layers"]["moe"]["router_bias"])


def test_resume_is_bitwise_corrupt_latest_falls_back_and_logs(tmp_path):
    import orbax.checkpoint as ocp

    from model import export
    from train import checkpoint, convert, trainer
    from train.tensorboard import read_scalars

    gated = tiny_run_config()
    gated.train.eval_every = 4  # held-out NLL at 4 and 8 (the run's params are the same)
    gated.eval_gate.update(keep=1, metric="eval/nll", mode="min")
    full, lines = _train(tmp_path / "a", config=gated)
    assert any(l.startswith("step 8/8 (100%") and "tok/s" in l and "mfu" in l for l in lines)
    # The MFU line names its peak: tiny's largest dimension (vocab 320) -> a 512^3 float32 matmul.
    assert all("GFLOP/s (float32 512^3 matmul" in l for l in lines if " mfu " in l)
    assert any("held-out loss" in l for l in lines)
    events = read_scalars(glob.glob(str(tmp_path / "a" / "tb" / "events.*"))[0])
    tags = {t for _, t, _ in events}
    assert {"loss", "ce", "mtp"} <= tags  # the MTP head was trained
    losses = [v for s, t, v in events if t == "loss"]
    assert len(losses) == 8 and losses[-1] < losses[0]
    assert np.abs(_router_bias(full.params)).max() > 0  # bias updates ran
    # --mode=convert: params-only export of the newest checkpoint, equal to the final params.
    path = convert.export_latest(tiny_run_config(), str(tmp_path / "a"))
    assert path.endswith("params_8")
    _assert_bitwise(export.restore_params(path), full.params)
    from data.export_tokenizer import recorded_tokenizer  # here: this file also runs as a script

    assert recorded_tokenizer(path) == {"kind": "byte"}  # the ids' tokenizer, recorded
    # --mode=eval at eval.nll's defaults on that export: the training loop's final held-out figure.
    _eval_nll_equals_training_figure(path, events, lines)
    # config.eval_gate: Orbax kept the one best params checkpoint by the held-out NLL.
    nll = {s: v for s, tag, v in events if tag == "eval/nll"}
    best = min(nll, key=nll.get)
    assert sorted(nll) == [4, 8] and os.listdir(tmp_path / "a" / "best") == [str(best)]
    assert any(f"step {best}: eval_gate eval/nll" in l for l in lines)
    keeper = checkpoint.BestCheckpoints(str(tmp_path / "a" / "best"), "eval/nll")
    assert keeper.best_step() == best
    if best == 8:  # the kept params are the run's (else step 4's, which no other run keeps)
        _assert_bitwise(jax.device_get(keeper.restore_best()), full.params)
    keeper.close()

    _train(tmp_path / "b", stop_after_steps=5)  # stops after step 5; last save at step 4
    resumed, lines = _train(tmp_path / "b")
    assert any("resumed" in l and "at step 4" in l for l in lines), lines[:3]
    _assert_bitwise(full.params, resumed.params)
    _assert_bitwise(full.opt_state, resumed.opt_state)

    # Corrupt run a's latest checkpoint (8): restoring falls back to step 4, which equals run b's.
    for f in glob.glob(str(tmp_path / "a" / "checkpoints" / "8" / "state" / "**" / "d" / "*")):
        os.truncate(f, 7)
    r = trainer.build(tiny_run_config())
    with (
        checkpoint.Checkpointer(str(tmp_path / "a")) as a,
        checkpoint.Checkpointer(str(tmp_path / "b")) as b,
    ):
        got = a.restore_latest(r.abstract_state(), r.state_shardings())
        # Run b's step-4 checkpoint, read as a plain tree (only its 'state' item).
        want = b.manager.restore(4, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    assert int(got[0].step) == 4
    _assert_bitwise(got[0].params, want["state"]["params"])


def _eval_nll_equals_training_figure(export: str, events, lines) -> None:
    from configs import eval as eval_config
    from eval import run

    config = tiny_run_config()
    config.eval = eval_config.get_config().eval  # its defaults, but for which suite runs
    config.eval.suites = "nll"
    report = run.run(config, os.path.dirname(export), export, log=str)[export]["nll"]
    assert report["config"]["context_lengths"] == "32" and report["config"]["batch_size"] == 8
    trained = [v for s, tag, v in events if tag == "eval/nll" and s == 8]
    assert report["metrics"]["nll@32"] == pytest.approx(trained[-1], rel=1e-6)  # TB: float32
    assert f"final held-out loss {report['metrics']['nll@32']:.4f}" in "\n".join(lines)


def test_non_finite_steps_stop_the_run_without_a_per_step_sync(tmp_path):
    """The streak is read one step late (asynchronously) or where the loop syncs anyway (save):
    with K=3 and saves every 2 steps the run stops right after step 3's result is read."""
    from train import checkpoint, trainer

    config = tiny_run_config(steps=10, every=2, log_every=10)
    config.train.max_nonfinite_in_a_row = 3
    r = trainer.build(config)

    def nan_loss(params, batch, rng):
        loss, aux = r.loss_fn(params, batch, rng)
        return loss * jnp.nan, aux

    lines = []
    with pytest.raises(trainer.NonFiniteLossError, match="3 non-finite steps in a row at step 3"):
        trainer.train(
            config, str(tmp_path), run=dataclasses.replace(r, loss_fn=nan_loss), log=lines.append
        )
    assert [l for l in lines if "non-finite" in l][:3] == [
        f"step {s}: non-finite loss or gradient, step skipped ({s} in a row)" for s in (1, 2, 3)
    ]
    with checkpoint.Checkpointer(str(tmp_path)) as ckpt:
        assert ckpt.all_steps() == [2]  # the save at step 2; stopped before the one at step 4
        state, _, _ = ckpt.restore_latest(r.abstract_state(), r.state_shardings())
    assert int(state.skipped_steps) == 2
    init = trainer.init_state(r.init_fn, r.tx, r.state_shardings(), r.mesh, r.rules, 0)
    _assert_bitwise(state.params, init.params)  # skipped steps left params exactly at init


def test_hf_folder_as_model_initializes_params(tmp_path):
    """config.model = an HF folder: the model config and the initial params come from it."""
    from model import hf, init_params, presets
    from train import checkpoint, trainer

    cfg = presets.get("tiny")
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(7)))
    hf.save_hf_checkpoint(cfg, params, str(tmp_path / "hf"))
    config = tiny_run_config()
    config.model = str(tmp_path / "hf")
    config.mesh.update(data=1, fsdp=2, expert=2, tensor=2)
    r = trainer.build(config)
    assert r.cfg.hidden_size == cfg.hidden_size and r.hf_dir == config.model
    with checkpoint.Checkpointer(str(tmp_path / "run")) as ckpt:
        state, _ = trainer.restore_or_init(r, ckpt, source=None, log=lambda _: None)
    _assert_bitwise(state.params, params)
    # embed over (fsdp, context): weights split over the context axis too (model/sharding.py)
    spec = jax.sharding.PartitionSpec(("fsdp", "context"), "tensor")
    assert state.params["lm_head"].sharding.spec == spec


def _spawn(workdir, out):
    env = dict(os.environ, XLA_FLAGS=xla_flags(1))
    return subprocess.Popen(
        [sys.executable, __file__, str(workdir), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _step_losses(stdout):
    """{step: logged loss text} from log lines 'step N/20 (...) loss X ...'."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("step ") and "/" in line.split()[1] and " loss " in line:
            out.setdefault(int(line.split()[1].split("/")[0]), []).append(
                line.split(" loss ")[1].split()[0]
            )
    return out


def _wait_for_checkpoint(workdir, proc, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if glob.glob(os.path.join(workdir, "checkpoints", "*", "commit_success.txt")):
            return
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read())
        time.sleep(0.05)
    raise AssertionError("no checkpoint appeared")


def test_sigterm_saves_then_sigkill_then_restart_matches_uninterrupted_run(tmp_path):
    """One run preempted (SIGTERM: saves and exits 0), restarted, killed (SIGKILL) after a
    checkpoint, restarted again to the end: every step logs the loss of an uninterrupted run
    (same data order) and the final params and rng are bitwise equal to it.

    The uninterrupted reference starts once the first run has saved (so compiled): it then loads
    the init and train-step programs from the persistent compilation cache (conftest.py) instead
    of compiling them a second time beside it (~37 s of CPU), and runs beside the restarts."""
    wd, out = tmp_path / "run", tmp_path / "run.npz"
    proc = _spawn(wd, out)
    _wait_for_checkpoint(str(wd), proc)
    proc.send_signal(signal.SIGTERM)
    ref = _spawn(tmp_path / "ref", tmp_path / "ref.npz")
    term_stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, term_stdout
    saved = int(term_stdout.split("preempted: saved step ")[1].split(",")[0])
    steps = sorted(int(d) for d in os.listdir(wd / "checkpoints") if d.isdigit())
    assert saved < 20 and steps[-1] == saved, (saved, steps)

    proc, killed_stdout = _spawn(wd, out), ""
    while True:  # kill once it logged 5 steps past the resume point (past the next checkpoint)
        line = proc.stdout.readline()
        assert line, killed_stdout
        killed_stdout += line
        if line.startswith(f"step {saved + 5}/"):
            break
    proc.send_signal(signal.SIGKILL)
    killed_stdout += proc.stdout.read()
    proc.wait()
    assert not out.exists()  # it really died before the end
    assert f"at step {saved}" in killed_stdout
    final = subprocess.run(
        [sys.executable, __file__, str(wd), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, XLA_FLAGS=xla_flags(1)),
    )
    assert final.returncode == 0, final.stdout + final.stderr
    assert "resumed" in final.stdout, final.stdout
    ref_stdout, _ = ref.communicate(timeout=600)
    assert ref.returncode == 0, ref_stdout
    ref_losses = _step_losses(ref_stdout)
    assert sorted(ref_losses) == list(range(1, 21))
    runs = [_step_losses(s) for s in (term_stdout, killed_stdout, final.stdout)]
    for logged in runs:
        for step, values in logged.items():
            assert set(values) == set(ref_losses[step]), (step, values, ref_losses[step])
    a, b = np.load(tmp_path / "ref.npz"), np.load(out)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)  # params, router biases, rng


def test_throughput_counts_each_step_at_its_own_row_length(monkeypatch):
    """Steps of different row lengths (RL's length buckets): tokens/s and MFU's FLOP/s sum each
    step's own rows x length and FLOPs per token at that length (attention grows with it), over
    the window since the last reset (which the first step's compile is not in)."""
    from model import flops_per_token, presets
    from train import trainer

    clock = iter([0.0, 0.0, 0.0, 10.0, 14.0, 20.0])  # start, reset, reset, row, reset, row
    monkeypatch.setattr(trainer.time, "perf_counter", lambda: next(clock))
    cfg = presets.get("tiny")
    per_token = lambda t: flops_per_token(cfg, t)  # noqa: E731
    timer = trainer._Throughput(0, per_token)
    timer.add(16, 2048)  # the first step (its compile): reset away below
    timer.reset(1)
    timer.add(16, 256)
    timer.add(16, 1024)
    row = timer.row(3, 10)  # 2 steps in 10 s
    assert row["step_time_s"] == 5.0 and row["tokens_per_s"] == 16 * (256 + 1024) / 10
    want = 16 * (256 * per_token(256) + 1024 * per_token(1024)) / 10
    assert row["flops_per_s"] == pytest.approx(want, rel=1e-12)
    assert per_token(1024) > per_token(256)  # why a fixed length's FLOPs would be wrong
    timer.reset(3)
    timer.add(16, 512)
    assert timer.row(4, 10)["tokens_per_s"] == 16 * 512 / 6


def _script(workdir, out):
    """Subprocess body: 20 steps (logs sleep a little, so signals land mid-run), checkpoints every
    5, on one device."""
    from train import trainer

    def slow_log(line):
        print(line, flush=True)
        time.sleep(0.05)

    config = tiny_run_config(steps=20, every=5)
    config.mesh.data = 1
    state = trainer.train(config, workdir, log=slow_log)
    if int(state.step) < config.train.steps:
        return  # preempted
    flat = {
        jax.tree_util.keystr(p): np.asarray(x)
        for p, x in jax.tree_util.tree_leaves_with_path(jax.device_get(state.params))
    }
    flat["rng"] = np.asarray(jax.device_get(state.rng))
    np.savez(out, **flat)


if __name__ == "__main__":
    _script(sys.argv[1], sys.argv[2])
