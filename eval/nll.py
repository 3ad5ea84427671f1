"""Held-out NLL and bits/byte of a checkpoint, at one or more context lengths.

The held-out split is the one a training run with the given data config holds out (data/'s
pipeline, `heldout_fraction`), rebuilt at each context length; the numbers come from the
trainer's own pieces (`train.trainer.build`'s eval loss, mesh and rules, `jit_eval_step`,
`train.batches.data_iterators`' held-out batches, `train.evaluate.evaluate`; nothing re-implemented
here). With the stage's own batch shape (train.seq_len, train.batch_size, train.eval_batches:
`resolve_shape`, the eval config's defaults) they are exactly the training loop's held-out figure
for the same params.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import jax
import numpy as np

import model
from train import batches as train_batches
from train import sharding as shd
from train import trainer
from train.evaluate import evaluate


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
    run = trainer.build(run_config, cfg=cfg)  # the training run's eval loss, mesh and rules
    params_sh = shd.param_shardings(model.param_logical_specs(cfg), run.mesh, run.rules)
    eval_fn = trainer.jit_eval_step(run.eval_loss_fn, params_sh, run.mesh, run.rules)
    params = jax.device_put(params, params_sh)
    mesh = run.mesh
    metrics, items, n_targets = {}, [], 0
    for length in context_lengths:
        batches = held_out_batches(run_config, cfg.vocab_size, length, batch_size, num_batches)
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


def held_out_batches(run_config, vocab_size: int, seq_len: int, batch_size: int, num_batches: int):
    """The held-out batches a training run with this config, at this batch shape, evaluates on."""
    c = copy.deepcopy(run_config)
    c.train.seq_len, c.train.batch_size, c.train.eval_batches = seq_len, batch_size, num_batches
    return train_batches.data_iterators(c, vocab_size)[1]


def resolve_shape(
    lengths: list[int], batch_size: int, batches: int, train_config
) -> tuple[list[int], int, int]:
    """(context lengths, batch size, batches) of an eval.nll section; each empty/0 field takes the
    stage's training value (train.seq_len, train.batch_size, train.eval_batches), so the defaults
    evaluate exactly the batches the training loop's held-out figure was computed on."""
    return (
        lengths or [train_config.seq_len],
        batch_size or train_config.batch_size,
        batches or train_config.eval_batches,
    )
