"""Param utilities that allocate nothing unless asked: init, logical specs, counts, FLOPs, the
non-trainable router bias and its aux-loss-free update."""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from model.config import ModelConfig
from model.transformer import Transformer

ROUTER_BIAS = "router_bias"


def _dummy_tokens(batch: int = 1, seq: int = 1):
    return jnp.zeros((batch, seq), jnp.int32)


# Fields that change how the model computes, not what its params are (config.py's runtime knobs
# and the balance-loss weight).
_COMPUTE_ONLY_FIELDS = (
    "dtype",
    "remat",
    "moe_impl",
    "attention_impl",
    "moe_block_size",
    "moe_comm",
    "moe_capacity_factor",
    "balance_loss_coef",
)


# What init computes with: the CPU reference kernels on every backend. Init traces the model on
# one token in float32; 'auto' would resolve to tokamax's kernels on GPU/TPU, whose Mosaic flash
# attention refuses float32 ("Unsupported precision") and whose grouped GEMM refuses it too
# (model/kernels/gmm.py). The blocked kernels on one token cost nothing, and the params are the
# same.
_INIT_KERNELS = {"moe_impl": "blocked", "attention_impl": "blocked", "moe_comm": "gspmd"}


def param_config(cfg: ModelConfig) -> ModelConfig:
    """cfg with its compute-only fields at their defaults and the reference kernels: what init
    sees. Configs that differ only in those get the same params and share one compiled init (a
    static config is a jit cache key, and init's per-param random draws take seconds to compile
    even for the tiny preset)."""
    defaults = {
        f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in _COMPUTE_ONLY_FIELDS
    }
    return cfg.replace(**{**defaults, **_INIT_KERNELS})


def abstract_variables(cfg: ModelConfig):
    """Boxed (logically partitioned) ShapeDtypeStructs of init's variables; nothing is allocated.
    A fresh tree each call over shared immutable leaves: tracing init is the cost (~0.3 s for
    tiny on an idle core, several seconds on a loaded one), and building one trainer asks for
    the shapes and the logical specs three times (optimizer roles, shardings)."""
    return jax.tree.map(lambda x: x, _abstract_variables(param_config(cfg)), is_leaf=_is_box)


def _is_box(x) -> bool:
    return isinstance(x, nn.Partitioned)


@functools.lru_cache(maxsize=16)
def _abstract_variables(cfg: ModelConfig):
    module = Transformer(cfg)
    return jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), _dummy_tokens()))


def param_shapes(cfg: ModelConfig):
    return nn.unbox(abstract_variables(cfg)["params"])


def param_logical_specs(cfg: ModelConfig):
    """Pytree of PartitionSpec over logical axis names, matching the params tree."""
    return nn.get_partition_spec(abstract_variables(cfg))["params"]


def init_params_unjitted(cfg: ModelConfig, rng):
    """Unboxed params, for callers that jit init together with more (e.g. optimizer state)."""
    return nn.unbox(Transformer(param_config(cfg)).init(rng, _dummy_tokens())["params"])


def init_params(cfg: ModelConfig, rng, out_shardings=None):
    """Unboxed float32 params, created by one jitted init: with `out_shardings` (e.g. from
    param_logical_specs mapped onto a mesh) every device materializes only its own shards."""
    init = jax.jit(init_params_unjitted, static_argnums=0, out_shardings=out_shardings)
    return init(param_config(cfg), rng)


def _path_names(path) -> list[str]:
    return [str(getattr(k, "key", getattr(k, "name", k))) for k in path]


def trainable_mask(params, only: str = "all"):
    """Pytree of bools: False for the router correction bias (updated by the loop, not the
    optimizer); with only='mtp', False for everything outside the MTP modules too (the stage that
    trains draft heads on a frozen model: the head and embeddings they share stay frozen)."""

    def trainable(path, _) -> bool:
        names = _path_names(path)
        if names[-1] == ROUTER_BIAS:
            return False
        return only == "all" or names[0].startswith("mtp_")

    if only not in ("all", "mtp"):
        raise ValueError(f"trainable={only!r}: expected 'all' or 'mtp'")
    return jax.tree_util.tree_map_with_path(trainable, params)


def _size(x) -> int:
    n = 1
    for d in x.shape:
        n *= d
    return n


