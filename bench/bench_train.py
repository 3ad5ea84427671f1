"""Training throughput and MFU on CPU: one device vs 8 simulated devices (data-parallel and
FSDP meshes), side by side.

    python bench/bench_train.py                  # small preset, batch 8 x 128 tokens, 5 timed steps
    python bench/bench_train.py --model=tiny --steps=10

Each variant runs in its own process (the simulated device count is fixed at JAX import) and
measures, in the same process, the matmul peak it is compared against:
  peak_1dev  an n x n float32 matmul on one device (the others idle);
  peak_all   the same matmul on every device at once (one sharded batched matmul), i.e. what the
             machine's cores deliver when all simulated devices compete for them.
MFU = tokens/s x training FLOPs/token (model.flops_per_token) / peak_all. Appends a table to
bench/RESULTS_train.md.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _variant(model: str, mesh_sizes: dict, batch: int, seq_len: int, steps: int) -> dict:
    sys.path.insert(0, ROOT)
    import jax

    from model import presets
    from model import sharding as msh
    from train import build, losses, metrics, optim
    from train import sharding as shd
    from train import synthetic_data as sd
    from train.model_api import from_model_package
    from train.step import router_bias_update

    h = from_model_package(presets.get(model))
    mesh = shd.make_mesh(mesh_sizes)
    devices = jax.device_count()
    abstract = jax.eval_shape(h.init_params, jax.random.PRNGKey(0))
    tx = optim.make_optimizer(
        params=abstract,
        trainable=h.trainable_mask(abstract),
        schedule=optim.make_schedule(
            kind="constant", peak_lr=1e-3, total_steps=steps, warmup_steps=0
        ),
    )
    loss_fn = losses.make_lm_loss(h.apply, mtp_mode="ce")
    state, sh = build.init_state(h, tx, mesh, msh.DEFAULT_RULES, seed=0)
    step = build.jit_train_step(
        loss_fn,
        sh,
        mesh,
        msh.DEFAULT_RULES,
        bias_update=router_bias_update(h.update_router_bias, 1e-3),
    )
    it = sd.lm_batches(
        sd.synthetic_tokens(200_000, 256, 0), batch_size=batch, seq_len=seq_len, seed=0
    )
    batches = [shd.global_batch(next(it), mesh) for _ in range(steps + 2)]
    for b in batches[:2]:  # compile + warm up
        state, m = step(state, b)
    jax.block_until_ready(state)
    t0 = time.perf_counter()
    for b in batches[2:]:
        state, m = step(state, b)
    jax.block_until_ready(state)
    step_s = (time.perf_counter() - t0) / steps

    n = 1024
    peak_1dev = metrics.measure_matmul_peak(n)
    peak_all = metrics.measure_matmul_peak_all(n)
    tokens_per_s = batch * seq_len / step_s
    flops = h.flops_per_token(seq_len)
    return dict(
        model=model,
        devices=devices,
        mesh=mesh_sizes,
        batch=batch,
        seq_len=seq_len,
        step_s=step_s,
        tokens_per_s=tokens_per_s,
        flops_per_token=flops,
        peak_1dev=peak_1dev,
        peak_all=peak_all,
        mfu=tokens_per_s * flops / peak_all,
        loss=float(m["loss"]),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--variant", default="", help="internal: mesh sizes as JSON, run in-process")
    a = ap.parse_args()
    if a.variant:
        print(
            "RESULT "
            + json.dumps(_variant(a.model, json.loads(a.variant), a.batch, a.seq_len, a.steps))
        )
        return
    rows = []
    for mesh_sizes in ({"data": 1}, {"data": 8}, {"fsdp": 8}):
        devices = max(mesh_sizes.values())
        env = dict(
            os.environ,
            JAX_PLATFORMS="cpu",
            XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        )
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                f"--model={a.model}",
                f"--batch={a.batch}",
                f"--seq_len={a.seq_len}",
                f"--steps={a.steps}",
                f"--variant={json.dumps(mesh_sizes)}",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.split("RESULT ", 1)[1]))
    cmd = "python bench/bench_train.py " + " ".join(sys.argv[1:])
    load = os.getloadavg()[1]
    lines = [
        f"\n### Training throughput, {a.model} preset on CPU ({os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, 5-min load average {load:.1f} "
        "at the end: other jobs shared the cores, so compare rows only within one run)\n",
        f"Command: `{cmd.strip()}`\n",
        "| devices | mesh | batch x seq | step (s) | tokens/s | FLOPs/token | matmul peak 1 dev (GFLOP/s) "
        "| matmul peak all devs (GFLOP/s) | MFU vs all-dev peak |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mesh = " ".join(f"{k}={v}" for k, v in r["mesh"].items())
        lines.append(
            f"| {r['devices']} | {mesh} | {r['batch']} x {r['seq_len']} | {r['step_s']:.2f} | "
            f"{r['tokens_per_s']:.0f} | {r['flops_per_token']:.3g} | {r['peak_1dev'] / 1e9:.1f} | "
            f"{r['peak_all'] / 1e9:.1f} | {100 * r['mfu']:.1f}% |"
        )
    lines.append(
        f"\ntokens/s vs 1 device: data=8 {rows[1]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x, "
        f"fsdp=8 {rows[2]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x. The 8 simulated "
        "devices share the same cores, so no speed-up is possible; the gap is the cost of "
        "per-device programs on 1-row slices plus in-memory collectives (gradient "
        "all-reduce for data=8, weight all-gathers + reduce-scatters for fsdp=8).\n"
    )
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(ROOT, "bench", "RESULTS_train.md"), "a") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
