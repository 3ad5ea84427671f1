"""Does a model find the repo's package name in its context? (issue 11's limit, RESULTS_LOG.md)

    python bench/probe_name_recall.py PARAMS_DIR [PARAMS_DIR ...] [--tasks 32] [--family boundary]
    python bench/probe_name_recall.py --tiny     # smoke: random-init tiny params, 1 task seed

Held-out tasks of the family (seeds 3_000_000 + i) are played by the scripted oracle in the sandbox
(rl.envs.agent.scripted.TracePolicy, as for SFT traces), once under the generator's package name
(cycling through all 8) and once under a synthetic name never used in training. On each trace,
teacher-forced, the model's log-probs at the package name's first mention in assistant text (after
the task prompt and the `list_files` result, which both contain it) give:

  name nll          nats for the whole name (a model that copies it: ~0; one that picks among the
                    generator's 8 names without looking: >= ln 8 = 2.08)
  first-byte nll    nats for its first byte, and first-byte acc: greedy top-1 is that byte

The first byte is where copying is needed: once it is written, the rest of a known name follows.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from bench_rl_coding import synthetic_package  # noqa: E402

from bench.common import parse_tiny, tiny_export  # noqa: E402
from data.chat import render_messages  # noqa: E402
from data.tokenizers import ByteTokenizer  # noqa: E402
from model.export import load_params  # noqa: E402
from model.transformer import Transformer  # noqa: E402
from rl.envs import generate_task  # noqa: E402
from rl.envs.taskgen.helpers import PACKAGES  # noqa: E402

SEED_BASE = 3_000_000  # apart from bench_rl_coding's trace (1e6) and held-out (2e6) seeds


def oracle_traces(family: str, n: int) -> list[dict]:
    """[{'kind': 'generator' | 'synthetic', 'package', 'ids', 'mask'}], two per task seed."""
    from rl.envs import traces as mt

    tok, out = ByteTokenizer(), []
    for i in range(n):
        names = {
            "generator": PACKAGES[i % len(PACKAGES)],
            "synthetic": synthetic_package(random.Random(SEED_BASE + i)),
        }
        for kind, package in names.items():
            task = generate_task(family, SEED_BASE + i, 1 + i % 3, package=package)
            trace = mt.task_trace(task, random.Random(i), f"probe-{i}")
            if trace is None:  # the oracle's episode did not end clean (printed by task_trace)
                continue
            ids, mask = render_messages(tok, trace["messages"])
            out.append(dict(kind=kind, package=package, ids=ids, mask=mask))
    return out


def first_assistant_mention(ids: list[int], mask: list[int], name: list[int]) -> int | None:
    """Index of the first assistant-written occurrence of `name` (byte ids), or None."""
    for j in range(len(ids) - len(name) + 1):
        if mask[j] and ids[j : j + len(name)] == name:
            return j
    return None


def probe(params_dir: str, traces: list[dict]) -> dict[str, tuple[float, float, float, int]]:
    """-> {kind: (name nll, first-byte nll, first-byte acc, traces)} (means over traces)."""
    cfg, params = load_params(params_dir)
    model = Transformer(cfg)
    log_probs = jax.jit(
        lambda p, x: jax.nn.log_softmax(model.apply({"params": p}, x, with_mtp=False).logits, -1)
    )
    rows: dict[str, list] = {}
    for t in traces:
        name = list(t["package"].encode())
        start = first_assistant_mention(t["ids"], t["mask"], name)
        if start is None:
            continue
        width = -(-len(t["ids"]) // 256) * 256  # pad to a multiple of 256: few compiled shapes
        x = np.zeros((1, width), np.int32)
        x[0, : len(t["ids"])] = t["ids"]
        lp = np.asarray(log_probs(params, jnp.asarray(x))[0])  # [T, V]; lp[j] predicts ids[j+1]
        name_nll = -sum(lp[start - 1 + k, b] for k, b in enumerate(name))
        first = lp[start - 1]
        rows.setdefault(t["kind"], []).append(
            (name_nll, -first[name[0]], float(first.argmax() == name[0]))
        )
    return {k: (*np.mean(v, 0).tolist(), len(v)) for k, v in rows.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("params_dirs", nargs="*", help="exported params (model.export layout)")
    ap.add_argument("--tasks", type=int, default=32, help="task seeds (x 2 package names)")
    ap.add_argument("--family", default="boundary")
    args = parse_tiny(ap, dict(tasks=1))
    if not args.params_dirs:
        if not args.tiny:
            ap.error("give at least one PARAMS_DIR (an export, model.export layout) unless --tiny")
        args.params_dirs = [tiny_export("tiny")]
    traces = oracle_traces(args.family, args.tasks)
    print("| params | names | traces | name nll | first-byte nll | first-byte acc |")
    print("|---|---|---:|---:|---:|---:|")
    for d in args.params_dirs:
        for kind, (name_nll, first_nll, acc, n) in probe(d, traces).items():
            print(f"| {d} | {kind} | {n} | {name_nll:.2f} | {first_nll:.2f} | {acc:.2f} |")


if __name__ == "__main__":
    main()
