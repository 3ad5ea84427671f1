import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import model
from model import presets
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


TINY = presets.get("tiny")
MUON, ADAMW, NO_DECAY, FROZEN = "muon", "adamw", "adamw_no_decay", "frozen"
D = optax.contrib.MuonDimensionNumbers
ATTN = {  # one MLA block, unstacked: label and, for Muon, (D_in axes, D_out axes)
    "attn/kv_a_norm/scale": (NO_DECAY, None),
    "attn/q_a_norm/scale": (NO_DECAY, None),
    "attn/wk_b": (MUON, D((0,), (1, 2))),  # [kv_latent, heads, head_dim]
    "attn/wkv_a": (MUON, D((0,), (1,))),  # [embed, kv_latent]
    "attn/wo": (MUON, D((0, 1), (2,))),  # [heads, head_dim, embed]
    "attn/wq_a": (MUON, D((0,), (1,))),
    "attn/wq_b": (MUON, D((0,), (1, 2))),
    "attn/wv_b": (MUON, D((0,), (1, 2))),
    "attn_norm/scale": (NO_DECAY, None),
    "mlp_norm/scale": (NO_DECAY, None),
}
DENSE_MLP = {f"mlp/{w}": (MUON, D((0,), (1,))) for w in ("gate", "up", "down")}
MOE = {
    "moe/router": (MUON, D((0,), (1,))),
    "moe/router_bias": (FROZEN, None),
    **{f"moe/shared/{w}": (MUON, D((0,), (1,))) for w in ("gate", "up", "down")},
    **{f"moe/{w}": (MUON, D((1,), (2,))) for w in ("wi_gate", "wi_up", "wo")},  # [E, in, out]
}


def _shift(dims, k):
    """Dims of the same matrix under k leading batch axes ('layers')."""
    if dims is None:
        return None
    return D(tuple(i + k for i in dims.reduction_axis), tuple(i + k for i in dims.output_axis))


# Every param of the tiny preset: the stacks carry a leading 'layers' axis, MTP blocks do not.
EXPECTED = {
    **{f"dense_layers/{k}": (l, _shift(d, 1)) for k, (l, d) in {**ATTN, **DENSE_MLP}.items()},
    **{f"moe_layers/{k}": (l, _shift(d, 1)) for k, (l, d) in {**ATTN, **MOE}.items()},
    **{f"mtp_0/block/{k}": v for k, v in {**ATTN, **MOE}.items()},
    "mtp_0/eh_proj": (MUON, D((0,), (1,))),
    "mtp_0/enorm/scale": (NO_DECAY, None),
    "mtp_0/hnorm/scale": (NO_DECAY, None),
    "mtp_0/head_norm/scale": (NO_DECAY, None),
    "embed": (ADAMW, None),
    "lm_head": (ADAMW, None),
    "final_norm/scale": (NO_DECAY, None),
}


def _flat(tree, is_leaf=None):
    leaves = jax.tree_util.tree_leaves_with_path(tree, is_leaf=is_leaf)
    return {"/".join(str(k.key) for k in p): v for p, v in leaves}


def _norm_dims(dims, ndim):
    red = dims.reduction_axis if isinstance(dims.reduction_axis, tuple) else (dims.reduction_axis,)
    out = dims.output_axis if isinstance(dims.output_axis, tuple) else (dims.output_axis,)
    return D(tuple(i % ndim for i in red), tuple(i % ndim for i in out))


