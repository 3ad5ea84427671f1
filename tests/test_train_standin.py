"""A tiny stand-in for model.Transformer written against MODEL_CONTRACT, plus its own checks.

Embedding -> top-1 routed dense "experts" (sigmoid router, non-trainable correction bias) -> LM
head, and an MTP head. Enough to exercise losses, sharding, bias updates and checkpoints without
model/. Imported by the other train tests (and by their subprocess scripts via sys.path).
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from train.model_api import ModelHandle


@dataclasses.dataclass(frozen=True)
class StandInConfig:
    vocab_size: int = 64
    d_model: int = 16
    num_attention_heads: int = 2
    max_position_embeddings: int = 64
    n_routed_experts: int = 4
    num_mtp_modules: int = 1
    dtype: str = "float32"
    balance_loss_coef: float = 0.01


class StandIn(nn.Module):
    cfg: StandInConfig

    @nn.compact
    def __call__(self, tokens, positions=None, segment_ids=None):
        c = self.cfg
        dt = jnp.dtype(c.dtype)
        p = lambda name, shape, spec, init=nn.initializers.normal(0.02): self.param(
            name, nn.with_logical_partitioning(init, spec), shape, jnp.float32
        )
        embed = p("embed", (c.vocab_size, c.d_model), ("vocab", "embed"))
        router = p("router", (c.d_model, c.n_routed_experts), ("embed", None))
        bias = p("router_bias", (1, c.n_routed_experts), (None, None), nn.initializers.zeros)
        experts = p("experts", (c.n_routed_experts, c.d_model, c.d_model), ("exp", "embed", "mlp"))
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
        return dict(
            logits=logits,
            mtp_logits=mtp_logits,
            expert_ids=choice[None, ..., None],
            expert_counts=counts,
            balance_loss=balance,
        )


class _Out:
    def __init__(self, d):
        self.__dict__.update(d)


def standin_handle(cfg: StandInConfig = StandInConfig()) -> ModelHandle:
    module = StandIn(cfg)

    def init_params(rng):
        return nn.unbox(module.init(rng, jnp.zeros((1, 4), jnp.int32))["params"])

    def apply(params, tokens, positions=None, segment_ids=None):
        return _Out(module.apply({"params": params}, tokens, positions, segment_ids))

    def logical_specs():
        boxed = jax.eval_shape(
            lambda: module.init(jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))
        )
        return nn.get_partition_spec(boxed)["params"]

    def trainable_mask(params):
        return {k: k != "router_bias" for k in params}

    n = sum(
        int(np.prod(s.shape))
        for s in jax.tree.leaves(jax.eval_shape(init_params, jax.random.PRNGKey(0)))
    )
    return ModelHandle(
        cfg=cfg,
        init_params=init_params,
        apply=apply,
        trainable_mask=trainable_mask,
        logical_specs=logical_specs,
        flops_per_token=lambda seq_len: 6.0 * n,
        count_params=lambda: (n, n),
        update_router_bias=_update_router_bias,
    )


def _update_router_bias(params, counts, rate):
    load = counts["main"].astype(jnp.float32)
    bias = params["router_bias"] + rate * jnp.sign(load.mean(-1, keepdims=True) - load)
    return {**params, "router_bias": bias}


STANDIN_RULES = (("vocab", "tensor"), ("embed", "fsdp"), ("mlp", "tensor"), ("exp", "expert"))


def test_standin_follows_contract_shapes():
    h = standin_handle()
    params = h.init_params(jax.random.PRNGKey(0))
    tokens = jnp.array([[1, 2, 3, 4, 5]])
    seg = jnp.array([[1, 1, 1, 0, 0]])
    out = h.apply(params, tokens, segment_ids=seg)
    assert out.logits.shape == (1, 5, 64) and out.logits.dtype == jnp.float32
    assert out.mtp_logits.shape == (1, 1, 5, 64)
    assert out.expert_counts.shape == (1, 4)
    assert int(out.expert_counts.sum()) == 3  # padding (segment 0) excluded
    specs = h.logical_specs()
    assert specs["experts"] == P("exp", "embed", "mlp")


def standin_setup(
    optimizer="adamw", lr=1e-2, steps=10, mtp_mode="ce", bias_rate=1e-3, cfg=None, balance=True
):
    """(handle, tx, loss_fn, bias_update) for the stand-in; shared by the train tests."""
    from train import losses, optim
    from train.step import router_bias_update

    h = standin_handle(cfg or StandInConfig())
    sched = optim.make_schedule(kind="cosine", peak_lr=lr, total_steps=steps, warmup_steps=2)
    ap = jax.eval_shape(h.init_params, jax.random.PRNGKey(0))
    tx = optim.make_optimizer(
        params=ap, trainable=h.trainable_mask(ap), schedule=sched, optimizer=optimizer
    )
    loss_fn = losses.make_lm_loss(h.apply, mtp_mode=mtp_mode, use_balance_loss=balance)
    bu = router_bias_update(h.update_router_bias, bias_rate) if bias_rate else None
    return h, tx, loss_fn, bu


def synthetic_batches(n, batch_size=8, seq_len=16, seed=0, vocab=64):
    from train import synthetic_data as sd

    it = sd.lm_batches(
        sd.synthetic_tokens(4000, vocab, seed), batch_size=batch_size, seq_len=seq_len, seed=seed
    )
    return [next(it) for _ in range(n)]


def tiny_run_config(steps=12, every=4, log_every=1):
    """configs/default.py shrunk for the stand-in (vocab 64 -> synthetic data)."""
    from configs import default

    c = default.get_config()
    c.train.update(
        steps=steps,
        batch_size=8,
        seq_len=16,
        warmup_steps=2,
        log_every=log_every,
        eval_every=steps,
        eval_batches=2,
        lr=1e-2,
    )
    c.data.source = "synthetic"
    c.checkpoint.every_steps = every
    c.rules = [list(r) for r in STANDIN_RULES]
    return c
