"""Decode benchmarks for the engine (model/engine/, through model/prompt_batch.py), side by side in
one process (the machine is shared):

    python bench/bench_decode.py                  # small preset: trains its MTP head once (the run
                                                  # is kept in runs/bench_decode), then benchmarks
    python bench/bench_decode.py --train_steps 0  # random weights (acceptance is then meaningless)
    python bench/bench_decode.py --train_steps 0 --mtp_stage_steps 0 --variants "1::0;32::0;64::0" \
        --decode_dtypes float32,bfloat16          # plain greedy, float32 vs bfloat16 engine
    python bench/bench_decode.py --tiny           # smoke: tiny preset, random weights, batch 1,
                                                  # K=0,1 greedy, 8 + 4 tokens, 1 repeat

1. MTP heads: the main model and its MTP module are trained together by train/'s loop (main.py's
   default config: AdamW, next-token CE + an MTP loss of weight --mtp_weight; module 0 at t predicts
   t+2). --mtp_mode distill (default, as configs/sft.py trains it): the head matches the main
   head's own (stop-gradient) distribution one position ahead, which is what a temperature-1
   speculative verifier accepts; --mtp_mode ce: the head is trained on the data's tokens
   for --train_steps steps on the embedded stdlib code corpus (data/'s pipeline, byte tokenizer);
   prompts come from the run's held-out documents. Then --mtp_stage_steps (default 300) steps of
   the MTP stage (configs/mtp.py's settings: train.trainable='mtp', the MTP module alone learns
   the frozen model's distribution by self-distillation, lr --mtp_stage_lr) in <workdir>/mtp_stage.
   The runs live in --workdir (re-running resumes and re-exports them).
2. Plain greedy decode tokens/s at batch 1 and 32 (the prefill is excluded: PromptBatch.prefill()
   runs first, the timed part is the decode loop), median of --repeats.
3. Speculative decode (greedy and temperature 1) at batch 1 (and 32) with K = 1..3 MTP drafts:
   tokens/s, speedup over plain measured in the same loop (runs alternate), and the acceptance rate
   (accepted / drafted).
4. Latent-cache bytes/token for the small preset (measured from init_layer_caches) and the big
   presets.

--decode_dtypes: the engine's dtypes (ModelConfig.decode_dtype: float32, bfloat16, auto) run side by
side, alternating within each repeat; the 'vs first dtype' column is each row's tokens/s over the
first dtype's same (temperature, K) row, and 'same tokens as K=0' compares within a dtype.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench.common import parse_tiny  # noqa: E402
from configs import default, mtp  # noqa: E402
from model import init_params, presets  # noqa: E402
from model.decode import (  # noqa: E402
    cache_bytes_per_token,
    init_layer_caches,
    uncompressed_cache_bytes_per_token,
)
from model.export import load_params  # noqa: E402
from model.prompt_batch import PromptBatch  # noqa: E402
from train import batches, convert, trainer  # noqa: E402


def run_config(
    preset: str, steps: int, batch: int, seq: int, lr: float, mtp_weight: float, mtp_mode: str
):
    """configs/default.py for the MTP-training run: the stdlib code corpus through data/'s pipeline
    (byte tokenizer), LM + MTP CE loss, one device."""
    c = default.get_config()
    c.model = preset
    c.train.update(
        steps=max(steps, 1),
        batch_size=batch,
        seq_len=seq,
        lr=lr,
        warmup_steps=min(50, steps // 5 + 1),
        mtp_mode=mtp_mode,
        mtp_weight=mtp_weight,
        log_every=25,
        eval_every=max(steps, 1),
    )
    c.mesh.data = jax.device_count()
    c.checkpoint.every_steps = max(steps, 1)
    return c


def train_or_load(config, workdir: str, mtp_stage_steps: int = 0, mtp_stage_lr: float = 1e-3):
    """Params of the preset after config.train.steps steps of train/'s loop (cached in workdir:
    re-running resumes the finished run and exports it again), then, with mtp_stage_steps > 0,
    that many steps of the MTP stage (train.trainable='mtp': the MTP module alone learns to match
    the frozen model, mtp_mode distill) in <workdir>/mtp_stage."""
    if os.path.exists(os.path.join(workdir, "model_config.json")):  # an export, e.g. main.py's
        print(f"using exported params {workdir}")
        return load_params(workdir)[1]
    if config.train.steps <= 1:
        return init_params(presets.get(config.model), jax.random.PRNGKey(0))
    trainer.train(config, workdir)
    export = convert.export_latest(config, workdir)
    if mtp_stage_steps > 0:
        stage = config.copy_and_resolve_references()
        stage.init_params_from = export
        stage.train.update(
            steps=mtp_stage_steps,
            lr=mtp_stage_lr,
            warmup_steps=min(20, mtp_stage_steps // 5 + 1),
            eval_every=mtp_stage_steps,
            **mtp.STAGE,
        )
        stage.checkpoint.every_steps = mtp_stage_steps
        stage_dir = os.path.join(workdir, "mtp_stage")
        trainer.train(stage, stage_dir)
        export = convert.export_latest(stage, stage_dir)
    return load_params(export)[1]


def held_out_prompts(config, n: int, length: int) -> list[list[int]]:
    """n prompts of `length` tokens from the run's held-out rows (documents it never trained on)."""
    _, heldout = batches.data_iterators(config, presets.get(config.model).vocab_size)
    rows = [r for b in heldout for r in b["tokens"]]
    return [[int(t) for t in rows[i % len(rows)][:length]] for i in range(n)]


