"""Trainer-side RL: what turns sampled episodes into a gradient step (the trainer itself is
train/trainer.py's, shared by every stage).

    loop.py          --mode=rl: the trainer with the RL loss and batch source, and the samplers
    batch_source.py  rollout store -> groups (staleness, dynamic sampling, exactly-once books in
                     the checkpoint) -> batch; publishes weights after each step
    staleness.py     the staleness bound: how far behind the trainer a group may be and train
    batch.py         records -> padded training rows
    grpo.py          GRPO: group-relative advantages and the RL policy loss (TIS, KL, router
                     replay), pure
    losses.py        the forwards the loss runs and its MTP self-distillation term, pure

The episode record, rewards and episode metrics it reads are rl/episodes/'s (the bottom layer).
"""
