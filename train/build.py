"""State, shardings and jitted steps for a mesh. Used by the run builder, tests and bench.

`init_fn` is rng -> params, pure and unjitted (model.params.init_params_unjitted(cfg, .) for the
real model): it is jitted here together with the optimizer state, with out_shardings.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from train import sharding as shd
from train.state import TrainState, create_train_state
from train.step import eval_step, train_step

InitFn = Callable[[Any], Any]  # rng -> params


@contextlib.contextmanager
def mesh_context(mesh, rules):
    """Trace under the mesh and logical rules so the model's activation constraints resolve."""
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        yield


def abstract_state(init_fn: InitFn, tx: optax.GradientTransformation) -> TrainState:
    return jax.eval_shape(
        lambda rng: create_train_state(init_fn(rng), tx, rng), jax.random.PRNGKey(0)
    )


def state_shardings(init_fn: InitFn, logical_specs: Any, tx, mesh, rules) -> TrainState:
    p_sh = shd.param_shardings(logical_specs, mesh, rules)
    return shd.state_shardings(abstract_state(init_fn, tx), p_sh, mesh)


def init_state(init_fn: InitFn, tx, state_sh: TrainState, mesh, rules, seed: int) -> TrainState:
    """State created directly sharded (jit with out_shardings: no full copy on one device)."""

    def init(seed_arr):
        rng = jax.random.PRNGKey(seed_arr)
        init_rng, state_rng = jax.random.split(rng)
        return create_train_state(init_fn(init_rng), tx, state_rng)

    with mesh_context(mesh, rules):
        return jax.jit(init, out_shardings=state_sh)(seed)


def jit_train_step(
    loss_fn: Callable,
    state_sh: TrainState,
    mesh,
    rules,
    *,
    num_microbatches: int = 1,
    bias_update=None,
) -> Callable:
    step = functools.partial(
        train_step, loss_fn=loss_fn, num_microbatches=num_microbatches, bias_update=bias_update
    )
    jitted = jax.jit(
        step,
        in_shardings=(state_sh, shd.batch_sharding(mesh)),
        out_shardings=(state_sh, NamedSharding(mesh, P())),
        donate_argnums=0,
    )

    def run(state, batch):
        with mesh_context(mesh, rules):
            return jitted(state, batch)

    run.jitted = jitted
    return run


def jit_eval_step(loss_fn: Callable, params_sh: Any, mesh, rules) -> Callable:
    jitted = jax.jit(
        functools.partial(eval_step, loss_fn=loss_fn),
        in_shardings=(params_sh, shd.batch_sharding(mesh)),
        out_shardings=NamedSharding(mesh, P()),
    )

    def run(params, batch):
        with mesh_context(mesh, rules):
            return jitted(params, batch)

    return run
