"""The training memory plan (model/memory_plan.py) against XLA's compiled memory analysis,
per layout.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python bench/bench_memory_plan.py [--tiny]
        [--only=NAME,...] [--hlo_dir=DIR]

For each layout of GRID (mesh data x fsdp x expert x tensor x context over 1 to 8 simulated CPU
devices, remat, microbatches, MoE dispatch): the trainer's own jitted step (AdamW, the LM loss,
donated state) is lowered and compiled on shapes alone, and XLA's per-device bytes (arguments +
outputs - donated aliases + temporaries: `compiled.memory_analysis()`) are printed beside the plan's
total and the ratio plan/XLA. The model is the `small` preset cut to 3 layers (1 dense + 2 MoE),
bf16 compute, with model/kernels' shape-only 'opaque' stand-ins for the fused attention and the
grouped matmul (what pods run; the plan counts their residuals). --tiny: shorter rows (the mode
tests/test_memory_plan.py runs). --hlo_dir writes each compiled module's buffer assignment.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()

MESH_AXES = ("data", "fsdp", "expert", "tensor", "context")

# name -> (mesh (data, fsdp, expert, tensor, context), remat, microbatches, moe_comm)
GRID = {
    "1dev_none": ((1, 1, 1, 1, 1), "none", 1, "gspmd"),
    "data2_full_2micro": ((2, 1, 1, 1, 1), "full", 2, "gspmd"),
    "fsdp2_expert2_dots_4micro_a2a": ((1, 2, 2, 1, 1), "dots", 4, "alltoall"),
    "data2_tensor2_context2_full_1micro_a2a": ((2, 1, 1, 2, 2), "full", 1, "alltoall"),
    "data2_tensor2_context2_full_2micro_a2a": ((2, 1, 1, 2, 2), "full", 2, "alltoall"),
    "fsdp2_expert2_tensor2_none_a2a": ((1, 2, 2, 2, 1), "none", 1, "alltoall"),
    "data4_dots_4micro_gspmd": ((4, 1, 1, 1, 1), "dots", 4, "gspmd"),
    "expert2_context4_full_a2a": ((1, 1, 2, 1, 4), "full", 1, "alltoall"),
    "data8_none_2micro_a2a": ((8, 1, 1, 1, 1), "none", 2, "alltoall"),
}
# Measured, not in GRID: the gspmd dispatch on a mesh that shards the expert weights (over expert,
# tensor, fsdp or context: the bench's rules put D over (fsdp, context)). Its kernel is a custom
# call GSPMD cannot partition, so each MoE layer's weights are gathered whole, in float32 before
# the cast, and XLA keeps more of those whole copies (both unrolled MoE layers', with remat 'none'
# the forward's for the backward) than the plan's one layer: plan/XLA 0.69-0.86 at --tiny
# (bench/RESULTS_LOG.md; under the plan before 2026-11-29's phases, which only lowered it: not
# re-measured). Pods dispatch by all-to-all ('auto' on a multi-device GPU/TPU mesh).
OUTSIDE = {
    "expert8_full_2micro_gspmd": ((1, 1, 8, 1, 1), "full", 2, "gspmd"),
    "fsdp4_context2_dots_4micro_gspmd": ((1, 4, 1, 1, 2), "dots", 4, "gspmd"),
    "data4_context2_dots_4micro_gspmd": ((4, 1, 1, 1, 2), "dots", 4, "gspmd"),
    "data2_context4_none_gspmd": ((2, 1, 1, 1, 4), "none", 1, "gspmd"),
}


def layout_config(
    mesh, remat, microbatches, moe_comm, seq_len, seqs=1, moments="float32", layers=3
):
    """The run config of one grid layout: `seqs` rows of `seq_len` per batch shard per
    microbatch, the `small` preset cut to `layers` layers."""
    from configs import default

    sizes = dict(zip(MESH_AXES, mesh))
    c = default.get_config()
    c.model = "small"
    rows = seqs * sizes["data"] * sizes["fsdp"] * microbatches
    c.train.update(batch_size=rows, microbatches=microbatches, seq_len=seq_len, mtp_mode="none")
    c.train.update(remat=remat, compute_dtype="bfloat16", moment_dtype=moments)
    c.mesh.update(**sizes)
    c.trainer_devices = math.prod(mesh)
    c.model_overrides = dict(
        num_hidden_layers=layers,
        moe_comm=moe_comm,
        attention_impl="opaque",
        moe_impl="opaque",
        max_position_embeddings=seq_len,
    )
    return c


def measure(name: str, seq_len: int, hlo_dir: str | None = None, layers: int = 3) -> dict:
    """{'xla': XLA's bytes by kind, 'plan': the plan's breakdown, 'ratio': plan / XLA total} for
    the layout `name` (GRID or OUTSIDE)."""
    from train import dry_run

    config = layout_config(*{**GRID, **OUTSIDE}[name], seq_len, layers=layers)
    xla = dry_run.compiled_step_bytes(config)
    compiled = xla.pop("compiled")
    if hlo_dir:
        os.makedirs(hlo_dir, exist_ok=True)
        with open(os.path.join(hlo_dir, f"{name}.txt"), "w") as f:
            f.write(compiled.as_text())
    plan = dry_run.planned_step_bytes(config)
    return {"xla": xla, "plan": plan, "ratio": plan["total"] / xla["total"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="rows of 512 tokens, not 2048")
    ap.add_argument("--only", default="", help="comma-separated names; 'all': GRID + OUTSIDE")
    ap.add_argument("--hlo_dir", default="")
    ap.add_argument("--seq_len", type=int, default=0, help="override the rows' length")
    ap.add_argument("--layers", type=int, default=3, help="layers of the small preset")
    args = ap.parse_args()
    seq = args.seq_len or (512 if args.tiny else 2048)
    names = args.only.split(",") if args.only else list(GRID)
    names = list(GRID) + list(OUTSIDE) if args.only == "all" else names
    mib = lambda b: f"{b / 2**20:.1f}"
    print(f"seq_len {seq}, {args.layers} layers, load {os.getloadavg()[0]:.1f}")
    print("| layout | mesh (d,f,e,t,c) | remat | micro | MoE | XLA MiB (args+out-alias / temp) "
          "| plan MiB | plan/XLA |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name in names:
        start = time.time()
        r = measure(name, seq, args.hlo_dir or None, args.layers)
        x, mesh = r["xla"], {**GRID, **OUTSIDE}[name]
        state = x["arguments"] + x["outputs"] - x["aliases"]
        print(
            f"| {name} | {mesh[0]} | {mesh[1]} | {mesh[2]} | {mesh[3]} | {mib(x['total'])} "
            f"({mib(state)} / {mib(x['temporaries'])}) | {mib(r['plan']['total'])} | "
            f"{r['ratio']:.3f} |   # {time.time() - start:.0f} s",
            flush=True,
        )
        worst = max(worst, abs(r["ratio"] - 1)) if name in GRID else worst
    print(f"worst |plan/XLA - 1| over GRID = {worst:.3f}")


if __name__ == "__main__":
    main()
