"""What a trusted grading runner does with processes, for both sandboxed graders (the hidden-test
runner, rl/envs/grading/grader/runner.py, and eval's HumanEval runner,
eval/humaneval_grader/runner.py):
seal itself against the sandbox's other processes, start an untrusted child that reports on a pipe
only the runner holds, and kill the child's whole session. Standard library only, imports nothing
of the project: in a sandbox it is installed beside the runner (rl/envs/grading/grader/__init__.py
says under which name).
"""

import os
import signal
import subprocess
import sys

PR_SET_DUMPABLE = 4  # prctl option (linux/prctl.h)


def seal() -> bool:
    """Marks this process non-dumpable: the sandbox's other processes (same uid) can no longer
    ptrace it or read its /proc/<pid>/mem, fd or environ. False when the call failed (the caller
    reports it: it never grades as if sealed)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def start_child(
    script: str, args: list[str], cwd: str, *, stdin, stdout, stderr
) -> tuple[subprocess.Popen, int]:
    """`python -I script *args REPORT_FD` in a session of its own; returns (the process, the read
    end of its report pipe). Only the child holds the write end, so no other process of the
    sandbox writes to it unless the child hands it on."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", script, *args, str(write_fd)],
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, read_fd


def kill_child(proc: subprocess.Popen) -> None:
    """SIGKILL to the child's whole session (the helpers it started die with it), then reaps it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
