"""Training attention over packed rows: one function, the implementation chosen by backend.

Letters: B batch, T query len, S key len, H heads, K query/key head dim (MLA: nope + rope = 192),
V value head dim (MLA: 128).

Mask, the same for every implementation: query t sees key s iff both belong to the same document
(q_segments[t] == k_segments[s]) and s is not in its future (k_positions[s] <= q_positions[t]).
Padding is segment 0: a document of its own whose outputs the losses never read.

  'blocked'  CPU (and the reference every other path is tested against): heads-first einsums over
             query blocks of QUERY_BLOCK rows, each against the keys up to its last row only, with
             float32 scores [B,H,block,S] and an exact masked softmax. Memory grows with T·S.
  'tokamax'  GPU/TPU: tokamax's flash attention (Mosaic GPU on Hopper, Pallas TPU; its XLA
             reference on CPU). Scores are never materialized: the mask goes in as causal-by-index
             plus each query's document start (`k_start`), which is exact when every document is
             one contiguous run of its row with positions rising by one, as the packer makes them
             (data/packing.py). MLA's unequal head dims (K 192, V 128) are supported.
  'cudnn'    GPU: the same call through tokamax's `jax.nn.dot_product_attention` (cuDNN) backend.
  'opaque'   compile-time stand-in for a fused kernel (memory analysis on CPU): a custom call
             with the flash kernel's inputs, output and residuals (out + log-sum-exp); running it
             raises.
  'auto'     'blocked' on CPU, 'tokamax' on GPU/TPU.

Context parallelism passes `q_index` [B,T]: each query's index in the row the keys span (the keys
are the whole row, the queries this shard's chunks); the default is arange(T) with T == S.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from jax.sharding import NamedSharding, PartitionSpec

from model import sharding as sh
from model.kernels import backend, choice
from model.kernels.standin import like, shaped

IMPLS = ("auto", "blocked", "tokamax", "cudnn", "opaque")
NEG_INF = -1e30  # finite, so a fully-masked row gives uniform weights instead of NaN
QUERY_BLOCK = 128  # query rows per block of the blocked path (see causal_blocks)


def attention_mask(q_positions, q_segments, k_positions, k_segments):
    """[B, T, S] bool: causal by per-document position and same (non-padding) segment."""
    causal = k_positions[:, None, :] <= q_positions[:, :, None]
    same_doc = q_segments[:, :, None] == k_segments[:, None, :]
    return causal & same_doc


def causal_blocks(t: int, block: int | None = None) -> list[tuple[int, int]]:
    """Query row ranges [lo, hi) of `block` rows (default QUERY_BLOCK); one range when t <= block.
    Keys past a block's last row are never attended (packed rows keep positions increasing within a
    document), so the upper-right score blocks are skipped: (n-1)/2n of the score work for n
    blocks."""
    block = block or QUERY_BLOCK
    if t <= block:
        return [(0, t)]
    return [(lo, min(lo + block, t)) for lo in range(0, t, block)]


def train_attention(
    q,
    k,
    v,
    *,
    q_positions,
    q_segments,
    k_positions,
    k_segments,
    scale: float,
    impl: str,
    q_index=None,
):
    """q [B,T,H,K], k [B,S,H,K], v [B,S,H,V] (compute dtype) -> [B,T,H,V] in q's dtype.

    positions/segments [B,T] and [B,S] int32 define the mask (module docstring); `scale` multiplies
    the logits; q_index [B,T] (optional) is each query's index among the S keys."""
    impl = choice.attention_impl(impl)
    if impl == "blocked":
        return _blocked(q, k, v, q_positions, q_segments, k_positions, k_segments, scale, q_index)
    if impl == "opaque":
        return _opaque_per_shard(q, k, v)
    if impl not in ("tokamax", "cudnn"):
        raise ValueError(f"attention_impl must be one of {IMPLS}, got {impl!r}")
    return _tokamax(q, k, v, k_segments, scale, q_index, impl)


# --- blocked einsums (CPU, the reference) ---------------------------------------------------------


def _blocked(q, k, v, q_positions, q_segments, k_positions, k_segments, scale, q_index):
    """Heads-first, one score matmul over the whole K with the softmax scale folded into q."""
    t, s = q.shape[1], k.shape[1]
    q = q * jnp.asarray(scale, q.dtype)
    q, k, v = (jnp.swapaxes(a, 1, 2) for a in (q, k, v))  # [B,H,T|S,.]: heads-first
    # Query rows [lo, hi) only see keys [0, hi) when queries are the keys' own rows (T == S);
    # other query sets (context-parallel chunks) see every key, the mask deciding.
    blocks = causal_blocks(t) if q_index is None and t == s else [(0, t)]
    outs = []
    for lo, hi in blocks:
        k_hi = hi if q_index is None and t == s else s
        mask = attention_mask(
            q_positions[:, lo:hi], q_segments[:, lo:hi], k_positions[:, :k_hi], k_segments[:, :k_hi]
        )  # [B,t,s]
        scores = jnp.einsum(
            "BHTK,BHSK->BHTS", q[:, :, lo:hi], k[:, :, :k_hi], preferred_element_type=jnp.float32
        )
        # Every query sees at least itself, so no row is fully masked: exp(-1e30 - max) is exactly
        # 0 and no second mask multiply is needed.
        probs = jax.nn.softmax(jnp.where(mask[:, None], scores, NEG_INF), axis=-1)
        out = jnp.einsum("BHTS,BHSK->BHTK", probs.astype(v.dtype), v[:, :, :k_hi])
        outs.append(jnp.swapaxes(out, 1, 2))  # [B,T,H,V]: XLA:CPU's dot emits BTHK 2x slower
    return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1)  # [B,T,H,V]


