"""Asynchronous RL (configs/rl.py) on Kimi K2 at scale: the plan, not a run on this machine.

    python main.py --mode=rl --config=configs/rl_kimi_k2.py --dry_run

Trainer: the 32k continued-pretraining layout of configs/kimi_k2_32k.py (256 chips, expert 4 x
tensor 8 x context 8, its context rules and YaRN, bf16 compute, full remat, bf16 AdamW moments)
on RL batches of rl.groups_per_batch x rl.group_size = 256 episodes of rl.max_tokens = 32k
tokens, one per microbatch (256 microbatches: 8,388,608 tokens per step). Samplers: each engine
on its own 64-chip mesh (expert 8 x tensor 8), rl.coding.slots episodes at once. --dry_run prints
the trainer's table and then the samplers' per-device bytes at 32k and 256k tokens and the bytes
each trainer host pushes per weight version.

Expect (2026-11-29): the trainer at 32k plans 86.0 GiB per chip: 15.9 GiB each of params, grads
and bf16 moments, 30.7 GiB for the accumulation (memory_plan.accumulation_bytes), and in its
phase 7.6 GiB of saved layer inputs (4k tokens per chip: the row is split over 8 context
shards), working activations, the dense layer's weights and logits; with the plan's worst
measured error against XLA (configs/kimi_k2_32k.py) that keeps 10% free on 256 x H200. A 256k
trainer is configs/kimi_k2_256k.py's layout. Samplers (64 chips, expert 8 x tensor 8): 34.0 GiB of
bf16 weights per chip; the latent cache is 68.6 KiB per token per sequence in bf16 (61 x (512 +
64) x 2 B; + 0.2 KiB of int32 positions). MLA's cache has no head axis, so unsplit it sits whole
on every chip of the engine: 16 episodes at 256k are 275.5 GiB per chip (313.3 GiB in all: fits
nothing). rl.coding.cache_split='slots' (model/engine/split.py: data-parallel attention, each of
the 8 expert-group chips holds the caches of its own 2 episodes) makes it 34.4 GiB at 256k; with
one layer's dropless all-to-all buffers for an 8k-token prefill (30.5 GiB: a chip prefilling its
own slot may receive all 65,536 assignments from each source) the engine plans 99.0 GiB per chip
at 256k and 68.8 at 32k: 16 concurrent 256k episodes per 64 x H200 engine (141 GB = 131.3 GiB,
25% free), not a v5p chip (88.5 GiB).
A full bf16 snapshot is 32.08 GB per trainer host (64 hosts of 4 chips); a delta at the 2% goal
0.64 GB.
"""

from configs import kimi_k2_32k
from configs import rl as rl_base


def get_config():
    c = rl_base.get_config()
    long = kimi_k2_32k.get_config()  # the trainer's layout: the 32k continued-pretraining mesh
    c.model = "kimi_k2"
    c.mesh = long.mesh
    c.rules = long.rules
    c.model_overrides = long.model_overrides
    c.dry_run_devices = long.dry_run_devices
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
        # two batches ahead (rl/learning/loop.py: >= groups_per_batch + groups_per_call - 1)
        max_ahead=64,
        max_tokens=32_768,
        weight_dtype="bfloat16",
        sampler_devices=64,
        sampler_mesh=dict(data=1, fsdp=1, expert=8, tensor=8),
    )
    c.rl.coding.slots = 16
    c.rl.coding.cache_split = "slots"  # 2 episodes' caches per expert-group chip (docstring)
    return c
