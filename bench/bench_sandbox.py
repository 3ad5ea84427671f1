"""Sandbox overhead and concurrent-episode throughput.

    python3 bench/bench_sandbox.py [--commands 200] [--episodes 8]

1. Per-command overhead: median wall time of `true` through Sandbox.run minus the median of the
   same command run bare with subprocess (`/bin/sh -c true`), measured interleaved in one run, for
   each backend that works here (bwrap; rlimit fallback). Target: <= 50 ms.
2. Throughput: 8 episodes (oracle policy through the token-level CodingEnv: list_files, write_file,
   run_tests, submit, hidden-test grading) run one after another, then all 8 concurrently in
   threads; reports episodes/s for both and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data.tokenizers import ByteTokenizer  # noqa: E402
from rl.envs import CodingEnv, OraclePolicy, Sandbox, backend, generate_tasks, run_episode  # noqa: E402


def command_overhead(n: int) -> dict[str, tuple[float, float, float]]:
    """backend -> (median sandboxed ms, p90 sandboxed ms, median bare ms), interleaved so both see
    the same machine load."""
    out = {}
    for name in dict.fromkeys([backend(), "rlimit"]):
        with Sandbox(backend_name=name) as box:
            box.run("true", 5)  # warm up
            boxed, bare = [], []
            for _ in range(n):
                t = time.perf_counter()
                box.run("true", 5)
                boxed.append(time.perf_counter() - t)
                t = time.perf_counter()
                subprocess.run(
                    ["/bin/sh", "-c", "true"], stdin=subprocess.DEVNULL, capture_output=True
                )
                bare.append(time.perf_counter() - t)
        p90 = statistics.quantiles(boxed, n=10)[-1]
        out[name] = (1e3 * statistics.median(boxed), 1e3 * p90, 1e3 * statistics.median(bare))
    return out


def episodes(n: int, workers: int) -> tuple[float, list[float]]:
    tok = ByteTokenizer()
    tasks = generate_tasks(n, seed=123, difficulties=(1,))

    def one(task):
        return run_episode(CodingEnv(tok), task, OraclePolicy(tok, task)).reward

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        rewards = list(pool.map(one, tasks))
    return time.perf_counter() - t, rewards


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=8)
    args = parser.parse_args()
    print(
        f"backend: {backend()}  cpus: {os.cpu_count()}  python: {sys.version.split()[0]}  "
        f"load average at start: {os.getloadavg()[0]:.1f}"
    )
    print(
        "\n| backend | median `true` sandboxed (ms) | p90 sandboxed (ms) | median bare (ms) | median overhead (ms) |"
    )
    print("|---|---|---|---|---|")
    for name, (boxed, p90, bare) in command_overhead(args.commands).items():
        print(f"| {name} | {boxed:.1f} | {p90:.1f} | {bare:.1f} | {boxed - bare:.1f} |")
    serial_s, serial_rewards = episodes(args.episodes, workers=1)
    conc_s, conc_rewards = episodes(args.episodes, workers=args.episodes)
    n = args.episodes
    print(f"\n| {n} episodes (oracle, d1) | wall (s) | episodes/s | mean reward |")
    print("|---|---|---|---|")
    print(
        f"| sequential | {serial_s:.2f} | {n / serial_s:.2f} | {statistics.mean(serial_rewards):.2f} |"
    )
    print(
        f"| {n} concurrent | {conc_s:.2f} | {n / conc_s:.2f} | {statistics.mean(conc_rewards):.2f} |"
    )
    print(
        f"\nconcurrent / sequential throughput: {serial_s / conc_s:.2f}x  "
        f"(load average at end: {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
