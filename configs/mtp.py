"""The MTP stage, after stage (c) SFT: the MTP draft heads alone, on the finished model (Composer
trains its MTP heads after the base, for faster serving).

    python main.py --mode=sft --config=configs/mtp.py --workdir=workdir/mtp \\
        --config.init_params_from=workdir/sft/export/params_60
    python main.py --mode=convert --config=configs/mtp.py --workdir=workdir/mtp

After RL (an RL checkpoint is a pretraining checkpoint: export it, then start from the export;
RL's own self-distillation term, rl.mtp_weight, keeps the heads in step during RL when the
samplers decode speculatively, this stage re-fits them on the serving traffic afterwards):

    python main.py --mode=convert --config=configs/rl.py --workdir=workdir/rl
    python main.py --mode=sft --config=configs/mtp.py --workdir=workdir/mtp_after_rl \
        --config.init_params_from=workdir/rl/export/params_<step>

Everything outside the MTP modules is frozen (train.trainable='mtp': optimizer role `frozen`, no
router-bias updates in the trunk, and the loss sees the trunk through stop_gradient, so a step
runs the trunk forward only). Module 0 learns, by self-distillation, the frozen model's own
next-token distribution one position ahead: what a temperature-1 speculative verifier accepts
(model/engine/speculation.py drafts with it; `serve.speculative_k`, `rl.speculative_k`). Same data
as the SFT stage: the traffic the heads will draft for. The exported params are the SFT model's, bit
for bit, plus new MTP modules.

On the small preset (bench/RESULTS_LOG.md, "MTP stage and unread MoE rows"): after a 300-step joint
run on the stdlib corpus, 300 steps of these settings on the same corpus (lr 1e-3; not the SFT
data and step count above) lowered the MTP distillation loss 0.097 -> 0.016 and raised
the temperature-1 acceptance of K=2 drafts 0.76 -> 0.92, batch-1 speculative decoding 1.28-1.39x
-> 1.59-2.01x over plain decoding; `python bench/bench_decode.py` (--mtp_stage_steps 300) runs it.
"""

from configs import sft

# What makes a run the MTP stage (bench/bench_decode.py --mtp_stage_steps applies the same).
STAGE = dict(trainable="mtp", mtp_mode="distill", mtp_weight=1.0)


def get_config():
    c = sft.get_config()
    c.train.update(steps=60, lr=1e-3, warmup_steps=5, **STAGE)
    return c
