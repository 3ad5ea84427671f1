"""Default run: a small preset on local code text, on CPU, for a few minutes.

    python main.py                       # = --config=configs/default.py --workdir=workdir/default
    python main.py --config=configs/default.py --config.train.steps=50 --workdir=/tmp/run

Expect: the 'small' preset (102M total / 25M active params) on 8 x 128-token packed batches of
the embedded code corpus (the Python stdlib through data/'s Grain pipeline, byte tokenizer), 40
steps of AdamW (weight decay on weight matrices only: see train/optim.py). Measured 2026-11-23 with
that optimizer on 2 CPU cores shared with other jobs (load average 19-26, so 25-80 s/step and 43
minutes in all; ~6 s/step and 6 minutes at load ~6): held-out loss every 10 steps 4.16, 4.00,
3.94, 3.88 (bits/byte 6.01, 5.78, 5.68, 5.61; training CE ~2.8; the held-out documents are other
files).
Checkpoints under <workdir>/checkpoints (steps 20 and 40), TensorBoard events under <workdir>/tb.
Re-running the same command resumes from the latest checkpoint (and stops at once at step 40).
For a 30-second smoke run: python main.py --config.model=tiny --workdir=/tmp/tiny
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.model = "small"  # preset name from model.presets, or an HF checkpoint directory
    c.init_params_from = ""  # exported params of a previous stage ('' = random init)
    # The decode engines' params + latent cache dtype (RL samplers, eval, sample; ModelConfig
    # .decode_dtype): 'auto' = bfloat16 on GPU/TPU (half the cache and weight bytes per decode
    # step), float32 on CPU (decode bit-exact to the float32 training forward); or name one.
    c.decode_dtype = "auto"
    c.export_hf = False  # --mode=convert also writes an HF folder (config.json + safetensors)

    c.train = ml_collections.ConfigDict(
        dict(
            steps=40,
            batch_size=8,
            seq_len=128,
            seed=0,
            # 'adamw' | 'muon' (every weight matrix; AdamW for embeddings, head, norms)
            optimizer="adamw",
            lr=1e-3,
            schedule="cosine",  # 'cosine' | 'wsd' | 'constant'
            warmup_steps=5,
            min_lr_ratio=0.1,
            wsd_decay_fraction=0.2,
            weight_decay=0.1,
            b1=0.9,
            b2=0.95,
            eps=1e-8,
            clip_norm=1.0,
            moment_dtype="float32",  # optimizer moments: 'float32' | 'bfloat16' (half the bytes)
            microbatches=1,  # gradient accumulation inside the step
            # 'auto' (bfloat16 on GPU/TPU, where the kernels take bf16; float32 on CPU) | 'float32'
            # | 'bfloat16'; params stay float32
            compute_dtype="auto",
            remat="none",  # 'none' | 'full' | 'dots' | 'dots_no_batch'
            z_loss=0.0,
            mtp_mode="ce",
            mtp_weight=0.3,  # mtp_mode: 'none' | 'ce' | 'distill'
            mtp_lr=0.0,  # > 0: the MTP modules' own peak lr, on lr's schedule (train/optim.py)
            # 'all' | 'mtp': only the MTP modules learn (the trunk, embeddings and head frozen),
            # the stage that trains draft heads for speculative decoding on a finished model
            trainable="all",
            balance_loss=True,
            bias_update_rate=1e-3,
            max_nonfinite_in_a_row=5,
            max_seconds=0.0,  # > 0: no step starts after this many seconds of this invocation
            log_every=5,
            eval_every=10,
            eval_batches=4,
            eval_at_start=False,  # held-out metrics of the starting params too ("before")
        )
    )
    c.data = ml_collections.ConfigDict(
        dict(
            # 'pipeline' (data/) | 'local_text' | 'synthetic' (train/synthetic_data.py)
            source="pipeline",
            # pipeline: data.pipeline.SourceSpec fields; 'stdlib' = the embedded corpus (Python's
            # own stdlib)
            sources=({"kind": "stdlib"},),
            tokenizer="byte",
            strict=False,
            avoid_splitting=False,
            tool_output_budget=0,  # chat rows: tool results trimmed to N tokens (data/chat.py)
            heldout_fraction=0.01,
            max_bytes=4_000_000,  # local_text only
        )
    )
    # Mesh axis sizes; one may be -1 (fills the devices).
    c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, expert=1, tensor=1, context=1))
    # Logical axis -> mesh axis rules as (name, axis) pairs; empty = the model's DEFAULT_RULES.
    c.rules = ()
    c.checkpoint = ml_collections.ConfigDict(dict(every_steps=20, keep=3, async_save=True))
    # keep > 0: every train.eval_every steps (and at the end) the params are offered to
    # <workdir>/best, where Orbax keeps the `keep` best by `metric` ('eval/nll' and
    # 'eval/bits_per_byte' with held-out data; RL: its progress scalars, e.g. 'reward/mean' with
    # mode 'max'); an unreported metric is a config error at start.
    c.eval_gate = ml_collections.ConfigDict(dict(keep=0, metric="eval/nll", mode="min"))
    # > 0: the trainer's mesh spans only the first N devices of this process (samplers hold the
    # others: configs/rl.py); 0 = every device.
    c.trainer_devices = 0
    c.dry_run_devices = 0  # --dry_run on a described mesh of this many devices (0 = the real ones)
    c.devices_per_host = 4  # --dry_run's weight push: chips per trainer host (v5p: 4)
    return c
