"""bench/bench_moe.py at the smoke scale (--tiny, a few seconds): it imports against today's
model.moe, every implementation's loss matches the blocked reference, and each reports a time."""

import os
import re
import subprocess
import sys

from xla_env import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, XLA_FLAGS=xla_flags(), PYTHONPATH=ROOT)


def test_tiny_run_matches_blocked_and_times_every_impl():
    cmd = [sys.executable, "bench/bench_moe.py", "--tiny", "--impls", "blocked,ragged,dense"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=ENV)
    assert p.returncode == 0, p.stderr[-2000:]
    off = re.search(r"max \|loss - blocked\| over blocked,ragged,dense: (\S+)", p.stdout)
    assert off and float(off.group(1)) < 1e-3, p.stdout
    for name in ("dense matmul FFN", "blocked", "ragged", "dense"):
        row = re.search(rf"^\s*{re.escape(name)}: +(\S+) ms", p.stdout, re.M)
        assert row and float(row.group(1)) > 0, (name, p.stdout)
