"""Shared by tests/test_bench_tiny.py and tests/test_bench_tiny_rl.py: a bench script run at its
smoke scale (`--tiny`) in its own process, and its CPU logged (BENCH_TINY_LOG)."""

import os
import resource
import subprocess
import sys

from xla_env import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# one CPU device unless a bench sets more, and the suite's cheap compiles (tests/xla_env.py)
ENV = dict(os.environ, XLA_FLAGS=xla_flags(), PYTHONPATH=ROOT)
NUM = r"([-+]?(?:\d[\d,]*\.?\d*(?:e[-+]?\d+)?|nan|inf))"


def log_cpu(script: str, t0) -> None:
    """With BENCH_TINY_LOG=FILE, appends 'script cpu_s' (user + sys of the bench's processes):
    how the smoke runs' cost is measured (wall time on a shared machine says little)."""
    if os.environ.get("BENCH_TINY_LOG"):
        t1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = t1.ru_utime - t0.ru_utime + t1.ru_stime - t0.ru_stime
        with open(os.environ["BENCH_TINY_LOG"], "a") as f:
            f.write(f"{script} {cpu:.1f}\n")


def run_tiny(script: str, *args: str, timeout: int = 1800) -> str:
    """`python bench/SCRIPT --tiny ARGS` from the repo root -> its stdout; a failure shows both
    streams' tails."""
    cmd = [sys.executable, os.path.join("bench", script), "--tiny", *args]
    t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True,
                       timeout=timeout)  # fmt: skip
    log_cpu(script, t0)
    assert p.returncode == 0, (
        f"{script}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    )
    return p.stdout
