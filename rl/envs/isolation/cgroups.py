"""Per-episode caps on a whole process tree (cgroups) and on the episode directory (tmpfs quota).

RLIMIT_AS and RLIMIT_NPROC bound one process (or one uid); a cgroup bounds the sum over every
process an episode starts, which is what keeps 64 processes x 1 GiB from taking the host down.

- cgroup v2 (one unified hierarchy): a child of this process's cgroup with memory.max (and
  memory.swap.max = 0), pids.max, cpu.max; usable when that cgroup delegates the memory, pids and
  cpu controllers to its children (cgroup.subtree_control), as systemd's Delegate=yes or a
  container with a private cgroup namespace grants.
- cgroup v1 (separate hierarchies, e.g. this dev machine): the same as children of this process's
  cgroup in the memory, pids and cpu hierarchies (memory.limit_in_bytes, pids.max, cfs quota).
- neither (no write access, controllers not delegated): `probe()` says why once and episodes keep
  the per-process rlimits only.

A limit hit is read from the kernel's own counters (memory oom_kill, pids max events), so the
episode's status names it exactly. The command enters the cgroup through a /bin/sh wrapper that
writes its pid to cgroup.procs and execs (no preexec_fn: Popen stays thread-safe).

Disk: the episode base directory is a size-limited tmpfs (root only: mount(2)); without it only
RLIMIT_FSIZE bounds single files. Writing past the quota fails with ENOSPC ("disk" limit).
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
import sys
import time

ROOT = "/sys/fs/cgroup"
_V1 = ("memory", "pids", "cpu")
_CPU_PERIOD_US = 100_000


def _own_path(controller: str | None) -> str | None:
    """This process's cgroup path for a v1 controller, or the v2 path when controller is None."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if (controller is None and names == "") or controller in names.split(","):
                return path
    return None


def _v2_parent() -> str | None:
    """A v2 cgroup whose children get memory, pids and cpu, enabling them if we may."""
    if not os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
        return None
    parent = os.path.join(ROOT, (_own_path(None) or "/").lstrip("/"))
    with open(os.path.join(parent, "cgroup.controllers")) as f:
        if not set(_V1) <= set(f.read().split()):
            return None
    control = os.path.join(parent, "cgroup.subtree_control")
    for attempt in range(2):
        with open(control) as f:
            if set(_V1) <= set(f.read().split()):
                return parent
        if attempt == 0:
            try:
                with open(control, "w") as f:
                    f.write("+memory +pids +cpu")
            except OSError:  # EBUSY: processes live in it (no-internal-process rule); EACCES
                return None
    return None


@functools.cache
def probe() -> tuple[str, str]:
    """('v2' | 'v1' | '', why). Tries to create and remove one child cgroup; says why not, once."""
    try:
        if parent := _v2_parent():
            _try_mkdir([parent])
            return "v2", f"cgroup v2 under {parent}"
        parents = [os.path.join(ROOT, c, (_own_path(c) or "/").lstrip("/")) for c in _V1]
        if all(os.path.isdir(p) for p in parents):
            _try_mkdir(parents)
            return "v1", f"cgroup v1 under {', '.join(parents)}"
        reason = "no cgroup v2 with memory+pids+cpu delegated and no cgroup v1 hierarchies"
    except OSError as e:
        reason = f"cannot create cgroups here ({e})"
    print(
        f"NOTE rl.envs: {reason}: episodes are bounded by per-process rlimits only "
        "(no total memory / process / CPU cap per episode)",
        file=sys.stderr,
    )
    return "", reason


def _try_mkdir(parents: list[str]) -> None:
    name = f"rl-probe-{secrets.token_hex(4)}"
    for parent in parents:
        os.mkdir(os.path.join(parent, name))
    for parent in parents:
        os.rmdir(os.path.join(parent, name))


