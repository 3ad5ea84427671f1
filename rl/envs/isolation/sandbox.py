"""Sandboxed command execution for agent episodes. Fails closed: no bubblewrap, no sandbox.

Each `Sandbox` owns a fresh copy of a repo (the "episode directory") and a private, otherwise unused
uid. Commands run as that uid, so the kernel enforces RLIMIT_NPROC per episode (it never does for
root), files outside the episode are protected by ordinary permissions, and after every command the
episode's leftover processes (daemons, fork-bomb children) are killed with one `kill(-1)` issued as
that uid, which the kernel applies to every process of the uid in a single pass.

Backends:
- "bwrap" (bubblewrap, the default and the only isolated one): new pid/net/ipc/uts namespaces (no
  network; every process dies when the command's shell exits), the system bound read-only (/usr, a
  few /etc files, the Python prefix), a private tmpfs /tmp, the episode bound read-write at /repo,
  the repository's declared test dependencies (if any) read-only at /rl_test_deps, last on
  sys.path (rl/envs/isolation/dep_cache.py); nothing else of the host is visible.
- "rlimit": no namespaces, so NOT isolation: same uid switch, rlimits, timeouts and process sweep,
  but the network and world-readable/writable host paths (/tmp) are reachable. Never chosen
  silently: without a working bwrap, `Sandbox(...)` raises `SandboxUnavailable` unless the caller
  opts in with `Sandbox(..., allow_unisolated=True)`, `RL_ENVS_ALLOW_UNISOLATED=1` or
  `RL_ENVS_SANDBOX=rlimit`. Entry points call `require_isolation()` at start-up to fail before any
  model loads. Without bind mounts the episode uid must reach the interpreter itself; when it
  cannot (pyenv under a 0700 /root) commands run as the caller (no process limit, no uid sweep).

Resource caps for the episode's whole process tree (cgroup memory/pids/cpu) and its directory
(a size-limited tmpfs) come from `rl.envs.isolation.cgroups` where the machine offers them; else the
per-process rlimits below are all there is (said once). Threat model: rl/envs/README.md.

Without root the uid switch is impossible: commands then run as the caller under bwrap's user
namespace, RLIMIT_NPROC is left unset (it would count all of the caller's processes), and a fork
bomb is contained only by the pid namespace and the wall timeout.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from rl.envs.isolation import cgroups
from rl.envs.isolation.dep_cache import MOUNT as DEPS_MOUNT
from rl.envs.isolation.dep_cache import host_dir as deps_host_dir

SANDBOX_REPO = "/repo"  # where the episode directory appears inside bwrap


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-command resource limits. Memory is address space, so it bounds what a process can map."""

    cpu_s: int = 30  # RLIMIT_CPU per process (soft; hard = soft + 1 -> SIGKILL)
    memory_bytes: int = 2 << 30  # RLIMIT_AS per process
    nproc: int = 128  # RLIMIT_NPROC for the episode uid (root only)
    file_bytes: int = 64 << 20  # RLIMIT_FSIZE: largest file a command may write
    output_bytes: int = 32 << 10  # output kept for the caller (head + tail)
    output_kill_bytes: int = 16 << 20  # output beyond this ends the command (limit "output")
    tmp_bytes: int = 256 << 20  # size of the private /tmp tmpfs (bwrap only)
    repo_bytes: int = 1 << 30  # largest repo Sandbox() agrees to copy (e.g. for grading)
    # Whole-episode caps (cgroups / tmpfs, where the machine offers them; see
    # rl.envs.isolation.cgroups):
    tree_memory_bytes: int = 4 << 30  # all processes of the episode together (+ their tmpfs)
    tree_cpus: float = 2.0  # CPU bandwidth of the whole tree, in cores
    disk_bytes: int = 2 << 30  # the episode dir (repo + tmp); tmpfs, so it is RAM too


@dataclasses.dataclass
class RunResult:
    exit_code: int  # shell convention: 128 + signal when a signal ended it
    output: str  # stdout+stderr interleaved, capped to Limits.output_bytes with a marker
    timed_out: bool  # the wall timeout killed the process tree
    limit: str | None  # "cpu" | "file_size" | "memory" | "processes" | "disk" | "output" | None;
    # cpu/file_size come from the signal; memory/processes from the cgroup's counters where
    # cgroups work (exact), else from the error text the program printed (a heuristic); disk
    # from ENOSPC in the output; output is exact
    output_bytes: int  # bytes the command produced in total
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.limit is None

    @property
    def status(self) -> str:
        if self.timed_out:
            return "timeout"
        if self.limit:
            return f"limit:{self.limit}"
        return "ok" if self.exit_code == 0 else f"exit:{self.exit_code}"


