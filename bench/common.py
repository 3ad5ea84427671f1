"""Timing helpers shared by the benchmarks: median wall time of a jitted call, and the machine's
float32 matmul peak measured in the same process (the denominator of every MFU we report)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np


def time_fn(fn, *args, repeats: int = 5, warmup: int = 1) -> float:
    """Median seconds per call of an already-jitted fn (outputs blocked on)."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def matmul_peak_flops(n: int = 2048, dtype=jnp.float32, repeats: int = 5) -> float:
    """FLOP/s of one n x n x n matmul on the default device (2 n^3 FLOPs)."""
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), dtype)
    f = jax.jit(lambda a, b: a @ b)
    return 2 * n**3 / time_fn(f, a, b, repeats=repeats)


def interleaved_min_times(fns: dict, args: dict, rounds: int = 5) -> dict:
    """Best-of-`rounds` seconds per fn, the fns run in turn each round so background load on this
    shared machine hits them alike; the minimum is the least-disturbed run."""
    for name, fn in fns.items():
        jax.block_until_ready(fn(*args[name]))  # compile + warm up
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args[name]))
            best[name] = min(best[name], time.perf_counter() - start)
    return best
