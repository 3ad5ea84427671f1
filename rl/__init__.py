"""Asynchronous on-policy RL, by role (the trainer itself is train/trainer.py's, shared by every
stage):

    loop.py            --mode=rl: the one trainer with the RL loss and the RL batch source
    batch_source.py    trainer side: rollout store -> groups (staleness, dynamic sampling,
                       exactly-once books in the checkpoint) -> batch; publishes weights
    batch.py           records -> padded training rows, group-relative advantages
    losses.py          the RL policy loss (GRPO variant, TIS, KL, router replay), pure
    rewards.py         the reward: a pure function of an episode's grade and counts
    episode_metrics.py episode metrics and the pass rule, defined once (RL logs, eval, benchmarks)
    passk.py           the unbiased pass@k estimator (best-of-K, HumanEval)
    records.py         the episode record: per-token fields written once
    store.py           the rollout store (one atomically written file per group)
    weight_store.py    the weight store (shard-wise: snapshots + lossless deltas, resharding fetch, GC)
    sampler_process.py sampler side: pool tasks -> groups, threads or processes
    samplers.py        single-turn sampler (toy task) on the engine
    coding_sampler.py  multi-turn CodingEnv sampler on the rollout driver
    rollout.py         the rollout driver: CodingEnv episodes on one engine (+ rollout_main.py)
    curriculum.py      skip tasks predicted to carry no signal
    envs/              sandboxed coding environments, tasks, grading
"""