# ---------------------------------------------------------------- backend selection


def _is_root() -> bool:
    return os.geteuid() == 0


def _python_prefixes() -> list[str]:
    """Python installations the sandbox must see read-only (the interpreter + its site-packages),
    the caller's own first: in a virtual environment `sys.prefix` is the venv and `sys.base_prefix`
    the interpreter it was made from, and `python3`/`pytest` inside must be the venv's (with the
    venv's packages), so its `bin` leads PATH. Sorting them put /root/.pyenv/... before a venv
    under /tmp and ran the base interpreter with the base's packages."""
    prefixes = [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]
    return [p for i, p in enumerate(prefixes) if p not in ("/usr", "/") and p not in prefixes[:i]]


_ETC_FILES = ("ld.so.cache", "ld.so.conf", "passwd", "group", "nsswitch.conf", "localtime", "hosts")


def _bwrap_prefix(
    episode_dir: str,
    limits: Limits,
    ro_binds: tuple[tuple[str, str], ...] = (),
    deps: str | None = None,
) -> list[str]:
    args = [_bwrap_bin(), "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--dir", "/etc"]
    for name in _ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    if os.path.isdir("/etc/alternatives"):
        args += ["--ro-bind", "/etc/alternatives", "/etc/alternatives"]
    args += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    # The Python prefixes are bound after the private /tmp, so a venv under /tmp (CI's, a user's)
    # stays visible instead of being hidden by the tmpfs mounted over it.
    for prefix in _python_prefixes():
        # Parents (e.g. /root/.pyenv under a 0700 /root) are created empty and traversable, so the
        # prefix is usable while the rest of the host home stays invisible.
        parents = list(Path(prefix).parents)[::-1][1:]
        for parent in parents:
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", prefix, prefix]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        episode_dir,
        SANDBOX_REPO,
        *[arg for host, inside in ro_binds for arg in ("--ro-bind", host, inside)],
        "--chdir",
        SANDBOX_REPO,
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    if not _is_root():
        args += ["--unshare-user"]
    for key, value in _sandbox_env(SANDBOX_REPO, deps).items():
        args += ["--setenv", key, value]
    return args + ["--"]


