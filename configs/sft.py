"""SFT on agent coding traces (data/traces/coding_traces.jsonl): the same loop and TrainState;
only the data differ (chat rows whose loss_mask keeps assistant tokens only).

    python main.py --config=configs/default.py --workdir=workdir/pretrain         # stage 1
    python main.py --mode=convert --workdir=workdir/pretrain                      # -> workdir/pretrain/export/params_<step>
    python main.py --mode=sft --config=configs/sft.py --workdir=workdir/sft \\
        --config.init_params_from=workdir/pretrain/export/params_100

Expect: held-out loss (assistant tokens only) going down over 60 steps of 8 x 512-token rows.
Without --config.init_params_from it starts from a random init (useful as a smoke test).
"""
from configs import default


def get_config():
  c = default.get_config()
  c.train.update(steps=60, seq_len=512, lr=1e-3, warmup_steps=5, eval_every=20, log_every=5,
                 mtp_mode='distill')  # MTP heads trained by self-distillation from the main head
  c.data.update(sources=({'kind': 'jsonl', 'paths': ['data/traces/coding_traces.jsonl'],
                          'field': 'messages', 'name': 'traces'},),
                avoid_splitting=True, heldout_fraction=0.05)
  c.checkpoint.every_steps = 20
  return c
