"""RL loss and rewards: hand-computed values on toy logits, the KL gradient against the analytic
gradient on a categorical, router replay on the real tiny model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from data.tokenizers import ByteTokenizer
from rl.episodes import rewards as rw
from rl.episodes.records import episode_records
from rl.episodes.schema import EpisodeRecord
from rl.learning import batch as rb
from rl.learning import grpo, staleness
from rl.learning.grpo import make_rl_loss
from rl.learning.losses import model_apply, token_logprobs

TOK = ByteTokenizer()

jax.config.update("jax_enable_x64", False)


def _toy_apply(params, tokens, positions=None, segment_ids=None, forced_experts=None):
    """Stand-in model for loss arithmetic only: the logits ARE the params ([B,T,V])."""

    class Out:
        logits = params["logits"]
        expert_counts = None

    return Out


def _batch(targets, mask, adv, sampler_lp, groups=None):
    b, t = targets.shape
    return {
        "tokens": jnp.zeros((b, t), jnp.int32),
        "targets": jnp.asarray(targets, jnp.int32),
        "positions": jnp.zeros((b, t), jnp.int32),
        "segment_ids": jnp.ones((b, t), jnp.int32),
        "loss_mask": jnp.asarray(mask, jnp.float32),
        "advantages": jnp.asarray(adv, jnp.float32),
        "sampler_logprobs": jnp.asarray(sampler_lp, jnp.float32),
        "group_ids": jnp.asarray(groups if groups is not None else np.zeros(b), jnp.int32),
    }


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_group_advantage_has_no_std_division():
    adv = grpo.group_advantages([1.0, 0.0, 0.0, 0.0, 0.5, 0.7], ["a", "a", "a", "a", "b", "b"])
    # group a: mean 0.25 -> 0.75, -0.25 x3 (with std division it would be 1.73, -0.58)
    np.testing.assert_allclose(adv, [0.75, -0.25, -0.25, -0.25, -0.1, 0.1], atol=1e-6)


def _setup(seed=0, b=2, t=5, v=7):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(b, t, v)).astype(np.float32)
    targets = rng.integers(0, v, size=(b, t))
    lp = np.take_along_axis(_log_softmax(logits), targets[..., None], -1)[..., 0]
    return {"logits": jnp.asarray(logits)}, targets, lp


def test_loss_value_and_zero_advantage_zero_grad():
    params, targets, lp = _setup()
    mask = np.array([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]], np.float32)
    adv = np.array([[0.5] * 5, [-1.0] * 5], np.float32) * mask
    loss_fn = make_rl_loss(_toy_apply, norm_tokens=10)
    loss, aux = loss_fn(params, _batch(targets, mask, adv, lp), None)
    # On-policy (sampler lp == trainer lp): ratio 1, w 1, loss = -sum(A logp m) / (10 * 2 rows).
    want = -(adv * lp * mask).sum() / 20.0
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    np.testing.assert_allclose(float(aux["metrics"]["ratio_mean"]), 1.0, rtol=1e-5)
    grads = jax.grad(lambda p: loss_fn(p, _batch(targets, mask, 0 * adv, lp), None)[0])(params)
    assert float(jnp.max(jnp.abs(grads["logits"]))) == 0.0


def test_episode_weight_does_not_depend_on_its_length():
    """Per-token gradient coefficient d loss / d logp_t = -A w / (norm * B) in a 1-token and a
    5-token episode alike (per-episode length normalization would give -A/1 vs -A/5)."""
    params, targets, lp = _setup(seed=1)
    mask = np.array([[0, 0, 0, 0, 1], [1, 1, 1, 1, 1]], np.float32)
    adv = np.ones((2, 5), np.float32) * mask
    loss_fn = make_rl_loss(_toy_apply, norm_tokens=8)
    g = jax.grad(lambda p: loss_fn(p, _batch(targets, mask, adv, lp), None)[0])(params)["logits"]
    p = np.exp(_log_softmax(np.asarray(params["logits"])))
    onehot = np.eye(7)[targets]
    # d logp_t / d logits_t = onehot - p, so coefficient = g / (onehot - p) at the target index.
    coef = (np.asarray(g) / (onehot - p))[np.arange(2)[:, None], np.arange(5), targets]
    np.testing.assert_allclose(coef[0, 4], -1.0 / 16, rtol=1e-5)
    np.testing.assert_allclose(coef[1], np.full(5, -1.0 / 16), rtol=1e-5)


def test_tis_truncates_at_c():
    params, targets, lp = _setup(seed=2, b=1, t=4)
    mask = np.ones((1, 4), np.float32)
    adv = np.ones((1, 4), np.float32)
    ratios = np.array([[3.0, 0.5, 2.5, 1.5]])
    sampler = lp - np.log(ratios)  # trainer/sampler ratio = ratios
    loss_fn = make_rl_loss(_toy_apply, norm_tokens=1, tis_c=2.0)
    (loss, aux), g = jax.value_and_grad(
        lambda p: loss_fn(p, _batch(targets, mask, adv, sampler), None), has_aux=True
    )(params)
    w = np.minimum(ratios, 2.0)  # [2, 0.5, 2, 1.5]
    np.testing.assert_allclose(float(loss), -(w * lp).sum(), rtol=1e-5)
    assert float(aux["metrics"]["tis_truncated_frac"]) == pytest.approx(0.5)
    np.testing.assert_allclose(float(aux["metrics"]["ratio_mean"]), ratios.mean(), rtol=1e-5)
    p = np.exp(_log_softmax(np.asarray(params["logits"])))
    coef = (np.asarray(g["logits"]) / (np.eye(7)[targets] - p))[0, np.arange(4), targets[0]]
    np.testing.assert_allclose(coef, -w[0], rtol=1e-5)


def _expected_grad(kl_mode, theta, ref_lp, beta):
    """Exact E_{x~pi}[grad of the per-sample loss] by enumeration: one row per token x of V,
    sampled from a uniform behaviour policy mu (sampler lp = -log V), TIS weight pi/mu untruncated;
    the row mean of the loss is then sum_x mu(x) pi(x)/mu(x) g(x) = E_pi[g]."""
    v = theta.shape[0]

    def loss(th):
        params = {"logits": jnp.broadcast_to(th, (v, 1, v))}
        batch = _batch(
            np.arange(v)[:, None],
            np.ones((v, 1)),
            np.zeros((v, 1)),
            np.full((v, 1), -np.log(v)),
        )
        batch["ref_logprobs"] = jnp.asarray(ref_lp[:, None], jnp.float32)
        fn = make_rl_loss(_toy_apply, norm_tokens=1, tis_c=1e9, kl_beta=beta, kl_mode=kl_mode)
        return fn(params, batch, None)[0]

    return jax.grad(loss)(theta)


def test_kl_gradient_matches_analytic_and_plain_k1_has_zero_expected_gradient():
    rng = np.random.default_rng(3)
    v, beta = 5, 0.3
    theta = jnp.asarray(rng.normal(size=v), jnp.float32)
    ref_logits = rng.normal(size=v)
    ref_lp = _log_softmax(ref_logits).astype(np.float32)

    def kl(th):  # beta * KL(pi || ref), the intended objective
        lp = jax.nn.log_softmax(th)
        return beta * jnp.sum(jnp.exp(lp) * (lp - ref_lp))

    want = np.asarray(jax.grad(kl)(theta))
    assert np.abs(want).max() > 1e-2  # a non-trivial gradient
    for mode in ("k2", "reward"):
        got = np.asarray(_expected_grad(mode, theta, ref_lp, beta))
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=mode)

    # Plain k1 (log pi - log ref) as a loss term: E_pi[grad k1] = E_pi[grad log pi] = 0.
    def k1_expected(th):
        lp = jax.nn.log_softmax(th)
        pi = jax.lax.stop_gradient(jnp.exp(lp))
        return jnp.sum(pi * beta * (lp - ref_lp))

    np.testing.assert_allclose(np.asarray(jax.grad(k1_expected)(theta)), 0.0, atol=1e-6)


def test_router_replay_reproduces_sampler_logprobs_on_tiny(tiny_model):
    """Real tiny model: generate at temperature 0.7, collate the records, and the loss's forward
    with replayed experts gives the sampler's logprobs (float32, 1e-4) -> ratio 1."""
    from model import generate
    from rl.sampling.samplers import records_from_generate

    cfg, params = tiny_model
    out = generate(cfg, params, [[1, 2, 3], [4, 5]], 6, temperature=0.7, seed=1)
    recs = records_from_generate(out, [[1, 2, 3], [4, 5]], ["g0", "g0"], rewards=[1.0, 0.0])
    k = cfg.num_experts_per_tok
    b = rb.collate(recs, seq_len=16, rows=2, n_moe_layers=cfg.num_moe_layers, k=k)
    apply = model_apply(cfg)
    fwd = jax.jit(apply)(  # jitted: eager dispatch compiles every op of the model
        params,
        b["tokens"],
        positions=b["positions"],
        segment_ids=b["segment_ids"],
        forced_experts=jnp.moveaxis(b["forced_experts"], 1, 0),
    )
    lp, _ = token_logprobs(fwd.logits, b["targets"], 0.7)
    m = b["loss_mask"] > 0
    assert m.sum() == 12
    np.testing.assert_allclose(np.asarray(lp)[m], b["sampler_logprobs"][m], atol=1e-4)
    loss_fn = make_rl_loss(apply, norm_tokens=16, temperature=0.7)
    _, aux = jax.jit(loss_fn)(params, {k_: jnp.asarray(v) for k_, v in b.items()}, None)
    assert float(aux["metrics"]["ratio_mean"]) == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(b["advantages"][0][m[0]], 0.5)  # rewards 1, 0 in one group


