"""Named model presets: `presets.get(name)`.

tiny         tests: 2 layers (1 dense + 1 MoE), 8 experts in 4 groups, MTP 1. Runs in milliseconds.
tiny4        benchmarks (bench_rl_coding.py trains it): tiny at width 256 with 4 heads, no MTP.
small        CPU demos: ~100M total / ~25M active params, byte-level vocab (512 ≥ 272 byte+special
             ids).
deepseek_v3  DeepSeek-V3 (671B total / 37B active).
kimi_k2      Kimi K2 / K2.5 text stack (1.04T total / 32B active), YaRN to 256K.
"""

from __future__ import annotations

from model.config import ModelConfig, RopeScaling

_PRESETS = {
    "tiny": dict(
        vocab_size=320,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        intermediate_size=128,
        moe_intermediate_size=32,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_shared_experts=1,
        first_k_dense_replace=1,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.0,
        max_position_embeddings=512,
        num_mtp_modules=1,
        initializer_range=0.05,
    ),
    "small": dict(
        vocab_size=512,
        hidden_size=512,
        num_hidden_layers=8,
        num_attention_heads=8,
        q_lora_rank=192,
        kv_lora_rank=128,
        qk_nope_head_dim=64,
        qk_rope_head_dim=32,
        v_head_dim=64,
        intermediate_size=1536,
        moe_intermediate_size=512,
        n_routed_experts=16,
        num_experts_per_tok=2,
        n_shared_experts=1,
        first_k_dense_replace=1,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.0,
        max_position_embeddings=4096,
        num_mtp_modules=1,
    ),
    "deepseek_v3": dict(
        vocab_size=129280,
        hidden_size=7168,
        num_hidden_layers=61,
        num_attention_heads=128,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        n_routed_experts=256,
        num_experts_per_tok=8,
        n_shared_experts=1,
        first_k_dense_replace=3,
        n_group=8,
        topk_group=4,
        routed_scaling_factor=2.5,
        rope_theta=10000.0,
        max_position_embeddings=163840,
        num_mtp_modules=1,
        rope_scaling=RopeScaling(
            factor=40.0,
            original_max_position_embeddings=4096,
            beta_fast=32,
            beta_slow=1,
            mscale=1.0,
            mscale_all_dim=1.0,
        ),
    ),
    "kimi_k2": dict(
        vocab_size=163840,
        hidden_size=7168,
        num_hidden_layers=61,
        num_attention_heads=64,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        n_routed_experts=384,
        num_experts_per_tok=8,
        n_shared_experts=1,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        routed_scaling_factor=2.827,
        rope_theta=50000.0,
        max_position_embeddings=262144,
        num_mtp_modules=0,
        # Kimi's config.json: YaRN 4K -> 256K (factor 64) with beta_fast = beta_slow = 1.
        rope_scaling=RopeScaling(
            factor=64.0,
            original_max_position_embeddings=4096,
            beta_fast=1.0,
            beta_slow=1.0,
            mscale=1.0,
            mscale_all_dim=1.0,
        ),
    ),
}

# Issue 41's GPU benchmark config: DeepSeek-V3 shapes at 1.76B total / 0.70B active parameters,
# sized to train at batch 8 x 2048 on one H100/H200 (bench/bench_gpu.py).
_PRESETS["mid"] = dict(
    vocab_size=32768,
    hidden_size=2048,
    num_hidden_layers=8,
    num_attention_heads=16,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    intermediate_size=8192,
    moe_intermediate_size=1024,
    n_routed_experts=32,
    num_experts_per_tok=8,
    n_shared_experts=1,
    first_k_dense_replace=1,
    routed_scaling_factor=2.5,
    max_position_embeddings=4096,
    num_mtp_modules=0,
    dtype="bfloat16",
)

_PRESETS["tiny4"] = dict(
    _PRESETS["tiny"],
    hidden_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    q_lora_rank=128,
    kv_lora_rank=64,
    qk_nope_head_dim=32,
    qk_rope_head_dim=16,
    v_head_dim=32,
    intermediate_size=512,
    moe_intermediate_size=128,
    num_mtp_modules=0,
)


def overrides(name: str, base: str = "tiny") -> dict:
    """The fields in which preset `name` differs from `base`: what a benchmark passes as overrides
    of `base` to rebuild `name` in an older revision that lacks it (bench --against REV)."""
    return {k: v for k, v in _PRESETS[name].items() if _PRESETS[base].get(k) != v}


def names() -> tuple[str, ...]:
    return tuple(_PRESETS)


def get(name: str, **overrides) -> ModelConfig:
    """The preset `name`, with optional field overrides (unknown fields are errors)."""
    if name not in _PRESETS:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(_PRESETS)}")
    return ModelConfig(**{**_PRESETS[name], **overrides})
