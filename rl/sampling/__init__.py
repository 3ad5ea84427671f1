"""Sampler-side RL: pool tasks -> groups of episodes on the decode engine -> the rollout store.
Nothing here imports a trainer module (tests/test_imports.py), so a sampler process stays small.

    sampler_process.py  samplers as threads or processes (`python -m rl.sampling.sampler_process`):
                        pool order, backpressure (max_ahead), weight follow, restarts
    samplers.py         the single-turn sampler (toy task) and speculative-acceptance counters
    coding_sampler.py   the multi-turn CodingEnv sampler on the rollout driver
    rollout.py          the rollout driver: CodingEnv episodes on one engine (+ rollout_main.py,
                        `--mode=rollout`)
    curriculum.py       skip tasks predicted to carry no signal
    rl_tasks.py         the RL tasks by name (rl.task): pool tasks, samplers, config checks
    summary_toy.py      the self-summarization toy task's chains
"""