# --- rewards -----------------------------------------------------------------------------------


def test_length_penalty_increasing_and_concave():
    term = rw.LengthTerm(lam=0.2, scale=100.0, power=0.5)
    x = np.arange(0, 2000, 10.0)
    f = np.array([rw.length_penalty(v, term) for v in x])
    assert f[0] == 0.0
    d1 = np.diff(f)
    assert (d1 > 0).all()  # increasing
    assert (np.diff(d1) < 0).all()  # concave (strictly, on this grid)
    # formula: 0.2 * ((1 + 300/100)^0.5 - 1) = 0.2
    assert rw.length_penalty(300, term) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="power"):
        rw.LengthTerm(lam=0.1, power=1.5)


def test_rewards_terms_and_malformed_penalty():
    cfg = rw.RewardConfig(
        outcome="fraction",
        malformed_penalty=0.3,
        length={q: rw.LengthTerm(0.1, 100.0, 0.5) for q in rw.LENGTH_QUANTITIES},
    )
    counts = dict(thinking_tokens=0, tool_io_tokens=300, output_tokens=0, tool_calls=0, turns=0)
    rec = {"tests_passed": 3, "tests_total": 4, "counts": dict(counts, malformed_calls=0)}
    r_ok, terms = rw.episode_reward(rec, cfg)
    assert terms["outcome"] == 0.75 and terms["len_tool_io_tokens"] == pytest.approx(-0.1)
    assert r_ok == pytest.approx(sum(terms.values())) and r_ok == pytest.approx(0.65)
    r_bad, terms_bad = rw.episode_reward(dict(rec, counts=dict(counts, malformed_calls=2)), cfg)
    assert r_bad == pytest.approx(r_ok - 0.3) and terms_bad["malformed"] == -0.3
    all_pass = rw.RewardConfig(outcome="all_pass")
    assert rw.episode_reward(rec, all_pass)[0] == 0.0
    assert rw.episode_reward(dict(rec, tests_passed=4), all_pass)[0] == 1.0


