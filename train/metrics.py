"""Throughput, MFU, the measured matmul peak, and the log line."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp


def _batched_matmul(n: int, dtype, devices):
    """(run, flops per run): one n x n matmul per device as one sharded batched matmul, compiled."""
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    sharding = NamedSharding(Mesh(devices, ("d",)), P("d"))
    x = jax.device_put(jnp.ones((len(devices), n, n), dtype), sharding)
    f = jax.jit(lambda a: jnp.einsum("bij,bjk->bik", a, a), out_shardings=sharding)
    f(x).block_until_ready()  # compile outside the timed runs
    return (lambda: f(x).block_until_ready()), 2.0 * n**3 * len(devices)


def _best_seconds(run, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def matmul_peak(n: int = 1024, dtype=jnp.float32, repeats: int = 5, devices=None) -> float:
    """FLOP/s of an n x n matmul run on `devices` at once (one sharded batched matmul), best of
    `repeats`. The MFU denominator on CPU, where no datasheet peak applies.

    devices=None: every local device, times the number of processes (hosts are alike): on
    simulated CPU devices that is what the shared cores deliver together, not n_devices x the
    single-device figure. devices=[d]: one device alone.
    """
    hosts = jax.process_count() if devices is None else 1
    devices = list(jax.local_devices() if devices is None else devices)
    run, flops = _batched_matmul(n, dtype, devices)
    return flops / _best_seconds(run, repeats) * hosts


def peak_matmul_size(cfg) -> int:
    """n for the MFU's reference matmul: the power of two at or above the model's largest weight
    dimension (vocab, hidden, ffn), within [512, 2048]: never a smaller matmul than the model's own
    (a small one runs below the hardware's peak and inflates MFU), and no slower to time than a
    2048^3 one (17 GFLOP, ~40 ms per device at 440 GFLOP/s). tiny: 512; small: 2048."""
    largest = max(cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.moe_intermediate_size)
    return min(2048, max(512, 1 << (int(largest) - 1).bit_length()))


class MatmulPeak:
    """The MFU denominator during training: the best FLOP/s of an n^3 matmul in the run's dtype on
    the trainer's devices over every repetition timed so far. Load only ever slows a repetition
    down, so the best one is the least depressed; the peak only rises (`measure` again at a pause,
    or when the model itself ran faster than the peak, which proves the peak was depressed)."""

    def __init__(self, n: int, dtype, devices=None):
        self.hosts = jax.process_count() if devices is None else 1
        self.devices = list(jax.local_devices() if devices is None else devices)
        self.n, self.dtype = n, jnp.dtype(dtype)
        self._run, self._flops_per_run = _batched_matmul(n, self.dtype, self.devices)
        self.flops, self.repetitions = 0.0, 0

    def measure(self, repeats: int) -> float:
        seconds = _best_seconds(self._run, repeats)
        self.flops = max(self.flops, self._flops_per_run / seconds * self.hosts)
        self.repetitions += repeats
        return self.flops

    def mfu(self, achieved_flops: float) -> float:
        """achieved / peak, re-measuring first when achieved exceeds the peak; capped at 1 (a
        model that still outruns the re-measured peak shows 1, never more)."""
        if achieved_flops > self.flops:
            self.measure(3)
        return min(achieved_flops / self.flops, 1.0)

    def describe(self) -> str:
        devices = len(self.devices) * self.hosts
        where = f" x {devices} devices" if devices > 1 else ""
        return (
            f"{self.flops / 1e9:.0f} GFLOP/s ({self.dtype.name} {self.n}^3 matmul{where}, "
            f"best of {self.repetitions})"
        )


# Dense bf16 peak FLOP/s per chip from the vendors' datasheets (no sparsity), by a substring of
# jax's `device_kind`, most specific first ("H100 PCIe" before "H100").
DATASHEET_BF16_PEAK = (
    ("H100 PCIe", 756e12),
    ("H100", 989e12),  # SXM; "NVIDIA H100 80GB HBM3"
    ("H200", 989e12),
    ("GH200", 989e12),
    ("H800", 989e12),
    ("A100", 312e12),
    ("B200", 2250e12),
    ("L40S", 362e12),
    ("TPU v4", 275e12),
    ("TPU v5 lite", 197e12),  # v5e
    ("TPU v5e", 197e12),
    ("TPU v5p", 459e12),
    ("TPU v5", 459e12),  # v5p reports "TPU v5"
    ("TPU v6 lite", 918e12),  # v6e (Trillium)
    ("TPU v6e", 918e12),
)


def datasheet_peak(device_kind: str) -> float | None:
    """Dense bf16 FLOP/s of one chip of this kind, or None when the table has no entry."""
    for name, flops in DATASHEET_BF16_PEAK:
        if name in device_kind:
            return flops
    return None


class DatasheetPeak:
    """The MFU denominator on GPU/TPU: the chip's datasheet bf16 peak times the chips, whatever the
    run's dtype (MFU is conventionally quoted against the bf16 peak). Same interface as
    MatmulPeak; nothing to measure."""

    def __init__(self, device_kind: str, per_chip: float, chips: int):
        self.device_kind, self.per_chip, self.chips = device_kind, per_chip, chips
        self.flops = per_chip * chips

    def measure(self, repeats: int) -> float:
        return self.flops

    def mfu(self, achieved_flops: float) -> float:
        return achieved_flops / self.flops

    def describe(self) -> str:
        where = f" x {self.chips} chips" if self.chips > 1 else ""
        return f"{self.per_chip / 1e12:.0f} TFLOP/s ({self.device_kind} datasheet bf16 peak{where})"


def mfu_peak(n: int, dtype, devices=None):
    """The MFU denominator for a run on `devices` (None: every device of every process): the
    datasheet peak on a GPU/TPU the table knows, else (CPU, or an unknown chip) a MatmulPeak
    measured with 5 repetitions of an n^3 matmul in `dtype`."""
    chips = list(jax.local_devices() if devices is None else devices)
    kind = chips[0].device_kind
    per_chip = datasheet_peak(kind) if chips[0].platform in ("gpu", "tpu") else None
    if per_chip is not None:
        hosts = jax.process_count() if devices is None else 1
        return DatasheetPeak(kind, per_chip, len(chips) * hosts)
    peak = MatmulPeak(n, dtype, devices)
    peak.measure(5)
    return peak


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops_all_devices: float) -> float:
    return tokens_per_s * flops_per_token / peak_flops_all_devices


def _speed(m, peak_note: str) -> str:
    """tok/s, MFU and step time; a line with no timed step yet (the first step of a run is its
    compilation, excluded from the window) says so instead of printing nan."""
    if m["step_time_s"] != m["step_time_s"]:  # nan
        return "(speed from the next line: the first step compiles)"
    return (
        f"tok/s {m['tokens_per_s']:.0f} mfu {100 * m['mfu']:.2f}%{peak_note} "
        f"step_time {1000 * m['step_time_s']:.0f}ms"
    )


def log_line(step: int, total: int, m: dict, extra_keys=(), peak: str = "") -> str:
    """One progress line; total 0 = no known end (a run that ends with its batch source);
    `extra_keys`: further scalars of `m` to show (a batch source's, e.g. RL's mean reward);
    `peak`: what the MFU is relative to (MatmulPeak.describe())."""
    peak_note = f" of {peak}" if peak else ""
    eta = m.get("eta_s")
    eta_s = f" eta {eta / 60:.1f}m" if eta is not None else ""
    progress = (
        f"step {step}/{total} ({100.0 * step / total:.0f}%{eta_s})" if total else f"step {step}"
    )
    return (
        f"{progress} loss {m['loss']:.4f} "
        + (f"(ce {m['ce']:.4f}) " if "ce" in m else "")
        + f"lr {m['lr']:.2e} gnorm {m['grad_norm']:.3f} "
        + _speed(m, peak_note)
        + (f" skipped {int(m['skipped_total'])}" if m.get("skipped_total") else "")
        + "".join(f" {k} {m[k]:.4g}" for k in extra_keys if k in m)
    )
