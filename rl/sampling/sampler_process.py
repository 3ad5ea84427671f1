"""The sampler role: pool tasks -> groups of episode records in the rollout store, with the newest
params from the weight store swapped in flight.

    sampler_loop(config, workdir, sampler_id)          # one sampler (a thread or a process)
    python -m rl.sampling.sampler_process WORKDIR ID PARENT_PID  # a sampler process
                                                                   (reads rl_config.json)

`rl.task`: a name registered in rl/sampling/rl_tasks.py ('pattern', 'summary_toy', 'coding'), which
makes the pool's tasks and the sampler. Sampler i produces the pool positions j with
j % rl.samplers == i, `rl.groups_per_call` groups per play call, and skips groups whose file
exists (a restarted sampler never repeats one). Backpressure: it writes a play call's groups only
while they and the groups the trainer has not settled stay within `rl.max_ahead` (may_produce). With
`rl.synchronous` it starts the groups of batch b only once the trainer has published version b, so
no weight changes during sampling and a run is deterministic given its seed (one sampler): the mode
that compares meshes step for step.

A sampler process exits when its parent (the trainer process) is gone; the trainer restarts a
sampler process that died before its share was done (Samplers.revive, at most MAX_RESTARTS times).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
import time
import traceback

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from rl.episodes import timeline
from rl.sampling.curriculum import Curriculum
from rl.sampling.rl_tasks import coding_pool, rl_task  # noqa: F401  (coding_pool: tests, benches)
from rl.sampling.run_config import model_config
from rl.sampling.samplers import acceptance
from rl.stores.store import RolloutStore, rollout_store_path
from rl.stores.weight_store import Follower, WeightReader, weight_store_path
from train.model_config import model_rules


def make_task(rl, j: int):
    """Task j of the pool (rl/sampling/rl_tasks.py: the task registered as rl.task)."""
    return rl_task(rl.task).make_task(rl, j)


def sampler_devices(rl) -> list | None:
    """The devices a sampler's engine spans (rl.sampler_devices): None (0) = one device,
    unsharded; N = the last N local devices beside a trainer in the same process (threads), or
    the first N of a sampler process's own."""
    n = rl.sampler_devices
    if not n:
        return None
    devices = jax.local_devices()
    if not 0 < n <= len(devices):
        raise ValueError(f"rl.sampler_devices={n}: this process has {len(devices)} devices")
    return devices[-n:] if rl.mode == "threads" else devices[:n]


def sampler_mesh(rl):
    """The samplers' own mesh (rl.sampler_mesh sizes over sampler_devices), or None."""
    from model.sharding import role_mesh

    devices = sampler_devices(rl)
    return None if devices is None else role_mesh(dict(rl.sampler_mesh), devices)


def make_sampler(rl, cfg, mesh=None, rules=None):
    """The task's sampler; `mesh` / `rules`: its engine's own mesh (None: one device)."""
    return rl_task(rl.task).make_sampler(rl, cfg, mesh, rules)


def to_engine(params, sharded: bool = False):
    """Fetched params as the engine takes them: device arrays in the store's dtype (the engine
    casts them to its decode dtype on their devices: model.decode.decode_params); a sharded
    engine's come fetched onto its mesh already."""
    if sharded:
        return params
    return jax.tree.map(jnp.asarray, params)


def curriculum_of(rl) -> Curriculum:
    c = rl.curriculum
    return Curriculum(c.key, c.after, c.prob, rl.seed)


def may_produce(listed: int, progress: dict, rl, first: int, n: int) -> bool:
    """Backpressure: whether a sampler may write the n groups of its next play call (pool
    positions from `first`), given `listed` groups in the store and the trainer's progress.
    Asynchronous: the groups not yet settled by the trainer (rl/learning/batch_source.py's
    progress_of: unread or read and waiting for a batch) plus these n stay <= rl.max_ahead; with
    several samplers two may pass at once (up to (samplers - 1) x groups_per_call more).
    Synchronous mode: batch `first // groups_per_batch` is sampled only with the params of that
    many steps."""
    if rl.synchronous:
        return progress.get("version", -1) >= first // rl.groups_per_batch
    return listed - progress.get("consumed", 0) + n <= rl.max_ahead


