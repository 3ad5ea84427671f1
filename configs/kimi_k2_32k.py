"""Kimi K2 continued pretraining at 32k tokens per row (Composer 2's first stage), context-parallel.

    python main.py --config=configs/kimi_k2_32k.py --dry_run   # the per-chip plan;
                                                                 allocates nothing

YaRN 4k -> 32k (factor 8; configs/kimi_k2.py's get_config otherwise: bf16 compute, full remat,
bf16 AdamW moments, its rules with the sequence and the FSDP-sharded weights over 'context').
Mesh 256 chips = expert 4 x tensor 8 x context 8: each 32k row is split over 8 context shards in
zig-zag chunks (4k tokens per chip, model/context.py), attention all-gathers the 576-value MLA
latent per token. 128 rows of 32k per step = 4.19M tokens, one row per microbatch.

Expect from --dry_run (fused attention, as 'auto' is on TPU/GPU): 4,194,304 tokens per step and
per chip 15.9 GiB params + 15.9 bf16 moments + the accumulation phase's 54.2 (15.9 grads + 30.7
accumulation: the scan's carry and new sum beside the stacked experts' gradient; + 7.6 saved
layer inputs, a dense and a MoE layer's working activations, the dense layer's gathered weights
and the logits; the layers' backward phase, with the carry alone, is 44.1) = 86.0 GiB: the plan
fits 256 x H200 (141 GB) and, barely, a v5p-512 (95 GB = 88.5 GiB chips), not 256 x H100-80GB
(74.5 GiB). After the plan's worst measured error against XLA (plan/XLA 0.929,
model/memory_plan.py MEASURED_PLAN_OVER_XLA; bench/RESULTS.md, issue 51) XLA may need 92.6 GiB:
10% of the chip stays free on 256 x H200 (118.2 GiB), the slice this layout names, not on a
v5p-512. v5p or H100s: 512 chips, --config.dry_run_devices=512 --config.mesh.context=16 plans
43.7 GiB.
"""

from configs import kimi_k2


def get_config():
    mesh = dict(data=1, fsdp=1, expert=4, tensor=8, context=8)
    return kimi_k2.long_context_config(32_768, 128, mesh, 256)
