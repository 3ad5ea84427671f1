"""ModelConfig: every architectural field of a DeepSeek-V3 / Kimi-K2 model, defined once.

Field names follow HF's DeepseekV3Config where one exists (so config.json maps one-to-one), plus a
few runtime knobs (compute dtype, remat, MoE dispatch) that do not change the math.
"""

from __future__ import annotations

import dataclasses
from typing import Any

MOE_IMPLS = ("auto", "blocked", "tokamax", "ragged", "dense", "opaque")  # model/moe.py
ATTENTION_IMPLS = ("auto", "blocked", "tokamax", "cudnn", "opaque")  # model/kernels/attention.py
MOE_COMMS = ("auto", "gspmd", "alltoall")  # model/kernels/choice.py moe_comm
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
DTYPES = ("float32", "bfloat16")
# The run's compute dtype (configs' train.compute_dtype -> ModelConfig.dtype, resolved by
# `resolve_compute_dtype`): 'auto' = bfloat16 on GPU/TPU, float32 on CPU.
COMPUTE_DTYPES = ("auto", *DTYPES)
# The decode engine's params + latent cache dtype (model/decode.py `resolve_decode_dtype`): 'auto' =
# bfloat16 on GPU/TPU, float32 on CPU.
DECODE_DTYPES = ("auto", *DTYPES)


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """YaRN parameters (HF names). factor == 1 means plain RoPE."""

    factor: float = 1.0
    original_max_position_embeddings: int = 4096
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float = 1.0
    mscale_all_dim: float = 1.0
    truncate: bool = True


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int  # D
    num_hidden_layers: int  # dense + MoE decoder layers (MTP excluded)
    num_attention_heads: int  # H
    # MLA
    q_lora_rank: int | None  # None: direct q projection
    kv_lora_rank: int  # L: compressed latent
    qk_nope_head_dim: int
    qk_rope_head_dim: int  # R: rope dims, shared across heads on the key side
    v_head_dim: int
    # FFN / MoE
    intermediate_size: int  # dense layers' FFN width
    moe_intermediate_size: int  # each routed/shared expert's FFN width
    n_routed_experts: int  # E
    num_experts_per_tok: int  # top-k
    n_shared_experts: int
    first_k_dense_replace: int  # the first k layers are dense
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True
    # Norms, positions, head
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = RopeScaling()
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    num_mtp_modules: int = 0  # DeepSeek-V3 num_nextn_predict_layers
    # Training-time extras (no effect on inference math)
    balance_loss_coef: float = 0.0  # sequence-wise balance loss weight (alpha); 0 = off
    initializer_range: float = 0.02
    # Runtime knobs
    dtype: str = "float32"  # compute dtype of matmuls; params stay float32
    # The decode engine's (model/engine/) params, latent cache and compute dtype: 'bfloat16'
    # halves the cache bytes per token and the weight bytes a decode step reads (sampling,
    # log-probs and the router stay float32); 'float32' keeps the cache and params float32 and
    # computes in `dtype`, as training does; 'auto' = bfloat16 on GPU/TPU, float32 on CPU.
    decode_dtype: str = "auto"
    remat: str = "none"
    moe_impl: str = "auto"  # 'blocked' on CPU, tokamax's grouped GEMM on GPU/TPU (model/moe.py)
    attention_impl: str = "auto"  # training attention: 'blocked' on CPU, flash on GPU/TPU
    moe_block_size: int = (
        0  # rows per expert block in the 'blocked' dispatch; 0 = choose from shapes
    )
    # MoE communication under a mesh: 'gspmd' (XLA partitions the global dispatch), 'alltoall'
    # (expert-parallel shard_map, model/moe_a2a.py); 'auto' = gspmd on CPU and on one device,
    # alltoall on a multi-device GPU/TPU mesh, where the grouped-GEMM kernel is a custom call GSPMD
    # cannot partition (it would run whole on every device): the shard_map gives it its own rows.
    moe_comm: str = "auto"
    moe_capacity_factor: float = 0.0  # alltoall slot size vs balanced load; 0 = dropless
    # Layers per nn.scan iteration: 0 = auto (a stack of <= 4 layers is fully unrolled, deeper ones
    # scan one layer at a time so compile time stays flat in depth); params stay stacked either way.
    scan_unroll: int = 0

    def __post_init__(self):
        validate(self)

    # Derived sizes ----------------------------------------------------------
    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def num_dense_layers(self) -> int:
        return (
            min(self.first_k_dense_replace, self.num_hidden_layers)
            if self.n_routed_experts
            else self.num_hidden_layers
        )

    @property
    def num_moe_layers(self) -> int:
        return self.num_hidden_layers - self.num_dense_layers

    @property
    def mtp_is_moe(self) -> bool:
        """MTP blocks are MoE when the main stack's last layer is (DeepSeek-V3's MTP layer is)."""
        return self.n_routed_experts > 0 and self.num_hidden_layers >= self.first_k_dense_replace

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(f"invalid ModelConfig: {message}")