def _wait_for_trainer(store, rl, first: int, n: int, alive) -> None:
    """Waits until `may_produce` (bounded work ahead of the trainer keeps staleness low)."""
    while alive():
        if may_produce(len(store.list()), store.progress(), rl, first, n):
            return
        time.sleep(0.02)


def log_play(sampler_id: int, groups: int, seconds: float, counts: dict, version: int) -> None:
    """A sampler's step log: one line per play call (version: the newest params it sampled with)."""
    acc = acceptance(counts)
    spec = "".join(f", {k.split('/')[1]} {v:.3f}" for k, v in acc.items())
    print(
        f"sampler {sampler_id}: {groups} groups in {seconds:.2f} s at version {version}, "
        f"{counts.get('tokens', 0)} tokens{spec}",
        flush=True,
    )


def sampler_loop(
    config,
    workdir: str,
    sampler_id: int,
    stop: threading.Event | None = None,
    parent_pid: int | None = None,
) -> int:
    """Produces this sampler's share (positions j % N == id) of the pool; -> groups written."""

    rl = config.rl
    cfg = model_config(config)
    mesh = sampler_mesh(rl)
    store = RolloutStore(rollout_store_path(rl, workdir))
    with open(os.path.join(workdir, "pool.json")) as f:
        order = json.load(f)["order"]
    rules = model_rules(config)
    # A sharded engine fetches only the slices its own devices hold (the store's resharding
    # fetch onto the stacked params' shardings on the sampler mesh; set_params then splits them
    # per layer in place); an unsharded one fetches whole arrays.
    shardings = None
    if mesh is not None:
        from model import param_logical_specs
        from model.sharding import logical_shardings

        shardings = logical_shardings(param_logical_specs(cfg), mesh, rules)
    cast = functools.partial(to_engine, sharded=mesh is not None)
    # a sampler thread (threads mode) records as itself; a sampler process for all its threads
    timeline.start(workdir, f"sampler{sampler_id}", thread_only=parent_pid is None)
    reader = WeightReader(weight_store_path(rl, workdir))
    prefetch = rl.prefetch_weights  # download while the engine decodes
    follower = Follower(reader, cast=cast, shardings=shardings, prefetch=prefetch)
    sampler = make_sampler(rl, cfg, mesh, rules)
    have = set(store.list())
    todo = [
        j for j in range(len(order)) if j % rl.samplers == sampler_id and f"{j:06d}" not in have
    ]
    written = 0

    def alive():
        if stop is not None and stop.is_set():
            return False
        return parent_pid is None or os.getppid() == parent_pid

    cur = curriculum_of(rl)
    try:
        for c in range(0, len(todo), rl.groups_per_call):
            chunk = todo[c : c + rl.groups_per_call]
            t0 = time.perf_counter()
            with timeline.span("wait_trainer"):
                _wait_for_trainer(store, rl, chunk[0], len(chunk), alive)
            waited = time.perf_counter() - t0
            if not alive():
                break
            tasks = {j: make_task(rl, order[j]) for j in chunk}
            for j in [j for j in chunk if cur.skip(tasks[j], order[j])]:
                store.put(f"{j:06d}", [])  # skipped: counted by the trainer, never trained
                written += 1
                del tasks[j]
            if tasks:
                call = dict(
                    sampler_id=sampler_id, seed=rl.seed * 1_000_003 + chunk[0], waited=waited
                )
                written += _play_and_put(sampler, follower, store, cur, tasks, order, call)
    finally:
        follower.close()
        timeline.stop()
    return written


def _play_and_put(sampler, follower, store, cur, tasks: dict, order, call: dict) -> int:
    """One play call on `tasks` ({pool position: task}) -> groups in the store, each record with
    its group's share of the call's wall time (sample_seconds), decode counters (`decode`) and
    timing (`timing`: wait_trainer_s before it, generate_s, sandbox_wait_s inside it; the
    trainer's idle/sampler); one log line. -> groups written."""
    # a stand-in sampler (tests) may keep no decode counters
    before = dict(getattr(sampler, "counters", {}))
    sandbox0 = getattr(sampler, "sandbox_wait_s", 0.0)
    t0 = time.perf_counter()
    with timeline.span("generate", groups=len(tasks)):
        groups = sampler.play(list(tasks.values()), follower, seed=call["seed"])
    secs = time.perf_counter() - t0
    counts = {k: v - before[k] for k, v in getattr(sampler, "counters", {}).items()}
    timing = dict(
        wait_trainer_s=call["waited"],
        generate_s=secs,
        sandbox_wait_s=getattr(sampler, "sandbox_wait_s", 0.0) - sandbox0,
    )
    newest = max(
        (int(np.max(r.get("versions", []), initial=-1)) for g in groups for r in g), default=-1
    )
    log_play(call["sampler_id"], len(groups), secs, counts, newest)
    n = len(groups)
    with timeline.span("put_groups", groups=n):
        for (j, task), g in zip(tasks.items(), groups):
            for r in g:
                r["group_id"], r["task"] = f"{j:06d}", order[j]
                r["sample_seconds"] = secs / n
                # the call's counters and times, each group's share (counted once per group)
                r["decode"] = {k: v / n for k, v in counts.items()}
                r["timing"] = {k: v / n for k, v in timing.items()}
            store.put(f"{j:06d}", g)
            cur.record(task, g)
    return n