def test_every_tiny_param_gets_the_treatment_of_its_role():
    specs = model.param_logical_specs(TINY)
    shapes = _flat(model.param_shapes(TINY))
    roles = optim.param_roles(specs, model.trainable_mask(model.param_shapes(TINY)))
    labels = _flat(optim.param_labels(roles, "muon"))
    assert set(labels) == set(EXPECTED)  # every param listed, none missing
    spec_of = _flat(specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    for path, (label, dims) in EXPECTED.items():
        assert labels[path] == label, path
        if label == MUON:
            got = _norm_dims(optim.muon_dims(spec_of[path]), len(shapes[path].shape))
            assert got == dims, (path, got, dims)
    # With optimizer='adamw' every Muon matrix is on AdamW with weight decay instead.
    adamw = _flat(optim.param_labels(roles, "adamw"))
    assert {p: l for p, l in adamw.items()} == {
        p: ADAMW if l == MUON else l for p, (l, _) in EXPECTED.items()
    }


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_zero_gradient_step_decays_matrices_only(name):
    """Decoupled weight decay alone (zero gradients): w <- w * (1 - lr * wd) on weight matrices,
    embeddings and head, stacked or not; stacked [L, D] norm scales, the final norm and the
    router bias stay exactly where they are."""
    lr, wd = 0.1, 0.5
    params = model.init_params(TINY, jax.random.PRNGKey(0))
    tx = optim.make_optimizer(
        params=params,
        logical_specs=model.param_logical_specs(TINY),
        schedule=lambda _: lr,
        optimizer=name,
        weight_decay=wd,
        clip_norm=None,
    )
    zero = jax.tree.map(jnp.zeros_like, params)
    new = _flat(optax.apply_updates(params, jax.jit(tx.update)(zero, tx.init(params), params)[0]))
    old = _flat(params)
    for path, (label, _) in EXPECTED.items():
        want = old[path] * (1 - lr * wd) if label in (MUON, ADAMW) else old[path]
        np.testing.assert_allclose(new[path], want, rtol=1e-6, atol=1e-7, err_msg=path)
    assert new["moe_layers/attn_norm/scale"].shape == (1, TINY.hidden_size)
    np.testing.assert_array_equal(new["moe_layers/attn_norm/scale"], 1.0)


def test_muon_orthogonalizes_each_layer_and_expert_slice():
    """A stacked expert matrix [L, E, D, F] and a stacked per-head projection [L, q, H, K] get,
    slice by slice, the update standalone Muon gives that slice as a 2-D matrix; the update's
    singular values are nearly equal (orthogonalized), unlike the gradient's."""
    params = model.init_params(TINY, jax.random.PRNGKey(0))
    # numpy draws: eager jax.random per leaf would compile a threefry kernel for every shape
    grads = jax.tree.map(
        lambda p: np.random.default_rng(p.size % 97).standard_normal(p.shape, np.float32), params
    )
    kw = dict(schedule=lambda _: 1.0, weight_decay=0.0, clip_norm=None)
    tx = optim.make_optimizer(
        params=params, logical_specs=model.param_logical_specs(TINY), optimizer="muon", **kw
    )
    upd = jax.jit(tx.update)(grads, tx.init(params), params)[0]
    ref = optax.contrib.muon(1.0, consistent_rms=0.2)
    cases = [
        (("moe_layers", "moe", "wi_gate"), lambda x: x[0, 3]),  # [D, F] of layer 0, expert 3
        (("moe_layers", "attn", "wq_b"), lambda x: x[0].reshape(x.shape[1], -1)),  # [q, H*K]
    ]
    for path, slice_2d in cases:
        get = lambda t, path=path: functools.reduce(lambda a, k: a[k], path, t)
        g = slice_2d(get(grads))
        want = jax.jit(ref.update)({"w": g}, ref.init({"w": g}), {"w": g})[0]["w"]
        got = slice_2d(get(upd))
        # Two float32 Newton-Schulz programs (batched slices vs one matrix): entries near zero
        # differ by ~1.5e-6 under other XLA codegen (the suite's cheap compiles); a wrong slice or
        # axis is off by ~0.1. The entries reach ~0.5, so atol 1e-5 is 2e-5 of the scale.
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(path))
        s_got, s_grad = (
            np.linalg.svd(np.asarray(got), compute_uv=False),
            np.linalg.svd(g, compute_uv=False),
        )
        assert s_got.max() / s_got.min() < 2.0 < s_grad.max() / s_grad.min(), (s_got, s_grad)


def test_muon_coverage_of_the_small_preset_counted_by_name():
    """Docs quote this share of parameters Muon updates (optimizer='muon'); counted here from
    param names alone: all but the embedding, the head, norm scales and router biases."""
    cfg = presets.get("small")
    shapes = _flat(model.param_shapes(cfg))
    not_muon = sum(
        x.size
        for p, x in shapes.items()
        if p in ("embed", "lm_head") or p.endswith(("/scale", "/router_bias"))
    )
    total = sum(x.size for x in shapes.values())
    coverage = optim.muon_coverage(model.param_shapes(cfg), model.param_logical_specs(cfg))
    assert coverage == pytest.approx(1 - not_muon / total, abs=1e-12)


def test_global_norm_clipping_happens_before_adam():
    p = {"w": jnp.zeros((2, 2))}
    g = {"w": jnp.full((2, 2), 1e6)}  # global norm 2e6
    specs = {"w": jax.sharding.PartitionSpec("embed", "mlp")}
    for clip, want_mu in [(1.0, 0.1 * 0.5), (None, 0.1 * 1e6)]:  # mu = (1 - b1) * grad
        tx = optim.make_optimizer(
            params=p,
            logical_specs=specs,
            schedule=lambda _: 1.0,
            weight_decay=0.0,
            clip_norm=clip,
        )
        _, state = tx.update(g, tx.init(p), p)
        mu = optax.tree_utils.tree_get(state, "mu")
        np.testing.assert_allclose(mu["w"], want_mu, rtol=1e-5)


