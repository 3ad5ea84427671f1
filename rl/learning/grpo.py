"""GRPO, Composer-2-style: the group-relative advantages and the RL policy loss, pure, the loss
with the `train.step.train_step` contract:

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
    u_t      = uniform_beta * KL(uniform over valid ids || pi(. | x_<t))   (off by default)
    loss     = sum_{i,t} m_t (pg_t + kl_t + u_t) / (norm_tokens * B)

No per-episode length normalization: token terms are summed and divided by a fixed constant
(`norm_tokens`, the configured max tokens per episode, times the fixed number of rows B), so an
episode's weight never depends on its own length. `weight` = B rows, so train_step's microbatch
accumulation (weighted mean of microbatch losses) reproduces the full-batch loss exactly.

Advantages A_t come in the batch: `chain_advantages` below gives each episode (a chain of
segments counts once) A_i = r_i - mean_group(r), no division by the group's std; rl/learning/
batch.py broadcasts it over the episode's tokens (malformed-call turns may carry their own).

KL to a frozen reference (beta > 0; reference logprobs `ref_logprobs` come in the batch, computed
by the trainer with the frozen params, so beta = 0 holds no reference at all):
  - 'k2' (default): the k2 estimator 0.5 (log pi - log ref)^2 as a loss term. Its gradient,
    (log pi - log ref) grad log pi, has expectation under pi equal to grad KL(pi || ref)
    (E_pi[grad log pi] = 0 removes the '+1' of the exact derivative). The plain k1 estimator
    log pi - log ref used as a loss has expected gradient E_pi[grad log pi] = 0: useless.
  - 'reward': k1 through the reward: each episode's advantage gets -beta (K_i - mean_group K)
    with K_i = sum_t stop_grad(logp_t - ref_logp_t): a REINFORCE estimator of -beta KL.
tests/test_rl_losses.py checks both against the analytic grad of beta * KL on a categorical.

The uniform term (uniform_beta > 0, rl.uniform_beta; rl/learning/losses.py `uniform_kl`, exact
over the vocab, no sampling): its gradient on logit j, uniform_beta (pi_j - 1/n), does not vanish
where the policy has saturated, as the k2 KL's and an entropy bonus's do, so it keeps a floor under
every valid token: exploration that a deterministic policy cannot lose (issue 55: two of the
summary toy's stalls were a sender or a receiver turned deterministic on a wrong code; 0.01 fixed
those but not the toy's fresh seeds, bench/RESULTS.md). It is
a forward KL to uniform: meaningful where uniform over rl.valid_vocab is a sane prior (toy
vocabularies), not over an LLM's vocabulary.

MTP self-distillation (mtp_weight > 0): rl/learning/losses.py's `mtp_distillation` term, added
to the loss with its weight; the model forwards the loss runs (model_apply, model_mtp_apply,
policy_forward) are there too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from model import context
from rl.learning.losses import (
    context_order,
    mtp_distillation,
    policy_forward,
    token_logprobs,
    uniform_kl,
)


def group_advantages(rewards: Sequence[float], group_ids: Sequence) -> np.ndarray:
    """A_i = r_i - mean of r over i's group. Not divided by the group's std (Composer 2 / Dr. GRPO:
    the std rescales easy and hard groups differently and biases toward low-variance tasks)."""
    r = np.asarray(rewards, np.float64)
    g = np.asarray(group_ids)
    out = np.empty_like(r)
    for gid in np.unique(g):
        sel = g == gid
        out[sel] = r[sel] - r[sel].mean()
    return out.astype(np.float32)


def chain_advantages(records: Sequence[dict]) -> np.ndarray:
    """Per record, its chain's group-relative advantage: the group mean is over chains (episodes),
    not segments, so an episode that summarized k times weighs in its group's baseline once, and
    every segment of a chain gets the same advantage (ReSum-GRPO). A record without 'chain' is a
    chain of its own. A chain's segments carry one reward (rl/episodes/records.py); a mismatch is an
    error."""
    keys = [(r["group_id"], r.get("chain", ("solo", i))) for i, r in enumerate(records)]
    reward: dict = {}
    for key, r in zip(keys, records):
        if reward.setdefault(key, float(r["reward"])) != float(r["reward"]):
            raise ValueError(f"chain {key}: segments with different rewards")
    chains = list(reward)
    adv = group_advantages([reward[c] for c in chains], [c[0] for c in chains])
    by_chain = dict(zip(chains, adv))
    return np.asarray([by_chain[k] for k in keys], np.float32)


KL_MODES = ("k2", "reward")


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


def make_rl_loss(
    apply_fn: Callable,
    *,
    norm_tokens: int,
    temperature: float = 1.0,
    tis_c: float = 2.0,
    ppo_clip: float = 0.0,
    kl_beta: float = 0.0,
    kl_mode: str = "k2",
    uniform_beta: float = 0.0,
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
        if uniform_beta:  # exact over the valid vocab at each policy token (no TIS weight)
            ukl = uniform_kl(out.logits, temperature, valid_vocab)  # [B,T]
            total = total + uniform_beta * jnp.sum(ukl * mask)
            metrics["uniform_kl"] = jnp.sum(jax.lax.stop_gradient(ukl) * mask) / n_tok
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
