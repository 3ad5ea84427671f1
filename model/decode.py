"""Latent-cache decoding: prefill and step-by-step decode through the same Transformer.

The cache holds, per layer and token, the normalized KV latent (kv_lora_rank values) and the
roped shared key (qk_rope_head_dim values); attention runs in latent space with W_UK absorbed into
the query and W_UV applied after attention (see model/attention.py). Slots are indexed by absolute
position, so rows of a batch may sit at different lengths.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from model.attention import empty_cache
from model.config import ModelConfig
from model.transformer import ModelOutput, Transformer


def _stacked(n_layers: int, batch: int, max_len: int, cfg: ModelConfig, dtype):
    one = empty_cache(batch, max_len, cfg, dtype)
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n_layers,) + x.shape), one)


def init_cache(cfg: ModelConfig, batch: int, max_len: int, dtype=jnp.float32) -> dict:
    """Empty caches for every layer: {'dense': [n_dense,...], 'moe': [n_moe,...]}."""
    cache = {}
    if cfg.num_dense_layers:
        cache["dense"] = _stacked(cfg.num_dense_layers, batch, max_len, cfg, dtype)
    if cfg.num_moe_layers:
        cache["moe"] = _stacked(cfg.num_moe_layers, batch, max_len, cfg, dtype)
    return cache


def forward_cached(
    cfg: ModelConfig, params, tokens, positions, cache, forced_experts=None
) -> ModelOutput:
    """Runs T new tokens [B,T] at absolute `positions` [B,T] against `cache`; returns logits,
    hidden, chosen experts and the updated cache (out.cache). Negative positions are padding."""
    segment_ids = (positions >= 0).astype(jnp.int32)
    return Transformer(cfg).apply(
        {"params": params},
        tokens,
        positions=positions,
        segment_ids=segment_ids,
        forced_experts=forced_experts,
        cache=cache,
    )


def cache_bytes_per_token(cfg: ModelConfig, bytes_per_value: int = 2) -> dict[str, int]:
    """Latent cache vs an uncompressed multi-head K/V cache, per token over all layers."""
    layers = cfg.num_hidden_layers
    latent = layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * bytes_per_value
    full = layers * cfg.num_attention_heads * (cfg.qk_head_dim + cfg.v_head_dim) * bytes_per_value
    return {"latent": latent, "uncompressed": full}
