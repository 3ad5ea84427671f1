"""Kimi K2 (1.04T total / 32B active) continued pretraining on a 256-chip pod (described mesh).

    python main.py --config=configs/kimi_k2.py --dry_run    # sizes, FLOPs, per-device bytes; allocates nothing
    python main.py --config=configs/kimi_k2.py --workdir=gs://... --distributed   # on the pod

Mesh 256 = data 1 x fsdp 16 x expert 16 x tensor 1: experts (384) over 16 chips, every other large
weight FSDP-sharded 16 ways (over 'fsdp'); the batch over data x fsdp (16 rows per step and chip
group). Expect from --dry_run: 1.026e12 params, 3.29e10 active, 2.06e11 training FLOPs/token, and
per chip 17.5 GiB params + 35.0 GiB AdamW moments = 52.5 GiB (12 bytes/param / 256 chips = 45.9
ideal; the rest is what the rules leave unsharded, e.g. norms and the MLA head axes with tensor=1).
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
        microbatches=4,
        mtp_mode="none",
        log_every=10,
        eval_every=500,
    )
    c.data.source = "local_text"  # the code-corpus pipeline replaces this when data/ lands
    c.mesh.update(data=1, fsdp=16, expert=16, tensor=1)
    # The model's DEFAULT_RULES, except that the MLA latent axes are FSDP-sharded too: with tensor=1
    # the up-projections wq_b/wk_b/wv_b would otherwise be replicated (4.2 GiB/chip for wq_b alone).
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
