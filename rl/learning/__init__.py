"""Trainer-side RL: what turns sampled episodes into a gradient step (the trainer itself is
train/trainer.py's, shared by every stage).

    loop.py          --mode=rl: the trainer with the RL loss and batch source, and the samplers
    batch_source.py  rollout store -> groups (staleness, dynamic sampling, exactly-once books in
                     the checkpoint) -> batch; publishes weights after each step
    batch.py         records -> padded training rows, group-relative advantages
    losses.py        the RL policy loss (GRPO variant, TIS, KL, router replay, MTP
                     self-distillation), pure

The episode record, rewards and episode metrics it reads are rl/episodes/'s (the bottom layer).
"""
