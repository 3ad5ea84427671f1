"""RL policy loss (Composer-2-style GRPO), pure, with the `train.step.train_step` contract:

    loss_fn(params, batch, rng) -> (loss, {'weight', 'metrics', 'expert_counts'})

so the RL step *is* `train_step(state, batch, make_rl_loss(...))`.

Shapes: B episodes (rows), T tokens, V vocab, n MoE layers, k experts per token.

Per policy token t of episode i (mask m_t = 1 on tokens the sampler emitted):
    logp_t   = log softmax(logits / temperature)[target]  (the sampler's logprob convention:
                                                            temperature-scaled, no top-k/top-p)
    ratio_t  = exp(logp_t - sampler_logp_t)                trainer vs sampler (mismatch + staleness)
    w_t      = stop_grad(min(ratio_t, C))                  truncated importance sampling (TIS)
    pg_t     = -w_t * A_t * logp_t                         gradient w_t * A_t * grad logp_t
               (with ppo_clip=eps: -min(ratio_t A_t, clip(ratio_t, 1-eps, 1+eps) A_t),
               ratio vs sampler)
    kl_t     = w_t * beta * 0.5 * (logp_t - ref_logp_t)^2  kl_mode='k2' (see below)
    loss     = sum_{i,t} m_t (pg_t + kl_t) / (norm_tokens * B)

No per-episode length normalization: token terms are summed and divided by a fixed constant
(`norm_tokens`, the configured max tokens per episode, times the fixed number of rows B), so an
episode's weight never depends on its own length. `weight` = B rows, so train_step's microbatch
accumulation (weighted mean of microbatch losses) reproduces the full-batch loss exactly.

Advantages A_t come in the batch (rl/learning/batch.py: A_i = r_i - mean_group(r), no division by
the group's std, broadcast over the episode's tokens; malformed-call turns may carry their own).

KL to a frozen reference (beta > 0; reference logprobs `ref_logprobs` come in the batch, computed
by the trainer with the frozen params, so beta = 0 holds no reference at all):
  - 'k2' (default): the k2 estimator 0.5 (log pi - log ref)^2 as a loss term. Its gradient,
    (log pi - log ref) grad log pi, has expectation under pi equal to grad KL(pi || ref)
    (E_pi[grad log pi] = 0 removes the '+1' of the exact derivative). The plain k1 estimator
    log pi - log ref used as a loss has expected gradient E_pi[grad log pi] = 0: useless.
  - 'reward': k1 through the reward: each episode's advantage gets -beta (K_i - mean_group K)
    with K_i = sum_t stop_grad(logp_t - ref_logp_t): a REINFORCE estimator of -beta KL.
tests/test_rl_losses.py checks both against the analytic grad of beta * KL on a categorical.

MTP self-distillation (mtp_weight > 0; rl.mtp_weight, on by default when the model has MTP heads
and the samplers draft with them): RL moves the policy, and MTP heads that no longer predict it
draft tokens the verifier rejects, so speculative decoding slows down. On the same rollout tokens
each MTP head k is pulled to the current policy's own next-token distribution one step further
on (the one its drafts are verified against), at the sampling temperature and valid vocab:

    mtp_kl_t = sum_{k<M} KL( stop_grad(p_main(. | x_<=t+k+1)) || q_k(. | x_<=t) )
    loss    += mtp_weight * sum_t m^k_t mtp_kl_t / (M * norm_tokens * B)

with the trunk (hidden states, embedding, output head) behind stop_gradient for this term, so it
moves the MTP modules only and the policy gradient alone moves the trunk (the MTP stage's rule,
configs/mtp.py). m^k_t: head k's target is a policy token of the same episode (train.losses
.mtp_mask). Its metrics: `mtp_kl` (per masked token, summed over heads) and `mtp_accept_est`,
sum_x min(p, q_0) over head 0's tokens: the probability the temperature-T verifier accepts a
first draft (model/sampling.py's rule), measured on the training batch.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from model import context
from train.losses import (
    _shift_left,
    forced_experts,
    mtp_mask,
    only_mtp_differentiable,
    zigzag_batch,
)

KL_MODES = ("k2", "reward")


def token_logprobs(logits, targets, temperature: float, valid_vocab: int = 0):
    """logits [B,T,V] -> (logp of targets [B,T], entropy [B,T]) under softmax(logits/temperature),
    with ids >= valid_vocab (padding of the model vocab) masked out when valid_vocab > 0."""
    scaled = logits.astype(jnp.float32) / (temperature if temperature > 0 else 1.0)
    if valid_vocab:
        ids = jnp.arange(scaled.shape[-1])
        scaled = jnp.where(ids < valid_vocab, scaled, -jnp.inf)
    logp_all = jax.nn.log_softmax(scaled, axis=-1)  # [B,T,V]
    logp = jnp.take_along_axis(logp_all, targets[..., None], axis=-1)[..., 0]
    p = jnp.exp(logp_all)
    entropy = -jnp.sum(jnp.where(p > 0, p * logp_all, 0.0), axis=-1)
    return logp, entropy


def group_mean(x, group_ids):
    """Per-row mean of x [B] over rows with the same group id [B] (segment mean, jittable)."""
    same = (group_ids[:, None] == group_ids[None, :]).astype(jnp.float32)  # [B,B]
    return (same @ x) / jnp.sum(same, axis=1)


def policy_terms(logp, sampler_logp, adv, mask, *, tis_c: float, ppo_clip: float = 0.0):
    """Per-token policy-gradient terms [B,T] and the TIS weights / ratios used."""
    ratio = jnp.exp(logp - sampler_logp)
    w = jax.lax.stop_gradient(jnp.minimum(ratio, tis_c))
    if ppo_clip:
        clipped = jnp.clip(ratio, 1.0 - ppo_clip, 1.0 + ppo_clip)
        pg = -jnp.minimum(ratio * adv, clipped * adv)
    else:
        pg = -w * adv * logp
    return pg * mask, w, jax.lax.stop_gradient(ratio)


def mtp_distillation(mtp_logits, logits, mask, segment_ids, temperature, valid_vocab):
    """-> (sum over heads and tokens of the masked KL(stop_grad p_main || q_k) [], masked tokens
    summed over heads [], sum of head 0's acceptance probability sum_x min(p, q_0) [], head 0's
    masked tokens []), at softmax(logits / temperature) over ids < valid_vocab (0: all).

    mtp_logits [M,B,T,V]: head k at t predicts token t+k+2, as the main head at t+k+1 does."""

    scale = temperature if temperature > 0 else 1.0
    vocab = logits.shape[-1]
    valid = jnp.arange(vocab) < (valid_vocab or vocab)  # [V]

    def logp(x):
        return jax.nn.log_softmax(jnp.where(valid, x.astype(jnp.float32) / scale, -jnp.inf), -1)

    teacher = logp(jax.lax.stop_gradient(logits))  # [B,T,V]
    kl_sum = n_sum = 0.0
    accept = n_accept = 0.0
    for k in range(mtp_logits.shape[0]):
        t_logp = _shift_left(teacher, k + 1, 0.0)  # the main head's distribution at t+k+1
        s_logp = logp(mtp_logits[k])
        p = jnp.exp(t_logp)
        kl = jnp.sum(jnp.where(valid, p * (t_logp - s_logp), 0.0), axis=-1)  # [B,T]
        m = mtp_mask(mask, segment_ids, k)  # [B,T]
        kl_sum, n_sum = kl_sum + jnp.sum(kl * m), n_sum + jnp.sum(m)
        if k == 0:
            both = jnp.minimum(p, jnp.exp(jax.lax.stop_gradient(s_logp)))
            accept = jnp.sum(jnp.sum(jnp.where(valid, both, 0.0), axis=-1) * m)
            n_accept = jnp.sum(m)
    return kl_sum, n_sum, accept, n_accept


def policy_forward(apply_fn, params, batch, *, router_replay: bool = True):
    """The policy's forward on an RL batch (the loss's, and the frozen reference's in
    rl/learning/batch_source.py): apply_fn (model_apply) on tokens/positions/segment_ids, replaying
    the sampler's routing when router_replay and the batch has forced_experts [B,n,T,k] (the one
    layout: train.losses.forced_experts; n = 0: a dense model, nothing to replay)."""
    return apply_fn(
        params,
        batch["tokens"],
        positions=batch["positions"],
        segment_ids=batch["segment_ids"],
        forced_experts=forced_experts(batch) if router_replay else None,
    )


def context_order(batch: dict, cp: int, mtp: bool = False) -> dict:
    """The RL batch in context parallelism's zig-zag token order (model/context.py), as the LM loss
    does (train.losses.zigzag_batch): every term of the loss is a sum over a row's tokens, which
    the order leaves alone. The MTP term shifts targets along T, which the reorder breaks, so it is
    refused with a context axis."""
    if cp > 1 and mtp:
        raise ValueError(
            f"rl.mtp_weight with a context axis of {cp}: the MTP term's targets shift along the "
            "sequence, which context parallelism reorders; set rl.mtp_weight=0"
        )
    return zigzag_batch(batch, cp)


def make_rl_loss(
    apply_fn: Callable,
    *,
    norm_tokens: int,
    temperature: float = 1.0,
    tis_c: float = 2.0,
    ppo_clip: float = 0.0,
    kl_beta: float = 0.0,
    kl_mode: str = "k2",
    valid_vocab: int = 0,
    router_replay: bool = True,
    mtp_fn: Callable | None = None,
    mtp_weight: float = 0.0,
) -> Callable:
    """apply_fn(params, tokens, positions=, segment_ids=, forced_experts=) -> out with .logits
    (and .hidden, the final-normed trunk output, when the MTP term is on).

    mtp_fn(params, hidden, tokens, positions, segment_ids) -> mtp_logits [M,B,T,V] with the
    trunk's params and `hidden` behind stop_gradient (model_mtp_apply); used when mtp_weight > 0.

    batch: tokens/targets/positions/segment_ids [B,T] int32, loss_mask [B,T] f32 (1 on policy
    tokens, aligned with targets), sampler_logprobs [B,T] f32, advantages [B,T] f32, group_ids [B]
    int32, forced_experts [B,n,T,k] int32 (router replay), ref_logprobs [B,T] f32 (kl_beta > 0).
    """
    if kl_mode not in KL_MODES:
        raise ValueError(f"rl.kl_mode={kl_mode!r}: expected one of {KL_MODES}")
    if norm_tokens <= 0 or tis_c <= 0:
        raise ValueError(f"rl: norm_tokens={norm_tokens} and tis_c={tis_c} must be positive")

    def loss_fn(params, batch, rng):
        del rng  # deterministic forward
        batch = context_order(batch, context.context_size(), mtp=bool(mtp_weight))
        out = policy_forward(apply_fn, params, batch, router_replay=router_replay)
        mask = batch["loss_mask"].astype(jnp.float32)
        logp, entropy = token_logprobs(out.logits, batch["targets"], temperature, valid_vocab)
        adv = batch["advantages"].astype(jnp.float32)
        rows = mask.shape[0]
        metrics = {}
        if kl_beta and kl_mode == "reward":
            k1 = jax.lax.stop_gradient(logp - batch["ref_logprobs"]) * mask  # [B,T]
            kl_sum = jnp.sum(k1, axis=1)  # [B] K_i
            kl_adv = -kl_beta * (kl_sum - group_mean(kl_sum, batch["group_ids"]))
            adv = adv + kl_adv[:, None]
        pg, w, ratio = policy_terms(
            logp, batch["sampler_logprobs"], adv, mask, tis_c=tis_c, ppo_clip=ppo_clip
        )
        total = jnp.sum(pg)
        n_tok = jnp.maximum(jnp.sum(mask), 1.0)
        if kl_beta:
            diff = logp - batch["ref_logprobs"]
            if kl_mode == "k2":
                total = total + jnp.sum(w * kl_beta * 0.5 * diff**2 * mask)
            metrics["kl_k1"] = jnp.sum(jax.lax.stop_gradient(diff) * mask) / n_tok
        loss = total / (norm_tokens * rows)
        if mtp_weight:
            seg = batch["segment_ids"]
            mtp_logits = mtp_fn(params, out.hidden, batch["tokens"], batch["positions"], seg)
            kl_sum, n_kl, acc, n_acc = mtp_distillation(
                mtp_logits, out.logits, mask, seg, temperature, valid_vocab
            )
            heads = mtp_logits.shape[0]
            loss = loss + mtp_weight * kl_sum / (heads * norm_tokens * rows)
            metrics["mtp_kl"] = heads * kl_sum / jnp.maximum(n_kl, 1.0)
            metrics["mtp_accept_est"] = acc / jnp.maximum(n_acc, 1.0)
        mean = lambda x: jnp.sum(x * mask) / n_tok
        metrics.update(
            policy_loss=jnp.sum(pg) / (norm_tokens * rows),
            ratio_mean=mean(ratio),
            tis_truncated_frac=mean((ratio > tis_c).astype(jnp.float32)),
            entropy=mean(jax.lax.stop_gradient(entropy)),
            adv_mean=mean(adv),
            adv_abs_mean=mean(jnp.abs(adv)),
            policy_tokens=jnp.sum(mask),
        )
        counts = getattr(out, "expert_counts", None)
        aux = {
            "weight": jnp.float32(rows),
            "metrics": metrics,
            "expert_counts": None if counts is None else {"main": counts},
        }
        return loss, aux

    return loss_fn


def model_mtp_apply(cfg) -> Callable:
    """mtp_fn for make_rl_loss: the MTP modules of model/'s Transformer (Transformer.mtp_step, the
    drafting engine's entry) on the trunk's final hidden states, chained as in training (module
    m reads module m-1's output and the embedding of token t+m+1). Everything but the MTP
    modules (hidden states, embedding, output head) enters through stop_gradient: this term's
    gradient reaches the MTP modules only, and the trunk's backward for it is never built."""
    from model.transformer import Transformer

    module = Transformer(cfg)

    def mtp(params, hidden, tokens, positions, segment_ids):
        variables = {"params": only_mtp_differentiable(params)}
        h, logits = jax.lax.stop_gradient(hidden), []
        for m in range(cfg.num_mtp_modules):
            # token t+m+1 at t; the tail is padding (outside every head's mask)
            shifted = jnp.pad(tokens[:, m + 1 :], ((0, 0), (0, m + 1)))
            h, lg, _ = module.apply(
                variables, m, h, shifted, positions, segment_ids, method=Transformer.mtp_step
            )
            logits.append(lg)
        return jnp.stack(logits)  # [M,B,T,V]

    return mtp


def model_apply(cfg) -> Callable:
    """apply_fn for make_rl_loss on model/'s Transformer (main head; the MTP modules run in
    model_mtp_apply when the distillation term is on)."""
    from model.transformer import Transformer

    module = Transformer(cfg)

    def apply(params, tokens, positions=None, segment_ids=None, forced_experts=None):
        return module.apply(
            {"params": params},
            tokens,
            positions=positions,
            segment_ids=segment_ids,
            forced_experts=forced_experts,
            with_mtp=False,
        )

    return apply
