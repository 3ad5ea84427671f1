"""The asynchronous RL loop (the one trainer + RL batch source) on the real tiny preset: it
learns a toy task on a 4-device fsdp mesh (threads); a synchronous run gives the same rewards on 1
and 4 devices; two trainer processes (jax.distributed) with two sampler processes train in
lockstep, update weights in flight, bound staleness and survive SIGKILL with no group trained
twice or lost.

The loop tests pay the XLA compilation of the engine and the RL step (tens of seconds on a loaded
2-core machine).
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from s3_fixture import s3_server  # noqa: F401 (the session fixture)
from xla_env import xla_flags

from configs import rl as rl_config
from rl.learning import batch_source, loop
from rl.stores.store import RolloutStore
from train import trainer


def _policy_versions(store):
    for g in store.list():
        for r in store.get(g):
            yield r["versions"][r["mask"] > 0]


def _sharded_params_in_checkpoint(workdir) -> list[str]:
    """The partition specs Orbax recorded for the newest checkpoint's params (its _sharding file:
    base64 key per array -> JSON with the mesh shape and PartitionSpec)."""
    import base64

    ckpts = os.path.join(workdir, "checkpoints")
    newest = max(int(d) for d in os.listdir(ckpts) if d.isdigit())
    with open(os.path.join(ckpts, str(newest), "state", "_sharding")) as f:
        table = json.load(f)
    specs = []
    for key, value in table.items():
        name, meta = base64.b64decode(key).decode(), json.loads(value)
        if name.startswith("params."):
            assert meta["shape"] == [1, 4, 1, 1, 1], meta["shape"]  # (data, fsdp, .., context)
            specs.append(str(meta["partition_spec"]))
    return specs


@pytest.mark.slow
def test_toy_task_reward_rises_on_a_4_device_mesh(tmp_path):
    """The RL trainer on mesh data=1 x fsdp=4 (the README's --config.mesh.fsdp=4 run, in-process
    with trainer_devices=4): reward 0.1 -> >= 0.8, and its checkpoint holds sharded params.
    30 steps at lr 6e-3 (the README run: 64 at 3e-3): the mean reward of the last three steps
    was 0.98-1.00 in two runs (0.8 at step ~20), of the first three 0.09; with the policy
    gradient zeroed it stays ~0.1."""
    c = rl_config.get_config()
    c.rl.update(pool_size=120, samplers=1, mode="threads", max_staleness=3)
    c.train.lr = 6e-3
    c.mesh.update(data=1, fsdp=4)
    c.trainer_devices = 4
    stamps = []
    out = loop.train(c, str(tmp_path), log=lambda s: stamps.append(time.time()))
    h = out["history"]
    first = np.mean([x["reward/mean"] for x in h[:3]])
    last = np.mean([x["reward/mean"] for x in h[-3:]])
    assert first <= 0.2, first
    assert last >= 0.8, last
    assert max(x["staleness/max"] for x in h) <= 3
    # In-flight updates: some episode's tokens were produced by more than one params version.
    store = RolloutStore(str(tmp_path / "rollouts"))
    assert any(len(set(v.tolist())) > 1 for v in _policy_versions(store))
    books = out["books"]
    assert sorted(books.consumed + books.dropped) == [f"{j:06d}" for j in range(120)]
    specs = _sharded_params_in_checkpoint(str(tmp_path))
    assert sum("fsdp" in s for s in specs) >= len(specs) // 2, specs  # most params over fsdp
    leaf = out["state"].params["embed"]
    assert len(leaf.sharding.device_set) == 4 and "fsdp" in str(leaf.sharding.spec)
    # An RL checkpoint is a pretraining checkpoint: --mode=convert exports it as it is.
    import jax

    from model import export
    from train import convert

    path = convert.export_latest(loop.resolve(c), str(tmp_path))
    got = export.load_params(path)[1]
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(out["state"].params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ~32 s of CPU (two RL runs): -m long for the suite's budget. In the default run its parts stay
# checked: the 4-device RL trainer learns (test_toy_task_reward_rises_on_a_4_device_mesh), a sharded
# train step equals one device (tests/test_train_sharding.py::
# test_real_model_tiny_sharded_step_matches_single_device) and a tensor x expert engine decodes as
# one device (tests/test_engine_sharding.py::test_sharded_decode_equals_single_device).
@pytest.mark.long
def test_one_device_and_four_device_trainers_give_the_same_rewards(tmp_path):
    """rl.synchronous (batch b sampled with step b's params): a trainer on 1 device with an
    unsharded sampler, and a trainer on a 4-device fsdp mesh (devices 0-3) with the sampler's
    engine sharded tensor 2 x expert 2 over devices 4-7 (one mesh per role, one process), produce
    the same rewards step for step (float32; params and logprobs equal to float tolerance, so the
    same samples are drawn). The KL term is on (beta 0.1), so the reference pre-step runs on
    both meshes too."""
    rewards, losses = {}, {}
    for n in (1, 4):
        c = rl_config.get_config()
        c.rl.update(pool_size=16, groups_per_call=4, synchronous=True, kl_beta=0.1)
        c.mesh.update(data=1, fsdp=n)
        c.trainer_devices = n
        if n == 4:
            c.rl.update(sampler_devices=4)
            c.rl.sampler_mesh.update(data=1, fsdp=1, expert=2, tensor=2)
        out = loop.train(c, str(tmp_path / f"d{n}"), log=lambda *_: None)
        h = out["history"]
        rewards[n], losses[n] = [x["reward/mean"] for x in h], [x["loss"] for x in h]
        assert all(x["staleness/max"] == 0 for x in h)  # on-policy, step for step
        # The KL reference (a jitted pre-step on the trainer's mesh) is the initial policy: the
        # k1 estimate is 0 at step 1 (policy == reference), not after updates.
        assert abs(h[0]["kl_k1"]) < 1e-6 and abs(h[-1]["kl_k1"]) > 1e-6, (h[0], h[-1])
    assert len(rewards[1]) == 4  # 4 steps (16 groups / 4): enough to compare (it took 6)
    np.testing.assert_allclose(rewards[4], rewards[1], atol=1e-6)
    np.testing.assert_allclose(losses[4], losses[1], rtol=1e-4, atol=1e-6)
    assert len(set(rewards[1])) > 1  # the rewards moved: the comparison is not trivially equal


def _journal(workdir):
    with open(os.path.join(workdir, "journal.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch_trainers(cmd, logs):
    """Two trainer processes (jax.distributed on localhost, 2 CPU devices each) -> Popens."""
    port = _free_port()
    env = dict(
        os.environ,
        PYTHONPATH=os.getcwd(),
        JAX_PLATFORMS="cpu",
        # gloo waits 30 s by default for a peer at a collective: a loaded host (one process still
        # compiling) exceeded that twice; XLA:CPU's collective timeout is raised in case it governs
        # gloo's wait here (not shown: the passing runs were at low load)
        XLA_FLAGS=xla_flags(2, "--xla_cpu_collective_timeout_seconds=600"),
    )
    hosts = [f"--coordinator_address=localhost:{port}", "--num_processes=2"]
    return [
        subprocess.Popen(
            cmd + hosts + [f"--process_id={i}"],
            env=env,
            stdout=open(logs[i], "w"),
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]


def _step_losses(log_path) -> dict:
    """{step: loss} from a trainer's progress lines."""
    out = {}
    with open(log_path) as f:
        for line in f:
            words = line.split()
            if len(words) > 3 and words[0] == "step" and words[2] == "loss":
                out[int(words[1])] = float(words[3])
    return out


def _sampler_process(trainer_pid: int, sampler_id: int) -> int:
    """The pid of `python -m rl.sampling.sampler_process WORKDIR ID PPID` among the trainer's
    children."""
    with open(f"/proc/{trainer_pid}/task/{trainer_pid}/children") as f:
        children = [int(c) for c in f.read().split()]
    for pid in children:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")
        if "rl.sampling.sampler_process" in argv and argv[
            argv.index("rl.sampling.sampler_process") + 2
        ] == str(sampler_id):
            return pid
    raise AssertionError(f"no sampler process {sampler_id} under trainer {trainer_pid}")


def _wait_for_steps(workdir, n, trainers, log, seconds=900):
    deadline = time.time() + seconds
    path = os.path.join(workdir, "journal.jsonl")
    while time.time() < deadline:
        if os.path.exists(path) and len(_journal(workdir)) >= n:
            return
        assert all(t.poll() is None for t in trainers), open(log).read()[-3000:]
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} steps in {seconds} s: {open(log).read()[-3000:]}")


