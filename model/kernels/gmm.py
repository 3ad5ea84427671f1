"""Grouped matmul (GMM): the expert matmuls of the MoE, one function, implementation by backend.

Letters: R rows (grouped by expert), K contraction dim, N output dim, E groups (experts).

lhs [R,K] holds each group's rows contiguously, in group order, from row 0; group_sizes [E] says
how many; rows past sum(group_sizes) belong to no group (their output is undefined: callers mask).

  'tokamax'  tokamax.ragged_dot with the implementation named per backend (KERNELS): Mosaic GPU
             on NVIDIA, Pallas Mosaic TPU, its XLA reference on CPU. Named, not left to tokamax:
             its own choice falls back quietly to XLA's dense ragged_dot (below) whenever the
             Mosaic kernel declines, e.g. for float32 operands (issue 53: 0 Mosaic calls and 24
             ragged_dots in a float32 train step). On GPU the operands must be bfloat16 or
             float16 alike (KERNEL_DTYPES), else a one-line error says so.
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
# tokamax's ragged_dot implementation per backend: one name each, so nothing falls back quietly.
KERNELS = {"gpu": "mosaic_gpu", "tpu": "mosaic_tpu", "cpu": "xla"}
# What the sm90/sm100 Mosaic GPU kernels take without quantization (tokamax 0.0.17
# pallas_mosaic_gpu.py: default precision only, i.e. matching 16-bit floats).
KERNEL_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def grouped_matmul(lhs, rhs, group_sizes, *, impl: str):
    """lhs [R,K], rhs [E,K,N], group_sizes [E] int32 -> [R,N] in lhs's dtype."""
    if impl == "tokamax":
        return _tokamax(lhs, rhs, group_sizes)
    if impl == "ragged":
        return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=lhs.dtype)
    if impl == "opaque":
        return _opaque(lhs, rhs, group_sizes)
    raise ValueError(f"grouped matmul impl must be one of {IMPLS}, got {impl!r}")


def _tokamax(lhs, rhs, group_sizes):
    platform = backend.platform()
    if platform == "gpu" and not (lhs.dtype == rhs.dtype and lhs.dtype in KERNEL_DTYPES):
        raise ValueError(
            f"grouped matmul on GPU: tokamax's Mosaic kernel takes bfloat16 or float16 operands "
            f"alike, got {lhs.dtype} x {rhs.dtype}; set compute_dtype 'auto' or 'bfloat16' "
            "(or moe_impl 'ragged' for XLA's dense ragged_dot)"
        )
    return backend.tokamax().ragged_dot(
        lhs,
        rhs,
        group_sizes,
        preferred_element_type=lhs.dtype,
        implementation=KERNELS.get(platform, "xla"),
    )


def grouped_swiglu(xs, group_sizes, wi_gate, wi_up, wo, *, impl: str):
    """SwiGLU experts over rows grouped by expert: xs [R,D] (each expert's rows contiguous, in
    expert order, from row 0), group_sizes [E] (sum <= R), wi_gate/wi_up [E,D,F], wo [E,F,D] ->
    [R,D]. Rows past sum(group_sizes) belong to no expert, and a kernel leaves their outputs (and
    its input gradients) unwritten: whatever memory held. So every kernel input and output is
    zeroed there. Zeroing only h = silu(gate) * up is not enough: in the backward, dgate = dh · up ·
    silu'(gate) reads the stale gate/up rows (0 · NaN = NaN), and tokamax's sm90 weight-gradient
    kernel masks rows past a group in one operand only, so the last expert's wi_gate/wi_up
    gradients would take that NaN (issue 53; tests/test_kernels.py emulates the kernel)."""
    gmm = lambda a, w: grouped_matmul(a, w, group_sizes, impl=impl)
    live = (jnp.arange(xs.shape[0]) < group_sizes.sum())[:, None]  # [R,1]
    xs = jnp.where(live, xs, 0)
    gate = jnp.where(live, gmm(xs, wi_gate), 0)  # [R,F]
    up = jnp.where(live, gmm(xs, wi_up), 0)  # [R,F]
    h = jax.nn.silu(gate) * up  # [R,F]; 0 outside the groups: silu(0) = 0
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
