import jax
import jax.numpy as jnp
import numpy as np

from model import Transformer
from train import losses


def _np_ce(logits, targets, mask):
    logits = np.asarray(logits, np.float64)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    nll = lse - np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return (nll * mask).sum() / mask.sum()


def test_cross_entropy_matches_numpy_and_respects_mask():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
    targets = rng.integers(0, 7, size=(2, 5))
    mask = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], np.float32)
    got = losses.cross_entropy(jnp.array(logits), jnp.array(targets), jnp.array(mask))
    np.testing.assert_allclose(got, _np_ce(logits, targets, mask), rtol=1e-6)
    # Masked positions do not matter: change their logits wildly, loss unchanged.
    logits2 = logits.copy()
    logits2[0, 2] += 100.0
    got2 = losses.cross_entropy(jnp.array(logits2), jnp.array(targets), jnp.array(mask))
    np.testing.assert_allclose(got2, got, rtol=1e-7)


def test_z_loss_is_mean_squared_logsumexp():
    logits = jnp.log(jnp.array([[[1.0, 1.0], [2.0, 6.0]]]))  # lse = log 2, log 8
    got = losses.z_loss(logits, jnp.ones((1, 2)))
    np.testing.assert_allclose(got, (np.log(2) ** 2 + np.log(8) ** 2) / 2, rtol=1e-6)


def test_mtp_mask_stops_at_document_boundary_and_end():
    seg = jnp.array([[1, 1, 1, 2, 2, 0]])
    mask = jnp.ones((1, 6))
    # depth 0: head at t predicts targets[t+1]; valid where t+1 is in the same segment and exists.
    np.testing.assert_array_equal(losses.mtp_mask(mask, seg, 0), [[1, 1, 0, 1, 0, 0]])
    np.testing.assert_array_equal(losses.mtp_mask(mask, seg, 1), [[1, 0, 0, 0, 0, 0]])


def test_mtp_cross_entropy_uses_shifted_targets():
    rng = np.random.default_rng(1)
    mtp_logits = rng.normal(size=(1, 1, 4, 5)).astype(np.float32)
    targets = np.array([[3, 1, 4, 0]])
    seg = np.ones((1, 4), np.int32)
    got = losses.mtp_cross_entropy(
        jnp.array(mtp_logits), jnp.array(targets), jnp.ones((1, 4)), jnp.array(seg)
    )
    # Head 0 at t predicts targets[t+1]: positions 0..2 valid with targets 1, 4, 0.
    want = _np_ce(mtp_logits[0][:, :3], np.array([[1, 4, 0]]), np.ones((1, 3)))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_self_distillation_kl_zero_at_teacher_and_no_grad_to_main_head():
    rng = np.random.default_rng(2)
    logits = jnp.array(rng.normal(size=(1, 4, 5)).astype(np.float32))
    seg, mask = jnp.ones((1, 4), jnp.int32), jnp.ones((1, 4))
    # Head 0 at t copies the main head at t+1: KL must be 0.
    mtp = jnp.concatenate([logits[:, 1:], logits[:, :1]], axis=1)[None]
    np.testing.assert_allclose(losses.mtp_self_distillation(mtp, logits, mask, seg), 0.0, atol=1e-6)
    g_main, g_mtp = jax.grad(losses.mtp_self_distillation, argnums=(1, 0))(
        mtp + jnp.array(rng.normal(size=mtp.shape), jnp.float32), logits, mask, seg
    )
    assert float(jnp.abs(g_main).max()) == 0.0  # teacher is stop-gradient
    assert float(jnp.abs(g_mtp).max()) > 1e-4


def _tiny_batch(cfg, b=2, t=12, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, cfg.vocab_size, (b, t)).astype(np.int32)
    return dict(
        tokens=tokens,
        targets=np.roll(tokens, -1, axis=1),
        segment_ids=np.ones((b, t), np.int32),
        positions=np.tile(np.arange(t, dtype=np.int32), (b, 1)),
        loss_mask=np.ones((b, t), np.float32),
    )


def test_lm_loss_on_the_real_model_replays_forced_experts_and_skips_mtp_when_off(tiny_model):
    """Router replay: forcing the experts the model itself chose reproduces its loss exactly;
    forcing others changes it. MTP off (mode 'none' or weight 0): no MTP forward, no MTP counts,
    zero gradient for the MTP module; on: an 'mtp' term and MTP expert counts."""
    cfg, params = tiny_model
    batch = _tiny_batch(cfg)
    rng = jax.random.PRNGKey(0)
    # Jitted, as the train step runs them: eager op-by-op dispatch compiles every op of the model.
    off = jax.jit(losses.make_lm_loss(cfg, mtp_mode="none"))
    loss, aux = off(params, batch, rng)
    assert "mtp" not in aux["metrics"] and set(aux["expert_counts"]) == {"main"}
    out = jax.jit(Transformer(cfg).apply)({"params": params}, batch["tokens"])
    own = np.moveaxis(np.asarray(out.expert_ids), 0, 1)  # [L,B,T,k] -> [B,L,T,k], the batch layout
    replay, _ = off(params, {**batch, "forced_experts": own}, rng)
    np.testing.assert_allclose(replay, loss, rtol=1e-6)
    other = (own + 1) % cfg.n_routed_experts
    moved, _ = off(params, {**batch, "forced_experts": other}, rng)
    assert abs(float(moved) - float(loss)) > 1e-4

    zero_weight = losses.make_lm_loss(cfg, mtp_mode="ce", mtp_weight=0.0)
    grads = jax.jit(jax.grad(lambda p: zero_weight(p, batch, rng)[0]))(params)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(grads["mtp_0"]))
    on = jax.jit(losses.make_lm_loss(cfg, mtp_mode="ce", mtp_weight=0.3))
    on_loss, on_aux = on(params, batch, rng)
    assert set(on_aux["expert_counts"]) == {"main", "mtp"}  # tiny's MTP block is MoE
    np.testing.assert_allclose(on_loss, loss + 0.3 * on_aux["metrics"]["mtp"], rtol=1e-5)
