"""Compile cost of the tiny preset's programs under XLA:CPU flag sets: why the test suite compiles
with cheap-code flags (tests/xla_env.py) and what they cost at run time.

    python bench/bench_compile.py            # XLA's defaults, -O0, -O0 + JAX 0.10's older emitters
    python bench/bench_compile.py --tiny     # the grad program only, defaults vs the suite's flags
    python bench/bench_compile.py --repeats 6  # each flag set 6 times, round-robin: a mean per set

Each flag set runs in its own fresh process with JAX's persistent compile cache off, so every
figure is a cold compile. Per flag set: CPU seconds (user + sys of the process) to lower and to
compile `value_and_grad` of the tiny preset's forward ([2, 64] tokens), the same for 5 runs of it,
and the CPU of the first (compiling) and second (compiled) greedy and speculative `generate` calls.
The process's CPU, not wall time, so a loaded host inflates the figures less; state the load
(printed) beside any figure you keep. This host's speed drifts by 20% or more within an hour, so
compare flag sets with --repeats: the sets run in turn, and each one's mean over its runs of the
compiles (the grad and both first generate calls) is printed at the end.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FLAG_SETS = {
    "xla defaults": "",
    "-O0": "--xla_backend_optimization_level=0",
    "-O0 + old emitters": "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
    # LLVM's module unsplit: one codegen thread per program, less CPU in all (tests/xla_env.py).
    "-O0 + old emitters, unsplit": "--xla_backend_optimization_level=0 "
    "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1",
}
COMPILES = ("grad_compile", "generate_greedy_first", "generate_speculative_first")


def probe(with_generate: bool) -> dict:
    """In the child: CPU seconds of each stage (see the module docstring)."""
    import resource

    import jax
    import jax.numpy as jnp

    from model import Transformer, generate, init_params, presets

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    cfg = presets.get("tiny")
    params = init_params(cfg, jax.random.PRNGKey(0))
    tokens = jnp.zeros((2, 64), jnp.int32)
    model = Transformer(cfg)

    def loss(p, t):
        return jnp.mean(model.apply({"params": p}, t).logits.astype(jnp.float32) ** 2)

    out, c0 = {}, cpu()
    lowered = jax.jit(jax.value_and_grad(loss)).lower(params, tokens)
    c1 = cpu()
    compiled = lowered.compile()
    c2 = cpu()
    for _ in range(5):
        value, grads = compiled(params, tokens)
    jax.block_until_ready(grads)
    out.update(grad_lower=c1 - c0, grad_compile=c2 - c1, grad_5_runs=cpu() - c2)
    if with_generate:
        prompts = [[1, 2, 3], [4, 5, 6, 7]]
        for name, kwargs in (("greedy", dict(max_new_tokens=16)), ("speculative", {})):
            kwargs = kwargs or dict(max_new_tokens=32, num_draft=1)
            for call in ("first", "second"):
                c = cpu()
                generate(cfg, params, prompts, temperature=0.0, **kwargs)
                out[f"generate_{name}_{call}"] = cpu() - c
    return out


def run_child(flags: str, with_generate: bool) -> dict:
    env = dict(os.environ, XLA_FLAGS=flags, JAX_ENABLE_COMPILATION_CACHE="false", PYTHONPATH=ROOT)
    cmd = [sys.executable, __file__, "--child"] + (["--tiny"] if not with_generate else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "no output"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def suite_flags() -> str:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from xla_env import xla_flags

    return xla_flags()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="the grad program only, two flag sets")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each flag set, in turn")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(probe(with_generate=not args.tiny)))
        return
    sets = {"xla defaults": "", "suite": suite_flags()} if args.tiny else FLAG_SETS
    print(f"load before: {os.getloadavg()}", flush=True)
    rows, totals = {}, {name: [] for name in sets}
    for _ in range(args.repeats):
        for name, flags in sets.items():
            rows[name] = run_child(flags, with_generate=not args.tiny)
            figures = ", ".join(f"{k} {v:.2f}" for k, v in rows[name].items() if k != "error")
            print(
                f"{name:20s} [{flags}]: {rows[name].get('error') or figures} s of CPU", flush=True
            )
            if "error" not in rows[name]:
                totals[name].append(sum(rows[name].get(k, 0.0) for k in COMPILES))
    print(f"load after: {os.getloadavg()}")
    if args.repeats > 1:
        for name, runs in totals.items():
            if runs:
                mean = sum(runs) / len(runs)
                each = " ".join(f"{t:.2f}" for t in runs)
                print(
                    f"{name:28s} compiles: mean {mean:.2f} s of CPU over {len(runs)} runs ({each})"
                )
    base = rows[next(iter(sets))].get("grad_compile")
    for name, row in rows.items():
        if base and row.get("grad_compile"):
            print(f"{name:20s} grad compile {row['grad_compile'] / base:.2f}x of XLA's defaults")


if __name__ == "__main__":
    main()