@pytest.mark.long  # ~4 min: 4 processes, two kills and restarts, a SeaweedFS server, 40 steps
def test_two_trainer_processes_with_sampler_processes_on_s3_survive_sigkill(
    tmp_path,
    s3_server,  # noqa: F811
):
    """Issue 32's point 6 with the README's multi-host flags: 2 trainer processes (fsdp over all
    4 devices) train in lockstep (the same loss every step on both), with 2 sampler processes on
    their own 2-device meshes (tensor 2) updating weights in flight; both stores (weights and
    rollouts) on the S3 server. SIGKILL of one sampler process: the trainer restarts it and it
    goes on. SIGKILL of one trainer process: its peer is stopped as a cluster scheduler would (a
    jax.distributed job restarts as a whole), then a restart resumes from the last checkpoint:
    no group trained twice or lost, reward rises.

    The pool is 80 groups (40 steps of 2): the toy stays near reward 0.1-0.2 for its first
    ~12-15 steps in every mode (threads, processes, 2 trainer processes) and reaches ~1.0 by step
    ~30 (issue 44; with pool 36, 10-12 trained steps, it rose 0.13 -> 0.17 and failed the check
    in 3 of 3 runs while the processes learned correctly: sampler logprobs matched a replayed
    forward within 9.5e-7). With pool 80 it passed 3 runs of 3 in a row on a quiet 2-core host
    (160-164 s each, 2026-11-28: `pytest -m long` on this test)."""
    workdir = str(tmp_path / "run")
    pool = 80
    stores = {k: json.dumps(s3_server(f"{k}/")) for k in ("weight_store", "rollout_store")}
    cmd = [
        sys.executable,
        "main.py",
        "--mode=rl",
        "--config=configs/rl.py",
        f"--workdir={workdir}",
        "--config.mesh.data=1",
        "--config.mesh.fsdp=4",
        "--config.rl.mode=processes",
        "--config.rl.samplers=2",
        "--config.rl.sampler_devices=2",  # each sampler process's own 2-device mesh
        f"--config.rl.pool_size={pool}",
        "--config.rl.groups_per_batch=2",
        "--config.rl.groups_per_call=2",
        "--config.checkpoint.every_steps=2",
        "--config.train.log_every=1",
        "--config.rl.max_ahead=6",
        "--config.rl.max_staleness=3",
        "--config.train.lr=1e-2",
        f"--config.rl.compile_cache={tmp_path / 'xla'}",
    ] + [f"--config.rl.{k}={v}" for k, v in stores.items()]
    logs = [str(tmp_path / f"first_{i}.log") for i in range(2)]
    trainers = _launch_trainers(cmd, logs)
    _wait_for_steps(workdir, 3, trainers, logs[0])
    os.kill(_sampler_process(trainers[0].pid, 1), signal.SIGKILL)
    _wait_for_steps(workdir, 6, trainers, logs[0])
    assert "sampler process 1 exited with -9; restarting it" in open(logs[0]).read()
    trainers[1].send_signal(signal.SIGKILL)
    try:  # its peer fails at the next collective, or the scheduler (here: the test) stops it
        trainers[0].wait(timeout=30)
    except subprocess.TimeoutExpired:
        trainers[0].send_signal(signal.SIGKILL)
    for t in trainers:
        t.wait()
    before = _journal(workdir)
    assert len(before) >= 6
    first = [_step_losses(p) for p in logs]
    # lockstep: equal losses on every step both logged (the killed process may miss the last one)
    common = sorted(first[0].keys() & first[1].keys())
    assert len(common) >= 5 and [first[0][s] for s in common] == [first[1][s] for s in common]
    # Restart: resumes from the last checkpoint (steps after it are lost and retrained once).
    logs = [str(tmp_path / f"second_{i}.log") for i in range(2)]
    trainers = _launch_trainers(cmd, logs)
    for t in trainers:
        assert t.wait(timeout=600) == 0, open(logs[0]).read()[-3000:]
    out = [open(p).read() for p in logs]
    assert "resumed from" in out[0] and "resumed from" in out[1]
    second = [_step_losses(p) for p in logs]
    assert second[0] == second[1] and len(second[0]) >= 5  # lockstep: one loss per step
    after = _journal(workdir)
    steps = [e["step"] for e in after]
    assert steps == list(range(1, len(steps) + 1))
    trained = [g for e in after for g in e["groups"]]
    assert len(trained) == len(set(trained)), "a group was trained twice"
    dropped_line = [ln for ln in out[0].splitlines() if "groups dropped" in ln][0]
    n_dropped = int(dropped_line.split("groups dropped")[0].split(",")[-1].split()[0])
    assert len(trained) + n_dropped == pool, "a group was lost"
    assert max(s for e in after for s in e["staleness"]) <= 3
    store = RolloutStore(stores["rollout_store"])
    assert store.list() == [f"{j:06d}" for j in range(pool)]  # every group, on S3
    assert not os.path.exists(os.path.join(workdir, "rollouts"))  # nothing went to the workdir
    versions = list(_policy_versions(store))
    assert any(len(set(v.tolist())) > 1 for v in versions)  # in-flight updates in processes
    assert max(int(v.max()) for v in versions) >= 5  # versions advanced during sampling
    rewards = {g: np.mean([r["reward"] for r in store.get(g)]) for g in store.list()}
    by_step = [np.mean([rewards[g] for g in e["groups"]]) for e in after]
    # reward rises: ~0.1-0.2 over the first steps, most of the way to 1 by the last
    assert np.mean(by_step[-4:]) > max(0.5, np.mean(by_step[:4]) + 0.25), by_step


