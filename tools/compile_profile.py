"""Where a test run's time goes: a pytest plugin that records, per test, the CPU it used and every
JAX compile it caused (tracing, lowering, XLA compile, persistent-cache hit), and a summary.

    PYTHONPATH=$PWD COMPILE_PROFILE=/tmp/prof python -m pytest -q -p tools.compile_profile tests
    python tools/compile_profile.py /tmp/prof        # per file, per program, per test

Each process (xdist worker) appends to its own PREFIX.<worker>.<pid>.tsv; rows are
`test id, kind, program, seconds`, kind one of: trace | lower | xla | hit (a program read from the
persistent cache instead of an XLA compile; its seconds are the read) | cpu (the test's own CPU
seconds, its waited-for subprocesses included) | wall (the test's wall seconds; its program column
is the wall-clock time it started, so the summary can say how busy the workers were). The seconds
JAX logs for compiles are wall time: under load they run long, so compare them with each other,
not with the CPU column.
"""

from __future__ import annotations

import collections
import glob
import logging
import os
import re
import resource
import sys
import time

_PATTERNS = (
    ("trace", re.compile(r"Finished tracing (\S+) for jit in ([0-9.e-]+) sec")),
    (
        "lower",
        re.compile(r"Finished jaxpr to MLIR module conversion jit\((.*)\) in ([0-9.e-]+) sec"),
    ),
    ("xla", re.compile(r"Finished XLA compilation of jit\((.*)\) in ([0-9.e-]+) sec")),
    ("hit", re.compile(r"Persistent compilation cache hit for '(?:jit_)?([^']*)'")),
)
_state = {"test": "session", "out": None}


def parse(message: str) -> tuple[str, str, float] | None:
    """A JAX compile log message -> (kind, program, seconds), or None if it is not one."""
    for kind, pattern in _PATTERNS:
        m = pattern.search(message)
        if m:
            return kind, m.group(1), float(m.group(2)) if kind != "hit" else 0.0
    return None


class _CompileLog(logging.Handler):
    def emit(self, record):
        row = parse(record.getMessage())
        if row is None:
            return
        kind, program, seconds = row
        if kind == "hit":  # JAX then logs the read as "Finished XLA compilation": one hit row
            _state["hit"] = program
            return
        if kind == "xla" and _state.pop("hit", None) == program:
            kind = "hit"
        _write(_state["test"], kind, program, seconds)


def _write(test: str, kind: str, program: str, seconds: float) -> None:
    _state["out"].write(f"{test}\t{kind}\t{program}\t{seconds:.4f}\n")
    _state["out"].flush()


def _cpu() -> float:
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_configure(config):
    import jax

    prefix = os.environ.get("COMPILE_PROFILE", "/tmp/compile_profile")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _state["out"] = open(f"{prefix}.{worker}.{os.getpid()}.tsv", "a")
    jax.config.update("jax_log_compiles", True)
    # One handler on JAX's root logger: the compile messages come from several of its modules.
    logger = logging.getLogger("jax")
    logger.addHandler(_CompileLog(level=logging.DEBUG))
    logger.setLevel(logging.DEBUG)


def pytest_runtest_protocol(item, nextitem):
    _state["test"] = item.nodeid
    _state["cpu0"] = _cpu()
    _state["wall0"] = time.time()


def pytest_runtest_logfinish(nodeid, location):
    if "cpu0" not in _state:  # pytest may call this twice for one test: one row each
        return
    _write(nodeid, "cpu", "-", _cpu() - _state.pop("cpu0"))
    start = _state.pop("wall0")
    _write(nodeid, "wall", f"{start:.3f}", time.time() - start)


def summarize(prefix: str, top: int = 25) -> str:
    """The tables of a profile: per test file and per program, compile seconds and CPU."""
    by_file = collections.defaultdict(collections.Counter)
    by_program = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    spans = []  # (start, end) of every test, over all workers
    for path in sorted(glob.glob(f"{prefix}.*.tsv")):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 4:
                    continue
                test, kind, program, seconds = parts
                if kind == "wall":
                    spans.append((float(program), float(program) + float(seconds)))
                    continue
                by_file[test.split("::")[0]][kind] += float(seconds)
                totals[kind] += float(seconds)
                if kind != "cpu":
                    by_program[program][kind] += float(seconds)
                    by_program[program][kind + " n"] += 1
    out = [
        f"CPU {totals['cpu']:.0f} s; compile (wall) trace {totals['trace']:.0f} s, lower "
        f"{totals['lower']:.0f} s, XLA {totals['xla']:.0f} s",
        occupancy(spans),
        "",
        f"{'file':48s} {'cpu':>7s} {'trace':>7s} {'lower':>7s} {'xla':>7s}",
    ]
    for name, c in sorted(by_file.items(), key=lambda kv: -kv[1]["cpu"])[:top]:
        out.append(
            f"{name:48s} {c['cpu']:7.1f} {c['trace']:7.1f} {c['lower']:7.1f} {c['xla']:7.1f}"
        )
    out += ["", f"{'program':40s} {'compile s':>9s} {'XLA runs':>8s} {'cache hits':>10s}"]
    ranked = sorted(
        by_program.items(), key=lambda kv: -(kv[1]["trace"] + kv[1]["lower"] + kv[1]["xla"])
    )
    for name, c in ranked[:top]:
        seconds = c["trace"] + c["lower"] + c["xla"]
        out.append(f"{name[:40]:40s} {seconds:9.1f} {c['xla n']:8d} {c['hit n']:10d}")
    return "\n".join(out)


def occupancy(spans: list[tuple[float, float]]) -> str:
    """How busy the workers were: tests running at once, averaged over the run's wall time (from
    the first test's start to the last one's end; collection before is not in it), and how long
    only one test ran (the tail a slow last file makes)."""
    if not spans:
        return "no wall rows (a profile from before they were written)"
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    running, last, alone = 0, events[0][0], 0.0
    for t, step in events:
        if running == 1:
            alone += t - last
        running, last = running + step, t
    wall = events[-1][0] - events[0][0]
    busy = sum(b - a for a, b in spans)
    return (
        f"tests ran {wall:.0f} s of wall time, {busy / max(wall, 1e-9):.2f} at once on average; "
        f"one alone for {alone:.0f} s"
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/compile_profile.py PREFIX   (COMPILE_PROFILE of the run)")
    print(summarize(sys.argv[1]))
