"""All-to-all expert-parallel MoE (cfg.moe_comm='alltoall') vs the GSPMD dispatch: one MoE layer's
forward + backward on 8 simulated CPU devices, run in turn (interleaved best-of-N).

    python bench/bench_a2a.py [--tokens 2048] [--rounds 3]
    python bench/bench_a2a.py --tiny     # smoke: the tiny preset's MoE, 64 tokens, 1 round, 1 mesh

The GSPMD path runs model/moe.py's blocked loop; the all-to-all path's local experts run as one
batched einsum over the device's experts (see model/moe_a2a.py). Shapes are the `small` preset's MoE
(D=512, 16 experts, top-2, F=512). On simulated devices the collectives are memory copies inside one
process, so this measures the dispatch's compute and data movement, not a network. Prints the load
average beside the numbers (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sys

# 8 simulated devices whatever else XLA_FLAGS holds (the suite runs with XLA_FLAGS="").
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    os.environ["XLA_FLAGS"] = flags.strip()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402

from bench.common import interleaved_min_times, parse_tiny  # noqa: E402
from model import memory_plan, presets  # noqa: E402
from model import sharding as sh  # noqa: E402
from model.moe import MoE  # noqa: E402


def _step(cfg, mesh, x, seg, probe):
    """Jitted value_and_grad of one MoE layer and its placed (params, x)."""
    rules = sh.DEFAULT_RULES
    variables = MoE(cfg).init(jax.random.PRNGKey(0), x, seg)
    specs = nn.get_partition_spec(variables)["params"]
    params = nn.unbox(variables["params"])

    def loss(p, x):
        return jnp.sum(MoE(cfg).apply({"params": p}, x, seg).y * probe)

    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        p_sh = jax.tree.map(
            lambda s: nn.logical_to_mesh_sharding(s, mesh, rules),
            specs,
            is_leaf=lambda s: isinstance(s, jax.sharding.PartitionSpec),
        )
        x_sh = NamedSharding(mesh, nn.logical_to_mesh_axes((sh.BATCH, None, None), rules))
        args = (jax.device_put(params, p_sh), jax.device_put(x, x_sh))
        fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))

    def run(*a):
        with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
            return fn(*a)

    return run, args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--preset", default="small", help="its MoE layer is the one timed")
    ap.add_argument("--meshes", default="1x1x8x1,1x2x2x2", help="data x fsdp x expert x tensor")
    args = parse_tiny(ap, dict(tokens=64, rounds=1, preset="tiny", meshes="1x2x2x2"))
    base = presets.get(args.preset, moe_impl="blocked")
    b, t = 8, args.tokens // 8
    x = jax.random.normal(jax.random.PRNGKey(1), (b, t, base.hidden_size))
    seg, probe = jnp.ones((b, t), jnp.int32), jax.random.normal(jax.random.PRNGKey(2), x.shape)
    print(f"load average before: {os.getloadavg()}")
    for shape in [tuple(int(n) for n in m.split("x")) for m in args.meshes.split(",")]:
        mesh = jax.make_mesh((*shape, 1), sh.MESH_AXES, axis_types=(AxisType.Auto,) * 5)
        variants = {
            "gspmd (blocked)": base,
            "alltoall dropless": base.replace(moe_comm="alltoall"),
            "alltoall capacity 1.25": base.replace(moe_comm="alltoall", moe_capacity_factor=1.25),
        }
        fns, fn_args = {}, {}
        for name, cfg in variants.items():
            fns[name], fn_args[name] = _step(cfg, mesh, x, seg, probe)
        best = interleaved_min_times(fns, fn_args, rounds=args.rounds)
        ref = best["gspmd (blocked)"]
        print(f"mesh (data, fsdp, expert, tensor) = {shape}, {args.tokens} tokens")
        for name, sec in best.items():
            cfg = variants[name]
            sizes = dict(zip(sh.MESH_AXES, shape))
            comm = sum(memory_plan.moe_comm_bytes(cfg, sizes, args.tokens).values())
            note = (
                f"  analytic {comm / 1e6:.1f} MB sent/device" if cfg.moe_comm == "alltoall" else ""
            )
            print(f"  {name:42s} {sec * 1e3:8.1f} ms  x{sec / ref:5.2f} vs gspmd{note}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
