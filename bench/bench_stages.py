"""The three training stages end to end, with held-out NLL and bits/byte before and after each.

    python bench/bench_stages.py                         # small preset, the step counts below
    python bench/bench_stages.py --preset=tiny --steps=20,20,20 --workdir=/tmp/stages
    python bench/bench_stages.py --tiny      # smoke: tiny preset, 1 step a stage, 1 eval batch

Runs the README's commands (python main.py ...) one after another:
  (a) configs/pretrain.py      stdlib code, 8 x 128, plain RoPE        -> export
  (b) configs/long_context.py  stdlib code, 1 x 2048, YaRN x16 from 128  -> export
  (c) configs/sft.py           agent traces, --sft_batch x 2048, YaRN x16
"Before" is the stage's starting params on that stage's held-out data (the loop's step-0 eval),
"after" its final eval. For (b) it also evaluates (a)'s params at 2048 tokens with plain RoPE
(the un-extended model), in this process, on the same held-out batches.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_EVAL = re.compile(r"step (\d+): (initial |final |)held-out loss ([\d.]+), bits/byte ([\d.]+)")


def run_main(args: list[str]) -> str:
    cmd = [sys.executable, "main.py"] + args
    print("$ " + " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(
            f"command failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-3000:]}"
        )
    lines = [l for l in out.stdout.splitlines() if "held-out" in l or "100%" in l]
    print(
        "\n".join("    " + l for l in lines) + f"\n    ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    return out.stdout


def before_after(stdout: str) -> dict:
    evals = {
        kind.strip() or "mid": (float(nll), float(bpb))
        for _, kind, nll, bpb in _EVAL.findall(stdout)
    }
    return {"before": evals["initial"], "after": evals["final"]}


def heldout_metrics(config) -> tuple[float, float]:
    """(NLL, bits/byte) of config.init_params_from on the config's held-out batches, no training."""
    import tempfile

    from train import batches, checkpoint, trainer
    from train.evaluate import evaluate

    r = trainer.build(config)
    train_it, heldout = batches.data_iterators(config, r.cfg.vocab_size)
    with tempfile.TemporaryDirectory() as tmp:
        with checkpoint.Checkpointer(tmp, keep=1, async_save=False) as ckpt:
            state, state_sh = trainer.restore_or_init(
                r, ckpt, trainer.IteratorSource(train_it), log=lambda s: None
            )
    eval_fn = trainer.jit_eval_step(r.eval_loss_fn, state_sh.params, r.mesh, r.rules)
    result = evaluate(eval_fn, state.params, heldout, r.mesh)
    return result["nll"], result["bits_per_byte"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="small")
    p.add_argument("--steps", default="40,30,20", help="steps of stages a,b,c")
    p.add_argument("--sft_batch", type=int, default=2)
    p.add_argument("--eval_batches", type=int, default=4)
    p.add_argument("--workdir", default="/tmp/bench_stages")
    sys.path.insert(0, ROOT)
    from bench.common import parse_tiny

    tiny_dir = os.path.join(tempfile.gettempdir(), "bench_stages_tiny")
    a = parse_tiny(
        p, dict(preset="tiny", steps="1,1,1", sft_batch=1, eval_batches=1, workdir=tiny_dir)
    )
    steps = [int(s) for s in a.steps.split(",")]
    shutil.rmtree(a.workdir, ignore_errors=True)
    wd = {k: os.path.join(a.workdir, k) for k in ("pretrain", "long", "sft")}
    common = [f"--config.model={a.preset}", f"--config.train.eval_batches={a.eval_batches}"]
    t0 = time.perf_counter()
    rows = {}
    out = run_main(
        [
            "--config=configs/pretrain.py",
            f"--workdir={wd['pretrain']}",
            *common,
            f"--config.train.steps={steps[0]}",
            f"--config.train.eval_every={steps[0]}",
        ]
    )
    rows["(a) pretrain, 8 x 128, stdlib"] = before_after(out)
    export_a = (
        run_main(
            [
                "--mode=convert",
                "--config=configs/pretrain.py",
                f"--workdir={wd['pretrain']}",
                *common,
            ]
        )
        .strip()
        .splitlines()[-1]
    )
    long_args = [
        f"--config.init_params_from={export_a}",
        f"--config.train.steps={steps[1]}",
        f"--config.train.eval_every={steps[1]}",
    ]
    out = run_main(
        ["--config=configs/long_context.py", f"--workdir={wd['long']}", *common, *long_args]
    )
    from configs import long_context

    n, x = long_context.LONG_CONTEXT, long_context.LONG_CONTEXT // long_context.ORIGINAL_CONTEXT
    rows[f"(b) long context, 1 x {n}, stdlib, YaRN x{x}"] = before_after(out)

    unextended = long_context.get_config()
    unextended.model, unextended.init_params_from = a.preset, export_a
    unextended.train.eval_batches = a.eval_batches
    unextended.model_overrides.rope_scaling.factor = 1.0  # plain RoPE: (a)'s model as trained
    plain = heldout_metrics(unextended)
    print(
        f"    (a) params at {n} tokens, plain RoPE (un-extended): NLL {plain[0]:.4f}, "
        f"bits/byte {plain[1]:.4f}",
        flush=True,
    )
    export_b = (
        run_main(
            [
                "--mode=convert",
                "--config=configs/long_context.py",
                f"--workdir={wd['long']}",
                *common,
            ]
        )
        .strip()
        .splitlines()[-1]
    )
    out = run_main(
        [
            "--mode=sft",
            "--config=configs/sft.py",
            f"--workdir={wd['sft']}",
            *common,
            f"--config.init_params_from={export_b}",
            f"--config.train.steps={steps[2]}",
            f"--config.train.eval_every={steps[2]}",
            f"--config.train.batch_size={a.sft_batch}",
        ]
    )
    rows[f"(c) SFT, {a.sft_batch} x {n}, traces (assistant tokens)"] = before_after(out)
    print(f"\npreset {a.preset}, steps {steps}, total {time.perf_counter() - t0:.0f} s\n")
    print("| stage | held-out NLL before | after | bits/byte before | after |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['before'][0]:.4f} | {r['after'][0]:.4f} | {r['before'][1]:.4f} | "
            f"{r['after'][1]:.4f} |"
        )
    print(f"| (a) params at {n}, plain RoPE (un-extended) | {plain[0]:.4f} | | {plain[1]:.4f} | |")


if __name__ == "__main__":
    main()
