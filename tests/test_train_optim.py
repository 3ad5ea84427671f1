import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from train import optim


def test_cosine_schedule_warmup_peak_and_floor():
    s = optim.make_schedule(
        kind="cosine", peak_lr=1.0, total_steps=100, warmup_steps=10, min_lr_ratio=0.1
    )
    np.testing.assert_allclose([s(0), s(5), s(10), s(100)], [0.0, 0.5, 1.0, 0.1], atol=1e-6)
    assert 0.1 < float(s(55)) < 1.0


def test_wsd_schedule_stable_then_linear_decay():
    s = optim.make_schedule(
        kind="wsd",
        peak_lr=2.0,
        total_steps=100,
        warmup_steps=10,
        min_lr_ratio=0.0,
        decay_fraction=0.2,
    )
    np.testing.assert_allclose([s(10), s(50), s(80), s(90), s(100)], [2, 2, 2, 1, 0], atol=1e-6)


def test_unknown_schedule_is_a_clear_error():
    with pytest.raises(ValueError, match="train.schedule"):
        optim.make_schedule(kind="linear", peak_lr=1.0, total_steps=10, warmup_steps=1)


def _params():
    return {
        "dense": {"kernel": jnp.ones((4, 3)), "bias": jnp.ones((3,))},
        "norm": {"scale": jnp.ones((4,))},
        "embed": jnp.ones((5, 4)),
        "router_bias": jnp.ones((1, 4)),
    }


def _trainable(p):
    return jax.tree_util.tree_map_with_path(
        lambda path, _: "router_bias" not in jax.tree_util.keystr(path), p
    )


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_weight_decay_only_on_matrices_and_frozen_bias_untouched(name):
    p = _params()
    tx = optim.make_optimizer(
        params=p, trainable=_trainable(p), schedule=lambda _: 0.1, optimizer=name, weight_decay=0.5
    )
    zero_grads = jax.tree.map(jnp.zeros_like, p)
    updates, _ = tx.update(zero_grads, tx.init(p), p)
    new = optax.apply_updates(p, updates)
    # Zero gradients: only decoupled weight decay moves params.
    assert float(new["dense"]["kernel"][0, 0]) < 1.0
    assert float(new["embed"][0, 0]) < 1.0
    np.testing.assert_array_equal(new["dense"]["bias"], 1.0)
    np.testing.assert_array_equal(new["norm"]["scale"], 1.0)
    np.testing.assert_array_equal(new["router_bias"], 1.0)
    # Even with a gradient, the frozen bias does not move.
    grads = jax.tree.map(jnp.ones_like, p)
    updates, _ = tx.update(grads, tx.init(p), p)
    np.testing.assert_array_equal(optax.apply_updates(p, updates)["router_bias"], 1.0)


def test_muon_takes_hidden_matrices_only():
    p = _params()
    labels = optim.param_labels(p, _trainable(p), "muon")
    assert labels == {
        "dense": {"kernel": "muon", "bias": "adamw"},
        "norm": {"scale": "adamw"},
        "embed": "adamw",
        "router_bias": "frozen",
    }


def test_global_norm_clipping_happens_before_adam():
    p = {"w": jnp.zeros((2, 2))}
    g = {"w": jnp.full((2, 2), 1e6)}  # global norm 2e6
    for clip, want_mu in [(1.0, 0.1 * 0.5), (None, 0.1 * 1e6)]:  # mu = (1 - b1) * grad
        tx = optim.make_optimizer(
            params=p,
            trainable={"w": True},
            schedule=lambda _: 1.0,
            weight_decay=0.0,
            clip_norm=clip,
        )
        _, state = tx.update(g, tx.init(p), p)
        mu = optax.tree_utils.tree_get(state, "mu")
        np.testing.assert_allclose(mu["w"], want_mu, rtol=1e-5)
