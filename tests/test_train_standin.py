"""A tiny stand-in model for tests about the step's and the checkpointer's mechanics alone
(purity, microbatch arithmetic, skipped steps, sharding of the state, keep-N and fallback): each
runs in well under a second here. Whatever depends on the model itself (losses on MLA/MoE/MTP,
resume of a real run, optimizer partitioning) is tested on model/'s `tiny` preset instead.

Embedding -> top-1 routed dense "experts" (sigmoid router, non-trainable correction bias) -> LM
head, and an MTP head; it returns a model.ModelOutput, so train.losses.lm_loss applies as is.
"""

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from model import ModelOutput


@dataclasses.dataclass(frozen=True)
class StandInConfig:
    vocab_size: int = 64
    d_model: int = 16
    n_routed_experts: int = 4
    num_mtp_modules: int = 1
    dtype: str = "float32"
    balance_loss_coef: float = 0.01


class StandIn(nn.Module):
    cfg: StandInConfig

    @nn.compact
    def __call__(self, tokens, segment_ids=None):
        c = self.cfg
        dt = jnp.dtype(c.dtype)
        p = lambda name, shape, spec, init=nn.initializers.normal(0.02): self.param(
            name, nn.with_logical_partitioning(init, spec), shape, jnp.float32
        )
        embed = p("embed", (c.vocab_size, c.d_model), ("vocab", "embed"))
        router = p("router", (c.d_model, c.n_routed_experts), ("embed", None))
        bias = p("router_bias", (1, c.n_routed_experts), (None, None), nn.initializers.zeros)
        experts = p(
            "experts", (c.n_routed_experts, c.d_model, c.d_model), ("expert", "embed", "mlp")
        )
        norm = p("norm_scale", (c.d_model,), (None,), nn.initializers.ones)
        head = p("head", (c.d_model, c.vocab_size), ("embed", "vocab"))
        mtp = p("mtp_head", (c.num_mtp_modules, c.d_model, c.vocab_size), (None, "embed", "vocab"))
        x = embed[tokens].astype(dt)  # [B,T,D]
        scores = jax.nn.sigmoid(jnp.einsum("BTD,DE->BTE", x, router.astype(dt)).astype(jnp.float32))
        choice = jnp.argmax(scores + jax.lax.stop_gradient(bias[0]), axis=-1)  # [B,T]
        onehot = jax.nn.one_hot(choice, c.n_routed_experts)  # [B,T,E]
        y = jnp.einsum("BTD,EDF->BTEF", x, experts.astype(dt))
        x = x + jnp.einsum("BTEF,BTE->BTF", y, (onehot * scores).astype(dt))
        x = x * norm.astype(dt)
        logits = jnp.einsum("BTD,DV->BTV", x, head.astype(dt)).astype(jnp.float32)
        mtp_logits = jnp.einsum("BTD,MDV->MBTV", x, mtp.astype(dt)).astype(jnp.float32)
        valid = (segment_ids > 0) if segment_ids is not None else jnp.ones(tokens.shape, bool)
        counts = jnp.sum(onehot * valid[..., None], axis=(0, 1)).astype(jnp.int32)[None]  # [1,E]
        frac = counts[0] / jnp.maximum(counts.sum(), 1)
        balance = (
            c.balance_loss_coef * c.n_routed_experts * jnp.sum(frac * jnp.mean(scores, axis=(0, 1)))
        )
        return ModelOutput(
            logits=logits,
            mtp_logits=mtp_logits,
            expert_ids=choice[None, ..., None],
            expert_counts=counts,
            balance_loss=balance,
        )


STANDIN_RULES = (("vocab", "tensor"), ("embed", "fsdp"), ("mlp", "tensor"), ("expert", "expert"))


@dataclasses.dataclass(frozen=True)
class StandInSetup:
    init_fn: Callable  # rng -> params
    logical_specs: dict
    apply: Callable  # (params, batch) -> ModelOutput
    tx: object
    loss_fn: Callable  # (params, batch, rng) -> (loss, aux)
    bias_update: Callable | None


def _bias_update(rate):
    def update(params, counts):
        load = counts["main"].astype(jnp.float32)
        bias = params["router_bias"] + rate * jnp.sign(load.mean(-1, keepdims=True) - load)
        return {**params, "router_bias": bias}

    return update


def standin_setup(
    optimizer="adamw", lr=1e-2, steps=10, mtp_mode="ce", bias_rate=1e-3, cfg=None, balance=True
) -> StandInSetup:
    from train import losses, optim

    module = StandIn(cfg or StandInConfig())
    init_fn = lambda rng: nn.unbox(module.init(rng, jnp.zeros((1, 4), jnp.int32))["params"])
    boxed = jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32)))
    specs = nn.get_partition_spec(boxed)["params"]
    sched = optim.make_schedule(kind="cosine", peak_lr=lr, total_steps=steps, warmup_steps=2)
    tx = optim.make_optimizer(
        params=jax.eval_shape(init_fn, jax.random.PRNGKey(0)),
        logical_specs=specs,
        schedule=sched,
        optimizer=optimizer,
    )
    apply = lambda params, batch: module.apply(
        {"params": params}, batch["tokens"], batch.get("segment_ids")
    )
    kw = dict(mtp_mode=mtp_mode, use_balance_loss=balance)
    loss_fn = lambda params, batch, rng: losses.lm_loss(apply(params, batch), batch, **kw)
    return StandInSetup(
        init_fn, specs, apply, tx, loss_fn, _bias_update(bias_rate) if bias_rate else None
    )


def synthetic_batches(n, batch_size=8, seq_len=16, seed=0, vocab=64):
    from train import synthetic_data as sd

    it = sd.lm_batches(
        sd.synthetic_tokens(4000, vocab, seed), batch_size=batch_size, seq_len=seq_len, seed=seed
    )
    return [next(it) for _ in range(n)]


def test_standin_output_shapes_and_specs():
    s = standin_setup()
    params = s.init_fn(jax.random.PRNGKey(0))
    batch = {"tokens": jnp.array([[1, 2, 3, 4, 5]]), "segment_ids": jnp.array([[1, 1, 1, 0, 0]])}
    out = s.apply(params, batch)
    assert out.logits.shape == (1, 5, 64) and out.logits.dtype == jnp.float32
    assert out.mtp_logits.shape == (1, 1, 5, 64)
    assert out.expert_counts.shape == (1, 4)
    assert int(out.expert_counts.sum()) == 3  # padding (segment 0) excluded
    assert s.logical_specs["experts"] == P("expert", "embed", "mlp")
