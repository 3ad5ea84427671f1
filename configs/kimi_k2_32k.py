"""Kimi K2 continued pretraining at 32k tokens per row (Composer 2's first stage), context-parallel.

    python main.py --config=configs/kimi_k2_32k.py --dry_run   # the per-chip plan;
                                                                 allocates nothing

YaRN 4k -> 32k (factor 8; configs/kimi_k2.py's get_config otherwise: bf16 compute, full remat,
bf16 AdamW moments, its rules with the sequence and the FSDP-sharded weights over 'context').
Mesh 256 chips = expert 4 x tensor 8 x context 8: each 32k row is split over 8 context shards in
zig-zag chunks (4k tokens per chip, model/context.py), attention all-gathers the 576-value MLA
latent per token. 128 rows of 32k per step = 4.19M tokens, one row per microbatch.

Expect from --dry_run (fused attention, as 'auto' is on TPU/GPU): 4,194,304 tokens per step and
per chip 15.9 GiB params + 15.9 bf16 moments + 15.9 grads + 30.7 accumulation (the scan's carry
and new sum beside the stacked experts' gradient) + 3.3 saved layer inputs + 8.4 one layer's
working set (2.0 of it MoE buffers, the gathered layer weights and their gradient included) + 0.6
logits = 90.7 GiB: the plan fits 256 x H200 (141 GB), not a v5p-512 (95 GB = 88.5 GiB chips) or
256 x H100-80GB (74.5 GiB). After the plan's worst measured error against XLA (plan/XLA 0.973,
model/memory_plan.py MEASURED_PLAN_OVER_XLA; bench/RESULTS.md, issue 51) XLA may need 93.2 GiB:
10% of the chip stays free on 256 x H200 (118.2 GiB), the slice this layout names. v5p or H100s:
512 chips, --config.dry_run_devices=512 --config.mesh.context=16 plans 47.2 GiB.
"""

from configs import kimi_k2


def get_config():
    mesh = dict(data=1, fsdp=1, expert=4, tensor=8, context=8)
    return kimi_k2.long_context_config(32_768, 128, mesh, 256)
