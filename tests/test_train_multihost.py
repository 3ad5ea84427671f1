"""Two CPU processes on localhost (jax.distributed, gloo collectives, 2 devices each) train,
save, are restarted, restore and finish; the result matches one process with 4 devices.

Run as a script, this file is one worker:  python tests/test_train_multihost.py PORT N ID WORKDIR OUT STOP
"""

import os
import socket
import subprocess
import sys

import numpy as np

_TESTS = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_TESTS)
STEPS = 6


def _worker(port, num_processes, process_id, workdir, out, stop_after):
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
    from test_train_standin import STANDIN_RULES, standin_handle, tiny_run_config

    from train import loop

    assert jax.device_count() == 4 and jax.local_device_count() == 4 // num_processes
    config = tiny_run_config(steps=STEPS, every=3, log_every=3)
    state = loop.train(
        config,
        workdir,
        handle=standin_handle(),
        rules=STANDIN_RULES,
        log=lambda l: print(f"[{process_id}] {l}", flush=True),
        stop_after_steps=stop_after or None,
    )
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


def _launch(n, workdir, out, stop_after):
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
                str(stop_after),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(n)
    ]


def _finish(procs, timeout=150):
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


def test_two_processes_save_restore_and_match_one_process(tmp_path):
    single = _launch(1, tmp_path / "single", tmp_path / "single.npz", 0)
    first = _launch(2, tmp_path / "multi", tmp_path / "first.npz", 3)  # stops (and saved) at step 3
    _finish(first)
    assert np.load(tmp_path / "first.npz")["step"] == 3
    assert sorted(os.listdir(tmp_path / "multi" / "checkpoints" / "3" / "data")) == [
        "commit_success.txt",
        "process_0-of-2.json",
        "process_1-of-2.json",
    ]
    outs = _finish(_launch(2, tmp_path / "multi", tmp_path / "multi.npz", 0))
    assert all("resumed" in o and "at step 3" in o for o in outs), outs[0][-2000:]
    _finish(single)
    a, b = np.load(tmp_path / "single.npz"), np.load(tmp_path / "multi.npz")
    assert int(a["step"]) == int(b["step"]) == STEPS
    for k in a.files:
        # Same rows per global batch, in another order across hosts: equal up to summation order.
        np.testing.assert_allclose(a[k], b[k], atol=1e-6, err_msg=k)


if __name__ == "__main__":
    port_, n_, id_, workdir_, out_, stop_ = sys.argv[1:]
    _worker(int(port_), int(n_), int(id_), workdir_, out_, int(stop_))
