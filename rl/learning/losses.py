"""What the GRPO loss (rl/learning/grpo.py `make_rl_loss`) runs besides its policy terms: the
policy's forward on an RL batch (router replay, context parallelism's token order), token
log-probs under the sampler's convention, and the MTP self-distillation term; pure.

Shapes: B episodes (rows), T tokens, V vocab, n MoE layers, k experts per token, M MTP heads.

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

from train.losses import (
    _shift_left,
    forced_experts,
    mtp_mask,
    only_mtp_differentiable,
    zigzag_batch,
)


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


def uniform_kl(logits, temperature: float, valid_vocab: int = 0):
    """logits [B,T,V] -> KL(u || pi) [B,T], u uniform over the valid ids (< valid_vocab; 0: all V),
    pi = softmax(logits / temperature) over them: -log n - mean_{j valid} log pi_j.

    Why a forward KL to uniform and not the entropy or the k2 KL to the reference: the gradient of
    this term with respect to logit j is pi_j - u_j, which stays ~1 on a token whose probability
    has saturated, while the gradients of -H(pi) and of KL(pi || ref) both vanish as pi_j -> 1
    (d/dz_j = pi_j (log pi_j + H), resp. pi_j (log pi_j / ref_j - KL)): once a policy is
    deterministic, they cannot make it try anything else. It floors every valid token's
    probability instead (label smoothing on the policy's own tokens)."""
    scaled = logits.astype(jnp.float32) / (temperature if temperature > 0 else 1.0)
    vocab = scaled.shape[-1]
    n = valid_vocab or vocab
    valid = jnp.arange(vocab) < n  # [V]
    logp_all = jax.nn.log_softmax(jnp.where(valid, scaled, -jnp.inf), axis=-1)  # [B,T,V]
    mean_logp = jnp.sum(jnp.where(valid, logp_all, 0.0), axis=-1) / n  # [B,T]
    return -jnp.log(jnp.float32(n)) - mean_logp


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
