"""Stage (b): long-context extension: 16x longer rows and YaRN, continuing from stage (a).

    python main.py --config=configs/long_context.py --workdir=workdir/long \\
        --config.init_params_from=workdir/pretrain/export/params_40
    python main.py --mode=convert --config=configs/long_context.py --workdir=workdir/long
        # -> workdir/long/export/params_<steps>: the start of configs/sft.py

Stage (a) trained 128-token rows with plain RoPE. Here rows are 2048 tokens (1 x 2048 per step:
twice (a)'s 8 x 128 tokens) and RoPE is YaRN-scaled by 16 from an original context of 128: rotary
dims whose wavelength exceeds the original context are interpolated 16x, fast ones are kept, and
the softmax scale grows by mscale(16)^2 = (0.1 ln 16 + 1)^2 ~ 1.63. The params have the same shapes
(YaRN changes no weights), so (a)'s export loads as is. Held-out stdlib files are evaluated at 2048
tokens before the first step (= (a)'s params under YaRN), every `eval_every` steps and at the end.

Why 2048: the SFT stage keeps this context, and its checkpoint must play the agentic eval
(eval/agentic.py): the environment's first prompt (system prompt with the tool help + the task) is
~640-700 byte tokens and the agent traces SFT trains on are 1.3k-3.2k tokens (73% fit 2048 whole,
none fit 512). 2048 holds the prompt and a few turns with their observations.

Expect (small preset, after configs/pretrain.py's 40 steps; 453 s on 2 shared CPU cores):
held-out NLL at 2048 tokens 3.374 -> 3.261 (bits/byte 4.868 -> 4.706) over the 30 steps;
bench/RESULTS_LOG.md, section "Evaluation (eval/)".
"""

import ml_collections

from configs import pretrain

ORIGINAL_CONTEXT = 128  # stage (a)'s seq_len
LONG_CONTEXT = 2048  # holds the agentic eval's prompt and a few turns (see above)


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
        batch_size=1,
        seq_len=LONG_CONTEXT,
        lr=3e-4,
        warmup_steps=3,
        eval_every=15,
        eval_batches=4,
    )
    c.checkpoint.every_steps = 15
    return c
