"""Snapshots of an episode mid-way, and K rollouts branched from one (best-of-K from a shared
prefix, without replaying it).

    snap = snapshot(env)                  # the sandbox's files + the episode's token state, now
    envs = branch(snap, k=4, make_env)    # 4 envs, each continuing from exactly that state
    for e in envs: obs, done = e.step(emitted) ...
    snap.close()

A snapshot holds files only (process memory is not kept: every tool call is a fresh process, so
there is nothing else to keep) and the environment's episode state (record, task, counters). The
files are copied once into a private host directory, and each branch copies them into a fresh
Sandbox (its own uid, cgroup and tmpfs). Copies use copy_file_range, which shares blocks
(copy-on-write) on file systems with reflinks (btrfs, XFS) and is a plain in-kernel copy elsewhere
(tmpfs, ext4). A branch is the same episode as a fresh one replayed to the same state
(tests/test_envs_repos.py checks token ids and grades). The rollout driver uses it for best-of-K
from a shared mid-episode prefix (rl/sampling/rollout.py `prefix_turns`,
rl.coding.shared_prefix_turns).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable

from rl.envs.agent.env import CodingEnv
from rl.envs.grading.tasks import deps_of
from rl.envs.isolation.sandbox import Sandbox, cow_copy


def copy_tree(src: str, dst: str) -> None:
    shutil.copytree(src, dst, symlinks=True, copy_function=cow_copy)


@dataclasses.dataclass
class Snapshot:
    directory: str  # host copy of the repo (root-only)
    state: dict  # the env's episode state (deep copies)
    seconds: float  # time taken to snapshot

    def close(self) -> None:
        shutil.rmtree(os.path.dirname(self.directory), ignore_errors=True)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_STATE = (
    "task",
    "_record",
    "_extra",
    "_summary_requested",
    "_prefix_len",
    "segment_start",
    "_report",
)


def snapshot(env: CodingEnv) -> Snapshot:
    """The episode in progress in `env` (between steps), which goes on unaffected."""
    if env.sandbox is None or env._record is None or env._record.done_reason:
        raise RuntimeError("snapshot() needs an episode in progress (after reset, before the end)")
    t0 = time.monotonic()
    base = tempfile.mkdtemp(prefix="rl-snapshot-")
    os.chmod(base, 0o700)
    directory = os.path.join(base, "repo")
    copy_tree(env.sandbox.root, directory)
    state = {name: copy.deepcopy(getattr(env, name)) for name in _STATE}
    return Snapshot(directory, state, time.monotonic() - t0)


def restore(env: CodingEnv, snap: Snapshot) -> CodingEnv:
    """Puts `env` (any idle CodingEnv with the same settings) at the snapshot's state."""
    env.close()
    env.grade = None
    for name, value in snap.state.items():
        setattr(env, name, copy.deepcopy(value))
    env.sandbox = Sandbox(snap.directory, limits=env.limits, test_deps=deps_of(env.task))
    return env


def branch(snap: Snapshot, k: int, make_env: Callable[[], CodingEnv]) -> list[CodingEnv]:
    """K environments, each restored to the snapshot (independent sandboxes)."""
    if k < 1:
        raise ValueError(f"branch: k={k} must be >= 1")
    envs: list[CodingEnv] = []
    try:
        for _ in range(k):
            envs.append(restore(make_env(), snap))
    except BaseException:
        for env in envs:  # no sandbox left behind
            env.close()
        raise
    return envs
