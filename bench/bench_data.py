"""Data pipeline throughput: is the input pipeline fast enough to never stall training?

    python bench/bench_data.py            # ~1 min on 2 CPU cores; prints a markdown table
    python bench/bench_data.py --tiny     # smoke: the stdlib's json/ folder, 2 batches a setting

Measures, in one run and side by side:
  * raw floor: read every stdlib .py file and byte-tokenize it (no grain, no packing)
  * the training pipeline (stdlib -> shuffle -> tokenize -> pack -> batch) at several settings
  * SFT on the shipped traces (chat rendering + assistant masks)
  * a file-backed BPE tokenizer (the tiny HF fixture) for comparison with the byte tokenizer
  * one held-out pass, and the time to restore an iterator mid-epoch
  * the small preset's training tokens/s (train/'s jitted step, batch 8 x 128, one device),
    measured in the same run: the last column is pipeline rate / training rate (the bar: >= 10x).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from bench.common import parse_tiny, train_step_seconds  # noqa: E402
from configs import sft  # noqa: E402
from data import DataConfig, held_out_batches, train_iterator  # noqa: E402
from data.sources import SourceSpec, open_source, stdlib_root  # noqa: E402
from model import presets  # noqa: E402
from train.batches import data_config  # noqa: E402

FIXTURE_HF = os.path.join(
    os.path.dirname(__file__), "..", "tests", "fixtures", "data", "tokenizer.json"
)


def raw_floor(spec: SourceSpec) -> tuple[float, float, int]:
    """Read + byte-tokenize the source once, no pipeline: (seconds, tokens/s, tokens)."""
    source = open_source(spec)
    start, tokens = time.perf_counter(), 0
    for path in source.files:
        with open(path, "rb") as f:
            tokens += np.frombuffer(f.read(), np.uint8).astype(np.int32).size
    seconds = time.perf_counter() - start
    return seconds, tokens / seconds, tokens


def pipeline_rate(cfg: DataConfig, batches: int) -> tuple[float, float]:
    """(seconds to the first batch, tokens/s over the next `batches` batches)."""
    start = time.perf_counter()
    it = train_iterator(cfg)
    next(it)
    first = time.perf_counter() - start
    start, tokens = time.perf_counter(), 0
    for _ in range(batches):
        tokens += next(it)["tokens"].size
    return first, tokens / (time.perf_counter() - start)


def restore_seconds(cfg: DataConfig, steps: int) -> float:
    it = train_iterator(cfg)
    for _ in range(steps):
        next(it)
    state = it.get_state()
    start = time.perf_counter()
    fresh = train_iterator(cfg)
    fresh.set_state(state)
    next(fresh)
    return time.perf_counter() - start


def held_out_pass(cfg: DataConfig) -> tuple[float, int, int]:
    start, batches, tokens = time.perf_counter(), 0, 0
    for batch in held_out_batches(cfg):
        batches += 1
        tokens += int(batch["loss_mask"].sum())
    return time.perf_counter() - start, batches, tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stdlib_dir", default="", help="a stdlib sub-folder ('' = the whole stdlib)")
    ap.add_argument("--batches", type=float, default=1.0, help="scale of the batches per setting")
    ap.add_argument("--preset", default="small", help="the training rate's model")
    args = parse_tiny(ap, dict(stdlib_dir="json", batches=0.0, preset="tiny"))
    where = os.path.join(stdlib_root(), args.stdlib_dir) if args.stdlib_dir else None
    spec = SourceSpec("stdlib", paths=(where,) if where else ())
    host = dict(process_index=0, process_count=1)
    src = dict(sources=(spec,), **host)  # the SFT row keeps its own sources
    n_of = lambda n: max(2, int(n * args.batches))  # noqa: E731
    rows = []
    seconds, rate, total = raw_floor(spec)
    rows.append(
        (
            f"raw read + byte tokenize, {args.stdlib_dir or 'whole'} stdlib",
            f"{total / 1e6:.1f}M tokens in {seconds:.2f} s",
            rate,
        )
    )
    settings = [
        ("stdlib, T=1024, B=8, 4 threads", dict(seq_len=1024, global_batch_size=8), 1500),
        (
            "stdlib, T=1024, B=8, 1 thread",
            dict(seq_len=1024, global_batch_size=8, num_threads=1),
            1500,
        ),
        ("stdlib, T=256, B=32, 4 threads", dict(seq_len=256, global_batch_size=32), 1500),
        ("stdlib, T=4096, B=8, 4 threads", dict(seq_len=4096, global_batch_size=8), 300),
    ]
    for name, kw, n in settings:
        first, rate = pipeline_rate(DataConfig(**kw, **src), n_of(n))
        rows.append((f"pipeline: {name}", f"first batch {first:.2f} s", rate))
    sft_cfg = dataclasses.replace(
        data_config(sft.get_config()), seq_len=4096, global_batch_size=8, **host
    )
    first, rate = pipeline_rate(sft_cfg, n_of(200))
    rows.append(
        ("pipeline: SFT traces (configs/sft.py), T=4096, B=8", f"first batch {first:.2f} s", rate)
    )
    first, rate = pipeline_rate(
        DataConfig(seq_len=1024, global_batch_size=8, tokenizer=f"hf:{FIXTURE_HF}", **src),
        n_of(150),
    )
    rows.append(
        ("pipeline: stdlib, HF BPE fixture (384 ids), T=1024", f"first batch {first:.2f} s", rate)
    )

    steps = n_of(3)
    train_rate = 8 * 128 / train_step_seconds(presets.get(args.preset), 8, 128, steps, {"data": 1})
    print(f"{args.preset} preset training: {train_rate:,.0f} tokens/s (batch 8 x 128, one device)")
    print(f"load average (1/5/15 min): {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| what | detail | tokens/s | x training tokens/s |")
    print("|---|---|---:|---:|")
    for name, detail, rate in rows:
        print(f"| {name} | {detail} | {rate:,.0f} | {rate / train_rate:,.0f}x |")
    cfg = DataConfig(seq_len=1024, global_batch_size=8, **src)
    seconds, batches, tokens = held_out_pass(cfg)
    print(
        f"\nheld-out pass (1% of stdlib by content hash): {batches} batches, {tokens:,} target "
        f"tokens, {seconds:.2f} s"
    )
    n = n_of(200)
    seconds = restore_seconds(cfg, n)
    print(f"restore mid-epoch (after {n} batches) and fetch one batch: {seconds:.2f} s")


if __name__ == "__main__":
    main()
