"""Expert-parallel all-to-all MoE (model/moe_a2a.py) vs the GSPMD reference dispatch, on the tiny
preset's MoE layer and 8 simulated CPU devices: values, gradients, drop counting."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding

from model import moe_a2a, presets
from model import sharding as sh
from model.kernels import backend
from model.moe import MoE

AXES = sh.MESH_AXES  # (data, fsdp, expert, tensor)
MESHES = {
    "expert8": (1, 1, 8, 1),
    "expert4_data2": (2, 1, 4, 1),
    "expert2_fsdp2_tensor2": (1, 2, 2, 2),
}


def _mesh(shape):
    return jax.make_mesh((*shape, 1), AXES, axis_types=(AxisType.Auto,) * 5)


def _tiny_params_on(cfg, mesh):
    """cfg's params (seed 0) laid out on the mesh by the default rules: the suite's one unsharded
    init program (compute-only fields do not change it), placed; an init under the mesh would
    compile a program of its own for each mesh (~6 s of CPU) and give the same bits."""
    from model import init_params, param_logical_specs

    shardings = sh.logical_shardings(param_logical_specs(cfg), mesh, sh.DEFAULT_RULES)
    return jax.device_put(init_params(cfg, jax.random.PRNGKey(0)), shardings)


def _setup(cfg, b=8, t=8):
    x = jax.random.normal(jax.random.PRNGKey(1), (b, t, cfg.hidden_size), jnp.float32)
    seg = jnp.ones((b, t), jnp.int32)
    variables = MoE(cfg).init(jax.random.PRNGKey(0), x, seg)
    # A non-zero correction bias so choosing (biased) and weighting (unbiased) differ.
    params = nn.unbox(variables["params"])
    bias = 0.3 * jax.random.normal(jax.random.PRNGKey(2), params["router_bias"].shape)
    params = {**params, "router_bias": bias}
    specs = nn.get_partition_spec(variables)["params"]
    probe = jax.random.normal(jax.random.PRNGKey(3), x.shape)  # a loss that weighs every output
    return x, seg, params, specs, probe


def _value_and_grad(cfg, mesh, x, seg, params, specs, probe):
    rules = sh.DEFAULT_RULES

    def loss(p, x):
        out = MoE(cfg).apply({"params": p}, x, seg)
        return jnp.sum(out.y * probe), out.expert_counts

    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        p_sh = jax.tree.map(
            lambda s: nn.logical_to_mesh_sharding(s, mesh, rules),
            specs,
            is_leaf=lambda s: isinstance(s, jax.sharding.PartitionSpec),
        )
        x_sh = NamedSharding(mesh, nn.logical_to_mesh_axes((sh.BATCH, None, None), rules))
        params, x = jax.device_put(params, p_sh), jax.device_put(x, x_sh)
        fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))
        (value, counts), (g_p, g_x) = fn(params, x)
    return jax.device_get((value, counts, g_p, g_x))


@pytest.fixture(scope="module")
def tiny_moe():
    cfg = presets.get("tiny", moe_impl="dense")
    return cfg, _setup(cfg)


@pytest.mark.parametrize("name", list(MESHES))
def test_alltoall_equals_gspmd_values_and_grads(tiny_moe, name):
    cfg, data = tiny_moe
    mesh = _mesh(MESHES[name])
    ref = _value_and_grad(cfg, mesh, *data)
    got = _value_and_grad(cfg.replace(moe_comm="alltoall"), mesh, *data)
    assert abs(float(ref[0])) > 1.0  # a non-trivial loss
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
    np.testing.assert_array_equal(got[1], ref[1])  # same routing
    for path, a, b in zip(
        jax.tree_util.tree_leaves_with_path(ref[2]),
        jax.tree.leaves(got[2]),
        jax.tree.leaves(ref[2]),
    ):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4, err_msg=str(path[0]))
    np.testing.assert_allclose(got[3], ref[3], atol=2e-5, rtol=1e-4)
    assert np.abs(ref[2]["wi_gate"]).max() > 1e-3 and np.abs(ref[2]["router"]).max() > 1e-3


def _expected_drops(ids, n_shards, ep, e_loc, cap):
    """Overflow beyond `cap` rows per (dispatching device, destination), counted in numpy."""
    ids = np.asarray(ids).reshape(n_shards * ep, -1)  # each dispatching device's assignments
    dest = ids // e_loc
    return sum(max(0, int((row == j).sum()) - cap) for row in dest for j in range(ep))


def test_capacity_drops_are_counted_and_large_capacity_is_dropless(tiny_moe, factor=0.5):
    cfg, (x, seg, params, _, _) = tiny_moe
    mesh = _mesh(MESHES["expert4_data2"])
    lay = moe_a2a.layout_from_rules(sh.DEFAULT_RULES, dict(zip(AXES, MESHES["expert4_data2"])))
    flat = x.reshape(-1, cfg.hidden_size)
    from model.moe import dispatch_dense, route

    r = route(flat, params["router"], params["router_bias"], cfg)
    w = [params[k] for k in ("wi_gate", "wi_up", "wo")]
    with jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
        run = lambda f: jax.jit(
            lambda: moe_a2a.dispatch_alltoall(
                flat, r.expert_ids, r.weights, *w, lay, capacity_factor=f
            )
        )()
        y_small, dropped = run(factor)
        y_big, dropped_big = run(4.0)  # 4 = ep: a slot holds every assignment -> dropless
    n_dispatch = flat.shape[0] // (2 * 4)  # rows per dispatching device (data 2 x expert 4)
    cap = moe_a2a.capacity(n_dispatch * cfg.num_experts_per_tok, 4, factor)
    want = _expected_drops(r.expert_ids, 2, 4, cfg.n_routed_experts // 4, cap)
    assert int(dropped) == want and want > 0
    assert int(dropped_big) == 0
    ref = dispatch_dense(flat, r, *w)
    np.testing.assert_allclose(y_big, ref, atol=1e-5)
    assert np.abs(np.asarray(y_small) - np.asarray(ref)).max() > 1e-3  # drops change the output


@pytest.mark.slow  # two whole-model compiles: ~15 s idle, ~60 s on the loaded machine
def test_tiny_transformer_forward_matches_with_uneven_rows():
    """The whole tiny model (MoE + MTP blocks) through the all-to-all path, with a row count (3 x 5)
    that no mesh axis divides, so the dispatch pads with no-op rows."""
    from model import Transformer

    mesh = _mesh(MESHES["expert2_fsdp2_tensor2"])
    tokens = jax.random.randint(jax.random.PRNGKey(1), (3, 5), 0, 320)
    logits = {}
    for comm in ("gspmd", "alltoall"):
        cfg = presets.get("tiny", moe_comm=comm, moe_impl="dense")
        params = _tiny_params_on(cfg, mesh)
        with jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
            out = jax.jit(lambda p, t, cfg=cfg: Transformer(cfg).apply({"params": p}, t))(
                params, tokens
            )
        logits[comm] = np.asarray(jnp.concatenate([out.logits, out.mtp_logits[0]], 1))
    assert logits["gspmd"].std() > 0.1
    np.testing.assert_allclose(logits["alltoall"], logits["gspmd"], atol=1e-5)


def test_rules_with_expert_axis_in_batch_need_no_token_split():
    """Rules where the expert axis also shards the batch (expert parallel doubles as data parallel
    outside the MoE): rows are already distinct per expert shard; values and grads vs the dense
    single-device reference."""
    from model.moe import dispatch_dense, route

    rules = tuple(
        (k, ("data", "fsdp", "expert")) if k == sh.BATCH else (k, v) for k, v in sh.DEFAULT_RULES
    )
    shape = MESHES["expert4_data2"]
    lay = moe_a2a.layout_from_rules(rules, dict(zip(AXES, shape)))
    assert not lay.split_tokens
    cfg = presets.get("tiny")
    ks = jax.random.split(jax.random.PRNGKey(1), 5)
    x = jax.random.normal(ks[4], (64, 64))
    w = [0.1 * jax.random.normal(k, s) for k, s in zip(ks, [(8, 64, 32), (8, 64, 32), (8, 32, 64)])]
    r = route(x, jax.random.normal(ks[3], (64, 8)), jnp.zeros(8), cfg)
    a2a = lambda x, *w: jnp.sum(
        moe_a2a.dispatch_alltoall(x, r.expert_ids, r.weights, *w, lay)[0] ** 2
    )
    ref = lambda x, *w: jnp.sum(dispatch_dense(x, r, *w) ** 2)
    with jax.set_mesh(_mesh(shape)), nn.logical_axis_rules(rules):
        got = jax.jit(jax.value_and_grad(a2a, argnums=(0, 1, 2, 3)))(x, *w)
    want = jax.jit(jax.value_and_grad(ref, argnums=(0, 1, 2, 3)))(x, *w)
    for u, v in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-5)


def _skewed(b=8, t=8):
    """Every token forced onto experts (0, 1), both on expert shard 0 of 4 (E_loc = 2); the
    second half of each row is padding (segment 0)."""
    forced = jnp.broadcast_to(jnp.array([0, 1], jnp.int32), (b, t, 2))  # [B,T,k]
    seg = jnp.broadcast_to((jnp.arange(t) < t // 2).astype(jnp.int32), (b, t))  # [B,T]
    return forced, seg


def test_dropped_count_surfaces_in_moe_output_and_train_metrics():
    """expert4_data2 splits the 8 x 8 rows over 8 dispatching devices, one batch row each: a = 8
    tokens x 2 = 16 assignments, all to shard 0. capacity_factor 1: C = ceil(16 / 4) = 4 slots,
    kept in token order -> tokens 0 and 1 kept; tokens 2, 3 (valid: 4 assignments) dropped, and
    the padding tokens' drops (4..7) not counted: 8 devices x 4 = 32 dropped of 64 valid
    assignments. Dropless (factor 0) drops none, same skew."""
    from model import Transformer
    from train.losses import lm_loss

    forced, seg = _skewed()
    tokens = jax.random.randint(jax.random.PRNGKey(1), seg.shape, 0, 320)
    batch = {"targets": tokens, "loss_mask": seg, "segment_ids": seg}
    mesh = _mesh(MESHES["expert4_data2"])
    got = {}
    for factor in (1.0, 0.0):
        cfg = presets.get("tiny", moe_comm="alltoall", moe_impl="dense", moe_capacity_factor=factor)
        assert cfg.num_hidden_layers - cfg.num_dense_layers == 1  # one MoE layer (+ MTP, unused)
        params = _tiny_params_on(cfg, mesh)
        with jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
            fwd = lambda p, cfg=cfg: Transformer(cfg).apply(
                {"params": p}, tokens, segment_ids=seg, forced_experts=forced[None], with_mtp=False
            )
            x = jax.random.normal(jax.random.PRNGKey(2), (8, 8, cfg.hidden_size))
            layer = params["moe_layers"]["moe"]
            moe = lambda p, cfg=cfg, x=x: MoE(cfg).apply(
                {"params": jax.tree.map(lambda w: w[0], p)}, x, seg, forced
            )
            out, m_out = jax.jit(fwd)(params), jax.jit(moe)(layer)
        got[factor] = (out, lm_loss(out, batch)[1]["metrics"], int(m_out.dropped))
    out, metrics, dropped = got[1.0]
    assert dropped == 32 and int(out.moe_dropped) == 32
    assert int(jnp.sum(out.expert_counts)) == 64
    assert float(metrics["moe_dropped_frac"]) == 0.5
    out, metrics, dropped = got[0.0]
    assert dropped == 0 and out.moe_dropped is None and "moe_dropped_frac" not in metrics


@pytest.mark.parametrize(
    "platform, mesh_shape, alltoall",
    [("gpu", (1, 1, 8, 1), True), ("tpu", (2, 1, 4, 1), True), ("cpu", (1, 1, 8, 1), False),
     ("gpu", (1, 1, 1, 1), False)],
)  # fmt: skip
def test_auto_comm_is_alltoall_only_on_a_multi_device_accelerator_mesh(
    tiny_moe, platform, mesh_shape, alltoall, monkeypatch
):
    """moe_comm='auto' (the default): the traced MoE layer exchanges tokens with all_to_all on a
    GPU/TPU mesh of several devices (tokamax's grouped GEMM is a custom call GSPMD would run
    whole on every device), and keeps the GSPMD dispatch on CPU and on one device."""
    cfg, (x, seg, params, _, _) = tiny_moe
    assert cfg.moe_comm == "auto"
    monkeypatch.setattr(backend, "platform", lambda: platform)
    mesh = jax.make_mesh((*mesh_shape, 1), AXES, axis_types=(AxisType.Auto,) * 5,
                         devices=jax.devices()[: int(np.prod(mesh_shape))])  # fmt: skip
    with jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
        jaxpr = str(jax.make_jaxpr(lambda p: MoE(cfg).apply({"params": p}, x, seg).y)(params))
    assert ("all_to_all" in jaxpr) == alltoall
