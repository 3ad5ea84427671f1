"""Asynchronous on-policy RL, in folders by role. The trainer itself is train/trainer.py's, shared
by every stage; samplers and trainers share nothing but the two stores.

    loop.py        --mode=rl: the one trainer with the RL loss and the RL batch source, samplers
    run_config.py  what trainer and samplers both derive from the run config (pool order)
    timeline.py    spans of every process and thread -> a Chrome trace + idle fractions
    learning/      trainer side: batch source, training rows, the loss, rewards, the episode
                   record, episode metrics and pass@k
    sampling/      sampler side: sampler processes/threads, samplers, the rollout driver,
                   curriculum (imports no trainer module)
    stores/        the weight store and the rollout store on one kvstore client
    envs/          sandboxed coding environments, tasks, grading, real repositories
    serve/         the OpenAI-compatible server, its interaction log, and the real-time cycle
                   that trains on served feedback

Imports run one way: eval/ may import rl/, never the reverse (tests/test_imports.py).
"""