class EpisodeCgroup:
    """One cgroup (v2) or one per controller (v1) holding every process of an episode."""

    def __init__(self, version: str, memory_bytes: int, pids: int, cpus: float):
        self.version = version
        name = f"rl-episode-{secrets.token_hex(6)}"
        if version == "v2":
            self.dirs = {"all": os.path.join(_v2_parent(), name)}
        else:
            self.dirs = {
                c: os.path.join(ROOT, c, (_own_path(c) or "/").lstrip("/"), name) for c in _V1
            }
        for d in self.dirs.values():
            os.mkdir(d)
        quota = max(int(cpus * _CPU_PERIOD_US), 1000)
        if version == "v2":
            self._set("all", "memory.max", memory_bytes)
            self._set("all", "memory.swap.max", 0, optional=True)
            self._set("all", "pids.max", pids)
            self._set("all", "cpu.max", f"{quota} {_CPU_PERIOD_US}")
        else:
            self._set("memory", "memory.limit_in_bytes", memory_bytes)
            self._set("memory", "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
            self._set("pids", "pids.max", pids)
            self._set("cpu", "cpu.cfs_period_us", _CPU_PERIOD_US)
            self._set("cpu", "cpu.cfs_quota_us", quota)
        self._seen = self.counters()

    def _set(self, key: str, name: str, value, optional: bool = False) -> None:
        try:
            with open(os.path.join(self.dirs[key], name), "w") as f:
                f.write(str(value))
        except OSError:
            if not optional:
                raise

    def _read(self, key: str, name: str) -> dict[str, int]:
        try:
            with open(os.path.join(self.dirs[key], name)) as f:
                return {k: int(v) for k, v in (line.split() for line in f if line.strip())}
        except (OSError, ValueError):
            return {}

    def counters(self) -> tuple[int, int]:
        """(memory OOM kills, fork refusals) so far."""
        mem_key, pids_key = ("all", "all") if self.version == "v2" else ("memory", "pids")
        mem_file = "memory.events" if self.version == "v2" else "memory.oom_control"
        return (
            self._read(mem_key, mem_file).get("oom_kill", 0),
            self._read(pids_key, "pids.events").get("max", 0),
        )

    def limit_hit(self) -> str | None:
        """'memory' or 'processes' if the kernel enforced one since the last call."""
        now, before = self.counters(), self._seen
        self._seen = now
        if now[1] > before[1]:  # first: a fork bomb also runs out of memory on the way
            return "processes"
        if now[0] > before[0]:
            return "memory"
        return None

    def wrap(self, argv: list[str]) -> list[str]:
        """argv that first moves itself into the cgroup(s), then execs argv."""
        files = " ".join(f"'{os.path.join(d, 'cgroup.procs')}'" for d in self.dirs.values())
        script = f'for f in {files}; do echo $$ > "$f" || exit 125; done; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *argv]

    def pids(self) -> list[int]:
        out = set()
        for d in self.dirs.values():
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    out.update(int(p) for p in f.read().split())
            except OSError:
                pass
        return sorted(out)

    def kill(self, patience_s: float = 2.0) -> None:
        """Kills every process in the cgroup (cgroup.kill on v2; repeated SIGKILL sweeps on v1)."""
        if self.version == "v2":
            self._set("all", "cgroup.kill", 1, optional=True)
        deadline = time.monotonic() + patience_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def close(self) -> None:
        self.kill()
        for d in self.dirs.values():
            for _ in range(50):  # rmdir fails while dying processes are still being reaped
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


# ---------------------------------------------------------------- disk quota


@functools.cache
def can_mount_tmpfs() -> tuple[bool, str]:
    if os.geteuid() != 0:
        reason = "not root: no size-limited tmpfs for episode dirs"
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            ok = mount_tmpfs(d, 1 << 20, 0o700)
            if ok:
                unmount(d)
                return True, "tmpfs quota"
        reason = "mount(2) of a tmpfs failed (no CAP_SYS_ADMIN?)"
    print(f"NOTE rl.envs: {reason}; episode dirs are bounded per file only", file=sys.stderr)
    return False, reason


_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


@functools.cache
def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(path: str, size_bytes: int, mode: int) -> bool:
    options = f"size={size_bytes},mode={mode:o}".encode()
    flags = _MS_NOSUID | _MS_NODEV
    return _libc().mount(b"rl-episode", path.encode(), b"tmpfs", flags, options) == 0


def unmount(path: str) -> None:
    _libc().umount2(path.encode(), _MNT_DETACH)
