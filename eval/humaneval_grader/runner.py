"""Trusted HumanEval runner: `exec python3 -I -S runner.py` inside the sandbox, one JSON request on
stdin: {"nonce", "prompt", "test", "entry_point", "solution", "budget_s"}.

No completion code ever runs in this process. It reads its request (the nonce and the hidden test
never touch the episode's files), marks itself non-dumpable (the sandbox's other processes, same
uid, cannot ptrace it or read its /proc/<pid>/mem, fd or environ), then starts the candidate server
(child.py: the prompt + completion, untrusted) and runs the problem's own `check` HERE, with the
candidate replaced by a proxy that sends plain arguments to the server and decodes its plain
answers (wire.py: exact builtin types only; the process handling is shared with the hidden-test
runner, rl/envs/grading/grader/runner_process.py). Only after `check` has returned, and the server
is killed, does it print `HUMANEVAL-VERDICT <nonce> pass`. Everything else prints a failing verdict,
or nothing (a killed runner): the host accepts a pass only with its own nonce.
"""

import importlib
import json
import os
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_beside(name: str):
    """A module installed beside this file (-I leaves the script's dir off sys.path)."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    sys.dont_write_bytecode = True  # the grader dir is read-only
    return importlib.import_module(name)


wire = _load_beside("wire")
runner_process = _load_beside("_grader_runner_process")  # rl/envs/grading/grader/runner_process.py

VERDICT = "HUMANEVAL-VERDICT"


class CandidateFailed(Exception):
    """The candidate raised, died, answered garbage or ran past the budget."""


class CandidateTimeout(CandidateFailed):
    pass


class Candidate:
    """Stands in for the entry point inside `check`: each call is one round trip to the server."""

    def __init__(self, solution: str, entry_point: str, deadline: float):
        self.deadline = deadline
        self.proc, self.responses = runner_process.start_child(
            os.path.join(HERE, "child.py"),
            [solution, entry_point],
            os.path.dirname(solution),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.pending = b""
        self._receive()  # {"ready": true} once the program has loaded

    def __call__(self, *args):
        try:
            self.proc.stdin.write(wire.dumps_line({"args": wire.encode(list(args))}))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise CandidateFailed("the candidate process is gone") from None
        return self._receive()

    def _receive(self):
        try:
            message = wire.loads_line(self._read_line())
            if "error" in message:
                raise CandidateFailed(f"candidate raised {str(message['error'])[:200]}")
            return wire.decode(message["value"]) if "value" in message else None
        except (ValueError, KeyError) as e:
            raise CandidateFailed(f"malformed answer ({e})"[:200]) from None

    def _read_line(self) -> bytes:
        while b"\n" not in self.pending:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise CandidateTimeout("time budget spent")
            ready, _, _ = select.select([self.responses], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.responses, 1 << 16)
            if not chunk:
                raise CandidateFailed("the candidate process exited")
            self.pending += chunk
            if len(self.pending) > wire.MAX_MESSAGE_BYTES:
                raise CandidateFailed("answer too large")
        line, self.pending = self.pending.split(b"\n", 1)
        return line

    def close(self) -> None:
        runner_process.kill_child(self.proc)  # its whole session: helpers it started too


def grade(request: dict) -> str:
    """'pass' only when the problem's check returned; else 'timeout' or 'fail <reason>'."""
    deadline = time.monotonic() + float(request["budget_s"])
    candidate = None
    try:
        candidate = Candidate(
            os.path.abspath(request["solution"]), request["entry_point"], deadline
        )
        namespace = {"__name__": "humaneval_check"}
        exec(request["prompt"], namespace)  # the prompt's helpers (e.g. poly for find_zero)
        namespace[request["entry_point"]] = candidate
        exec(request["test"], namespace)
        namespace["check"](candidate)
    except CandidateTimeout:
        return "timeout"
    except CandidateFailed as e:
        return f"fail {e}"
    except Exception as e:  # an assert of check, or check choking on a wrong answer's type
        return f"fail {type(e).__name__} in check"
    finally:
        if candidate is not None:
            candidate.close()
    return "pass"


def main() -> None:
    request = json.loads(sys.stdin.readline())
    sys.stdin.close()
    verdict = grade(request) if runner_process.seal() else "fail runner could not seal itself"
    one_line = " ".join(verdict.split())
    sys.stdout.write(f"\n{VERDICT} {request['nonce']} {one_line}\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
