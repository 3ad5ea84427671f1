"""Kimi K2 (1.04T total / 32B active) continued pretraining on a 256-chip pod (described mesh).

    python main.py --config=configs/kimi_k2.py --dry_run    # sizes, FLOPs, per-device
                                                              bytes; allocates nothing
    python main.py --config=configs/kimi_k2.py --workdir=gs://... --distributed   # on the pod

Mesh 256 = data 1 x fsdp 4 x expert 8 x tensor 8: experts (384) over 8 expert groups, attention
heads, MLP and vocab over 8-way tensor parallelism, every large weight also FSDP-sharded 4 ways; the
batch (256 x 4k) over data x fsdp = 64 sequences per shard, in 64 microbatches of one sequence.
Expect from --dry_run: 1.026e12 params, 3.29e10 active, 2.06e11 training FLOPs/token, and per chip
17.0 GiB float32 params + 17.0 GiB bfloat16 AdamW moments + the step's largest phase, the
gradient accumulation's (model/memory_plan.py): 17.0 GiB grads + 31.8 GiB accumulation (the
scan's carry and new sum beside the stacked experts' gradient, accumulation_bytes) + 6.5 GiB
activations, logits and the dense layer's gathered weights = 89.3 GiB (parts rounded; fused
attention, as 'auto' is on TPU/GPU): the plan fits 256 x H200-141GB (131.3 GiB usable), not a
v5p-512 (95 GB = 88.5 GiB chips) or 256 x H100-80GB. After the plan's worst measured error
against XLA (plan/XLA 0.929, model/memory_plan.py MEASURED_PLAN_OVER_XLA; bench/RESULTS.md,
issue 51) XLA may need 96.1 GiB: 10% of the chip stays free on 256 x H200 (118.2 GiB), the slice
this layout names. On v5p use 512 chips: --config.dry_run_devices=512 --config.mesh.fsdp=8 plans
47.9 GiB. With float32 moments it plans to 106.4 GiB. Longer rows: configs/kimi_k2_32k.py and
kimi_k2_256k.py (a context axis).
"""

from configs import default


def get_config():
    c = default.get_config()
    c.model = "kimi_k2"
    c.train.update(
        steps=10_000,
        batch_size=256,
        seq_len=4096,
        lr=2e-5,
        warmup_steps=200,
        schedule="wsd",
        compute_dtype="bfloat16",
        remat="full",
        microbatches=64,  # one 4k sequence per shard per microbatch
        # bfloat16 AdamW moments (DeepSeek-V3's choice; b2 0.95): 17 GiB per chip instead of 34,
        # which pays for part of the gradient accumulation's (+31.8 GiB)
        moment_dtype="bfloat16",
        mtp_mode="none",
        log_every=10,
        eval_every=500,
    )
    c.data.source = "local_text"  # the code-corpus pipeline replaces this when data/ lands
    c.mesh.update(data=1, fsdp=4, expert=8, tensor=8)
    # The model's DEFAULT_RULES, except that the MLA latent axes are FSDP-sharded too: otherwise the
    # up-projections wq_b/wk_b/wv_b are sharded only over their head axis (tensor).
    # Flax skips a mesh axis already used in a spec, so [D, q_latent] stays ('fsdp', None).
    c.rules = [
        ["layers", None],
        ["vocab", "tensor"],
        ["embed", "fsdp"],
        ["heads", "tensor"],
        ["head_dim", None],
        ["q_latent", "fsdp"],
        ["kv_latent", "fsdp"],
        ["mlp", "tensor"],
        ["expert", "expert"],
        ["batch", ["data", "fsdp"]],
        ["seq", None],
        ["act_embed", None],
    ]
    c.checkpoint.update(every_steps=200, keep=3)
    c.dry_run_devices = 256
    return c


def context_rules() -> list:
    """get_config's rules with the sequence over 'context' (model/context.py) and every weight
    that was FSDP-sharded along D (or the MLA latents) sharded over ('fsdp', 'context'): a context
    axis splits tokens, and the weights are split over it too, gathered per layer like FSDP."""
    over = {
        "embed": ["fsdp", "context"],
        "q_latent": ["fsdp", "context"],
        "kv_latent": ["fsdp", "context"],
        "seq": "context",
    }
    return [[name, over.get(name, target)] for name, target in get_config().rules]


def long_context_config(seq_len: int, sequences: int, mesh: dict, devices: int):
    """Continued pretraining at `seq_len` tokens per row (YaRN from Kimi's original 4k context,
    factor seq_len / 4096, as configs/long_context.py extends the small model), `sequences` rows
    per step (one per microbatch: the mesh has one batch shard), on `mesh` over `devices` chips."""
    c = get_config()
    c.model_overrides = dict(
        max_position_embeddings=seq_len,
        rope_scaling=dict(factor=seq_len / 4096, original_max_position_embeddings=4096),
    )
    c.train.update(seq_len=seq_len, batch_size=sequences, microbatches=sequences)
    c.mesh.update(mesh)
    c.rules = context_rules()
    c.dry_run_devices = devices
    return c