# --- tokamax flash attention (GPU/TPU) ------------------------------------------------------------


def document_starts(segments):
    """segments [B,S] -> [B,S] int32: the index of the first token of each token's run of equal
    segment ids (its document's start, when documents are contiguous)."""
    b, s = segments.shape
    idx = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
    new_run = jnp.concatenate(
        [jnp.ones((b, 1), bool), segments[:, 1:] != segments[:, :-1]], axis=1
    )  # [B,S]
    return jax.lax.cummax(jnp.where(new_run, idx, 0), axis=1)


# tokamax's implementations to try, best first, per backend: a NotImplementedError (an unsupported
# shape or GPU generation) moves on to the next; never silently to the XLA one on an accelerator.
_KERNELS = {"gpu": ("mosaic_gpu", "triton"), "tpu": ("mosaic_tpu",), "cpu": ("xla",)}


def _tokamax(q, k, v, k_segments, scale, q_index, impl):
    backend.tokamax()  # first: it stubs xprof where missing, which tokamax imports
    from tokamax._src.ops.attention import api, base

    b, t = q.shape[:2]
    q_idx = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t)) if q_index is None else q_index
    k_start = jnp.take_along_axis(document_starts(k_segments), q_idx, axis=1)  # [B,T]
    mask = base.Mask(k_start=k_start[:, None, :], is_causal=True)  # heads broadcast: [B,1,T]
    names = ("cudnn",) if impl == "cudnn" else _KERNELS.get(backend.platform(), ("xla",))
    q_sharding = _q_sharding()
    errors = []
    for name in names:
        if name not in api.IMPLEMENTATIONS:
            continue
        kernel = lambda q, k, v, name=name: api.IMPLEMENTATIONS[name](
            q,
            k,
            v,
            mask=mask,
            logits_scale=float(scale),
            q_indices=None if q_index is None else q_index[:, None, :],
            q_sharding=q_sharding,
        )
        try:
            return kernel(q, k, v)
        except NotImplementedError as e:
            errors.append(f"{name}: {e}")
    raise NotImplementedError(f"no tokamax attention kernel fits: {'; '.join(errors) or names}")


def _q_sharding():
    """Under a mesh (the trainer traces inside `mesh_context`), the queries' sharding: batch over
    the axes the logical rules give BATCH, heads over HEADS's. tokamax then runs the kernel per
    shard in a shard_map; a Pallas call left to GSPMD would be computed replicated. None outside a
    mesh, or when no axis splits batch or heads."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.manual_axes:  # inside a shard_map (context parallelism): local arrays
        return None
    rules = nn.get_logical_axis_rules()
    batch, _, heads = nn.logical_to_mesh_axes((sh.BATCH, None, sh.HEADS), rules)
    sizes = dict(mesh.shape)
    split = lambda axes: axes is not None and any(sizes.get(a, 1) > 1 for a in _names(axes))
    if not (split(batch) or split(heads)):
        return None
    return NamedSharding(mesh, PartitionSpec(batch, None, heads, None))


def _names(axes) -> tuple:
    return (axes,) if isinstance(axes, str) else tuple(axes)


# --- shape-only stand-in for memory analysis ------------------------------------------------------


def _opaque_per_shard(q, k, v):
    """The stand-in run per shard, as `_tokamax` runs the real kernel (tokamax's shard_map over
    `_q_sharding`). Left to GSPMD the custom call would be replicated: every device would hold the
    attention of the global batch and all heads, which no pod program does (bench_memory_plan
    measured [2, 2048, 8, 96] float32 copies on a data-2 layout). Inside a shard_map (context
    parallelism) or outside a mesh, `_q_sharding` is None and the arrays are already local."""
    sharding = _q_sharding()
    if sharding is None:
        return _opaque(q, k, v)
    spec = sharding.spec
    return jax.shard_map(_opaque, mesh=sharding.mesh, in_specs=(spec,) * 3, out_specs=spec)(q, k, v)


@jax.custom_vjp
def _opaque(q, k, v):
    return _opaque_fwd(q, k, v)[0]


def _opaque_fwd(q, k, v):
    b, t, h, _ = q.shape
    out_shape = jax.ShapeDtypeStruct((b, t, h, v.shape[-1]), q.dtype)
    lse_shape = jax.ShapeDtypeStruct((b, h, t), np.float32)  # the flash kernel's residual
    out, lse = (like(a, q) for a in shaped(out_shape, lse_shape))
    return out, (q, k, v, out, lse)


def _opaque_bwd(res, g):
    q, k, v, _, _ = res
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (q, k, v)]
    return tuple(like(g, a) for g, a in zip(shaped(*shapes), (q, k, v)))


_opaque.defvjp(_opaque_fwd, _opaque_bwd)
