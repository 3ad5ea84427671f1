"""Latent-cache decoding: prefill and step-by-step decode through the Transformer's own blocks, one
layer at a time (the decode engine, model/engine/, is the user).

The cache holds, per layer and token, the normalized KV latent (kv_lora_rank values) and the
roped shared key (qk_rope_head_dim values); attention runs in latent space with W_UK absorbed into
the query and W_UV applied after attention (see model/attention.py). Slots are indexed by absolute
position, so rows of a batch may sit at different lengths.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from model import sharding as sh
from model.attention import empty_cache
from model.config import ModelConfig
from model.transformer import Block, ModelOutput, Transformer

# --- per-layer layout (the decode loop of model/engine/programs.py) -------------------------------
#
# Inside a jitted decode loop, a stacked layout costs copies on XLA:CPU: each block slices its layer
# of a stacked cache ([N,B,S,..] -> [B,S,..]) and of the stacked params out of the stack on every
# iteration (the slices are materialized, not aliased; ~35% of a decode iteration of
# bench_rl_coding's model). With one array per layer, a block reads and writes its own cache and
# weights in place. Same blocks, same math as the training forward (model/transformer.py).

STACKS = (("dense", "dense_layers", False), ("moe", "moe_layers", True))  # cache key, params, MoE


def split_layers(params) -> dict:
    """Stacked params -> the same tree with each layer stack ([N, ...] leaves) a list of N per-layer
    trees. Done once per params version, outside any decode loop."""
    out = dict(params)
    for _, name, _ in STACKS:
        if name in params:
            n = jax.tree_util.tree_leaves(params[name])[0].shape[0]
            out[name] = [
                jax.tree_util.tree_map(lambda a, i=i: a[i], params[name]) for i in range(n)
            ]
    return out


def split_layer_specs(cfg: ModelConfig, specs) -> dict:
    """model.param_logical_specs(cfg) (stacked: a stack's leaves are P('layers', ...)) -> the specs
    of split_layers(params): each stack a list of per-layer trees without the leading layer axis
    (e.g. wq_b P('layers', 'q_latent', 'heads', 'head_dim') -> P('q_latent', 'heads',
    'head_dim'))."""
    counts = {"dense_layers": cfg.num_dense_layers, "moe_layers": cfg.num_moe_layers}
    is_spec = lambda x: isinstance(x, P)
    out = dict(specs)
    for _, name, _ in STACKS:
        if name in specs:
            for s in jax.tree.leaves(specs[name], is_leaf=is_spec):
                if not s or s[0] != sh.LAYERS:
                    raise ValueError(
                        f"split_layer_specs: {name} spec {s} has no leading layer axis"
                    )
            one = jax.tree.map(lambda s: P(*s[1:]), specs[name], is_leaf=is_spec)
            out[name] = [one] * counts[name]
    return out


def init_layer_caches(cfg: ModelConfig, batch: int, max_len: int, dtype=jnp.float32) -> dict:
    """Empty caches, one per layer: {'dense': [cache, ..], 'moe': [..]} (each [B,S,..])."""
    counts = {"dense": cfg.num_dense_layers, "moe": cfg.num_moe_layers}
    return {
        key: [empty_cache(batch, max_len, cfg, dtype) for _ in range(counts[key])]
        for key, _, _ in STACKS
        if counts[key]
    }


def _slots_layout(cache: dict) -> dict:
    """A layer's updated cache kept in the engine's layout, slots over BATCH, positions over
    CACHE_SEQ (model/engine/split.py; unmapped: whole) and the rest whole (a no-op outside a mesh
    + rules context). Unconstrained, GSPMD may carry a decode loop's caches
    split as the tokens were (all_to_all dispatch splits slots over the expert axes) and all-gather
    them after the loop: kimi_k2, 8 slots x 8192 positions x 576 values x 4 B = 151 MB per layer."""
    return jax.tree.map(
        lambda c: sh.constrain(c, (sh.BATCH, sh.CACHE_SEQ) + (None,) * (c.ndim - 2)), cache
    )


def forward_cached_layers(cfg: ModelConfig, split_params, tokens, positions, caches) -> ModelOutput:
    """Prefill/decode on split_layers params and init_layer_caches caches: runs T new tokens [B,T]
    at absolute `positions` [B,T] (negative = padding) against the caches; -> logits, hidden,
    expert_ids [n,B,T,k] and the updated per-layer caches (out.cache)."""
    segment_ids = (positions >= 0).astype(jnp.int32)
    model = Transformer(cfg)
    x = model.apply({"params": split_params}, tokens, method=Transformer.embed_tokens)
    new_caches, expert_ids = {}, []
    for key, name, moe in STACKS:
        if key not in caches:
            continue
        new_caches[key] = []
        for layer_params, cache in zip(split_params[name], caches[key], strict=True):
            (x, cache), aux = Block(cfg, moe).apply(
                {"params": layer_params}, (x, cache), positions, segment_ids, None
            )
            new_caches[key].append(_slots_layout(cache))
            if moe:
                expert_ids.append(aux[0])  # [B,T,k]
    h, logits = model.apply({"params": split_params}, x, method=Transformer.norm_and_head)
    ids = jnp.stack(expert_ids) if expert_ids else None  # [n,B,T,k]
    return ModelOutput(logits=logits, hidden=h, expert_ids=ids, cache=new_caches)


# --- the engine's dtype: params, latent cache and compute -----------------------------------------

# Leaves kept float32 in a bfloat16 engine: the router (model/moe.py routes in float32 at HIGHEST
# precision; a bf16-rounded router kernel would pick other experts than training on near-ties)
# and the norm scales. All are vectors or [D, E]: a negligible share of a decode step's bytes.
FLOAT32_LEAVES = ("router", "router_bias", "scale")


def resolve_decode_dtype(name: str, platform: str) -> str:
    """ModelConfig.decode_dtype -> 'float32' | 'bfloat16'. 'auto': bfloat16 on an accelerator
    (platform 'gpu' / 'tpu' / any other, where decode is bound by the bytes of the weights and the
    cache read per step), float32 on 'cpu' (so CPU runs, the test suite among them, decode as the
    float32 training forward computes; bench/bench_decode.py --decode_dtypes float32,bfloat16
    measures both)."""
    if name == "auto":
        return "float32" if platform == "cpu" else "bfloat16"
    if name not in ("float32", "bfloat16"):
        raise ValueError(f"decode_dtype must be 'auto', 'float32' or 'bfloat16', got {name!r}")
    return name


def engine_config(cfg: ModelConfig, platform: str) -> ModelConfig:
    """The config an engine decodes with: decode_dtype resolved for `platform` (a static jit key,
    so never 'auto'), and in bfloat16 the compute dtype bfloat16 too. In float32 the compute dtype
    stays cfg.dtype (the training run's: the RL records' log-probs then match its forward)."""
    dt = resolve_decode_dtype(cfg.decode_dtype, platform)
    return cfg.replace(decode_dtype=dt, dtype="bfloat16" if dt == "bfloat16" else cfg.dtype)


def decode_params(cfg: ModelConfig, params):
    """Params (any dtypes: float32 from a trainer, bfloat16 from a weight store, numpy or jax,
    sharded or not) -> the engine's: every leaf in cfg.decode_dtype (resolved: engine_config),
    except FLOAT32_LEAVES, kept float32. Cast where they are: astype keeps a jax array's devices
    and sharding, and a host array stays on the host."""
    dt, f32 = jnp.dtype(cfg.decode_dtype), jnp.dtype(jnp.float32)

    def leaf(path, x):
        want = f32 if getattr(path[-1], "key", None) in FLOAT32_LEAVES else dt
        return x if x.dtype == want else x.astype(want)

    return jax.tree_util.tree_map_with_path(leaf, params)


def cache_bytes_per_token(cfg: ModelConfig, dtype: str, positions: bool = True) -> int:
    """Bytes per token of one sequence's latent cache over all layers, as init_layer_caches(cfg,
    .., dtype) allocates it: (kv_lora_rank + qk_rope_head_dim) values per layer in `dtype` (kimi_k2:
    61 x (512 + 64) x 2 B = 70,272 B = 68.6 KiB in bfloat16, twice that in float32), plus
    (positions=True) the int32 position each layer's cache keeps per slot (61 x 4 B). Read off
    empty_cache's shapes, so it cannot drift from what the engine holds. Speculative decoding adds
    MTP module 0's cache: one more layer's worth."""
    one = jax.eval_shape(lambda: empty_cache(1, 1, cfg, dtype))  # one layer, one slot, one token
    nbytes = {k: math.prod(a.shape) * a.dtype.itemsize for k, a in one.items()}
    values = nbytes["latent"] + nbytes["rope"]
    return cfg.num_hidden_layers * (values + (nbytes["positions"] if positions else 0))


def uncompressed_cache_bytes_per_token(cfg: ModelConfig, dtype: str) -> int:
    """What a per-head K/V cache (no latent compression) would hold per token over all layers:
    heads x (qk_head_dim + v_head_dim) values per layer (kimi_k2: 64 x 320 vs the latent's 576)."""
    per_layer = cfg.num_attention_heads * (cfg.qk_head_dim + cfg.v_head_dim)
    return cfg.num_hidden_layers * per_layer * jnp.dtype(dtype).itemsize
