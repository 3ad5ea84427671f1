"""Can the policy learn to copy? (issue 52: the measured blocker is writing the statement's symbol
into a call.) Trains a params pytree on a synthetic copy task with Adam and reports, every
--every steps, the NLL on the bytes only copying predicts, beside its two bounds, then the
name-copy probe (eval/name_copy.py) on committed expert traces as trained and renamed afresh.

    python bench/bench_copy.py --init PARAMS [--task induction] [--steps 600] [--lr 1e-3]
    python bench/bench_copy.py --preset tiny4 --task fixed      # from a random init
    python bench/bench_copy.py --tiny                           # smoke: tiny, 2 steps

Tasks (rows of 2 x --half random lowercase bytes, --batch a step):
- fixed: --half random bytes, then the same again: the second half is a copy at a fixed
  distance (a head attending --half positions back solves it; no content lookup).
- induction: 4 random names (5-11 bytes) at random places in random filler, then the same names
  in a shuffled order, then padding: a name's bytes after its first are known only by finding
  the earlier occurrence of the byte before them (content-addressed copy, an induction head).
Scored positions: the second half's bytes (fixed) or the second list's name bytes after each
name's first (induction). Perfect copying scores 0 nats; not copying, log 26 = 3.26.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from bench import rl_stages  # noqa: E402
from bench.common import parse_tiny  # noqa: E402

LETTERS = (97, 123)  # a-z
SPACE = 32
NO_COPY = math.log(LETTERS[1] - LETTERS[0])


def fixed_row(rng, half: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens [2*half], scored [2*half]: 1 where the target is a copy)."""
    x = rng.integers(*LETTERS, size=half)
    return np.concatenate([x, x]), np.r_[np.zeros(half), np.ones(half)]


def induction_row(rng, half: int) -> tuple[np.ndarray, np.ndarray]:
    """The module docstring's induction row: (tokens [2*half], scored [2*half])."""
    names = [rng.integers(*LETTERS, size=rng.integers(5, 12)) for _ in range(4)]
    filler = list(rng.integers(*LETTERS, size=half - sum(len(x) + 1 for x in names)))
    cuts = np.sort(rng.integers(0, len(filler) + 1, size=len(names)))  # names whole, in order
    tokens = []
    for x, lo, hi in zip(names, np.r_[0, cuts[:-1]], cuts):
        tokens += filler[lo:hi] + [SPACE, *x]
    tokens += filler[cuts[-1] :]
    scored = [0] * len(tokens)
    for j in rng.permutation(len(names)):
        tokens += [SPACE, *names[j]]
        scored += [0, 0] + [1] * (len(names[j]) - 1)  # the first byte of a name is a guess
    pad = 2 * half - len(tokens)
    return np.asarray(tokens + [SPACE] * pad), np.asarray(scored + [0] * pad)


def batch(task: str, rng, size: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    make = fixed_row if task == "fixed" else induction_row
    rows = [make(rng, half) for _ in range(size)]
    return np.stack([r[0] for r in rows]).astype(np.int32), np.stack([r[1] for r in rows])


def make_step(cfg, opt):
    from model import Transformer

    def loss_fn(params, tokens, scored):  # tokens [B,T]; scored [B,T]: targets to score
        logits = Transformer(cfg).apply({"params": params}, tokens, with_mtp=False).logits
        logp = jax.nn.log_softmax(logits[:, :-1], -1)  # [B,T-1,V]: predicts tokens[:, 1:]
        nll = -jnp.take_along_axis(logp, tokens[:, 1:, None], -1)[..., 0]  # [B,T-1]
        return (nll * scored[:, 1:]).sum() / scored[:, 1:].sum()

    @jax.jit
    def step(params, state, tokens, scored):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, scored)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return step, jax.jit(loss_fn)


def probe(cfg, params, rows: dict) -> str:
    from eval.name_copy import name_copy_probe

    if not all(rows.values()):
        return f"none: no naming prefix fits the model's {rl_stages.probe_len(cfg)}-token context"
    out = []
    for label, these in rows.items():
        got = name_copy_probe(cfg, params, these, rl_stages.probe_len(cfg))
        out.append(f"{label}: exact {got['names_exact']:.3f} bytes {got['name_bytes']:.3f}")
    return "; ".join(out) + f" ({len(next(iter(rows.values())))} traces)"


def arguments():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", default="", help="exported params (train/'s export)")
    ap.add_argument("--preset", default="tiny4", help="random init of a preset without --init")
    ap.add_argument("--task", default="induction", choices=("fixed", "induction"))
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--half", type=int, default=64)
    ap.add_argument("--probe_traces", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    tiny = dict(preset="tiny", steps=2, every=1, batch=2, half=48, probe_traces=4)
    return parse_tiny(ap, tiny)


def main():
    from model import init_params, presets
    from model.export import load_params

    args = arguments()
    if args.task == "induction" and args.half < 48:
        sys.exit(f"error: --half {args.half}: the induction task needs 48 (4 names of <= 12 bytes)")
    if args.init:
        cfg, params = load_params(args.init)
    else:
        # a random init at the probe's length (the presets' own context is 512)
        cfg = presets.get(args.preset, num_mtp_modules=0, max_position_embeddings=2048)
        params = init_params(cfg, jax.random.PRNGKey(args.seed))
    traces = os.path.join(ROOT, "data/traces/repo_expert_traces.jsonl")
    rows = rl_stages.name_probe_rows(traces, args.probe_traces, rl_stages.probe_len(cfg))
    print(f"name-copy probe before: {probe(cfg, params, rows)}", flush=True)
    opt = optax.adam(args.lr)
    state, (step, score) = opt.init(params), make_step(cfg, opt)
    rng, held = np.random.default_rng(args.seed), np.random.default_rng(args.seed + 1)
    test = batch(args.task, held, args.batch, args.half)
    print(f"| step | copied-byte NLL (held-out batch; copy 0, no copy {NO_COPY:.2f}) | wall s |")
    print("|---|---|---|")
    t0 = time.time()
    for i in range(args.steps + 1):
        if i % args.every == 0 or i == args.steps:
            print(
                f"| {i} | {float(score(params, *test)):.3f} | {time.time() - t0:.0f} |", flush=True
            )
        if i < args.steps:
            params, state, _ = step(params, state, *batch(args.task, rng, args.batch, args.half))
    print(f"name-copy probe after: {probe(cfg, params, rows)}")


if __name__ == "__main__":
    main()
