"""Kimi K2 continued pretraining at 256k tokens per row (Composer 2's context extension).

    python main.py --config=configs/kimi_k2_256k.py --dry_run   # the per-chip plan;
                                                                  allocates nothing

YaRN 4k -> 256k (factor 64, Kimi's own config.json; configs/kimi_k2.py otherwise: bf16 compute,
full remat, bf16 AdamW moments, the context rules). Mesh 512 chips = expert 2 x tensor 8 x
context 32: each 256k row over 32 context shards in zig-zag chunks (8k tokens per chip), the MLA
latent all-gathered per layer (256k x 576 values x 2 B = 288 MiB per layer per chip). 16 rows of
256k per step = 4.19M tokens, one row per microbatch.

Expect from --dry_run: 4,194,304 tokens per step and per chip 7.7 GiB params + 7.7 bf16 moments
+ the accumulation phase's 44.5 (7.7 grads + 15.0 accumulation: the scan's carry and new sum
beside the stacked experts' gradient; + 21.8 saved layer inputs, a dense and a MoE layer's
working activations (the gathered keys: 256k x (576 + 8 heads x 448) x 2 B = 2.0 GiB per copy),
the dense layer's gathered weights and the logits) = 59.8 GiB; the layers' backward (the carry,
6.7 saved layer inputs, one layer's 20.5 working set with 4.5 MoE buffers) is 43.7, and the
embedding lookup's rematerialized 256k x 7168 float32 row (7.0 GiB) a phase of 29.7 beside the
gradient and accumulation. After the plan's worst measured error against XLA (plan/XLA 0.929,
model/memory_plan.py MEASURED_PLAN_OVER_XLA; bench/RESULTS.md, issue 51) XLA may need 64.4 GiB:
10% of the chip stays free on a v5p-1024 (512 chips x 95 GB: 79.7 GiB), the slice this layout
names, and on 512 x H100-80GB (67.1 GiB). The layout before (expert 4 x
tensor 8 x context 16, 73.7 GiB under the plan then) kept 0.8 GiB free on H100s and less than 10%
after the error on v5p: changed 2026-11-29 (issue 51). 256 chips do not fit at 256k:
--config.dry_run_devices=256 --config.mesh.context=8 --config.mesh.expert=4 plans 140.2 GiB
(256 x H200: 131.3 usable).
"""

from configs import kimi_k2


def get_config():
    mesh = dict(data=1, fsdp=1, expert=2, tensor=8, context=32)
    return kimi_k2.long_context_config(262_144, 16, mesh, 512)
