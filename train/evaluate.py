"""Held-out evaluation: mean next-token NLL and bits/byte over a list of batches.

One implementation for the training loop, eval/ and benches:

    eval_fn = trainer.jit_eval_step(loss_fn, params_shardings, mesh, rules)
    evaluate(eval_fn, params, batches, mesh)   # {'nll': ..., 'bits_per_byte': ...}
"""

from __future__ import annotations

import math

import jax
import numpy as np

from train import sharding as shd

BATCH_KEYS = ("tokens", "targets", "segment_ids", "positions", "loss_mask")
EVAL_KEYS = BATCH_KEYS + ("target_bytes",)  # UTF-8 bytes per target, for bits per byte


def evaluate(eval_fn, params, batches, mesh) -> dict[str, float]:
    """Held-out {'nll': mean next-token NLL (nats), 'bits_per_byte', 'targets': count} over masked
    targets; with no targets at all, {'nll': nan, 'targets': 0}.

    `eval_fn(params, global batch)` returns sums {'ce_sum', 'weight'} (train.trainer.jit_eval_step);
    `batches` are this host's numpy batches in the data contract.
    bits/byte = sum(nll * mask) / ln 2 / sum(target_bytes * mask): tokenizer-independent, so stages
    and tokenizers compare. Without target_bytes in the batches (stand-in data) it is left out.
    Byte sums are taken on the host batches: with several hosts each holds its own part, so they
    are added across processes like the device sums are.
    """
    nll_sum = weight = byte_sum = 0.0
    with_bytes = bool(batches) and all("target_bytes" in b for b in batches)
    for b in batches:
        model_batch = {k: b[k] for k in BATCH_KEYS}
        s = jax.device_get(eval_fn(params, shd.global_batch(model_batch, mesh)))
        nll_sum, weight = nll_sum + float(s["ce_sum"]), weight + float(s["weight"])
        if with_bytes:
            byte_sum += float(np.sum(np.asarray(b["target_bytes"], np.float64) * b["loss_mask"]))
    if with_bytes and jax.process_count() > 1:
        from jax.experimental import multihost_utils

        byte_sum = float(np.sum(multihost_utils.process_allgather(np.float64(byte_sum))))
    if weight == 0:  # no held-out targets (e.g. a tiny corpus): no number rather than a fake 0
        return {"nll": float("nan"), "targets": 0.0}
    out = {"nll": nll_sum / weight, "targets": weight}
    if with_bytes:
        out["bits_per_byte"] = nll_sum / math.log(2) / max(byte_sum, 1.0)
    return out
