"""Where an asynchronous RL run's time goes: spans per process and thread, as a Chrome trace.

    tl = timeline.start(workdir, "sampler0")    # once per process (or role thread)
    with timeline.span("generate"):             # any code on the way: a no-op when not started
        ...
    timeline.merge(workdir)                     # -> <workdir>/timeline.json (chrome://tracing,
                                                #    ui.perfetto.dev)

Each process appends complete events ("ph": "X": name, start `ts` and duration `dur` in
microseconds since the epoch, pid, tid, the role in args) to <workdir>/timeline/<role>_<pid>.jsonl
as spans end (a killed process keeps what it wrote); `merge` joins every file into one Chrome
trace with process and thread names. Spans of one thread nest (a context manager's span closes
before the one around it), never overlap otherwise: `check` verifies it.

Span names (rl/sampling/sampler_process.py, rl/learning/batch_source.py, rl/sampling/rollout.py,
rl/stores/weight_store.py):
    sampler:  wait_trainer (backpressure: idle), generate (a play call), weight_fetch (a newer
              version downloaded and cast; inside generate when in flight), sandbox_wait (the
              coding driver waits for sandbox steps with no episode to decode: idle inside
              generate), put_groups
    trainer:  wait_batch (polling the rollout store for a batch: idle), train_step (the jitted
              step and its batch), publish (weights to the store), after_step (metrics, journal,
              progress)
IDLE names the idle spans; `idle_fractions` gives each role's idle share of its wall time.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import threading
import time

IDLE = ("wait_trainer", "wait_batch", "sandbox_wait")
_local = threading.local()  # the recorder of this thread (role threads in one process)
_process: list = [None]  # the process's recorder (threads that started none use it)


class Recorder:
    """Appends one thread-role's spans to its JSONL file (one file per role and process)."""

    def __init__(self, directory: str, role: str):
        os.makedirs(directory, exist_ok=True)
        self.role, self.pid = role, os.getpid()
        self.path = os.path.join(directory, f"{role}_{self.pid}.jsonl")
        self.lock = threading.Lock()
        self.file = open(self.path, "a")  # noqa: SIM115 (closed by close())

    def add(self, name: str, t0: float, t1: float, args: dict | None = None) -> None:
        event = {
            "name": name,
            "ph": "X",
            "ts": round(t0 * 1e6, 1),
            "dur": round((t1 - t0) * 1e6, 1),
            "pid": self.pid,
            "tid": threading.get_ident() % 2**31,
            "args": dict(args or {}, role=self.role, thread=threading.current_thread().name),
        }
        with self.lock:
            self.file.write(json.dumps(event) + "\n")
            self.file.flush()

    def close(self) -> None:
        with self.lock:
            self.file.close()


def start(workdir: str, role: str, *, thread_only: bool = False) -> Recorder:
    """Records this process's spans (thread_only: this thread's, as role `role`)."""
    rec = Recorder(os.path.join(workdir, "timeline"), role)
    _local.recorder = rec
    if not thread_only:
        _process[0] = rec
    return rec


def stop() -> None:
    rec = getattr(_local, "recorder", None)
    _local.recorder = None
    if _process[0] is rec:
        _process[0] = None
    if rec is not None:
        rec.close()


def recorder() -> Recorder | None:
    return getattr(_local, "recorder", None) or _process[0]


def adopt(rec: Recorder | None) -> None:
    """A helper thread records into its starter's recorder (e.g. a background weight fetch)."""
    _local.recorder = rec


@contextlib.contextmanager
def span(name: str, **args):
    """Times the block as one span of this thread's recorder (nothing when none is started)."""
    rec = recorder()
    t0 = time.time()
    try:
        yield
    finally:
        if rec is not None:
            rec.add(name, t0, time.time(), args)


def read(workdir: str) -> list[dict]:
    events = []
    for path in sorted(glob.glob(os.path.join(workdir, "timeline", "*.jsonl"))):
        with open(path) as f:
            events += [json.loads(line) for line in f if line.strip()]
    return events


def merge(workdir: str) -> str:
    """Every process's spans -> <workdir>/timeline.json (Chrome trace, with process and thread
    name metadata); -> its path."""
    events = sorted(read(workdir), key=lambda e: e["ts"])
    meta, seen = [], set()
    for e in events:
        key = (e["pid"], e["tid"])
        if key in seen:
            continue
        seen.add(key)
        role = e["args"]["role"]
        meta.append({"name": "process_name", "ph": "M", "pid": e["pid"], "args": {"name": role}})
        name = f"{role}:{e['args']['thread']}"
        meta.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": e["pid"],
                "tid": e["tid"],
                "args": {"name": name},
            }
        )
    path = os.path.join(workdir, "timeline.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"traceEvents": meta + events, "displayTimeUnit": "ms"}, f)
    os.replace(path + ".tmp", path)
    return path


def check(trace: dict) -> None:
    """Raises ValueError naming the first event that breaks the schema: complete events with
    name, ts, dur >= 0, pid, tid and a role; within a thread, spans nest or are disjoint."""
    by_thread: dict = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "M":
            continue
        for k in ("name", "ph", "ts", "dur", "pid", "tid"):
            if k not in e:
                raise ValueError(f"timeline: event {e} has no {k!r}")
        if e["ph"] != "X" or e["dur"] < 0 or "role" not in e.get("args", {}):
            raise ValueError(f"timeline: event {e} is not a complete span with a role")
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for spans in by_thread.values():
        # sorted by start, longest first: an open stack of enclosing spans
        stack: list[dict] = []
        for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
            end = e["ts"] + e["dur"]
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + 1e-3:
                stack.pop()
            if stack and end > stack[-1]["ts"] + stack[-1]["dur"] + 1e-3:
                raise ValueError(f"timeline: {e['name']} overlaps {stack[-1]['name']} in a thread")
            stack.append(e)


def idle_fractions(events: list[dict]) -> dict[str, float]:
    """{role: idle seconds / wall seconds} over top-level spans of each role: idle = IDLE spans
    (outermost, per thread), wall = first span start to last span end of the role."""
    out = {}
    for role in sorted({e["args"]["role"] for e in events}):
        mine = [e for e in events if e["args"]["role"] == role]
        wall = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
        outer = {id(e) for e in _outermost(mine)}
        # outermost idle spans, and the sandbox waits nested in a play call
        idle = sum(
            e["dur"]
            for e in mine
            if (id(e) in outer and e["name"] in IDLE)
            or (id(e) not in outer and e["name"] == "sandbox_wait")
        )
        out[role] = idle / wall if wall > 0 else 0.0
    return out


def _outermost(spans: list[dict]) -> list[dict]:
    """Spans not inside another span of the same thread."""
    out, ends = [], {}
    for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
        key = (e["pid"], e["tid"])
        if e["ts"] + e["dur"] <= ends.get(key, -1.0) + 1e-3:
            continue
        out.append(e)
        ends[key] = e["ts"] + e["dur"]
    return out
