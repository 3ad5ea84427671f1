"""Throughput, MFU, the measured matmul peak, and the log line."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp


def matmul_peak(n: int = 1024, dtype=jnp.float32, repeats: int = 5, devices=None) -> float:
    """FLOP/s of an n x n matmul run on `devices` at once (one sharded batched matmul), best of
    `repeats`. The MFU denominator on CPU, where no datasheet peak applies.

    devices=None: every local device, times the number of processes (hosts are alike): on
    simulated CPU devices that is what the shared cores deliver together, not n_devices x the
    single-device figure. devices=[d]: one device alone.
    """
    from jax.sharding import Mesh, NamedSharding  # pylint: disable=import-outside-toplevel
    from jax.sharding import PartitionSpec as P

    hosts = jax.process_count() if devices is None else 1
    devices = list(jax.local_devices() if devices is None else devices)
    sharding = NamedSharding(Mesh(devices, ("d",)), P("d"))
    x = jax.device_put(jnp.ones((len(devices), n, n), dtype), sharding)
    f = jax.jit(lambda a: jnp.einsum("bij,bjk->bik", a, a), out_shardings=sharding)
    f(x).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(x).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 * len(devices) / best * hosts


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops_all_devices: float) -> float:
    return tokens_per_s * flops_per_token / peak_flops_all_devices


def log_line(step: int, total: int, m: dict, extra_keys=()) -> str:
    """One progress line; total 0 = no known end (a run that ends with its batch source);
    `extra_keys`: further scalars of `m` to show (a batch source's, e.g. RL's mean reward)."""
    eta = m.get("eta_s")
    eta_s = f" eta {eta / 60:.1f}m" if eta is not None else ""
    progress = (
        f"step {step}/{total} ({100.0 * step / total:.0f}%{eta_s})" if total else f"step {step}"
    )
    return (
        f"{progress} loss {m['loss']:.4f} "
        + (f"(ce {m['ce']:.4f}) " if "ce" in m else "")
        + f"lr {m['lr']:.2e} gnorm {m['grad_norm']:.3f} tok/s {m['tokens_per_s']:.0f} "
        f"mfu {100 * m['mfu']:.2f}% step_time {1000 * m['step_time_s']:.0f}ms"
        + (f" skipped {int(m['skipped_total'])}" if m.get("skipped_total") else "")
        + "".join(f" {k} {m[k]:.4g}" for k in extra_keys if k in m)
    )