def decode_run(
    cfg, params, prompts, max_new: int, num_draft: int, temperature: float
) -> tuple[float, dict, list]:
    """Seconds of the decode loop (prefill excluded), stats, tokens."""
    batch = PromptBatch(
        cfg, params, prompts, max_new, num_draft=num_draft, temperature=temperature, seed=1
    ).prefill()
    jax.block_until_ready(batch.engine.state)
    start = time.perf_counter()
    batch.run_until_done()
    jax.block_until_ready(batch.engine.state)
    seconds = time.perf_counter() - start
    out = batch.results()
    return seconds, out.stats, out.tokens


def bench_decode(
    config,
    cfg,
    params,
    batch: int,
    drafts: list[int],
    temperatures: list[float],
    prompt_len: int,
    max_new: int,
    repeats: int,
    dtypes: list[str],
):
    """One row per (decode dtype, temperature, K); K = 0 is the plain baseline of the speedup
    column, the first dtype that of the 'vs first dtype' column."""
    prompts = held_out_prompts(config, batch, prompt_len)
    cfgs = {dt: cfg.replace(decode_dtype=dt) for dt in dtypes}
    variants = [(dt, t, k) for dt in dtypes for t in temperatures for k in [0] + drafts]
    times = {v: [] for v in variants}
    stats, tokens = {}, {}
    for dt, t, k in variants:  # compile (temperature is traced: one compile per dtype and K)
        if t == temperatures[0]:
            decode_run(cfgs[dt], params, prompts, max_new, k, t)
    for _ in range(repeats):  # alternate, so load changes hit every variant alike
        for v in variants:
            sec, stats[v], tokens[v] = decode_run(cfgs[v[0]], params, prompts, max_new, v[2], v[1])
            times[v].append(sec)
    rows = []
    for dt, t, k in variants:
        med = float(np.median(times[(dt, t, k)]))
        st = stats[(dt, t, k)]
        tokens_s = st["tokens"] / med
        first = stats[(dtypes[0], t, k)]["tokens"] / float(np.median(times[(dtypes[0], t, k)]))
        rows.append(
            dict(
                batch=batch,
                dtype=dt,
                temperature=t,
                k=k,
                tokens_s=tokens_s,
                speedup=float(np.median(times[(dt, t, 0)])) / med,
                vs_first=tokens_s / first,
                acceptance=st["acceptance_rate"],
                per_step=st["tokens_per_slot_step"],
                same=tokens[(dt, t, k)] == tokens[(dt, t, 0)] if t == 0 else "-",
            )
        )
    return rows, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small")
    ap.add_argument("--workdir", default="runs/bench_decode")
    ap.add_argument("--train_steps", type=int, default=300)
    ap.add_argument("--train_batch", type=int, default=8)
    ap.add_argument("--train_seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--mtp_weight", type=float, default=1.0)
    ap.add_argument("--mtp_mode", default="distill", choices=("ce", "distill"))
    ap.add_argument("--prompt_len", type=int, default=64)
    ap.add_argument("--max_new", type=int, default=128)
    # batch:drafts:temperatures; one table block each (K = 0 always runs as the baseline).
    ap.add_argument("--variants", default="1:1,2,3:0,1;32:2:0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train_only", action="store_true")
    ap.add_argument(
        "--mtp_stage_steps",
        type=int,
        default=300,
        help="then train the MTP module alone on the frozen model (train.trainable='mtp'); 0: no",
    )
    ap.add_argument("--mtp_stage_lr", type=float, default=1e-3)
    ap.add_argument(
        "--decode_dtypes",
        default="auto",
        help="engine dtypes side by side, e.g. float32,bfloat16 "
        "(auto: bf16 on GPU/TPU, f32 on CPU)",
    )
    tiny_dir = os.path.join(tempfile.gettempdir(), "bench_decode_tiny")  # unused: 0 train steps
    tiny = dict(preset="tiny", workdir=tiny_dir, train_steps=0, mtp_stage_steps=0)
    tiny.update(prompt_len=8, max_new=4, variants="1:1:0", repeats=1)
    args = parse_tiny(ap, tiny)
    dtypes = args.decode_dtypes.split(",")
    cfg = presets.get(args.preset)
    print(f"devices: {jax.devices()}  preset={args.preset}")
    config = run_config(
        args.preset,
        args.train_steps,
        args.train_batch,
        args.train_seq,
        args.lr,
        args.mtp_weight,
        args.mtp_mode,
    )
    params = train_or_load(config, args.workdir, args.mtp_stage_steps, args.mtp_stage_lr)
    if args.train_only:
        return
    print(
        f"\n## decode, prompt {args.prompt_len} tokens (held-out stdlib file), {args.max_new} new "
        f"tokens, median of {args.repeats}"
    )
    print(
        "| batch | decode dtype | temperature | draft K | decode tokens/s | speedup vs K=0 "
        f"| vs {dtypes[0]} | acceptance | tokens/verify step | same tokens as K=0 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.variants.split(";"):
        b, ks, temps = spec.split(":")
        rows, tokens = bench_decode(
            config,
            cfg,
            params,
            int(b),
            [int(k) for k in ks.split(",") if k],
            [float(t) for t in temps.split(",")],
            args.prompt_len,
            args.max_new,
            args.repeats,
            dtypes,
        )
        for r in rows:
            acc = "-" if r["k"] == 0 else f"{r['acceptance']:.2f}"
            print(
                f"| {r['batch']} | {r['dtype']} | {r['temperature']:g} | {r['k']} "
                f"| {r['tokens_s']:.1f} | {r['speedup']:.2f}x | {r['vs_first']:.2f}x | {acc} "
                f"| {r['per_step']:.2f} | {r['same']} |",
                flush=True,
            )
        for (dt, temp, k), rows_tokens in tokens.items():  # what the rows above decoded (K = 0)
            if int(b) == 1 and k == 0 and dt == dtypes[0]:
                text = bytes(t for t in rows_tokens[0] if t < 256).decode("utf-8", "replace")
                print(f"sample (batch 1, {dt}, temperature {temp:g}): {text[:200]!r}")
    print("\n## latent cache bytes/token (all layers)")
    for dt in ("float32", "bfloat16"):
        cache = init_layer_caches(cfg, 1, 1024, dt)
        measured = sum(x.nbytes for x in jax.tree_util.tree_leaves(cache)) / 1024
        print(
            f"  {args.preset} {dt}: {measured:.0f} bytes/token measured from init_layer_caches "
            f"(latent+rope, int32 position) = {cache_bytes_per_token(cfg, dt)} by "
            "model.decode.cache_bytes_per_token"
        )
    for name in (args.preset, "deepseek_v3", "kimi_k2"):
        c = presets.get(name)
        latent = cache_bytes_per_token(c, "bfloat16", positions=False)
        full = uncompressed_cache_bytes_per_token(c, "bfloat16")
        print(
            f"  {name}: bf16 latent {latent} B vs uncompressed {full} B "
            f"({full / latent:.1f}x smaller)"
        )


if __name__ == "__main__":
    main()
