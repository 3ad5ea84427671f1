"""Stage (b): long-context extension: 4x longer rows and YaRN, continuing from stage (a).

    python main.py --config=configs/long_context.py --workdir=workdir/long \\
        --config.init_params_from=workdir/pretrain/export/params_40
    python main.py --mode=convert --config=configs/long_context.py --workdir=workdir/long
        # -> workdir/long/export/params_<steps>: the start of configs/sft.py

Stage (a) trained 128-token rows with plain RoPE. Here rows are 512 tokens (2 x 512 per step: the
same 1,024 tokens as (a)'s 8 x 128) and RoPE is YaRN-scaled by 4 from an original context of 128:
rotary dims whose wavelength exceeds the original context are interpolated 4x, fast ones are
kept, and the softmax scale grows by mscale(4)^2 = (0.1 ln 4 + 1)^2 ~ 1.30. The params have the
same shapes (YaRN changes no weights), so (a)'s export loads as is. Held-out stdlib files are
evaluated at 512 tokens before the first step (= (a)'s params under YaRN), every `eval_every`
steps and at the end.

Expect (small preset, after configs/pretrain.py's 40 steps, ~4 min): held-out NLL at 512 tokens
3.708 -> 3.687 (bits/byte 5.350 -> 5.321), below (a)'s un-extended params at 512 with plain RoPE
(3.705; measured by bench/bench_stages.py). Numbers in bench/RESULTS.md.
"""

import ml_collections

from configs import pretrain

ORIGINAL_CONTEXT = 128  # stage (a)'s seq_len
LONG_CONTEXT = 512


def long_context_overrides() -> ml_collections.ConfigDict:
    """ModelConfig overrides of the extended model (also used by configs/sft.py)."""
    return ml_collections.ConfigDict(
        dict(
            max_position_embeddings=LONG_CONTEXT,
            rope_scaling=dict(
                factor=LONG_CONTEXT / ORIGINAL_CONTEXT,
                original_max_position_embeddings=ORIGINAL_CONTEXT,
            ),
        )
    )


def get_config() -> ml_collections.ConfigDict:
    c = pretrain.get_config()
    c.model_overrides = long_context_overrides()
    c.train.update(
        steps=30,
        batch_size=2,
        seq_len=LONG_CONTEXT,
        lr=3e-4,
        warmup_steps=3,
        eval_every=15,
        eval_batches=4,
    )
    c.checkpoint.every_steps = 15
    return c
