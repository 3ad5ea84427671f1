"""Expert-parallel MoE dispatch with `shard_map` + `all_to_all` (cfg.moe_comm == 'alltoall').

The GSPMD path (model/moe.py) sorts every assignment globally and lets XLA choose the
communication. Here each device routes its own tokens and talks only to the devices that own
their experts, the way pod-scale MoE stacks do:

  1. tokens: x [n, D], this device's rows. When the expert mesh axes do not shard the batch (the
     default rules put it on (data, fsdp) only), the shard_map still splits rows over the expert
     axes: entering is then a local slice, and GSPMD all-gathers the output over them afterwards.
  2. pack: the a = n·k assignments are sorted by owner device (expert // E_loc) into a send buffer
     [ep, C, D] (+ their local expert ids [ep, C]); C = a is dropless (a device can receive every
     assignment of every source), C = ceil(capacity_factor · a / ep) bounds the buffers and drops
     (and counts) the overflow.
  3. all_to_all over the expert axes: recv[j] holds the rows source j sent to this device.
  4. local experts over the R = ep·C received rows (weights all-gathered over fsdp along D; F stays
     split over tensor, so outputs are partial sums over tensor).
  5. all_to_all back, un-sort, weight by the routing weights, psum over tensor.

Dropless with static shapes sizes every (source, destination) slot for the worst case, so its
buffers and all-to-all bytes are ep times a balanced load; capacity_factor ~1.25 is the practical
setting at pod scale (model/memory_plan.py counts both).

Not implemented: dropless without ep-sized buffers (exchange per-destination counts with an
all_to_all, then send only the real rows with `jax.lax.ragged_all_to_all`). In the installed JAX
(0.10.2) `ragged_all_to_all` traces and lowers inside shard_map, but XLA:CPU cannot compile it:
`jax.errors.JaxRuntimeError: UNIMPLEMENTED: HLO opcode `ragged-all-to-all` is not supported by
XLA:CPU ThunkEmitter` (8 simulated CPU devices, a shard_map over one 8-device axis sending one row
to each peer). It is a GPU/TPU collective; with nothing here to run or test it on, it is left out
rather than shipped untested.

Letters: N tokens, n tokens this device dispatches, D model, E experts, E_loc experts per device,
F expert FFN width (F_loc per tensor shard), k experts per token, a assignments (n·k), C rows per
(source, destination) slot, R received rows (ep·C).

The mesh comes from the tracing context (`jax.set_mesh`) and the logical->mesh axis mapping from
flax's `nn.logical_axis_rules` context, so modules still never name mesh axes. Without a mesh the
caller falls back to the GSPMD dispatch.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from model import sharding as sh
from model.kernels.gmm import grouped_swiglu


class A2ALayout(NamedTuple):
    """Mesh axes (tuples of names) the dispatch uses, resolved from the logical rules."""

    batch: tuple  # axes sharding token rows
    expert: tuple  # axes sharding experts (the all_to_all group)
    embed: tuple  # axes sharding D of the expert weights (fsdp)
    mlp: tuple  # axes sharding F of the expert weights (tensor)
    sizes: dict  # mesh axis name -> size
    seq: tuple = ()  # axes sharding the tokens of a row (context parallelism): rows too

    @property
    def rows(self) -> tuple:
        """Every axis token rows are split over before dispatch: batch, then context."""
        return self.batch + tuple(a for a in self.seq if a not in self.batch)

    def size(self, axes: tuple) -> int:
        return math.prod(self.sizes[a] for a in axes)

    @property
    def split_tokens(self) -> bool:
        """True when the expert group's devices hold the same rows (expert axes not in batch)."""
        return not set(self.expert) <= set(self.rows)


def layout_from_rules(rules, sizes: dict) -> A2ALayout:
    """rules: flax logical rules ((name, mesh axes), ...); sizes: {mesh axis: size}."""
    keep = lambda axes: tuple(a for a in axes if sizes.get(a, 1) > 1)  # size-1 axes: no comm
    return A2ALayout(
        batch=keep(sh.mesh_axes_of(sh.BATCH, rules)),
        expert=keep(sh.mesh_axes_of(sh.EXPERT, rules)),
        embed=keep(sh.mesh_axes_of(sh.EMBED, rules)),
        mlp=keep(sh.mesh_axes_of(sh.MLP, rules)),
        sizes=dict(sizes),
        seq=keep(sh.mesh_axes_of(sh.SEQ, rules)),
    )


