"""Context parallelism: each row's sequence split over the 'context' mesh axes (long context).

Letters: B batch, T tokens of a row (S as keys), t = T/cp this shard's tokens, c = T/(2·cp) tokens
per chunk, H heads (this shard's), N nope dims, R rope dims, K = N + R, V value dims, L latent rank.

Which axes: the mesh axes the logical SEQ axis maps to (model/sharding.py: 'context'), read from
the mesh and rules we are traced under, like the MoE all-to-all's layout. cp = their product; with
cp = 1 (every mesh without a context axis) nothing here runs.

Layout (zig-zag, load-balanced causal chunks): a row is cut into 2·cp chunks of c tokens and
context shard i holds chunks i and 2·cp-1-i, so every shard has one early and one late chunk and the
same causal attention work ((2·cp+1)·c² per head up to the diagonal). The model's inputs are given
in that order (`to_zigzag`, which the LM loss applies), so plain contiguous sharding of T over
'context' puts each shard's two chunks on it. Everything but attention is per token (norms, MLA
projections, rope by explicit position, MoE rows, logits, the loss's token sums), so it is sharded
along T as is; the LM loss's MTP terms shift along T and are refused with cp > 1.

Attention (`gathered_attention`): queries stay on their shard; keys come from the whole row by
all-gathering along 'context' what MLA compresses every token to, the normalized latent and the
shared roped key (kimi_k2: 512 + 64 = 576 values per token per layer, against 64 heads x (192 +
128) = 20,480 for per-head K/V), then expanding them per (local) head. The gathered keys are put
back in row order, so the kernel sees causal-by-index keys and each query's `q_index` (its row
index): the fused (tokamax) kernel's mask is exact there; the blocked CPU kernel's mask comes from
positions and segments (exact in any order). The mask (same document, key position <= query
position) is the unsharded model's, so packed documents stay exact.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from model import sharding as sh
from model.kernels import attention as kernels
from model.kernels import choice


def _axes(logical: str, rules, sizes: dict) -> tuple:
    """Mesh axes (of size > 1) a logical axis maps to under `rules`."""
    spec = nn.logical_to_mesh_axes((logical,), rules)[0]
    axes = () if spec is None else (spec,) if isinstance(spec, str) else tuple(spec)
    return tuple(a for a in axes if sizes.get(a, 1) > 1)


def context_axes() -> tuple:
    """The mesh axes T is split over where we are traced (mesh + logical rules); () without."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return ()
    return _axes(sh.SEQ, nn.get_logical_axis_rules(), dict(mesh.shape))


def context_size() -> int:
    """cp: how many shards each row's tokens are split over (1: no context parallelism)."""
    mesh = jax.sharding.get_abstract_mesh()
    return math.prod(mesh.shape[a] for a in context_axes()) if context_axes() else 1


