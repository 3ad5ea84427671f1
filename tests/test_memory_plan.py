"""Analytic plans (model/memory_plan.py) vs compiled programs: the bytes each device sends per MoE
layer per step with the all-to-all dispatch, read off the compiled HLO on 8 simulated devices."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from model import memory_plan, moe_a2a, presets
from model import sharding as sh

MESHES = [(1, 1, 8, 1), (2, 1, 4, 1), (1, 2, 2, 2), (2, 2, 2, 1)]


def _compiled_hlo(cfg, shape, b=8, t=16):
    """The MoE dispatch's forward + backward (one layer's step), laid out as in the model: rows
    sharded like the batch, expert weights by the logical rules, gradients back in place."""
    mesh = jax.make_mesh(shape, sh.MESH_AXES, axis_types=(AxisType.Auto,) * 4)
    sizes = dict(zip(sh.MESH_AXES, shape))
    lay = moe_a2a.layout_from_rules(sh.DEFAULT_RULES, sizes)
    n, d, e, f, k = b * t, cfg.hidden_size, cfg.n_routed_experts, cfg.moe_intermediate_size, 2
    ids = jax.random.randint(jax.random.PRNGKey(0), (n, k), 0, e)
    args = (jnp.ones((n, d)), jnp.ones((n, k)), jnp.ones((e, d, f)), jnp.ones((e, d, f)))
    args += (jnp.ones((e, f, d)), jnp.ones((n, d)))
    spec = lambda *axes: NamedSharding(mesh, nn.logical_to_mesh_axes(axes, sh.DEFAULT_RULES))
    rows = spec(sh.BATCH, None)
    w_in, w_out = spec(sh.EXPERT, sh.EMBED, sh.MLP), spec(sh.EXPERT, sh.MLP, sh.EMBED)

    def loss(x, w, wg, wu, wo, probe):
        y, _ = moe_a2a.dispatch_alltoall(
            x, ids, w, wg, wu, wo, lay, capacity_factor=cfg.moe_capacity_factor
        )
        return jnp.sum(jax.lax.with_sharding_constraint(y, rows) * probe)

    shardings = (rows, rows, w_in, w_in, w_out, rows)
    with jax.set_mesh(mesh), nn.logical_axis_rules(sh.DEFAULT_RULES):
        fn = jax.jit(
            jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4)),
            in_shardings=shardings,
            out_shardings=(NamedSharding(mesh, P()), shardings[:5]),
        )
        return fn.lower(*args).compile().as_text(), sizes, n


@pytest.mark.parametrize(
    "shape,capacity_factor", [(m, 0.0) for m in MESHES] + [((2, 1, 4, 1), 1.5)]
)
def test_analytic_moe_comm_matches_compiled_collectives(shape, capacity_factor):
    cfg = presets.get("tiny", moe_capacity_factor=capacity_factor)
    hlo, sizes, tokens = _compiled_hlo(cfg, shape)
    got = memory_plan.hlo_collective_bytes(hlo, 8)
    want = memory_plan.moe_comm_bytes(cfg, sizes, tokens)
    assert got["all-to-all"] > 0 and got["collective-permute"] == 0
    total = sum(want.values())
    assert abs(sum(got.values()) - total) <= 0.1 * total, (got, want)
    for op, w in want.items():  # each kind too (within 10% of the total, so tiny terms may differ)
        assert abs(got[op] - w) <= 0.1 * total, (op, got, want)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 2, 2, 1), (1, 2, 2, 2)])
def test_param_bytes_match_train_sharding_count(shape):
    """Two independent counts of per-device param bytes: memory_plan's and train/sharding's."""
    from train import sharding as shd

    cfg = presets.get("tiny")
    sizes = dict(zip(sh.MESH_AXES, shape))
    mesh = shd.abstract_mesh(sizes, 8 if shape != (1, 1, 1, 1) else 1)
    from model.params import param_logical_specs, param_shapes

    want = shd.bytes_per_device(
        param_shapes(cfg),
        shd.param_shardings(param_logical_specs(cfg), mesh, sh.DEFAULT_RULES),
        sizes,
    )
    assert memory_plan.param_bytes_per_device(cfg, sizes) == want


def test_kimi_plan_arithmetic():
    """kimi_k2, bf16 compute, full remat, 8k context, mesh fsdp 16 x expert 16, one sequence per
    batch shard: the saved activations, logits and MoE buffers by hand."""
    cfg = presets.get("kimi_k2", dtype="bfloat16", remat="full")
    p = memory_plan.memory_plan(cfg, {"data": 1, "fsdp": 16, "expert": 16, "tensor": 1}, 8192)
    assert p["activations_saved"] == 61 * 8192 * 7168 * 2  # each layer's bf16 input [T, D]
    assert p["logits"] == 2 * 8192 * 163840 * 4  # float32 logits + their gradient
    # Dropless: 8192 tokens / 16 expert shards = 512 rows each, 4096 assignments, C = 4096 per
    # destination, R = 16 * 4096 received rows; send/recv/out/back [R, D] bf16, gate/up/h [R, F]
    # bf16, combine [4096, D] float32.
    rows = 16 * 4096
    assert p["moe_buffers_per_layer"] == rows * (4 * 7168 * 2 + 3 * 2048 * 2) + 4096 * 7168 * 4
    assert p["optimizer"] == 2 * p["params"] and p["grads"] == p["params"]


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip("|").split("|")]


def test_dry_run_table_leads_with_the_runs_own_mesh():
    """--dry_run's first rows: the configured mesh (described: 8 devices, fsdp 2 x expert 4),
    train.seq_len and batch_size / (data x fsdp) / microbatches = 8 / 2 / 2 = 2 sequences per
    shard, judged against each budget: fits at exactly the plan's total, not one byte less."""
    from configs import default
    from train import dry_run

    config = default.get_config()
    config.model = "tiny"
    config.dry_run_devices = 8
    config.mesh.update(data=1, fsdp=2, expert=4, tensor=1)
    config.train.update(batch_size=8, microbatches=2, seq_len=64)
    cfg = presets.get("tiny")
    plan = memory_plan.memory_plan(cfg, {"data": 1, "fsdp": 2, "expert": 4, "tensor": 1}, 64, 2)
    rows = dry_run.run_rows(config, {"enough": plan["total"], "short": plan["total"] - 1})
    (a, b) = (_cells(r) for r in rows)
    assert a[:3] == ["this run: enough", "(1, 2, 4, 1)", "64 x 2"] and a[10] == "yes"
    assert b[0] == "this run: short" and b[10] == "no"
    # A described 256-device mesh is judged against each known 256-device layout.
    config.dry_run_devices = 256
    config.mesh.update(fsdp=32, expert=8)
    config.train.update(batch_size=32, microbatches=1)
    labels = [_cells(r)[0] for r in dry_run.run_rows(config)]
    assert labels == [f"this run: {k}" for k in memory_plan.LAYOUTS]
    # On the real devices (8 simulated CPUs): their share of host RAM; the tiny model fits.
    config.dry_run_devices = 0
    config.mesh.update(data=-1, fsdp=1, expert=1)
    (row,) = dry_run.run_rows(config)
    assert _cells(row)[:2] == ["this run: 8 x cpu (host RAM / 8)", "(8, 1, 1, 1)"]
    assert _cells(row)[10] == "yes"
    table = dry_run.table(config)
    assert table.splitlines()[2] == row and "v5p-512" in table.splitlines()[3]
