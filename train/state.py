"""The one TrainState for every stage (pretraining, SFT, RL).

Non-trainable state (the MoE correction bias) lives inside `params`, as the model defines it;
the optimizer leaves it alone (label 'frozen') and the step updates it from expert loads.
`rng` is a raw uint32[2] key so checkpoints hold plain arrays.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax


@flax.struct.dataclass
class TrainState:
    step: jax.Array  # int32 scalar: batches consumed (skipped steps included)
    params: Any  # float32 master params (plain nested dict)
    opt_state: Any
    rng: jax.Array  # uint32[2]
    skipped_steps: jax.Array  # int32: steps skipped for a non-finite loss or gradient
    nonfinite_streak: jax.Array  # int32: consecutive skipped steps (the loop stops after K)
    tx: optax.GradientTransformation = flax.struct.field(pytree_node=False)


def create_train_state(params: Any, tx: optax.GradientTransformation, rng: jax.Array) -> TrainState:
    """Pure: jit it with out_shardings to create the state directly sharded."""
    zero = jnp.zeros((), jnp.int32)
    return TrainState(
        step=zero,
        params=params,
        opt_state=tx.init(params),
        rng=rng,
        skipped_steps=zero,
        nonfinite_streak=zero,
        tx=tx,
    )
