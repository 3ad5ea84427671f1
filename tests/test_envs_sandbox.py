"""Hostile programs inside rl.envs.Sandbox: each is contained, gets a clear status, host unaffected.

Runs on the bwrap backend when it works here (skipped otherwise) and, for the cases that the
fallback honestly covers, also on the rlimit backend.
"""

import os
import pathlib
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest

from rl.envs import Limits, Sandbox, SandboxUnavailable, require_isolation
from rl.envs.isolation import cgroups
from rl.envs.isolation.sandbox import _uid_has_processes

IS_ROOT = os.geteuid() == 0
CGROUPS = cgroups.probe()
needs_cgroups = pytest.mark.skipif(not CGROUPS[0], reason=f"no cgroups here: {CGROUPS[1]}")
needs_tmpfs = pytest.mark.skipif(
    not cgroups.can_mount_tmpfs()[0], reason=cgroups.can_mount_tmpfs()[1]
)
BACKENDS = [pytest.param("bwrap", marks=pytest.mark.needs_bwrap), "rlimit"]


def make(repo, backend_name, **kwargs):
    """On the rlimit backend, force the private uid when root (the dev machine's interpreter lives
    under a 0700 /root, so auto mode would run as root); these tests use /usr/bin tools only."""
    own = True if backend_name == "rlimit" and IS_ROOT else None
    if own and not shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin"):
        pytest.skip("no system python3 reachable by the episode uid on the rlimit backend")
    return Sandbox(repo, limits=FAST, backend_name=backend_name, own_uid=own, **kwargs)