def _sandbox_env(repo: str, deps: str | None = None) -> dict[str, str]:
    """`deps`: the test-dependency folder as commands see it; its hook appends its lib/ to
    sys.path after site-packages (rl/envs/isolation/dep_cache.py)."""
    bins = [os.path.join(p, "bin") for p in _python_prefixes()]
    env = {
        "PATH": ":".join(bins + ["/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": repo,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        # Host pytest plugins (hypothesis, anyio, ...) cost ~1.4 s per run here and make task
        # results depend on what the host happens to have installed: tasks get plain pytest.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    if deps:
        env["PYTHONPATH"] = os.path.join(deps, "hook")
    return env


def _drop_privileges(uid: int | None) -> list[str]:
    if uid is None:
        return []
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--no-new-privs",
        "--bounding-set=-all",
        "--inh-caps=-all",
        "--",
    ]


def _rlimits(limits: Limits, own_uid: bool) -> list[str]:
    args = [
        "prlimit",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
        f"--as={limits.memory_bytes}",
        f"--fsize={limits.file_bytes}",
        "--core=0",
    ]
    if own_uid:  # RLIMIT_NPROC counts every process of the uid: only meaningful for a private uid
        args.append(f"--nproc={limits.nproc}")
    return args + ["--"]


OPT_IN_ENV = "RL_ENVS_ALLOW_UNISOLATED"  # "1": run untrusted code without isolation if need be
INSTALL_HINT = "apt-get install bubblewrap"


class SandboxUnavailable(RuntimeError):
    """No namespace isolation here and the caller did not opt in to running without it."""


def _bwrap_bin() -> str:
    # RL_ENVS_BWRAP names another bwrap binary (or a missing one, to rehearse a bare machine).
    return os.environ.get("RL_ENVS_BWRAP", "bwrap")


@functools.cache
def _bwrap_problem(bwrap: str) -> str | None:
    """None when bubblewrap works here (probed once per binary), else why it does not."""
    needed = ["prlimit", "setpriv"] if _is_root() else ["prlimit"]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        raise RuntimeError(
            f"sandbox needs util-linux tools not found on PATH: {', '.join(missing)}"
        )
    if not shutil.which(bwrap):
        return f"bubblewrap ({bwrap!r}) not found on PATH"
    with tempfile.TemporaryDirectory() as probe_dir:
        os.chmod(probe_dir, 0o777)
        argv = _bwrap_prefix(probe_dir, Limits()) + _drop_privileges(_probe_uid()) + ["/bin/true"]
        probe = subprocess.run(argv, capture_output=True, text=True)
    if probe.returncode == 0:
        return None
    return f"bwrap probe failed (exit {probe.returncode}): {probe.stderr.strip()[:200]}"


def _opted_in_by_env() -> bool:
    return os.environ.get(OPT_IN_ENV, "") == "1" or os.environ.get("RL_ENVS_SANDBOX") == "rlimit"


def backend(allow_unisolated: bool = False) -> str:
    """'bwrap' when bubblewrap works here; 'rlimit' only when the caller opted in (argument or
    environment) and bwrap is unusable; else raises SandboxUnavailable saying how to fix it."""
    forced = os.environ.get("RL_ENVS_SANDBOX", "")
    if forced in ("bwrap", "rlimit"):
        return forced
    problem = _bwrap_problem(_bwrap_bin())
    if problem is None:
        return "bwrap"
    if allow_unisolated or _opted_in_by_env():
        _warn_unisolated(problem)
        return "rlimit"
    raise SandboxUnavailable(
        f"rl.envs: refusing to run model-written code without namespace isolation: {problem}. "
        f"Install it ({INSTALL_HINT}), or opt in to the weaker rlimits-only mode (network and "
        f"host /tmp reachable) with Sandbox(..., allow_unisolated=True) or {OPT_IN_ENV}=1."
    )


def require_isolation(allow_unisolated: bool = False) -> str:
    """Start-up check for RL/eval entry points, before any model loads: returns the backend that
    episodes will use, or raises SandboxUnavailable with the install command and the opt-in."""
    return backend(allow_unisolated)


_warned: set[str] = set()


def _warn_unisolated(problem: str) -> None:
    if problem in _warned:  # say it once per process, not once per episode
        return
    _warned.add(problem)
    if _is_root() and not _others_can_run_python():
        problem += (
            f"; also the Python prefix {_python_prefixes()} is not reachable by other users, so "
            "commands run AS ROOT (no per-episode uid, no process limit, host files readable)"
        )
    message = (
        f"rl.envs.Sandbox: {problem}. Running UNISOLATED as opted in: rlimits + timeouts only, "
        "commands can reach the network and world-readable host files."
    )
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    print(f"WARNING {message}", file=sys.stderr)


def _probe_uid() -> int | None:
    return _fresh_uid() if _is_root() else None


def _others_can_run_python() -> bool:
    """Whether a non-root uid can reach the interpreter (pyenv under a 0700 /root cannot)."""
    for prefix in _python_prefixes():
        for path in [prefix, *Path(prefix).parents]:
            if not os.stat(path).st_mode & 0o001:
                return False
    return True


def _fresh_uid() -> int:
    # A random uid far above real accounts: unique per episode with overwhelming probability, so
    # RLIMIT_NPROC and the kill(-1) sweep never touch another episode or a host process.
    return 1_000_000 + secrets.randbelow(1 << 30)


# ---------------------------------------------------------------- the sandbox


class Sandbox:
    """A private copy of `repo_dir` in which commands run confined. Use as a context manager."""

    def __init__(
        self,
        repo_dir: str | os.PathLike | None = None,
        *,
        limits: Limits = Limits(),
        base_dir: str | None = None,
        backend_name: str | None = None,
        own_uid: bool | None = None,
        allow_unisolated: bool = False,
        test_deps: tuple[str, ...] | list[str] = (),
    ):
        """backend_name="rlimit" is itself an explicit opt-in to the unisolated mode.
        test_deps: the repository's pinned test-dependency set, bound read-only and put on
        sys.path after site-packages (rl/envs/isolation/dep_cache.py); MissingTestDeps when this
        machine's cache lacks it."""
        if backend_name not in (None, "bwrap", "rlimit"):
            raise ValueError(
                f"unknown sandbox backend {backend_name!r} (expected 'bwrap' or 'rlimit')"
            )
        self.limits = limits
        self.backend = backend_name or backend(allow_unisolated)
        # A private uid needs root to switch to, and (without bwrap's bind mounts) an interpreter
        # that other users can reach.
        if own_uid and not _is_root():
            raise ValueError("Sandbox(own_uid=True) needs root to switch uid")
        auto = _is_root() and (self.backend == "bwrap" or _others_can_run_python())
        self.own_uid = auto if own_uid is None else own_uid
        self.uid = _fresh_uid() if self.own_uid else os.getuid()
        deps_host = deps_host_dir(list(test_deps))  # before anything is made: fail closed
        self.test_deps = tuple(test_deps)
        # where commands see the folder: bound at DEPS_MOUNT (bwrap), the host's path (rlimit)
        self._deps = None
        self._ro_binds: tuple[tuple[str, str], ...] = ()
        if deps_host:
            self._deps = DEPS_MOUNT if self.backend == "bwrap" else deps_host
            if self.backend == "bwrap":
                self._ro_binds = ((deps_host, DEPS_MOUNT),)
        self._closed = True  # until fully built: __del__ must not act on a half-made sandbox
        self._base = tempfile.mkdtemp(prefix="rl-episode-", dir=base_dir)
        self._mounted = False
        self.cgroup: cgroups.EpisodeCgroup | None = None
        try:
            self._mounted = cgroups.can_mount_tmpfs()[0] and cgroups.mount_tmpfs(
                self._base, limits.disk_bytes, 0o711
            )
            version = cgroups.probe()[0]
            if version:
                self.cgroup = cgroups.EpisodeCgroup(
                    version, limits.tree_memory_bytes, limits.nproc, limits.tree_cpus
                )
            self._populate(repo_dir)
        except BaseException:
            self._release()
            raise
        self._closed = False

    def _populate(self, repo_dir) -> None:
        os.chmod(self._base, 0o711)  # the episode uid may traverse (rlimit backend), not list
        self.root = os.path.join(self._base, "repo")
        self.skipped_files: list[str] = []  # FIFOs, sockets, devices left out of the copy
        if repo_dir is None:
            os.mkdir(self.root)
        else:
            src = os.path.realpath(repo_dir)
            if os.path.realpath(self._base).startswith(src + os.sep):
                raise ValueError(f"episode dir {self._base} is inside the repo {src} it would copy")
            self.skipped_files = _copy_repo(repo_dir, self.root, self.limits.repo_bytes)
        self._chown_tree(self.root)
        os.chmod(self.root, 0o700)
        self._tmp = os.path.join(
            self._base, "tmp"
        )  # TMPDIR for the rlimit backend (bwrap has its own)
        os.mkdir(self._tmp, 0o700)
        self._chown(self._tmp)

    @classmethod
    def from_files(cls, files: dict[str, str], **kwargs) -> Sandbox:
        box = cls(None, **kwargs)
        try:
            for rel, content in files.items():
                box.write_text(rel, content)
        except BaseException:
            box.close()
            raise
        return box

    # -- commands

    @property
    def deps_lib(self) -> str | None:
        """The test dependencies' lib/ as commands see it (None without a set): the grader's
        child appends it to sys.path (rl/envs/grading/grader/child.py)."""
        return os.path.join(self._deps, "lib") if self._deps else None

    def readonly_dir(self, name: str) -> tuple[str, str]:
        """A directory the host fills and commands can read but not write: returns (host path,
        path inside the sandbox). Outside the episode dir, root-owned (bwrap: bound read-only)."""
        if not name.isidentifier():
            raise ValueError(f"bad read-only dir name {name!r}")
        host = os.path.join(self._base, name)
        os.mkdir(host, 0o755)
        if self.backend != "bwrap":
            return host, host
        self._ro_binds += ((host, f"/{name}"),)
        return host, f"/{name}"

    def drop_readonly_dir(self, host: str) -> None:
        """Unbinds and deletes a directory made by `readonly_dir` (later commands cannot see it)."""
        self._ro_binds = tuple(b for b in self._ro_binds if b[0] != host)
        shutil.rmtree(host, ignore_errors=True)

    def run(
        self,
        command: str,
        timeout_s: float = 10.0,
        stdin: bytes | None = None,
        output_bytes: int | None = None,
    ) -> RunResult:
        """Runs `command` with /bin/sh; `stdin` (small: one pipe buffer) is its whole input.
        `output_bytes` overrides Limits.output_bytes for this command (the grader's summary)."""
        if self._closed:
            raise RuntimeError("Sandbox.run after close()")
        argv, cwd, env = self._argv(command)
        if self.cgroup is not None:
            argv = self.cgroup.wrap(argv)
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:  # the command did not read it; that is its business
                pass
        capture = _OutputCapture(output_bytes or self.limits.output_bytes)
        timed_out, output_killed = _pump(
            proc, capture, start + timeout_s, self.limits.output_kill_bytes
        )
        if timed_out or output_killed:
            _kill_group(proc.pid)
        exit_code = _shell_code(proc.wait())
        self.kill_all()
        proc.stdout.close()
        tree_limit = self.cgroup.limit_hit() if self.cgroup is not None else None
        limit = "output" if output_killed else tree_limit or _limit_hit(exit_code, capture.text())
        return RunResult(
            exit_code=exit_code,
            output=capture.text(),
            timed_out=timed_out,
            limit=limit,
            output_bytes=capture.total,
            duration_s=time.monotonic() - start,
        )

    def _argv(self, command: str) -> tuple[list[str], str, dict[str, str]]:
        inner = _rlimits(self.limits, self.own_uid) + ["/bin/sh", "-c", command]
        if self.backend == "bwrap":
            drop = _drop_privileges(self.uid if self.own_uid else None)
            prefix = _bwrap_prefix(self.root, self.limits, self._ro_binds, self._deps)
            return prefix + drop + inner, self.root, {}
        env = _sandbox_env(self.root, self._deps)
        env["TMPDIR"] = self._tmp
        # setpriv switches uid after the cgroup wrapper (run as us) has joined the episode cgroup.
        return _drop_privileges(self.uid if self.own_uid else None) + inner, self.root, env

    def kill_all(self, patience_s: float = 2.0) -> None:
        """Kills every process of the episode: its cgroup, and every process of its uid: kill(-1)
        as that uid is one kernel pass, so a fork bomb cannot outrun it. Repeats until none is
        alive (dying ones take a moment)."""
        if self.cgroup is not None:
            self.cgroup.kill(patience_s)
        if not self.own_uid:  # never kill(-1) as a shared uid
            return
        deadline = time.monotonic() + patience_s
        while _uid_has_processes(self.uid):
            subprocess.run(
                ["/bin/sh", "-c", "kill -KILL -1"],
                user=self.uid,
                group=self.uid,
                extra_groups=[],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if time.monotonic() > deadline:
                warnings.warn(
                    f"rl.envs.Sandbox: processes of uid {self.uid} survive kill -1",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return
            time.sleep(0.005)

    # -- files (host side, confined to the episode directory)

    def path(self, rel: str) -> str:
        """Absolute host path of `rel`, refusing anything that resolves outside the episode (..,
        /abs, symlinks the agent planted)."""
        if not isinstance(rel, str) or not rel or "\0" in rel:
            raise ValueError(f"bad path {rel!r}")
        rel = rel[len(SANDBOX_REPO) + 1 :] if rel.startswith(SANDBOX_REPO + "/") else rel
        full = os.path.realpath(os.path.join(self.root, rel))
        root = os.path.realpath(self.root)
        if full != root and not full.startswith(root + os.sep):
            raise ValueError(f"path {rel!r} is outside the repository")
        return full

    def read_text(self, rel: str) -> str:
        with open(self.path(rel), "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def write_text(self, rel: str, content: str) -> None:
        full = self.path(rel)
        parent = os.path.dirname(full)
        os.makedirs(parent, exist_ok=True)
        self._chown_tree(self.root, only=parent)
        if os.path.lexists(full) and not os.path.isfile(full):
            raise ValueError(f"path {rel!r} exists and is not a regular file")
        with open(full, "w", encoding="utf-8") as f:
            f.write(content)
        self._chown(full)

    def remove(self, rel: str) -> None:
        full = self.path(rel)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.remove(full)

    def list_files(self, rel: str = ".") -> list[str]:
        top = self.path(rel)
        out = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(
                d for d in dirnames if d not in (".git", "__pycache__", ".pytest_cache")
            )
            for name in sorted(filenames):
                out.append(os.path.relpath(os.path.join(dirpath, name), self.root))
        return out

    def snapshot(self) -> dict[str, str]:
        return {rel: self.read_text(rel) for rel in self.list_files()}

    # -- ownership

    def _chown(self, path: str) -> None:
        if self.own_uid:
            os.lchown(path, self.uid, self.uid)

    def _chown_tree(self, top: str, only: str | None = None) -> None:
        if not self.own_uid:
            return
        if only is not None:  # chown `only` and its parents up to the root
            path = only
            while path.startswith(top):
                self._chown(path)
                path = os.path.dirname(path)
            return
        self._chown(top)
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                self._chown(os.path.join(dirpath, name))

    # -- lifetime

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.kill_all()
        self._release()

    def _release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.close()
        if self._mounted:
            cgroups.unmount(self._base)
        shutil.rmtree(self._base, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:  # interpreter shutdown: best effort only
                pass


# ---------------------------------------------------------------- helpers


class RepoTooLarge(ValueError):
    pass


def _copy_repo(src: str | os.PathLike, dst: str, max_bytes: int) -> list[str]:
    """copytree of regular files, dirs and symlinks only: an agent-made FIFO would block the copy
    forever and a socket would fail it. Refuses repos over `max_bytes` before copying anything.
    Returns the skipped paths."""
    total = 0
    for dirpath, _, filenames in os.walk(src):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    if total > max_bytes:
        raise RepoTooLarge(f"repo {src} holds {total} bytes, over the {max_bytes}-byte limit")

    skipped = []

    def special(dirpath, names):
        out = []
        for name in names:
            mode = os.lstat(os.path.join(dirpath, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                out.append(name)
                skipped.append(os.path.relpath(os.path.join(dirpath, name), src))
        return out

    shutil.copytree(src, dst, symlinks=True, ignore=special, copy_function=cow_copy)
    return skipped


def cow_copy(src: str, dst: str) -> None:
    """copytree's copy_function: copy_file_range shares blocks (copy-on-write) where the file
    system has reflinks (btrfs, XFS) and is an in-kernel copy elsewhere; across file systems
    the kernel may refuse it (EXDEV, EINVAL): then a plain copy. Then the stat bits."""
    try:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            left = os.fstat(fin.fileno()).st_size
            while left > 0:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), left)
                if n == 0:
                    break
                left -= n
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
        shutil.copyfile(src, dst)
    shutil.copystat(src, dst)


class _OutputCapture:
    """Keeps the first and last `cap/2` bytes and counts the rest."""

    def __init__(self, cap: int):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {omitted} bytes of output omitted ...]\n".encode() if omitted else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


def _pump(
    proc: subprocess.Popen, capture: _OutputCapture, deadline: float, kill_bytes: int
) -> tuple[bool, bool]:
    """Reads output until EOF, the deadline, or too much output. Returns (timed_out,
    output_killed)."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    poller = (
        select.poll()
    )  # not select.select: it fails for fds >= 1024 (many episodes per process)
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    exited_at = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            return True, False
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.2:
            return False, False  # an escaped child holds the pipe open; the sweep will kill it
        if not poller.poll(1e3 * min(deadline - now, 0.05)):
            continue
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
        if not chunk:
            return False, False
        capture.add(chunk)
        if capture.total > kill_bytes:
            return False, True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _shell_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_NPROC_MARKERS = (
    "Resource temporarily unavailable",
    "BlockingIOError",
    "fork: retry",
    "Cannot fork",
)


def _limit_hit(exit_code: int, output: str) -> str | None:
    if exit_code == 128 + signal.SIGXCPU:
        return "cpu"
    if exit_code == 128 + signal.SIGXFSZ:
        return "file_size"
    if exit_code != 0 and "No space left on device" in output:
        return "disk"
    if exit_code != 0 and any(m in output for m in _MEMORY_MARKERS):
        return "memory"
    if any(m in output for m in _NPROC_MARKERS):
        return "processes"
    return None


def _uid_has_processes(uid: int) -> bool:
    """True if a live (non-zombie) process of `uid` exists. Zombies are dead; init reaps them."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry.path).st_uid != uid:
                continue
            with open(os.path.join(entry.path, "stat"), "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            return True
    return False
