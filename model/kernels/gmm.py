"""Grouped matmul (GMM): the expert matmuls of the MoE, one function, implementation by backend.

Letters: R rows (grouped by expert), K contraction dim, N output dim, E groups (experts).

lhs [R,K] holds each group's rows contiguously, in group order, from row 0; group_sizes [E] says
how many; rows past sum(group_sizes) belong to no group (their output is undefined: callers mask).

  'tokamax'  tokamax.ragged_dot: Mosaic GPU on Hopper, Pallas TPU, its XLA reference on CPU.
  'ragged'   jax.lax.ragged_dot. On GPU (JAX 0.11) it lowers to a dense fallback that computes
             every group for every row: [E,R,N] intermediates, 23 TFLOP/s and out of memory at the
             mid config (bench/RESULTS.md); on CPU too.
  'opaque'   compile-time stand-in for a fused kernel (memory analysis on CPU): a custom call with
             the kernel's inputs and output, saving (lhs, rhs) for the backward like tokamax's
             VJP; running it raises.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from model.kernels import backend
from model.kernels.standin import like, shaped

IMPLS = ("tokamax", "ragged", "opaque")


def grouped_matmul(lhs, rhs, group_sizes, *, impl: str):
    """lhs [R,K], rhs [E,K,N], group_sizes [E] int32 -> [R,N] in lhs's dtype."""
    if impl == "tokamax":
        return backend.tokamax().ragged_dot(lhs, rhs, group_sizes, preferred_element_type=lhs.dtype)
    if impl == "ragged":
        return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=lhs.dtype)
    if impl == "opaque":
        return _opaque(lhs, rhs, group_sizes)
    raise ValueError(f"grouped matmul impl must be one of {IMPLS}, got {impl!r}")


def grouped_swiglu(xs, group_sizes, wi_gate, wi_up, wo, *, impl: str):
    """SwiGLU experts over rows grouped by expert: xs [R,D] (each expert's rows contiguous, in
    expert order, from row 0), group_sizes [E] (sum <= R), wi_gate/wi_up [E,D,F], wo [E,F,D] ->
    [R,D]. Rows past sum(group_sizes) belong to no expert and a kernel may leave their outputs
    unwritten, so they are zeroed going in and coming out (their gradients with them)."""
    gmm = lambda a, w: grouped_matmul(a, w, group_sizes, impl=impl)
    live = (jnp.arange(xs.shape[0]) < group_sizes.sum())[:, None]  # [R,1]
    xs = jnp.where(live, xs, 0)
    gate, up = gmm(xs, wi_gate), gmm(xs, wi_up)  # [R,F]
    h = jnp.where(live, jax.nn.silu(gate) * up, 0)
    return jnp.where(live, gmm(h, wo), 0)  # [R,D]


@jax.custom_vjp
def _opaque(lhs, rhs, group_sizes):
    return _opaque_fwd(lhs, rhs, group_sizes)[0]


def _opaque_fwd(lhs, rhs, group_sizes):
    out = shaped(jax.ShapeDtypeStruct((lhs.shape[0], rhs.shape[2]), lhs.dtype))[0]
    return like(out, lhs), (lhs, rhs, group_sizes)


def _opaque_bwd(res, g):
    lhs, rhs, group_sizes = res
    d_lhs, d_rhs = shaped(
        jax.ShapeDtypeStruct(lhs.shape, lhs.dtype), jax.ShapeDtypeStruct(rhs.shape, rhs.dtype)
    )
    return like(d_lhs, lhs), like(d_rhs, rhs), None


_opaque.defvjp(_opaque_fwd, _opaque_bwd)