def compile_cache(path: str) -> None:
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


MAX_RESTARTS = 3  # per sampler process and run


class Samplers:
    """rl.samplers sampler threads (rl.mode='threads': tests, notebooks) or processes
    ('processes'); `stop()` ends them."""

    def __init__(self, config, workdir: str):
        rl = config.rl
        self.stop_event = threading.Event()
        if rl.mode == "threads":
            self.errors: list[str | None] = [None] * rl.samplers
            self.workers = [
                threading.Thread(target=self._thread_main, args=(config, workdir, i), daemon=True)
                for i in range(rl.samplers)
            ]
            for t in self.workers:
                t.start()
        elif rl.mode == "processes":
            self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
            self.cmd = [sys.executable, "-m", "rl.sampling.sampler_process", workdir]
            self.workers = [self._spawn(i) for i in range(rl.samplers)]
            self.restarts = [0] * rl.samplers
        else:
            raise ValueError(f"rl.mode={rl.mode!r}: expected 'threads' or 'processes'")

    def _thread_main(self, config, workdir: str, i: int) -> None:
        """A sampler thread; what kills it is kept for `revive` to raise (a dead thread must not
        leave the trainer polling the store for groups that never come)."""
        try:
            sampler_loop(config, workdir, i, self.stop_event)
        except Exception as e:
            traceback.print_exc()  # the whole story on stderr; revive raises the one line
            self.errors[i] = f"{type(e).__name__}: {e}"

    def _spawn(self, i: int) -> subprocess.Popen:
        return subprocess.Popen(self.cmd + [str(i), str(os.getpid())], env=self.env)

    def revive(self, log) -> None:
        """Processes mode: restarts a sampler process that died before its share was done
        (killed, crashed: exit status not 0); the new one skips the groups already in the store,
        so none is lost or sampled twice. A sampler that keeps dying is an error, not a loop.
        Threads mode: a sampler thread that raised is an error naming the exception."""
        for i, w in enumerate(self.workers):
            if isinstance(w, threading.Thread):
                if self.errors[i] is not None:  # threads mode: no restart, the error is the bug
                    raise RuntimeError(f"rl: sampler thread {i} died: {self.errors[i]}")
                continue
            if w.poll() in (None, 0):
                continue
            if self.restarts[i] >= MAX_RESTARTS:
                raise RuntimeError(
                    f"rl: sampler process {i} exited with {w.returncode} after "
                    f"{MAX_RESTARTS} restarts (see its output above)"
                )
            self.restarts[i] += 1
            log(f"rl: sampler process {i} exited with {w.returncode}; restarting it")
            self.workers[i] = self._spawn(i)

    def stop(self) -> None:
        self.stop_event.set()
        for w in self.workers:
            if isinstance(w, subprocess.Popen):
                w.terminate()
                w.wait()
            else:
                w.join(timeout=60)


def main(argv) -> None:
    """python -m rl.sampling.sampler_process WORKDIR ID PARENT_PID"""
    workdir, sid, ppid = argv[0], int(argv[1]), int(argv[2])
    with open(os.path.join(workdir, "rl_config.json")) as f:
        config = ml_collections.ConfigDict(json.load(f))
    if config.rl.compile_cache:
        compile_cache(config.rl.compile_cache)
    sampler_loop(config, workdir, sid, parent_pid=ppid)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m rl.sampling.sampler_process WORKDIR ID PARENT_PID")
    main(sys.argv[1:])
