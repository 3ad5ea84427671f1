"""Model invariants: decode == forward, dispatch implementations agree with each other and with a
per-token reference, router semantics, param counts of the presets, config errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import Transformer, count_params, init_params, presets
from model.decode import (
    cache_bytes_per_token,
    forward_cached_layers,
    init_layer_caches,
    split_layers,
    uncompressed_cache_bytes_per_token,
)
from model.kernels import attention as attention_kernel
from model.moe import (
    _assignment_rows,
    block_sizes,
    choose_experts,
    dispatch_blocked,
    dispatch_dense,
    for_each_block,
    groups_of,
    route,
    select_dispatch,
)


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model


def _apply(cfg, params, tokens, **kw):
    """Jitted forward (eager Flax scans would recompile op by op)."""
    return jax.jit(lambda p, t, kw: Transformer(cfg).apply({"params": p}, t, **kw))(
        params, tokens, kw
    )


def _tokens(cfg, b=2, t=16, seed=1):
    return jax.random.randint(jax.random.PRNGKey(seed), (b, t), 0, cfg.vocab_size)


def test_compute_only_fields_share_params_and_one_compiled_init():
    """dtype, remat, MoE dispatch/comm/capacity and the balance-loss weight change how the model
    computes, not its params: the same params, bitwise, from one compiled init."""
    from model.params import init_params_unjitted

    cfg = presets.get("tiny")
    # The same function and options as init_params' jit: it shares that jit's compile cache.
    init = jax.jit(init_params_unjitted, static_argnums=0, out_shardings=None)
    ref = init_params(cfg, jax.random.PRNGKey(5))
    compiled = init._cache_size()
    assert compiled >= 1
    knobs = cfg.replace(
        dtype="bfloat16",
        remat="full",
        moe_impl="dense",
        moe_block_size=8,
        moe_comm="alltoall",
        moe_capacity_factor=1.0,
        balance_loss_coef=0.01,
    )
    got = init_params(knobs, jax.random.PRNGKey(5))
    assert init._cache_size() == compiled  # nothing new compiled
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(got)):
        np.testing.assert_array_equal(a, b)
    # An architectural field is not compute-only: other shapes, another init.
    other = init_params(
        cfg.replace(n_routed_experts=4, n_group=1, topk_group=1), jax.random.PRNGKey(5)
    )
    assert init._cache_size() == compiled + 1
    assert other["moe_layers"]["moe"]["wi_gate"].shape != ref["moe_layers"]["moe"]["wi_gate"].shape


def test_preset_param_counts():
    total, active = count_params(presets.get("kimi_k2"))
    assert abs(total / 1e12 - 1.026) < 0.005 and abs(active / 1e9 - 32.9) < 0.2, (total, active)
    total, active = count_params(presets.get("deepseek_v3"))
    assert abs(total / 1e9 - 671) < 2 and abs(active / 1e9 - 37.5) < 0.3, (total, active)
    total, _ = count_params(presets.get("small"))
    assert 50e6 <= total <= 150e6


def test_benchmark_preset_rebuilds_from_its_overrides_of_tiny():
    """bench --against REV passes a preset as overrides of `tiny` to a revision that lacks it."""
    assert presets.get("tiny", **presets.overrides("tiny4")) == presets.get("tiny4")
    assert presets.overrides("tiny4")["hidden_size"] == 256 and presets.overrides("tiny") == {}
    with pytest.raises(ValueError, match="unknown model preset 'tiny5'"):
        presets.get("tiny5")


def test_latent_cache_is_smaller_than_full_cache_for_kimi():
    cfg = presets.get("kimi_k2")
    # 576 values/token/layer (512 latent + 64 rope) vs 64 heads x (192 + 128); + int32 positions.
    assert cache_bytes_per_token(cfg, "bfloat16", positions=False) == 61 * 576 * 2
    assert cache_bytes_per_token(cfg, "float32") == 61 * (576 * 4 + 4)
    assert uncompressed_cache_bytes_per_token(cfg, "bfloat16") == 61 * 64 * 320 * 2


@pytest.mark.parametrize("q_lora", [True, False])
def test_token_by_token_decode_matches_forward(q_lora):
    """One cache and param tree per layer (forward_cached_layers, the engine's): logits and routed
    experts of a prefill then token-by-token decode equal the full forward's."""
    cfg = presets.get(
        "tiny",
        rope_scaling=presets.get("deepseek_v3").rope_scaling.__class__(
            factor=4.0, original_max_position_embeddings=8
        ),
    )
    if not q_lora:
        cfg = cfg.replace(q_lora_rank=None)
    params = init_params(cfg, jax.random.PRNGKey(3))
    tokens = _tokens(cfg, 2, 14)
    full = _apply(cfg, params, tokens)
    prefill = 5
    cache, params = init_layer_caches(cfg, 2, 16), split_layers(params)
    pos = jnp.broadcast_to(jnp.arange(prefill), (2, prefill))
    step = jax.jit(lambda p, tok, pos, c: forward_cached_layers(cfg, p, tok, pos, c))
    out = step(params, tokens[:, :prefill], pos, cache)
    logits, experts = [out.logits], [out.expert_ids]
    cache = out.cache
    for t in range(prefill, tokens.shape[1]):
        out = step(params, tokens[:, t : t + 1], jnp.full((2, 1), t), cache)
        cache = out.cache
        logits.append(out.logits)
        experts.append(out.expert_ids)
    np.testing.assert_allclose(np.concatenate(logits, 1), full.logits, atol=1e-4, rtol=0)
    np.testing.assert_array_equal(np.concatenate(experts, 2), full.expert_ids)  # [n,B,T,k]
    assert float(full.logits.std()) > 0.1  # not a trivially flat comparison


def test_rows_at_different_lengths_decode_independently(tiny):
    cfg, params = tiny
    tokens = _tokens(cfg, 2, 10)
    full = _apply(cfg, params, tokens)
    # Row 0 prefilled with 6 tokens, row 1 with 3 (padding marked by position -1).
    pos = jnp.array([[0, 1, 2, 3, 4, 5], [0, 1, 2, -1, -1, -1]])
    cached = jax.jit(lambda p, tok, pos, c: forward_cached_layers(cfg, p, tok, pos, c))
    out = cached(split_layers(params), tokens[:, :6], pos, init_layer_caches(cfg, 2, 12))
    np.testing.assert_allclose(out.logits[0], full.logits[0, :6], atol=1e-4)
    np.testing.assert_allclose(out.logits[1, :3], full.logits[1, :3], atol=1e-4)
    nxt = cached(
        split_layers(params),
        jnp.stack([tokens[0, 6:7], tokens[1, 3:4]]),
        jnp.array([[6], [3]]),
        out.cache,
    )
    np.testing.assert_allclose(
        nxt.logits[:, 0], jnp.stack([full.logits[0, 6], full.logits[1, 3]]), atol=1e-4
    )


def _per_token_reference(x, kernel, bias, wi_gate, wi_up, wo, cfg):
    """Naive numpy MoE, one token at a time, straight from the DeepSeek-V3 description."""
    x, kernel, bias = (np.asarray(a, np.float64) for a in (x, kernel, bias))
    wi_gate, wi_up, wo = (np.asarray(a, np.float64) for a in (wi_gate, wi_up, wo))
    e, g = cfg.n_routed_experts, cfg.n_group
    out, chosen = np.zeros_like(x), []
    for n in range(x.shape[0]):
        s = 1 / (1 + np.exp(-(x[n] @ kernel)))
        biased = s + bias
        groups = biased.reshape(g, e // g)
        group_score = np.sort(groups, axis=1)[:, -2:].sum(1)
        keep = np.argsort(-group_score)[: cfg.topk_group]
        masked = np.full(e, -np.inf)
        for grp in keep:
            masked[grp * (e // g) : (grp + 1) * (e // g)] = biased[
                grp * (e // g) : (grp + 1) * (e // g)
            ]
        ids = np.argsort(-masked)[: cfg.num_experts_per_tok]
        w = s[ids] / s[ids].sum() * cfg.routed_scaling_factor
        for i, wi in zip(ids, w):
            h = x[n] @ wi_gate[i]
            h = h / (1 + np.exp(-h)) * (x[n] @ wi_up[i])
            out[n] += wi * (h @ wo[i])
        chosen.append(sorted(ids))
    return out, np.array(chosen)


@pytest.mark.parametrize("impl", ["blocked", "dense", "ragged"])
def test_dispatch_matches_per_token_reference(impl):
    cfg = presets.get("tiny", n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=3)
    keys = jax.random.split(jax.random.PRNGKey(7), 6)
    n, d, f, e = 40, cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts
    x = jax.random.normal(keys[0], (n, d))
    kernel = jax.random.normal(keys[1], (d, e)) * 0.3
    bias = jax.random.normal(keys[2], (e,)) * 0.3
    wi_gate, wi_up = (jax.random.normal(k, (e, d, f)) * 0.1 for k in keys[3:5])
    wo = jax.random.normal(keys[5], (e, f, d)) * 0.1
    r = route(x, kernel, bias, cfg)
    got = select_dispatch(cfg.replace(moe_impl=impl))(x, r, wi_gate, wi_up, wo)
    want, chosen = _per_token_reference(x, kernel, bias, wi_gate, wi_up, wo, cfg)
    np.testing.assert_array_equal(np.sort(np.asarray(r.expert_ids), 1), chosen)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    # The bias changes choices for some tokens (else the test would not cover it).
    unbiased = choose_experts(
        r.scores, jnp.zeros(e), cfg.num_experts_per_tok, cfg.n_group, cfg.topk_group
    )
    assert np.any(np.sort(np.asarray(unbiased), 1) != chosen)


@pytest.mark.parametrize("block", [1, 5, 8, 64, 100])
def test_blocked_dispatch_is_dropless_for_any_block_size(block):
    cfg = presets.get("tiny")
    e, d, f = cfg.n_routed_experts, cfg.hidden_size, cfg.moe_intermediate_size
    keys = jax.random.split(jax.random.PRNGKey(2), 5)
    x = jax.random.normal(keys[0], (33, d))
    # Skewed routing: all tokens to experts 0 and 1 -> one group holds every assignment.
    r = route(x, jax.random.normal(keys[1], (d, e)), jnp.array([5.0, 5.0] + [0.0] * (e - 2)), cfg)
    assert set(np.unique(r.expert_ids)) <= {0, 1, 2, 3}
    w = [jax.random.normal(k, s) * 0.1 for k, s in zip(keys[2:], [(e, d, f), (e, d, f), (e, f, d)])]
    np.testing.assert_allclose(
        dispatch_blocked(x, r, *w, block=block),
        dispatch_dense(x, r, *w),
        atol=1e-5,
    )


@pytest.mark.parametrize("block", [0, 1, 8])
def test_blocked_dispatch_skips_invalid_tokens(block):
    """valid=False rows get no expert: 0 routed output, no gradient, and an expert that only they
    chose is left out of the groups (its weights are never loaded), in value and gradient equal to
    the dense reference with their routing weights zeroed."""
    cfg = presets.get("tiny")
    e, d, f = cfg.n_routed_experts, cfg.hidden_size, cfg.moe_intermediate_size
    keys = jax.random.split(jax.random.PRNGKey(3), 5)
    x = jax.random.normal(keys[0], (6, d))
    r = route(x, jax.random.normal(keys[1], (d, e)), jnp.zeros(e), cfg)
    valid = jnp.array([False, True, False, False, True, False])
    w = [jax.random.normal(k, s) * 0.1 for k, s in zip(keys[2:], [(e, d, f), (e, d, f), (e, f, d)])]
    gated = r._replace(weights=jnp.where(valid[:, None], r.weights, 0.0))

    def blocked(x, *w):
        return dispatch_blocked(x, r, *w, block=block, valid=valid)

    def dense(x, *w):
        return dispatch_dense(x, gated, *w)

    got, want = blocked(x, *w), dense(x, *w)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(got[~np.asarray(valid)], 0.0)
    g_got = jax.grad(lambda *a: jnp.sum(blocked(*a) ** 2), argnums=(0, 1, 2, 3))(x, *w)
    g_want = jax.grad(lambda *a: jnp.sum(dense(*a) ** 2), argnums=(0, 1, 2, 3))(x, *w)
    for a, b in zip(g_got, g_want):
        np.testing.assert_allclose(a, b, atol=1e-5)
    # The groups hold only the valid tokens' experts.
    ids = jnp.where(valid[:, None], r.expert_ids, e)
    _, aligned, offset = _assignment_rows(ids, e, 8)
    used = int(groups_of(aligned, offset, 8).used)
    assert used == len(np.unique(np.asarray(r.expert_ids)[np.asarray(valid)]))
    assert used < len(np.unique(np.asarray(r.expert_ids)))  # else the test shows nothing


def test_model_dispatch_impls_agree_in_forward_and_grad(tiny):
    cfg, params = tiny
    tokens = _tokens(cfg)

    def loss(p, impl):
        out = Transformer(cfg.replace(moe_impl=impl)).apply({"params": p}, tokens)
        return jnp.mean(jax.nn.log_softmax(out.logits)[..., 0]) + jnp.mean(out.mtp_logits)

    grad_fn = jax.jit(jax.value_and_grad(loss), static_argnums=1)
    ref_val, ref_grad = grad_fn(params, "dense")
    for impl in ("blocked", "ragged"):
        val, grad = grad_fn(params, impl)
        np.testing.assert_allclose(val, ref_val, atol=1e-5)
        jax.tree_util.tree_map(
            lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), grad, ref_grad
        )
    bias_grad = ref_grad["moe_layers"]["moe"]["router_bias"]
    assert np.all(np.asarray(bias_grad) == 0)  # non-trainable: stop_gradient


def test_router_replay_reproduces_logits(tiny):
    cfg, params = tiny
    tokens = _tokens(cfg)
    out = _apply(cfg, params, tokens)
    replay = _apply(cfg, params, tokens, forced_experts=out.expert_ids)
    np.testing.assert_array_equal(replay.logits, out.logits)
    other = (out.expert_ids + 1) % cfg.n_routed_experts
    forced = _apply(cfg, params, tokens, forced_experts=other)
    np.testing.assert_array_equal(forced.expert_ids, other)
    assert not np.allclose(forced.logits, out.logits)


@pytest.mark.parametrize("query_block", [128, 4])
def test_segments_block_attention_across_documents(tiny, query_block, monkeypatch):
    # query_block 4: the 11 packed rows run as causal query blocks [0,4) [4,8) [8,11).
    monkeypatch.setattr(attention_kernel, "QUERY_BLOCK", query_block)
    cfg, params = tiny
    a, b = _tokens(cfg, 1, 6, seed=4), _tokens(cfg, 1, 5, seed=5)
    packed = jnp.concatenate([a, b], 1)
    seg = jnp.array([[1] * 6 + [2] * 5])
    pos = jnp.array([list(range(6)) + list(range(5))])
    out = _apply(cfg, params, packed, positions=pos, segment_ids=seg).logits
    np.testing.assert_allclose(out[:, :6], _apply(cfg, params, a).logits, atol=1e-5)
    np.testing.assert_allclose(out[:, 6:], _apply(cfg, params, b).logits, atol=1e-5)


def test_expert_counts_exclude_padding(tiny):
    cfg, params = tiny
    tokens = _tokens(cfg, 2, 8)
    seg = jnp.array([[1] * 8, [1] * 5 + [0] * 3])
    out = _apply(cfg, params, tokens, segment_ids=seg)
    assert out.expert_counts.shape == (cfg.num_moe_layers, cfg.n_routed_experts)
    assert int(out.expert_counts.sum()) == 13 * cfg.num_experts_per_tok * cfg.num_moe_layers


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(n_routed_experts=6, n_group=4), "divisible by n_group"),
        (dict(qk_rope_head_dim=7), "qk_rope_head_dim must be even"),
        (dict(num_experts_per_tok=9), "num_experts_per_tok"),
        (dict(moe_impl="magic"), "moe_impl"),
    ],
)
def test_malformed_config_errors_name_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        presets.get("tiny", **bad)
    with pytest.raises(ValueError, match="unknown model preset"):
        presets.get("nope")


