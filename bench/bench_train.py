"""Training throughput and MFU on CPU: one device vs 8 simulated devices (data-parallel and
FSDP meshes), side by side.

    python bench/bench_train.py                  # small preset, batch 8 x 128 tokens, 5 timed steps
    python bench/bench_train.py --model=tiny --steps=10

Each variant runs in its own process (the simulated device count is fixed at JAX import) and
measures, in the same process, the matmul peak it is compared against:
  peak_1dev  an n x n float32 matmul on one device (the others idle);
  peak_all   the same matmul on every device at once (one sharded batched matmul), i.e. what the
             machine's cores deliver when all simulated devices compete for them.
The step is train/'s own jitted step (train.trainer.jit_train_step: AdamW, LM + MTP loss,
router-bias update). MFU = tokens/s x training FLOPs/token (model.flops_per_token) / peak_all.
Prints a markdown table (with the load average) for bench/RESULTS.md.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _variant(model_name: str, mesh_sizes: dict, batch: int, seq_len: int, steps: int) -> dict:
    sys.path.insert(0, ROOT)
    import jax

    from bench.common import train_step_seconds
    from model import flops_per_token, presets
    from train.metrics import matmul_peak

    cfg = presets.get(model_name)
    step_s = train_step_seconds(cfg, batch, seq_len, steps, mesh_sizes)
    n = 1024
    peak_1dev = matmul_peak(n, devices=[jax.devices()[0]])
    peak_all = matmul_peak(n)
    tokens_per_s = batch * seq_len / step_s
    flops = flops_per_token(cfg, seq_len)
    return dict(
        model=model_name,
        devices=jax.device_count(),
        mesh=mesh_sizes,
        batch=batch,
        seq_len=seq_len,
        step_s=step_s,
        tokens_per_s=tokens_per_s,
        flops_per_token=flops,
        peak_1dev=peak_1dev,
        peak_all=peak_all,
        mfu=tokens_per_s * flops / peak_all,
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--variant", default="", help="internal: mesh sizes as JSON, run in-process")
    ap.add_argument("--devices", type=int, default=8, help="simulated devices of data= / fsdp=")
    sys.path.insert(0, ROOT)
    from bench.common import parse_tiny

    a = parse_tiny(ap, dict(model="tiny", batch=2, seq_len=16, steps=1, devices=2))
    if a.variant:
        print(
            "RESULT "
            + json.dumps(_variant(a.model, json.loads(a.variant), a.batch, a.seq_len, a.steps))
        )
        return
    rows = []
    for mesh_sizes in ({"data": 1}, {"data": a.devices}, {"fsdp": a.devices}):
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
        "| devices | mesh | batch x seq | step (s) | tokens/s | FLOPs/token | matmul peak 1 dev "
        "(GFLOP/s) | matmul peak all devs (GFLOP/s) | MFU vs all-dev peak |",
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
        f"\ntokens/s vs 1 device: data={a.devices} "
        f"{rows[1]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x, fsdp={a.devices} "
        f"{rows[2]['tokens_per_s'] / rows[0]['tokens_per_s']:.2f}x. The {a.devices} simulated "
        "devices share the same cores, so no speed-up is possible; the gap is the cost of "
        "per-device programs on 1-row slices plus in-memory collectives (gradient "
        "all-reduce for data=N, weight all-gathers + reduce-scatters for fsdp=N).\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
