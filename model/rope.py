"""Rotary position embedding with YaRN, in the interleaved-pair layout of official checkpoints.

Checkpoints store each head's R rope dims as pairs (x0, x1), (x2, x3), ...; pair i rotates by
angle position * inv_freq[i]. HF de-interleaves before rotating; rotating the pairs in place gives
the same q·k (both sides get the same layout), so no permutation is needed anywhere.

YaRN (HF `_compute_yarn_parameters`): frequencies below the correction range are interpolated
(divided by `factor`), those above are kept, with a linear ramp between; cos/sin are multiplied by
`attention_factor` = mscale(factor, mscale) / mscale(factor, mscale_all_dim) (1.0 for DeepSeek/Kimi,
whose mscale == mscale_all_dim), and the softmax scale gets mscale(factor, mscale_all_dim)**2.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from model.config import ModelConfig, RopeScaling


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _correction_dim(num_rotations: float, dim: int, base: float, max_pos: int) -> float:
    return dim * math.log(max_pos / (num_rotations * 2 * math.pi)) / (2 * math.log(base))


def inv_frequencies(dim: int, theta: float, scaling: RopeScaling) -> np.ndarray:
    """[dim/2] float32 inverse frequencies, YaRN-corrected when scaling.factor > 1."""
    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim)
    extrapolation = 1.0 / pos_freqs
    if scaling.factor <= 1.0:
        return extrapolation.astype(np.float32)
    interpolation = 1.0 / (scaling.factor * pos_freqs)
    low = _correction_dim(scaling.beta_fast, dim, theta, scaling.original_max_position_embeddings)
    high = _correction_dim(scaling.beta_slow, dim, theta, scaling.original_max_position_embeddings)
    if scaling.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # HF: avoid a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
    keep = 1.0 - ramp  # 1 = extrapolate (high-frequency dims keep their frequency)
    return (interpolation * (1 - keep) + extrapolation * keep).astype(np.float32)


def attention_factor(scaling: RopeScaling) -> float:
    """Multiplier of cos/sin (HF's attention_factor)."""
    if scaling.factor <= 1.0:
        return 1.0
    if scaling.mscale and scaling.mscale_all_dim:
        return yarn_mscale(scaling.factor, scaling.mscale) / yarn_mscale(
            scaling.factor, scaling.mscale_all_dim
        )
    return yarn_mscale(scaling.factor)


def softmax_scale(cfg: ModelConfig) -> float:
    """1/sqrt(qk_head_dim), times mscale(factor, mscale_all_dim)^2 under YaRN."""
    scale = cfg.qk_head_dim**-0.5
    s = cfg.rope_scaling
    if s.factor > 1.0 and s.mscale_all_dim:
        scale *= yarn_mscale(s.factor, s.mscale_all_dim) ** 2
    return scale


def rope_tables(cfg: ModelConfig, positions) -> tuple[jnp.ndarray, jnp.ndarray]:
    """cos, sin of shape [*positions.shape, R/2] (float32), already times attention_factor."""
    inv_freq = jnp.asarray(inv_frequencies(cfg.qk_rope_head_dim, cfg.rope_theta, cfg.rope_scaling))
    angles = positions.astype(jnp.float32)[..., None] * inv_freq
    factor = attention_factor(cfg.rope_scaling)
    return jnp.cos(angles) * factor, jnp.sin(angles) * factor


def apply_rope(x, cos, sin):
    """Rotates interleaved pairs of the last dim. x: [B, T, (H,) R]; cos/sin: [B, T, R/2]."""
    if x.ndim == cos.ndim + 1:  # per-head input: broadcast over H
        cos, sin = cos[..., None, :], sin[..., None, :]
    pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], x.shape[-1] // 2, 2)  # [..., R/2, 2]
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = jnp.stack([even * cos - odd * sin, odd * cos + even * sin], axis=-1)
    return rotated.reshape(x.shape).astype(x.dtype)
