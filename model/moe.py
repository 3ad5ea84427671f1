"""DeepSeek-V3 mixture of experts: sigmoid router with aux-loss-free bias, group-limited top-k,
dropless expert dispatch, shared experts.

Letters: N tokens (B·T flattened), D model, E experts, F expert FFN width, G groups, A assignments
(N·top_k), P padded rows, M blocks, C rows per block.

Routing (HF DeepseekV3TopkRouter): scores = sigmoid(x·W_r) in float32; the correction bias is added
only to *choose* experts; with n_group > 1, each group is ranked by the sum of its top-2 biased
scores and all but the best `topk_group` groups are masked with -inf; the top-k experts of what is
left are chosen; their weights are the *unbiased* scores, normalized over the k (norm_topk_prob),
times routed_scaling_factor. The shared experts are added unweighted.

Dispatch implementations (cfg.moe_impl), all dropless and equal up to float rounding:
  'blocked'  CPU-friendly: sort assignments by expert, pad each expert's group to a multiple of C
             rows, and loop over blocks [C, D] x [D, F] with each expert's weights sliced in place
             (custom VJP; unused padding blocks skipped). Plain matmuls run near peak on CPU,
             ragged_dot does not.
  'ragged'   GPU/TPU: sort by expert, `jax.lax.ragged_dot` over the groups.
  'dense'    reference: every expert on every token, weighted by the (mostly zero) routing matrix.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from model import sharding as sh
from model.config import ModelConfig
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
    # HIGHEST: expert choice must not depend on the backend's default (possibly bf16-pass) precision.
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


def _swiglu(h_gate, h_up):
    return nn.silu(h_gate) * h_up


# --- dispatch implementations: (x [N,D], routing, wi_gate/wi_up [E,D,F], wo [E,F,D]) -> [N,D] -----------


def dispatch_dense(x, r: Routing, wi_gate, wi_up, wo, dtype: str):
    e = wi_gate.shape[0]
    combine = (
        jnp.zeros((x.shape[0], e), jnp.float32)
        .at[jnp.arange(x.shape[0])[:, None], r.expert_ids]
        .add(r.weights)
    )
    h = _swiglu(jnp.einsum("ND,EDF->NEF", x, wi_gate), jnp.einsum("ND,EDF->NEF", x, wi_up))
    y = jnp.einsum("NEF,EFD->NED", h, wo)
    return jnp.einsum("NED,NE->ND", y.astype(jnp.float32), combine).astype(x.dtype)


def _sort_assignments(expert_ids, n_experts: int):
    """Sorted order of the A = N·k assignments by expert, their token ids and group sizes [E]."""
    flat = expert_ids.reshape(-1)  # [A]
    order = jnp.argsort(flat, stable=True)  # [A]
    group_sizes = jnp.zeros((n_experts,), jnp.int32).at[flat].add(1)  # [E]
    return order, order // expert_ids.shape[1], flat[order], group_sizes


def _combine(y_sorted, order, r: Routing):
    """Un-sort [A, D] expert outputs to [N, k, D] and sum them with the routing weights."""
    n, k = r.expert_ids.shape
    y = jnp.zeros_like(y_sorted).at[order].set(y_sorted).reshape(n, k, -1)  # [N, k, D]
    return jnp.einsum("NKD,NK->ND", y.astype(jnp.float32), r.weights)


def dispatch_ragged(x, r: Routing, wi_gate, wi_up, wo, dtype: str):
    order, token_of, _, group_sizes = _sort_assignments(r.expert_ids, wi_gate.shape[0])
    xs = x[token_of]  # [A, D]
    h = _swiglu(
        jax.lax.ragged_dot(xs, wi_gate, group_sizes), jax.lax.ragged_dot(xs, wi_up, group_sizes)
    )
    y = jax.lax.ragged_dot(h, wo, group_sizes)  # [A, D]
    return _combine(y, order, r).astype(x.dtype)


def block_rows(n_assignments: int, n_experts: int, configured: int) -> int:
    """Rows per block C: configured, else ~1/4 of the average group, a power of two in [8, 256]."""
    if configured:
        return configured
    avg = max(n_assignments // n_experts, 1)
    c = 8
    while c * 2 <= min(avg // 4, 256):
        c *= 2
    return c


def _block_matmul(x, w, expert, used):
    """x [C,D] @ w[expert] [D,F]; the expert's matrix is sliced in place, and an unused
    (all-padding) block costs nothing."""
    return jax.lax.cond(
        used,
        lambda: x @ jax.lax.dynamic_index_in_dim(w, expert, 0, keepdims=False),
        lambda: jnp.zeros((x.shape[0], w.shape[2]), x.dtype),
    )


@jax.custom_vjp
def grouped_matmul(xb, w, block_expert, block_used):
    """Blocks of rows times their expert's matrix: xb [M,C,D], w [E,D,F], block_expert [M] sorted,
    block_used [M] -> [M,C,F]. A loop over blocks slices each expert's weights in place (a gather
    of [M,D,F] weight copies is what makes a batched einsum slow here), and skips unused blocks,
    so the static worst-case block count costs nothing when routing is balanced."""
    return jax.lax.map(lambda a: _block_matmul(a[0], w, a[1], a[2]), (xb, block_expert, block_used))


def _grouped_matmul_fwd(xb, w, block_expert, block_used):
    return grouped_matmul(xb, w, block_expert, block_used), (xb, w, block_expert, block_used)


def _grouped_matmul_bwd(res, g):
    xb, w, block_expert, block_used = res
    w_t = jnp.swapaxes(w, 1, 2)  # one transpose, so every block's dx is a plain matmul
    dx = jax.lax.map(lambda a: _block_matmul(a[0], w_t, a[1], a[2]), (g, block_expert, block_used))

    def add_weight_tile(dw, a):  # dw[e] += xb_m^T g_m, in place in the loop carry (float32)
        x, g_m, e, used = a
        tile = jax.lax.dot_general(
            x, g_m, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32
        )
        current = jax.lax.dynamic_index_in_dim(dw, e, 0, keepdims=False)
        return jax.lax.cond(
            used, lambda: jax.lax.dynamic_update_index_in_dim(dw, current + tile, e, 0), lambda: dw
        ), None

    dw, _ = jax.lax.scan(
        add_weight_tile, jnp.zeros(w.shape, jnp.float32), (xb, g, block_expert, block_used)
    )
    return dx, dw.astype(w.dtype), None, None


grouped_matmul.defvjp(_grouped_matmul_fwd, _grouped_matmul_bwd)


def dispatch_blocked(x, r: Routing, wi_gate, wi_up, wo, dtype: str, block: int = 0):
    n_experts = wi_gate.shape[0]
    order, token_of, sorted_expert, group_sizes = _sort_assignments(r.expert_ids, n_experts)
    a = order.shape[0]
    c = block_rows(a, n_experts, block)
    # Static bound on blocks: every expert wastes at most c-1 rows; blocks past the used ones are skipped.
    n_blocks = -(-(a + n_experts * (c - 1)) // c)
    padded_sizes = -(-group_sizes // c) * c  # [E]
    padded_end = jnp.cumsum(padded_sizes)  # [E]
    padded_start = padded_end - padded_sizes
    group_start = jnp.cumsum(group_sizes) - group_sizes  # [E]
    row = (
        padded_start[sorted_expert] + jnp.arange(a) - group_start[sorted_expert]
    )  # [A] destination row
    # Source token of each padded row (N = the appended zero row for padding).
    row_token = jnp.full((n_blocks * c,), x.shape[0], jnp.int32).at[row].set(token_of)
    xb = jnp.concatenate([x, jnp.zeros((1, x.shape[1]), x.dtype)])[row_token].reshape(
        n_blocks, c, -1
    )  # [M,C,D]
    block_start = jnp.arange(n_blocks) * c
    block_expert = jnp.minimum(
        jnp.searchsorted(padded_end, block_start, side="right"), n_experts - 1
    )
    used = block_start < padded_end[-1]
    h = _swiglu(
        grouped_matmul(xb, wi_gate, block_expert, used),
        grouped_matmul(xb, wi_up, block_expert, used),
    )
    y = grouped_matmul(h, wo, block_expert, used).reshape(n_blocks * c, -1)  # [P, D]
    return _combine(y[row], order, r).astype(x.dtype)


DISPATCH = {"dense": dispatch_dense, "ragged": dispatch_ragged, "blocked": dispatch_blocked}


def sequence_balance_loss(scores, expert_ids, valid, top_k: int):
    """DeepSeek-V3 sequence-wise balance loss (before alpha), averaged over rows.

    scores [B,T,E], expert_ids [B,T,k], valid [B,T]. f_i = E/(k·T) · #tokens choosing i;
    P_i = mean_t of scores normalized over experts; loss = Σ_i f_i P_i (1.0 when perfectly balanced).
    """
    e = scores.shape[-1]
    valid = valid.astype(jnp.float32)
    n_valid = jnp.maximum(valid.sum(-1), 1.0)  # [B]
    chosen = jax.nn.one_hot(expert_ids, e, dtype=jnp.float32).sum(-2) * valid[..., None]  # [B,T,E]
    f = chosen.sum(1) * e / (top_k * n_valid[:, None])  # [B,E]
    p = ((scores / scores.sum(-1, keepdims=True)) * valid[..., None]).sum(1) / n_valid[:, None]
    return jnp.mean(jnp.sum(f * p, -1))


class MoEOutput(NamedTuple):
    y: jnp.ndarray  # [B,T,D]
    expert_ids: jnp.ndarray  # [B,T,k]
    expert_counts: jnp.ndarray  # [E] over non-padding tokens
    balance_loss: jnp.ndarray  # scalar (times cfg.balance_loss_coef)


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
        # stop_gradient + the optimizer's trainable mask keep it out of training. The loop updates it.
        bias = logical_param(self, "router_bias", (e,), (None,), nn.initializers.zeros)
        wi_gate = logical_param(self, "wi_gate", (e, d, f), (sh.EXPERT, sh.EMBED, sh.MLP), init)
        wi_up = logical_param(self, "wi_up", (e, d, f), (sh.EXPERT, sh.EMBED, sh.MLP), init)
        wo = logical_param(self, "wo", (e, f, d), (sh.EXPERT, sh.MLP, sh.EMBED), init)

        flat = x.reshape(b * t, d)  # [N, D]
        forced = None if forced_ids is None else forced_ids.reshape(b * t, -1)
        routing = route(flat, kernel, jax.lax.stop_gradient(bias), c, forced)
        dispatch = DISPATCH[c.moe_impl]
        args = (
            cast(flat, c.dtype),
            routing,
            cast(wi_gate, c.dtype),
            cast(wi_up, c.dtype),
            cast(wo, c.dtype),
            c.dtype,
        )
        routed = (
            dispatch_blocked(*args, block=c.moe_block_size)
            if c.moe_impl == "blocked"
            else dispatch(*args)
        )
        y = routed.reshape(b, t, d)
        if c.n_shared_experts:
            y = y + MLP(d, f * c.n_shared_experts, c.initializer_range, c.dtype, name="shared")(x)

        valid = (segment_ids > 0).reshape(-1)
        counts = (
            jnp.zeros((e,), jnp.int32).at[routing.expert_ids].add(valid[:, None].astype(jnp.int32))
        )
        ids = routing.expert_ids.reshape(b, t, -1)
        balance = jnp.float32(0.0)
        if c.balance_loss_coef:
            balance = c.balance_loss_coef * sequence_balance_loss(
                routing.scores.reshape(b, t, e), ids, segment_ids > 0, c.num_experts_per_tok
            )
        return MoEOutput(y.astype(x.dtype), ids, counts, balance)