def test_tampered_episode_scores_below_an_honest_failure():
    # The grader flags tampering (rl/envs/grading/tasks.py Grade.tampered); the reward must then be
    # worse than an honest 0/total, whatever counts the record claims, in both outcome modes.
    for mode in ("fraction", "all_pass"):
        cfg = rw.RewardConfig(outcome=mode, malformed_penalty=0.0)
        honest_fail = {"tests_passed": 0, "tests_total": 4, "counts": {}}
        tampered = {"tests_passed": 4, "tests_total": 4, "tampered": True, "counts": {}}
        r_fail, r_tamper = (rw.episode_reward(r, cfg)[0] for r in (honest_fail, tampered))
        assert r_tamper < r_fail == 0.0


def test_malformed_turn_tokens_are_negative_examples():
    recs = [
        dict(
            tokens=[1, 2, 3, 4],
            mask=[0, 1, 1, 1],
            logprobs=[0, -1, -1, -1],
            reward=1.0,
            group_id="g",
            malformed_mask=[0, 0, 1, 1],
        ),
        dict(tokens=[1, 2, 3, 4], mask=[0, 1, 1, 1], logprobs=[0] * 4, reward=0.0, group_id="g"),
    ]
    b = rb.collate(recs, seq_len=4, rows=2, n_moe_layers=0, k=1, malformed_adv=0.2)
    np.testing.assert_allclose(b["advantages"][0, :3], [0.5, -0.2, -0.2])
    np.testing.assert_allclose(b["advantages"][1, :3], [-0.5, -0.5, -0.5])


