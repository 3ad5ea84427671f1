"""Orbax, imported with this project's one write setting (every checkpoint goes through here).

Orbax's replica-parallel save (its default off GPU) splits each replicated array into one slice per
replica so that replicas share the writing. Each slice is an eager `jax.lax.slice_in_dim`
dispatched from Python, so for the many small arrays of a model (norms, biases, router weights,
the optimizer's moments of each) the split costs far more than the bytes it shares: on 8 simulated
CPU devices the tiny model's resume test spent 10-30% of its CPU in those slices. Arrays whose
per-replica slice is under MIN_REPLICA_SLICE_BYTES are written whole by one replica, as on GPU;
larger ones still share the write.
"""

from __future__ import annotations

import logging

import jax
import orbax.checkpoint as ocp

MIN_REPLICA_SLICE_BYTES = 1 << 20  # 1 MiB: a chosen threshold, not a measured crossover


class _OverrideNotice(logging.Filter):
    """Orbax logs a WARNING whenever a handler replaces its default, which this one always does."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Type handler registry" not in record.getMessage()


_notice = _OverrideNotice()
logging.getLogger("absl").addFilter(_notice)
ocp.type_handlers.register_type_handler(
    jax.Array,
    ocp.type_handlers.ArrayHandler(min_slice_bytes_for_replica_parallel=MIN_REPLICA_SLICE_BYTES),
    override=True,
)
logging.getLogger("absl").removeFilter(_notice)

__all__ = ["ocp", "MIN_REPLICA_SLICE_BYTES"]
