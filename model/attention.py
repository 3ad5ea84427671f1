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

from model import sharding as sh
from model.config import ModelConfig
from model.layers import RMSNorm, cast, dense_init, logical_param, matmul2d
from model.rope import apply_rope, rope_tables, softmax_scale

NEG_INF = -1e30  # finite, so fully-masked rows (padding) give uniform weights instead of NaN
QUERY_BLOCK = 128  # causal query block rows of the training path (see causal_blocks)


def attention_mask(q_positions, q_segments, k_positions, k_segments):
    """[B, T, S] bool: causal by per-document position and same (non-padding) segment."""
    causal = k_positions[:, None, :] <= q_positions[:, :, None]
    same_doc = q_segments[:, :, None] == k_segments[:, None, :]
    return causal & same_doc


def causal_blocks(t: int, block: int | None = None) -> list[tuple[int, int]]:
    """Query row ranges [lo, hi) of `block` rows (default QUERY_BLOCK); one range when t <= block.
    Keys past a block's last row are never attended (packed rows keep positions increasing within a
    document), so the upper-right score blocks are skipped: (n-1)/2n of the score work for n blocks."""
    block = block or QUERY_BLOCK
    if t <= block:
        return [(0, t)]
    return [(lo, min(lo + block, t)) for lo in range(0, t, block)]


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
        """Heads-first, one score matmul over nope‖rope dims with the softmax scale folded into q."""
        dt = self.cfg.dtype
        b, t, h, _ = q_nope.shape
        k_nope = matmul2d(latent, self.wk_b, dt)  # [B,S,H,N]
        v = matmul2d(latent, self.wv_b, dt)  # [B,S,H,K]
        k_rope = jnp.broadcast_to(k_rope[:, :, None, :], (b, t, h, k_rope.shape[-1]))  # [B,S,H,R]
        q = jnp.concatenate([q_nope, q_rope], -1) * softmax_scale(self.cfg)  # [B,T,H,N+R]
        k = jnp.concatenate([k_nope, k_rope.astype(k_nope.dtype)], -1)  # [B,S,H,N+R]
        q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))  # [B,H,T|S,.]: heads-first
        blocks = causal_blocks(t)
        outs = []
        for lo, hi in blocks:  # query rows [lo, hi) only see keys [0, hi): causal by index
            mask = attention_mask(
                positions[:, lo:hi], segment_ids[:, lo:hi], positions[:, :hi], segment_ids[:, :hi]
            )
            scores = jnp.einsum(
                "BHTK,BHSK->BHTS", q[:, :, lo:hi], k[:, :, :hi], preferred_element_type=jnp.float32
            )
            # Every query sees at least itself, so no row is fully masked: exp(-1e30 - max) is exactly
            # 0 and no second mask multiply is needed.
            probs = jax.nn.softmax(jnp.where(mask[:, None], scores, NEG_INF), axis=-1)
            out = jnp.einsum("BHTS,BHSK->BHTK", cast(probs, dt), v[:, :, :hi])
            outs.append(jnp.swapaxes(out, 1, 2))  # [B,T,H,K]: XLA:CPU's dot emits BTHK 2x slower
        return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1)  # [B,T,H,K]

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