def token_rows(x):
    """x [B,T,...] -> [B·T, ...] rows (MoE dispatch) in an order whose contiguous split over
    (batch axes, context axes) is each device's own tokens: [Bx, B_loc, cp, t] -> [Bx, cp, B_loc,
    t]. A plain reshape would interleave rows of different context shards whenever a batch shard
    holds more than one row, and GSPMD would all-gather to re-split them. cp = 1: a reshape."""
    b, t = x.shape[:2]
    cp, bx = split_size(t), _batch_shards()
    if cp == 1:
        return x.reshape((b * t,) + x.shape[2:])
    grid = x.reshape((bx, b // bx, cp, t // cp) + x.shape[2:])
    return jnp.swapaxes(grid, 1, 2).reshape((b * t,) + x.shape[2:])


def token_grid(rows, b: int, t: int):
    """Inverse of token_rows: [B·T, ...] -> [B,T,...]."""
    cp, bx = split_size(t), _batch_shards()
    if cp == 1:
        return rows.reshape((b, t) + rows.shape[1:])
    grid = rows.reshape((bx, cp, b // bx, t // cp) + rows.shape[1:])
    return jnp.swapaxes(grid, 1, 2).reshape((b, t) + rows.shape[1:])


def _batch_shards() -> int:
    """How many shards the batch axis is split over (outside the context axes)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return 1
    sizes, ctx = dict(mesh.shape), context_axes()
    axes = [a for a in _axes(sh.BATCH, nn.get_logical_axis_rules(), sizes) if a not in ctx]
    return math.prod(sizes[a] for a in axes)


def split_size(t: int) -> int:
    """cp if a row of t tokens is split over the context axes here, else 1: rows that do not
    divide into 2·cp zig-zag chunks (init's one-token trace) run unsplit, replicated over them."""
    cp = context_size()
    return cp if cp > 1 and t % (2 * cp) == 0 else 1


def zigzag_order(t: int, cp: int) -> np.ndarray:
    """[T] int32: the row index of each position of the zig-zag layout (shard i's t tokens are
    chunks i and 2·cp-1-i). cp = 1 is the identity."""
    if t % (2 * cp) and cp > 1:
        raise ValueError(f"context parallelism: sequence length {t} is not divisible by 2 x {cp}")
    if cp == 1:
        return np.arange(t, dtype=np.int32)
    chunks = np.arange(t, dtype=np.int32).reshape(2 * cp, t // (2 * cp))  # [2cp, c]
    pairs = [np.concatenate([chunks[i], chunks[2 * cp - 1 - i]]) for i in range(cp)]
    return np.concatenate(pairs)


def to_zigzag(batch: dict, cp: int) -> dict:
    """Every array of `batch` with a T axis (axis 1 of [B, T, ...]) put in zig-zag order."""
    if cp == 1:
        return batch
    t = batch["tokens"].shape[1]
    order = zigzag_order(t, cp)
    reorder = lambda x: jnp.take(x, order, axis=1) if x.ndim >= 2 and x.shape[1] == t else x
    return jax.tree.map(reorder, batch)


def from_zigzag(x, cp: int, axis: int = 1):
    """Inverse of to_zigzag for one array (tests and tools; the loss never needs it)."""
    if cp == 1:
        return x
    return jnp.take(x, np.argsort(zigzag_order(x.shape[axis], cp)), axis=axis)


def gathered_attention(
    q, latent, k_rope, wk_b, wv_b, positions, segment_ids, *, scale: float, impl: str
):
    """Context-parallel MLA attention: q [B,T,H,K] (nope + roped rope part), latent [B,T,L],
    k_rope [B,T,R] (roped), wk_b [L,H,N], wv_b [L,H,V] (compute dtype), positions/segment_ids
    [B,T], all in zig-zag order, T split over the context axes -> [B,T,H,V] (same layout)."""
    mesh = jax.sharding.get_abstract_mesh()
    rules, sizes = nn.get_logical_axis_rules(), dict(mesh.shape)
    ctx = context_axes()
    batch = tuple(a for a in _axes(sh.BATCH, rules, sizes) if a not in ctx) or None
    heads = _axes(sh.HEADS, rules, sizes) or None
    cp = math.prod(sizes[a] for a in ctx)
    t = q.shape[1]
    order = zigzag_order(t, cp)
    tokens = P(batch, ctx)
    body = lambda *a: _gathered_body(*a, ctx=ctx, cp=cp, order=order, scale=scale, impl=impl)
    return jax.shard_map(
        body,
        in_specs=(P(batch, ctx, heads, None), P(batch, ctx, None), P(batch, ctx, None))
        + (P(None, heads, None), P(None, heads, None), tokens, tokens),
        out_specs=P(batch, ctx, heads, None),
        mesh=mesh,
        # tokamax's kernels (like its own shard_map) do not type their VJP's per-device cotangents
        # as varying over the mesh axes, which the check would reject; the values are per device.
        check_vma=choice.attention_impl(impl) == "blocked",
    )(q, latent, k_rope, wk_b, wv_b, positions, segment_ids)


def _gathered_body(q, latent, k_rope, wk_b, wv_b, positions, segments, *, ctx, cp, order, scale,
                   impl):  # fmt: skip
    """One device: its t queries [b,t,H,K] against the whole row's keys."""
    row_order = np.argsort(order)  # zig-zag position of each row index

    def gather(x):  # [b,t,...] this shard's tokens -> [b,T,...] the whole row in row order
        whole = jax.lax.all_gather(x, ctx, axis=1, tiled=True)  # zig-zag order
        return jnp.take(whole, row_order, axis=1)

    latent, k_rope = gather(latent), gather(k_rope)  # [b,S,L], [b,S,R]: 576 values/token (kimi)
    k_pos, k_seg = gather(positions), gather(segments)  # [b,S]
    b, s = k_pos.shape
    h = q.shape[2]
    k_nope = jnp.einsum("BSL,LHN->BSHN", latent, wk_b)  # per-head keys, expanded locally
    v = jnp.einsum("BSL,LHV->BSHV", latent, wv_b)  # [b,S,H,V]
    k_rope = jnp.broadcast_to(k_rope[:, :, None, :], (b, s, h, k_rope.shape[-1]))  # [b,S,H,R]
    k = jnp.concatenate([k_nope, k_rope.astype(k_nope.dtype)], -1)  # [b,S,H,K]
    shard = jax.lax.axis_index(ctx)
    t = q.shape[1]
    mine = jax.lax.dynamic_slice_in_dim(jnp.asarray(order), shard * t, t)  # [t] row indices
    q_index = jnp.broadcast_to(mine, (b, t))
    return kernels.train_attention(
        q,
        k,
        v,
        q_positions=positions,
        q_segments=segments,
        k_positions=k_pos,
        k_segments=k_seg,
        scale=scale,
        impl=impl,
        q_index=q_index,
    )  # [b,t,H,V]
