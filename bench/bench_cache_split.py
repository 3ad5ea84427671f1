"""Decode tokens/s of the split vs the unsplit latent cache (model/engine/split.py), side by side
in one process on 8 simulated CPU devices:

    python bench/bench_cache_split.py [--tiny] [--slots 16] [--cache_len 2048] [--prompt 1024]
        [--calls 8] [--rounds 2] [--layouts expert4_tensor2:slots,context4_tensor2:sequence]

For each layout (a mesh over the 8 devices and the split to compare) two engines are built on the
same mesh: cache_split='none' (MLA's latent cache whole on every chip of a slot's row) and the
layout's split. Every slot is prefilled with a --prompt-token prompt, then both decode greedily
with every slot active (no stop tokens) in calls of 16 iterations, alternating none / split each
round, so the machine's load falls on both alike. Printed per layout: decode tokens/s of each
(slots x 16 x calls over the timed calls' wall time, best round), their ratio, each engine's
per-device cache bytes (read off the arrays' shards), and whether both decoded the same greedy
tokens.

The model is bench_rl_coding's `tiny4` preset (random init, float32, moe_comm='alltoall', what
an expert-parallel engine dispatches with on CPU; MTP off). --tiny: the `tiny` preset, 8 slots,
24-token prompts, a 128-position cache and 2 calls of 16 (a smoke run of the same code:
tests/test_bench_cache_split.py).
CPU devices share the host's cores: the figures say what the split costs or saves in decode work
on this mesh, not what a chip's HBM bandwidth would make of it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()

ITERATIONS = 16  # decode iterations per engine.step call (as the rollout driver calls it)


def parse_layout(text: str) -> tuple[dict, str]:
    """'expert4_tensor2:slots' -> ({'expert': 4, 'tensor': 2}, 'slots')."""
    from model.engine.split import CACHE_SPLITS
    from model.sharding import MESH_AXES

    mesh, _, split = text.partition(":")
    sizes = {}
    for part in mesh.split("_"):
        axis = part.rstrip("0123456789")
        if axis not in MESH_AXES or axis == part:
            raise ValueError(f"layout {text!r}: {part!r} is not a mesh axis and size")
        sizes[axis] = int(part[len(axis) :])
    if split not in CACHE_SPLITS[1:]:
        raise ValueError(f"layout {text!r}: split must be one of {CACHE_SPLITS[1:]}, got {split!r}")
    return sizes, split


def model(tiny: bool, cache_len: int):
    """(cfg, params): tiny or tiny4, float32, all-to-all MoE dispatch, no MTP, positions up to
    cache_len."""
    import jax

    from model import init_params, presets

    cfg = presets.get("tiny" if tiny else "tiny4", moe_comm="alltoall", num_mtp_modules=0)
    cfg = dataclasses.replace(cfg, dtype="float32", max_position_embeddings=cache_len)
    return cfg, init_params(cfg, jax.random.PRNGKey(0))


def cache_bytes_per_device(eng) -> int:
    """Bytes of the latent cache on one device (its first shard of every cache leaf)."""
    import jax

    return sum(x.addressable_shards[0].data.nbytes for x in jax.tree.leaves(eng.state.cache))


def start(cfg, params, mesh, split: str, slots: int, cache_len: int, prompt: int, max_new: int):
    """An engine on `mesh` with every slot prefilled and its decode programs compiled."""
    import jax

    from model.engine import RolloutEngine

    eng = RolloutEngine(
        cfg, params, slots=slots, cache_len=cache_len, temperature=0.0, mesh=mesh,
        cache_split=split,
    )  # fmt: skip
    for i in range(slots):
        eng.submit(i, [3 + (7 * i + j) % (cfg.vocab_size - 3) for j in range(prompt)],
                   max_new=max_new, stop_tokens=[])  # fmt: skip
    eng.step(ITERATIONS)  # prefill + compile
    eng.step(ITERATIONS)  # warm
    jax.block_until_ready(eng.state.tokens)
    return eng


def timed(eng, calls: int) -> float:
    """Seconds of `calls` decode calls of ITERATIONS iterations, every slot active."""
    import jax

    t0 = time.perf_counter()
    for _ in range(calls):
        eng.step(ITERATIONS)
    jax.block_until_ready(eng.state.tokens)
    return time.perf_counter() - t0


def compare(cfg, params, sizes: dict, split: str, slots, cache_len, prompt, calls, rounds) -> dict:
    """One layout: tokens/s (best round) and per-device cache bytes of the unsplit and the split
    engine on the same mesh, and whether their greedy tokens agree."""
    import jax

    from model.sharding import role_mesh

    mesh = role_mesh(sizes, jax.devices())
    decoded = (2 + rounds * calls) * ITERATIONS  # warm-up calls + the timed ones
    if prompt + decoded > cache_len:
        raise ValueError(f"cache_len {cache_len} < {prompt + decoded} tokens a slot holds")
    engines = {
        s: start(cfg, params, mesh, s, slots, cache_len, prompt, decoded) for s in ("none", split)
    }
    best = dict.fromkeys(engines, float("inf"))
    for _ in range(rounds):
        for name, eng in engines.items():  # alternating: the load falls on both alike
            best[name] = min(best[name], timed(eng, calls))
    tokens = slots * ITERATIONS * calls
    seqs = {name: [eng.sequence(i) for i in range(slots)] for name, eng in engines.items()}
    return {
        "tok_s": {name: tokens / s for name, s in best.items()},
        "cache_bytes": {name: cache_bytes_per_device(e) for name, e in engines.items()},
        "same_tokens": seqs["none"] == seqs[split],
        "decoded": len(seqs[split][0]) - prompt,
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="smoke scale: tiny preset, 8 slots")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--cache_len", type=int, default=2048)
    ap.add_argument("--prompt", type=int, default=1024, help="prompt tokens per slot")
    ap.add_argument("--calls", type=int, default=8, help="timed calls of 16 iterations per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layouts", default="expert4_tensor2:slots,context4_tensor2:sequence")
    args = ap.parse_args(argv)
    if args.tiny:
        args.slots, args.cache_len, args.prompt, args.calls, args.rounds = 8, 128, 24, 2, 1
    layouts = [parse_layout(x) for x in args.layouts.split(",")]
    cfg, params = model(args.tiny, args.cache_len)
    preset = "tiny" if args.tiny else "tiny4"
    print(f"{preset}, {args.slots} slots, cache {args.cache_len}, prompts {args.prompt}, "
          f"{args.calls} x {ITERATIONS} iterations x {args.rounds} rounds; "
          f"load before {os.getloadavg()[0]:.2f}")  # fmt: skip
    print("| layout | split | unsplit tok/s | split tok/s | split / unsplit | cache KiB/device "
          "(unsplit -> split) | same greedy tokens |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for sizes, split in layouts:
        r = compare(
            cfg,
            params,
            sizes,
            split,
            args.slots,
            args.cache_len,
            args.prompt,
            args.calls,
            args.rounds,
        )
        t, c = r["tok_s"], r["cache_bytes"]
        name = " x ".join(f"{a} {n}" for a, n in sizes.items())
        print(f"| {name} | {split} | {t['none']:.0f} | {t[split]:.0f} | "
              f"{t[split] / t['none']:.2f} | {c['none'] / 1024:.1f} -> {c[split] / 1024:.1f} | "
              f"{'yes' if r['same_tokens'] else 'NO'} ({r['decoded']} tokens a slot) |",
              flush=True)  # fmt: skip
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
