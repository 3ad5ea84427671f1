"""Shape-only stand-ins for fused kernels ('opaque' implementations): custom calls with a kernel's
output and residual shapes, for XLA's compiled memory analysis of a GPU/TPU program on CPU.
Running one raises."""

from __future__ import annotations

import jax


def _refuse(*_):
    raise RuntimeError("an 'opaque' kernel is a compile-time stand-in; it cannot run")


def shaped(*shapes: jax.ShapeDtypeStruct) -> tuple:
    """Arrays of these shapes from an opaque custom call (a host callback that raises if run)."""
    return tuple(jax.pure_callback(_refuse, shapes, vmap_method="broadcast_all"))


def like(value, ref):
    """`value` typed as varying over the manual mesh axes `ref` varies over: a callback's outputs
    vary over none, and inside shard_map (context-parallel attention, the all-to-all MoE) a VJP's
    outputs must match its primal inputs' types. Outside shard_map: value as is."""
    manual = getattr(jax.typeof(ref), "manual_axis_type", None)  # JAX 0.10: .varying
    vma = tuple(sorted(getattr(manual, "varying", ()) or ()))
    return jax.lax.pcast(value, vma, to="varying") if vma else value