def test_negative_advantages_scaled_positive_ones_kept():
    """Group rewards 1, 0, 0, 0: mean 0.25, advantages 0.75, -0.25 x3; negative_scale 0.2 keeps
    0.75 and makes the rest -0.05; 0 reinforces only the success; the malformed rule still
    applies."""
    rec = lambda r, **kw: dict(
        tokens=[1, 2, 3], mask=[0, 1, 1], logprobs=[0, -1, -1], reward=r, group_id="g", **kw
    )
    recs = [rec(1.0), rec(0.0), rec(0.0), rec(0.0, malformed_mask=[0, 0, 1])]
    collate = lambda s, m=0.0: rb.collate(
        recs, seq_len=2, rows=4, n_moe_layers=0, k=1, negative_scale=s, malformed_adv=m
    )["advantages"]
    np.testing.assert_allclose(collate(1.0)[:, 0], [0.75, -0.25, -0.25, -0.25])
    np.testing.assert_allclose(collate(0.2)[:, 0], [0.75, -0.05, -0.05, -0.05], rtol=1e-6)
    np.testing.assert_allclose(collate(0.0), [[0.75, 0.75], [0, 0], [0, 0], [0, 0]])
    np.testing.assert_allclose(collate(0.0, m=0.3)[3], [0.0, -0.3])  # malformed turn: -0.3
    with pytest.raises(ValueError, match="negative_scale"):
        collate(1.5)


def test_multi_turn_record_carries_the_malformed_penalty_and_negative_turn():
    """A 2-turn episode (the env's record, as rl/sampling/rollout.py's driver turns it into a
    record) whose first turn had a malformed call: its reward carries the penalty and the malformed
    turn's tokens get a negative advantage even in the better episode of the group."""
    arrays = dict(
        tokens=[1, 2, 3, 4, 5, 6, 7, 8],
        logprobs=[0, 0, -1, -1, 0, -1, -1, 0],
        versions=[-1, -1, 3, 3, -1, 4, 4, -1],
        experts=np.zeros((1, 8, 2), int),
    )
    cfg = rw.RewardConfig(outcome="all_pass", malformed_penalty=0.25)

    def record(sample, malformed_turns, passed):
        env_rec = EpisodeRecord(
            task_id="t",
            tokens=arrays["tokens"],
            mask=[0, 0, 1, 1, 0, 1, 1, 0],
            prompt_len=2,
            turns=2,
            tool_calls=1,
            tool_io_tokens=3,
            malformed_calls=len(malformed_turns),
            malformed_turns=malformed_turns,
            turn_spans=[(2, 4), (5, 7)],
            done_reason="submit",
            tests_passed=passed,
            tests_total=2,
        )
        (rec,) = episode_records(
            env_rec, [arrays], TOK, cfg, group=0, sample=sample, policy="model"
        )
        return rec

    good, bad = record(0, [0], passed=2), record(1, [], passed=0)
    # byte ids outside tool calls: the 4 emitted tokens are output tokens
    assert good["counts"]["output_tokens"] == 4 and good["counts"]["malformed_calls"] == 1
    assert good["reward"] == pytest.approx(0.75) and good["reward_terms"]["malformed"] == -0.25
    assert bad["reward"] == 0.0 and bad["reward_terms"] == {"outcome": 0.0, "malformed": 0.0}
    assert good["group_id"] == bad["group_id"] == "t/0" and (good["chain"], bad["chain"]) == (0, 1)
    np.testing.assert_array_equal(good["malformed_mask"], [0, 0, 1, 1, 0, 0, 0, 0])
    b = rb.collate([good, bad], seq_len=8, rows=2, n_moe_layers=1, k=2, malformed_adv=0.1)
    # A = +-0.375; targets t+1: malformed tokens 2,3 sit at positions 1,2.
    np.testing.assert_allclose(b["advantages"][0, :7], [0, -0.1, -0.1, 0, 0.375, 0.375, 0])
    np.testing.assert_allclose(b["advantages"][1, :7], [0, -0.375, -0.375, 0, -0.375, -0.375, 0])
    assert staleness.oldest_version([good]) == 3


