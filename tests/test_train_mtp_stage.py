"""train.trainable='mtp': the stage that trains the MTP draft heads on a finished model (Composer
trains its MTP heads after the base; model/engine/speculation.py drafts with them). On the real
`tiny` preset (MoE trunk with router-bias updates, an MoE MTP block): only the MTP module's params
move."""

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
    config = tiny_run_config(steps=2, every=2)
    config.init_params_from = str(tmp_path / "base")
    # No held-out batches: the held-out evaluation (its own compile) checks nothing asserted here.
    config.train.update(trainable="mtp", mtp_mode="distill", mtp_weight=1.0, eval_batches=0)
    state = trainer.train(config, str(tmp_path / "run"), log=lambda _: None)
    before, after = _leaves(params), _leaves(jax.device_get(state.params))
    assert before.keys() == after.keys()
    moved = {k for k in before if not np.array_equal(before[k], after[k])}
    mtp = {k for k in before if k.startswith("['mtp_")}
    # Every trunk leaf (router biases included) is bitwise the base's; the MTP block learned.
    assert moved <= mtp, sorted(moved - mtp)
    assert len(moved) >= len(mtp) // 2, (len(moved), len(mtp))


def test_mtp_stage_loss_has_no_gradient_outside_the_mtp_module(tiny_model):
    """The trunk's backward is dropped, not computed and discarded: its gradient is exactly 0."""
    from train.losses import make_lm_loss

    cfg, params = tiny_model
    tokens = jax.random.randint(jax.random.PRNGKey(1), (2, 16), 0, cfg.vocab_size)
    batch = {
        "tokens": tokens,
        "targets": np.roll(np.asarray(tokens), -1, 1),
        "loss_mask": np.ones(tokens.shape, np.float32),
        "positions": np.broadcast_to(np.arange(16), tokens.shape),
        "segment_ids": np.ones(tokens.shape, np.int32),
    }
    grads = {}
    for trainable in ("all", "mtp"):
        loss_fn = make_lm_loss(cfg, mtp_mode="distill", mtp_weight=1.0, trainable=trainable)
        grad = jax.jit(jax.grad(lambda p, f=loss_fn: f(p, batch, None)[0]))  # eager: 36 s
        grads[trainable] = _leaves(grad(params))
    for k, g in grads["mtp"].items():
        if k.startswith("['mtp_"):
            # the MTP loss's own gradient; two programs, so equal up to float32 rounding (bitwise
            # only while XLA happens to fuse both alike), while the frozen trunk's is exactly 0
            np.testing.assert_allclose(g, grads["all"][k], rtol=1e-5, atol=1e-9)
        else:
            assert not np.any(g), k
    assert any(np.any(g) for k, g in grads["mtp"].items() if k.startswith("['mtp_"))


def test_mtp_stage_needs_an_mtp_loss(tmp_path):
    from train import trainer

    config = tiny_run_config(steps=1)
    config.train.update(trainable="mtp", mtp_mode="none")
    with pytest.raises(ConfigError, match="train.trainable='mtp'"):
        trainer.train(config, str(tmp_path), log=lambda _: None)


def test_mtp_stage_flops_count_the_trunk_forward_only():
    """MFU lines of the MTP stage: trunk forward once, MTP modules forward + backward (3x)."""
    from model import flops_per_token, presets

    for name in ("tiny", "small"):
        cfg = presets.get(name)
        trunk = flops_per_token(cfg.replace(num_mtp_modules=0), 128, training=False)
        mtp = flops_per_token(cfg, 128, training=False) - trunk
        assert mtp > 0
        assert flops_per_token(cfg, 128) == 3 * (trunk + mtp)
        assert flops_per_token(cfg, 128, trainable="mtp") == trunk + 3 * mtp