def test_max_seconds_stops_the_trainer_between_steps(tmp_path):
    """train.max_seconds: no step starts after the budget; the run ends with a checkpoint."""
    c = rl_config.get_config()
    c.rl.update(pool_size=64, groups_per_batch=2, group_size=4, samplers=0)  # no sampler needed
    c.train.max_seconds = 1e-3
    out = loop.train(c, str(tmp_path / "rl"), log=lambda *_: None)
    assert out["history"] == [] and int(out["state"].step) == 0
    assert len(out["books"].consumed) == 0


def test_rl_starts_from_exported_params(tmp_path):
    """--config.init_params_from=<exported params>: the model config and params come from there."""
    import jax

    from model import export, init_params, presets

    cfg = presets.get("tiny")
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(3)))
    export.save_params(str(tmp_path / "p"), cfg, params)
    c = rl_config.get_config()
    c.model = "no-such-preset"  # ignored: exported params win
    c.init_params_from = str(tmp_path / "p")
    got_cfg = loop.model_config(c)
    assert got_cfg.hidden_size == cfg.hidden_size and got_cfg.num_moe_layers == cfg.num_moe_layers
    got = trainer.host_params(c, got_cfg)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_run_waiting_for_a_batch_ends_at_its_budget_and_on_sigterm(tmp_path):
    """No batch comes (here: no samplers; in a real run: every group tied under dynamic
    sampling): the trainer's wait ends when train.max_seconds is spent, and on SIGTERM, with a
    checkpoint, instead of polling until the pool is used up."""
    import faulthandler
    import threading

    faulthandler.dump_traceback_later(300, exit=True)  # a wait that never ends fails, not hangs
    try:
        c = rl_config.get_config()
        c.rl.update(pool_size=64, groups_per_batch=2, group_size=4, samplers=0)
        c.train.max_seconds = 15.0  # spent while the first batch is awaited
        t0 = time.monotonic()
        out = loop.train(c, str(tmp_path / "budget"), log=lambda *_: None)
        assert out["history"] == [] and time.monotonic() - t0 < 120
        assert os.listdir(tmp_path / "budget" / "checkpoints") == ["0"]
        c.train.max_seconds = 0.0
        said, before = [], signal.getsignal(signal.SIGTERM)

        def sigterm_once_the_loop_handles_it():  # the trainer installs its handler at the loop
            while signal.getsignal(signal.SIGTERM) is before:
                time.sleep(0.1)
            time.sleep(1.0)  # inside the wait for the first batch
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=sigterm_once_the_loop_handles_it, daemon=True).start()
        out = loop.train(c, str(tmp_path / "sigterm"), log=said.append)
        assert out["history"] == [] and any("preempted while waiting" in s for s in said), said
        assert os.listdir(tmp_path / "sigterm" / "checkpoints") == ["0"]
    finally:
        faulthandler.cancel_dump_traceback_later()