def test_a_branched_groups_shared_prefix_is_out_of_the_loss():
    """Three records of a best-of-K group branched after a 1-turn prefix (tokens 0..4, its turn at
    2..3): collate gives the prefix's policy tokens loss_mask 0 (and so advantage and sampler
    log-prob 0) in every row; everything after it is as without the field, and the record's own
    mask is untouched (rl/sampling/rollout.py: the prefix's terms are the same in all K rows, so
    with group-relative advantages they would sum to 0 anyway)."""
    base = dict(
        tokens=[1, 2, 3, 4, 5, 6, 7, 8],
        logprobs=[0, 0, -1, -1, 0, -1, -1, 0],
        versions=[-1, -1, 3, 3, -1, 4, 4, -1],
        experts=np.zeros((1, 8, 2), int),
    )
    cfg = rw.RewardConfig(outcome="all_pass")

    def record(sample, passed):
        mask, spans = [0, 0, 1, 1, 0, 1, 1, 0], [(2, 4), (5, 7)]
        env_rec = EpisodeRecord("t", base["tokens"], mask, 2, 2, 1, 3, 0, [], spans, "submit")
        env_rec.tests_passed, env_rec.tests_total = passed, 2
        (rec,) = episode_records(env_rec, [base], TOK, cfg, group=0, sample=sample, policy="model")
        return rec

    plain = [record(i, p) for i, p in enumerate((2, 0, 0))]
    branched = [dict(r, shared_prefix=5) for r in plain]
    want = rb.collate(plain, seq_len=8, rows=3, n_moe_layers=1, k=2)
    got = rb.collate(branched, seq_len=8, rows=3, n_moe_layers=1, k=2)
    np.testing.assert_array_equal(want["loss_mask"][:, :7], [[0, 1, 1, 0, 1, 1, 0]] * 3)
    np.testing.assert_array_equal(got["loss_mask"][:, :7], [[0, 0, 0, 0, 1, 1, 0]] * 3)
    for k in ("advantages", "sampler_logprobs"):
        assert np.all(got[k][:, :4] == 0) and np.array_equal(got[k][:, 4:], want[k][:, 4:])
    np.testing.assert_allclose(want["advantages"][:, 1:3].sum(0), 0, atol=1e-6)  # sum_i A_i = 0
    assert all(r["mask"].tolist() == [0, 0, 1, 1, 0, 1, 1, 0] for r in branched)


