"""Helpers shared by the benchmarks: median wall time of a jitted call, the machine's float32
matmul peak (train/metrics.py's, the one the training loop's MFU uses too), and a training-step
throughput measured with train/'s own jitted step; the `--tiny` smoke scale every bench takes,
and figures reported over `--seeds`. JAX is imported inside the functions that need it, so a bench
without a model (sandbox, data, eval) imports this module in milliseconds.

Run benches from the repo root (`python bench/bench_x.py`); each puts the root on sys.path.
"""

from __future__ import annotations

import functools
import os
import sys
import time


def matmul_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of one n x n x n float32 matmul on the default device alone (2 n^3 FLOPs)."""
    import jax

    from train.metrics import matmul_peak

    return matmul_peak(n, repeats=repeats, devices=[jax.devices()[0]])


def interleaved_min_times(fns: dict, args: dict, rounds: int = 5) -> dict:
    """Best-of-`rounds` seconds per fn, the fns run in turn each round so background load on this
    shared machine hits them alike; the minimum is the least-disturbed run."""
    import jax

    for name, fn in fns.items():
        jax.block_until_ready(fn(*args[name]))  # compile + warm up
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args[name]))
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def train_setup(cfg, mesh_sizes: dict | None = None, *, allocate: bool = True):
    """(state, jitted step, mesh) for model cfg with train/'s pieces: AdamW, the LM loss with MTP,
    router-bias updates, train.trainer's sharded init and jitted, donating step. allocate=False
    gives the state as ShapeDtypeStructs with shardings (to compile without memory)."""
    import jax

    import model
    from model import sharding as msh
    from train import losses, optim, trainer
    from train import sharding as shd
    from train.step import router_bias_update

    mesh = shd.make_mesh(mesh_sizes or {"data": -1})
    rules = msh.DEFAULT_RULES
    init_fn = functools.partial(model.params.init_params_unjitted, cfg)
    specs = model.param_logical_specs(cfg)
    tx = optim.make_optimizer(
        params=model.param_shapes(cfg),
        logical_specs=specs,
        schedule=optim.make_schedule(kind="constant", peak_lr=1e-3, total_steps=1, warmup_steps=0),
    )
    sh = trainer.state_shardings(init_fn, specs, tx, mesh, rules)
    if allocate:
        state = trainer.init_state(init_fn, tx, sh, mesh, rules, seed=0)
    else:
        state = jax.tree.map(
            lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
            trainer.abstract_state(init_fn, tx),
            sh,
        )
    bias = router_bias_update(1e-3) if cfg.num_moe_layers else None
    loss_fn = losses.make_lm_loss(cfg, mtp_mode="ce")
    step = trainer.jit_train_step(loss_fn, sh, mesh, rules, bias_update=bias)
    return state, step, mesh


def synthetic_batch(batch: int, seq_len: int, vocab_size: int, seed: int = 0) -> dict:
    """One host batch in the data contract (train/synthetic_data's learnable stream)."""
    from train import synthetic_data as sd

    toks = sd.synthetic_tokens(batch * (seq_len + 1) * 2, vocab_size, seed)
    it = sd.lm_batches(toks, batch_size=batch, seq_len=seq_len, seed=seed)
    return next(it)


def train_step_seconds(cfg, batch: int, seq_len: int, steps: int, mesh_sizes=None) -> float:
    """Mean seconds per training step of train/'s jitted step (compile and warm-up excluded)."""
    import jax

    from train import sharding as shd

    state, step, mesh = train_setup(cfg, mesh_sizes)
    b = shd.global_batch(synthetic_batch(batch, seq_len, cfg.vocab_size), mesh)
    for _ in range(2):  # compile + warm up
        state, _ = step(state, b)
    jax.block_until_ready(state)
    t0 = time.perf_counter()
    for _ in range(steps):
        state, m = step(state, b)
    jax.block_until_ready(state)
    return (time.perf_counter() - t0) / steps


def parse_tiny(ap, tiny: dict, argv=None):
    """ap's arguments plus `--tiny`: the suite's smoke scale (tests/test_bench_tiny*.py), where the
    `tiny` values become the defaults (a flag given on the command line still wins). A smoke run
    only shows the bench imports, takes its flags and prints its rows: its numbers mean nothing."""
    shown = ", ".join(f"{k}={v}" for k, v in tiny.items())
    ap.add_argument("--tiny", action="store_true", help=f"smoke scale (seconds): {shown}")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--tiny" in argv:
        ap.set_defaults(**tiny)
    return ap.parse_args(argv)


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]; a bad or repeated entry is an error that names it."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds must be comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds must name at least one seed, each once, got {text!r}")
    return seeds


def over_seeds(per_seed: dict) -> dict:
    """{seed: number} -> {"seeds", "mean", "min", "max", "per_seed"}: one figure reported over
    seeds (issue 55: a learning claim is its spread over seeds, not one seed's value)."""
    if not per_seed:
        raise ValueError("over_seeds: no seeds")
    vals = [float(v) for v in per_seed.values()]
    return {
        "seeds": list(per_seed),
        "mean": sum(vals) / len(vals),
        "min": min(vals),
        "max": max(vals),
        "per_seed": {s: float(v) for s, v in per_seed.items()},
    }


def curves_over_seeds(curves: dict) -> dict:
    """{seed: [value per step]} -> {"mean", "min", "max"}: per-step lists over the seeds, as long
    as the shortest curve (a seed that stopped early does not stretch the others)."""
    if not curves:
        raise ValueError("curves_over_seeds: no seeds")
    n = min(len(c) for c in curves.values())
    cols = [[float(c[i]) for c in curves.values()] for i in range(n)]
    return {
        "mean": [sum(c) / len(c) for c in cols],
        "min": [min(c) for c in cols],
        "max": [max(c) for c in cols],
    }


def seeds_line(name: str, summary: dict, fmt: str = ".3f") -> str:
    """One printed line: 'NAME over seeds [0, 1]: mean 0.500 min 0.250 max 0.750 (0: 0.250,
    1: 0.750)'."""
    each = ", ".join(f"{s}: {v:{fmt}}" for s, v in summary["per_seed"].items())
    return (
        f"{name} over seeds {summary['seeds']}: mean {summary['mean']:{fmt}} "
        f"min {summary['min']:{fmt}} max {summary['max']:{fmt}} ({each})"
    )


def tiny_export(preset: str = "tiny", seed: int = 0, **overrides) -> str:
    """A temporary folder holding random-init params of `preset` (its config fields `overrides`
    replaced) in model.export's layout: what a bench that reads an export (--params) smokes with
    under --tiny."""
    import dataclasses
    import tempfile

    import jax

    from model import init_params, presets
    from model.export import save_params

    cfg = dataclasses.replace(presets.get(preset), **overrides)
    path = os.path.join(tempfile.mkdtemp(prefix="bench_tiny_export_"), "params")
    save_params(path, cfg, jax.device_get(init_params(cfg, jax.random.PRNGKey(seed))))
    return path
