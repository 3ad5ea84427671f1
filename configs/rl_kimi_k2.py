"""Asynchronous RL (configs/rl.py) on Kimi K2 at scale: the plan, not a run on this machine.

    python main.py --mode=rl --config=configs/rl_kimi_k2.py --dry_run

Trainer: the pretraining layout of configs/kimi_k2.py (256 chips, data 1 x fsdp 4 x expert 8 x
tensor 8, its rules, bf16 compute, full remat, bf16 AdamW moments) on RL batches of
rl.groups_per_batch x rl.group_size = 256 episodes of rl.max_tokens = 32k tokens, one per batch
shard per microbatch (64 microbatches). Samplers: each engine on its own 64-chip mesh (expert 8 x
tensor 8), rl.coding.slots episodes at once. --dry_run prints the trainer's table (as
configs/kimi_k2.py's) and then the samplers' per-device bytes at 32k and 256k tokens and the
bytes each trainer host pushes per weight version.

Expect (2026-11-27): the trainer at 32k tokens per row does NOT fit 256 chips: 17.0 GiB each of
params, grads, accumulation gradient and bf16 moments, 26.7 GiB of saved layer inputs (61 x 32k x
7168 x 2 B: one 32k row per shard, nothing shards the sequence) and a 164 GiB layer working set
(attention materializes [H, T, S] float32 scores: 8 heads x 32k x 32k x 4 B = 32 GiB, twice) =
264 GiB per chip; 136 GiB even with a fused attention kernel. It needs sequence (context)
parallelism or rows of ~4k (configs/kimi_k2.py's 78.6 GiB). Samplers (64 chips, expert 8 x tensor
8): 34.0 GiB of bf16 weights per chip; the latent cache is 68.6 KiB per token per sequence in
bf16 (61 x (512 + 64) x 2 B; + 0.2 KiB of int32 positions; the engine keeps float32 today:
137.5 KiB), not split over expert/tensor, so 16 episodes hold 34.4 GiB at 32k (72.3 GiB per chip
with an 8k-token prefill's MoE buffers: fits a v5p or H200 chip) and 275.5 GiB at 256k (313 GiB:
does not; --config.rl.sampler_mesh.data=4 over 256 chips gives 106.7 GiB: an H200, not a v5p).
A full bf16 snapshot is 32.08 GB per trainer host (64 hosts of 4 chips); a delta at the 2% goal
0.64 GB.
"""

from configs import kimi_k2, kimi_k2_32k
from configs import rl as rl_base


def get_config():
    c = rl_base.get_config()
    long = kimi_k2_32k.get_config()  # the trainer's layout: the 32k continued-pretraining mesh
    c.model = "kimi_k2"
    c.mesh = long.mesh
    c.rules = long.rules
    c.model_overrides = long.model_overrides
    c.dry_run_devices = long.dry_run_devices
    c.devices_per_host = 4  # v5p: 4 chips per host (the weight store's writers)
    c.train.update(
        lr=1e-6,
        compute_dtype="bfloat16",
        remat="full",
        moment_dtype="bfloat16",
        microbatches=256,  # 256 rows / (data 1 x fsdp 1) = 256 per shard: one per microbatch
    )
    c.rl.update(
        task="coding",
        group_size=8,
        groups_per_batch=32,
        max_tokens=32_768,
        weight_dtype="bfloat16",
        sampler_devices=64,
        sampler_mesh=dict(data=1, fsdp=1, expert=8, tensor=8),
    )
    c.rl.coding.slots = 16
    return c


assert kimi_k2  # the pretraining layout the docstring compares against
