"""Multi-head latent attention (MLA, DeepSeek-V2/V3) with a latent KV cache for decoding.

Letters: B batch, T query len, S key len, D model, H heads, K head dim (nope, rope or value part, as
named at each einsum), Q q-lora rank, L kv latent rank (kv_lora_rank), R rope dims.

Training/forward path: keys and values are expanded per head from the normalized latent
(k_nope = c·W_UK, v = c·W_UV); the rope part of the key is one R-dim vector shared by all heads.

Decode path (cache given): the cache keeps, per token per layer, the normalized latent c (L values)
and the roped shared key (R values) — for Kimi-K2 512 + 64 = 576 values instead of
64 heads × (192 + 128) = 20480 for an uncompressed cache. Weight absorption folds W_UK into the
query (q_nope·W_UKᵀ lives in latent space) and applies W_UV after attending over latents, so the
cache is never expanded per head.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from model import context
from model import sharding as sh
from model.config import ModelConfig
from model.kernels import attention as kernels
from model.layers import RMSNorm, cast, dense_init, logical_param, matmul2d
from model.rope import apply_rope, rope_tables, softmax_scale

NEG_INF = -1e30  # finite, so fully-masked rows (padding) give uniform weights instead of NaN


def _softmax_attend(scores, mask):
    """scores [B, H, T, S] float32 -> probabilities, masked entries exactly 0."""
    scores = jnp.where(mask[:, None, :, :], scores, NEG_INF)
    return jax.nn.softmax(scores, axis=-1) * mask[:, None, :, :]


class MLA(nn.Module):
    cfg: ModelConfig

    def setup(self):
        c = self.cfg
        d, h, n, r, l = (
            c.hidden_size,
            c.num_attention_heads,
            c.qk_nope_head_dim,
            c.qk_rope_head_dim,
            c.kv_lora_rank,
        )
        init = dense_init(c.initializer_range)
        if c.q_lora_rank is None:
            self.wq = logical_param(
                self, "wq", (d, h, n + r), (sh.EMBED, sh.HEADS, sh.HEAD_DIM), init
            )
        else:
            self.wq_a = logical_param(
                self, "wq_a", (d, c.q_lora_rank), (sh.EMBED, sh.Q_LATENT), init
            )
            self.q_a_norm = RMSNorm(
                c.q_lora_rank, 1e-6, sh.Q_LATENT
            )  # HF: fixed eps, not rms_norm_eps
            self.wq_b = logical_param(
                self, "wq_b", (c.q_lora_rank, h, n + r), (sh.Q_LATENT, sh.HEADS, sh.HEAD_DIM), init
            )
        self.wkv_a = logical_param(self, "wkv_a", (d, l + r), (sh.EMBED, sh.KV_LATENT), init)
        self.kv_a_norm = RMSNorm(l, 1e-6, sh.KV_LATENT)  # HF: fixed eps
        self.wk_b = logical_param(
            self, "wk_b", (l, h, n), (sh.KV_LATENT, sh.HEADS, sh.HEAD_DIM), init
        )
        self.wv_b = logical_param(
            self, "wv_b", (l, h, c.v_head_dim), (sh.KV_LATENT, sh.HEADS, sh.HEAD_DIM), init
        )
        self.wo = logical_param(
            self, "wo", (h, c.v_head_dim, d), (sh.HEADS, sh.HEAD_DIM, sh.EMBED), init
        )

    def _queries(self, x, cos, sin):
        """-> q_nope [B,T,H,N], q_rope [B,T,H,R] (roped)."""
        c, dt = self.cfg, self.cfg.dtype
        if c.q_lora_rank is None:
            q = matmul2d(x, self.wq, dt)
        else:
            q = matmul2d(self.q_a_norm(matmul2d(x, self.wq_a, dt)), self.wq_b, dt)  # [B,T,H,N+R]
        q_nope, q_rope = (
            q[..., : c.qk_nope_head_dim],
            q[..., c.qk_nope_head_dim :],
        )  # [B,T,H,N], [B,T,H,R]
        return q_nope, apply_rope(q_rope, cos, sin)

    def _latents(self, x, cos, sin):
        """-> normalized latent [B,T,L] and roped shared key [B,T,R]."""
        c = self.cfg
        kv = matmul2d(x, self.wkv_a, c.dtype)  # [B,T,L+R]
        latent, k_rope = kv[..., : c.kv_lora_rank], kv[..., c.kv_lora_rank :]
        return self.kv_a_norm(latent), apply_rope(k_rope, cos, sin)

    def __call__(self, x, positions, segment_ids, cache: dict | None = None):
        """x [B,T,D] -> ([B,T,D], new cache or None).

        cache (this layer's): {'latent': [B,S,L], 'rope': [B,S,R], 'positions': [B,S] (-1 = empty)};
        the T new tokens are written at slots `positions` (their absolute positions), then attended
        causally.
        """
        cos, sin = rope_tables(self.cfg, jnp.maximum(positions, 0))  # negative = padding (decode)
        q_nope, q_rope = self._queries(x, cos, sin)
        latent, k_rope = self._latents(x, cos, sin)
        if cache is None:
            out = self._expanded_attention(q_nope, q_rope, latent, k_rope, positions, segment_ids)
            new_cache = None
        else:
            new_cache = write_cache(cache, latent, k_rope, positions)
            out = self._absorbed_attention(q_nope, q_rope, new_cache, positions)
        b, t, h, k = out.shape
        wo = self.wo.reshape(h * k, -1)  # [H*K, D]
        return matmul2d(out.reshape(b, t, h * k), wo, self.cfg.dtype), new_cache

    def _expanded_attention(self, q_nope, q_rope, latent, k_rope, positions, segment_ids):
        """Per-head keys and values from the latent, then the training attention kernel
        (model/kernels/attention.py: blocked einsums on CPU, flash attention on GPU/TPU). With the
        sequence split over a context axis, the latent and rope key are all-gathered first and
        expanded per head on each shard (model/context.py)."""
        dt = self.cfg.dtype
        b, t, h, _ = q_nope.shape
        if context.split_size(t) > 1:
            q = jnp.concatenate([q_nope, q_rope.astype(q_nope.dtype)], -1)  # [B,T,H,N+R]
            return context.gathered_attention(
                q,
                cast(latent, dt),
                cast(k_rope, dt),
                cast(self.wk_b, dt),
                cast(self.wv_b, dt),
                positions,
                segment_ids,
                scale=softmax_scale(self.cfg),
                impl=self.cfg.attention_impl,
            )  # [B,T,H,K]
        k_nope = matmul2d(latent, self.wk_b, dt)  # [B,S,H,N]
        v = matmul2d(latent, self.wv_b, dt)  # [B,S,H,K]
        k_rope = jnp.broadcast_to(k_rope[:, :, None, :], (b, t, h, k_rope.shape[-1]))  # [B,S,H,R]
        q = jnp.concatenate([q_nope, q_rope.astype(q_nope.dtype)], -1)  # [B,T,H,N+R]
        k = jnp.concatenate([k_nope, k_rope.astype(k_nope.dtype)], -1)  # [B,S,H,N+R]
        return kernels.train_attention(
            q,
            k,
            v,
            q_positions=positions,
            q_segments=segment_ids,
            k_positions=positions,
            k_segments=segment_ids,
            scale=softmax_scale(self.cfg),
            impl=self.cfg.attention_impl,
        )  # [B,T,H,K]

    def _absorbed_attention(self, q_nope, q_rope, cache, positions):
        dt = self.cfg.dtype
        # Heads-first operands and outputs ([B,H,T,.]): XLA:CPU runs these batched dots several
        # times faster than with T between B and H (bench/RESULTS.md, "Heads-first attention dots").
        q_latent = jnp.einsum("BTHK,LHK->BHTL", q_nope, cast(self.wk_b, dt))  # W_UK folded into q
        scores = jnp.einsum(
            "BHTL,BSL->BHTS",
            q_latent,
            cast(cache["latent"], dt),
            preferred_element_type=jnp.float32,
        ) + jnp.einsum(
            "BHTK,BSK->BHTS",
            jnp.swapaxes(q_rope, 1, 2),
            cast(cache["rope"], dt),
            preferred_element_type=jnp.float32,
        )
        k_pos = cache["positions"]
        mask = (k_pos[:, None, :] >= 0) & (k_pos[:, None, :] <= positions[:, :, None])  # [B,T,S]
        probs = _softmax_attend(scores * softmax_scale(self.cfg), mask)
        out_latent = jnp.einsum("BHTS,BSL->BHTL", cast(probs, dt), cast(cache["latent"], dt))
        return jnp.einsum("BHTL,LHK->BTHK", out_latent, cast(self.wv_b, dt))  # W_UV after attention


def empty_cache(batch: int, max_len: int, cfg: ModelConfig, dtype=jnp.float32) -> dict:
    """One layer's latent cache: (kv_lora_rank + qk_rope_head_dim) values per token."""
    return {
        "latent": jnp.zeros((batch, max_len, cfg.kv_lora_rank), dtype),
        "rope": jnp.zeros((batch, max_len, cfg.qk_rope_head_dim), dtype),
        "positions": jnp.full((batch, max_len), -1, jnp.int32),
    }


def write_cache(cache: dict, latent, k_rope, positions) -> dict:
    """Writes T new entries per row at slot = absolute position (positions [B,T]; negative = skip)
    into one layer's cache. A position >= S is dropped (a speculative draft past the cache)."""
    b = jnp.arange(latent.shape[0])[:, None]  # [B,1]
    slot = jnp.where(positions >= 0, positions, cache["latent"].shape[-2])  # out of range: dropped
    at = (b, slot)
    return {
        "latent": cache["latent"].at[at].set(latent.astype(cache["latent"].dtype), mode="drop"),
        "rope": cache["rope"].at[at].set(k_rope.astype(cache["rope"].dtype), mode="drop"),
        "positions": cache["positions"].at[at].set(positions, mode="drop"),
    }
