"""Helpers shared by the benchmarks: median wall time of a jitted call, the machine's float32
matmul peak (train/metrics.py's, the one the training loop's MFU uses too), and a training-step
throughput measured with train/'s own jitted step.

Run benches from the repo root (`python bench/bench_x.py`); each puts the root on sys.path.
"""

from __future__ import annotations

import functools
import time

import jax

from train.metrics import matmul_peak


def matmul_peak_flops(n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of one n x n x n float32 matmul on the default device alone (2 n^3 FLOPs)."""
    return matmul_peak(n, repeats=repeats, devices=[jax.devices()[0]])


def interleaved_min_times(fns: dict, args: dict, rounds: int = 5) -> dict:
    """Best-of-`rounds` seconds per fn, the fns run in turn each round so background load on this
    shared machine hits them alike; the minimum is the least-disturbed run."""
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
