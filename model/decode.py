"""Latent-cache decoding: prefill and step-by-step decode through the Transformer's own blocks, one
layer at a time (the decode engine, model/engine.py, is the user).

The cache holds, per layer and token, the normalized KV latent (kv_lora_rank values) and the
roped shared key (qk_rope_head_dim values); attention runs in latent space with W_UK absorbed into
the query and W_UV applied after attention (see model/attention.py). Slots are indexed by absolute
position, so rows of a batch may sit at different lengths.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from model import sharding as sh
from model.attention import empty_cache
from model.config import ModelConfig
from model.transformer import Block, ModelOutput, Transformer

# --- per-layer layout (model/engine.py's decode loop) ----------------------------------------------
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
    (e.g. wq_b P('layers', 'q_latent', 'heads', 'head_dim') -> P('q_latent', 'heads', 'head_dim'))."""
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
    """A layer's updated cache kept in the engine's layout, slots over BATCH and the rest whole (a
    no-op outside a mesh + rules context). Unconstrained, GSPMD may carry a decode loop's caches
    split as the tokens were (all_to_all dispatch splits slots over the expert axes) and all-gather
    them after the loop: kimi_k2, 8 slots x 8192 positions x 576 values x 4 B = 151 MB per layer."""
    return jax.tree.map(lambda c: sh.constrain(c, (sh.BATCH,) + (None,) * (c.ndim - 1)), cache)


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


def cache_bytes_per_token(cfg: ModelConfig, bytes_per_value: int = 2) -> dict[str, int]:
    """Latent cache vs an uncompressed multi-head K/V cache, per token over all layers."""
    layers = cfg.num_hidden_layers
    latent = layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * bytes_per_value
    full = layers * cfg.num_attention_heads * (cfg.qk_head_dim + cfg.v_head_dim) * bytes_per_value
    return {"latent": latent, "uncompressed": full}