@functools.cache
def count_params(cfg: ModelConfig) -> tuple[int, int]:
    """(total, active) parameter counts; embeddings and head included, MTP modules excluded.

    Active = total minus the routed experts a token does not use: (E - k) / E of each MoE layer's
    routed-expert weights.
    """
    shapes = param_shapes(cfg)
    total = routed = 0
    for path, leaf in jax.tree_util.tree_leaves_with_path(shapes):
        names = _path_names(path)
        if names[0].startswith("mtp_"):
            continue
        total += _size(leaf)
        if names[-1] in ("wi_gate", "wi_up", "wo") and "moe" in names:
            routed += _size(leaf)
    e, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    inactive = routed * (e - k) // e if e else 0
    return total, total - inactive


def _active_matmul_params_per_layer(cfg: ModelConfig, moe: bool) -> int:
    d, h = cfg.hidden_size, cfg.num_attention_heads
    q = (
        d * h * cfg.qk_head_dim
        if cfg.q_lora_rank is None
        else cfg.q_lora_rank * (d + h * cfg.qk_head_dim)
    )
    attn = (
        q
        + d * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
        + cfg.kv_lora_rank * h * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        + h * cfg.v_head_dim * d
    )
    if not moe:
        return attn + 3 * d * cfg.intermediate_size
    experts = (cfg.num_experts_per_tok + cfg.n_shared_experts) * 3 * d * cfg.moe_intermediate_size
    return attn + experts + d * cfg.n_routed_experts  # + router


def flops_per_token(
    cfg: ModelConfig, seq_len: int, training: bool = True, trainable: str = "all"
) -> float:
    """Analytic matmul FLOPs per token: 2 per active weight (MLA, active + shared experts, router,
    head, MTP modules) plus causal attention (queries see (T+1)/2 keys on average:
    2·H·(qk_head_dim + v_head_dim) per key). Training = 3x forward (backward is twice forward);
    trainable='mtp' (the MTP stage) runs the trunk forward only and 3x the MTP modules."""
    trunk = cfg.num_dense_layers * _active_matmul_params_per_layer(cfg, False)
    trunk += cfg.num_moe_layers * _active_matmul_params_per_layer(cfg, True)
    trunk += cfg.hidden_size * cfg.vocab_size  # output head
    per_mtp = (
        _active_matmul_params_per_layer(cfg, cfg.mtp_is_moe)
        + 2 * cfg.hidden_size**2
        + cfg.hidden_size * cfg.vocab_size
    )
    # one layer's attention matmuls over the average causal context
    attn = 2 * cfg.num_attention_heads * (cfg.qk_head_dim + cfg.v_head_dim) * (seq_len + 1) / 2
    trunk_fwd = 2 * trunk + cfg.num_hidden_layers * attn
    mtp_fwd = cfg.num_mtp_modules * (2 * per_mtp + attn)
    if not training:
        return trunk_fwd + mtp_fwd
    if trainable == "mtp":
        return trunk_fwd + 3 * mtp_fwd
    return 3 * (trunk_fwd + mtp_fwd)


def update_router_bias(params, expert_counts, mtp_expert_counts=None, rate: float = 1e-3):
    """Aux-loss-free balancing (DeepSeek-V3): bias += rate · sign(mean load − load), per layer.

    expert_counts [n_moe_layers, E] must be GLOBAL (summed over every data shard) so all replicas
    agree; under jit with sharded batches the model's counts already are; None leaves the main
    stack's biases alone (a frozen trunk). Returns new params.
    """

    def nudge(bias, counts):
        load = counts.astype(jnp.float32)
        return bias + rate * jnp.sign(load.mean(-1, keepdims=True) - load)

    params = dict(params)  # new top level; the touched subtrees are rebuilt below, the rest shared
    if "moe_layers" in params and expert_counts is not None:
        moe = dict(params["moe_layers"]["moe"])
        moe[ROUTER_BIAS] = nudge(moe[ROUTER_BIAS], expert_counts)
        params["moe_layers"] = {**params["moe_layers"], "moe": moe}
    for m in range(0 if mtp_expert_counts is None else mtp_expert_counts.shape[0]):
        name = f"mtp_{m}"
        moe = dict(params[name]["block"]["moe"])
        moe[ROUTER_BIAS] = nudge(moe[ROUTER_BIAS], mtp_expert_counts[m])
        params[name] = {**params[name], "block": {**params[name]["block"], "moe": moe}}
    return params
