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
from model.decode import cache_bytes_per_token

MESHES = [(1, 1, 8, 1), (2, 1, 4, 1), (1, 2, 2, 2), (2, 2, 2, 1)]


def _compiled_hlo(cfg, shape, b=8, t=16):
    """The MoE dispatch's forward + backward (one layer's step), laid out as in the model: rows
    sharded like the batch, expert weights by the logical rules, gradients back in place."""
    mesh = jax.make_mesh((*shape, 1), sh.MESH_AXES, axis_types=(AxisType.Auto,) * 5)
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
    train.seq_len, batch_size / (data x fsdp) / microbatches = 8 / 2 / 2 = 2 sequences per shard
    and the accumulation's bytes (2 microbatches), judged against each budget: fits at exactly
    the plan's total, not one byte less.
    Real CPU devices plan the blocked attention 'auto' resolves to there."""
    from configs import default
    from train import dry_run

    config = default.get_config()
    config.model = "tiny"
    config.dry_run_devices = 8
    config.mesh.update(data=1, fsdp=2, expert=4, tensor=1)
    config.train.update(batch_size=8, microbatches=2, seq_len=64)
    cfg = presets.get("tiny")
    sizes = {"data": 1, "fsdp": 2, "expert": 4, "tensor": 1}
    plan = memory_plan.memory_plan(cfg, sizes, 64, 2, microbatches=2, fused_attention=True)
    rows = dry_run.run_rows(config, {"enough": plan["total"], "short": plan["total"] - 1})
    (a, b) = (_cells(r) for r in rows)
    assert a[:6] == ["this run: enough", "(1, 2, 4, 1, 1)", "64 x 2", "fused", "none", "2"]
    assert a[14] == "yes"  # a described mesh plans for accelerators: 'auto' attention is fused
    assert a[7] == a[6]  # grads beside params; 2 microbatches: the accumulation's bytes too
    accumulation = memory_plan.accumulation_bytes(cfg, sizes)
    assert (
        a[8] == f"{accumulation / memory_plan.GIB:.1f}" and plan["grad_accumulator"] == accumulation
    )
    assert b[0] == "this run: short" and b[14] == "no"
    # A described 256-device mesh is judged against each known 256-device layout.
    config.dry_run_devices = 256
    config.mesh.update(fsdp=32, expert=8)
    config.train.update(batch_size=32, microbatches=1)
    labels = [_cells(r)[0] for r in dry_run.run_rows(config)]
    assert labels == [f"this run: {k}" for k, (n, _) in memory_plan.LAYOUTS.items() if n == 256]
    # On the real devices (8 simulated CPUs): their share of host RAM; the tiny model fits.
    config.dry_run_devices = 0
    config.mesh.update(data=-1, fsdp=1, expert=1)
    (row,) = dry_run.run_rows(config)
    assert _cells(row)[:4] == [
        "this run: 8 x cpu (host RAM / 8)",
        "(8, 1, 1, 1, 1)",
        "64 x 4",
        "blocked",
    ]
    assert _cells(row)[14] == "yes"
    table = dry_run.table(config)
    assert table.splitlines()[2] == row and "v5p-512" in table.splitlines()[3]


def test_rl_kimi_sampler_fits_16_episodes_at_256k_with_the_slot_split():
    """configs/rl_kimi_k2.py: 16 concurrent 256k episodes per 64-chip engine (expert 8 x tensor 8).
    Unsplit, every chip holds all 16 caches (16 x 262,144 x 61 x 1,156 B = 275.5 GiB: fits no
    chip); with cache_split 'slots' each expert-group chip holds its own 2, and the engine plans
    within 90% of an H200 (141 GB = 131.3 GiB). The cache bytes per chip are what the engine
    allocates (tests/test_engine_cache_split.py compares them on 8 devices)."""
    from configs import rl_kimi_k2
    from train import dry_run

    config = rl_kimi_k2.get_config()
    assert config.rl.coding.cache_split == "slots" and config.rl.coding.slots == 16
    cfg = presets.get("kimi_k2")
    sizes = {"data": 1, "fsdp": 1, "expert": 8, "tensor": 8, "context": 1}
    per_token = 61 * (576 * 2 + 4)
    whole = memory_plan.sampler_plan(cfg, sizes, 16, 262_144)
    split = memory_plan.sampler_plan(cfg, sizes, 16, 262_144, cache_split="slots")
    assert whole["kv_cache"] == 16 * 262_144 * per_token
    assert split["kv_cache"] == 2 * 262_144 * per_token and split["weights"] == whole["weights"]
    h200 = 141e9  # bytes
    assert whole["total"] > h200 and split["total"] <= 0.9 * h200
    report = dry_run.sampler_report(config)
    assert "cache split 'slots'" in report and "latent cache 34.4 GiB" in report


def test_rl_kimi_plan_prints_the_sampler_mesh_and_the_pretraining_plan_fits():
    """configs/rl_kimi_k2.py's sampler lines (latent cache per token by hand: 61 layers x (512 +
    64) x 2 B = 70,272 B = 68.6 KiB) and configs/kimi_k2.py's plan on 256 chips: params, grads
    and bfloat16 moments 17 GiB each, the accumulation 31.8 (memory_plan.accumulation_bytes:
    one gradient + the stacked experts' 14.8) + activations in its phase = 89.3 GiB: above a
    v5p-512's 88.5, within an H200's 131.3; with float32 moments 106.4."""
    from configs import kimi_k2, rl_kimi_k2
    from train import dry_run

    cfg = presets.get("kimi_k2")
    assert cache_bytes_per_token(cfg, "bfloat16", positions=False) == 70_272
    sizes = {"data": 1, "fsdp": 1, "expert": 8, "tensor": 8}
    p = memory_plan.sampler_plan(cfg, sizes, 16, 32_768)
    assert p["kv_cache"] == 16 * 32_768 * 61 * (576 * 2 + 4)  # slots not split over expert/tensor
    total_params = 1_026_408_232_448
    assert 2 * total_params / 64 < p["weights"] < 1.2 * 2 * total_params / 64
    report = dry_run.sampler_report(rl_kimi_k2.get_config())
    assert "68.6 KiB of bfloat16 latent + rope" in report
    assert "  32k tokens:" in report and "  256k tokens:" in report
    assert f"full bf16 snapshot {2 * total_params / 64 / 1e9:.2f} GB" in report  # 64 hosts
    config = kimi_k2.get_config()
    v5p, _, h200 = (_cells(r) for r in dry_run.run_rows(config))
    assert v5p[0].startswith("this run: v5p-512") and h200[0].endswith("H200-141GB")
    assert v5p[6:10] == ["17.0", "17.0", "31.8", "17.0 (bf16)"]
    assert v5p[13] == h200[13] == "89.3" and (v5p[14], h200[14]) == ("no", "yes")
    config.train.moment_dtype = "float32"
    v5p = _cells(dry_run.run_rows(config)[0])
    assert v5p[9] == "34.0" and v5p[13] == "106.4" and v5p[14] == "no"


def test_kimi_long_context_configs_fit_their_named_pods():
    """configs/kimi_k2_32k.py and kimi_k2_256k.py: rows split over a context axis (4k and 16k
    tokens per chip), each plans to fit the pods its docstring names, and not the one it says
    it does not; the breakdown adds up to the row's total."""
    from configs import kimi_k2_32k, kimi_k2_256k
    from train import dry_run

    want = {
        kimi_k2_32k: {
            # 86.0 GiB of 88.5: the plan fits, not with 10% free after the plan's worst
            # measured error (test_memory_plan_grid.py names 256 x H200 for that).
            "v5p-512 (256 chips x 95 GB)": "yes",
            "256 x H200-141GB": "yes",
            "256 x H100-80GB": "no",
        },
        kimi_k2_256k: {"v5p-1024 (512 chips x 95 GB)": "yes", "512 x H100-80GB": "yes"},
    }
    for module, fits in want.items():
        config = module.get_config()
        rows = {
            _cells(r)[0].removeprefix("this run: "): _cells(r) for r in dry_run.run_rows(config)
        }
        assert {k: v[14] for k, v in rows.items()} == fits
        row = next(iter(rows.values()))
        assert row[1].endswith(f"{config.mesh.context})") and row[3:5] == ["fused", "full"]
        line = dry_run.breakdown(config)[0]
        assert line.endswith(f"= {row[13]} GiB")


def test_gradient_bytes_count_only_the_params_the_loss_reaches():
    """With the MTP loss off (train.mtp_mode='none') the MTP modules never run and XLA holds no
    gradient for them (the grid's small preset: its MTP module is 31% of the params); with
    trainable='mtp' only they have one. The plan's gradient follows, the accumulation's carry
    (the scan carries the whole tree) does not."""
    from bench import bench_memory_plan as grid
    from train import dry_run

    cfg = presets.get("small", num_hidden_layers=3)  # the grid's model
    sizes = {"data": 2, "fsdp": 1, "expert": 1, "tensor": 1, "context": 1}
    groups = ("dense_layers", "embed", "final_norm", "lm_head", "moe_layers", "mtp_0")
    by_group = {g: memory_plan.param_bytes_per_device(cfg, sizes, group=g) for g in groups}
    total = memory_plan.param_bytes_per_device(cfg, sizes)
    assert sum(by_group.values()) == total and by_group["mtp_0"] > 0.3 * total
    assert memory_plan.gradient_bytes(cfg, sizes, trained="all") == total
    assert memory_plan.gradient_bytes(cfg, sizes, trained="trunk") == total - by_group["mtp_0"]
    assert memory_plan.gradient_bytes(cfg, sizes, trained="mtp") == by_group["mtp_0"]
    with pytest.raises(ValueError, match="trained must be one of"):
        memory_plan.gradient_bytes(cfg, sizes, trained="head")
    config = grid.layout_config((2, 1, 1, 1, 1), "full", 2, "gspmd", 512)  # mtp_mode 'none'
    p = dry_run.planned_step_bytes(config)
    assert p["grads"] == total - by_group["mtp_0"] and p["accumulation_carry"] == total
    config.train.update(mtp_mode="ce")
    assert dry_run.planned_step_bytes(config)["grads"] == total


def test_accumulation_is_a_phase_after_the_layers_backward():
    """With microbatches, a layer's backward holds the accumulation's carry (one gradient of
    every param) and the new sum + stacked experts' gradient exist only after the MoE layers'
    backward: the backward phase counts the carry, the accumulation phase the whole
    accumulation_bytes beside the dense layers' saved activations and one working set's
    activations (their weights' gradients are in the sum by then): each below the sum of all
    (what the plan counted before; at 512-token rows it ran 1.19x XLA's bytes)."""
    cfg = presets.get("small", dtype="bfloat16", remat="full")
    sizes = {"data": 2, "fsdp": 1, "expert": 1, "tensor": 1, "context": 1}
    one = memory_plan.memory_plan(cfg, sizes, 512, 1, fused_attention=True)
    two = memory_plan.memory_plan(cfg, sizes, 512, 1, fused_attention=True, microbatches=2)
    assert "phase_accumulation" not in one and one["accumulation_carry"] == 0
    assert two["accumulation_carry"] == two["params"]
    assert two["phase_backward"] - one["phase_backward"] == two["params"]
    acc = memory_plan.accumulation_bytes(cfg, sizes)
    assert two["grad_accumulator"] == acc
    at_once = sum(two[k] for k in ("grads", "grad_accumulator", "activations_saved"))
    at_once += two["layer_working_set"] + two["logits"]  # everything counted at once
    assert max(two["phase_backward"], two["phase_accumulation"]) < at_once
