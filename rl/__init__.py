"""Asynchronous on-policy RL, in folders by role and in layers. The trainer itself is
train/trainer.py's, shared by every stage; samplers and trainers share nothing but the two stores.

Layers, bottom first; a folder imports only itself and the folders above it in this list
(tests/test_imports.py checks it, imports inside functions included):

    episodes/  the episode record, rewards, episode metrics, pass@k, the run's timeline: what
               every other folder may import
    envs/      sandboxed coding environments by role (isolation/ < grading/ < agent/ < repos/ <
               taskgen/, the same rule inside)
    stores/    the weight store and the rollout store on one kvstore client
    sampling/  sampler side: sampler processes/threads, samplers, the rollout driver, curriculum,
               run_config.py (what trainer and samplers both derive from the run config); imports
               no trainer module
    learning/  trainer side: loop.py (--mode=rl: the one trainer with the RL loss and batch source,
               samplers), the batch source, training rows and GRPO advantages, the loss
    serve/     the OpenAI-compatible server, its interaction log, and the real-time cycle that
               trains on served feedback

Imports run one way: eval/ may import rl/, never the reverse (tests/test_imports.py).
"""