def _rollout_batch(cfg, b=2, t=16):
    """A batch of rollout-like rows on the tiny model: prompt (3 tokens), then policy tokens."""
    tokens = jax.random.randint(jax.random.PRNGKey(1), (b, t), 0, cfg.vocab_size)
    mask = np.zeros((b, t), np.float32)
    mask[:, 2:] = 1.0  # targets 3.. were sampled
    return {
        "tokens": tokens,
        "targets": jnp.roll(tokens, -1, 1),
        "positions": jnp.broadcast_to(jnp.arange(t), (b, t)),
        "segment_ids": jnp.ones((b, t), jnp.int32),
        "loss_mask": jnp.asarray(mask),
        "advantages": jnp.asarray(np.linspace(-1, 1, b)[:, None] * np.ones((1, t)), jnp.float32),
        "sampler_logprobs": jnp.full((b, t), -5.0, jnp.float32),
        "group_ids": jnp.zeros((b,), jnp.int32),
    }


def _leaves(tree) -> dict:
    return {
        jax.tree_util.keystr(p): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(tree)
    }


def test_mtp_distillation_gradient_reaches_only_the_mtp_modules(tiny_model):
    """Issue 44: the RL loss's MTP self-distillation term moves the MTP module alone: with zero
    advantages the policy term has no gradient, and the loss's gradient (the term's) is exactly
    0 on every trunk leaf (hidden states, embedding, output head behind stop_gradient), nonzero
    on the MTP module's."""
    from rl.learning.losses import model_mtp_apply

    cfg, params = tiny_model
    batch = dict(_rollout_batch(cfg), advantages=jnp.zeros((2, 16), jnp.float32))
    loss = make_rl_loss(
        model_apply(cfg), norm_tokens=16, mtp_fn=model_mtp_apply(cfg), mtp_weight=1.0
    )
    value_and_grad = jax.jit(jax.value_and_grad(lambda p: loss(p, batch, None)[0]))
    value, grads = value_and_grad(params)
    assert float(value) > 0  # the random-init head is not the policy
    grads = _leaves(grads)
    mtp = [k for k in grads if k.startswith("['mtp_")]
    assert sum(np.any(grads[k]) for k in mtp) >= len(mtp) // 2, mtp
    for k, g in grads.items():
        if k not in mtp:
            assert not np.any(g), k


def test_mtp_distillation_matches_the_mtp_stage_loss_on_tiny(tiny_model):
    """The term's MTP logits are the full forward's (Transformer with_mtp=True), and at
    temperature 1 its per-token KL is train/losses.py's MTP-stage self-distillation (one head);
    at another temperature it is the KL of the tempered distributions the sampler verifies."""
    from model.transformer import Transformer
    from rl.learning.losses import model_mtp_apply, mtp_distillation
    from train.losses import mtp_self_distillation

    cfg, params = tiny_model
    batch = _rollout_batch(cfg)
    args = (batch["tokens"], batch["positions"], batch["segment_ids"])
    full = jax.jit(lambda p: Transformer(cfg).apply({"params": p}, args[0], positions=args[1]))(
        params
    )
    got = jax.jit(model_mtp_apply(cfg))(params, full.hidden, *args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(full.mtp_logits), atol=1e-5)
    mask = batch["loss_mask"]
    kl, n, acc, n_acc = mtp_distillation(got, full.logits, mask, args[2], 1.0, 0)
    want = mtp_self_distillation(full.mtp_logits, full.logits, mask, args[2])
    np.testing.assert_allclose(float(kl / n), float(want), rtol=1e-5)
    assert 0.0 < float(acc / n_acc) < 1.0
    # A head that equals the teacher: KL 0, every first draft accepted (also tempered, masked).
    teacher = jnp.roll(full.logits, -1, 1)[None]  # head 0 at t <- main head at t+1
    kl, _, acc, n_acc = mtp_distillation(teacher, full.logits, mask, args[2], 0.7, 300)
    assert abs(float(kl)) < 1e-3 and float(acc / n_acc) == pytest.approx(1.0, abs=1e-5)


