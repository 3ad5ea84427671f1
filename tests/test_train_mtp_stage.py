"""train.trainable='mtp': the stage that trains the MTP draft heads on a finished model (Composer
trains its MTP heads after the base; model/engine.py drafts with them). On the real `tiny` preset
(MoE trunk with router-bias updates, an MoE MTP block): only the MTP module's params move."""

import os
import sys

import jax
import numpy as np
import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_TESTS), _TESTS]

from test_train_loop import tiny_run_config  # noqa: E402

from model.export import save_params  # noqa: E402
from train.sharding import ConfigError  # noqa: E402


def _leaves(params) -> dict:
    return {
        jax.tree_util.keystr(p): np.asarray(v)
        for p, v in jax.tree_util.tree_leaves_with_path(params)
    }


def test_mtp_stage_moves_only_the_mtp_module(tmp_path, tiny_model):
    from train import trainer

    cfg, params = tiny_model
    save_params(str(tmp_path / "base"), cfg, params)
    config = tiny_run_config(steps=3, every=3)
    config.init_params_from = str(tmp_path / "base")
    config.train.update(trainable="mtp", mtp_mode="distill", mtp_weight=1.0)
    state = trainer.train(config, str(tmp_path / "run"), log=lambda _: None)
    before, after = _leaves(params), _leaves(jax.device_get(state.params))
    assert before.keys() == after.keys()
    moved = {k for k in before if not np.array_equal(before[k], after[k])}
    mtp = {k for k in before if k.startswith("['mtp_")}
    # Every trunk leaf (router biases included) is bitwise the base's; the MTP block learned.
    assert moved <= mtp, sorted(moved - mtp)
    assert len(moved) >= len(mtp) // 2, (len(moved), len(mtp))


def test_mtp_stage_needs_an_mtp_loss(tmp_path):
    from train import trainer

    config = tiny_run_config(steps=1)
    config.train.update(trainable="mtp", mtp_mode="none")
    with pytest.raises(ConfigError, match="train.trainable='mtp'"):
        trainer.train(config, str(tmp_path), log=lambda _: None)
