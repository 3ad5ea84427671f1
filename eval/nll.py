"""Held-out NLL and bits/byte of a checkpoint, at one or more context lengths.

The held-out split is the one a training run with the given data config holds out (data/'s
pipeline, `heldout_fraction`), rebuilt at each context length; the numbers come from train/'s
eval step and `evaluate` (nothing re-implemented here), so they equal what the training loop
prints at that length.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import jax
import numpy as np

from eval import _train_api


def heldout_nll(
    cfg,
    params,
    run_config,
    context_lengths: Sequence[int],
    *,
    batch_size: int,
    num_batches: int,
    progress=None,
) -> tuple[dict, list[dict], dict]:
    """(metrics {'nll@L', 'bits_per_byte@L'}, items (one per L), tokens {'target': n})."""
    for length in context_lengths:
        if not 1 < length <= cfg.max_position_embeddings:
            raise ValueError(
                f"nll: context length {length} is not in 2..{cfg.max_position_embeddings} "
                "(the model's max_position_embeddings)"
            )
    eval_fn, params_sh, mesh = _train_api.jit_eval_fn(cfg, dict(run_config.mesh))
    params = jax.device_put(params, params_sh)
    evaluate = _train_api.evaluate_fn()
    metrics, items, n_targets = {}, [], 0
    for length in context_lengths:
        c = copy.deepcopy(run_config)
        c.train.seq_len, c.train.batch_size, c.train.eval_batches = length, batch_size, num_batches
        batches = _train_api.held_out_batches(c, cfg.vocab_size)
        result = evaluate(eval_fn, params, batches, mesh)
        result.pop("targets")  # counted below on the host batches, per length
        targets = int(sum(np.sum(b["loss_mask"]) for b in batches))
        if not targets:  # an NLL over nothing would read as a perfect 0
            raise ValueError(
                f"nll: no held-out targets at context length {length} (with "
                "data.avoid_splitting, documents longer than the context are skipped)"
            )
        n_targets += targets
        for k, v in result.items():
            metrics[f"{k}@{length}"] = v
        items.append(dict(id=f"context={length}", context_length=length, targets=targets, **result))
        if progress is not None:
            progress.update(1, f"context {length}: nll {result['nll']:.4f}")
    return metrics, items, dict(target=n_targets)
