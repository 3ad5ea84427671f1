"""Stage (a): short-context continued pretraining on code, from a checkpoint (params only).

    python main.py --config=configs/pretrain.py --workdir=workdir/pretrain \\
        --config.init_params_from=runs/imported          # an exported params checkpoint, or
    python main.py --config=configs/pretrain.py --workdir=workdir/pretrain \\
        --config.model=path/to/hf_folder                 # an HF checkpoint folder
    python main.py --mode=convert --config=configs/pretrain.py --workdir=workdir/pretrain
        # -> workdir/pretrain/export/params_<steps>: the start of configs/long_context.py

Params come from --config.init_params_from (train/'s export or model/export.py's, e.g. an HF
import: python -m model.export --hf_dir H --out_dir runs/imported) or from an HF folder given as
--config.model; the optimizer (AdamW moments, step, schedule) starts fresh. With neither it starts
from a random init (a smoke run). Data: the Python stdlib through data/'s Grain pipeline, byte
tokenizer, 8 x 128-token packed rows; held-out stdlib files evaluated before the first step, every
`eval_every` steps and at the end: 'held-out loss' (NLL, nats/token) and bits/byte, also under
eval/nll and eval/bits_per_byte in TensorBoard.

Expect (small preset from a random init, 2 shared CPU cores, ~3 min): held-out NLL 6.35 -> 3.71,
bits/byte 9.17 -> 5.35 over the 40 steps (bench/RESULTS_LOG.md, section "Evaluation (eval/)").
"""

import ml_collections

from configs import default


def get_config() -> ml_collections.ConfigDict:
    c = default.get_config()
    # ModelConfig fields replacing the preset's / the HF config's (unknown names are errors);
    # rope_scaling is merged field by field. Stage (a) keeps the model as it is.
    c.model_overrides = ml_collections.ConfigDict()
    c.train.update(
        steps=40, batch_size=8, seq_len=128, lr=3e-4, warmup_steps=4, eval_every=20, eval_batches=4
    )
    c.train.eval_at_start = True  # held-out metrics of the starting params ("before")
    c.checkpoint.every_steps = 20
    return c