def validate(cfg: ModelConfig) -> None:
    """One-line errors naming the field, raised before anything is traced or allocated."""
    for name in (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "kv_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "intermediate_size",
    ):
        _check(
            isinstance(getattr(cfg, name), int) and getattr(cfg, name) > 0,
            f"{name} must be a positive int, got {getattr(cfg, name)!r}",
        )
    _check(
        cfg.q_lora_rank is None or cfg.q_lora_rank > 0,
        f"q_lora_rank must be None or > 0, got {cfg.q_lora_rank!r}",
    )
    _check(
        cfg.qk_rope_head_dim % 2 == 0,
        f"qk_rope_head_dim must be even (rope rotates pairs), got {cfg.qk_rope_head_dim}",
    )
    _check(cfg.first_k_dense_replace >= 0, "first_k_dense_replace must be >= 0")
    if cfg.n_routed_experts:
        _check(
            cfg.moe_intermediate_size > 0,
            "moe_intermediate_size must be > 0 when n_routed_experts > 0",
        )
        _check(
            0 < cfg.num_experts_per_tok <= cfg.n_routed_experts,
            f"num_experts_per_tok={cfg.num_experts_per_tok} must be in "
            f"[1, n_routed_experts={cfg.n_routed_experts}]",
        )
        _check(
            cfg.n_group >= 1 and cfg.n_routed_experts % cfg.n_group == 0,
            f"n_routed_experts={cfg.n_routed_experts} must be divisible by n_group={cfg.n_group}",
        )
        _check(
            1 <= cfg.topk_group <= cfg.n_group,
            f"topk_group={cfg.topk_group} must be in [1, n_group={cfg.n_group}]",
        )
        per_group = cfg.n_routed_experts // cfg.n_group
        _check(
            cfg.n_group == 1 or per_group >= 2,
            "group-limited routing needs >= 2 experts per group (groups rank by top-2 sum)",
        )
        _check(
            cfg.topk_group * per_group >= cfg.num_experts_per_tok,
            f"topk_group={cfg.topk_group} groups of {per_group} experts cannot supply "
            f"top-{cfg.num_experts_per_tok}",
        )
    _check(cfg.scan_unroll >= 0, f"scan_unroll must be >= 0, got {cfg.scan_unroll}")
    _check(cfg.num_mtp_modules >= 0, "num_mtp_modules must be >= 0")
    _check(cfg.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {cfg.dtype!r}")
    _check(
        cfg.decode_dtype in DECODE_DTYPES,
        f"decode_dtype must be one of {DECODE_DTYPES}, got {cfg.decode_dtype!r}",
    )
    _check(cfg.remat in REMAT_POLICIES, f"remat must be one of {REMAT_POLICIES}, got {cfg.remat!r}")
    _check(cfg.moe_impl in MOE_IMPLS, f"moe_impl must be one of {MOE_IMPLS}, got {cfg.moe_impl!r}")
    _check(
        cfg.attention_impl in ATTENTION_IMPLS,
        f"attention_impl must be one of {ATTENTION_IMPLS}, got {cfg.attention_impl!r}",
    )
    _check(cfg.moe_comm in MOE_COMMS, f"moe_comm must be one of {MOE_COMMS}, got {cfg.moe_comm!r}")
    _check(cfg.moe_capacity_factor >= 0, "moe_capacity_factor must be >= 0 (0 = dropless)")
    _check(
        cfg.rope_scaling.factor >= 1.0,
        f"rope_scaling.factor must be >= 1, got {cfg.rope_scaling.factor}",
    )


def resolve_compute_dtype(name: str, platform: str) -> str:
    """A run's compute_dtype -> 'float32' | 'bfloat16' for ModelConfig.dtype (a static jit key,
    so never 'auto'). 'auto': bfloat16 on an accelerator ('gpu', 'tpu'), because tokamax's Mosaic
    grouped GEMM and flash attention take bfloat16 operands only (in float32 the grouped GEMM
    refuses, model/kernels/gmm.py, and attention leaves Mosaic); float32 on 'cpu', where the
    blocked kernels run either and the tests compare against float32 references."""
    if name == "auto":
        return "float32" if platform == "cpu" else "bfloat16"
    if name not in DTYPES:
        raise ValueError(f"compute_dtype must be one of {COMPUTE_DTYPES}, got {name!r}")
    return name


def config_from_dict(fields: dict[str, Any]) -> ModelConfig:
    """Builds a ModelConfig from a flat dict (e.g. an ml_collections override); unknown keys are
    errors."""
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"unknown ModelConfig field(s): {', '.join(unknown)}")
    fields = dict(fields)
    if isinstance(fields.get("rope_scaling"), dict):
        fields["rope_scaling"] = RopeScaling(**fields["rope_scaling"])
    return ModelConfig(**fields)
