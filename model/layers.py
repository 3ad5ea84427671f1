"""Shared building blocks: params with logical axes, RMSNorm, SwiGLU MLP, embedding.

Letters: B batch, T sequence, D model dim, F FFN width, V vocab.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from model import sharding as sh


def dense_init(std: float):
    return nn.initializers.normal(stddev=std)


def logical_param(module: nn.Module, name: str, shape: Sequence[int], axes: Sequence, init):
    """A float32 param annotated with logical axis names (one per dim)."""
    assert len(shape) == len(axes), (name, shape, axes)
    return module.param(
        name, nn.with_logical_partitioning(init, tuple(axes)), tuple(shape), jnp.float32
    )


def cast(x, dtype: str):
    return x.astype(jnp.dtype(dtype))


class RMSNorm(nn.Module):
    """x / rms(x) * scale, computed in float32 (HF DeepseekV3RMSNorm)."""

    dim: int
    eps: float
    axis_name: str = sh.EMBED

    @nn.compact
    def __call__(self, x):
        scale = logical_param(self, "scale", (self.dim,), (self.axis_name,), nn.initializers.ones)
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return (scale * normed).astype(x.dtype)


class MLP(nn.Module):
    """SwiGLU FFN: down(silu(x @ gate) * (x @ up)). Used for dense layers and shared experts."""

    hidden_size: int
    intermediate_size: int
    init_std: float
    dtype: str

    @nn.compact
    def __call__(self, x):  # x: [B, T, D]
        d, f = self.hidden_size, self.intermediate_size
        init = dense_init(self.init_std)
        w_gate = logical_param(self, "gate", (d, f), (sh.EMBED, sh.MLP), init)
        w_up = logical_param(self, "up", (d, f), (sh.EMBED, sh.MLP), init)
        w_down = logical_param(self, "down", (f, d), (sh.MLP, sh.EMBED), init)
        xc = cast(x, self.dtype)
        gate = jnp.einsum("BTD,DF->BTF", xc, cast(w_gate, self.dtype))
        up = jnp.einsum("BTD,DF->BTF", xc, cast(w_up, self.dtype))
        return jnp.einsum("BTF,FD->BTD", nn.silu(gate) * up, cast(w_down, self.dtype))
