"""Sharded decode (model/engine/ with mesh=): on the real tiny preset (float32, 8 simulated CPU
devices), an engine whose params and latent cache are sharded over its own mesh decodes what the
one-device engine decodes (same greedy tokens, log-probs within 1e-5, same routed experts) over a
multi-turn episode, on meshes over devices [0:4] and [4:8]; an in-flight set_params keeps the
shardings and the tokens; a training forward on a trainer mesh over other devices, with the
engine's recorded experts, reproduces the sampler's log-probs.

The tiny preset shards on every axis used here: 4 heads over tensor 2 or 4 (1-2 heads per device),
8 experts over expert 2 (4 per device), vocab 320 / FFN 128 / expert FFN 32 over tensor 4, model
dim 64 over fsdp 2; tensor 8 would split its 4 heads (an error, tested).
"""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import Transformer, init_params, param_logical_specs, param_shapes, presets
from model.engine import RolloutEngine
from model.sharding import DEFAULT_RULES, mesh_context, role_mesh
from train import sharding as train_sharding

DEV = jax.devices()
# (mesh sizes, devices, moe_comm): tensor x expert parallel on the first four devices; tensor x
# expert on the other four with expert-parallel dispatch by all_to_all (model/moe_a2a.py: the
# gspmd dispatch all-gathers a layer's experts over the expert axis at every step, this one moves
# only tokens). Each mesh costs ~20 s of compiles on a cold cache (2 loaded cores), so fsdp x
# expert (slots and the model dim over fsdp) is checked by the in-flight set_params test below,
# and pure tensor parallelism (tensor 4: one head per device; checked equal by hand, log-probs
# within 5e-7) is not a case of its own.
MESHES = [
    ({"tensor": 2, "expert": 2}, slice(0, 4), "gspmd"),
    ({"tensor": 2, "expert": 2}, slice(4, 8), "alltoall"),
]
ENGINE = dict(slots=4, cache_len=32, min_bucket=16)  # 2 prefill programs, 1 decode program
PROMPT_LENS = (5, 9, 12)


def tiny(**kw):
    cfg = presets.get("tiny", **kw)
    return cfg, init_params(cfg, jax.random.PRNGKey(0))


def _ids(rng, n, cfg):
    return [int(x) for x in rng.integers(3, cfg.vocab_size, n)]


def _run_turns(eng, max_iterations=256):
    turns = []
    while eng.busy:
        turns += eng.step(max_iterations)
    return turns


def play(eng, cfg, swap=None):
    """Three requests (one turn each), then a second turn of request 0 after a 3-token observation.
    swap = (params, version): set_params after the first 3 decode steps. -> {rid: (turns, experts,
    sequence)}."""
    rng = np.random.default_rng(0)
    for rid, n in enumerate(PROMPT_LENS):
        eng.submit(rid, _ids(rng, n, cfg), max_new=6)
    turns = []
    if swap is not None:
        turns += eng.step(3)
        eng.set_params(*swap)
    turns += _run_turns(eng)
    eng.extend(0, _ids(rng, 3, cfg), max_new=4)
    turns += _run_turns(eng)
    out = {}
    for rid in range(len(PROMPT_LENS)):
        seq = eng.sequence(rid)
        out[rid] = ([t for t in turns if t.request == rid], eng.finish(rid), seq)
    return out


def assert_same_decode(got, want, atol=1e-5):
    for rid, (turns, experts, seq) in want.items():
        g_turns, g_experts, g_seq = got[rid]
        assert g_seq == seq, rid
        assert [t.tokens for t in g_turns] == [t.tokens for t in turns], rid
        for g, w in zip(g_turns, turns, strict=True):
            np.testing.assert_allclose(g.logprobs, w.logprobs, rtol=0, atol=atol)
            np.testing.assert_array_equal(g.versions, w.versions)
        np.testing.assert_array_equal(g_experts, experts)


@pytest.fixture(scope="module")
def reference():
    cfg, params = tiny()
    eng = RolloutEngine(cfg, params, temperature=0.0, **ENGINE)
    return params, play(eng, cfg)


