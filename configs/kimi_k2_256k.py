"""Kimi K2 continued pretraining at 256k tokens per row (Composer 2's context extension).

    python main.py --config=configs/kimi_k2_256k.py --dry_run   # the per-chip plan; allocates nothing

YaRN 4k -> 256k (factor 64, Kimi's own config.json; configs/kimi_k2.py otherwise: bf16 compute,
full remat, bf16 AdamW moments, the context rules). Mesh 512 chips = expert 4 x tensor 8 x
context 16: each 256k row over 16 context shards in zig-zag chunks (16k tokens per chip), the MLA
latent all-gathered per layer (256k x 576 values x 2 B = 288 MiB per layer per chip). 16 rows of
256k per step = 4.19M tokens, one row per microbatch.

Expect from --dry_run: per chip 8.7 GiB params + 8.7 grads + 8.7 accumulation gradient + 8.7
bf16 moments + 13.3 saved layer inputs + 22.9 layer working set + 2.5 logits = 73.5 GiB: fits a
v5p-1024 (512 chips x 95 GB) and 512 x H100-80GB (74.5 GiB, with 1 GiB to spare). 256 chips do
not fit at 256k: 256 x H200 with context 8 plans to 139.8 GiB (131.3 usable).
"""

from configs import kimi_k2


def get_config():
    mesh = dict(data=1, fsdp=1, expert=4, tensor=8, context=16)
    return kimi_k2.long_context_config(262_144, 16, mesh, 512)
