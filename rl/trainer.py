"""The RL trainer's pieces: optimizer, TrainState, the jitted RL step (train_step with the RL loss)
and reference logprobs for the KL term. Single-device here; the sharded path is train/'s
(jit with in/out shardings) and takes the same loss.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax

from rl.losses import make_rl_loss, model_apply, token_logprobs
from train.state import TrainState, create_train_state
from train.step import train_step


def make_optimizer(params, lr: float, *, clip_norm: float = 1.0, b2: float = 0.99):
    """AdamW without weight decay on trainable leaves; non-trainable ones (the MoE correction
    bias) get zero updates."""
    from model import trainable_mask  # pylint: disable=import-outside-toplevel

    labels = jax.tree.map(lambda t: "train" if t else "frozen", trainable_mask(params))
    return optax.chain(
        optax.clip_by_global_norm(clip_norm),
        optax.multi_transform(
            {"train": optax.adam(lr, b2=b2), "frozen": optax.set_to_zero()}, labels
        ),
    )


def init_state(params, lr: float, seed: int) -> TrainState:
    tx = make_optimizer(params, lr)
    state = create_train_state(params, tx, jax.random.PRNGKey(seed))
    # Distinct buffers per leaf (the counters share one zero; the step donates the state).
    return jax.tree.map(lambda x: jnp.array(x, copy=True), state)


def jit_rl_step(cfg, rl):
    """rl: the `rl` config block (temperature, tis_c, ppo_clip, kl_beta, kl_mode, max_tokens,
    valid_vocab, router_replay, microbatches). -> jitted (state, batch) -> (state, metrics), state
    donated."""
    loss_fn = make_rl_loss(
        model_apply(cfg),
        norm_tokens=rl.max_tokens,
        temperature=rl.temperature,
        tis_c=rl.tis_c,
        ppo_clip=rl.ppo_clip,
        kl_beta=rl.kl_beta,
        kl_mode=rl.kl_mode,
        valid_vocab=rl.valid_vocab,
        router_replay=rl.router_replay,
    )
    bias_update = None  # replayed routing: the sampler's choices, not the trainer's, made the loads
    if rl.get("bias_update_rate", 0.0) and cfg.num_moe_layers:
        from model import update_router_bias  # pylint: disable=import-outside-toplevel

        rate = rl.bias_update_rate
        bias_update = lambda p, counts: update_router_bias(p, counts["main"], rate=rate)  # noqa: E731
    step = functools.partial(
        train_step,
        loss_fn=loss_fn,
        bias_update=bias_update,
        num_microbatches=rl.get("microbatches", 1),
    )
    return jax.jit(step, donate_argnums=0)


def jit_ref_logprobs(cfg, temperature: float, valid_vocab: int = 0):
    """(ref_params, batch) -> [B,T] logprobs of the targets under the frozen reference (replayed
    routing), for the KL term; only built when kl_beta > 0."""
    apply = model_apply(cfg)

    def ref(params, batch):
        forced = jnp.moveaxis(batch["forced_experts"], 1, 0)
        out = apply(
            params,
            batch["tokens"],
            positions=batch["positions"],
            segment_ids=batch["segment_ids"],
            forced_experts=forced if forced.shape[0] else None,
        )
        return token_logprobs(out.logits, batch["targets"], temperature, valid_vocab)[0]

    return jax.jit(ref)
