"""DeepSeek-V3 mixture of experts: sigmoid router with aux-loss-free bias, group-limited top-k,
dropless expert dispatch, shared experts.

Letters: N tokens (B·T flattened), D model, E experts, F expert FFN width, G groups, A assignments
(N·top_k), R grouped rows (A plus < 8 alignment rows per expert), M blocks, C rows per full block,
s rows of a block of any size.

Routing (HF DeepseekV3TopkRouter): scores = sigmoid(x·W_r) in float32; the correction bias is added
only to *choose* experts; with n_group > 1, each group is ranked by the sum of its top-2 biased
scores and all but the best `topk_group` groups are masked with -inf; the top-k experts of what is
left are chosen; their weights are the *unbiased* scores, normalized over the k (norm_topk_prob),
times routed_scaling_factor. The shared experts are added unweighted.

Dispatch implementations (cfg.moe_impl; 'auto' = blocked on CPU, tokamax on GPU/TPU), all dropless
and equal up to float rounding:
  'blocked'  CPU-friendly: each assignment gets a row in a layout where every expert's group starts
             on an 8-row boundary (ranks from a cumulative count, no sort); full blocks of C rows
             and, for each group's remainder, one block of each smaller power of two tile the groups
             exactly; a loop over the experts that hold rows slices each one's weights once and
             runs the gate, up and down matmuls [s, D] x [D, F], [s, F] x [F, D] over its blocks
             (custom VJP, one backward loop). Plain matmuls run near peak on CPU, ragged_dot does
             not.
  'tokamax'  GPU/TPU: sort by expert, tokamax's grouped GEMM kernel over the groups
             (model/kernels/gmm.py: Mosaic GPU on Hopper, Pallas TPU; its XLA reference on CPU).
  'ragged'   the same with `jax.lax.ragged_dot`, whose GPU lowering is a dense fallback
             ([E,A,F] intermediates: out of memory at the mid config, bench/RESULTS.md).
  'opaque'   the same with a shape-only stand-in kernel: compiled memory analysis on CPU.
  'dense'    reference: every expert on every token, weighted by the (mostly zero) routing matrix.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from model import context, moe_a2a
from model import sharding as sh
from model.config import ModelConfig
from model.kernels import choice
from model.kernels.gmm import grouped_swiglu
from model.layers import MLP, cast, dense_init, logical_param


class Routing(NamedTuple):
    expert_ids: jnp.ndarray  # [N, k] int32
    weights: jnp.ndarray  # [N, k] float32, unbiased scores (normalized) * routed_scaling_factor
    scores: jnp.ndarray  # [N, E] float32 sigmoid scores


def choose_experts(scores, bias, top_k: int, n_group: int, topk_group: int):
    """Expert ids [N, k] chosen on biased scores with group-limited top-k."""
    biased = scores + bias  # [N, E]
    n, e = biased.shape
    if n_group > 1:
        grouped = biased.reshape(n, n_group, e // n_group)  # [N, G, E/G]
        group_scores = jax.lax.top_k(grouped, 2)[0].sum(-1)  # [N, G]
        _, keep = jax.lax.top_k(group_scores, topk_group)  # [N, topk_group]
        group_mask = jnp.zeros((n, n_group), bool).at[jnp.arange(n)[:, None], keep].set(True)
        expert_mask = jnp.repeat(group_mask, e // n_group, axis=1)  # [N, E]
        biased = jnp.where(expert_mask, biased, -jnp.inf)
    return jax.lax.top_k(biased, top_k)[1].astype(jnp.int32)


def route(x, kernel, bias, cfg: ModelConfig, forced_ids: jnp.ndarray | None = None) -> Routing:
    """x [N, D] -> Routing. forced_ids [N, k] replays given experts (router replay for RL)."""
    # HIGHEST: expert choice must not depend on the backend's default (possibly bf16-pass)
    # precision.
    logits = jnp.matmul(
        x.astype(jnp.float32), kernel.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST
    )  # [N,E]
    scores = jax.nn.sigmoid(logits)
    if forced_ids is None:
        ids = choose_experts(
            scores,
            jax.lax.stop_gradient(bias),
            cfg.num_experts_per_tok,
            cfg.n_group,
            cfg.topk_group,
        )
    else:
        ids = forced_ids.astype(jnp.int32)
    weights = jnp.take_along_axis(scores, ids, axis=-1)  # [N, k]
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
    return Routing(ids, weights * cfg.routed_scaling_factor, scores)


def zero_invalid(r: Routing, valid) -> Routing:
    """Routing whose weights are 0 on tokens where valid [N] is False."""
    return r._replace(weights=jnp.where(valid[:, None], r.weights, 0.0))


def _swiglu(h_gate, h_up):
    return nn.silu(h_gate) * h_up


# --- dispatch implementations: (x [N,D], routing, wi_gate/wi_up [E,D,F], wo [E,F,D]) -> [N,D] -----


def dispatch_dense(x, r: Routing, wi_gate, wi_up, wo):
    e = wi_gate.shape[0]
    combine = (
        jnp.zeros((x.shape[0], e), jnp.float32)
        .at[jnp.arange(x.shape[0])[:, None], r.expert_ids]
        .add(r.weights)
    )
    h = _swiglu(jnp.einsum("ND,EDF->NEF", x, wi_gate), jnp.einsum("ND,EDF->NEF", x, wi_up))
    y = jnp.einsum("NEF,EFD->NED", h, wo)
    return jnp.einsum("NED,NE->ND", y.astype(jnp.float32), combine).astype(x.dtype)


def dispatch_grouped(x, r: Routing, wi_gate, wi_up, wo, gmm_impl: str, valid=None):
    """Assignments sorted by expert, then grouped matmuls (GPU/TPU kernels; 'ragged' on any
    backend). valid [N] bool (None = all): an invalid token's assignments sort after every group
    (id E) and get no expert, as in dispatch_blocked. Buffers are [A,D] and [A,F] (A = N·k): no
    [tokens x experts x width] intermediate, whatever the kernel does inside."""
    n, k = r.expert_ids.shape
    n_experts = wi_gate.shape[0]
    ids = r.expert_ids if valid is None else jnp.where(valid[:, None], r.expert_ids, n_experts)
    flat = ids.reshape(-1)  # [A]
    order = jnp.argsort(flat, stable=True)  # [A]
    group_sizes = jnp.zeros((n_experts,), jnp.int32).at[flat].add(1, mode="drop")  # [E]
    xs = x[order // k]  # [A,D]: assignment a is token a // k
    y_sorted = grouped_swiglu(xs, group_sizes, wi_gate, wi_up, wo, impl=gmm_impl)  # [A,D]
    y = jnp.zeros_like(y_sorted).at[order].set(y_sorted, unique_indices=True).reshape(n, k, -1)
    return jnp.einsum("NKD,NK->ND", y.astype(jnp.float32), r.weights).astype(x.dtype)


def block_rows(n_assignments: int, n_experts: int, configured: int) -> int:
    """Rows per full block C: configured, else the average group rounded down to a power of two
    in [8, 512]. Larger blocks mean fewer loop trips and bigger matmuls; a group's remainder below
    C runs in smaller blocks (block_sizes), so a large C costs no padding."""
    if configured:
        return configured
    avg = max(n_assignments // n_experts, 1)
    c = 8
    while c * 2 <= min(avg, 512):
        c *= 2
    return c


def block_sizes(c: int) -> tuple[int, ...]:
    """The full block C, then every power of two below it down to the row alignment
    a = min(8, the largest power of two dividing C): a group of g rows, rounded up to a multiple of
    a, is q full blocks plus at most one block of each smaller size (the binary digits of the
    remainder, which is < C and a multiple of a). So a group wastes < a rows, where padding every
    group to a multiple of C wasted C/2 on average."""
    align, sizes, s = min(8, c & -c), [c], 1
    while s * 2 < c:
        s *= 2  # the largest power of two below C
    while align <= s < c:
        sizes.append(s)
        s //= 2
    return tuple(sizes)


def _assignment_rows(expert_ids, n_experts: int, align: int):
    """Row of each assignment (in token order) in the expert-grouped layout where each expert's
    group starts on an `align`-row boundary, and the groups' aligned sizes [E] and offsets [E].

    The rank of an assignment within its expert is a cumulative count over a one-hot [A, E] (no
    sort) while that is small; large A·E (many experts and tokens) falls back to a stable
    argsort."""
    flat = expert_ids.reshape(-1)  # [A]; id E = no expert (a skipped row)
    a = flat.shape[0]
    group_sizes = jnp.zeros((n_experts,), jnp.int32).at[flat].add(1, mode="drop")  # [E]
    if a * n_experts <= 1 << 22:
        onehot = (flat[:, None] == jnp.arange(n_experts)).astype(jnp.int32)  # [A,E]
        rank = jnp.sum((jnp.cumsum(onehot, axis=0) - 1) * onehot, axis=1)  # [A]
    else:
        order = jnp.argsort(flat, stable=True)  # [A]
        group_start = jnp.cumsum(group_sizes) - group_sizes
        start = jnp.take(group_start, flat[order], mode="clip")
        rank = jnp.zeros((a,), jnp.int32).at[order].set(jnp.arange(a) - start)
    aligned = -(-group_sizes // align) * align  # [E]
    offset = jnp.cumsum(aligned) - aligned  # [E]
    return jnp.take(offset, flat, mode="clip") + rank, aligned, offset


class Groups(NamedTuple):
    """The experts that hold rows, in order (only the first `used` entries are real; the arrays
    have the static length E), and where their aligned groups lie in the grouped rows."""

    expert: jnp.ndarray  # [E] int32
    offset: jnp.ndarray  # [E] int32, first row of the expert's group
    full: jnp.ndarray  # [E] int32, full blocks (aligned // C)
    rem: jnp.ndarray  # [E] int32, rows after them (< C, a multiple of the alignment)
    used: jnp.ndarray  # [] int32


def groups_of(aligned, offset, c: int) -> Groups:
    """Groups from the aligned group sizes [E] and offsets [E], for full blocks of C rows."""
    e = aligned.shape[0]
    has = aligned > 0  # [E]
    slot = jnp.where(has, jnp.cumsum(has) - 1, e)  # [E]; e = left out by the scatter
    compact = lambda v: jnp.zeros((e,), jnp.int32).at[slot].set(v, mode="drop")
    return Groups(
        compact(jnp.arange(e)),
        compact(offset),
        compact(aligned // c),
        compact(aligned % c),
        jnp.sum(has).astype(jnp.int32),
    )


def for_each_block(sizes: tuple[int, ...], n_rows: int, offset, full, rem, fn, carry):
    """carry = fn(carry, start, size) for each block tiling one group's aligned rows
    [offset, offset + full·C + rem): `full` blocks of C = sizes[0] rows, then one block of each
    smaller size s whose bit is set in rem, at offset + full·C + (rem // 2s)·2s. Sizes above
    n_rows are left out statically: no group is that long."""
    c = sizes[0]
    if c <= n_rows:
        carry = jax.lax.fori_loop(0, full, lambda j, cr: fn(cr, offset + j * c, c), carry)
    for s in sizes[1:]:
        if s > n_rows:
            continue
        start = offset + full * c + (rem // (2 * s)) * (2 * s)
        carry = jax.lax.cond(
            (rem // s) % 2 == 1, lambda cr, start=start, s=s: fn(cr, start, s), lambda cr: cr, carry
        )
    return carry


def _weight(w, e):
    """Expert e's matrix of a stacked [E, ...] weight, sliced in place."""
    return jax.lax.dynamic_index_in_dim(w, e, 0, keepdims=False)


def _rows(a, start, size):
    return jax.lax.dynamic_slice_in_dim(a, start, size, 0)


def _put_rows(a, v, start):
    return jax.lax.dynamic_update_slice_in_dim(a, v, start, 0)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def expert_blocks(sizes, xs, wi_gate, wi_up, wo, groups):
    """Each expert's FFN over its grouped rows: xs [R,D], wi_gate, wi_up [E,D,F], wo [E,F,D],
    groups (groups_of; block sizes `sizes`, static) -> y [R,D] (alignment rows stay zero).

    A loop over the experts that hold rows, each expert's weights sliced once, and inside it the
    blocks of its group (for_each_block). A gather of [M,D,F] weight copies is what makes a batched
    einsum slow on CPU; slicing per expert rather than per block saves the copies between blocks.
    Gate and up stay two matmuls: fusing them needs a concatenation of the weights every step
    ([E,D,2F], or [D,2F] per expert) and its split in the backward, which cost as much as or more
    than the wider matmul saves (bench/RESULTS_LOG.md). Backward is one loop too
    (_expert_blocks_bwd)."""
    return _expert_blocks_fwd(sizes, xs, wi_gate, wi_up, wo, groups)[0]


def _expert_blocks_fwd(sizes, xs, wi_gate, wi_up, wo, groups):
    r, f = xs.shape[0], wi_gate.shape[2]

    def expert(i, carry):
        e = groups.expert[i]
        wg, wu, w_out = _weight(wi_gate, e), _weight(wi_up, e), _weight(wo, e)

        def block(carry, at, size):
            y, g_all, u_all = carry
            x = _rows(xs, at, size)  # [s,D]
            g, u = x @ wg, x @ wu  # [s,F]
            out = _swiglu(g, u) @ w_out  # [s,D]
            return _put_rows(y, out, at), _put_rows(g_all, g, at), _put_rows(u_all, u, at)

        g_i = (groups.offset[i], groups.full[i], groups.rem[i])
        return for_each_block(sizes, r, *g_i, block, carry)

    init = (jnp.zeros_like(xs), jnp.zeros((r, f), xs.dtype), jnp.zeros((r, f), xs.dtype))
    y, g_all, u_all = jax.lax.fori_loop(0, groups.used, expert, init)
    return y, (xs, wi_gate, wi_up, wo, groups, g_all, u_all)


def _expert_blocks_bwd(sizes, res, gy):
    """Per block: dWo += hᵀ·dy, dh = dy·Wo[e]ᵀ, SwiGLU backward, dWg += xᵀ·dg, dWu += xᵀ·du,
    dx = dg·Wg[e]ᵀ + du·Wu[e]ᵀ; an expert's weight grads accumulate in float32 over its blocks
    and are written once."""
    xs, wi_gate, wi_up, wo, groups, g_all, u_all = res
    r = xs.shape[0]
    nt = (((1,), (1,)), ((), ()))  # contract the last dims: a @ bᵀ without a transpose
    tn = (((0,), (0,)), ((), ()))  # contract the first dims: aᵀ @ b
    f32_dot = partial(jax.lax.dot_general, dimension_numbers=tn, preferred_element_type=jnp.float32)

    def expert(i, carry):
        dx, dwg, dwu, dwo = carry
        e = groups.expert[i]
        wg, wu, w_out = _weight(wi_gate, e), _weight(wi_up, e), _weight(wo, e)

        def block(carry, at, size):
            dx, dwg_e, dwu_e, dwo_e = carry
            x, dy, g, u = (_rows(a, at, size) for a in (xs, gy, g_all, u_all))
            sig = jax.nn.sigmoid(g)
            silu = g * sig
            h = silu * u  # [s,F]
            dh = jax.lax.dot_general(dy, w_out, nt)  # [s,F]
            dg = dh * u * sig * (1 + g * (1 - sig))  # [s,F]
            du = dh * silu  # [s,F]
            dx_i = jax.lax.dot_general(dg, wg, nt) + jax.lax.dot_general(du, wu, nt)  # [s,D]
            return (
                _put_rows(dx, dx_i, at),
                dwg_e + f32_dot(x, dg),
                dwu_e + f32_dot(x, du),
                dwo_e + f32_dot(h, dy),
            )

        zeros = (jnp.zeros(wg.shape, jnp.float32), jnp.zeros(wu.shape, jnp.float32))
        zeros += (jnp.zeros(w_out.shape, jnp.float32),)
        g_i = (groups.offset[i], groups.full[i], groups.rem[i])
        dx, dwg_e, dwu_e, dwo_e = for_each_block(sizes, r, *g_i, block, (dx, *zeros))
        put = lambda acc, v: jax.lax.dynamic_update_index_in_dim(acc, v, e, 0)
        return dx, put(dwg, dwg_e), put(dwu, dwu_e), put(dwo, dwo_e)

    f32_zeros = lambda w: jnp.zeros(w.shape, jnp.float32)
    init = (jnp.zeros_like(xs), f32_zeros(wi_gate), f32_zeros(wi_up), f32_zeros(wo))
    dx, dwg, dwu, dwo = jax.lax.fori_loop(0, groups.used, expert, init)
    cast_to = lambda g, w: g.astype(w.dtype)
    no_grad = jax.tree.map(lambda _: None, groups)
    return dx, cast_to(dwg, wi_gate), cast_to(dwu, wi_up), cast_to(dwo, wo), no_grad


expert_blocks.defvjp(_expert_blocks_fwd, _expert_blocks_bwd)


def dispatch_blocked(x, r: Routing, wi_gate, wi_up, wo, block: int = 0, valid=None):
    """valid [N] bool (None = all): a token that is False gets no expert at all, its assignments
    are left out of the groups (an expert no valid token chose is not visited, its weights not
    read) and its routed output is 0. Decoding uses this for rows whose output nobody reads:
    padding rows, and the MTP catch-up's rows that only write the cache
    (model/engine/speculation.py)."""
    n, k = r.expert_ids.shape
    n_experts, d = wi_gate.shape[0], x.shape[1]
    a = n * k
    sizes = block_sizes(block_rows(a, n_experts, block))
    align = sizes[-1]
    n_rows = a + n_experts * (align - 1)  # static bound: each group wastes < align rows
    ids = r.expert_ids if valid is None else jnp.where(valid[:, None], r.expert_ids, n_experts)
    row, aligned, offset = _assignment_rows(ids, n_experts, align)  # [A], [E], [E]
    if valid is not None:  # a skipped assignment's row lies past the layout: distinct, dropped
        row = jnp.where(ids.reshape(-1) < n_experts, row, n_rows + jnp.arange(a))
    # [A,D]: assignment a is token a // k
    x_rep = jnp.broadcast_to(x[:, None], (n, k, d)).reshape(a, d)
    # Scatter into the grouped layout (unique rows; its backward is a gather).
    xs = jnp.zeros((n_rows, d), x.dtype).at[row].set(x_rep, unique_indices=True, mode="drop")
    y = expert_blocks(sizes, xs, wi_gate, wi_up, wo, groups_of(aligned, offset, sizes[0]))
    # [N,k,D], assignments back in token order (no un-sort); a skipped one reads 0
    y = y.at[row].get(mode="fill", fill_value=0).reshape(n, k, d)
    return jnp.einsum("NKD,NK->ND", y.astype(jnp.float32), r.weights).astype(x.dtype)


def dispatch_for(impl: str, block: int = 0):
    """A resolved moe_impl name (model/kernels/choice.py) -> its dispatch function
    (x [N,D], routing, wi_gate, wi_up [E,D,F], wo [E,F,D], valid=) -> [N,D]."""
    if impl == "blocked":
        return lambda *a, valid=None: dispatch_blocked(*a, block=block, valid=valid)
    if impl == "dense":
        return lambda *a, valid=None: dispatch_dense(*a)
    return lambda *a, valid=None: dispatch_grouped(*a, impl, valid=valid)  # tokamax|ragged|opaque


def select_dispatch(cfg: ModelConfig):
    """cfg.moe_impl ('auto' resolved by model/kernels/choice.py) -> its dispatch function."""
    return dispatch_for(choice.moe_impl(cfg.moe_impl), cfg.moe_block_size)


def sequence_balance_loss(scores, expert_ids, segment_ids, top_k: int):
    """DeepSeek-V3 sequence-wise balance loss (before alpha), averaged over DOCUMENTS: a packed row
    holds several sequences, and each is balanced on its own, as if trained unpacked.

    scores [B,T,E], expert_ids [B,T,k], segment_ids [B,T] (0 = padding, excluded). For a document
    of T_d tokens: f_i = E/(k·T_d) · #tokens choosing i; P_i = mean over its tokens of the scores
    normalized over experts; loss_d = Σ_i f_i P_i (1.0 when perfectly balanced).
    """
    b, t, e = scores.shape
    valid = (segment_ids > 0).astype(jnp.float32).reshape(-1)  # [B*T]
    # Document index = row·(T+1) + segment id: unique per (row, document); ids are < T+1 when
    # packed.
    doc = (jnp.arange(b)[:, None] * (t + 1) + jnp.clip(segment_ids, 0, t)).reshape(-1)  # [B*T]
    n_docs = b * (t + 1)
    chosen = jax.nn.one_hot(expert_ids, e, dtype=jnp.float32).sum(-2).reshape(-1, e)  # [B*T,E]
    p_tok = (scores / scores.sum(-1, keepdims=True)).reshape(-1, e)  # [B*T,E]
    seg_sum = lambda v: jax.ops.segment_sum(v * valid[:, None], doc, n_docs)
    n_tok = jax.ops.segment_sum(valid, doc, n_docs)  # [docs]
    denom = jnp.maximum(n_tok, 1.0)[:, None]
    f = seg_sum(chosen) * e / (top_k * denom)  # [docs,E]
    p = seg_sum(p_tok) / denom  # [docs,E]
    present = (n_tok > 0).astype(jnp.float32)
    return jnp.sum(jnp.sum(f * p, -1) * present) / jnp.maximum(present.sum(), 1.0)


class MoEOutput(NamedTuple):
    y: jnp.ndarray  # [B,T,D]
    expert_ids: jnp.ndarray  # [B,T,k]
    expert_counts: jnp.ndarray  # [E] over non-padding tokens
    balance_loss: jnp.ndarray  # scalar (times cfg.balance_loss_coef)
    dropped: jnp.ndarray  # int32 scalar: non-padding assignments dropped by the capacity limit
    # (moe_comm='alltoall' with moe_capacity_factor > 0; 0 on the dropless paths)


class MoE(nn.Module):
    cfg: ModelConfig

    @nn.compact
    def __call__(self, x, segment_ids, forced_ids=None) -> MoEOutput:
        c = self.cfg
        b, t, d = x.shape
        e, f = c.n_routed_experts, c.moe_intermediate_size
        init = dense_init(c.initializer_range)
        kernel = logical_param(self, "router", (d, e), (sh.EMBED, None), init)
        # Aux-loss-free correction bias: a param only so it travels with the weights (HF, samplers);
        # stop_gradient + the optimizer's trainable mask keep it out of training. The loop updates
        # it.
        bias = logical_param(self, "router_bias", (e,), (None,), nn.initializers.zeros)
        wi_gate = logical_param(self, "wi_gate", (e, d, f), (sh.EXPERT, sh.EMBED, sh.MLP), init)
        wi_up = logical_param(self, "wi_up", (e, d, f), (sh.EXPERT, sh.EMBED, sh.MLP), init)
        wo = logical_param(self, "wo", (e, f, d), (sh.EXPERT, sh.MLP, sh.EMBED), init)

        # [N, D]: token rows; with context parallelism in an order that keeps each device's own
        # tokens contiguous (model/context.py token_rows), so dispatch rows stay where they are.
        flat = context.token_rows(x)
        forced = None if forced_ids is None else context.token_rows(forced_ids)
        routing = route(flat, kernel, jax.lax.stop_gradient(bias), c, forced)
        x_c = cast(flat, c.dtype)
        w_c = (cast(wi_gate, c.dtype), cast(wi_up, c.dtype), cast(wo, c.dtype))
        valid = context.token_rows(segment_ids > 0)  # [N]
        mesh = jax.sharding.get_abstract_mesh()
        kernel_choice = choice.moe(c, 1 if mesh.empty else mesh.size)  # the one choice, by backend
        lay = moe_a2a.current_layout() if kernel_choice.comm == "alltoall" else None
        dropped = jnp.int32(0)
        # Padding rows (segment 0) get no expert: their routed output is 0 on every path, and
        # the blocked dispatch skips them (an expert only padding chose is never read).
        gated = zero_invalid(routing, valid)
        if lay is not None:  # expert-parallel shard_map path; the GSPMD one below is the reference
            routed, dropped = moe_a2a.dispatch_alltoall(
                x_c, gated.expert_ids, gated.weights, *w_c, lay,
                capacity_factor=c.moe_capacity_factor, impl=kernel_choice.impl, valid=valid,
            )  # fmt: skip
        else:
            routed = dispatch_for(kernel_choice.impl, kernel_choice.block)(
                x_c, gated, *w_c, valid=valid
            )
        y = context.token_grid(routed, b, t)  # [B,T,D]
        if c.n_shared_experts:
            y = y + MLP(d, f * c.n_shared_experts, c.initializer_range, c.dtype, name="shared")(x)

        counts = (
            jnp.zeros((e,), jnp.int32).at[routing.expert_ids].add(valid[:, None].astype(jnp.int32))
        )
        ids = context.token_grid(routing.expert_ids, b, t)  # [B,T,k]
        balance = jnp.float32(0.0)
        if c.balance_loss_coef:
            balance = c.balance_loss_coef * sequence_balance_loss(
                context.token_grid(routing.scores, b, t), ids, segment_ids, c.num_experts_per_tok
            )
        return MoEOutput(y.astype(x.dtype), ids, counts, balance, dropped)
