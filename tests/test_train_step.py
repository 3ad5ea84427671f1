import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_train_standin import standin_setup, synthetic_batches

from train.state import create_train_state
from train.step import eval_step, split_microbatches, train_step


def _state(s, seed=0):
    return create_train_state(s.init_fn(jax.random.PRNGKey(seed)), s.tx, jax.random.PRNGKey(1))


def _max_diff(a, b):
    return max(
        float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def test_train_step_is_pure():
    su = standin_setup()
    state = _state(su)
    batch = synthetic_batches(1)[0]
    step = jax.jit(lambda s, b: train_step(s, b, su.loss_fn, bias_update=su.bias_update))
    s1, m1 = step(state, batch)
    s2, m2 = step(state, batch)  # same input -> same output; the input state is not modified
    assert _max_diff(s1.params, s2.params) == 0.0 and float(m1["loss"]) == float(m2["loss"])
    assert int(s1.step) == 1 and int(state.step) == 0
    assert _max_diff(s1.params, state.params) > 0


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_loss_goes_down_with_jit(optimizer):
    su = standin_setup(lr=3e-2, steps=30, optimizer=optimizer)
    state = _state(su)
    step = jax.jit(lambda s, b: train_step(s, b, su.loss_fn, bias_update=su.bias_update))
    batch = synthetic_batches(1)[0]
    losses = []
    for _ in range(30):
        state, m = step(state, batch)
        losses.append(float(m["loss"]))
    assert losses[-1] < 0.7 * losses[0], losses


def test_microbatches_split_rows_strided():
    batch = {"x": jnp.arange(8)[:, None] * jnp.ones((8, 3), jnp.int32)}
    micro = split_microbatches(batch, 2)["x"]
    np.testing.assert_array_equal(micro[0, :, 0], [0, 2, 4, 6])
    np.testing.assert_array_equal(micro[1, :, 0], [1, 3, 5, 7])


def test_gradient_accumulation_matches_full_batch():
    # Token-mean CE only: balance loss and MTP are per-microbatch statistics, not exact sums.
    su = standin_setup(mtp_mode="none", balance=False)
    state = _state(su)
    batch = dict(synthetic_batches(1)[0])
    # Unequal token counts per microbatch: the token-weighted average must still be exact.
    batch["loss_mask"] = batch["loss_mask"].copy()
    batch["loss_mask"][1, 5:] = 0.0
    full, mf = jax.jit(lambda s, b: train_step(s, b, su.loss_fn, bias_update=su.bias_update))(
        state, batch
    )
    acc, ma = jax.jit(
        lambda s, b: train_step(s, b, su.loss_fn, num_microbatches=4, bias_update=su.bias_update)
    )(state, batch)
    np.testing.assert_allclose(mf["ce"], ma["ce"], rtol=1e-6)
    np.testing.assert_allclose(mf["grad_norm"], ma["grad_norm"], rtol=1e-5)
    assert _max_diff(full.params, acc.params) < 1e-6
    # The router bias update saw the same (summed) expert counts.
    np.testing.assert_array_equal(full.params["router_bias"], acc.params["router_bias"])


def test_router_bias_moves_towards_underloaded_experts_only_outside_optimizer():
    su = standin_setup(bias_rate=0.01)
    state = _state(su)
    batch = synthetic_batches(1)[0]
    counts = su.apply(state.params, batch).expert_counts
    new, _ = train_step(state, batch, su.loss_fn, bias_update=su.bias_update)
    load = np.asarray(counts, np.float32)
    want = 0.01 * np.sign(load.mean(-1, keepdims=True) - load)
    np.testing.assert_allclose(new.params["router_bias"], want, atol=1e-7)
    # Without the bias update the (frozen) bias stays exactly where it was.
    new2, _ = train_step(state, batch, su.loss_fn)
    np.testing.assert_array_equal(new2.params["router_bias"], state.params["router_bias"])


def test_non_finite_step_is_skipped_and_counted():
    # Also the notebook case: train_step called as is, without jit.
    su = standin_setup()
    state = _state(su)
    good = synthetic_batches(1)[0]

    def nan_loss(params, batch, rng):
        loss, aux = su.loss_fn(params, batch, rng)
        return loss * jnp.nan, aux

    bad_state, m = train_step(state, good, nan_loss, bias_update=su.bias_update)
    assert int(m["skipped"]) == 1 and int(bad_state.skipped_steps) == 1
    assert int(bad_state.nonfinite_streak) == 1 and int(bad_state.step) == 1
    assert _max_diff(bad_state.params, state.params) == 0.0
    assert _max_diff(bad_state.opt_state, state.opt_state) == 0.0
    bad2, _ = train_step(bad_state, good, nan_loss)
    assert int(bad2.nonfinite_streak) == 2
    ok, _ = train_step(bad2, good, su.loss_fn)
    assert int(ok.nonfinite_streak) == 0 and int(ok.skipped_steps) == 2
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(ok.params))


def test_eval_step_sums_combine_to_the_batch_mean():
    su = standin_setup()
    params = _state(su).params
    batch = synthetic_batches(1)[0]
    whole = eval_step(params, batch, su.loss_fn)
    halves = [
        eval_step(params, jax.tree.map(lambda x, i=i: x[i::2], batch), su.loss_fn) for i in (0, 1)
    ]
    mean_whole = whole["ce_sum"] / whole["weight"]
    mean_halves = sum(h_["ce_sum"] for h_ in halves) / sum(h_["weight"] for h_ in halves)
    np.testing.assert_allclose(mean_whole, mean_halves, rtol=1e-6)


def test_bfloat16_compute_keeps_float32_params_and_loss():
    from test_train_standin import StandInConfig

    su = standin_setup(cfg=StandInConfig(dtype="bfloat16"))
    state = _state(su)
    new, m = jax.jit(lambda s, b: train_step(s, b, su.loss_fn, bias_update=su.bias_update))(
        state, synthetic_batches(1)[0]
    )
    assert m["loss"].dtype == jnp.float32 and np.isfinite(float(m["loss"]))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(new.params))
    loss32 = standin_setup().loss_fn
    _, m32 = jax.jit(lambda s, b: train_step(s, b, loss32))(state, synthetic_batches(1)[0])
    assert abs(float(m["ce"]) - float(m32["ce"])) < 0.05  # bf16 matmuls, same model
