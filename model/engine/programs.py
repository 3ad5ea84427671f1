"""The engine's device programs over the slot state: `prefill` (a fresh request's prompt, or an
`extend`'s observation appended to a paused sequence), `decode` (the plain or verify step in a
while loop, over the live rows), ending turns and fetching records; each jitted once, and once
more per (cfg, spec, mesh, rules) with the state's shardings for a sharded engine.

Letters: B slots, R rows prefilled (or decoded) in one call, T tokens per prefilled row, S cache
length, V vocab, St stop ids.

Live rows only: a decode call gathers the running slots (R of them, rounded up to a row bucket)
into an R-slot state, decodes that and scatters it back (R = B: in place, no copy), so a step costs
the live requests' rows, not B; the gather and scatter copy the R rows' cache window once per call.

Compiled programs (static shapes, so a long run never recompiles): one init, one turn fetch, one
experts fetch, one end_turns, one decode loop per (R, W) and one prefill per (R, T, W) bucket
triple, R in {1, 2, 4, ..} ∪ {B} (<= B), T in {min_bucket, 2 min_bucket, ..} ∪ {S} (<= S) and W,
the cache window a call reads and writes (positions [0, W)), in the T buckets and their 1.5x
midpoints: a prefill's attention costs T x W and a decode step reads W positions of every slot, so
both grow with the episodes' contexts instead of paying for the whole cache from the first turn
(decode in place uses a window only when W <= S/2: copying it in and out of the loop costs more
above). An engine built with raw log-probs (top_logprobs >= 0) adds the decode loop that records
them, one per (R, W), and one raw-log-prob fetch. Bound: 4 + n_R * n_W + n_R * n_T * n_W, plus
n_R * n_W + 1 with raw log-probs, e.g. B = 8, S = 1024, min_bucket = 16: 4 + 4 * 13 + 4 * 7 * 13
= 420 (472 with raw log-probs); a run compiles only the ones it meets (14-24 per engine in a
one-off probe of the coding sampler, 2 groups x 8 episodes, before decode was windowed). The
buckets are chosen host-side (model/engine/scheduling.py); `engine.programs` holds the keys used;
it is asserted to stay within `engine.max_programs`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from model import sharding as sh
from model.config import ModelConfig
from model.decode import forward_cached_layers
from model.engine.slots import (
    SlotState,
    Spec,
    _expert_rows,
    _gather_slots,
    _put_rows,
    _record_raw,
    _scatter_slots,
    _step_keys,
    _take_rows,
    _turn_keys,
    cache_len_of,
    init_state,
    slot_sampling,
    state_logical_specs,
)
from model.engine.speculation import _prefill_mtp, _verify_step
from model.sampling import filtered_logprobs, sample, token_logprob


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


def prefill(
    cfg, spec: Spec, kv_len: int, params, st: SlotState, rows, seq, start, n_seq, n_feed, turn
):
    """Writes seq [R,T] (n_seq [R] valid) at positions start.. into the rows' buffers, feeds the
    first n_feed [R] of them to the model, and arms the rows for decoding: pending = seq[n_feed].
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


@functools.lru_cache(maxsize=16)
def _sharded_programs(cfg: ModelConfig, spec: Spec, mesh, rules):
    """(init, prefill, decode, end_turns) jitted with the slot state's shardings as out_shardings:
    the state is created sharded (never whole on one device), and a donated state comes back in the
    layout it went in (so its buffers are reused and the next call is not a new program). Params
    keep the shardings they are placed with (set_params). Cached per (cfg, spec, mesh, rules):
    engines alike share compiled programs, and rules, which jit does not see, are part of the key.

    Each program wraps its function in a new functools.partial: JAX caches a function's trace
    by the function and its arguments, not by flax's logical rules (read while tracing), so two
    engines on one mesh with different rules (model/engine/split.py's cache splits) would
    otherwise share the first one's trace, its sharding constraints included, and compile it
    against the second one's out_shardings (measured: a slot-split decode all-gathered every
    layer's cache after an unsplit engine on the same mesh had traced it)."""
    abstract = jax.eval_shape(functools.partial(init_state, cfg, spec))
    st_sh = sh.logical_shardings(state_logical_specs(abstract), mesh, rules)
    own = functools.partial  # a new function object per (cfg, spec, mesh, rules): its own trace
    return (
        jax.jit(own(init_state), static_argnums=(0, 1), out_shardings=st_sh),
        jax.jit(own(prefill), static_argnums=(0, 1, 2), donate_argnums=(4,), out_shardings=st_sh),
        jax.jit(own(decode), static_argnums=(0, 1, 2), donate_argnums=(6,), out_shardings=st_sh),
        jax.jit(own(_end_turns), donate_argnums=(0,), out_shardings=st_sh),
    )
