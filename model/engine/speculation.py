"""MTP speculative decoding in the engine: module 0's latent cache and its catch-up, the drafts,
and the verify step that replaces the plain decode step when Spec.draft = K > 0.

Letters: B slots, R rows, T tokens, S cache length, V vocab, D model, K draft tokens.

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
the same call yields draft 1. A paused slot keeps that buffer; `extend`'s prefill writes it
(`_prefill_mtp`, called by model/engine/programs.py's `prefill`).

Teacher forcing while speculating: a forced position drafts its forced token and accepts it
unconditionally.
"""

from __future__ import annotations

import jax.numpy as jnp

from model.config import ModelConfig
from model.decode import forward_cached_layers
from model.engine.slots import (
    SlotState,
    Spec,
    _expert_rows,
    _put_rows,
    _record_raw,
    _step_keys,
    _take_rows,
    slot_sampling,
)
from model.sampling import (
    SamplingParams,
    filtered_logprobs,
    sample,
    speculative_accept,
    token_logprob,
)
from model.sampling import split as sample_split
from model.transformer import Transformer


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
