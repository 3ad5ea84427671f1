"""Two CPU processes on localhost (jax.distributed, gloo collectives, 2 devices each) train the
real tiny preset (MoE + router-bias updates + MTP); SIGTERM to both: they agree on a step (JAX's
preemption sync point), both save it and exit cleanly; restarted, they restore and finish, and the
result matches one process with 4 devices. One test: each launch pays process start-up and
compilation, so the preemption and the restore share their runs.

Run as a script, this file is one worker:  python tests/test_train_multihost.py PORT N ID WORKDIR
OUT
"""

import glob
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_TESTS)
STEPS = 16  # enough that SIGTERM, sent after the step-3 checkpoint, lands mid-run


def _worker(port, num_processes, process_id, workdir, out):
    import jax

    if num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=f"localhost:{port}",
            num_processes=num_processes,
            process_id=process_id,
        )
    sys.path[:0] = [_ROOT, _TESTS]
    from jax.experimental import multihost_utils
    from test_train_loop import tiny_run_config

    from train import trainer

    assert jax.device_count() == 4 and jax.local_device_count() == 4 // num_processes

    def log(line):
        print(f"[{process_id}] {line}", flush=True)
        time.sleep(0.05)  # slow enough for the signal to land mid-run

    config = tiny_run_config(steps=STEPS, every=3, log_every=1)
    # Hosts hold other rows, so sums run in another order; eps = 1e-6 keeps Adam from magnifying
    # that for coordinates whose gradient is ~0 (lr * 1e-9 / eps), so the comparison tests hosts.
    config.train.eps = 1e-6
    state = trainer.train(config, workdir, log=log)
    if int(state.step.addressable_data(0)) < STEPS:
        return  # preempted
    params = multihost_utils.process_allgather(
        state.params, tiled=True
    )  # global arrays on every host
    if process_id == 0:
        np.savez(
            out,
            step=np.asarray(state.step.addressable_data(0)),
            **{
                jax.tree_util.keystr(p): np.asarray(x)
                for p, x in jax.tree_util.tree_leaves_with_path(params)
            },
        )


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(n, workdir, out):
    port = _free_port()
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={4 // n}",
    )
    return [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                str(port),
                str(n),
                str(i),
                str(workdir),
                str(out),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(n)
    ]


def _finish(procs, timeout=600):
    outs = []
    for p in procs:
        try:
            stdout, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(stdout)
        assert p.returncode == 0, stdout[-4000:]
    return outs


def _wait_for_checkpoint(workdir, procs, timeout=600):
    t0 = time.time()
    while not glob.glob(str(workdir / "checkpoints" / "*" / "commit_success.txt")):
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.time() - t0 > timeout:
            for q in procs:
                q.kill()
            tails = [p.communicate()[0][-2000:] for p in procs]  # why it died (e.g. a timeout)
            pytest.fail(f"no checkpoint after {time.time() - t0:.0f} s; output tails: {tails}")
        time.sleep(0.05)


@pytest.mark.long  # ~80 s: two processes train, save on SIGTERM, restore, vs one process
def test_sigterm_save_restore_on_two_processes_matches_one_process(tmp_path):
    """Preempted (SIGTERM to both processes after the first checkpoint), restarted, run to the end:
    the result equals one process with 4 devices run straight through."""
    procs = _launch(2, tmp_path / "multi", tmp_path / "multi.npz")
    _wait_for_checkpoint(tmp_path / "multi", procs)
    for p in procs:  # a scheduler preempting the job signals every task
        p.send_signal(signal.SIGTERM)
    outs = _finish(procs)
    saved = [int(o.split("preempted: saved step ")[1].split(",")[0]) for o in outs]
    assert saved[0] == saved[1] < STEPS, saved  # one step both processes agreed on
    ckpt = tmp_path / "multi" / "checkpoints" / str(saved[0])
    assert (ckpt / "state" / "commit_success.txt").exists() or (
        ckpt / "commit_success.txt"
    ).exists()
    assert sorted(os.listdir(ckpt / "data")) == [  # each process's data-iterator state
        "commit_success.txt",
        "process_0-of-2.json",
        "process_1-of-2.json",
    ]
    assert not (tmp_path / "multi.npz").exists()
    outs = _finish(_launch(2, tmp_path / "multi", tmp_path / "multi.npz"))
    assert all("resumed" in o and f"at step {saved[0]}" in o for o in outs), outs[0][-2000:]
    # The one-process reference runs after, not beside, the two-process runs: a third compiling
    # process can delay one peer past gloo's fixed 30 s rendezvous deadline on a loaded machine.
    _finish(_launch(1, tmp_path / "single", tmp_path / "single.npz"))
    a, b = np.load(tmp_path / "single.npz"), np.load(tmp_path / "multi.npz")
    assert int(a["step"]) == int(b["step"]) == STEPS
    for k in a.files:
        # Same rows per global batch, in another order across hosts: equal up to summation order.
        np.testing.assert_allclose(a[k], b[k], atol=1e-5, err_msg=k)


if __name__ == "__main__":
    port_, n_, id_, workdir_, out_ = sys.argv[1:6]
    _worker(int(port_), int(n_), int(id_), workdir_, out_)