def test_bfloat16_moments_halve_the_state_and_track_float32_adamw():
    """train.moment_dtype='bfloat16': AdamW's mu and nu are stored in bfloat16 (the step count
    stays int32) and 20 steps on a noisy quadratic land within bfloat16 rounding of float32
    moments' params; an unknown dtype is a one-line error."""
    rng = np.random.default_rng(0)
    p0 = {"w": jnp.asarray(rng.standard_normal((64, 32)), jnp.float32)}
    specs = {"w": jax.sharding.PartitionSpec("embed", "mlp")}
    kw = dict(params=p0, logical_specs=specs, schedule=lambda _: 1e-2, weight_decay=0.1)
    runs = {}
    for dtype in ("float32", "bfloat16"):
        tx = optim.make_optimizer(**kw, moment_dtype=dtype)
        state, p = tx.init(p0), p0
        assert optax.tree_utils.tree_get(state, "nu")["w"].dtype == jnp.dtype(dtype)
        step = jax.jit(tx.update)
        for i in range(20):
            noise = jnp.asarray(np.random.default_rng(i).standard_normal((64, 32)), jnp.float32)
            g = jax.tree.map(lambda w, n=noise: 2 * w + 0.5 * n, p)  # grad of |w|^2 + noise
            upd, state = step(g, state, p)
            p = optax.apply_updates(p, upd)
        counts = [x for x in jax.tree.leaves(state) if not jnp.issubdtype(x.dtype, jnp.floating)]
        assert counts and all(c.dtype == jnp.int32 and int(c) == 20 for c in counts)
        assert optax.tree_utils.tree_get(state, "mu")["w"].dtype == jnp.dtype(dtype)
        runs[dtype] = np.asarray(p["w"])
    moved = np.abs(runs["float32"] - np.asarray(p0["w"])).max()  # ~20 steps x lr
    assert moved > 0.1
    np.testing.assert_allclose(runs["bfloat16"], runs["float32"], atol=0.02 * moved)
    with pytest.raises(ValueError, match="train.moment_dtype='float16': expected"):
        optim.make_optimizer(**kw, moment_dtype="float16")


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_mtp_schedule_scales_only_the_mtp_modules_steps(name):
    """An MTP schedule at 4x the lr (train.mtp_lr): every MTP-module leaf's update is 4x the one
    without it (AdamW's and Muon's steps, weight decay included, are linear in the lr), every
    other leaf's is the same, up to float32 rounding (another grouping of leaves compiles another
    program: Muon's Newton-Schulz iterations differ by ~1e-7 on updates of ~1e-2), and the frozen
    router bias does not move."""
    params = model.init_params(TINY, jax.random.PRNGKey(0))
    grads = jax.tree.map(
        lambda p: np.random.default_rng(p.size % 89).standard_normal(p.shape, np.float32), params
    )
    kw = dict(
        params=params,
        logical_specs=model.param_logical_specs(TINY),
        schedule=lambda _: 0.01,
        optimizer=name,
        weight_decay=0.1,
        clip_norm=None,
    )
    step = lambda tx: _flat(jax.jit(tx.update)(grads, tx.init(params), params)[0])  # noqa: E731
    base = step(optim.make_optimizer(**kw))
    scaled = step(optim.make_optimizer(**kw, mtp_schedule=lambda _: 0.04))
    mtp = [p for p in base if p.startswith("mtp_")]
    assert mtp and len(mtp) < len(base)
    close = dict(rtol=1e-4, atol=1e-6)
    for path in base:
        want = 4 * base[path] if path.startswith("mtp_") else base[path]
        np.testing.assert_allclose(scaled[path], want, **close, err_msg=path)
    for path in (p for p in base if p.endswith("router_bias")):
        np.testing.assert_array_equal(scaled[path], 0.0, err_msg=path)


def test_a_negative_mtp_lr_is_a_one_line_config_error():
    from configs import default
    from model.errors import ConfigError
    from train.config_check import check_config

    c = default.get_config()
    c.train.mtp_lr = -1e-3
    with pytest.raises(ConfigError, match=r"^train.mtp_lr=-0.001: must be >= 0"):
        check_config(c, TINY, num_devices=1)