class _Store:
    """The rollout store's read side, in memory."""

    def __init__(self):
        self.groups = {}

    def list(self):
        return sorted(self.groups)

    def get(self, g):
        return self.groups[g]


def _group(rewards, version=0):
    return [{"reward": r, "versions": np.array([version]), "mask": np.array([1])} for r in rewards]


def _rl(dynamic):
    import ml_collections

    return ml_collections.ConfigDict(
        dict(groups_per_batch=2, max_staleness=2, dynamic_sampling=dynamic)
    )


def test_dynamic_sampling_fills_batches_with_groups_that_carry_signal():
    rl, store = _rl(True), _Store()
    books = batch_source.Books([f"{j:06d}" for j in range(6)])
    store.groups["000000"] = _group([1.0, 0.0])  # signal
    store.groups["000001"] = _group([0.0, 0.0])  # all equal: no signal
    assert (
        batch_source.select(store, books, rl, 0) is None
    )  # one group with signal: the batch waits
    assert books.consumed == ["000001"] and books.zero_signal == 1
    # The waiting group is not in the checkpoint: a restarted trainer reads it again.
    again = batch_source.Books.from_json(books.to_json())
    assert "000000" not in again.seen and "000001" in again.seen
    store.groups["000002"] = _group([1.0, 1.0])
    store.groups["000003"] = _group([0.0, 1.0])
    recs, ids, stats = batch_source.select(store, books, rl, 0)
    assert ids == ["000000", "000003"] and len(recs) == 4 and stats["zero_signal"] == 2
    store.groups["000004"] = _group([0.0, 1.0], version=0)
    assert batch_source.select(store, books, rl, 3) is None  # 3 versions behind > 2: dropped
    assert books.dropped == ["000004"]
    store.groups["000005"] = _group([1.0, 0.0], version=3)
    recs, ids, stats = batch_source.select(store, books, rl, 3)  # the pool's last batch: one group
    assert ids == ["000005"] and stats == {"staleness": [0], "zero_signal": 0}
    assert not books.unfinished()
    assert sorted(books.consumed + books.dropped) == books.order