def test_bfloat16_compute_tracks_float32(tiny):
    cfg, params = tiny
    tokens = _tokens(cfg)
    ref = _apply(cfg, params, tokens).logits
    low = _apply(cfg.replace(dtype="bfloat16"), params, tokens).logits
    assert low.dtype == jnp.float32  # logits stay float32
    corr = np.corrcoef(np.ravel(ref), np.ravel(low))[0, 1]
    assert corr > 0.99 and not np.array_equal(
        ref, low
    )  # bf16 rounding (and rare routing flips near ties)


def _balance_reference(scores, ids, segments, k):
    """Per-document f·P by explicit loops (float64), averaged over documents."""
    e, losses = scores.shape[-1], []
    for row in range(scores.shape[0]):
        for doc in sorted(set(segments[row].tolist()) - {0}):
            toks = np.nonzero(segments[row] == doc)[0]
            counts = np.zeros(e)
            for tok in toks:
                for i in ids[row, tok]:
                    counts[i] += 1
            f = counts * e / (k * len(toks))
            p = (scores[row, toks] / scores[row, toks].sum(-1, keepdims=True)).mean(0)
            losses.append(float(f @ p))
    return np.mean(losses)


def test_balance_loss_is_per_document():
    from model.moe import sequence_balance_loss

    rng = np.random.default_rng(3)
    b, t, e, k = 2, 7, 8, 2
    scores = rng.uniform(0.05, 1.0, (b, t, e))
    ids = np.stack([rng.permutation(e)[:k] for _ in range(b * t)]).reshape(b, t, k)
    # Row 0 packs three documents and ends in padding; row 1 is one document.
    segments = np.array([[1, 1, 1, 2, 2, 3, 0], [1] * 7])
    got = sequence_balance_loss(jnp.asarray(scores), jnp.asarray(ids), jnp.asarray(segments), k)
    want = _balance_reference(scores, ids, segments, k)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # Treating row 0 as one sequence gives a different value (so the test tells them apart).
    as_rows = _balance_reference(scores, ids, np.where(segments > 0, 1, 0), k)
    assert abs(as_rows - want) > 1e-3


