"""The decode engine: a request queue over B slots, continuable sequences (multi-turn episodes),
MTP speculative decoding, in-flight weight swaps, per-token RL records (sampler log-prob, routed
experts, params version), a bounded number of compiled programs. It is the only one: a fixed prompt
list (`model.generate`, eval, the single-turn RL sampler) goes through model/prompt_batch.py's
PromptBatch, multi-turn episodes through rl/sampling/rollout.py.

Letters: B slots, R rows prefilled (or decoded) in one call, T tokens per prefilled row, S cache
length, V vocab, D model, K draft tokens, n MoE layers, k experts per token.

    eng = RolloutEngine(cfg, params, slots=8, cache_len=2048, temperature=1.0, valid_vocab=272)
    eng.submit("ep0", prompt_ids, max_new=256, stop_tokens=[END, EOS])    # queued until a slot frees
    eng.submit("r1", ids, max_new=64, sampling=Sampling(temperature=0.7, top_p=0.9))  # its own
    for turn in eng.step():                         # decodes until some request's turn ends
        ...                                         # turn.tokens / .logprobs / .versions / .finish_reason
    eng.extend("ep0", observation_ids, max_new=256, stop_tokens=[END, EOS])   # continue that sequence
    experts = eng.finish("ep0")                     # frees the slot -> [consumed, n, k] routing

Rewinding (self-summarization, rl/envs/agent/summary.py): `rewind(rid, keep)` cuts a paused sequence
back to its first `keep` tokens and `extend` then appends a rebuilt context. The cache entries of
positions < keep - 1 were computed from exactly those tokens and are kept (no re-prefill of the
shared prefix); token keep-1 becomes pending again; later entries are rewritten before any query
reads them (the same argument as a reused slot). `experts(rid)` reads a paused request's routing
rows without freeing it (the finished segment's record).

Sequences and the pending token. A slot holds one growing sequence (an episode's context). The last
token known for it (the last prompt / observation token, or the last emitted one) is *pending*: not
yet fed to the model. Decoding feeds the pending token at its position p, samples the token at p+1,
which becomes pending. `extend` prefills [pending] + new[:-1] into the slot's latent cache (only
those tokens, at their absolute positions; nothing before is recomputed) and makes new[-1] pending.
A fresh request prefills prompt[:-1]. Because cache entries are indexed by absolute position and a
query attends only to positions <= its own, a slot reused by a new request never sees the old one.

Per-position buffers [B,S] (so multi-turn records need no bookkeeping): `tokens` (every token of
the sequence), `logprobs` and `versions` (at the position of each emitted token: the log-prob under
the distribution it was sampled from, model/sampling.py, and the params version of the forward
that produced it; 0 / -1 elsewhere), and `experts` [B,S,n,k]: row t = the experts that routed the
forward which *consumed* token t (prefill or decode alike). A training forward over the sequence
with forced_experts = experts (moved to [n,1,L,k]) therefore reproduces the sampler's routing at
every position that was consumed; the final token of a sequence is never consumed (see
rl/sampling/rollout.py for how records fill that row).

Layout: the engine keeps one latent cache and one param tree per layer (model/decode.py
`init_layer_caches`, `split_layers`; params are split once per version in `set_params`), so the
decode loop reads and writes each layer's arrays in place; with stacked layers XLA:CPU copied each
layer's cache and weights out of the stack on every iteration.

Dtype (ModelConfig.decode_dtype, resolved per platform by model/decode.py `engine_config`):
bfloat16 (the default on GPU/TPU) holds the params and the latent caches in bfloat16 and computes
in bfloat16, which halves the cache bytes per token and the weight bytes each decode step reads;
the router, the norm scales, the logits, sampling and every recorded log-prob stay float32.
float32 (the default on CPU) holds float32 params and caches and computes in cfg.dtype, as the
training forward does (router replay and the RL records' log-probs then match it to float
rounding). `engine.cfg` is the resolved config.

Speculative decoding (`speculative_k=K > 0`, needs MTP modules): each decode iteration is a
*verify* step: the pending token x_p plus K drafts go through the main model at positions p..p+K
in one forward; the standard rule (model/sampling.py `speculative_accept`: accept draft x with
probability min(1, p(x)/q(x)), on rejection sample normalize(max(0, p - q)); greedy: accept iff
it is the argmax) accepts a prefix and emits one more token, so the output is distributed exactly
as the main model's (K = 0 is the plain step). Every emitted token records the main model's
filtered log-prob (the distribution it is distributed as, the same convention as plain decode),
the experts of the forward that consumed it, and the version. Drafts come from MTP module 0
(DeepSeek-V3 §2.2: at position j it combines the main model's final hidden h_j with embed(x_{j+1})
and predicts x_{j+2}): the draft for x_{p+1} is module 0 at position p-1 on (h_{p-1}, x_p), further
drafts chain module 0 on its own hidden. Module 0 keeps its own latent cache; entries written from
drafts are rewritten before any query attends to them (cache slots are absolute positions and a
query sees only slots <= its own), so each iteration first *catches up* the MTP cache on the
positions emitted last iteration with the main model's true hiddens (`hbuf`/`tbuf`/`nbuf`), and
the same call yields draft 1. A paused slot keeps that buffer; `extend`'s prefill writes it.

Teacher forcing: `forced` tokens are emitted instead of samples for the first len(forced) decode
steps of a turn, with their log-probs, experts and version recorded exactly as for sampled tokens
(scripted policies through the real engine; scoring). Speculating, a forced position drafts its
forced token and accepts it unconditionally.

Per-slot sampling: each turn's temperature / top-k / top-p live in the slot state ([B] arrays set
by its prefill), so requests with different settings (greedy among them) decode in one batch and
one compiled program; every recorded log-prob is under its own slot's distribution, and the
speculative rule judges each slot against its own target and draft distributions. Randomness is
per slot too: a turn's key comes from its request's seed (Sampling.seed, or one drawn from the
engine's seed at submit) and the turn number, and a step at position p draws from (key, p), so a
seeded request samples the same tokens whatever its slot and batch companions (up to the float
differences of batch shapes) and no position's noise is used twice.

Raw log-probs (what a server reports; `top_logprobs=W >= 0`, requests submitted with
logprobs=True): each emitted token's log-prob under the model's own distribution (log_softmax of
the valid logits: before temperature and top-k/top-p, vLLM's default `raw_logprobs`) and the
top-W (ids, log-probs) of it, recorded at the token's position by the plain and the verify step
alike (an accepted draft's from the main model's logits at its position). A decode call with no
such request running is the program without them (a static flag in its Spec), so nobody pays
for them unless asked; an engine built without them has zero-width buffers.

Live rows only: a decode call gathers the running slots (R of them, rounded up to a row bucket)
into an R-slot state, decodes that and scatters it back (R = B: in place, no copy), so a step costs
the live requests' rows, not B; the gather and scatter copy the R rows' cache window once per call.

Compiled programs (static shapes, so a long run never recompiles): one init, one turn fetch, one
experts fetch, one end_turns, one decode loop per (R, W) and one prefill per (R, T, W) bucket
triple, R in {1, 2, 4, ..} ∪ {B} (<= B), T in {min_bucket, 2 min_bucket, ..} ∪ {S} (<= S) and W, the cache
window a call reads and writes (positions [0, W)), in the T buckets and their 1.5x midpoints: a
prefill's attention costs T x W and a decode step reads W positions of every slot, so both grow
with the episodes' contexts instead of paying for the whole cache from the first turn (decode
in place uses a window only when W <= S/2: copying it in and out of the loop costs more above).
An engine built with raw log-probs (top_logprobs >= 0) adds the decode loop that records them,
one per (R, W), and one raw-log-prob fetch. Bound: 4 + n_R * n_W + n_R * n_T * n_W, plus
n_R * n_W + 1 with raw log-probs, e.g. B = 8, S = 1024, min_bucket = 16: 4 + 4 * 13 + 4 * 7 * 13
= 420 (472 with raw log-probs); a run compiles only the ones it meets (14-24 per engine in a one-off probe of the coding sampler,
2 groups x 8 episodes, before decode was windowed). `engine.programs` holds
the keys used; it is asserted to stay within `engine.max_programs`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import time

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from model import sharding as sh
from model.attention import empty_cache
from model.config import ModelConfig
from model.decode import (
    decode_params,
    engine_config,
    forward_cached_layers,
    init_layer_caches,
    resolve_decode_dtype,
    split_layer_specs,
    split_layers,
)
from model.params import param_logical_specs
from model.sampling import (
    SamplingParams,
    check,
    filtered_logprobs,
    mask_invalid,
    sample,
    speculative_accept,
    token_logprob,
)
from model.sampling import split as sample_split
from model.transformer import Transformer


@dataclasses.dataclass(frozen=True)
class Spec:
    """Static shapes (one set of compiled programs per distinct value)."""

    slots: int  # B
    cache_len: int  # S
    stop_width: int = 4  # St stop ids per request
    draft: int = 0  # K MTP draft tokens per verify step (0 = plain decoding, no MTP state)
    # W: each emitted token's raw log-prob and its top-W alternatives are recorded (-1: none, no
    # buffers). A decode call with -1 on an engine that has them records nothing (no turn asked).
    top_logprobs: int = -1


@flax.struct.dataclass
class SlotState:
    cache: dict
    active: jnp.ndarray  # [B] bool: decoding
    pos: jnp.ndarray  # [B] int32 position of the pending token
    tok: jnp.ndarray  # [B] int32 pending token
    ngen: jnp.ndarray  # [B] int32 tokens emitted this turn
    max_new: jnp.ndarray  # [B] int32 this turn's budget
    nforced: jnp.ndarray  # [B] int32 this turn's first nforced tokens are read from `tokens`
    stops: jnp.ndarray  # [B,St] int32 (-1 padded)
    stopped: jnp.ndarray  # [B] bool: last turn ended on a stop token
    temp: jnp.ndarray  # [B] float32 this turn's sampling temperature (0 = greedy)
    top_k: jnp.ndarray  # [B] int32 this turn's top-k (<= 0 = off)
    top_p: jnp.ndarray  # [B] float32 this turn's top-p (>= 1 = off)
    tokens: jnp.ndarray  # [B,S] int32 every token at its absolute position
    logprobs: jnp.ndarray  # [B,S] float32 sampler log-prob of emitted tokens (0 elsewhere)
    versions: jnp.ndarray  # [B,S] int32 params version of emitted tokens (-1 elsewhere)
    experts: jnp.ndarray  # [B,S,n,k] int32 routing of the forward that consumed each token
    keys: jnp.ndarray  # [B,2] uint32 this turn's rng key; a step at position p draws from (key, p)
    stats: jnp.ndarray  # [4] int32: decode iterations, slot-steps, drafted, accepted
    # Speculative decoding only (Spec.draft = K > 0; else {} and zero-width buffers):
    mtp_cache: dict  # MTP module 0's latent cache, [B,S,..] like one layer's
    hbuf: jnp.ndarray  # [B,K+1,D] float32 main hiddens h_j awaiting the MTP catch-up
    tbuf: jnp.ndarray  # [B,K+1] int32 the tokens x_{j+1} paired with them
    nbuf: jnp.ndarray  # [B] int32 valid entries: positions pos-nbuf .. pos-1
    # Raw log-probs (Spec.top_logprobs = W >= 0; else zero-width): of each emitted token under
    # the model's own distribution (log_softmax of the valid logits: no temperature or filter),
    # and the top W (ids, log-probs) of that distribution, largest first. What a server reports.
    raw_lp: jnp.ndarray  # [B,S] float32
    top_ids: jnp.ndarray  # [B,S,W] int32
    top_lp: jnp.ndarray  # [B,S,W] float32


def _expert_rows(cfg: ModelConfig, out, r: int, t: int):
    """[R,T,n,k] chosen experts (an empty n axis for dense-only models)."""
    if out.expert_ids is None:
        return jnp.zeros((r, t, 0, max(cfg.num_experts_per_tok, 1)), jnp.int32)
    return jnp.moveaxis(out.expert_ids, 0, 2)  # [n,R,T,k] -> [R,T,n,k]


def init_state(cfg: ModelConfig, spec: Spec) -> SlotState:
    b, s = spec.slots, spec.cache_len
    n, k = cfg.num_moe_layers, max(cfg.num_experts_per_tok, 1)
    zi = jnp.zeros((b,), jnp.int32)
    k1 = spec.draft + 1 if spec.draft else 0  # zero-width buffers when not speculating
    dt = resolve_decode_dtype(cfg.decode_dtype, jax.default_backend())  # an engine's: resolved
    return SlotState(
        cache=init_layer_caches(cfg, b, s, dt),
        active=jnp.zeros((b,), bool),
        pos=zi,
        tok=zi,
        ngen=zi,
        max_new=zi,
        nforced=zi,
        stops=jnp.full((b, spec.stop_width), -1, jnp.int32),
        stopped=jnp.zeros((b,), bool),
        temp=jnp.zeros((b,), jnp.float32),
        top_k=zi,
        top_p=jnp.ones((b,), jnp.float32),
        tokens=jnp.zeros((b, s), jnp.int32),
        logprobs=jnp.zeros((b, s), jnp.float32),
        versions=jnp.full((b, s), -1, jnp.int32),
        experts=jnp.zeros((b, s, n, k), jnp.int32),
        keys=_turn_keys(zi, zi),
        stats=jnp.zeros((4,), jnp.int32),
        mtp_cache=empty_cache(b, s, cfg, dt) if spec.draft else {},
        hbuf=jnp.zeros((b, k1, cfg.hidden_size), jnp.float32),
        tbuf=jnp.zeros((b, k1), jnp.int32),
        nbuf=zi,
        **_raw_buffers(b, s, spec.top_logprobs),
    )


def _raw_buffers(b: int, s: int, w: int) -> dict:
    """The raw log-prob buffers of init_state: zero-width unless w >= 0."""
    sr, wr = (s, w) if w >= 0 else (0, 0)
    return dict(
        raw_lp=jnp.zeros((b, sr), jnp.float32),
        top_ids=jnp.zeros((b, sr, wr), jnp.int32),
        top_lp=jnp.zeros((b, sr, wr), jnp.float32),
    )


def _record_raw(spec: Spec, st: SlotState, logits, valid, emitted, rows, col) -> dict:
    """SlotState fields recording emitted [B,...]'s raw log-probs and top alternatives from
    logits [B,...,V] at columns col (rows / col index like the steps' other records); {} when
    this call records none (Spec.top_logprobs < 0: not traced at all, so no cost)."""
    if spec.top_logprobs < 0:
        return {}
    raw = jax.nn.log_softmax(mask_invalid(logits.astype(jnp.float32), valid), axis=-1)
    top_lp, top_ids = jax.lax.top_k(raw, spec.top_logprobs)  # [B,...,W], largest first
    at = lambda buf, x: buf.at[rows, col].set(x, mode="drop")
    return dict(
        raw_lp=at(st.raw_lp, token_logprob(raw, emitted)),
        top_ids=at(st.top_ids, top_ids.astype(jnp.int32)),
        top_lp=at(st.top_lp, top_lp),
    )


def _turn_keys(seeds, turns):
    """[R] int32 seeds and turn numbers -> [R,2] keys: a request's stream per turn, so a rewound
    and regenerated position never reuses the noise it was first sampled with."""
    return jax.vmap(lambda s, t: jax.random.fold_in(jax.random.PRNGKey(s), t))(seeds, turns)


def _step_keys(st: SlotState, n: int):
    """[B,n,2] keys of this step: each slot's turn key at its pending position (a position is
    decoded once per turn, so no draw is ever reused), split n ways."""
    return sample_split(jax.vmap(jax.random.fold_in)(st.keys, st.pos), n)


def _take_rows(cache, rows, kv: int):
    """Cache rows of slots `rows` [R] (a row >= B is padding: read clipped), window [0, kv)."""
    return jax.tree_util.tree_map(lambda x: jnp.take(x, rows, axis=0, mode="clip")[:, :kv], cache)


def _put_rows(cache, rows, part):
    """Writes `part` (_take_rows' layout) back; padding rows (>= B) are dropped."""
    return jax.tree_util.tree_map(
        lambda full, p: full.at[rows, : p.shape[1]].set(p, mode="drop"), cache, part
    )


def forward_rows(cfg: ModelConfig, params, cache, rows, tokens, positions, kv_len=None):
    """Runs tokens [R,T] at absolute positions [R,T] (-1 = padding) against the cache rows of slots
    `rows` [R] (a row >= B is padding: read clipped, never written back). -> (ModelOutput, cache).
    params: model.decode.split_layers'; cache: model.decode.init_layer_caches' (one per layer).

    kv_len (static, default S): only cache positions [0, kv_len) are read and written; every
    position in `positions` must be < kv_len. Attention over a T-token piece costs T x kv_len, so a
    window sized to the context (not the cache) is what keeps prefill cheap early in an episode:
    for bench_rl_coding's model a 200-token prefill took 92 ms against S = 2048 and 21 ms against
    512 positions."""
    kv = cache_len_of(cache) if kv_len is None else kv_len
    out = forward_cached_layers(cfg, params, tokens, positions, _take_rows(cache, rows, kv))
    return out, _put_rows(cache, rows, out.cache)


def cache_len_of(cache) -> int:
    return jax.tree_util.tree_leaves(cache)[0].shape[1]


def _mtp(cfg: ModelConfig, params, h_prev, tokens, positions, cache, read=None):
    """MTP module 0 on hiddens h_prev [B,T,D] and the tokens after them [B,T] at `positions` [B,T]
    (negative = skip) -> (block output [B,T,D], logits [B,T,V], updated cache).

    read [B,T] bool (None = every fed row): the rows whose block output the caller reads. Every
    fed row writes its cache entry, but a row not read gets segment 0, so its MoE skips it
    (model/moe.py dispatch_blocked: an expert only such rows chose is never loaded) and its output
    is wrong; the cached attention masks by cache positions, not segments, so nothing else changes.
    The catch-up reads one row of K+1 and the prefill none: a verify step then loads the MTP
    block's experts of one token, not of K+1."""
    fed = positions >= 0
    seg = (fed if read is None else fed & read).astype(jnp.int32)
    return Transformer(cfg).apply(
        {"params": params},
        0,
        h_prev.astype(cfg.dtype),
        tokens,
        positions,
        seg,
        cache,
        method=Transformer.mtp_step,
    )


def _prefill_mtp(cfg, kv_len: int, k: int, params, st: SlotState, rows, seq, start, n_feed, hidden):
    """Speculative state of prefilled rows (see the module docstring, "Speculative decoding"). The
    MTP cache at position j holds module 0's block on (h_j, x_{j+1}); this call writes the entries
    a previous turn left in the buffer (positions start-nbuf .. start-1) and those of the fed
    positions but the last, whose pair (h_{p-1}, x_p), x_p pending, stays in the buffer: the first
    decode iteration's catch-up computes it and so yields the first draft.
    hidden [R,T,D] of the fed tokens -> (mtp_cache, hbuf [R,K+1,D], tbuf [R,K+1], nbuf [R])."""
    r, t = seq.shape
    take = lambda x: jnp.take(x, rows, axis=0, mode="clip")
    nb = jnp.where(start > 0, take(st.nbuf), 0)  # a fresh sequence has no earlier entries
    j1 = jnp.arange(k + 1)[None]  # [1,K+1]
    old_pos = jnp.where(j1 < nb[:, None], (start - nb)[:, None] + j1, -1)  # [R,K+1]
    j = jnp.arange(t)[None]  # [1,T]
    new_pos = jnp.where(j < n_feed[:, None] - 1, start[:, None] + j, -1)  # [R,T]
    nxt = jnp.pad(seq[:, 1:], ((0, 0), (0, 1)))  # [R,T]: x_{j+1} beside h_j
    h_in = jnp.concatenate([take(st.hbuf), hidden.astype(jnp.float32)], 1)  # [R,K+1+T,D]
    t_in = jnp.concatenate([take(st.tbuf), nxt], 1)  # [R,K+1+T]
    p_in = jnp.concatenate([old_pos, new_pos], 1)
    # Only the cache entries are kept: no row's block output is read (read = none).
    cache = _take_rows(st.mtp_cache, rows, kv_len)
    _, _, part = _mtp(cfg, params, h_in, t_in, p_in, cache, jnp.zeros(p_in.shape, bool))
    rr = jnp.arange(r)
    last = jnp.maximum(n_feed - 1, 0)
    hbuf = jnp.zeros((r, k + 1, hidden.shape[-1]), jnp.float32).at[:, 0].set(hidden[rr, last])
    tbuf = jnp.zeros((r, k + 1), jnp.int32).at[:, 0].set(seq[rr, n_feed])
    # A 1-token prompt has no h_{p-1}: its first draft is junk, and the accept rule judges it so.
    nbuf = (n_feed >= 1).astype(jnp.int32)
    return _put_rows(st.mtp_cache, rows, part), hbuf, tbuf, nbuf


def prefill(
    cfg, spec: Spec, kv_len: int, params, st: SlotState, rows, seq, start, n_seq, n_feed, turn
):
    """Writes seq [R,T] (n_seq [R] valid) at positions start.. into the rows' buffers, feeds the first
    n_feed [R] of them to the model, and arms the rows for decoding: pending = seq[n_feed].
    turn = (max_new [R], nforced [R], stops [R,St], temperature [R], top_k [R], top_p [R],
    seed [R], turn number [R]): the turn's budget, forcing, stops, sampling settings and rng
    stream; kv_len (static) >= max(start + n_seq): the cache window the forward reads and writes
    (forward_rows)."""
    max_new, nforced, stops, temp, top_k, top_p, seeds, turns = turn
    r, t = seq.shape
    j = jnp.arange(t)[None]  # [1,T]
    pos = start[:, None] + j  # [R,T]
    feed_pos = jnp.where(j < n_feed[:, None], pos, -1)
    out, cache = forward_rows(cfg, params, st.cache, rows, seq, feed_pos, kv_len)
    s = spec.cache_len
    col = jnp.where(j < n_seq[:, None], pos, s)  # s: dropped
    fcol = jnp.where(feed_pos >= 0, feed_pos, s)
    row2 = rows[:, None]
    pend_pos = start + n_feed
    arm = lambda x, v: x.at[rows].set(v, mode="drop")
    if spec.draft:
        mtp_cache, hbuf, tbuf, nbuf = _prefill_mtp(
            cfg, kv_len, spec.draft, params, st, rows, seq, start, n_feed, out.hidden
        )
        st = st.replace(
            mtp_cache=mtp_cache,
            hbuf=arm(st.hbuf, hbuf),
            tbuf=arm(st.tbuf, tbuf),
            nbuf=arm(st.nbuf, nbuf),
        )
    return st.replace(
        cache=cache,
        tokens=st.tokens.at[row2, col].set(seq, mode="drop"),
        logprobs=st.logprobs.at[row2, col].set(0.0, mode="drop"),
        versions=st.versions.at[row2, col].set(-1, mode="drop"),
        experts=st.experts.at[row2, fcol].set(_expert_rows(cfg, out, r, t), mode="drop"),
        active=arm(st.active, True),
        pos=arm(st.pos, pend_pos),
        tok=arm(st.tok, jnp.take_along_axis(seq, n_feed[:, None], 1)[:, 0]),
        ngen=arm(st.ngen, 0),
        max_new=arm(st.max_new, max_new),
        nforced=arm(st.nforced, nforced),
        stops=arm(st.stops, stops),
        stopped=arm(st.stopped, False),
        temp=arm(st.temp, temp),
        top_k=arm(st.top_k, top_k),
        top_p=arm(st.top_p, top_p),
        keys=arm(st.keys, _turn_keys(seeds, turns)),
    )


def slot_sampling(st: SlotState, valid) -> SamplingParams:
    """Each slot's own sampling settings ([B]; valid, the tokenizer's vocab, is the engine's)."""
    return SamplingParams(st.temp, st.top_k, st.top_p, valid)


def _decode_step(cfg, spec: Spec, params, version, valid, st: SlotState):
    """Feeds every active slot's pending token, samples (or reads the forced) next token with the
    slot's own settings, records."""
    b, s = spec.slots, spec.cache_len
    rows = jnp.arange(b)
    sp = slot_sampling(st, valid)
    res = forward_cached_layers(
        cfg, params, st.tok[:, None], jnp.where(st.active, st.pos, -1)[:, None], st.cache
    )
    lp = filtered_logprobs(res.logits[:, 0], sp)  # [B,V], invalid ids already -inf
    sampled = sample(_step_keys(st, 1)[:, 0], lp, sp.temperature <= 0)
    nxt_pos = st.pos + 1
    forced = st.tokens[rows, jnp.minimum(nxt_pos, s - 1)]
    nxt = jnp.where(st.ngen < st.nforced, forced, sampled)
    col = jnp.where(st.active, nxt_pos, s)  # inactive: dropped
    ccol = jnp.where(st.active, st.pos, s)
    ngen = st.ngen + st.active.astype(jnp.int32)
    is_stop = jnp.any(nxt[:, None] == st.stops, -1)
    finished = st.active & (is_stop | (ngen >= st.max_new))
    n_active = jnp.sum(st.active.astype(jnp.int32))
    return st.replace(
        cache=res.cache,
        tokens=st.tokens.at[rows, col].set(nxt, mode="drop"),
        logprobs=st.logprobs.at[rows, col].set(token_logprob(lp, nxt), mode="drop"),
        versions=st.versions.at[rows, col].set(jnp.broadcast_to(version, (b,)), mode="drop"),
        experts=st.experts.at[rows, ccol].set(_expert_rows(cfg, res, b, 1)[:, 0], mode="drop"),
        active=st.active & ~finished,
        pos=jnp.where(st.active, nxt_pos, st.pos),
        tok=jnp.where(st.active, nxt, st.tok),
        ngen=ngen,
        stopped=jnp.where(finished, is_stop, st.stopped),
        stats=st.stats + jnp.stack([1, n_active, 0, 0]),
        **_record_raw(spec, st, res.logits[:, 0], valid, nxt, rows, col),
    )


def _forced_ahead(spec: Spec, st: SlotState, width: int):
    """The next `width` tokens of each slot's turn as teacher forcing sees them: -> (ids [B,W] at
    positions pos+1.., [B,W] bool: inside the turn's forced prefix)."""
    i = jnp.arange(width)[None]  # [1,W]
    col = jnp.minimum(st.pos[:, None] + 1 + i, spec.cache_len - 1)
    return jnp.take_along_axis(st.tokens, col, 1), st.ngen[:, None] + i < st.nforced[:, None]


def _draft(cfg, spec: Spec, params, sp: SamplingParams, st: SlotState, key, forced_tok, forced):
    """K drafts per slot: the MTP catch-up on the positions emitted last iteration, with the main
    model's true hiddens (its last entry, (h_{p-1}, x_p), yields draft 1), then module 0 chained on
    its own hidden for drafts 2..K (as vLLM/SGLang do past the number of MTP modules). A
    teacher-forced position drafts its forced token. -> (drafts [B,K], draft log-probs [B,K,V],
    mtp_cache). MTP cache entries written from draft hiddens sit at positions >= pos and are
    rewritten by the next catch-up before any query attends to them (write-before-attend)."""
    b, k1 = st.tbuf.shape
    rows = jnp.arange(b)
    j = jnp.arange(k1)[None]  # [1,K+1]
    first = (st.pos - st.nbuf)[:, None]
    cpos = jnp.where(st.active[:, None] & (j < st.nbuf[:, None]), first + j, -1)  # [B,K+1]
    last = jnp.maximum(st.nbuf - 1, 0)
    x, logits, mtp_cache = _mtp(
        cfg, params, st.hbuf, st.tbuf, cpos, st.mtp_cache, j == last[:, None]
    )
    x_last, lg = x[rows, last], logits[rows, last]  # [B,D], [B,V]
    drafts, lps = [], []
    keys = sample_split(key, spec.draft)  # [B,K,2]: one per draft and slot
    for i in range(spec.draft):
        lp = filtered_logprobs(lg, sp)  # [B,V]: q_i, masked like the main model's
        d = jnp.where(forced[:, i], forced_tok[:, i], sample(keys[:, i], lp, sp.temperature <= 0))
        drafts.append(d)
        lps.append(lp)
        if i + 1 < spec.draft:  # module 0 at position pos+i on (its own hidden, draft i)
            dpos = jnp.where(st.active, st.pos + i, -1)[:, None]  # [B,1]
            x, lgs, mtp_cache = _mtp(cfg, params, x_last[:, None], d[:, None], dpos, mtp_cache)
            x_last, lg = x[:, 0], lgs[:, 0]
    return jnp.stack(drafts, 1), jnp.stack(lps, 1), mtp_cache


def _verify_step(cfg, spec: Spec, params, version, valid, st: SlotState):
    """Speculative decode step for every active slot: K MTP drafts, one main-model forward over
    [pending, drafts] at positions pos..pos+K, the speculative rule (model/sampling.py) accepts a
    prefix of the drafts and emits one more token. Each emitted token is recorded as _decode_step
    records it: its main-model (filtered) log-prob, the experts of the forward that consumed it,
    the version. Stops and the turn budget cut the emitted run; the main cache rows past the new
    pending position hold rejected or cut tokens and are overwritten before being attended to.
    Per-slot settings: each slot's drafts, target and rule use its own (filtered) distributions,
    greedy or sampled, so the output is exact slot by slot."""
    b, s, kk = spec.slots, spec.cache_len, spec.draft
    sp = slot_sampling(st, valid)
    rows = jnp.arange(b)
    i = jnp.arange(kk + 1)[None]  # [1,K+1]
    keys = _step_keys(st, 2)  # [B,2,2]
    k_draft, k_accept = keys[:, 0], keys[:, 1]
    forced_tok, forced = _forced_ahead(spec, st, kk + 1)  # [B,K+1]
    drafts, draft_lp, mtp_cache = _draft(cfg, spec, params, sp, st, k_draft, forced_tok, forced)
    vtok = jnp.concatenate([st.tok[:, None], drafts], 1)  # [B,K+1]
    vpos = jnp.where(st.active[:, None], st.pos[:, None] + i, -1)
    res = forward_cached_layers(cfg, params, vtok, vpos, st.cache)
    target_lp = filtered_logprobs(res.logits, sp)  # [B,K+1,V]
    greedy = sp.temperature <= 0
    n_acc, nxt = speculative_accept(
        k_accept, target_lp, draft_lp, drafts, greedy, forced=forced[:, :kk]
    )
    nxt = jnp.where(forced[rows, n_acc], forced_tok[rows, n_acc], nxt)
    # [B,K+1]: the accepted drafts, then nxt (columns past n_acc are never kept)
    emitted = jnp.where(
        i == n_acc[:, None], nxt[:, None], jnp.concatenate([drafts, nxt[:, None]], 1)
    )
    is_stop = jnp.any(emitted[:, :, None] == st.stops[:, None, :], -1) & (i <= n_acc[:, None])
    first_stop = jnp.where(jnp.any(is_stop, 1), jnp.argmax(is_stop, 1), kk + 1)
    n_emit = jnp.minimum(jnp.minimum(n_acc + 1, first_stop + 1), st.max_new - st.ngen)
    n_emit = jnp.where(st.active, n_emit, 0)  # [B]
    keep = i < n_emit[:, None]  # [B,K+1]
    col = jnp.where(keep, st.pos[:, None] + 1 + i, s)  # emitted tokens' positions; s: dropped
    ccol = jnp.where(keep, st.pos[:, None] + i, s)  # the positions that consumed them
    ngen = st.ngen + n_emit
    stopped = jnp.any(is_stop & keep, 1)
    finished = st.active & (stopped | (ngen >= st.max_new))
    act = st.active
    act3 = act[:, None, None]
    n_active = jnp.sum(act.astype(jnp.int32))
    stats = jnp.stack([1, n_active, kk * n_active, jnp.sum(jnp.where(act, n_acc, 0))])
    return st.replace(
        cache=res.cache,
        mtp_cache=mtp_cache,
        tokens=st.tokens.at[rows[:, None], col].set(emitted, mode="drop"),
        logprobs=st.logprobs.at[rows[:, None], col].set(
            token_logprob(target_lp, emitted), mode="drop"
        ),
        versions=st.versions.at[rows[:, None], col].set(
            jnp.broadcast_to(version, emitted.shape), mode="drop"
        ),
        experts=st.experts.at[rows[:, None], ccol].set(
            _expert_rows(cfg, res, b, kk + 1), mode="drop"
        ),
        active=act & ~finished,
        pos=st.pos + n_emit,
        tok=jnp.where(act, emitted[rows, jnp.maximum(n_emit - 1, 0)], st.tok),
        ngen=ngen,
        stopped=jnp.where(finished, stopped, st.stopped),
        # A paused slot keeps its buffer: extend's prefill writes those MTP entries.
        hbuf=jnp.where(act3, res.hidden.astype(jnp.float32), st.hbuf),
        tbuf=jnp.where(act[:, None], emitted, st.tbuf),
        nbuf=jnp.where(act, n_emit, st.nbuf),
        stats=st.stats + stats.astype(jnp.int32),
        **_record_raw(spec, st, res.logits, valid, emitted, rows[:, None], col),
    )


def decode(
    cfg, spec: Spec, kv_len: int, params, version, valid, st: SlotState, rows, max_iterations
):
    """Decode steps (verify steps when Spec.draft > 0) over the slots `rows` until one of them ends
    its turn, none is active, or max_iterations. Every slot samples with its own settings
    (SlotState.temp/top_k/top_p, set by prefill); valid: the engine's valid vocab.

    rows [R] int32 (static R): R = B decodes every slot in place; R < B gathers those slots (the
    running ones, padded with B = an inactive row whose writes are dropped) into an R-slot state,
    decodes it and scatters it back, so a step costs R rows of the forward and of the cache, not
    B: one live request of 32 slots no longer pays for 32 (bench/RESULTS.md, "Serving").

    kv_len (static) > every position fed in this call that is kept: the loop carries only the cache
    window [0, kv_len) and writes it back once at the end (kv_len = S with R = B: the cache itself,
    no copy; draft positions past the window are dropped writes, never emitted). A decode step
    reads the whole cache it is given (memory-bound: for bench_rl_coding's model ~2 ms per 1000
    positions of 8 slots), so a window sized to short contexts keeps their turns cheap."""
    r = rows.shape[0]
    if r < spec.slots:
        sub = _gather_slots(st, rows, kv_len)
        sub = sub.replace(active=sub.active & (rows < spec.slots))
        sub_spec = dataclasses.replace(spec, slots=r)
        done = _decode_loop(cfg, sub_spec, params, version, valid, sub, max_iterations)
        return _scatter_slots(st, rows, done)
    caches = {"main": st.cache, "mtp": st.mtp_cache}
    if kv_len >= spec.cache_len:  # no window: the loop carries the cache itself, no copies
        return _decode_loop(cfg, spec, params, version, valid, st, max_iterations)
    window = jax.tree_util.tree_map(lambda x: x[:, :kv_len], caches)
    st = _decode_loop(
        cfg,
        spec,
        params,
        version,
        valid,
        st.replace(cache=window["main"], mtp_cache=window["mtp"]),
        max_iterations,
    )
    back = jax.tree_util.tree_map(
        lambda f, w: jax.lax.dynamic_update_slice_in_dim(f, w, 0, axis=1),
        caches,
        {"main": st.cache, "mtp": st.mtp_cache},
    )
    return st.replace(cache=back["main"], mtp_cache=back["mtp"])


def _decode_loop(cfg, spec: Spec, params, version, valid, st: SlotState, max_iterations):
    """The while loop of decode over all of st's spec.slots slots."""
    step = _verify_step if spec.draft else _decode_step

    def cond(carry):
        st, n, ended = carry
        return jnp.any(st.active) & (n < max_iterations) & ~ended

    def body(carry):
        st, n, _ = carry
        new = step(cfg, spec, params, version, valid, st)
        return new, n + 1, jnp.any(st.active & ~new.active)

    return jax.lax.while_loop(cond, body, (st, jnp.int32(0), jnp.bool_(False)))[0]


# Slot-indexed leaves other than the caches (which are windowed): [B, ...] each.
_CACHES, _GLOBAL = ("cache", "mtp_cache"), ("stats",)


def _gather_slots(st: SlotState, rows, kv_len: int) -> SlotState:
    """The R-slot state of slots `rows` [R] (a row >= B: padding, a clipped copy of the last slot),
    caches windowed to [0, kv_len)."""
    take = lambda x: jnp.take(x, rows, axis=0, mode="clip")
    fields = {
        f.name: take(getattr(st, f.name))
        for f in dataclasses.fields(st)
        if f.name not in _CACHES + _GLOBAL
    }
    return st.replace(
        **fields,
        cache=_take_rows(st.cache, rows, kv_len),
        mtp_cache=_take_rows(st.mtp_cache, rows, kv_len),
    )


def _scatter_slots(st: SlotState, rows, sub: SlotState) -> SlotState:
    """Writes _gather_slots' state back into st (padding rows dropped); stats are sub's."""
    put = lambda full, part: full.at[rows].set(part, mode="drop")
    fields = {
        f.name: put(getattr(st, f.name), getattr(sub, f.name))
        for f in dataclasses.fields(st)
        if f.name not in _CACHES + _GLOBAL
    }
    return st.replace(
        **fields,
        cache=_put_rows(st.cache, rows, sub.cache),
        mtp_cache=_put_rows(st.mtp_cache, rows, sub.mtp_cache),
        stats=sub.stats,
    )


def _end_turns(st: SlotState, slots) -> SlotState:
    """Stops slots [N] (>= B: none) now, as if their budget ran out (a server's stop string)."""
    return st.replace(active=st.active.at[slots].set(False, mode="drop"))


def _fetch_turn(st: SlotState, slot):
    return st.tokens[slot], st.logprobs[slot], st.versions[slot]


_init_jit = jax.jit(init_state, static_argnums=(0, 1))
_prefill_jit = jax.jit(prefill, static_argnums=(0, 1, 2), donate_argnums=(4,))
_decode_jit = jax.jit(decode, static_argnums=(0, 1, 2), donate_argnums=(6,))
_end_turns_jit = jax.jit(_end_turns, donate_argnums=(0,))
_fetch_turn_jit = jax.jit(_fetch_turn)
_fetch_experts_jit = jax.jit(lambda st, slot: st.experts[slot])
_fetch_raw_jit = jax.jit(lambda st, slot: (st.raw_lp[slot], st.top_ids[slot], st.top_lp[slot]))


# --- sharded engines (tensor- and expert-parallel decode over the engine's own mesh) ---------------


def state_logical_specs(st: SlotState) -> SlotState:
    """Logical axes of the slot state: every slot-indexed leaf ([B, ...]: the per-layer latent
    caches, the [B,S] record buffers, the [B] counters) over BATCH, i.e. slots split over the
    data-like axes (data, fsdp) by the default rules (the per-slot rng keys too); stats replicated.

    The cache's S and latent dims stay whole on each device. Every head reads all L + R values of
    a position (MLA's latent is shared by the heads, like MQA's one K/V head), so a cache split over
    the tensor axis would make each head's scores [B,H,T,S] a partial sum to all-reduce per layer
    and step, where tensor-parallel attention otherwise all-reduces only its [B,T,D] output after wo.
    Replicated over tensor and expert it costs (L + R) x itemsize x S per slot and layer on each
    device: kimi_k2, 576 values, S = 8192: 9.4 MB per slot per layer in bf16 (18.9 MB in f32)."""
    slots = lambda tree: jax.tree.map(lambda _: P(sh.BATCH), tree)
    per_slot = {
        f.name: slots(getattr(st, f.name)) for f in dataclasses.fields(st) if f.name != "stats"
    }
    return st.replace(**per_slot, stats=P())


@functools.lru_cache(maxsize=16)
def _sharded_programs(cfg: ModelConfig, spec: Spec, mesh, rules):
    """(init, prefill, decode, end_turns) jitted with the slot state's shardings as out_shardings: the state
    is created sharded (never whole on one device), and a donated state comes back in the layout it
    went in (so its buffers are reused and the next call is not a new program). Params keep the
    shardings they are placed with (set_params). Cached per (cfg, spec, mesh, rules): engines alike
    share compiled programs, and rules, which jit does not see, are part of the key."""
    abstract = jax.eval_shape(functools.partial(init_state, cfg, spec))
    st_sh = sh.logical_shardings(state_logical_specs(abstract), mesh, rules)
    return (
        jax.jit(init_state, static_argnums=(0, 1), out_shardings=st_sh),
        jax.jit(prefill, static_argnums=(0, 1, 2), donate_argnums=(4,), out_shardings=st_sh),
        jax.jit(decode, static_argnums=(0, 1, 2), donate_argnums=(6,), out_shardings=st_sh),
        jax.jit(_end_turns, donate_argnums=(0,), out_shardings=st_sh),
    )


# --- host side -------------------------------------------------------------------------------------


def _buckets(lo: int, hi: int) -> list[int]:
    """Powers-of-two multiples of lo below hi, then hi."""
    out, b = [], lo
    while b < hi:
        out.append(b)
        b *= 2
    return out + [hi]


def _kv_buckets(t_buckets: list[int]) -> list[int]:
    """Cache windows for prefill: the T buckets and the midpoints 1.5 x between them (a window is
    then at most 1.5x the context it serves, at two programs per octave)."""
    hi = t_buckets[-1]
    mids = [b * 3 // 2 for b in t_buckets if b % 2 == 0 and b * 3 // 2 < hi]
    return sorted(set(t_buckets) | set(mids))


def _bucket(n: int, buckets: list[int]) -> int:
    return next(b for b in buckets if b >= n)


@dataclasses.dataclass
class Turn:
    """One finished turn of a request: emitted ids with their sampler log-probs and params versions."""

    request: object
    tokens: list[int]
    logprobs: np.ndarray  # [n] float32
    versions: np.ndarray  # [n] int32
    finish_reason: str  # 'stop' (the stop token is the last of tokens) | 'length'
    start: int  # absolute position of tokens[0] in the request's sequence


@dataclasses.dataclass(frozen=True)
class Sampling:
    """One turn's sampling settings (model/sampling.py): temperature 0 = greedy, top_k <= 0 and
    top_p = 1 = no filter. The recorded log-probs are those of the distribution these define."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None  # in [0, 2**31): the request's own rng stream (None: the engine's)


@dataclasses.dataclass
class _Request:
    rid: object
    new: list[int]  # tokens waiting to be prefilled (whole prompt, or an observation)
    max_new: int
    stops: list[int]
    forced: list[int]
    sampling: Sampling
    seed: int = 0  # the request's stream: Sampling.seed, or drawn from the engine's seed
    turns: int = 0  # turns prefilled so far (each turn folds its number into the stream)
    slot: int = -1
    length: int = 0  # tokens of the sequence known to the engine (incl. emitted)
    pending: int | None = None  # after rewind(): the pending token (else the device's)
    state: str = "queued"  # queued -> prefill -> running -> paused (-> prefill ...)
    logprobs: bool = False  # record raw log-probs + top alternatives (engine top_logprobs >= 0)


class RolloutEngine:
    """Slots + an open request queue. Not thread-safe: drive it from one thread (rl/sampling/rollout.py).
    speculative_k: MTP draft tokens per verify step (0 = plain decoding; > 0 needs MTP modules).
    temperature / top_k / top_p: the default sampling settings; a turn may bring its own
    (`submit(..., sampling=Sampling(...))`), and every slot samples with its own in the same
    compiled programs (the settings are per-slot arrays, not static)."""

    def __init__(
        self,
        cfg: ModelConfig,
        params,
        *,
        slots: int = 8,
        cache_len: int = 1024,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        valid_vocab: int = 0,
        seed: int = 0,
        params_version: int = 0,
        stop_width: int = 4,
        min_bucket: int = 16,
        speculative_k: int = 0,
        mesh=None,
        rules=None,
        compact: bool = True,
        top_logprobs: int = -1,
    ):
        """mesh (model.sharding.role_mesh; None: one device): params and the latent cache are
        sharded over it by the logical `rules` (default model.sharding.DEFAULT_RULES): heads, FFN
        width and vocab over tensor, experts over expert, the model dim over fsdp, slots over
        (data, fsdp), and every program runs under it. With an expert axis > 1 on CPU, set
        cfg.moe_comm='alltoall' (model/moe_a2a.py; 'auto' picks it on GPU/TPU): the 'gspmd' dispatch slices experts by a
        traced index, which GSPMD serves by all-gathering each MoE layer's experts over the expert
        axis at every decode step (tests/test_engine_sharding.py probes the compiled program).
        compact: decode only the running slots (module docstring, "Live rows only"); False runs
        every slot at every step, as the engine did before (bench/bench_serve.py's baseline).
        top_logprobs: W >= 0 keeps, for requests submitted with logprobs=True, each emitted
        token's raw log-prob and its top-W alternatives (`raw_logprobs`); -1 (default) keeps no
        buffers. Decode calls with no such request running do not compute them (a static flag)."""
        if speculative_k < 0 or (speculative_k and cfg.num_mtp_modules == 0):
            raise ValueError(
                f"speculative_k={speculative_k}: speculative decoding needs speculative_k >= 0 and "
                f"MTP modules (config has num_mtp_modules={cfg.num_mtp_modules})"
            )
        if slots <= 0 or cache_len < 2 or cache_len > cfg.max_position_embeddings:
            raise ValueError(
                f"RolloutEngine: need slots > 0 and 2 <= cache_len <= max_position_embeddings="
                f"{cfg.max_position_embeddings}, got slots={slots}, cache_len={cache_len}"
            )
        if valid_vocab > cfg.vocab_size:
            raise ValueError(f"valid_vocab={valid_vocab} exceeds the model vocab {cfg.vocab_size}")
        if top_logprobs > cfg.vocab_size:
            raise ValueError(f"top_logprobs={top_logprobs} exceeds the vocab {cfg.vocab_size}")
        platform = (mesh.devices.flat[0] if mesh is not None else jax.devices()[0]).platform
        self.cfg = cfg = engine_config(cfg, platform)  # decode_dtype resolved (module docstring)
        self.spec = Spec(slots, cache_len, stop_width, speculative_k, max(top_logprobs, -1))
        SamplingParams.make(temperature, top_k, top_p, valid_vocab)  # checks them
        self.sampling = Sampling(float(temperature), int(top_k), float(top_p))
        self.valid = valid_vocab or cfg.vocab_size
        self.compact = compact
        self._shard(mesh, rules)
        self.set_params(params, params_version)
        self.t_buckets = _buckets(min(min_bucket, cache_len), cache_len)
        self.r_buckets = _buckets(1, slots)
        self.kv_buckets = _kv_buckets(self.t_buckets)
        n_r, n_t, n_kv = len(self.r_buckets), len(self.t_buckets), len(self.kv_buckets)
        self.max_programs = 4 + n_r * n_kv + n_r * n_t * n_kv
        if self.spec.top_logprobs >= 0:  # decode recording raw log-probs, and their fetch
            self.max_programs += n_r * n_kv + 1
        self.programs: set[tuple] = {("init",)}
        with self._context():
            self.state = self._init(cfg, self.spec)
        self._rng = np.random.default_rng(seed)  # the streams of requests without a seed
        self._free = list(range(slots))
        self._queue: collections.deque[_Request] = collections.deque()
        self._requests: dict[object, _Request] = {}
        self.timing = {"prefill_s": 0.0, "decode_s": 0.0}

    def set_params(self, params, version: int) -> None:
        """In-flight weight update: the caches stay; later tokens record the new version. The
        engine holds the params split per layer (model.decode.split_layers: no per-iteration
        slicing of stacked weights in the decode loop). A sharded engine places them on its own
        shardings, from wherever they are (host arrays, a trainer's mesh on other devices). Any
        dtypes: they are cast to the engine's (model.decode.decode_params) on their own devices."""
        split = split_layers(decode_params(self.cfg, params))
        if self.mesh is not None:
            sh.check_divisible(split, self._param_shardings, "params")
            split = jax.device_put(split, self._param_shardings)
        else:  # host arrays onto the device once, not at every call
            split = jax.device_put(split)
        self.params, self.version = split, jnp.int32(version)

    def _shard(self, mesh, rules) -> None:
        """Shardings and programs for `mesh` (None: the unsharded module-level programs)."""
        self.mesh, self.rules = mesh, sh.normalize_rules(rules or sh.DEFAULT_RULES)
        self._init, self._prefill, self._decode = _init_jit, _prefill_jit, _decode_jit
        self._end = _end_turns_jit
        if mesh is None:
            return
        sh.check_model_mesh(self.cfg, mesh)
        slot_axes = nn.logical_to_mesh_axes((sh.BATCH,), self.rules)[0] or ()
        slot_axes = (slot_axes,) if isinstance(slot_axes, str) else slot_axes
        n = math.prod(mesh.shape[a] for a in slot_axes)
        if self.spec.slots % n:
            raise ValueError(
                f"slots={self.spec.slots} is not divisible by mesh axes {slot_axes} ({n})"
            )
        specs = split_layer_specs(self.cfg, param_logical_specs(self.cfg))
        self._param_shardings = sh.logical_shardings(specs, mesh, self.rules)
        programs = _sharded_programs(self.cfg, self.spec, mesh, self.rules)
        self._init, self._prefill, self._decode, self._end = programs

    def _context(self):
        """The mesh and logical rules every program of a sharded engine is traced under."""
        if self.mesh is None:
            return contextlib.nullcontext()
        return sh.mesh_context(self.mesh, self.rules)

    # -- requests

    def submit(
        self,
        rid,
        prompt,
        *,
        max_new: int,
        stop_tokens=(),
        forced=None,
        sampling=None,
        logprobs: bool = False,
    ) -> None:
        """Queues a new request; it starts when a slot is free (call step()). sampling: this
        turn's Sampling (None: the engine's defaults). logprobs: record its tokens' raw log-probs
        and top alternatives (`raw_logprobs`; needs an engine built with top_logprobs >= 0)."""
        if rid in self._requests:
            raise ValueError(f"request {rid!r} already exists")
        if len(prompt) == 0:
            raise ValueError(f"request {rid!r}: empty prompt")
        if logprobs and self.spec.top_logprobs < 0:
            raise ValueError(f"request {rid!r}: logprobs need an engine with top_logprobs >= 0")
        req = _Request(rid, *self._turn_args(rid, prompt, max_new, stop_tokens, forced, sampling))
        req.logprobs = bool(logprobs)
        seed = req.sampling.seed
        req.seed = int(self._rng.integers(2**31)) if seed is None else seed
        self._requests[rid] = req
        self._queue.append(req)

    def extend(
        self, rid, tokens, *, max_new: int, stop_tokens=(), forced=None, sampling=None
    ) -> None:
        """Continues a paused request: appends `tokens` (an observation) and starts its next turn
        (sampling: as in submit)."""
        req = self._requests.get(rid)
        if req is None or req.state != "paused":
            state = "unknown" if req is None else req.state
            raise ValueError(f"extend({rid!r}): request is {state}, not paused after a turn")
        if len(tokens) == 0:
            raise ValueError(f"extend({rid!r}): no tokens to append")
        req.new, req.max_new, req.stops, req.forced, req.sampling = self._turn_args(
            rid, tokens, max_new, stop_tokens, forced, sampling
        )
        req.state = "prefill"

    def finish(self, rid) -> np.ndarray:
        """Frees the request's slot. -> experts [consumed, n, k] (rows of every consumed token)."""
        req = self._requests.get(rid)
        if req is None or req.state not in ("paused", "queued"):
            raise ValueError(f"finish({rid!r}): request is not paused")
        del self._requests[rid]
        if req.state == "queued":
            self._queue.remove(req)
            return np.zeros(
                (0, self.cfg.num_moe_layers, max(self.cfg.num_experts_per_tok, 1)), np.int32
            )
        self._free.append(req.slot)
        return self._experts_of(req)

    def experts(self, rid) -> np.ndarray:
        """A paused request's routing rows [consumed, n, k], the slot kept (finish's rows)."""
        req = self._requests.get(rid)
        if req is None or req.state != "paused":
            raise ValueError(f"experts({rid!r}): request is not paused")
        return self._experts_of(req)

    def _experts_of(self, req: _Request) -> np.ndarray:
        self.programs.add(("fetch_experts",))
        with self._context():
            experts = np.asarray(_fetch_experts_jit(self.state, jnp.int32(req.slot)))
        return experts[: req.length - 1]  # the last token is pending (never consumed)

    def rewind(self, rid, keep: int) -> None:
        """Cuts a paused request back to its first `keep` tokens (1 <= keep <= its length); the
        next `extend` continues from there with the prefix's cache kept. Not with speculative
        decoding (its MTP buffer holds the old sequence's last positions)."""
        req = self._requests.get(rid)
        if req is None or req.state != "paused":
            raise ValueError(f"rewind({rid!r}): request is not paused")
        if not 1 <= keep <= req.length:
            raise ValueError(f"rewind({rid!r}, {keep}): keep must be in 1..{req.length}")
        if self.spec.draft:
            raise ValueError(f"rewind({rid!r}): not supported with speculative_k > 0")
        req.pending = int(np.asarray(self.state.tokens[req.slot, keep - 1]))
        req.length = keep

    def sequence(self, rid) -> list[int]:
        """The tokens the engine holds for a request's slot (what the model consumed + pending)."""
        req = self._requests[rid]
        return [int(t) for t in np.asarray(self.state.tokens[req.slot, : req.length])]

    def partial(self) -> dict:
        """{rid: tokens emitted so far} of every running turn (streaming between step calls: one
        [B,S] fetch, not one per request)."""
        running = [r for r in self._requests.values() if r.state == "running"]
        if not running:
            return {}
        tokens, ngen = jax.device_get((self.state.tokens, self.state.ngen))
        return {
            r.rid: [int(t) for t in tokens[r.slot, r.length : r.length + int(ngen[r.slot])]]
            for r in running
        }

    @property
    def queued(self) -> int:
        """Requests waiting for a free slot."""
        return len(self._queue)

    def counters(self) -> dict:
        """Decode iterations, slot-steps (active slots summed over iterations), MTP tokens drafted
        and accepted so far."""
        names = ("iterations", "slot_steps", "drafted", "accepted")
        return dict(zip(names, (int(x) for x in jax.device_get(self.state.stats))))

    @property
    def busy(self) -> bool:
        return any(r.state in ("queued", "prefill", "running") for r in self._requests.values())

    def _turn_args(self, rid, new, max_new, stop_tokens, forced, sampling):
        new, stops, forced = list(new), list(stop_tokens), list(forced or [])
        for what, ids in (("tokens", new), ("stop_tokens", stops), ("forced", forced)):
            bad = [t for t in ids if not 0 <= int(t) < self.cfg.vocab_size]
            if bad:
                raise ValueError(
                    f"request {rid!r}: {what} id {bad[0]} outside [0, {self.cfg.vocab_size})"
                )
        if len(stops) > self.spec.stop_width:
            raise ValueError(
                f"request {rid!r}: {len(stops)} stop tokens > stop_width={self.spec.stop_width}"
            )
        if max_new <= 0 or len(forced) > max_new:
            raise ValueError(f"request {rid!r}: max_new={max_new} must be > 0 and >= len(forced)")
        sampling = self.sampling if sampling is None else sampling
        try:
            check(sampling.temperature, sampling.top_k, sampling.top_p)
        except ValueError as e:
            raise ValueError(f"request {rid!r}: {e}") from None
        seed = sampling.seed
        if seed is not None and (not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**31):
            raise ValueError(f"request {rid!r}: seed must be an int in [0, 2**31), got {seed!r}")
        return new, int(max_new), stops, forced, sampling

    # -- running

    def step(self, max_iterations: int = 256) -> list[Turn]:
        """Starts queued requests in free slots, prefills pending tokens, then decodes until some turn
        ends (or max_iterations). -> the turns that ended."""
        while self._queue and self._free:
            req = self._queue.popleft()
            req.slot, req.state = self._free.pop(0), "prefill"
        self._prefill_pending()
        running = [r for r in self._requests.values() if r.state == "running"]
        if not running:
            return []
        t0 = time.perf_counter()
        rows, kv = self._decode_shape(running)
        spec = self._decode_spec(running)
        recording = ("raw_logprobs",) if spec.top_logprobs >= 0 else ()
        self.programs.add(("decode", len(rows), kv) + recording)
        assert len(self.programs) <= self.max_programs, (self.programs, self.max_programs)
        with self._context():
            self.state = self._decode(
                self.cfg,
                spec,
                kv,
                self.params,
                self.version,
                jnp.int32(self.valid),
                self.state,
                jnp.asarray(rows),
                jnp.int32(max_iterations),
            )
        active, ngen, stopped = jax.device_get(
            (self.state.active, self.state.ngen, self.state.stopped)
        )
        self.timing["decode_s"] += time.perf_counter() - t0
        return [
            self._pause(req, int(ngen[req.slot]), bool(stopped[req.slot]))
            for req in running
            if not active[req.slot]
        ]

    def _decode_spec(self, running: list[_Request]) -> Spec:
        """The engine's spec, with raw log-prob recording switched off (top_logprobs = -1: a
        program that never computes them) unless a running request asked for them."""
        if self.spec.top_logprobs < 0 or any(r.logprobs for r in running):
            return self.spec
        return dataclasses.replace(self.spec, top_logprobs=-1)

    def raw_logprobs(self, rid, start: int, stop: int):
        """Raw log-probs of the tokens at absolute positions [start, stop) of a running or paused
        request submitted with logprobs=True (emitted tokens only: a request's j-th emitted token
        of its first turn is at len(prompt) + j). The model's own distribution, before temperature
        and top-k/top-p (vLLM's default, logprobs_mode='raw_logprobs'), over the valid ids.
        -> (the tokens' log-probs [n], top ids [n,W], their log-probs [n,W], largest first)."""
        req = self._requests.get(rid)
        if req is None or req.state not in ("running", "paused") or not req.logprobs:
            raise ValueError(f"raw_logprobs({rid!r}): not a live request submitted with logprobs")
        self.programs.add(("fetch_raw",))
        with self._context():
            raw, ids, lps = jax.device_get(_fetch_raw_jit(self.state, jnp.int32(req.slot)))
        return raw[start:stop], ids[start:stop], lps[start:stop]

    def _decode_shape(self, running: list[_Request]) -> tuple[np.ndarray, int]:
        """-> (rows [R], kv window) of a decode call over the running requests. R: the running
        count rounded up to a row bucket (a power of two, or B); R < B decodes only those slots
        (gathered, padded with B), so a step's cost follows the live requests, not the slots.
        Positions fed this call are < length - 1 + max_new (the turn's budget) for every slot.
        In place (R = B), copying a window in and out of the loop costs more than reading the
        whole cache unless the window is at most half of it (bench/RESULTS.md: 1.28x the time at
        1536 of 2048); gathered rows are copied anyway, so they always take the smallest window."""
        b = self.spec.slots
        kv = _bucket(max(r.length - 1 + r.max_new for r in running), self.kv_buckets)
        r = _bucket(len(running), self.r_buckets) if self.compact else b
        if r == b:
            kv = kv if 2 * kv <= self.spec.cache_len else self.spec.cache_len
            return np.arange(b, dtype=np.int32), kv
        rows = np.full((r,), b, np.int32)
        rows[: len(running)] = sorted(q.slot for q in running)
        return rows, kv

    def _pause(self, req: _Request, n: int, stopped: bool) -> Turn:
        """The ended turn of req (n tokens emitted), which is paused."""
        self.programs.add(("fetch_turn",))
        with self._context():
            turn = _fetch_turn_jit(self.state, jnp.int32(req.slot))
        toks, lps, vers = jax.device_get(turn)
        a = req.length
        req.length += n
        req.state = "paused"
        return Turn(
            req.rid,
            [int(t) for t in toks[a : a + n]],
            lps[a : a + n],
            vers[a : a + n],
            "stop" if stopped else "length",
            a,
        )

    def end_turn(self, rid) -> Turn:
        """Ends a running request's turn now, with the tokens emitted so far (finish_reason
        'stop'): a server's stop string was seen in them. The request is paused, as after a turn
        that ended by itself (extend / finish as usual)."""
        req = self._requests.get(rid)
        if req is None or req.state != "running":
            state = "unknown" if req is None else req.state
            raise ValueError(f"end_turn({rid!r}): request is {state}, not running")
        self.programs.add(("end_turns",))
        with self._context():
            self.state = self._end(self.state, jnp.asarray([req.slot], jnp.int32))
        return self._pause(req, int(np.asarray(self.state.ngen[req.slot])), True)

    def _prefill_pending(self) -> None:
        todo = [r for r in self._requests.values() if r.state == "prefill"]
        if not todo:
            return
        t0 = time.perf_counter()
        by_t = collections.defaultdict(list)
        for req in todo:
            fresh = req.length == 0
            seq = (
                req.new if fresh else [None] + req.new
            )  # None: the pending token, already on device
            n_seq = len(seq) + len(req.forced)
            budget = self.spec.cache_len - req.length - len(req.new)  # positions left to emit into
            if budget < 1:
                raise ValueError(
                    f"request {req.rid!r}: {req.length + len(req.new)} tokens leave no room in the "
                    f"cache of {self.spec.cache_len}"
                )
            req.max_new = min(req.max_new, budget)
            if len(req.forced) > req.max_new:
                raise ValueError(f"request {req.rid!r}: forced tokens exceed the cache")
            by_t[_bucket(n_seq, self.t_buckets)].append(req)
        for t, reqs in sorted(by_t.items()):
            for i in range(0, len(reqs), self.spec.slots):
                self._prefill_group(reqs[i : i + self.spec.slots], t)
        self.timing["prefill_s"] += time.perf_counter() - t0

    def _prefill_group(self, reqs: list[_Request], t: int) -> None:
        r = _bucket(len(reqs), self.r_buckets)
        b, st_w = self.spec.slots, self.spec.stop_width
        rows = np.full((r,), b, np.int32)
        seq = np.zeros((r, t), np.int32)
        start, n_seq, n_feed = (np.zeros((r,), np.int32) for _ in range(3))
        max_new, nforced = np.ones((r,), np.int32), np.zeros((r,), np.int32)
        stops = np.full((r, st_w), -1, np.int32)
        temp, top_p = np.zeros((r,), np.float32), np.ones((r,), np.float32)
        top_k, seeds, turns = (np.zeros((r,), np.int32) for _ in range(3))
        pending = np.asarray(self.state.tok) if any(q.length for q in reqs) else None
        for i, req in enumerate(reqs):
            fresh = req.length == 0
            head = [] if fresh else [int(pending[req.slot]) if req.pending is None else req.pending]
            req.pending = None
            ids = head + req.new + req.forced
            rows[i], seq[i, : len(ids)], n_seq[i] = req.slot, ids, len(ids)
            start[i] = 0 if fresh else req.length - 1
            n_feed[i] = len(head) + len(req.new) - 1
            max_new[i], nforced[i] = req.max_new, len(req.forced)
            stops[i, : len(req.stops)] = req.stops
            sp = req.sampling
            temp[i], top_k[i], top_p[i] = sp.temperature, sp.top_k, sp.top_p
            seeds[i], turns[i] = req.seed, req.turns
            req.turns += 1
            req.length += len(req.new)
            req.state, req.new = "running", []
        kv = _bucket(int((start + n_seq).max()), self.kv_buckets)  # the positions written
        self.programs.add(("prefill", r, t, kv))
        assert len(self.programs) <= self.max_programs, (self.programs, self.max_programs)
        with self._context():
            self.state = self._prefill(
                self.cfg,
                self.spec,
                kv,
                self.params,
                self.state,
                jnp.asarray(rows),
                jnp.asarray(seq),
                jnp.asarray(start),
                jnp.asarray(n_seq),
                jnp.asarray(n_feed),
                tuple(
                    jnp.asarray(x)
                    for x in (max_new, nforced, stops, temp, top_k, top_p, seeds, turns)
                ),
            )