class _ProgressStore(_Store):
    """The rollout store in memory, with the trainer's progress (backpressure)."""

    def __init__(self):
        super().__init__()
        self.progress_doc = {"consumed": 0, "version": -1}

    def write_progress(self, doc):
        self.progress_doc = dict(doc)

    def progress(self):
        return dict(self.progress_doc)


def _fast_sampler_slow_trainer(rl, pool: int, attempts_per_step: int = 4):
    """The loop's mechanics alone (a stand-in for the engine and the train step): one sampler
    that could write `attempts_per_step` play calls per train step, and the trainer's side as
    RLBatchSource runs it (select, then after the step or a batchless poll the progress of
    batch_source.progress_of). -> (most groups ever written and not yet settled, books)."""
    from rl.sampling.sampler_process import may_produce

    store, books = _ProgressStore(), batch_source.Books([f"{j:06d}" for j in range(pool)])
    version, nxt, ahead_max = 0, 0, 0
    store.write_progress(batch_source.progress_of(books, version))
    for _ in range(10 * pool):  # rounds; a deadlock runs out of them
        for _ in range(attempts_per_step):  # the sampler, while the step trains
            n = min(rl.groups_per_call, pool - nxt)
            if n and may_produce(len(store.list()), store.progress(), rl, nxt, n):
                for j in range(nxt, nxt + n):  # every third group carries no signal
                    store.groups[f"{j:06d}"] = _group([1.0, 1.0 if j % 3 == 2 else 0.0], version)
                nxt += n
            settled = len(books.consumed) + len(books.dropped)
            ahead_max = max(ahead_max, len(store.list()) - settled)
        sel = batch_source.select(store, books, rl, version)
        if sel is not None:
            version += 1  # the step trains; after_step reports progress
        store.write_progress(batch_source.progress_of(books, version))
        if not books.unfinished() and nxt == pool:
            return ahead_max, books
    raise AssertionError(f"deadlock: {len(books.seen)} of {pool} groups read")