@pytest.mark.parametrize("c", [1, 8, 64, 100])
def test_blocks_tile_every_group_exactly_once(c):
    """groups_of + for_each_block (the loops of the blocked dispatch) cover each expert's aligned
    rows [offset, offset + aligned) exactly once and nothing else, for random group sizes (empty
    groups included)."""
    sizes = block_sizes(c)
    align = sizes[-1]
    group = np.random.default_rng(c).integers(0, 5 * c, size=12)
    group[[2, 7]] = 0
    aligned = -(-group // align) * align
    offset = np.cumsum(aligned) - aligned
    n_rows = int(group.sum() + len(group) * (align - 1))
    groups = groups_of(jnp.asarray(aligned), jnp.asarray(offset), c)

    @jax.jit
    def owners():
        def expert(i, owner_and_count):
            def block(carry, start, size):
                owner, count = carry
                owner = jax.lax.dynamic_update_slice(
                    owner, jnp.full((size,), groups.expert[i]), (start,)
                )
                count = jax.lax.dynamic_update_slice(
                    count, jax.lax.dynamic_slice(count, (start,), (size,)) + 1, (start,)
                )
                return owner, count

            g_i = (groups.offset[i], groups.full[i], groups.rem[i])
            return for_each_block(sizes, n_rows, *g_i, block, owner_and_count)

        init = (jnp.full((n_rows,), -1, jnp.int32), jnp.zeros((n_rows,), jnp.int32))
        return jax.lax.fori_loop(0, groups.used, expert, init)

    owner, count = owners()
    want = np.full(n_rows, -1)
    for e, (o, a) in enumerate(zip(offset, aligned)):
        want[o : o + a] = e
    np.testing.assert_array_equal(owner, want)
    np.testing.assert_array_equal(count, want >= 0)  # each group row once, nothing else
