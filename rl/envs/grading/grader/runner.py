"""Trusted grading runner: runs inside the sandbox as `python3 -I -S run.py`, nonce on stdin.

It imports only the standard library and its own read-only dir's runner_process.py (-I -S:
no site, no cwd, no repo on sys.path), so nothing the agent wrote runs in this process. It marks
itself non-dumpable first, so the episode's other processes (same uid) cannot ptrace it or open
its /proc/<pid>/fd, mem or environ. Each hidden test file then runs in a fresh interpreter
(child.py) whose single JSON report comes back through a pipe this process holds; the summary goes
to this process's stdout, framed by the nonce the host passed on stdin (read before any child
exists, so no child can learn it).

Everything a child reports is untrusted (agent code ran in it): this runner only relays it, with
what it saw on the channel (bytes beyond one JSON object, a child that died without reporting).
"""

import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # -I leaves the script's dir off sys.path; the dir is read-only and ours
sys.dont_write_bytecode = True
import _grader_runner_process as runner_process  # noqa: E402  (rl/envs/grading/grader/runner_process.py)

REPORT_CAP = 1 << 20  # a report larger than this is garbage on the channel
LOG_BUDGET = 8000  # characters of the children's output kept for the log (the summary must
# fit the tail of Sandbox.run's capture: the manifest's summary_cap, see _fit)


def _drain(fd: int, cap: int, out: list) -> None:
    """Reads fd to EOF into out[0] (bytes), keeping at most cap + 1 bytes (so overflow shows)."""
    data = bytearray()
    with os.fdopen(fd, "rb", buffering=0) as f:
        while chunk := f.read(1 << 16):
            if len(data) <= cap:
                data += chunk[: cap + 1 - len(data)]
    out.append(bytes(data))


def run_file(here: str, rel: str, repo: str, deadline: float, log_tail: int) -> dict:
    proc, r = runner_process.start_child(
        os.path.join(here, "child.py"),
        [os.path.join(here, "tests", rel)],
        repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    report, log = [], []
    threads = [
        threading.Thread(target=_drain, args=(r, REPORT_CAP, report), daemon=True),
        threading.Thread(target=_drain, args=(proc.stdout.fileno(), 1 << 16, log), daemon=True),
    ]
    for t in threads:
        t.start()
    timed_out = False
    try:
        proc.wait(max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
    runner_process.kill_child(proc)  # with its whole group (leftover helpers of the test run)
    for t in threads:
        t.join(0.5)  # an escaped grandchild may hold a pipe open; what it writes later is ignored
    out = {"exit": proc.returncode, "timeout": timed_out, "report": None, "problems": []}
    out["log"] = (log[0] if log else b"").decode("utf-8", "replace")[-log_tail:]
    raw = report[0] if report else b""
    if len(raw) > REPORT_CAP:
        out["problems"].append(f"report channel carried over {REPORT_CAP} bytes")
    elif raw:
        try:
            out["report"] = json.loads(raw)
        except ValueError:  # e.g. two objects written on the channel: someone else wrote to it
            out["problems"].append(f"report channel carried {len(raw)} bytes that are not one JSON")
    return out


def main() -> None:
    nonce = sys.stdin.readline().strip()
    sys.stdin.close()
    sealed = runner_process.seal()
    with open(os.path.join(HERE, "manifest.json")) as f:
        manifest = json.load(f)
    deadline = time.monotonic() + float(manifest["budget_s"])
    tail = max(200, LOG_BUDGET // max(len(manifest["files"]), 1))
    files = {
        rel: run_file(HERE, rel, manifest["repo"], deadline, tail) for rel in manifest["files"]
    }
    summary = _fit({"sealed": sealed, "files": files}, int(manifest["summary_cap"]))
    sys.stdout.write(f"\nRLGRADE {nonce} {summary}\n")
    sys.stdout.flush()


def _fit(summary: dict, cap: int) -> str:
    """The summary as one JSON line of at most `cap` characters, so the host always finds it: the
    largest reports are dropped (a problem, i.e. tampering, for their files), then the logs."""
    text = json.dumps(summary)
    entries = sorted(summary["files"].values(), key=lambda e: -len(json.dumps(e["report"])))
    for entry in entries:
        if len(text) <= cap:
            break
        if entry["report"] is not None:
            size = len(json.dumps(entry["report"]))
            entry["report"] = None
            entry["problems"].append(f"report of {size} characters does not fit the summary")
            text = json.dumps(summary)
    for entry in summary["files"].values():
        if len(text) <= cap:
            break
        entry["log"] = ""
        text = json.dumps(summary)
    return text


if __name__ == "__main__":
    main()
