"""HumanEval harness check as a benchmark: the 164 canonical solutions through the same sandboxed
execution the model's completions get (expect 164/164, pass@1 = 1.0), plus the sandbox throughput.

    python bench/bench_eval.py                  # all 164, 2 worker threads
    python bench/bench_eval.py --limit=20 --workers=4
    python bench/bench_eval.py --tiny           # smoke: the first 3 problems

Prints passed/total, wall time, executions/s and the load average before and after (the machine
may be shared: absolute times are only comparable at similar load).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import parse_tiny  # noqa: E402
from eval import humaneval  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout_s", type=float, default=10.0)
    a = parse_tiny(p, dict(limit=3))
    from rl.envs import backend

    problems = humaneval.load_problems(limit=a.limit)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    metrics, items, _ = humaneval.run_suite(
        humaneval.canonical, problems, [1], timeout_s=a.timeout_s, workers=a.workers
    )
    wall = time.perf_counter() - t0
    load1 = os.getloadavg()
    passed = sum(it["correct"] for it in items)
    failed = [it["id"] + ":" + it["statuses"][0] for it in items if not it["correct"]]
    print(f"sandbox backend: {backend()}")
    print(f"canonical solutions: {passed}/{len(items)} passed, pass@1 = {metrics['pass@1']:.4f}")
    if failed:
        print("failed: " + ", ".join(failed))
    print(
        f"wall {wall:.1f} s, {len(items) / wall:.2f} executions/s with {a.workers} workers; "
        f"load average before {load0[0]:.1f}, after {load1[0]:.1f}"
    )


if __name__ == "__main__":
    main()
