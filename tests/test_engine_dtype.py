"""The decode engine in bfloat16 (ModelConfig.decode_dtype, model/decode.py `engine_config`): params
and latent caches in bf16 (half the cache bytes), sampling and log-probs in float32; on the `tiny`
preset its greedy tokens and log-probs match the float32 engine's within LOGPROB_TOL, and its
speculative (MTP) greedy decode equals its plain greedy decode.

Random-init `tiny` is nearly uniform over its 320 ids (log-probs ~ -4.5, the top-2 gap at a
position often < 0.01), so bf16 rounding can flip greedy near-ties: the tokens are compared where
the float32 choice is clear, and the free-running bf16 greedy up to its first divergence.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import Transformer, presets
from model.decode import cache_bytes_per_token, resolve_decode_dtype
from model.engine import RolloutEngine
from model.prompt_batch import generate

PROMPTS = [[1, 2, 3, 4, 5], [7], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11]]
MAX_NEW = 10
CACHE = 32  # what generate() picks for these prompts (longest 11 + 10, rounded up to 16)
# |bf16 - f32| log-prob of the same token on the same prefix. Measured on these prompts (teacher-
# forced, 30 positions): max 0.0087, bf16's routing equal to float32's at every position. In a wider
# probe (8 random prompts x 48 tokens, two init seeds, blocked dispatch: 768 positions) the max was
# 0.16, where bf16 routed a token to another expert (1% of rows: near-ties of the float32 router on
# the bf16-rounded hidden of a random model); p99 0.013, mean 0.003.
LOGPROB_TOL = 0.05


@pytest.fixture(scope="module")
def tiny(tiny_dense_model):
    cfg, params = tiny_dense_model
    return cfg.replace(decode_dtype="float32"), cfg.replace(decode_dtype="bfloat16"), params


@pytest.fixture(scope="module")
def f32_greedy(tiny):
    """The float32 engine's greedy run (test_generate.py's greedy_plain: same compiled programs)."""
    c32, _, params = tiny
    return generate(c32, params, PROMPTS, MAX_NEW, batch_size=2)


@pytest.fixture(scope="module")
def f32_top2(tiny, f32_greedy):
    """[prompt][j] (top-1, top-2) log-probs of the float32 forward at the j-th generated token."""
    c32, _, params = tiny
    seqs = np.zeros((len(PROMPTS), CACHE), np.int32)
    for n, (p, t) in enumerate(zip(PROMPTS, f32_greedy.tokens)):
        seqs[n, : len(p) + len(t)] = p + t
    forward = jax.jit(lambda p, t: Transformer(c32).apply({"params": p}, t, with_mtp=False))
    logits = forward(params, jnp.asarray(seqs)).logits
    lp = np.asarray(jax.nn.log_softmax(logits, -1))
    span = lambda p: slice(len(p) - 1, len(p) - 1 + MAX_NEW)  # logits that chose each token
    return [-np.sort(-lp[n, span(p)], -1)[:, :2] for n, p in enumerate(PROMPTS)]


def _engine(cfg, params, **kw):
    """2 slots (the third prompt waits for a free one), greedy, every slot stepped (compact=False:
    one decode program, not one per live-row count: compiles are this file's cost)."""
    return RolloutEngine(
        cfg, params, slots=2, cache_len=CACHE, temperature=0.0, stop_width=1, compact=False, **kw
    )


def _greedy(eng, kind: str, forced=(None,) * len(PROMPTS)) -> list[tuple]:
    """Runs PROMPTS (teacher-forced with `forced`) -> per prompt (tokens, logprobs, the engine's
    own argmax ids (engines with top_logprobs=1; else None), experts of every consumed token)."""
    raw = eng.spec.top_logprobs >= 0
    for n, p in enumerate(PROMPTS):
        eng.submit((kind, n), p, max_new=MAX_NEW, forced=forced[n], logprobs=raw)
    done = {}
    while len(done) < len(PROMPTS):
        for t in eng.step():  # record, then free the slot for the waiting prompt
            ids = eng.raw_logprobs(t.request, t.start, t.start + MAX_NEW)[1][:, 0] if raw else None
            done[t.request[1]] = (t.tokens, t.logprobs, ids, eng.finish(t.request))
    return [done[n] for n in range(len(PROMPTS))]


@pytest.fixture(scope="module")
def bf16_runs(tiny, f32_greedy):
    """One bf16 engine, greedy: the prompts run free, then teacher-forced with the float32
    tokens. -> (engine, {'free' | 'forced': _greedy's list})."""
    _, c16, params = tiny
    eng = _engine(c16, params, top_logprobs=1)
    runs = {"free": _greedy(eng, "free"), "forced": _greedy(eng, "forced", f32_greedy.tokens)}
    return eng, runs


def test_bf16_engine_holds_bf16_params_and_half_the_cache_bytes(tiny, bf16_runs):
    c32, _, params = tiny
    eng16, _ = bf16_runs
    eng32 = RolloutEngine(c32, params, slots=2, cache_len=CACHE)
    assert eng16.cfg.dtype == "bfloat16" and eng32.cfg.dtype == c32.dtype  # compute dtype
    for eng, dt in ((eng16, jnp.bfloat16), (eng32, jnp.float32)):
        for path, leaf in jax.tree_util.tree_leaves_with_path(eng.state.cache):
            want = jnp.int32 if path[-1].key == "positions" else dt
            assert leaf.dtype == want, (jax.tree_util.keystr(path), leaf.dtype)
    nbytes = lambda eng: sum(x.nbytes for x in jax.tree.leaves(eng.state.cache))
    values = lambda eng: (
        nbytes(eng)
        - sum(
            x.nbytes
            for p, x in jax.tree_util.tree_leaves_with_path(eng.state.cache)
            if p[-1].key == "positions"
        )
    )
    assert 2 * values(eng16) == values(eng32)
    # The one per-token accounting (model/decode.py) is what the engine allocates, per dtype.
    per_slot_position = 2 * CACHE
    assert nbytes(eng16) == per_slot_position * cache_bytes_per_token(c32, "bfloat16")
    assert nbytes(eng32) == per_slot_position * cache_bytes_per_token(c32, "float32")
    # Weights bf16; the router (float32 routing at HIGHEST precision) and norm scales float32.
    kept = {"router", "router_bias", "scale"}
    for path, leaf in jax.tree_util.tree_leaves_with_path(eng16.params):
        want = jnp.float32 if path[-1].key in kept else jnp.bfloat16
        assert leaf.dtype == want, (jax.tree_util.keystr(path), leaf.dtype)
    assert {x.dtype for x in jax.tree.leaves(eng32.params)} == {jnp.dtype(jnp.float32)}


def test_bf16_greedy_and_logprobs_match_float32(f32_greedy, f32_top2, bf16_runs):
    """Teacher-forced on the float32 greedy tokens, the bf16 engine's log-probs are within
    LOGPROB_TOL of the float32 engine's, and its own greedy choice is the float32 one wherever
    float32's top-2 gap exceeds 2 x LOGPROB_TOL (a smaller gap is a tie bf16 may break either way).
    Free-running, bf16 greedy equals float32 greedy up to the first position where bf16 on
    float32's prefix prefers another token (measured: 10, 10 and 4 of 10 tokens agree; the third
    prompt's 5th token is a near-tie, float32's top-2 gap 0.006; 29 of 30 forced argmaxes agree)."""
    _, runs = bf16_runs
    agree = 0
    for n, f32 in enumerate(f32_greedy.sequences):
        tokens, logprobs, ids, _ = runs["forced"][n]
        assert tokens == f32.tokens  # forcing emits the given tokens, bf16 log-probs recorded
        np.testing.assert_allclose(logprobs, f32.logprobs, atol=LOGPROB_TOL)
        gap = f32_top2[n][:, 0] - f32_top2[n][:, 1]
        same = ids == np.asarray(f32.tokens)
        assert np.all(same | (gap <= 2 * LOGPROB_TOL)), (n, gap[~same])
        free_tokens, free_logprobs, _, _ = runs["free"][n]
        first = int(np.argmin(same)) if not same.all() else MAX_NEW  # first bf16 preference
        assert free_tokens[:first] == f32.tokens[:first]
        if first < MAX_NEW:  # diverges there, to bf16's own choice
            assert free_tokens[first] == ids[first] != f32.tokens[first]
        np.testing.assert_allclose(free_logprobs[:first], f32.logprobs[:first], atol=LOGPROB_TOL)
        agree += first
    assert agree >= 2 * MAX_NEW  # most of the 3 x 10 tokens: a broken bf16 path agrees on ~none


def test_speculative_bf16_equals_plain_bf16_greedy(tiny, bf16_runs):
    """As test_generate.py's float32 test: MTP drafts verified in one forward over K+1 positions
    emit exactly the plain greedy tokens, with their log-probs and routing."""
    _, c16, params = tiny
    _, runs = bf16_runs
    eng = _engine(c16, params, speculative_k=2)
    spec = _greedy(eng, "spec")
    stats = eng.counters()
    assert stats["drafted"] == 2 * stats["slot_steps"] and stats["accepted"] <= stats["drafted"]
    for (tokens, logprobs, _, experts), (s_tokens, s_logprobs, _, s_experts) in zip(
        runs["free"], spec
    ):
        assert s_tokens == tokens
        np.testing.assert_allclose(s_logprobs, logprobs, atol=1e-5)
        np.testing.assert_array_equal(s_experts, experts)


def test_decode_dtype_auto_is_float32_on_cpu_and_bf16_on_accelerators():
    assert resolve_decode_dtype("auto", "cpu") == "float32"  # tests decode bit-exact to training
    assert resolve_decode_dtype("auto", "gpu") == resolve_decode_dtype("auto", "tpu") == "bfloat16"
    assert resolve_decode_dtype("float32", "gpu") == "float32"
    with pytest.raises(ValueError, match="decode_dtype must be one of"):
        presets.get("tiny", decode_dtype="float16")