def test_mtp_weight_default_follows_heads_and_speculative_decoding(tiny_model):
    import dataclasses

    from configs import rl as rl_config
    from model.errors import ConfigError
    from rl.learning.loop import mtp_weight

    cfg, _ = tiny_model
    rl = rl_config.get_config().rl
    assert mtp_weight(cfg, rl) == 0.0  # plain decoding: off
    rl.speculative_k = 2
    assert mtp_weight(cfg, rl) == 1.0
    assert mtp_weight(dataclasses.replace(cfg, num_mtp_modules=0), rl) == 0.0
    rl.mtp_weight = 0.5
    assert mtp_weight(cfg, rl) == 0.5
    with pytest.raises(ConfigError, match=r"rl.mtp_weight=0.5: the model has no MTP"):
        mtp_weight(dataclasses.replace(cfg, num_mtp_modules=0), rl)


def test_context_order_moves_every_token_axis_together_and_refuses_mtp():
    """Context parallelism's zig-zag order for an RL batch: [B,T] arrays and forced_experts'
    T axis (axis 2 of [B,n,T,k]) take the same permutation; per-row arrays stay; MTP is refused."""
    from model import context
    from rl.learning.losses import context_order

    b, n, t, k = 2, 3, 8, 2
    tokens = jnp.arange(b * t).reshape(b, t)
    batch = {
        "tokens": tokens,
        "loss_mask": jnp.ones((b, t)),
        "group_ids": jnp.arange(b),
        "forced_experts": jnp.broadcast_to(tokens[:, None, :, None], (b, n, t, k)),
    }
    out = context_order(batch, 2)
    order = context.zigzag_order(t, 2)
    np.testing.assert_array_equal(out["tokens"], tokens[:, order])
    np.testing.assert_array_equal(
        out["forced_experts"][:, :, :, 0], out["tokens"][:, None, :].repeat(n, 1)
    )
    np.testing.assert_array_equal(out["group_ids"], batch["group_ids"])
    assert not np.array_equal(order, np.arange(t))  # a real permutation
    assert context_order(batch, 1) is batch
    with pytest.raises(ValueError, match="rl.mtp_weight with a context axis"):
        context_order(batch, 2, mtp=True)


def test_uniform_term_matches_numpy_and_keeps_its_gradient_where_the_policy_saturated():
    """rl.uniform_beta: beta * KL(uniform over the valid ids || pi) per policy token, against a
    numpy reference (value and the analytic gradient beta (pi_j - 1/n) / (norm * B) on valid
    logits, 0 on masked ids and on tokens outside the loss mask). On a saturated row (pi ~ 1 on
    one id) its gradient stays ~beta while the k2 KL's is ~0: the floor the toy needed."""
    b, t, v, n, beta, norm = 2, 3, 7, 5, 0.3, 4
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(b, t, v)).astype(np.float32)
    logits[1, 2, :n] = [12.0, 0.0, 0.0, 0.0, 0.0]  # saturated: pi(0) ~ 1 - 2.5e-5
    targets = np.zeros((b, t), np.int64)
    mask = np.array([[1, 1, 0], [0, 1, 1]], np.float32)
    lp_valid = _log_softmax(logits[..., :n].astype(np.float64))  # [B,T,n]
    sampler = lp_valid[..., 0]
    batch = _batch(targets, mask, np.zeros((b, t)), sampler)
    fn = make_rl_loss(_toy_apply, norm_tokens=norm, uniform_beta=beta, valid_vocab=n)
    params = {"logits": jnp.asarray(logits)}
    (loss, aux), g = jax.value_and_grad(lambda p: fn(p, batch, None), has_aux=True)(params)
    kl = -np.log(n) - lp_valid.mean(-1)  # [B,T] KL(u || pi)
    np.testing.assert_allclose(float(loss), beta * (kl * mask).sum() / (norm * b), rtol=1e-5)
    np.testing.assert_allclose(
        float(aux["metrics"]["uniform_kl"]), (kl * mask).sum() / mask.sum(), rtol=1e-5
    )
    want = np.zeros((b, t, v))
    want[..., :n] = beta * (np.exp(lp_valid) - 1.0 / n) * mask[..., None] / (norm * b)
    np.testing.assert_allclose(np.asarray(g["logits"]), want, atol=1e-6)
    assert abs(float(g["logits"][1, 2, 0])) > 0.7 * beta / (norm * b)  # ~(1 - 1/n) beta

    # the k2 KL on the same saturated token (ref uniform): its gradient has all but vanished
    batch["ref_logprobs"] = jnp.full((b, t), -np.log(n), jnp.float32)
    k2 = make_rl_loss(_toy_apply, norm_tokens=norm, kl_beta=beta, valid_vocab=n)
    gk = jax.grad(lambda p: k2(p, batch, None)[0])(params)["logits"]
    assert abs(float(gk[1, 2, 0])) < 1e-3 * beta / (norm * b)


