"""Losses for LM training. All in float32; all pure; each returns a masked mean and its weight.

A loss function for `train_step` has the signature
    loss_fn(params, batch, rng) -> (loss, aux)
with aux = {'weight': tokens the loss averages over, 'metrics': {name: scalar},
            'expert_counts': {'main': int32 [n_moe_layers, E], 'mtp': [M, E]} or None}.
`make_lm_loss(cfg)` is the LM loss on model/'s Transformer; `lm_loss(out, batch)` the same terms on
any model.ModelOutput (the loop-mechanics stand-in in tests builds its loss from it).
`weight` lets the step average microbatches exactly as one big batch would.

Shapes: B batch, T sequence, V vocab, M MTP depth.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

import model
from model import ModelOutput, context


def _masked_mean(x, mask):
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def cross_entropy(logits, targets, mask):
    """Mean next-token NLL over mask; logits [B,T,V] f32, targets [B,T], mask [B,T].

    NLL = logsumexp(logits) - logits[target], the target logit picked by a compare against an iota
    rather than a gather: its backward is then one fused elementwise pass instead of a scatter into
    a zeroed [B,T,V] buffer (head + loss fwd+bwd 27.1 -> 24.7 ms on CPU, bench/RESULTS_LOG.md)."""
    logits = logits.astype(jnp.float32)
    vocab = jnp.arange(logits.shape[-1], dtype=targets.dtype)
    target_logit = jnp.sum(jnp.where(vocab == targets[..., None], logits, 0.0), axis=-1)  # [B,T]
    nll = jax.nn.logsumexp(logits, axis=-1) - target_logit
    return _masked_mean(nll, mask)


def z_loss(logits, mask):
    """Mean of logsumexp(logits)^2 (PaLM): keeps the softmax normalizer near 1."""
    lse = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
    return _masked_mean(lse**2, mask)


def _shift_left(x, k, fill):
    """x[:, t] <- x[:, t + k] along axis 1, padding the last k columns with `fill`."""
    pad = jnp.full(x.shape[:1] + (k,) + x.shape[2:], fill, x.dtype)
    return jnp.concatenate([x[:, k:], pad], axis=1)


def mtp_mask(loss_mask, segment_ids, depth):
    """Where MTP head `depth` (0-based) has a valid target.

    Head k at position t predicts token t+k+2 = targets[:, t+k+1]; that target must be in the loss
    mask and in the same packed document as position t (equal segment id).
    """
    k = depth + 1
    same_doc = segment_ids == _shift_left(segment_ids, k, 0)
    return _shift_left(loss_mask, k, 0.0) * same_doc * (segment_ids > 0)


def mtp_cross_entropy(mtp_logits, targets, loss_mask, segment_ids):
    """Mean over heads of CE on shifted targets; mtp_logits [M,B,T,V]."""
    losses = []
    for depth in range(mtp_logits.shape[0]):
        shifted = _shift_left(targets, depth + 1, 0)
        losses.append(
            cross_entropy(mtp_logits[depth], shifted, mtp_mask(loss_mask, segment_ids, depth))
        )
    return jnp.mean(jnp.stack(losses))


def mtp_self_distillation(mtp_logits, logits, loss_mask, segment_ids):
    """Mean over heads of KL(p_main || p_mtp), the teacher being the stop-gradient main head.

    The main head at position t+k+1 predicts the same token (t+k+2) as MTP head k at position t,
    so the teacher distribution is the main head's, shifted left by k+1. Only MTP heads get
    gradients from this loss (Composer trains its speculative heads this way).
    """
    teacher_logp = jax.nn.log_softmax(jax.lax.stop_gradient(logits), axis=-1)
    losses = []
    for depth in range(mtp_logits.shape[0]):
        t_logp = _shift_left(teacher_logp, depth + 1, 0.0)
        s_logp = jax.nn.log_softmax(mtp_logits[depth].astype(jnp.float32), axis=-1)
        kl = jnp.sum(jnp.exp(t_logp) * (t_logp - s_logp), axis=-1)
        losses.append(_masked_mean(kl, mtp_mask(loss_mask, segment_ids, depth)))
    return jnp.mean(jnp.stack(losses))


def _expert_counts(out: ModelOutput):
    """{'main': [n_moe_layers, E], 'mtp': [M, E] (MoE MTP blocks, when run)}, or None (dense)."""
    counts = {"main": out.expert_counts, "mtp": out.mtp_expert_counts}
    counts = {k: v for k, v in counts.items() if v is not None}
    return counts or None


def forced_experts(batch: dict):
    """The routing a batch replays, as the model's forward takes it. batch['forced_experts']
    (optional): int32 [B, n_moe_layers, T, k], the one layout for every loss (the LM loss here, the
    RL loss in rl/learning/grpo.py): batch axis first, so it shards and splits into microbatches
    like every other key, then a record's experts [n_moe_layers, T, k] (rl/episodes/records.py). ->
    [n_moe_layers, B, T, k] (the layer axis first, as nn.scan takes it), or None: absent, or
    n_moe_layers = 0 (a dense model, nothing to replay)."""
    forced = batch.get("forced_experts")
    if forced is None or forced.shape[1] == 0:
        return None
    return jnp.moveaxis(forced, 1, 0)  # [B,n,T,k] -> [n,B,T,k]


def zigzag_batch(batch: dict, cp: int) -> dict:
    """The batch in context parallelism's zig-zag token order (model/context.py): every [B, T, ...]
    array on its axis 1, forced_experts [B, n, T, k] on its T axis (2)."""
    if cp == 1:
        return batch
    forced = batch.get("forced_experts")
    out = context.to_zigzag({k: v for k, v in batch.items() if k != "forced_experts"}, cp)
    if forced is not None:
        order = context.zigzag_order(batch["tokens"].shape[1], cp)
        out["forced_experts"] = jnp.take(forced, order, axis=2)
    return out


def model_forward(cfg, *, with_mtp: bool) -> Callable:
    """(params, batch) -> model.ModelOutput of the real Transformer on a batch in the contract,
    replaying batch['forced_experts'] when it has them (`forced_experts`). `with_mtp=False` skips
    the MTP modules (no forward or backward cost for them).
    """
    module = model.Transformer(cfg)

    def forward(params, batch):
        return module.apply(
            {"params": params},
            batch["tokens"],
            positions=batch["positions"],
            segment_ids=batch["segment_ids"],
            forced_experts=forced_experts(batch),
            with_mtp=with_mtp,
        )

    return forward


def only_mtp_differentiable(params: dict) -> dict:
    """params with every top-level entry but the MTP modules (mtp_<m>) behind stop_gradient."""
    keep = lambda k, v: v if k.startswith("mtp_") else jax.lax.stop_gradient(v)
    return {k: keep(k, v) for k, v in params.items()}


def check_mtp_mode(mtp_mode: str) -> None:
    if mtp_mode not in ("none", "ce", "distill"):
        raise ValueError(f"train.mtp_mode={mtp_mode!r}: expected 'none', 'ce' or 'distill'")


def lm_loss(
    out: ModelOutput,
    batch: dict,
    *,
    mtp_mode: str = "none",
    mtp_weight: float = 0.3,
    z_loss_coef: float = 0.0,
    use_balance_loss: bool = True,
):
    """(loss, aux) of a model output: next-token CE (+ MTP in 'ce' or 'distill' mode, + z-loss,
    + the model's balance loss)."""
    check_mtp_mode(mtp_mode)
    mask = batch["loss_mask"].astype(jnp.float32)
    ce = cross_entropy(out.logits, batch["targets"], mask)
    loss, metrics = ce, {"ce": ce}
    if z_loss_coef:
        zl = z_loss(out.logits, mask)
        loss, metrics["z_loss"] = loss + z_loss_coef * zl, zl
    if mtp_mode != "none" and mtp_weight and out.mtp_logits is not None:
        if mtp_mode == "ce":
            mtp = mtp_cross_entropy(out.mtp_logits, batch["targets"], mask, batch["segment_ids"])
        else:
            mtp = mtp_self_distillation(out.mtp_logits, out.logits, mask, batch["segment_ids"])
        loss, metrics["mtp"] = loss + mtp_weight * mtp, mtp
    if use_balance_loss and out.expert_counts is not None:
        loss, metrics["balance"] = loss + out.balance_loss, out.balance_loss
    if out.moe_dropped is not None:  # capacity-bounded all-to-all MoE: share of assignments lost
        metrics["moe_dropped_frac"] = out.moe_dropped / _assignments(out)
    aux = {"weight": jnp.sum(mask), "metrics": metrics, "expert_counts": _expert_counts(out)}
    return loss, aux


def _assignments(out: ModelOutput):
    """Non-padding (token, expert) assignments over the MoE layers run (>= 1)."""
    total = jnp.sum(out.expert_counts)
    if out.mtp_expert_counts is not None:
        total = total + jnp.sum(out.mtp_expert_counts)
    return jnp.maximum(total, 1).astype(jnp.float32)


def make_lm_loss(
    cfg,
    *,
    mtp_mode: str = "none",
    mtp_weight: float = 0.3,
    z_loss_coef: float = 0.0,
    use_balance_loss: bool = True,
    trainable: str = "all",
) -> Callable:
    """loss_fn(params, batch, rng) for `train_step` on model.Transformer(cfg).

    The MTP modules run only when their loss is on (mode not 'none', weight > 0): otherwise they
    cost nothing, and their routers see no tokens (their correction biases stay put).

    trainable='mtp' (the MTP stage; the optimizer freezes the rest): every param outside the MTP
    modules enters the forward through stop_gradient, so no gradient flows into the trunk and XLA
    drops its backward: a step costs the forward plus the MTP blocks' backward.
    """
    check_mtp_mode(mtp_mode)
    with_mtp = mtp_mode != "none" and mtp_weight > 0 and cfg.num_mtp_modules > 0
    forward = model_forward(cfg, with_mtp=with_mtp)
    kw = dict(
        mtp_mode=mtp_mode,
        mtp_weight=mtp_weight,
        z_loss_coef=z_loss_coef,
        use_balance_loss=use_balance_loss,
    )

    def loss_fn(params, batch, rng):
        del rng  # the model is deterministic (no dropout); kept for the signature
        if trainable == "mtp":
            params = only_mtp_differentiable(params)
        # Context parallelism (model/context.py): the row's tokens in zig-zag order, so each
        # context shard holds one early and one late chunk. Every term below is a sum over
        # tokens, which the order does not change; the MTP terms shift along T and are refused.
        cp = context.context_size()
        if cp > 1 and with_mtp:
            raise ValueError(
                f"train.mtp_mode={mtp_mode!r} with a context axis of {cp}: the MTP heads' targets "
                "shift along the sequence, which context parallelism reorders; use mtp_mode='none'"
            )
        batch = zigzag_batch(batch, cp)
        return lm_loss(forward(params, batch), batch, **kw)

    return loss_fn
