"""Token sampling and the speculative accept/reject rule, as pure jittable functions.

Letters: B batch, K draft tokens, V vocab.

The distribution a token is "sampled from" is the one `filtered_logprobs` returns: logits /
temperature, then top-k, then top-p (nucleus over what top-k kept). Greedy (temperature == 0) takes
the argmax and reports the log-prob of that token under the plain softmax of the logits (temperature
1, no filtering), so greedy rollouts still carry a meaningful sampler log-prob.

Valid ids: the model's vocab is padded (tiny 320, small 512) past the tokenizer's ids (272 for the
byte tokenizer). `valid` (ids < valid may be sampled; <= 0 = all) masks the padded logits to -inf
*first*, so both the sampled id and every recorded log-prob live on the tokenizer's vocab.

RL log-prob convention (what a trainer recomputes): sample with top_k = 0 and top_p = 1, so the
recorded log-prob is log_softmax(mask_invalid(logits) / temperature)[token], the full
temperature-scaled softmax over valid ids; top-k/top-p truncation is an eval option whose log-probs
a trainer cannot recompute from logits alone. Greedy records the temperature-1 log-softmax.

Sampling settings are traced arrays (changing them does not recompile): scalars, or one value per
row ([B], a prefix of the logits' leading shape) so that each slot of a continuous batch samples
with its own request's settings in one program; top_k <= 0 and top_p >= 1 switch the filters off
(per row), temperature 0 is greedy (per row).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

NEG_INF = -jnp.inf


class SamplingParams(NamedTuple):
    temperature: jnp.ndarray  # float32 scalar or [B]; 0 = greedy
    top_k: jnp.ndarray  # int32 scalar or [B]; <= 0 = off
    top_p: jnp.ndarray  # float32 scalar or [B]; >= 1 = off
    valid: jnp.ndarray | int = 0  # int32 scalar; ids >= valid are never sampled; <= 0 = all

    @staticmethod
    def make(
        temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, valid: int = 0
    ) -> SamplingParams:
        if isinstance(valid, bool) or not isinstance(valid, (int, np.integer)) or valid < 0:
            raise ValueError(
                f"valid (number of valid token ids) must be an int >= 0, got {valid!r}"
            )
        check(temperature, top_k, top_p)
        return SamplingParams(
            jnp.float32(temperature), jnp.int32(top_k), jnp.float32(top_p), jnp.int32(valid)
        )


def check(temperature: float, top_k: int, top_p: float) -> None:
    """One-line ValueErrors for settings no request may use."""
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
        raise ValueError(f"top_k must be an int, got {top_k!r}")
    if not temperature >= 0:  # also catches NaN
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def per_row(x, ndim: int):
    """A setting of shape [] or [B] -> broadcastable against an array [B, ...] of rank ndim."""
    x = jnp.asarray(x)
    return x.reshape(x.shape + (1,) * (ndim - x.ndim))


def mask_invalid(logits, valid):
    """logits [..., V] -> the same with ids >= valid set to -inf (valid <= 0: unchanged)."""
    ids = jnp.arange(logits.shape[-1])
    return jnp.where((valid <= 0) | (ids < valid), logits, NEG_INF)


def filtered_logprobs(logits, sp: SamplingParams):
    """logits [..., V] -> normalized log-probs [..., V] of the distribution tokens are sampled from
    (-inf outside the top-k / top-p set). Greedy: the plain log-softmax (see module docstring).
    The settings are scalars or per row (module docstring)."""
    nd = logits.ndim
    temperature = per_row(sp.temperature, nd)
    greedy = temperature <= 0
    masked = mask_invalid(logits.astype(jnp.float32), sp.valid)  # before sampling and log-probs
    scaled = masked / jnp.where(greedy, 1.0, temperature)
    row = SamplingParams(temperature, per_row(sp.top_k, nd), per_row(sp.top_p, nd), sp.valid)
    # The sort is skipped (lax.cond, not a select) when no row filters, as in RL sampling: it was
    # ~5% of a small model's decode iteration on CPU. One filtering row sorts them all; the others
    # keep every id (top_k <= 0, top_p >= 1 keep all).
    filtering = jnp.any((row.top_k > 0) | (row.top_p < 1.0))
    keep = jax.lax.cond(
        filtering, _top_k_top_p_keep, lambda x, _: jnp.ones(x.shape, bool), scaled, row
    )
    filtered = jax.nn.log_softmax(jnp.where(keep & ~greedy, scaled, NEG_INF), axis=-1)
    return jnp.where(greedy, jax.nn.log_softmax(scaled, axis=-1), filtered)


def _top_k_top_p_keep(scaled, sp: SamplingParams):
    """scaled logits [..., V] -> [..., V] bool: inside the top-k and the top-p nucleus.
    sp's settings are broadcastable against [..., 1] (per_row)."""
    v = scaled.shape[-1]
    desc = -jnp.sort(-scaled, axis=-1)  # [..., V] largest first
    kidx = jnp.broadcast_to(jnp.clip(sp.top_k - 1, 0, v - 1), scaled.shape[:-1] + (1,))
    kth = jnp.take_along_axis(desc, kidx, axis=-1)  # [..., 1]
    keep = (sp.top_k <= 0) | (scaled >= kth)
    # Nucleus: the smallest prefix of the sorted (top-k filtered) distribution whose mass reaches
    # top_p; a token is kept if the mass strictly before it is < top_p (so the crossing token is
    # kept).
    desc_kept = jnp.where((sp.top_k <= 0) | (desc >= kth), desc, NEG_INF)
    probs = jax.nn.softmax(desc_kept, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    n_keep = jnp.sum(mass_before < sp.top_p, axis=-1, keepdims=True)  # >= 1
    pth = jnp.take_along_axis(desc_kept, n_keep - 1, axis=-1)
    return keep & ((sp.top_p >= 1.0) | (scaled >= pth))


def split(key, n: int):
    """jax.random.split for one key [2] -> [n,2], or per row for row keys [B,2] -> [B,n,2]."""
    if key.ndim == 2:
        return jax.vmap(lambda k: jax.random.split(k, n))(key)
    return jax.random.split(key, n)


def categorical(key, logits):
    """Samples logits [B,V] (or [...,V] with one key): one key for all, or one per row [B,2]
    (each slot's own stream: its draws do not depend on its batch companions)."""
    if key.ndim == 2:
        return jax.vmap(lambda k, lg: jax.random.categorical(k, lg))(key, logits)
    return jax.random.categorical(key, logits, axis=-1)


def uniform(key, shape):
    """Uniforms [B, *shape[1:]]: one key for all, or one per row [B,2]."""
    if key.ndim == 2:
        return jax.vmap(lambda k: jax.random.uniform(k, shape[1:]))(key)
    return jax.random.uniform(key, shape)


def sample(key, logprobs, greedy):
    """logprobs [..., V] from filtered_logprobs -> token ids [...] (argmax where greedy: a scalar
    or per row). key: one key, or one per row ([B,2], logprobs [B,V])."""
    return jnp.where(
        per_row(greedy, logprobs.ndim - 1),
        jnp.argmax(logprobs, -1),
        categorical(key, logprobs),
    ).astype(jnp.int32)


def token_logprob(logprobs, tokens):
    """logprobs [..., V], tokens [...] -> [...]."""
    return jnp.take_along_axis(logprobs, tokens[..., None], axis=-1)[..., 0]


def speculative_accept(key, target_lp, draft_lp, drafts, greedy, forced=None):
    """Standard speculative sampling (Leviathan et al. 2023; Chen et al. 2023) for K drafts.

    target_lp [B,K+1,V]: the main model's filtered log-probs at the pending token and each draft;
    draft_lp [B,K,V]: the draft distributions the drafts [B,K] were sampled from.
    Draft i is accepted with probability min(1, p_i(d)/q_i(d)); at the first rejection the token is
    resampled from normalize(max(0, p - q)); if all K are accepted a bonus token comes from p_K.
    The emitted sequence is then distributed exactly as sampling from p one token at a time.
    Greedy (a scalar or [B], per row): accept while the draft equals the target argmax, then emit
    the target argmax. Per-row settings: each row's p and q are that row's own filtered
    distributions, so the rule (and its exactness) holds row by row.
    forced [B,K] bool (optional): drafts accepted whatever the rule says (teacher-forced tokens, a
    prefix of each row); the rule then judges the drafts after them as usual.

    key: one key, or one per row ([B,2]).

    -> (n_accepted [B] in [0, K], next token [B] emitted after the accepted drafts).
    """
    b, k = drafts.shape
    keys = split(key, 2)
    k_accept, k_resample = (keys[:, 0], keys[:, 1]) if key.ndim == 2 else keys
    p_d = jnp.exp(token_logprob(target_lp[:, :k], drafts))  # [B,K]
    q_d = jnp.exp(token_logprob(draft_lp, drafts))  # [B,K]
    u = uniform(k_accept, (b, k))
    sampled_ok = u * q_d < p_d
    greedy_ok = drafts == jnp.argmax(target_lp[:, :k], -1)
    ok = jnp.where(per_row(greedy, 2), greedy_ok, sampled_ok)
    if forced is not None:
        ok = ok | forced
    n_acc = jnp.sum(jnp.cumprod(ok.astype(jnp.int32), axis=1), axis=1)  # leading accepts
    p = jnp.exp(jnp.take_along_axis(target_lp, n_acc[:, None, None], axis=1)[:, 0])  # [B,V]
    q_pad = jnp.concatenate(
        [jnp.exp(draft_lp), jnp.zeros_like(p)[:, None]], axis=1
    )  # q_K = 0: bonus from p
    q = jnp.take_along_axis(q_pad, n_acc[:, None, None], axis=1)[:, 0]
    residual = jnp.maximum(p - q, 0.0)
    residual = jnp.where(
        residual.sum(-1, keepdims=True) > 0, residual, p
    )  # p == q: any p-sample is fine
    nxt_sampled = categorical(k_resample, jnp.log(residual))
    nxt = jnp.where(greedy, jnp.argmax(p, -1), nxt_sampled).astype(jnp.int32)
    return n_acc, nxt