# --- row lengths (rl.length_buckets) -------------------------------------------------------------


def _lengths(*n_tokens):
    return [{"tokens": np.zeros(n, np.int32)} for n in n_tokens]


def test_row_length_is_the_shortest_rung_that_holds_the_batch():
    """Halvings of max_tokens, never below `shortest` (unless max_tokens is) nor off `multiple`;
    a record needs len(tokens) - 1 positions."""
    assert rb.row_length(_lengths(300, 90), 2048) == 512
    assert rb.row_length(_lengths(257), 2048) == 256  # 256 positions fit 256
    assert rb.row_length(_lengths(258), 2048) == 512
    assert rb.row_length(_lengths(2049), 2048) == 2048  # the longest a record may be
    assert rb.row_length(_lengths(10), 2048) == 256  # the floor
    assert rb.row_length(_lengths(10), 16) == 16  # max_tokens below the floor: itself
    assert rb.row_length(_lengths(10), 1536) == 384  # 1536 -> 768 -> 384; 192 < 256
    assert rb.row_length(_lengths(10), 1536, multiple=256) == 768  # 384 is no multiple of 256
    assert rb.row_length(_lengths(10), 1000, shortest=100) == 125  # 125 is odd: the ladder ends
    assert rb.row_length([], 2048) == 256


def test_rl_loss_and_grads_do_not_depend_on_the_row_length(tiny_model):
    """The same records collated to max_tokens and to their row_length: the loss is normalized
    by max_tokens, so loss, metrics and gradients agree (float32, the training precision) and
    only the padding differs (the short batch has half the positions here)."""
    from model import generate
    from rl.sampling.samplers import records_from_generate

    cfg, params = tiny_model
    prompts = [[1, 2, 3], [4, 5], [6], [7, 8, 9, 10]]
    out = generate(cfg, params, prompts, 40, temperature=0.7, seed=2)
    recs = records_from_generate(out, prompts, ["g0", "g0", "g1", "g1"], rewards=[1, 0, 0.5, 0])
    max_tokens = 128
    t = rb.row_length(recs, max_tokens, shortest=32)
    assert t == 64 and max(len(r["tokens"]) for r in recs) - 1 <= t
    k, n = cfg.num_experts_per_tok, cfg.num_moe_layers
    loss_fn = make_rl_loss(model_apply(cfg), norm_tokens=max_tokens, temperature=0.7)
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, b: loss_fn(p, b, None), has_aux=True))
    results = []
    for seq_len in (max_tokens, t):
        b = rb.collate(recs, seq_len=seq_len, rows=4, n_moe_layers=n, k=k)
        (loss, aux), grads = value_and_grad(params, {key: jnp.asarray(v) for key, v in b.items()})
        results.append((float(loss), jax.device_get(aux["metrics"]), grads))
    (full, m_full, g_full), (short, m_short, g_short) = results
    assert full == pytest.approx(short, rel=1e-5, abs=1e-7) and abs(full) > 1e-6
    for key in ("ratio_mean", "policy_loss"):
        assert float(m_full[key]) == pytest.approx(float(m_short[key]), rel=1e-5, abs=1e-7), key
    flat_full, flat_short = (jax.tree_util.tree_leaves(g) for g in (g_full, g_short))
    scale = max(float(jnp.max(jnp.abs(g))) for g in flat_full)
    assert scale > 0
    for a, b_ in zip(flat_full, flat_short):
        np.testing.assert_allclose(np.asarray(b_), np.asarray(a), rtol=1e-4, atol=1e-6 * scale)
