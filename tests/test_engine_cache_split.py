"""The latent cache split across the engine's chips (model/engine/split.py), on the real tiny preset
(float32, 8 simulated CPU devices): an engine whose cache is split by slot (data-parallel
attention over the expert axis, all-to-all expert dispatch), by sequence (positions over the
context axis, attention partials combined across it) or both decodes what the one-device engine
decodes: the same greedy tokens, log-probs within 1e-5 and the same routed experts, through
prefill, plain and MTP-speculative decode, an in-flight weight swap mid-decode, a multi-turn
extend and a best-of-K branch (a new request whose prompt is a paused episode's transcript, as
rl/sampling/rollout.py branches). Each chip holds 1 / (split axes' sizes) of the cache: read off
the arrays' shards and off the compiled decode program's memory analysis.

Layouts (8 devices): slots over expert 4 (x tensor 2: 2 heads per chip); positions over context 4
(x tensor 2); slots over expert 2 and positions over context 2 (x tensor 2).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import init_params, memory_plan, presets
from model.engine import RolloutEngine
from model.sharding import MESH_AXES, role_mesh

DEV = jax.devices()
ENGINE = dict(slots=4, cache_len=32, min_bucket=16)
PROMPT_LENS = (5, 9, 12)
# (mesh sizes, cache_split, speculative_k); both splits at once is a `long` test (-m long): the
# default run keeps the suite under 12 minutes with the two single splits.
LAYOUTS = [
    ({"expert": 4, "tensor": 2}, "slots", 0),
    ({"context": 4, "tensor": 2}, "sequence", 2),
    pytest.param(
        {"expert": 2, "context": 2, "tensor": 2}, "slots+sequence", 2, marks=pytest.mark.long
    ),
]


def tiny():
    cfg = presets.get("tiny", moe_comm="alltoall")
    return cfg, init_params(cfg, jax.random.PRNGKey(0))


def _ids(rng, n, cfg):
    return [int(x) for x in rng.integers(3, cfg.vocab_size, n)]


def _run(eng):
    turns = []
    while eng.busy:
        turns += eng.step()
    return turns


def play(eng, cfg, new_params):
    """Three requests; a weight swap after 3 decode steps; then request 0 both extended by an
    observation and branched (a 4th request: its transcript + the same observation as a prompt).
    -> {rid: (turn tokens, turn log-probs, turn versions, experts, sequence)}."""
    rng = np.random.default_rng(0)
    for rid, n in enumerate(PROMPT_LENS):
        eng.submit(rid, _ids(rng, n, cfg), max_new=6)
    turns = eng.step(3)
    eng.set_params(new_params, 1)
    turns += _run(eng)
    obs = _ids(rng, 3, cfg)
    eng.submit("branch", eng.sequence(0) + obs, max_new=5)
    eng.extend(0, obs, max_new=5)
    turns += _run(eng)
    out = {}
    for rid in (*range(len(PROMPT_LENS)), "branch"):
        mine = [t for t in turns if t.request == rid]
        seq = eng.sequence(rid)
        out[rid] = (
            [t.tokens for t in mine],
            [t.logprobs for t in mine],
            [t.versions for t in mine],
            eng.finish(rid),
            seq,
        )
    return out


def assert_same(got, want):
    for rid, (tokens, lps, versions, experts, seq) in want.items():
        g_tokens, g_lps, g_versions, g_experts, g_seq = got[rid]
        assert g_seq == seq and g_tokens == tokens, rid
        for g, w in zip(g_lps, lps, strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5)
        for g, w in zip(g_versions, versions, strict=True):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g_experts, experts)


@pytest.fixture(scope="module")
def model():
    cfg, params = tiny()
    new = jax.device_get(init_params(cfg, jax.random.PRNGKey(1)))
    return cfg, params, new


@pytest.mark.parametrize("sizes,split,k", LAYOUTS)
def test_split_cache_decodes_as_one_device(model, sizes, split, k):
    cfg, params, new = model
    kw = dict(temperature=0.0, speculative_k=k, **ENGINE)
    want = play(RolloutEngine(cfg, params, **kw), cfg, new)
    mesh = role_mesh(sizes, DEV)
    eng = RolloutEngine(cfg, params, mesh=mesh, cache_split=split, **kw)
    n_slots = mesh.shape["expert"] if "slots" in split else 1
    n_seq = mesh.shape["context"] if "sequence" in split else 1
    for leaf in jax.tree.leaves((eng.state.cache, eng.state.mtp_cache)):
        shard = leaf.addressable_shards[0].data.shape
        assert shard[:2] == (4 // n_slots, 32 // n_seq), (leaf.shape, shard)
    got = play(eng, cfg, new)
    assert_same(got, want)
    versions = np.concatenate([np.concatenate(v) for _, _, v, _, _ in got.values()])
    assert set(versions.tolist()) == {0, 1}  # tokens from both params versions
    if k:
        assert eng.counters()["drafted"] > 0


def _per_device_bytes(tree) -> int:
    return sum(x.addressable_shards[0].data.nbytes for x in jax.tree.leaves(tree))


def _decode_program(eng, s):
    """The in-place decode program (every slot, no window) of `eng`, compiled."""
    args = (eng.cfg, eng.spec, s, eng.params, eng.version, jnp.int32(eng.valid), eng.state)
    with eng._context():
        return eng._decode.lower(*args, jnp.arange(eng.spec.slots), jnp.int32(8)).compile()


@pytest.mark.parametrize("sizes,split,k", LAYOUTS)
def test_split_cache_bytes_per_device(model, sizes, split, k):
    """Against the unsplit engine on the same mesh (cache replicated over expert and context): each
    chip holds 1/4 of the cache (4 = the split axes' sizes in every layout here); the compiled
    decode program's argument bytes drop by exactly the slot state's drop (params unchanged), its
    temporaries do not grow, and it all-gathers no layer's cache (the attention runs on each
    chip's part of it)."""
    cfg, params, _ = model
    s = 256  # the cache dominates: 4 slots x 256 positions x 2 layers x 41 values x 4 B = 335,872
    mesh = role_mesh(sizes, DEV)
    kw = dict(temperature=0.0, slots=4, cache_len=s, mesh=mesh)
    whole = RolloutEngine(cfg, params, **kw)
    eng = RolloutEngine(cfg, params, cache_split=split, **kw)
    caches = lambda e: (e.state.cache, e.state.mtp_cache)
    assert _per_device_bytes(caches(eng)) * 4 == _per_device_bytes(caches(whole))
    # The sampler's memory plan (what --dry_run prints for an RL run) counts the same bytes.
    for e, e_split in ((whole, "none"), (eng, split)):
        plan = memory_plan.sampler_plan(
            cfg, {**dict.fromkeys(MESH_AXES, 1), **sizes}, 4, s, dtype="float32",
            cache_split=e_split,
        )  # fmt: skip
        assert plan["kv_cache"] == _per_device_bytes(e.state.cache), (e_split, plan)
    m_whole, m_split = (_decode_program(e, s).memory_analysis() for e in (whole, eng))
    state_drop = _per_device_bytes(whole.state) - _per_device_bytes(eng.state)
    assert _per_device_bytes(caches(whole)) * 3 // 4 <= state_drop
    args_drop = m_whole.argument_size_in_bytes - m_split.argument_size_in_bytes
    assert args_drop == state_drop, (args_drop, state_drop)
    assert m_split.temp_size_in_bytes <= m_whole.temp_size_in_bytes
    hlo = _decode_program(eng, s).as_text()
    gathers = re.findall(r"= [a-z0-9]+\[([0-9,]*)\][^ ]* all-gather\(", hlo)
    shapes = {tuple(int(d) for d in g.split(",") if d) for g in gathers}
    assert not shapes & {x.shape for x in jax.tree.leaves(eng.state.cache)}