FAST = Limits(
    cpu_s=5,
    memory_bytes=1 << 30,
    nproc=64,
    file_bytes=8 << 20,
    output_bytes=4096,
    output_kill_bytes=4 << 20,
)


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "main.py").write_text("print('hello from repo')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("X = 1\n")
    return tmp_path


def _host_can_fork():
    return subprocess.run(["/bin/true"], timeout=5).returncode == 0


def test_basic_run_copies_repo_and_reports_exit_code(repo):
    with Sandbox(repo, limits=FAST) as sb:
        assert sb.root != str(repo)
        r = sb.run("python3 main.py && exit 3", timeout_s=5)
        assert (
            r.exit_code == 3
            and "hello from repo" in r.output
            and not r.timed_out
            and r.limit is None
        )
        assert r.status == "exit:3"
        r = sb.run("echo changed > pkg/mod.py; cat pkg/mod.py", timeout_s=5)
        assert r.ok and r.output == "changed\n"
    assert (repo / "pkg" / "mod.py").read_text() == "X = 1\n"  # the source repo is untouched
    assert not os.path.exists(sb.root)  # close() removed the episode


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_fork_bomb_contained(repo, backend_name):
    if backend_name == "rlimit" and not IS_ROOT:
        pytest.skip("the rlimit backend bounds processes only when it can switch uid (root)")
    with make(repo, backend_name) as sb:
        start = time.monotonic()
        r = sb.run("python3 -c 'import os\nwhile True: os.fork()'", timeout_s=3)
        assert time.monotonic() - start < 6
        assert r.timed_out or r.limit == "processes", r.status
        assert not _uid_has_processes(sb.uid)
        r = sb.run("b() { b | b & }; b; sleep 1", timeout_s=3)
        assert r.timed_out or r.limit == "processes" or r.exit_code != 0, r.status
        assert not _uid_has_processes(sb.uid)
        assert sb.run("echo alive", timeout_s=5).output == "alive\n"  # the episode still works
    assert _host_can_fork()


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_infinite_loop_hits_wall_timeout(repo, backend_name):
    with make(repo, backend_name) as sb:
        r = sb.run("while :; do :; done", timeout_s=1.5)
        assert r.timed_out and r.status == "timeout" and 1.4 < r.duration_s < 5.0
        assert not _uid_has_processes(sb.uid) or not IS_ROOT


def test_cpu_limit_ends_busy_process(repo):
    with Sandbox(repo, limits=Limits(cpu_s=1)) as sb:
        r = sb.run("python3 -c 'while True: pass'", timeout_s=8)
        assert not r.timed_out and r.limit == "cpu" and r.duration_s < 5, r.status


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_memory_bomb_hits_memory_limit(repo, backend_name):
    with make(repo, backend_name) as sb:
        r = sb.run("python3 -c 'x = bytearray(8 << 30)'", timeout_s=10)
        assert r.limit == "memory" and "MemoryError" in r.output, r.status
        # Mapping without touching: only the address-space limit stops this, not the host running
        # out.
        r = sb.run(
            "python3 -c 'import mmap\nx = []\nwhile True: x.append(mmap.mmap(-1, 64 << 20))'",
            timeout_s=10,
        )
        assert r.limit == "memory" and "Cannot allocate memory" in r.output and r.duration_s < 8, (
            r.status
        )
        r = sb.run("head -c 20000000 /dev/zero > big", timeout_s=5)  # RLIMIT_FSIZE = 8 MiB
        assert r.limit == "file_size" and os.path.getsize(sb.path("big")) <= FAST.file_bytes


@pytest.mark.needs_bwrap
def test_writes_outside_repo_do_not_reach_host(repo, tmp_path_factory):
    host_dir = tmp_path_factory.mktemp("host")  # world-readable host dir the sandbox must not touch
    os.chmod(host_dir, 0o777)
    canary = host_dir / "canary"
    canary.write_text("keep")
    marker = f"/tmp/rl_envs_marker_{uuid.uuid4().hex}"
    with Sandbox(repo, limits=FAST) as sb:
        r = sb.run(
            f"echo x > {marker}; echo x > {host_dir}/new; rm -f {canary}; touch /usr/pwned;"
            f"echo x > {pathlib.Path.home()}/pwned_{uuid.uuid4().hex}; cat {marker}",
            timeout_s=5,
        )
        assert "x" in r.output  # writing the private /tmp works inside ...
    assert not os.path.exists(marker)  # ... but never reaches the host's /tmp
    assert canary.read_text() == "keep" and not (host_dir / "new").exists()
    assert not os.path.exists("/usr/pwned")
    assert not list(pathlib.Path.home().glob("pwned_*"))


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_host_secret_and_project_not_readable(repo, backend_name):
    if backend_name == "rlimit" and not IS_ROOT:
        pytest.skip("without a uid switch the rlimit backend reads what the caller can read")
    secret_value = uuid.uuid4().hex
    secret = pathlib.Path.home() / f".rl_envs_secret_{uuid.uuid4().hex[:8]}"
    secret.write_text(secret_value)
    os.chmod(secret, 0o600)
    try:
        with make(repo, backend_name) as sb:
            r = sb.run(f"cat {secret}; cat {pathlib.Path.home()}/.ssh/*", timeout_s=5)
            assert secret_value not in r.output and r.exit_code != 0
            listing = sb.run(f"ls -a {pathlib.Path.home()}", timeout_s=5).output
            assert secret.name not in listing
            sb.run(f"ln -s {secret} leak", timeout_s=5)
            with pytest.raises(ValueError, match="outside the repository"):
                sb.read_text("leak")  # host-side tools refuse planted symlinks
            with pytest.raises(ValueError, match="outside the repository"):
                sb.read_text("../../../" + str(secret))
            if backend_name == "bwrap":  # the project checkout is invisible too
                r = sb.run(f"cat {__file__}", timeout_s=5)
                assert r.exit_code != 0 and "hostile" not in r.output
    finally:
        secret.unlink()


@pytest.mark.needs_bwrap
def test_no_network_even_to_host_loopback(repo):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    try:
        with Sandbox(repo, limits=FAST) as sb:
            code = (
                f"import socket\nfor host in ('127.0.0.1', '1.1.1.1'):\n"
                f"    try:\n        socket.create_connection((host, {port}), timeout=1); "
                "print('CONNECTED')\n"
                f"    except OSError as e:\n        print('BLOCKED', e)\n"
            )
            sb.write_text("net.py", code)
            r = sb.run("python3 net.py", timeout_s=5)
            assert "CONNECTED" not in r.output and r.output.count("BLOCKED") == 2, r.output
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_100mb_output_is_capped(repo, backend_name):
    with make(repo, backend_name) as sb:
        r = sb.run("head -c 100000000 /dev/zero | tr '\\0' a", timeout_s=5)
        assert r.limit == "output" and not r.timed_out and r.duration_s < 8
        assert len(r.output) < FAST.output_bytes + 100 and "bytes of output omitted" in r.output
        assert r.output_bytes > FAST.output_kill_bytes
        r = sb.run("seq 1 100000", timeout_s=5)  # below the kill threshold: head + tail kept
        assert r.ok and r.output.startswith("1\n2\n") and r.output.endswith("99999\n100000\n")


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_daemonized_child_is_killed(repo, backend_name):
    if backend_name == "rlimit" and not IS_ROOT:
        pytest.skip("the rlimit backend sweeps leftover processes by uid, which needs root")
    with make(repo, backend_name) as sb:
        r = sb.run(
            "(setsid sh -c 'sleep 2; echo late > late.txt' >/dev/null 2>&1 &); "
            "nohup sleep 60 >/dev/null 2>&1 & echo started",
            timeout_s=5,
        )
        assert r.ok and r.output == "started\n" and r.duration_s < 5  # not the 60 s of the daemon
        assert not _uid_has_processes(sb.uid) or not IS_ROOT
        time.sleep(2.5)
        assert not os.path.exists(sb.path("late.txt"))


@pytest.mark.needs_bwrap
def test_deleting_the_repo_and_root_is_contained(repo, tmp_path_factory):
    other_dir = tmp_path_factory.mktemp("other")
    (other_dir / "f.txt").write_text("other")
    with Sandbox(other_dir, limits=FAST) as other, Sandbox(repo, limits=FAST) as sb:
        r = sb.run(
            "cd / && rm -rf /repo/* /repo/.[!.]* /repo ~ /usr/bin/env /etc/passwd /tmp 2>/dev/null;"
            "ls -A /repo | wc -l",
            timeout_s=5,
        )
        assert r.output.strip() == "0" and not r.timed_out
        assert os.listdir(sb.root) == []  # only its own copy is gone
        assert other.read_text("f.txt") == "other" and (other_dir / "f.txt").exists()
        assert (repo / "main.py").exists() and os.path.exists("/usr/bin/env")
        assert sb.run("echo still here", timeout_s=5).output == "still here\n"
    assert _host_can_fork()


def test_hanging_hidden_test_times_out_and_scores_zero(repo):
    from rl.envs import Task, grade_repo

    task = Task(
        id="hang",
        prompt="x",
        files={},
        solution={},
        hidden_tests={"test_hang.py": "import time\n\ndef test_hang():\n    time.sleep(1000)\n"},
        meta={"hidden_test_count": 1},
    )
    start = time.monotonic()
    grade = grade_repo(task, str(repo), timeout_s=3)
    assert time.monotonic() - start < 6
    assert grade.passed == 0 and grade.total == 1 and grade.output.startswith("[timeout]")


def test_concurrent_episodes_do_not_interfere(repo):
    results = {}

    def episode(i):
        with Sandbox(repo, limits=FAST) as sb:
            sb.run(f"echo {i} > mine.txt", timeout_s=5)
            if i == 0 and sb.own_uid:  # one episode misbehaves while the others work
                sb.run("python3 -c 'import os\nwhile True: os.fork()'", timeout_s=2)
            time.sleep(0.2)
            results[i] = (
                sb.run("cat mine.txt; ls", timeout_s=5).output,
                sb.uid if sb.own_uid else i,
                sb.root,
            )

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [0, 1, 2, 3]
    for i, (out, _, _) in results.items():
        assert out.splitlines()[0] == str(i) and "mine.txt" in out
    assert len({uid for _, uid, _ in results.values()}) == 4
    assert len({root for _, _, root in results.values()}) == 4


def test_without_bubblewrap_sandbox_refuses_unless_opted_in(monkeypatch, repo):
    from rl.envs.isolation import sandbox

    monkeypatch.setenv("RL_ENVS_BWRAP", "/nonexistent/bwrap")  # a machine without bubblewrap
    for name in ("RL_ENVS_SANDBOX", "RL_ENVS_ALLOW_UNISOLATED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sandbox, "_warned", set())
    with pytest.raises(SandboxUnavailable) as err:
        Sandbox(repo)
    message = str(err.value)
    assert "apt-get install bubblewrap" in message and "allow_unisolated=True" in message
    assert "RL_ENVS_ALLOW_UNISOLATED=1" in message and "\n" not in message
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        require_isolation()  # what RL/eval entry points call before loading a model
    from rl.envs.__main__ import main

    assert main(["verify", str(repo / "no_tasks_read.jsonl")]) == 2  # refuses before any work
    with pytest.warns(RuntimeWarning, match="UNISOLATED as opted in"):
        with Sandbox(repo, allow_unisolated=True) as sb:
            assert sb.backend == "rlimit" and sb.run("echo hi", 5).output == "hi\n"
    monkeypatch.setenv("RL_ENVS_ALLOW_UNISOLATED", "1")
    assert require_isolation() == "rlimit"
    with Sandbox(repo) as sb:
        assert sb.backend == "rlimit"
    monkeypatch.delenv("RL_ENVS_ALLOW_UNISOLATED")
    monkeypatch.setenv("RL_ENVS_SANDBOX", "rlimit")  # forcing the weak backend is an opt-in too
    assert require_isolation() == "rlimit"
    with pytest.raises(ValueError, match="unknown sandbox backend 'docker'"):
        Sandbox(backend_name="docker")


@pytest.mark.needs_bwrap
def test_with_bubblewrap_isolation_is_required_and_used(monkeypatch):
    for name in ("RL_ENVS_SANDBOX", "RL_ENVS_ALLOW_UNISOLATED"):
        monkeypatch.delenv(name, raising=False)
    assert require_isolation() == "bwrap"
    with Sandbox() as sb:
        assert sb.backend == "bwrap"


TREE = Limits(
    cpu_s=5,
    memory_bytes=1 << 30,  # per process: each allocation below passes RLIMIT_AS ...
    tree_memory_bytes=192 << 20,  # ... but not the episode's total
    nproc=48,
    disk_bytes=16 << 20,
    output_bytes=4096,
)


@needs_cgroups
def test_memory_spread_over_processes_hits_the_episode_cap(repo):
    with Sandbox(repo, limits=TREE) as sb, Sandbox(repo, limits=TREE) as other:
        hog = "python3 -c 'import time; x = bytearray(64 << 20); time.sleep(1)'"
        r = sb.run(f"for i in 1 2 3 4 5 6; do {hog} & done; wait", timeout_s=20)
        assert r.limit == "memory" and not r.timed_out, (r.status, r.output)
        assert other.run("python3 -c 'x = bytearray(64 << 20); print(len(x))'", 10).ok
        assert sb.run("echo alive", 5).output == "alive\n"  # the episode goes on
    assert _host_can_fork()


@needs_cgroups
def test_wide_fork_hits_the_episode_process_cap(repo):
    with Sandbox(repo, limits=TREE) as sb, Sandbox(repo, limits=TREE) as other:
        start = time.monotonic()
        r = sb.run("for i in $(seq 200); do sleep 30 & done; wait", timeout_s=10)
        assert r.limit == "processes" and time.monotonic() - start < 8, (r.status, r.output)
        assert sb.cgroup.pids() == []  # every leftover sleeper was killed
        assert other.run("sleep 0.1 & sleep 0.1 & wait; echo ok", 5).output == "ok\n"
    assert _host_can_fork()


@needs_tmpfs
def test_filling_the_disk_hits_the_episode_quota(repo):
    with Sandbox(repo, limits=TREE) as sb, Sandbox(repo, limits=TREE) as other:
        r = sb.run("head -c 4000000 /dev/zero > a; head -c 100000000 /dev/zero > b", 10)
        assert r.limit == "disk" and "No space left on device" in r.output, r.status
        sizes = os.path.getsize(sb.path("a")) + os.path.getsize(sb.path("b"))
        assert sizes <= TREE.disk_bytes
        assert other.run("head -c 8000000 /dev/zero > c && echo ok", 5).output == "ok\n"
        sb.run("rm b", 5)  # freeing space makes the episode usable again
        assert sb.run("echo x > d && cat d", 5).output == "x\n"


def test_without_cgroups_episodes_fall_back_to_rlimits(monkeypatch, repo):
    monkeypatch.setattr(cgroups, "probe", lambda: ("", "simulated: not delegated"))
    with Sandbox(repo, limits=FAST) as sb:
        assert sb.cgroup is None
        r = sb.run("python3 -c 'x = bytearray(8 << 30)'", timeout_s=10)
        assert r.limit == "memory" and "MemoryError" in r.output  # RLIMIT_AS still holds


def test_special_files_and_oversized_repos_do_not_hang_grading(repo):
    from rl.envs import Task, grade_repo

    task = Task(
        id="t",
        prompt="x",
        files={},
        solution={},
        meta={"hidden_test_count": 1},
        hidden_tests={"test_main.py": "def test_main():\n    import main\n"},
    )
    with Sandbox(repo, limits=FAST) as sb:
        sb.run(
            "mkfifo pipe; python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'",
            5,
        )
        assert {"pipe", "sock"} <= set(os.listdir(sb.root))
        start = time.monotonic()
        grade = grade_repo(task, sb.root, timeout_s=20)  # copying a FIFO would block forever
        assert grade.all_pass and time.monotonic() - start < 10
        with Sandbox(sb.root) as copy:
            assert sorted(copy.skipped_files) == ["pipe", "sock"]
        sb.run("head -c 3000 /dev/zero > blob", 5)
        small = Limits(repo_bytes=2000)
        grade = grade_repo(task, sb.root, timeout_s=20, limits=small)
        assert grade.passed == 0 and grade.total == 1 and "over the 2000-byte limit" in grade.output


def test_failed_construction_leaves_nothing_behind(repo, tmp_path_factory):
    from rl.envs.isolation.sandbox import RepoTooLarge

    base = tmp_path_factory.mktemp("episodes")
    with pytest.raises(ValueError, match="is inside the repo"):
        Sandbox(repo, base_dir=str(repo))
    assert sorted(p.name for p in repo.iterdir()) == ["main.py", "pkg"]  # no episode dir left in it
    with pytest.raises(RepoTooLarge, match="over the 10-byte limit"):
        Sandbox(repo, limits=Limits(repo_bytes=10), base_dir=str(base))
    with pytest.raises(ValueError, match="outside the repository"):
        Sandbox.from_files({"ok.py": "", "../escape.py": ""}, base_dir=str(base))
    assert list(base.iterdir()) == []
    with Sandbox(repo, base_dir=str(base)):
        assert len(list(base.iterdir())) == 1
    assert list(base.iterdir()) == []


def test_cgroup_v2_layout_on_a_stand_in_tree(monkeypatch, tmp_path):
    # Stand-in for a delegated cgroup v2 tree (this dev machine has v1 only): checks the files the
    # v2 path writes and how it names a limit from memory.events / pids.events. Kernel enforcement
    # itself is covered by the cap tests above wherever cgroups work.
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids cpu\n")
    monkeypatch.setattr(cgroups, "ROOT", str(tmp_path))
    monkeypatch.setattr(cgroups, "_own_path", lambda controller: "/")
    group = cgroups.EpisodeCgroup("v2", memory_bytes=123 << 20, pids=17, cpus=1.5)
    [path] = group.dirs.values()
    read = lambda name: (tmp_path / path / name).read_text()
    assert (read("memory.max"), read("memory.swap.max")) == (str(123 << 20), "0")
    assert (read("pids.max"), read("cpu.max")) == ("17", "150000 100000")
    assert group.limit_hit() is None
    (tmp_path / path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.limit_hit() == "memory" and group.limit_hit() is None  # counted once
    (tmp_path / path / "pids.events").write_text("max 5\n")
    assert group.limit_hit() == "processes"
    r = subprocess.run(group.wrap(["/bin/sh", "-c", "echo $$"]), capture_output=True, text=True)
    assert read("cgroup.procs").split() == r.stdout.split()  # it joined, then exec'd the command


_WHICH_PYTHON = (
    "python3 -c 'import sys, pytest; print(sys.prefix, pytest.__version__)'; "
    "pytest --version 2>&1 | tail -1"
)


@pytest.mark.needs_bwrap
def test_sandbox_python_is_the_callers_interpreter(repo):
    """`python3` and `pytest` inside the sandbox are the interpreter the project runs under, with
    its packages: in a venv, the venv's (PATH once put the base interpreter's bin first)."""
    import sys

    with Sandbox(repo, limits=FAST) as sb:
        r = sb.run(_WHICH_PYTHON, timeout_s=20)
    assert r.ok, r.output
    prefix, version = r.output.splitlines()[0].split()
    assert prefix == os.path.realpath(sys.prefix)
    assert version == pytest.__version__ and r.output.splitlines()[1].endswith(pytest.__version__)


@pytest.mark.needs_bwrap
def test_sandbox_from_a_venv_under_tmp_runs_the_venvs_python(repo, tmp_path):
    """A venv under /tmp (as CI and newcomers make them) is visible inside the sandbox's private
    /tmp and leads its PATH: the sandbox's `python3` reports the venv's prefix. (The new venv
    reaches this interpreter's packages through a .pth file, enough to build the Sandbox.)"""
    import glob
    import sys
    import venv

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    # The new venv sees this interpreter's packages (which may be a venv's own, not the base's).
    (site,) = glob.glob(str(env_dir / "lib" / "python3*" / "site-packages"))
    pathlib.Path(site, "caller.pth").write_text("\n".join(sys.path[1:]) + "\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = (
        "from rl.envs import Sandbox, Limits\n"
        f"with Sandbox({str(repo)!r}, limits=Limits(cpu_s=10)) as sb:\n"
        "    print(sb.run(\"python3 -c 'import sys; print(sys.prefix)'\", timeout_s=20).output)\n"
    )
    out = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", script],
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [os.path.realpath(env_dir)], out.stdout
    assert os.path.realpath(env_dir) != os.path.realpath(sys.base_prefix)
