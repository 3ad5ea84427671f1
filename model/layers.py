"""Shared building blocks: params with logical axes, RMSNorm, SwiGLU MLP, embedding.

Letters: B batch, T sequence, D model dim, F FFN width, V vocab.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from model import context
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


def matmul2d(x, w, dtype: str):
    """x [..., D] @ w [D, *out] as one 2-D matmul [N, D] x [D, prod(out)] -> [..., *out].

    XLA:CPU computes the weight gradient of a 3-D einsum such as BTD,DF->BTF (a sum over B and T)
    with a slow transpose of the activation gradient first; a flattened [N, D] matmul has none.
    With T split over a context axis the flattening would mix rows of different shards (GSPMD
    all-gathers to re-split them), so there it stays one dot over the last axis."""
    lead, out = x.shape[:-1], w.shape[1:]
    if x.ndim > 2 and context.context_size() > 1:
        y = jnp.matmul(cast(x, dtype), cast(w, dtype).reshape(w.shape[0], -1))  # [..., prod(out)]
        return y.reshape(lead + out)
    y = cast(x, dtype).reshape(-1, x.shape[-1]) @ cast(w, dtype).reshape(w.shape[0], -1)
    return y.reshape(lead + out)


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
        # One [N, D] x [D, 2F] matmul for gate‖up (2-D: see matmul2d), split after.
        gate_up = matmul2d(x, jnp.concatenate([w_gate, w_up], axis=1), self.dtype)  # [B,T,2F]
        gate, up = gate_up[..., :f], gate_up[..., f:]
        return matmul2d(nn.silu(gate) * up, w_down, self.dtype)
