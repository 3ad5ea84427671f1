"""What the RL trainer (rl/learning/loop.py, rl/learning/batch_source.py) and the samplers
(rl/sampling/sampler_process.py) both derive from the run config: the policy's model config and the
pool's training order. It lives below both, so a sampler process imports no trainer module
(tests/test_imports.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from train.model_config import model_config as train_model_config


def model_config(config):
    """The policy's model config (train/model_config.py: exported params, an HF folder or a
    preset); a random-init preset's positions are extended to cover an episode (rl.max_tokens)."""
    cfg, hf_dir = train_model_config(config)
    if hf_dir is None and not config.init_params_from:
        positions = max(cfg.max_position_embeddings, config.rl.max_tokens)
        cfg = dataclasses.replace(cfg, max_position_embeddings=positions)
    return cfg


def pool_order(rl) -> list[int]:
    """Single epoch: each task of the pool once, in a seeded order (saved in the checkpoint)."""
    return [int(x) for x in np.random.default_rng(rl.seed).permutation(rl.pool_size)]
