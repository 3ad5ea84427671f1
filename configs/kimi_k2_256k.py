"""Kimi K2 continued pretraining at 256k tokens per row (Composer 2's context extension).

    python main.py --config=configs/kimi_k2_256k.py --dry_run   # the per-chip plan; allocates nothing

YaRN 4k -> 256k (factor 64, Kimi's own config.json; configs/kimi_k2.py otherwise: bf16 compute,
full remat, bf16 AdamW moments, the context rules). Mesh 512 chips = expert 4 x tensor 8 x
context 16: each 256k row over 16 context shards in zig-zag chunks (16k tokens per chip), the MLA
latent all-gathered per layer (256k x 576 values x 2 B = 288 MiB per layer per chip). 16 rows of
256k per step = 4.19M tokens, one row per microbatch.

Expect from --dry_run: 4,194,304 tokens per step and per chip 7.9 GiB params + 7.9 grads + 7.9
accumulation gradient + 7.9 bf16 moments + 13.3 saved layer inputs + 26.1 one layer's working set
(8.1 MoE buffers; the gathered keys: 256k x (576 + 8 heads x 448) x 2 B = 2.0 GiB per copy) + 2.5
logits = 73.7 GiB: fits a v5p-1024 (512 chips x 95 GB) and 512 x H100-80GB (74.5 GiB usable: 0.8
to spare, so the plan's 15% tolerance against XLA says try it on a slice first). 256 chips do not
fit at 256k: --config.dry_run_devices=256 --config.mesh.context=8 plans 140.2 GiB (256 x H200:
131.3 usable).
"""

from configs import kimi_k2


def get_config():
    mesh = dict(data=1, fsdp=1, expert=2, tensor=8, context=32)
    return kimi_k2.long_context_config(262_144, 16, mesh, 512)
