"""Generation on the one engine (model/engine/, through model/prompt_batch.py's prompt-list
wrapper): greedy == repeated argmax of the full forward, speculative == plain, sampler log-probs ==
filtered log-softmax of the forward, router replay, continuous batching, in-flight weight updates
(plain and speculative), multi-turn extend and teacher forcing under speculation, the speculative
distribution (chi-square vs the exact model distribution, and a wrong rule failing it), bad input.

Compiles are the cost here (~10-20 s per distinct program), so tests share a few shapes: the tiny
preset with 'dense' MoE dispatch, 3 prompts in 2 slots (slot refill always exercised), K = 0 or 2.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import model.engine.programs as engine_programs
import model.engine.speculation as engine_speculation
from model import Transformer, init_params, presets
from model.engine import RolloutEngine, Sampling
from model.prompt_batch import PromptBatch, generate
from model.sampling import SamplingParams, categorical, filtered_logprobs, speculative_accept

PROMPTS = [[1, 2, 3, 4, 5], [7], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11]]
MAX_NEW = 10
# reference forwards run on right-padded [P, 32] (causal: padding does not change earlier logits)
REF_LEN = 32


@pytest.fixture(scope="module")
def tiny(tiny_dense_model):
    return tiny_dense_model


@pytest.fixture(scope="module")
def forward(tiny):
    cfg, _ = tiny
    fn = jax.jit(
        lambda p, t, forced: Transformer(cfg).apply({"params": p}, t, forced_experts=forced)
    )

    def run(params, seqs, forced=None):
        padded = np.zeros((len(seqs), REF_LEN), np.int32)
        for n, s in enumerate(seqs):
            padded[n, : len(s)] = s
        return fn(params, jnp.asarray(padded), forced)

    return run


@pytest.fixture(scope="module")
def greedy_plain(tiny):
    cfg, params = tiny
    return generate(cfg, params, PROMPTS, MAX_NEW, batch_size=2)


def _ref_logprobs(logits, temperature, top_k, top_p):
    """float64 numpy: temperature, then top-k, then the smallest top-p nucleus; greedy = plain
    log-softmax."""
    z = np.asarray(logits, np.float64) / (temperature if temperature > 0 else 1.0)
    keep = np.ones_like(z, bool)
    if temperature > 0:
        order = np.argsort(-z)
        if top_k > 0:
            keep[:] = False
            keep[order[:top_k]] = True
        kept = [i for i in order if keep[i]]
        p = np.exp(z[kept] - z[kept].max())
        p /= p.sum()
        mass, nucleus = 0.0, []
        for i, pi in zip(kept, p):
            if mass >= top_p:
                break
            nucleus.append(i)
            mass += pi
        keep[:] = False
        keep[nucleus] = True
    zk = np.where(keep, z, -np.inf)
    return zk - np.log(np.sum(np.exp(zk - zk.max()))) - zk.max()


def test_filtered_logprobs_match_numpy_reference():
    logits = jax.random.normal(jax.random.PRNGKey(3), (4, 50)) * 3
    for t, k, p in [
        (0.0, 0, 1.0),
        (1.0, 0, 1.0),
        (0.7, 5, 1.0),
        (1.3, 0, 0.8),
        (0.9, 10, 0.5),
        (2.0, 1, 1.0),
    ]:
        got = np.asarray(filtered_logprobs(logits, SamplingParams.make(t, k, p)))
        for row in range(4):
            want = _ref_logprobs(logits[row], t, k, p)
            np.testing.assert_array_equal(
                np.isfinite(got[row]), np.isfinite(want), err_msg=f"{(t, k, p)}"
            )
            fin = np.isfinite(want)
            np.testing.assert_allclose(got[row][fin], want[fin], atol=1e-5)


def test_greedy_equals_repeated_argmax_of_forward(tiny, forward, greedy_plain):
    cfg, params = tiny
    seqs = [list(p) for p in PROMPTS]
    for _ in range(MAX_NEW):
        logits = forward(params, seqs).logits
        for n, s in enumerate(seqs):
            s.append(int(jnp.argmax(logits[n, len(s) - 1])))
    assert greedy_plain.tokens == [s[len(p) :] for s, p in zip(seqs, PROMPTS)]
    assert len({tuple(t) for t in greedy_plain.tokens}) == 3
    assert all(
        r.finish_reason == "length" and np.all(r.versions == 0) for r in greedy_plain.sequences
    )


def test_speculative_greedy_equals_plain_greedy(tiny, greedy_plain):
    cfg, params = tiny
    spec = generate(cfg, params, PROMPTS, MAX_NEW, batch_size=2, num_draft=2)
    assert spec.tokens == greedy_plain.tokens
    s = spec.stats
    assert s["drafted"] == 2 * s["slot_steps"] and 0 <= s["accepted"] <= s["drafted"]
    # Each verify step emits 1 + accepted tokens (minus what max_new_tokens cut off).
    assert s["tokens"] <= s["slot_steps"] + s["accepted"]
    for a, b in zip(spec.sequences, greedy_plain.sequences):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_array_equal(a.experts, b.experts)


@pytest.mark.parametrize("num_draft", [0, 2])
@pytest.mark.parametrize("temperature, top_k, top_p", [(0.8, 0, 0.9), (1.3, 6, 1.0)])
def test_logprobs_equal_filtered_forward_and_replay_reproduces_them(
    tiny, forward, num_draft, temperature, top_k, top_p
):
    cfg, params = tiny
    out = generate(
        cfg,
        params,
        PROMPTS,
        MAX_NEW,
        batch_size=2,
        num_draft=num_draft,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=5,
    )
    seqs = [p + r.tokens for p, r in zip(PROMPTS, out.sequences)]
    plain = forward(params, seqs)
    forced = np.zeros((cfg.num_moe_layers, len(seqs), REF_LEN, cfg.num_experts_per_tok), np.int32)
    for n, r in enumerate(out.sequences):
        forced[:, n, : len(seqs[n])] = r.replay_experts()
    replay = forward(params, seqs, jnp.asarray(forced))
    for n, (p, r) in enumerate(zip(PROMPTS, out.sequences)):
        assert len(r.tokens) == MAX_NEW
        span = slice(len(p) - 1, len(p) - 1 + MAX_NEW)  # logits that produced each generated token
        want = np.array(
            [
                _ref_logprobs(row, temperature, top_k, top_p)[t]
                for row, t in zip(np.asarray(plain.logits[n, span]), r.tokens)
            ]
        )
        assert np.all(np.isfinite(want))  # every sampled token lies inside the top-k / top-p set
        np.testing.assert_allclose(r.logprobs, want, atol=1e-5)
        # The sampler's routing equals the forward's, prompt and generated tokens alike...
        ids = np.asarray(plain.expert_ids[:, n, : len(seqs[n]) - 1])
        np.testing.assert_array_equal(np.sort(r.replay_experts()[:, :-1], -1), np.sort(ids, -1))
        # ...and forcing it reproduces the sampler's log-probs.
        replayed = np.array(
            [
                _ref_logprobs(row, temperature, top_k, top_p)[t]
                for row, t in zip(np.asarray(replay.logits[n, span]), r.tokens)
            ]
        )
        np.testing.assert_allclose(r.logprobs, replayed, atol=1e-5)


def test_continuous_batching_refills_a_slot_when_a_sequence_stops(tiny, greedy_plain):
    cfg, params = tiny
    toks = greedy_plain.tokens[1]
    j = next(
        j for j in range(1, MAX_NEW) if toks[j] not in toks[:j]
    )  # prompt 1 stops at its token j
    never = cfg.vocab_size - 1
    assert all(never not in t for t in greedy_plain.tokens)
    out = generate(
        cfg, params, PROMPTS, MAX_NEW, batch_size=2, stop_tokens=[[never], [toks[j]], [never]]
    )
    assert out.tokens == [greedy_plain.tokens[0], toks[: j + 1], greedy_plain.tokens[2]]
    assert [r.finish_reason for r in out.sequences] == ["length", "stop", "length"]
    # Slot 0: prompt 0 (10 steps); slot 1: prompt 1 (j+1 steps), then prompt 2 (10) as soon as it is
    # free.
    assert out.stats["iterations"] == j + 11 < 20 and out.stats["slot_steps"] == j + 21


@pytest.mark.parametrize("num_draft", [0, 2])
def test_in_flight_weight_update_keeps_cache_and_records_versions(tiny, greedy_plain, num_draft):
    cfg, params = tiny
    same = PromptBatch(
        cfg, params, PROMPTS, MAX_NEW, batch_size=2, params_version=3, num_draft=num_draft
    )
    same.step(4)
    same.engine.set_params(jax.tree_util.tree_map(jnp.copy, params), 4)
    res = same.run_until_done().results()
    # Same weights under a new version: identical tokens, so slots and caches (the MTP cache too)
    # survived the swap.
    assert res.tokens == greedy_plain.tokens
    v0 = res.sequences[0].versions
    n_old = int(np.sum(v0 == 3))  # tokens of prompt 0 emitted by the first 4 iterations
    # Plain decoding emits one token per iteration; a verify step emits 1 + accepted.
    assert n_old == 4 if num_draft == 0 else 4 <= n_old < MAX_NEW
    np.testing.assert_array_equal(v0, [3] * n_old + [4] * (MAX_NEW - n_old))
    np.testing.assert_array_equal(
        res.sequences[2].versions, [4] * 10
    )  # started after the swap (refill)
    changed = PromptBatch(cfg, params, PROMPTS, MAX_NEW, batch_size=2, num_draft=num_draft)
    changed.step(4)
    changed.engine.set_params(jax.tree_util.tree_map(lambda x: x * 1.5, params), 1)
    new = changed.run_until_done().results()
    n_old = int(np.sum(new.sequences[0].versions == 0))
    assert n_old >= 4
    assert (
        new.tokens[0][:n_old] == greedy_plain.tokens[0][:n_old]
        and new.tokens[0] != greedy_plain.tokens[0]
    )


def _turns(cfg, params, k):
    """Two greedy turns of two requests on one engine: a prompt, then an observation (extend), the
    second request teacher-forced for its first 3 tokens, then 2. -> (tokens, logprobs, versions
    of each turn, routed experts of every consumed token) per request. The engine's shape is the
    one generate(PROMPTS, MAX_NEW, batch_size=2) builds (2 slots, cache 32, 1 stop id), so the
    decode programs compiled for the tests above are reused."""
    eng = RolloutEngine(
        cfg, params, slots=2, cache_len=32, temperature=0.0, stop_width=1, speculative_k=k
    )
    forced = [5, 6, 7]
    eng.submit("a", [1, 2, 3, 4, 5], max_new=7, stop_tokens=[300])
    eng.submit("b", [9, 8], max_new=6, forced=forced)
    got = {"a": [], "b": []}
    while eng.busy:
        for t in eng.step():
            got[t.request].append((t.tokens, t.logprobs, t.versions))
            if len(got[t.request]) == 1:
                eng.extend(
                    t.request,
                    [11, 12, 13],
                    max_new=5,
                    forced=forced[:2] if t.request == "b" else None,
                )
    return {rid: (turns, eng.finish(rid)) for rid, turns in got.items()}


def test_speculative_multi_turn_extend_and_forcing_equal_plain(tiny, forward):
    """Greedy: the speculative engine's multi-turn records (extend prefills the MTP buffer a turn
    left, forced tokens are drafted and accepted) equal the plain engine's, token for token, and
    equal the full forward over the whole transcript."""
    cfg, params = tiny
    plain, spec = _turns(cfg, params, 0), _turns(cfg, params, 2)
    for rid in ("a", "b"):
        (p_turns, p_exp), (s_turns, s_exp) = plain[rid], spec[rid]
        assert [t[0] for t in s_turns] == [t[0] for t in p_turns]
        for (_, plp, pv), (_, slp, sv) in zip(p_turns, s_turns):
            np.testing.assert_allclose(slp, plp, atol=1e-5)
            np.testing.assert_array_equal(sv, pv)
        np.testing.assert_array_equal(s_exp, p_exp)
    (b1, _, _), (b2, _, _) = spec["b"][0]
    assert b1[:3] == [5, 6, 7] and b2[:2] == [5, 6]
    # The transcript's full forward: greedy tokens are its argmax, records its log-softmax.
    for rid, prompt in (("a", [1, 2, 3, 4, 5]), ("b", [9, 8])):
        (t1, lp1, _), (t2, lp2, _) = spec[rid][0]
        seq = prompt + t1 + [11, 12, 13] + t2
        logits = np.asarray(forward(params, [seq]).logits[0], np.float64)
        lsm = (
            logits
            - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
            - logits.max(-1, keepdims=True)
        )
        pos = [len(prompt) + i for i in range(len(t1))] + [
            len(seq) - len(t2) + i for i in range(len(t2))
        ]
        toks = t1 + t2
        np.testing.assert_allclose(
            np.r_[lp1, lp2], [lsm[p - 1, t] for p, t in zip(pos, toks)], atol=1e-5
        )
        n_forced = 3 if rid == "b" else 0
        free = [j for j in range(len(t1)) if j >= n_forced]
        assert all(t1[j] == int(np.argmax(logits[pos[j] - 1])) for j in free)


def _resample_from_target(key, target_lp, draft_lp, drafts, greedy, forced=None):
    """A deliberately wrong speculative rule, for the test below only: the same accepts, but a
    rejected draft is replaced by a sample from p instead of the residual normalize(max(0, p - q))
    (the all-accepted bonus from p_K is the same in both)."""
    n_acc, nxt = speculative_accept(key, target_lp, draft_lp, drafts, greedy, forced)
    p_lp = jnp.take_along_axis(target_lp, n_acc[:, None, None], axis=1)[:, 0]  # [B,V]
    other = jax.vmap(jax.random.fold_in, (0, None))(key, 1)  # the engine's keys are per slot
    wrong = categorical(other, p_lp).astype(jnp.int32)
    return n_acc, jnp.where(greedy, nxt, wrong)


def test_speculative_samples_follow_the_model_distribution_and_a_wrong_rule_fails(monkeypatch):
    """Joint law of the first two sampled tokens (one verify step: draft accept/reject + bonus) vs
    the exact p(t1) p(t2 | t1) from the forward pass, vocab 8 -> 64 cells, 3000 samples, at
    temperatures 1 and 0.7 sampled side by side in one batch (each slot with its own setting, a
    few greedy slots among them). The same check must reject a wrong rule swapped into the engine
    (so it has the power to catch one)."""
    cfg = presets.get("tiny", vocab_size=8, moe_impl="dense")
    params = init_params(cfg, jax.random.PRNGKey(0))
    prompt, n = [1, 2, 3], 3000
    fwd = jax.jit(lambda t: Transformer(cfg).apply({"params": params}, t).logits)
    logits1 = fwd(jnp.array([prompt]))[0, -1]
    logits2 = fwd(jnp.array([prompt + [a] for a in range(8)]))[:, -1]

    def p_value(toks, temperature):
        p1 = jax.nn.softmax(logits1 / temperature)
        p2 = jax.nn.softmax(logits2 / temperature)
        expected = np.asarray(p1[:, None] * p2, np.float64).reshape(-1)
        expected *= len(toks) / expected.sum()
        counts = np.bincount(toks[:, 0] * 8 + toks[:, 1], minlength=64)
        chi2 = np.sum((counts - expected) ** 2 / expected)
        return float(jax.scipy.special.gammaincc(63 / 2, chi2 / 2))

    def sample_pairs(temperatures):
        """First two tokens of one request per temperature, one engine, one slot each (every
        slot decoded at every step: one decode program for thousands of slots, not one per row
        bucket as the requests finish)."""
        eng = RolloutEngine(cfg, params, slots=len(temperatures), cache_len=16, speculative_k=2,
                            seed=1, compact=False)  # fmt: skip
        for i, t in enumerate(temperatures):
            eng.submit(i, prompt, max_new=2, sampling=Sampling(t))
        out = {}
        while eng.busy:
            out.update({turn.request: turn.tokens for turn in eng.step()})
        c = eng.counters()
        return np.array([out[i] for i in range(len(temperatures))]), c["accepted"] / c["drafted"]

    # The decode loop is jitted with these static args either way, so its cache is cleared around
    # the swap (a stale trace would run the wrong rule as the real one, or the reverse). The wrong
    # rule runs first: the real rule passing afterwards also shows the swap did not leak.
    with monkeypatch.context() as m:
        m.setattr(engine_speculation, "speculative_accept", _resample_from_target)
        engine_programs._decode_jit.clear_cache()
        p_wrong = p_value(sample_pairs([0.7] * n)[0], 0.7)
    engine_programs._decode_jit.clear_cache()
    assert p_wrong < 1e-6, p_wrong
    temperatures = np.array([1.0, 0.7] * n + [0.0] * 16)
    toks, acc = sample_pairs(temperatures)
    for t in (1.0, 0.7):
        p_exact = p_value(toks[temperatures == t], t)
        assert p_exact > 1e-3, (t, p_exact)
    greedy1 = int(jnp.argmax(logits1))
    assert (toks[temperatures == 0] == [greedy1, int(jnp.argmax(logits2[greedy1]))]).all()
    assert 0.1 < acc < 0.9  # both accept and reject paths are exercised


@pytest.mark.parametrize(
    "prompts, max_new, kwargs, message",
    [
        ([], 4, {}, "prompts: empty list"),
        ([[1, 2], []], 4, {}, "prompt 1: empty"),
        ([[1, 320]], 4, {}, r"prompt 0, position 1: token id 320 is not in \[0, vocab_size=320\)"),
        ([[1, -1]], 4, {}, "prompt 0, position 1: token id -1"),
        (
            [[1] * 30],
            4,
            {"cache_len": 32},
            "prompt 0: 30 tokens \\+ max_new_tokens=4 do not fit the cache of 32",
        ),
        ([[1] * 40], 4, {"cache_len": 32}, "do not fit the cache"),
        ([[1]], 0, {}, "max_new_tokens must be a positive int, got 0"),
        ([[1]], -3, {}, "max_new_tokens must be a positive int, got -3"),
        ([[1]], 4, {"stop_tokens": [999]}, "stop_tokens of prompt 0, position 0: token id 999"),
        ([[1]], 4, {"temperature": -1.0}, "temperature must be >= 0"),
        ([[1]], 600, {}, "exceeds the model's max_position_embeddings=512"),
    ],
)
def test_bad_input_gets_a_clear_error(tiny, prompts, max_new, kwargs, message):
    cfg, params = tiny
    with pytest.raises(ValueError, match=message):
        generate(cfg, params, prompts, max_new, **kwargs)


def test_package_exports_the_generate_function():
    import model

    assert model.generate is generate and callable(model.generate)


def test_speculative_needs_mtp_modules(tiny):
    cfg, params = tiny
    with pytest.raises(ValueError, match="num_mtp_modules=0"):
        generate(cfg.replace(num_mtp_modules=0), params, [[1]], 4, num_draft=2)
