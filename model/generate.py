"""Generation engine: batched prefill and a jitted decode loop on the latent MLA cache, continuous
batching over slots, in-flight weight updates, MTP speculative decoding, and per-token RL records
(sampler log-prob, chosen experts for router replay, params version).

Letters: P prompts, B slots (batch), Tp padded prompt length, N max new tokens, S cache length,
K draft tokens, D model, V vocab, n MoE layers, k experts per token.

One loop iteration (`_iteration`) runs every active slot one *verify* step: the pending token (sampled
last iteration, not yet fed to the model) plus K drafts go through the main model at once; the
speculative rule (model/sampling.py) accepts a prefix of the drafts and emits one more token. K = 0 is
plain decoding (one token per step) through the same code, so speculative and plain decoding share
every other line. Finished slots are refilled from the prompt queue inside the loop (one-row prefill),
so uneven rollouts never idle the batch while prompts wait.

Drafting with MTP (DeepSeek-V3 §2.2, see model/transformer.py): module 0 at position j combines the
main model's final hidden h_j with embed(x_{j+1}) and predicts x_{j+2}. With main-model cache filled
up to p-1 and pending token x_p, the draft for x_{p+1} is module 0 at position p-1 on (h_{p-1}, x_p).
Further drafts reuse module 0 on its own output hidden (as vLLM/SGLang do when K exceeds the number
of MTP modules). The MTP block keeps its own latent cache; entries computed from rejected drafts or
from draft hiddens are overwritten before they are ever attended to, because cache slots are indexed
by absolute position and attention only sees slots <= the query position (write-before-attend).
So each iteration first *catches up* the MTP cache on the positions accepted last iteration, using
the main model's true hiddens, and the same call yields the first draft.

Router replay: `experts[i]` is the routing of the forward step whose logits produced token i, i.e.
of the input token at position prompt_len - 1 + i; `prompt_experts` covers positions 0..prompt_len-2.
`SequenceResult.replay_experts()` assembles the [n, prompt_len + len(tokens), k] array that
`Transformer.apply(..., forced_experts=...)` takes (batch axis added by the caller).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from model.attention import empty_cache
from model.config import ModelConfig
from model.decode import forward_cached, init_cache
from model.sampling import (
    SamplingParams,
    filtered_logprobs,
    sample,
    speculative_accept,
    token_logprob,
)
from model.transformer import Transformer


@dataclasses.dataclass(frozen=True)
class EngineShape:
    """Static shapes and choices (one compiled loop per distinct value)."""

    batch: int  # B slots
    cache_len: int  # S
    num_draft: int  # K (0 = plain decoding)


@flax.struct.dataclass
class Job:
    """The constant inputs of one generation call."""

    prompts: jnp.ndarray  # [P,Tp] int32, right-padded
    lengths: jnp.ndarray  # [P] int32 >= 1
    stops: jnp.ndarray  # [P,St] int32 stop-token ids, -1 padded
    max_new: jnp.ndarray  # int32 scalar
    sampling: SamplingParams


@flax.struct.dataclass
class Slots:
    prompt_id: jnp.ndarray  # [B] int32 (P = none)
    active: jnp.ndarray  # [B] bool
    pos: jnp.ndarray  # [B] int32 position of the pending token
    tok: jnp.ndarray  # [B] int32 pending token (sampled, not yet in the main cache)
    ngen: jnp.ndarray  # [B] int32 tokens emitted so far
    hbuf: jnp.ndarray  # [B,K+1,D] main hiddens h_{pos-nbuf .. pos-1} awaiting the MTP catch-up
    tbuf: jnp.ndarray  # [B,K+1] the tokens x_{j+1} paired with them
    nbuf: jnp.ndarray  # [B] int32 valid entries in hbuf/tbuf


@flax.struct.dataclass
class Outputs:
    tokens: jnp.ndarray  # [P,N] int32
    logprobs: jnp.ndarray  # [P,N] float32
    experts: jnp.ndarray  # [P,N,n,k] int32
    versions: jnp.ndarray  # [P,N] int32
    ngen: jnp.ndarray  # [P] int32
    stopped: jnp.ndarray  # [P] bool
    prompt_experts: jnp.ndarray  # [P,Tp-1,n,k] int32


@flax.struct.dataclass
class State:
    slots: Slots
    cache: dict
    mtp_cache: dict
    out: Outputs
    queue_head: jnp.ndarray  # int32 next prompt to start
    key: jnp.ndarray
    stats: jnp.ndarray  # int32 [4]: iterations, slot-steps, drafted, accepted


# --- model calls -------------------------------------------------------------------------------------


def _expert_ids(cfg: ModelConfig, out, b: int, t: int):
    """[n,B,T,k] chosen experts (an empty n axis for dense-only models)."""
    if out.expert_ids is None:
        return jnp.zeros((0, b, t, max(cfg.num_experts_per_tok, 1)), jnp.int32)
    return out.expert_ids


def _mtp(cfg: ModelConfig, params, h_prev, tokens, positions, cache):
    """MTP module 0 on [B,T] (negative positions = skip) -> (block output [B,T,D], logits [B,T,V], cache)."""
    seg = (positions >= 0).astype(jnp.int32)
    return Transformer(cfg).apply(
        {"params": params}, 0, h_prev, tokens, positions, seg, cache, method=Transformer.mtp_step
    )


def _prefill(cfg: ModelConfig, shape: EngineShape, params, cache, mtp_cache, prompts, lengths):
    """Prefills R rows: main cache with all prompt tokens but the last (that one is the first pending
    token, fed by the first iteration) and the MTP cache with pairs (h_j, x_{j+1}), j <= L-3.
    prompts [R,Tp], lengths [R] -> (cache, mtp_cache, slot fields, prompt experts [R,Tp-1,n,k])."""
    r, tp = prompts.shape
    idx = jnp.arange(tp - 1)[None]  # [1,Tp-1]
    pos = jnp.where(idx < lengths[:, None] - 1, idx, -1)
    out = forward_cached(cfg, params, prompts[:, :-1], pos, cache)
    hidden = out.hidden.astype(jnp.float32)  # [R,Tp-1,D]
    if shape.num_draft:
        mpos = jnp.where(idx < lengths[:, None] - 2, idx, -1)
        _, _, mtp_cache = _mtp(cfg, params, hidden, prompts[:, 1:], mpos, mtp_cache)
    rows = jnp.arange(r)
    tok = prompts[rows, lengths - 1]
    k1 = shape.num_draft + 1
    hbuf = (
        jnp.zeros((r, k1, hidden.shape[-1]), jnp.float32)
        .at[:, 0]
        .set(hidden[rows, jnp.maximum(lengths - 2, 0)])
    )
    tbuf = jnp.zeros((r, k1), jnp.int32).at[:, 0].set(tok)
    # A 1-token prompt has no h_{L-2}: its first draft is junk, and the accept rule judges it as such.
    nbuf = (lengths >= 2).astype(jnp.int32)
    experts = jnp.moveaxis(_expert_ids(cfg, out, r, tp - 1), 0, 2)  # [R,Tp-1,n,k]
    return out.cache, mtp_cache, (tok, lengths - 1, hbuf, tbuf, nbuf), experts


def _draft(cfg, shape, params, sl: Slots, mtp_cache, key, sp: SamplingParams):
    """K drafts per slot: MTP catch-up on last iteration's accepted positions (yielding draft 1),
    then module 0 chained on its own hidden. -> (drafts [B,K], draft log-probs [B,K,V], mtp_cache)."""
    b, k1 = sl.tbuf.shape
    j = jnp.arange(k1)[None]
    q0 = sl.pos - sl.nbuf  # first catch-up position
    mpos = jnp.where(sl.active[:, None] & (j < sl.nbuf[:, None]), q0[:, None] + j, -1)
    x, logits, mtp_cache = _mtp(cfg, params, sl.hbuf.astype(cfg.dtype), sl.tbuf, mpos, mtp_cache)
    last = jnp.maximum(sl.nbuf - 1, 0)
    rows = jnp.arange(b)
    x_last, lg = x[rows, last], logits[rows, last]  # [B,D], [B,V]
    greedy = sp.temperature <= 0
    drafts, lps = [], []
    for i, k in enumerate(jax.random.split(key, shape.num_draft)):
        lp = filtered_logprobs(lg, sp)
        d = sample(k, lp, greedy)
        drafts.append(d)
        lps.append(lp)
        if i + 1 < shape.num_draft:
            dpos = jnp.where(sl.active, sl.pos + i, -1)[:, None]
            x, lgs, mtp_cache = _mtp(cfg, params, x_last[:, None], d[:, None], dpos, mtp_cache)
            x_last, lg = x[:, 0], lgs[:, 0]
    return jnp.stack(drafts, 1), jnp.stack(lps, 1), mtp_cache


def _iteration(cfg: ModelConfig, shape: EngineShape, params, version, st: State, job: Job) -> State:
    """One verify step for every active slot; writes emitted tokens and their records."""
    sl, out, sp = st.slots, st.out, job.sampling
    kk = shape.num_draft
    key, k_draft, k_accept = jax.random.split(st.key, 3)
    greedy = sp.temperature <= 0
    mtp_cache = st.mtp_cache
    if kk:
        drafts, draft_lp, mtp_cache = _draft(cfg, shape, params, sl, mtp_cache, k_draft, sp)
    else:
        drafts = jnp.zeros((shape.batch, 0), jnp.int32)
    i = jnp.arange(kk + 1)[None]  # [1,K+1]
    vtok = jnp.concatenate([sl.tok[:, None], drafts], 1)  # [B,K+1]
    vpos = jnp.where(sl.active[:, None], sl.pos[:, None] + i, -1)
    res = forward_cached(cfg, params, vtok, vpos, st.cache)
    target_lp = filtered_logprobs(res.logits, sp)  # [B,K+1,V]
    if kk:
        n_acc, nxt = speculative_accept(k_accept, target_lp, draft_lp, drafts, greedy)
    else:
        n_acc, nxt = jnp.zeros_like(sl.pos), sample(k_accept, target_lp[:, 0], greedy)
    emitted = jnp.where(
        i == n_acc[:, None], nxt[:, None], jnp.concatenate([drafts, nxt[:, None]], 1)
    )
    lps = token_logprob(target_lp, emitted)  # [B,K+1]
    experts = jnp.moveaxis(_expert_ids(cfg, res, shape.batch, kk + 1), 0, 2)  # [B,K+1,n,k]

    p_count = job.prompts.shape[0]
    pid = jnp.minimum(sl.prompt_id, p_count - 1)
    is_stop = jnp.any(emitted[:, :, None] == job.stops[pid][:, None, :], -1) & (i <= n_acc[:, None])
    first_stop = jnp.where(jnp.any(is_stop, 1), jnp.argmax(is_stop, 1), kk + 1)
    n_emit = jnp.minimum(jnp.minimum(n_acc + 1, first_stop + 1), job.max_new - sl.ngen)
    n_emit = jnp.where(sl.active, n_emit, 0)
    keep = i < n_emit[:, None]
    rows = jnp.where(keep, sl.prompt_id[:, None], p_count)  # row P: dropped
    cols = sl.ngen[:, None] + i
    ngen = sl.ngen + n_emit
    stopped = jnp.any(is_stop & keep, 1)
    finished = sl.active & (stopped | (ngen >= job.max_new))
    done_rows = jnp.where(sl.active, sl.prompt_id, p_count)
    out = out.replace(
        tokens=out.tokens.at[rows, cols].set(emitted, mode="drop"),
        logprobs=out.logprobs.at[rows, cols].set(lps, mode="drop"),
        experts=out.experts.at[rows, cols].set(experts, mode="drop"),
        versions=out.versions.at[rows, cols].set(
            jnp.broadcast_to(version, emitted.shape), mode="drop"
        ),
        ngen=out.ngen.at[done_rows].set(ngen, mode="drop"),
        stopped=out.stopped.at[done_rows].set(stopped, mode="drop"),
    )
    slots = sl.replace(
        active=sl.active & ~finished,
        pos=sl.pos + n_acc + 1,
        tok=nxt,
        ngen=ngen,
        hbuf=res.hidden.astype(jnp.float32) if kk else sl.hbuf,
        tbuf=emitted,
        nbuf=n_acc + 1,
    )
    n_active = jnp.sum(sl.active.astype(jnp.int32))
    stats = st.stats + jnp.stack(
        [jnp.int32(1), n_active, kk * n_active, jnp.sum(jnp.where(sl.active, n_acc, 0))]
    ).astype(jnp.int32)
    return st.replace(
        slots=slots, cache=res.cache, mtp_cache=mtp_cache, out=out, key=key, stats=stats
    )


# --- slots: prefill and refill ------------------------------------------------------------------------


def _rows(tree, start, size, axis):
    return jax.tree_util.tree_map(
        lambda x: jax.lax.dynamic_slice_in_dim(x, start, size, axis), tree
    )


def _put_rows(tree, rows, start, axis):
    return jax.tree_util.tree_map(
        lambda x, r: jax.lax.dynamic_update_slice_in_dim(x, r, start, axis), tree, rows
    )


def _assign(st: State, slot_ids, prompt_ids, fields, prompt_experts, valid) -> State:
    """Puts prefilled prompts into slots (rows with valid=False stay idle)."""
    tok, pos, hbuf, tbuf, nbuf = fields
    sl = st.slots
    sl = sl.replace(
        prompt_id=sl.prompt_id.at[slot_ids].set(
            jnp.where(valid, prompt_ids, sl.prompt_id[slot_ids])
        ),
        active=sl.active.at[slot_ids].set(valid),
        pos=sl.pos.at[slot_ids].set(pos),
        tok=sl.tok.at[slot_ids].set(tok),
        ngen=sl.ngen.at[slot_ids].set(0),
        hbuf=sl.hbuf.at[slot_ids].set(hbuf),
        tbuf=sl.tbuf.at[slot_ids].set(tbuf),
        nbuf=sl.nbuf.at[slot_ids].set(nbuf),
    )
    p_count = st.out.tokens.shape[0]
    rows = jnp.where(valid, prompt_ids, p_count)
    out = st.out.replace(
        prompt_experts=st.out.prompt_experts.at[rows].set(prompt_experts, mode="drop")
    )
    return st.replace(slots=sl, out=out)


def _refill(cfg: ModelConfig, shape: EngineShape, params, st: State, job: Job) -> State:
    """Starts waiting prompts in free slots, one-row prefill each (continuous batching)."""
    p_count = job.prompts.shape[0]

    def cond(st):
        return jnp.any(~st.slots.active) & (st.queue_head < p_count)

    def body(st):
        slot = jnp.argmax(~st.slots.active).astype(jnp.int32)
        head = st.queue_head
        cache = _rows(st.cache, slot, 1, 1)  # stacked layers: batch is axis 1
        mtp_cache = _rows(st.mtp_cache, slot, 1, 0)
        prompt = jax.lax.dynamic_slice_in_dim(job.prompts, head, 1, 0)
        length = jax.lax.dynamic_slice_in_dim(job.lengths, head, 1, 0)
        cache, mtp_cache, fields, experts = _prefill(
            cfg, shape, params, cache, mtp_cache, prompt, length
        )
        st = st.replace(
            cache=_put_rows(st.cache, cache, slot, 1),
            mtp_cache=_put_rows(st.mtp_cache, mtp_cache, slot, 0),
            queue_head=head + 1,
        )
        return _assign(st, slot[None], head[None], fields, experts, jnp.ones((1,), bool))

    return jax.lax.while_loop(cond, body, st)


def _empty_state(
    cfg: ModelConfig, shape: EngineShape, p_count: int, tp: int, n_cap: int, key
) -> State:
    b, k1, d = shape.batch, shape.num_draft + 1, cfg.hidden_size
    n_moe, k = cfg.num_moe_layers, max(cfg.num_experts_per_tok, 1)
    slots = Slots(
        prompt_id=jnp.full((b,), p_count, jnp.int32),
        active=jnp.zeros((b,), bool),
        pos=jnp.zeros((b,), jnp.int32),
        tok=jnp.zeros((b,), jnp.int32),
        ngen=jnp.zeros((b,), jnp.int32),
        hbuf=jnp.zeros((b, k1, d), jnp.float32),
        tbuf=jnp.zeros((b, k1), jnp.int32),
        nbuf=jnp.zeros((b,), jnp.int32),
    )
    out = Outputs(
        tokens=jnp.zeros((p_count, n_cap), jnp.int32),
        logprobs=jnp.zeros((p_count, n_cap), jnp.float32),
        experts=jnp.zeros((p_count, n_cap, n_moe, k), jnp.int32),
        versions=jnp.full((p_count, n_cap), -1, jnp.int32),
        ngen=jnp.zeros((p_count,), jnp.int32),
        stopped=jnp.zeros((p_count,), bool),
        prompt_experts=jnp.zeros((p_count, tp - 1, n_moe, k), jnp.int32),
    )
    mtp_cache = empty_cache(b, shape.cache_len, cfg) if shape.num_draft else {}
    return State(
        slots=slots,
        cache=init_cache(cfg, b, shape.cache_len),
        mtp_cache=mtp_cache,
        out=out,
        queue_head=jnp.int32(0),
        key=key,
        stats=jnp.zeros((4,), jnp.int32),
    )


def start(cfg: ModelConfig, shape: EngineShape, params, job: Job, key, n_cap: int) -> State:
    """Empty state, then one batched prefill of the first min(B, P) prompts into slots 0.."""
    p_count, tp = job.prompts.shape
    st = _empty_state(cfg, shape, p_count, tp, n_cap, key)
    b = shape.batch
    prompt_ids = jnp.minimum(jnp.arange(b), p_count - 1)
    cache, mtp_cache, fields, experts = _prefill(
        cfg, shape, params, st.cache, st.mtp_cache, job.prompts[prompt_ids], job.lengths[prompt_ids]
    )
    st = st.replace(cache=cache, mtp_cache=mtp_cache, queue_head=jnp.int32(min(b, p_count)))
    return _assign(st, jnp.arange(b), prompt_ids, fields, experts, jnp.arange(b) < p_count)


def run(
    cfg: ModelConfig, shape: EngineShape, params, version, st: State, job: Job, max_iterations
) -> State:
    """Up to `max_iterations` verify steps (refilling free slots after each) or until all prompts are done."""

    def cond(carry):
        st, n = carry
        return jnp.any(st.slots.active) & (n < max_iterations)

    def body(carry):
        st, n = carry
        st = _iteration(cfg, shape, params, version, st, job)
        if (
            job.prompts.shape[0] > shape.batch
        ):  # static: with a slot per prompt there is nothing to refill
            st = _refill(cfg, shape, params, st, job)
        return st, n + 1

    return jax.lax.while_loop(cond, body, (st, jnp.int32(0)))[0]


_start_jit = jax.jit(start, static_argnums=(0, 1, 5))
_run_jit = jax.jit(run, static_argnums=(0, 1), donate_argnums=(4,))


# --- host side: validation, engine, results -----------------------------------------------------------


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _check_ids(ids, vocab_size: int, what: str) -> None:
    for j, t in enumerate(ids):
        if not isinstance(t, (int, np.integer)) or not 0 <= int(t) < vocab_size:
            raise ValueError(
                f"{what}, position {j}: token id {t!r} is not in [0, vocab_size={vocab_size})"
            )


def _stop_lists(stop_tokens, n_prompts: int) -> list[list[int]]:
    """None | [ids] (all prompts) | [[ids], ...] (one list per prompt)."""
    if stop_tokens is None:
        return [[] for _ in range(n_prompts)]
    stop_tokens = list(stop_tokens)
    if stop_tokens and isinstance(stop_tokens[0], (list, tuple, np.ndarray)):
        if len(stop_tokens) != n_prompts:
            raise ValueError(
                f"stop_tokens: {len(stop_tokens)} per-prompt lists for {n_prompts} prompts"
            )
        return [list(s) for s in stop_tokens]
    return [stop_tokens for _ in range(n_prompts)]


def make_job(
    cfg: ModelConfig,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    sampling: SamplingParams,
    stop_tokens=None,
    cache_len: int | None = None,
    num_draft: int = 0,
) -> tuple[Job, int, int]:
    """Validates prompts and pads them to bucketed shapes (so calls with similar sizes share one
    compiled loop). -> (job, cache length S, output capacity N)."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, (int, np.integer))
        or max_new_tokens <= 0
    ):
        raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
    if not prompts:
        raise ValueError("prompts: empty list (need at least one prompt)")
    for n, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError(f"prompt {n}: empty (need at least one token)")
        _check_ids(p, cfg.vocab_size, f"prompt {n}")
    stops = _stop_lists(stop_tokens, len(prompts))
    for n, s in enumerate(stops):
        _check_ids(s, cfg.vocab_size, f"stop_tokens of prompt {n}")
    longest = max(len(p) for p in prompts)
    if cache_len is None:
        cache_len = _round_up(longest + max_new_tokens + num_draft, 16)
        if longest + max_new_tokens > cfg.max_position_embeddings:
            raise ValueError(
                f"prompt of {longest} tokens + max_new_tokens={max_new_tokens} exceeds the model's "
                f"max_position_embeddings={cfg.max_position_embeddings}"
            )
    for n, p in enumerate(prompts):
        if len(p) + max_new_tokens > cache_len:
            raise ValueError(
                f"prompt {n}: {len(p)} tokens + max_new_tokens={max_new_tokens} do not fit the cache "
                f"of {cache_len} tokens"
            )
    tp = _round_up(longest + 1, 8)  # +1: prefill runs Tp-1 tokens, so Tp >= 2
    padded = np.zeros((len(prompts), tp), np.int32)
    for n, p in enumerate(prompts):
        padded[n, : len(p)] = p
    width = max(1, max(len(s) for s in stops))
    stop_arr = np.full((len(prompts), width), -1, np.int32)
    for n, s in enumerate(stops):
        stop_arr[n, : len(s)] = s
    job = Job(
        prompts=jnp.asarray(padded),
        lengths=jnp.asarray([len(p) for p in prompts], jnp.int32),
        stops=jnp.asarray(stop_arr),
        max_new=jnp.int32(max_new_tokens),
        sampling=sampling,
    )
    return job, cache_len, _round_up(max_new_tokens, 8)