def _shard_shape(x):
    return x.addressable_shards[0].data.shape


@pytest.mark.parametrize("sizes,devices,moe_comm", MESHES)
def test_sharded_decode_equals_single_device(reference, sizes, devices, moe_comm):
    params, want = reference
    cfg, _ = tiny(moe_comm=moe_comm)
    mesh = role_mesh(sizes, DEV[devices])
    eng = RolloutEngine(cfg, params, temperature=0.0, mesh=mesh, **ENGINE)
    # Params live on the engine's devices only, split as the rules say.
    for leaf in jax.tree.leaves(eng.params):
        assert leaf.sharding.device_set == set(DEV[devices])
    tp, ep, fsdp = mesh.shape["tensor"], mesh.shape["expert"], mesh.shape["fsdp"]
    moe, attn = eng.params["moe_layers"][0]["moe"], eng.params["dense_layers"][0]["attn"]
    assert _shard_shape(moe["wi_gate"]) == (8 // ep, 64 // fsdp, 32 // tp)  # [E,D,F]
    assert _shard_shape(attn["wq_b"]) == (32, 4 // tp, 24)  # [q_latent,H,N+R]: heads over tensor
    assert _shard_shape(eng.params["embed"]) == (320 // tp, 64 // fsdp)  # [V,D]
    # Slots over (data, fsdp); S and the latent dims whole (engine.state_logical_specs).
    assert _shard_shape(eng.state.cache["moe"][0]["latent"]) == (4 // fsdp, 32, 32)
    assert_same_decode(play(eng, cfg), want)
    assert eng.state.cache["moe"][0]["latent"].sharding.device_set == set(DEV[devices])


def test_sharded_speculative_decode_equals_single_device():
    """MTP speculative decoding (2 drafted tokens per verify step) on an engine sharded tensor 2 x
    expert 2: the same greedy tokens, log-probs and experts as the one-device speculative engine
    (whose greedy output is plain greedy decoding's, tests/test_generate.py)."""
    cfg, params = tiny()
    kw = dict(temperature=0.0, speculative_k=2, **ENGINE)
    one = RolloutEngine(cfg, params, **kw)
    want = play(one, cfg)
    mesh = role_mesh({"tensor": 2, "expert": 2}, DEV[4:8])
    eng = RolloutEngine(cfg, params, mesh=mesh, **kw)
    assert_same_decode(play(eng, cfg), want)
    # the same drafts verified, the same accepted (random MTP heads: few or none at greedy)
    assert eng.counters() == one.counters() and eng.counters()["drafted"] > 0


def test_set_params_in_flight_keeps_shardings_and_matches_single_device():
    """A swap after 3 decode steps (new params from the host, as a weight store gives them): the
    same tokens, log-probs and versions as the one-device engine, with temperature sampling."""
    cfg, params = tiny()
    new = jax.device_get(init_params(cfg, jax.random.PRNGKey(1)))
    kw = dict(temperature=0.8, seed=3, **ENGINE)
    want = play(RolloutEngine(cfg, params, **kw), cfg, swap=(new, 1))
    mesh = role_mesh({"fsdp": 2, "expert": 2}, DEV[4:8])
    eng = RolloutEngine(cfg, params, mesh=mesh, **kw)
    before = jax.tree.map(lambda x: x.sharding, eng.params)
    got = play(eng, cfg, swap=(new, 1))
    assert jax.tree.map(lambda x: x.sharding, eng.params) == before
    assert_same_decode(got, want)
    versions = np.concatenate([t.versions for turns, _, _ in got.values() for t in turns])
    assert set(versions.tolist()) == {0, 1}  # tokens from both params versions


def test_replay_on_a_trainer_mesh_reproduces_sampler_logprobs():
    """Sampler on devices [4:8], trainer on [0:4] (disjoint meshes, one process): the training
    forward (params sharded by train.sharding with the default rules, forced_experts = the engine's
    records) gives every sampled token the log-prob the sampler recorded (float32, T = 0.8); then
    set_params takes the trainer's sharded params across into the sampler's own layout."""
    cfg, params = tiny()
    eng = RolloutEngine(
        cfg,
        params,
        temperature=0.8,
        mesh=role_mesh({"fsdp": 2, "expert": 2}, DEV[4:8]),
        **ENGINE,
    )
    records = play(eng, cfg)
    mesh = train_sharding.make_mesh({"fsdp": 2, "tensor": 2}, devices=DEV[0:4])
    p_sh = train_sharding.param_shardings(param_logical_specs(cfg), mesh, DEFAULT_RULES)
    t_params = jax.device_put(params, p_sh)
    rows = [0, 1]  # two episodes as one batch of 2 rows (batch over fsdp = 2)
    length = max(len(records[r][2]) for r in rows) - 1  # inputs: every token but the pending one
    toks = np.zeros((len(rows), length), np.int32)
    forced = np.zeros((cfg.num_moe_layers, len(rows), length, cfg.num_experts_per_tok), np.int32)
    for i, r in enumerate(rows):
        _, experts, seq = records[r]
        toks[i, : len(seq) - 1] = seq[:-1]  # padding after: causal, changes nothing before
        forced[:, i, : len(seq) - 1] = np.moveaxis(experts, 0, 1)  # [L,n,k] -> [n,L,k]
    fwd = jax.jit(lambda p, t, e: Transformer(cfg).apply({"params": p}, t, forced_experts=e).logits)
    with mesh_context(mesh, DEFAULT_RULES):
        logits = fwd(t_params, jnp.asarray(toks), jnp.asarray(forced))
    assert logits.sharding.device_set == set(DEV[0:4])
    lp = np.asarray(jax.nn.log_softmax(logits / 0.8, -1))
    for i, r in enumerate(rows):
        turns, _, seq = records[r]
        for t in turns:  # token at position p was sampled from the logits at p - 1
            want = [lp[i, t.start - 1 + j, tok] for j, tok in enumerate(t.tokens)]
            np.testing.assert_allclose(t.logprobs, want, rtol=0, atol=1e-4)
    # The in-process weight path: the trainer's sharded params straight into the sampler's layout.
    before = jax.tree.map(lambda x: x.sharding, eng.params)
    eng.set_params(t_params, 1)
    assert jax.tree.map(lambda x: x.sharding, eng.params) == before
    got = jax.tree.leaves(jax.device_get(eng.params["moe_layers"][0]))
    want = jax.tree.leaves(jax.tree.map(lambda a: a[0], params["moe_layers"]))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def _gathered_param_shapes(params) -> set:
    """Shapes an all-gather of a param would produce: every dim whole or as sharded, not all as
    sharded (a gather over some of its mesh axes), for params of rank >= 2."""
    out = set()
    for x in jax.tree.leaves(params):
        shard = _shard_shape(x)
        if x.ndim < 2 or shard == x.shape:
            continue
        for pick in itertools.product(*[sorted({g, s}) for g, s in zip(x.shape, shard)]):
            if pick != shard:
                out.add(tuple(pick))
    return out


@pytest.mark.parametrize("moe_comm,devices", [("alltoall", slice(4, 8)), ("gspmd", slice(0, 4))])
def test_expert_parallel_decode_gathers_no_weights(moe_comm, devices):
    """The decode loop of an engine on tensor 2 x expert 2 with all_to_all dispatch all-gathers
    activations and logits, never a weight (no all-gather in the compiled program has the shape of
    a param gathered over any of its axes) nor a layer's cache (model/decode.py keeps the updated
    caches in the slot layout; unconstrained, this program gathered them after the loop).
    The gspmd dispatch on the same mesh (the control: the probe sees it) gathers every MoE layer's
    experts over the expert axis, [8, 64, 16] = E x D x F/tensor, at every step."""
    cfg, params = tiny(moe_comm=moe_comm)
    mesh = role_mesh({"tensor": 2, "expert": 2}, DEV[devices])  # the programs of MESHES' cases
    eng = RolloutEngine(cfg, params, temperature=0.0, mesh=mesh, **ENGINE)
    rows = jnp.arange(eng.spec.slots)  # every slot: the in-place decode program
    valid = jnp.int32(eng.valid)
    args = (cfg, eng.spec, 32, eng.params, eng.version, valid, eng.state, rows, jnp.int32(8))
    with eng._context():
        hlo = eng._decode.lower(*args).compile().as_text()
    gathers = re.findall(r"= [a-z0-9]+\[([0-9,]*)\][^ ]* all-gather\(", hlo)
    shapes = {tuple(int(d) for d in g.split(",") if d) for g in gathers}
    weights = shapes & _gathered_param_shapes(eng.params)
    assert weights == (set() if moe_comm == "alltoall" else {(8, 64, 16), (8, 16, 64)})
    assert not shapes & {x.shape for x in jax.tree.leaves(eng.state.cache)}


@pytest.mark.parametrize(
    "sizes,n_dev,slots,message",
    [
        ({"tensor": 8}, 8, 4, "mesh tensor axis 8 does not divide num_attention_heads=4"),
        ({"expert": 3}, 3, 3, "mesh expert axis 3 does not divide n_routed_experts=8"),
        ({"fsdp": 4}, 4, 2, "slots=2 is not divisible by mesh axes ('data', 'fsdp') (4)"),
    ],
)
def test_a_mesh_the_model_cannot_split_is_one_clear_error(sizes, n_dev, slots, message):
    cfg, params = tiny()
    mesh = role_mesh(sizes, DEV[:n_dev])
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RolloutEngine(cfg, params, slots=slots, cache_len=32, mesh=mesh)


def test_a_param_the_mesh_cannot_split_is_named():
    """Heads and experts divide, the vocab (322 over tensor 4) does not: the error names the
    param."""
    cfg = presets.get("tiny", vocab_size=322)
    params = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), param_shapes(cfg))  # no init
    mesh = role_mesh({"tensor": 4}, DEV[:4])
    message = "params['embed']: dim 0 (322) is not divisible by mesh axes ('tensor',) (4 devices)"
    with pytest.raises(ValueError, match=re.escape(message)):
        RolloutEngine(cfg, params, slots=4, cache_len=32, mesh=mesh)


def test_sampler_mesh_takes_sizes_and_a_device_list():
    mesh = role_mesh({"expert": 2, "tensor": -1}, DEV[4:8])
    assert dict(mesh.shape) == {"data": 1, "fsdp": 1, "expert": 2, "tensor": 2, "context": 1}
    assert set(mesh.devices.flat) == set(DEV[4:8])
    with pytest.raises(ValueError, match="do not fit 4 devices"):
        role_mesh({"tensor": 3}, DEV[:4])
    with pytest.raises(ValueError, match="unknown axes"):
        role_mesh({"model": 2}, DEV[:2])


def test_an_engine_at_the_mapping_cap_drops_compiled_programs_and_decodes_the_same(
    reference, monkeypatch
):
    """model/engine/map_limit.py: with vm.max_map_count read as 1 (every process is past the
    mark), each program the engine has not used first drops all compiled programs (XLA:CPU's
    kernel mappings go with them, instead of LLVM failing at the kernel's cap later), and the
    episode decodes exactly as the reference engine's. Last in this module: it empties the jit
    caches."""
    import gc

    from model.engine import map_limit

    params, want = reference
    cfg, _ = tiny()
    monkeypatch.setattr(map_limit, "cap", lambda: 1)
    released, clear = [], jax.clear_caches

    def measured_clear():
        before = map_limit.mappings()
        clear()
        gc.collect()
        released.append(before - map_limit.mappings())

    monkeypatch.setattr(jax, "clear_caches", measured_clear)
    eng = RolloutEngine(cfg, params, temperature=0.0, **ENGINE)
    got = play(eng, cfg)
    assert_same_decode(got, want)
    new_programs = [k for k in eng.programs if k[0] in ("prefill", "decode")]
    assert len(released) == len(new_programs) >= 2, (released, eng.programs)
    assert released[0] > 100, released  # the process's compiled kernels, unmapped
