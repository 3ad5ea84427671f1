"""The engine's slot state: its static shapes (`Spec`), the per-slot device arrays (`SlotState`:
latent caches, turn settings, per-position records, speculation buffers), how steps record into it,
gathering / scattering rows of it, and its logical shardings.

Letters: B slots, R rows, S cache length, V vocab, D model, K draft tokens, W top log-probs,
St stop ids, n MoE layers, k experts per token.

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
"""

from __future__ import annotations

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from model import sharding as sh
from model.attention import empty_cache
from model.config import ModelConfig
from model.decode import init_layer_caches, resolve_decode_dtype
from model.sampling import SamplingParams, mask_invalid, token_logprob
from model.sampling import split as sample_split


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


def cache_len_of(cache) -> int:
    return jax.tree_util.tree_leaves(cache)[0].shape[1]


def slot_sampling(st: SlotState, valid) -> SamplingParams:
    """Each slot's own sampling settings ([B]; valid, the tokenizer's vocab, is the engine's)."""
    return SamplingParams(st.temp, st.top_k, st.top_p, valid)


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


def state_logical_specs(st: SlotState) -> SlotState:
    """Logical axes of the slot state: every slot-indexed leaf ([B, ...]: the per-layer latent
    caches, the [B,S] record buffers, the [B] counters) over BATCH, i.e. slots split over the
    data-like axes (data, fsdp) by the default rules (the per-slot rng keys too); stats replicated.
    The caches' positions S over CACHE_SEQ (whole unless the engine splits its cache by sequence,
    model/engine/split.py, which also says how a slot split adds the expert axis to BATCH).

    Otherwise the cache's S and latent dims stay whole on each device. Every head reads all L + R
    values of a position (MLA's latent is shared by the heads, like MQA's one K/V head), so a cache
    split over the tensor axis would make each head's scores [B,H,T,S] a partial sum to all-reduce
    per layer and step, where tensor-parallel attention otherwise all-reduces only its [B,T,D]
    output after wo.
    Replicated over tensor and expert it costs (L + R) x itemsize x S per slot and layer on each
    device: kimi_k2, 576 values, S = 8192: 9.4 MB per slot per layer in bf16 (18.9 MB in f32)."""
    slots = lambda tree: jax.tree.map(lambda _: P(sh.BATCH), tree)
    caches = lambda tree: jax.tree.map(lambda _: P(sh.BATCH, sh.CACHE_SEQ), tree)  # [B,S,..]
    per_slot = {
        f.name: slots(getattr(st, f.name))
        for f in dataclasses.fields(st)
        if f.name not in _CACHES + _GLOBAL
    }
    return st.replace(**per_slot, cache=caches(st.cache), mtp_cache=caches(st.mtp_cache), stats=P())