@dataclasses.dataclass
class SequenceResult:
    """One prompt's generation. experts[i] / versions[i] belong to tokens[i]; see the module docstring."""

    tokens: list[int]
    logprobs: np.ndarray  # [n] float32: log p(token) under the distribution it was sampled from
    experts: np.ndarray  # [n, n_moe_layers, k] int32
    versions: np.ndarray  # [n] int32 params version that produced each token
    finish_reason: str  # 'stop' (a stop token, included in tokens) | 'length'
    prompt_len: int
    prompt_experts: np.ndarray  # [prompt_len-1, n_moe_layers, k] int32

    def replay_experts(self) -> np.ndarray:
        """[n_moe_layers, prompt_len + n, k] forced_experts for the forward over prompt + tokens (the
        last position, which predicts past the end, reuses the previous row)."""
        rows = np.concatenate([self.prompt_experts, self.experts, self.experts[-1:]], 0)
        return np.moveaxis(rows, 1, 0)


@dataclasses.dataclass
class GenerateOutput:
    sequences: list[SequenceResult]
    stats: dict

    @property
    def tokens(self) -> list[list[int]]:
        return [s.tokens for s in self.sequences]


class Engine:
    """A batch of prompts being generated in B slots, resumable so that params can change between
    calls: `engine.set_params(new, version)` keeps the cache (in-flight weight update) and every token
    records the version that produced it. `generate` is Engine(...).run_until_done().results()."""

    def __init__(
        self,
        cfg: ModelConfig,
        params,
        prompts,
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        stop_tokens=None,
        batch_size: int | None = None,
        num_draft: int = 0,
        seed: int = 0,
        params_version: int = 0,
        cache_len: int | None = None,
        valid_vocab: int = 0,
    ):
        if num_draft < 0 or (num_draft and cfg.num_mtp_modules == 0):
            raise ValueError(
                f"num_draft={num_draft}: speculative decoding needs num_draft >= 0 and MTP modules "
                f"(config has num_mtp_modules={cfg.num_mtp_modules})"
            )
        self.cfg = cfg
        job, s, self.n_cap = make_job(
            cfg,
            prompts,
            max_new_tokens,
            SamplingParams.make(temperature, top_k, top_p, valid_vocab),
            stop_tokens,
            cache_len,
            num_draft,
        )
        b = batch_size or len(prompts)
        if b <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.shape = EngineShape(batch=b, cache_len=s, num_draft=num_draft)
        self.job, self.prompts = job, [list(p) for p in prompts]
        self.set_params(params, params_version)
        self.state = _start_jit(cfg, self.shape, params, job, jax.random.PRNGKey(seed), self.n_cap)

    def set_params(self, params, version: int) -> None:
        self.params, self.version = params, jnp.int32(version)

    @property
    def done(self) -> bool:
        return not bool(jnp.any(self.state.slots.active))

    def step(self, max_iterations: int) -> bool:
        """Runs up to max_iterations verify steps under the current params; -> True when all are done."""
        self.state = _run_jit(
            self.cfg,
            self.shape,
            self.params,
            self.version,
            self.state,
            self.job,
            jnp.int32(max_iterations),
        )
        return self.done

    def run_until_done(self) -> Engine:
        while not self.step(2**30):
            pass
        return self

    def stats(self) -> dict:
        iters, slot_steps, drafted, accepted = (int(x) for x in self.state.stats)
        emitted = int(self.state.out.ngen.sum())
        return {
            "iterations": iters,
            "slot_steps": slot_steps,
            "tokens": emitted,
            "tokens_per_slot_step": emitted / max(slot_steps, 1),
            "drafted": drafted,
            "accepted": accepted,
            "acceptance_rate": accepted / drafted if drafted else float("nan"),
        }

    def results(self) -> GenerateOutput:
        o = jax.device_get(self.state.out)
        seqs = []
        for n, prompt in enumerate(self.prompts):
            m, plen = int(o.ngen[n]), len(prompt)
            seqs.append(
                SequenceResult(
                    tokens=[int(t) for t in o.tokens[n, :m]],
                    logprobs=o.logprobs[n, :m],
                    experts=o.experts[n, :m],
                    versions=o.versions[n, :m],
                    finish_reason="stop" if o.stopped[n] else "length",
                    prompt_len=plen,
                    prompt_experts=o.prompt_experts[n, : plen - 1],
                )
            )
        return GenerateOutput(seqs, self.stats())


def generate(
    cfg: ModelConfig,
    params,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float = 0.0,
    **kwargs,
) -> GenerateOutput:
    """Generates for each prompt (a list of token ids). kwargs: top_k, top_p, stop_tokens (ids for all
    prompts or one list per prompt), batch_size (slots; default all prompts at once), num_draft (MTP
    speculative tokens per step; 0 = plain), seed, params_version, cache_len, valid_vocab (ids >=
    it are never sampled: the tokenizer's vocab size; 0 = all). See Engine. For multi-turn
    episodes (continuable sequences, an open request queue) see model/engine.py."""
    return (
        Engine(cfg, params, prompts, max_new_tokens, temperature=temperature, **kwargs)
        .run_until_done()
        .results()
    )