def test_sampler_read_ahead_never_exceeds_max_ahead_untrained_groups():
    """Issue 44: progress counted groups read into the trainer's pending queue as consumed, so a
    fast sampler kept writing: pending grew past max_ahead and staleness dropped groups (12-16 of
    36 in the processes test config). Progress now counts settled groups only: the untrained
    groups stay <= max_ahead, none goes stale, and the smallest max_ahead resolve() allows
    (groups_per_batch + groups_per_call - 1) with dynamic sampling does not deadlock."""
    import ml_collections

    for max_ahead in (3, 6):
        rl = ml_collections.ConfigDict(
            dict(
                groups_per_batch=2,
                groups_per_call=2,
                max_ahead=max_ahead,
                max_staleness=max_ahead // 2,  # the batches max_ahead holds
                dynamic_sampling=True,
                synchronous=False,
            )
        )
        ahead_max, books = _fast_sampler_slow_trainer(rl, pool=48)
        assert ahead_max <= max_ahead, (max_ahead, ahead_max)
        assert books.dropped == [] and sorted(books.consumed) == books.order


def test_max_ahead_below_a_batch_and_a_call_is_a_config_error():
    from model.errors import ConfigError

    c = rl_config.get_config()
    c.rl.update(groups_per_batch=4, groups_per_call=4, max_ahead=6)
    with pytest.raises(ConfigError, match=r"rl.max_ahead=6: must be >= .* = 7"):
        loop.resolve(c)
    c.rl.synchronous = True  # batch b waits for step b: max_ahead is not read
    assert loop.resolve(c).rl.max_ahead == 6


def test_without_dynamic_sampling_zero_signal_groups_are_trained_and_counted():
    rl, store = _rl(False), _Store()
    books = batch_source.Books([f"{j:06d}" for j in range(2)])
    store.groups["000000"] = _group([0.0, 0.0])
    store.groups["000001"] = _group([1.0, 0.0])
    recs, ids, stats = batch_source.select(store, books, rl, 0)
    assert ids == ["000000", "000001"] and stats["zero_signal"] == 1


def test_sampled_tokens_per_second_counts_each_play_call_once():
    """Two groups of 3 episodes from one 3-second play call: each record carries its group's
    1.5 s share; 6 x 10 policy tokens in 3 s of sampling is 20 tokens/s (not 6 x 1.5 s)."""
    recs = [
        {
            "group_id": g,
            "reward": 0.0,
            "reward_terms": {"outcome": 0.0},
            "tokens": [1] * 12,
            "mask": [1] * 10,
            "sample_seconds": 1.5,
        }
        for g in ("000000", "000001")
        for _ in range(3)
    ]
    stats = {"staleness": [0, 0], "zero_signal": 0}
    sync = {"bytes": 1, "seconds": 0.0, "full_bytes": 2}
    m = batch_source.step_metrics(recs, stats, {}, sync, dt=2.0)
    assert m["sampled_tokens_per_s"] == pytest.approx(20.0)
    assert m["trained_tokens_per_s"] == pytest.approx(30.0)


def test_a_sampler_thread_that_dies_is_an_error_not_a_hang(monkeypatch):
    """Threads mode (tests, notebooks): an exception in a sampler thread surfaces at the
    trainer's next poll (Samplers.revive) as one line naming it, instead of the trainer polling
    the store forever for groups that never come."""
    from rl.sampling import sampler_process

    def broken(config, workdir, i, stop):
        raise KeyError("reward_terms")

    monkeypatch.setattr(sampler_process, "sampler_loop", broken)
    config = rl_config.get_config()
    config.rl.mode, config.rl.samplers = "threads", 2
    samplers = sampler_process.Samplers(config, "unused")
    for t in samplers.workers:
        t.join(timeout=10)
    with pytest.raises(RuntimeError, match=r"sampler thread 0 died: KeyError: 'reward_terms'"):
        samplers.revive(print)