def current_layout() -> A2ALayout | None:
    """The layout of the mesh and rules we are being traced under, or None without a mesh."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return None
    return layout_from_rules(nn.get_logical_axis_rules(), dict(mesh.shape))


def capacity(n_assignments: int, ep: int, capacity_factor: float) -> int:
    """Rows per (source, destination) slot: all assignments when dropless (capacity_factor 0)."""
    if capacity_factor <= 0:
        return n_assignments
    return min(n_assignments, max(1, math.ceil(capacity_factor * n_assignments / ep)))


# --- local expert FFN over received rows ---------------------------------------------------------


def _swiglu(g, u):
    return nn.silu(g) * u


def local_ffn_dense(rows, local_ids, wi_gate, wi_up, wo):
    """rows [R,D], local_ids [R] (E_loc marks padding) -> [R,D]: every local expert on every row,
    one-hot selected. CPU-friendly for small E_loc (batched einsums run near peak there)."""
    e_loc = wi_gate.shape[0]
    h = _swiglu(jnp.einsum("RD,EDF->ERF", rows, wi_gate), jnp.einsum("RD,EDF->ERF", rows, wi_up))
    y = jnp.einsum("ERF,EFD->ERD", h, wo)
    pick = jax.nn.one_hot(local_ids, e_loc, dtype=y.dtype)  # [R,E]; padding rows are all zero
    return jnp.einsum("ERD,RE->RD", y, pick)


def local_ffn_grouped(rows, local_ids, wi_gate, wi_up, wo, *, impl: str):
    """Sorted by local expert (padding last, outside every group), then grouped matmuls
    (model/kernels/gmm.py: 'tokamax' on GPU/TPU, or 'ragged')."""
    e_loc = wi_gate.shape[0]
    order = jnp.argsort(local_ids, stable=True)  # [R]
    sizes = jnp.zeros((e_loc,), jnp.int32).at[local_ids].add(1, mode="drop")  # [E_loc]
    y = grouped_swiglu(rows[order], sizes, wi_gate, wi_up, wo, impl=impl)  # [R,D]; padding 0
    return jnp.zeros_like(y).at[order].set(y, unique_indices=True)


# model/moe.py's blocked loop is not usable here yet: inside shard_map its lax.cond / scan branches
# return replicated zeros next to device-varying values, which the varying-axes check rejects. So
# on CPU ('blocked' or 'dense') the local experts run as one batched einsum over E_loc.
LOCAL_FFN = {
    "dense": local_ffn_dense,
    "blocked": local_ffn_dense,
    **{g: partial(local_ffn_grouped, impl=g) for g in ("tokamax", "ragged", "opaque")},
}


# --- the shard_map body ---------------------------------------------------------------------------


def _pack(expert_ids, valid, e_loc: int, ep: int, cap: int):
    """Send-slot of each assignment. expert_ids [n,k], valid [n] -> (slot [a] in [0, ep·C],
    C·ep = dropped, token of each assignment [a], local expert id [a], dropped count of valid
    rows' assignments: padding takes slots like any row but its drops are not counted)."""
    n, k = expert_ids.shape
    flat = expert_ids.reshape(-1)  # [a]
    dest = flat // e_loc  # [a] owner device along the expert axes
    order = jnp.argsort(dest, stable=True)  # [a]
    counts = jnp.zeros((ep,), jnp.int32).at[dest].add(1)  # [ep]
    start = jnp.cumsum(counts) - counts
    pos = jnp.arange(n * k) - start[dest[order]]  # rank within its destination group (sorted)
    keep = pos < cap
    slot_sorted = jnp.where(keep, dest[order] * cap + pos, ep * cap)
    slot = jnp.zeros((n * k,), jnp.int32).at[order].set(slot_sorted)  # [a], assignment order
    counted = jnp.repeat(valid, k)[order]  # [a] sorted like keep
    dropped = jnp.sum(~keep & counted).astype(jnp.int32)
    return slot, jnp.arange(n * k) // k, flat % e_loc, dropped


def _body(x, expert_ids, weights, valid, wi_gate, wi_up, wo, *, lay: A2ALayout, cap_factor, impl):
    """Per-device: x [n,D], expert_ids/weights [n,k], valid [n], w* local shards -> ([n,D],
    global drops)."""
    ep = lay.size(lay.expert)
    e_loc = wi_gate.shape[0]
    if (
        lay.mlp
    ):  # make tensor-parallel replicas explicit early, so dx is psum'ed on [n,D], not [R,D]
        x, weights = jax.lax.pcast((x, weights), lay.mlp, to="varying")
    n, k = expert_ids.shape
    d = x.shape[1]
    cap = capacity(n * k, ep, cap_factor)
    slot, token_of, local_ids, dropped = _pack(expert_ids, valid, e_loc, ep, cap)
    send = jnp.zeros((ep * cap + 1, d), x.dtype).at[slot].set(x[token_of])[:-1]  # [ep·C, D]
    send_ids = jnp.full((ep * cap + 1,), e_loc, jnp.int32).at[slot].set(local_ids)[:-1]
    if lay.expert:
        a2a = lambda v: jax.lax.all_to_all(v, lay.expert, 0, 0, tiled=True)
        recv, recv_ids = a2a(send), a2a(send_ids)  # [R,D], [R]: block j came from source j
    else:
        a2a, recv, recv_ids = (lambda v: v), send, send_ids
    shared = tuple(
        a for a in lay.rows if a not in lay.embed + lay.mlp + lay.expert
    )  # pure data (or context) parallel
    if shared:  # mark the replicas varying *before* the gather: the backward then reduce-scatters
        # over fsdp first and all-reduces only the [E_loc, D/fsdp, F_loc] shard over data
        wi_gate, wi_up, wo = jax.lax.pcast((wi_gate, wi_up, wo), shared, to="varying")
    if lay.embed:  # FSDP: gather D of this device's experts for the matmul (bwd: reduce-scatter)
        gather = lambda w, axis: jax.lax.all_gather(w, lay.embed, axis=axis, tiled=True)
        wi_gate, wi_up, wo = gather(wi_gate, 1), gather(wi_up, 1), gather(wo, 2)
    y_rows = LOCAL_FFN[impl](recv, recv_ids, wi_gate, wi_up, wo)  # [R,D], partial over tensor
    back = a2a(y_rows)  # [ep·C, D] in this device's send layout
    back = jnp.concatenate([back, jnp.zeros((1, d), back.dtype)])  # dropped slot reads zeros
    y = back[slot].reshape(n, k, d)  # [n,k,D]
    out = jnp.einsum("nkD,nk->nD", y.astype(jnp.float32), weights)  # [n,D] float32
    if lay.mlp:
        out = jax.lax.psum(out, lay.mlp)
    # Every device's rows are its own over rows + expert axes (an expert axis already in rows,
    # as in the engine's slot split, model/engine/split.py, is named once).
    owners = lay.rows + tuple(a for a in lay.expert if a not in lay.rows)
    return out.astype(x.dtype), jax.lax.psum(dropped, owners)


def dispatch_alltoall(
    x,
    expert_ids,
    weights,
    wi_gate,
    wi_up,
    wo,
    lay: A2ALayout,
    *,
    capacity_factor: float = 0.0,
    impl: str = "dense",
    valid=None,
):
    """x [N,D] (rows sharded like the batch), expert_ids/weights [N,k], wi_gate/wi_up [E,D,F],
    wo [E,F,D] (sharded expert x embed x mlp), valid [N] bool (rows whose drops count; default
    all) -> (y [N,D], int32 count of valid rows' assignments dropped, summed over devices).

    Must run under `jax.set_mesh(mesh)`; `lay` from `current_layout()` or `layout_from_rules`.
    """
    ep = lay.size(lay.expert)
    e = wi_gate.shape[0]
    if e % ep:
        raise ValueError(f"moe_comm='alltoall': {e} experts do not divide over {ep} expert shards")
    if valid is None:
        valid = jnp.ones(x.shape[:1], bool)
    shards = lay.size(lay.rows) * (ep if lay.split_tokens else 1)
    pad = (-x.shape[0]) % shards
    if pad:  # e.g. init's single token or small decode batches: pad with no-op rows (weight 0)
        x, expert_ids, weights, valid = (
            jnp.pad(v, [(0, pad)] + [(0, 0)] * (v.ndim - 1))
            for v in (x, expert_ids, weights, valid)
        )  # padded rows: valid False
    # Rows are split over the expert axes too: where the batch is replicated over them, entering
    # is a local slice and leaving an all-gather (GSPMD's reshard; its backward is the mirror).
    # With context parallelism the rows of [B*T] are split over batch then context axes: for one
    # sequence per batch shard (long-context runs) that is exactly the model's [B, T] layout.
    rows = P(lay.rows + (lay.expert if lay.split_tokens else ()) or None, None)
    w_in = P(lay.expert or None, lay.embed or None, lay.mlp or None)
    w_out = P(lay.expert or None, lay.mlp or None, lay.embed or None)
    body = lambda *a: _body(*a, lay=lay, cap_factor=capacity_factor, impl=impl)
    # An embed axis the rows are not split over (the decode engine's sequence split: a context
    # axis splits the cache and the weights' D, never a call's tokens, model/engine/split.py):
    # each device gathers the same whole D, so y is equal across that axis, which shard_map's
    # type check cannot infer (this JAX has no invariant all-gather). Only then is it off.
    out_axes = set(lay.rows) | (set(lay.expert) if lay.split_tokens else set())
    y, dropped = jax.shard_map(
        body,
        in_specs=(rows, rows, rows, P(rows[0]), w_in, w_in, w_out),
        out_specs=(rows, P()),
        mesh=jax.sharding.get_abstract_mesh(),
        # Off in two cases. (1) tokamax's Pallas kernels type their VJP's cotangents as not
        # varying over the mesh axes (e.g. bfloat16[R,F] for a bfloat16[R,F]{V:expert} input),
        # which the varying-axes check rejects in the backward (issue 53, seen lowering the Mosaic
        # GPU kernel; its XLA reference on CPU passes); the values are per device, as the specs
        # say (as in context.py). (2) The embed axis case above.
        check_vma=impl != "tokamax" and set(lay.embed) <= out_axes,
    )(x, expert_ids, weights.astype(jnp.float32), valid, wi_gate, wi_up, wo)
    return (y[: y.shape[0] - pad] if pad else y), dropped
