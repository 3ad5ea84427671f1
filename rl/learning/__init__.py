"""Trainer-side RL: what turns sampled episodes into a gradient step (the trainer itself is
train/trainer.py's, shared by every stage; rl/learning/loop.py wires it).

    batch_source.py  rollout store -> groups (staleness, dynamic sampling, exactly-once books in
                     the checkpoint) -> batch; publishes weights after each step
    batch.py         records -> padded training rows, group-relative advantages
    losses.py        the RL policy loss (GRPO variant, TIS, KL, router replay, MTP self-distillation),
                     pure
    rewards.py       the reward: a pure function of an episode's grade and counts (+ the toy tasks')
    records.py       the episode record: per-token fields written once, by every sampler
"""
