"""The training memory plan (model/memory_plan.py) against XLA's compiled memory analysis on
bench/bench_memory_plan.py's grid: 9 layouts over 1 to 8 simulated CPU devices (data, fsdp,
expert, tensor and context axes; 1, 2 and 4 microbatches; remat none, full and dots; the
all-to-all and the gspmd MoE dispatch) at 512-token rows, each within 10% above or below but
one (KNOWN_HIGH). At 2048-token rows the plan is not (0.815-1.099, bench/RESULTS.md, issue 51).

The default run compiles two of them (the multi-device accumulation: data 2 x tensor 2 x context
2 with 1 and 2 microbatches); the whole grid is `long` (one compilation each, 25-95 s at load
2-9): python -m pytest -q -n 0 -m long tests/test_memory_plan_grid.py."""

import functools

import pytest

from bench import bench_memory_plan as grid
from model import memory_plan, presets

SEQ = 512  # the bench's --tiny rows: the state and the step's phases, at a compile's cost
ACCUMULATION = ("data2_tensor2_context2_full_1micro_a2a", "data2_tensor2_context2_full_2micro_a2a")


@functools.cache
def _measured(name: str) -> dict:
    return grid.measure(name, SEQ)


# Measured 2026-11-29 (bench/RESULTS.md): the plan is 10.4% high here (176.5 MiB vs 159.9). With
# remat 'none' on fsdp 2 x expert 2 x tensor 2 it counts more of the forward's intermediates
# than XLA keeps; which ones is not found yet.
KNOWN_HIGH = {"fsdp2_expert2_tensor2_none_a2a"}


def _marks(name):
    marks = [pytest.mark.slow if name in ACCUMULATION else pytest.mark.long]
    if name in KNOWN_HIGH:
        marks.append(pytest.mark.xfail(strict=True, reason="plan 10.4% above XLA (measured)"))
    return marks


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in grid.GRID])
def test_plan_within_10_percent_of_xla(name):
    r = _measured(name)
    assert 0.9 <= r["ratio"] <= 1.1, (name, r["ratio"], r["plan"], r["xla"])


@pytest.mark.slow  # the two compilations of the test above (one file: the same worker)
def test_accumulation_on_a_multi_device_mesh_adds_what_xla_adds():
    """data 2 x tensor 2 x context 2, 1 vs 2 microbatches of the same shape: XLA's compiled bytes
    grow by what the plan's do (the accumulator beside the microbatch's gradient, measured
    2026-11-29: XLA +50.8 MiB, the plan +46.6, one float32 gradient), within 15%."""
    one, two = (_measured(n) for n in ACCUMULATION)
    xla = two["xla"]["total"] - one["xla"]["total"]
    plan = two["plan"]["total"] - one["plan"]["total"]
    assert xla > 0.5 * two["plan"]["params"]  # the accumulator is there at all
    assert abs(plan - xla) <= 0.15 * xla, (plan, xla)


def test_kimi_256k_plans_the_embedding_transient():
    """configs/kimi_k2_256k.py's layout: the embedding table's D is sharded over (fsdp, context)
    and the tokens over context 16, so the lookup's gradient rebuilds one whole 256k row
    [T, D] in float32 on every chip: 262,144 x 7168 x 4 B = 7.0 GiB, beside the gradient and the
    accumulator (a phase of its own, not the backward's peak)."""
    from configs import kimi_k2, kimi_k2_256k
    from train.trainer import model_rules

    cfg = presets.get("kimi_k2", dtype="bfloat16", remat="full")
    sizes = {"data": 1, "fsdp": 1, "expert": 4, "tensor": 8, "context": 16}
    p = memory_plan.memory_plan(
        cfg, sizes, 262_144, 1, model_rules(kimi_k2_256k.get_config()), moment_bytes=2,
        fused_attention=True, microbatches=16,
    )  # fmt: skip
    assert p["embedding_transient"] == 262_144 * 7168 * 4
    assert p["phase_embedding"] == 2 * p["params"] + p["embedding_transient"]
    # Without a context axis the table's D shards (fsdp) split rows, not a row's tokens: with
    # fsdp 4 the lookup rebuilds the 4 rows of the fsdp group's tokens.
    sizes = {"data": 1, "fsdp": 4, "expert": 8, "tensor": 8}
    p = memory_plan.memory_plan(cfg, sizes, 4096, 1, model_rules(kimi_k2.get_config()))
    assert p["embedding_transient"] == 4 * 4096 * 7168 * 4


# The slices each shipped Kimi-K2 config names as keeping 10% of the chip free after the plan's
# worst measured error (model/memory_plan.py MEASURED_PLAN_OVER_XLA).
MARGIN_FITS = {
    "kimi_k2": "256 x H200-141GB",
    "kimi_k2_32k": "256 x H200-141GB",
    "kimi_k2_256k": "v5p-1024 (512 chips x 95 GB)",
}


@pytest.mark.parametrize("name", list(MARGIN_FITS))
def test_kimi_configs_keep_10_percent_free_after_the_worst_measured_error(name):
    import importlib

    from train import dry_run

    config = importlib.import_module(f"configs.{name}").get_config()
    devices, hbm = memory_plan.LAYOUTS[MARGIN_FITS[name]]
    assert config.dry_run_devices == devices
    low = memory_plan.MEASURED_PLAN_OVER_XLA[0]
    assert 0.5 < low <= 1.0  # a measured value, not the placeholder
    total = dry_run.planned_step_bytes(config)["total"]
    assert total / low <= 0.9 * hbm, (name, total / low / memory_plan.GIB, hbm / memory_plan.GIB)
