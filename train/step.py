"""Pure train and eval steps. No jit here: the loop jits them with shardings and donation, and a
notebook can call them as they are.

    state, metrics = train_step(state, batch, loss_fn)

Gradient accumulation: the batch [B, ...] is split into `num_microbatches` strided microbatches
(row r goes to microbatch r % n, so a batch sharded over rows stays local) and scanned; each
microbatch's mean loss and gradient are weighted by its token count, which reproduces the
full-batch token mean.

A step whose loss or gradient norm is not finite changes nothing but the counters (the batch is
consumed): non-finite values never reach params, the optimizer state or a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

import model
from train.state import TrainState

BiasUpdate = Callable[[Any, Any], Any]  # (params, global expert counts pytree) -> params


def split_microbatches(batch: dict, n: int) -> dict:
    def split(x):
        if x.shape[0] % n:
            raise ValueError(f"batch rows {x.shape[0]} not divisible by {n} microbatches")
        x = x.reshape(
            (x.shape[0] // n, n) + x.shape[1:]
        )  # [B/n, n, ...]: row r -> microbatch r % n
        return jnp.swapaxes(x, 0, 1)  # [n, B/n, ...]

    return jax.tree.map(split, batch)


def _grads_and_aux(params, batch, rng, loss_fn, num_microbatches):
    """Token-weighted mean loss/grads/metrics over microbatches, and summed expert counts."""
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    if num_microbatches == 1:
        (loss, aux), grads = grad_fn(params, batch, rng)
        return loss, grads, aux["metrics"], aux["weight"], aux["expert_counts"]

    micro = split_microbatches(batch, num_microbatches)
    rngs = jax.random.split(rng, num_microbatches)

    def body(carry, xs):
        mb, mb_rng = xs
        (loss, aux), grads = grad_fn(params, mb, mb_rng)
        w = aux["weight"]
        acc_loss, acc_grads, acc_metrics, acc_w, acc_counts = carry
        acc_grads = jax.tree.map(lambda a, g: a + w * g, acc_grads, grads)
        acc_metrics = jax.tree.map(lambda a, m: a + w * m, acc_metrics, aux["metrics"])
        acc_counts = jax.tree.map(jnp.add, acc_counts, aux["expert_counts"])
        return (acc_loss + w * loss, acc_grads, acc_metrics, acc_w + w, acc_counts), None

    first = jax.tree.map(lambda x: x[0], micro)
    _, aux_shape = jax.eval_shape(loss_fn, params, first, rng)
    zeros = lambda t: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), t)
    init = (
        jnp.zeros((), jnp.float32),
        jax.tree.map(jnp.zeros_like, params),
        zeros(aux_shape["metrics"]),
        jnp.zeros((), jnp.float32),
        zeros(aux_shape["expert_counts"]),
    )
    (loss, grads, metrics, w, counts), _ = jax.lax.scan(body, init, (micro, rngs))
    inv = 1.0 / jnp.maximum(w, 1.0)
    return (
        loss * inv,
        jax.tree.map(lambda g: g * inv, grads),
        jax.tree.map(lambda m: m * inv, metrics),
        w,
        counts,
    )


def router_bias_update(rate: float, main: bool = True) -> BiasUpdate:
    """DeepSeek-V3 aux-loss-free balancing of model/'s routers (bias += rate * sign(mean - load)),
    main stack (unless main=False: a frozen trunk, train.trainable='mtp') and MoE MTP blocks.

    `counts` are global: inside jit the batch is one global array, so the model's sum over tokens
    already covers every shard (XLA inserts the cross-device reduction).
    """
    return lambda params, counts: model.update_router_bias(
        params, counts["main"] if main else None, counts.get("mtp"), rate=rate
    )


def train_step(
    state: TrainState,
    batch: dict,
    loss_fn: Callable,
    *,
    num_microbatches: int = 1,
    bias_update: BiasUpdate | None = None,
) -> tuple[TrainState, dict]:
    rng, step_rng = jax.random.split(state.rng)
    step_rng = jax.random.fold_in(step_rng, state.step)
    loss, grads, metrics, weight, counts = _grads_and_aux(
        state.params, batch, step_rng, loss_fn, num_microbatches
    )
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

    def apply(operands):
        params, opt_state, grads = operands
        updates, new_opt_state = state.tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if bias_update is not None and counts is not None:
            new_params = bias_update(new_params, counts)
        return new_params, new_opt_state

    # A cond, not a `where(finite, new, old)` over every leaf: the skipped branch is never computed,
    # and the taken one updates the donated buffers in place (the select cost ~15 ms/step on CPU in
    # extra passes and copies of params and moments, bench/RESULTS.md). On GPU, XLA reads the
    # predicate back to the host (one small sync per step, before the optimizer's kernels).
    new_params, new_opt_state = jax.lax.cond(
        finite, apply, lambda o: (o[0], o[1]), (state.params, state.opt_state, grads)
    )
    skipped = (~finite).astype(jnp.int32)
    new_state = state.replace(
        step=state.step + 1,
        params=new_params,
        opt_state=new_opt_state,
        rng=rng,
        skipped_steps=state.skipped_steps + skipped,
        nonfinite_streak=jnp.where(finite, 0, state.nonfinite_streak + 1),
    )
    metrics = dict(
        metrics,
        loss=loss,
        grad_norm=grad_norm,
        tokens=weight,
        skipped=skipped,
        nonfinite_streak=new_state.nonfinite_streak,
    )
    return new_state, metrics


def eval_step(params: Any, batch: dict, loss_fn: Callable) -> dict:
    """Sums (not means) so the caller can add them over batches and hosts, then divide."""
    loss, aux = loss_fn(params, batch, jax.random.PRNGKey(0))
    w = aux["weight"]
    return {"ce_sum": aux["metrics"]["ce"] * w, "loss_sum": loss * w, "weight": w}
