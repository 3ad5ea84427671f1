"""Rollout driver throughput and the bf16 log-prob gap (rl/sampling/rollout.py on model/engine/).

    python bench/bench_rollout.py [--tasks 16] [--slots 8,16] [--rounds 2]
    python bench/bench_rollout.py --tiny     # smoke: 2 tasks, slots 1 and 2, 1 round, 1 gap task

1. Episodes/s and decode tokens/s of play_episodes with S concurrent episodes vs sequential
   (slots=1), on the tiny preset with the oracle's turns teacher-forced through the engine (every
   episode does the same work: 4 turns, ~520 policy tokens, real sandbox: list_files, write_file,
   pytest, grading), and where the wall time went: decoding, prefill, waiting on the sandbox with
   nothing to decode. Configurations run interleaved (A, B, A, B ..) after a warm-up (compiles);
   the load average is printed beside each run.
2. bf16 gap: episodes sampled by the tiny model in bfloat16; a bf16 training forward over each
   transcript with and without the replayed experts; |trainer log-prob - sampler log-prob| over
   policy tokens (mean, max), plus the share of positions whose routing differs without replay.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bench.common import parse_tiny  # noqa: E402
from data.tokenizers import ByteTokenizer  # noqa: E402
from model import Transformer, init_params, presets  # noqa: E402
from model.engine import RolloutEngine  # noqa: E402
from model.sampling import mask_invalid  # noqa: E402
from rl.envs import OraclePolicy, generate_tasks  # noqa: E402
from rl.sampling.rollout import play_episodes  # noqa: E402

TOK = ByteTokenizer()
CACHE = 2048


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def make_engine(cfg, params, tasks, slots: int) -> RolloutEngine:
    """An engine warmed up on 2 episodes (compiles the decode loop and the common prefills)."""
    eng = RolloutEngine(
        cfg, params, slots=slots, cache_len=CACHE, valid_vocab=TOK.vocab_size, min_bucket=128
    )
    play_episodes(eng, TOK, tasks[:2], **scripted_kw(slots))
    return eng


def scripted_kw(slots: int) -> dict:
    return dict(
        scripted=lambda t: OraclePolicy(TOK, t),
        env_kwargs=dict(obs_token_budget=256),
        workers=max(slots, 2),
        log_every_s=0,
    )


def throughput(eng: RolloutEngine, tasks) -> dict:
    return play_episodes(eng, TOK, tasks, **scripted_kw(eng.spec.slots)).summary()


def bf16_gap(n_tasks: int) -> dict:
    cfg = presets.get("tiny", max_position_embeddings=2 * CACHE, dtype="bfloat16")
    params = init_params(cfg, jax.random.PRNGKey(0))
    eng = RolloutEngine(
        cfg,
        params,
        slots=4,
        cache_len=CACHE,
        temperature=1.0,
        valid_vocab=TOK.vocab_size,
        min_bucket=128,
    )
    tasks = generate_tasks(n_tasks, seed=1)
    recs = play_episodes(eng, TOK, tasks, group_size=2, max_turn_tokens=64, log_every_s=0).records
    fwd = jax.jit(lambda t, e: Transformer(cfg).apply({"params": params}, t, forced_experts=e))
    gaps = {"replay": [], "free": []}
    routing_diff = []
    pad = 2 * CACHE  # a context_limit record ends with an observation past the cache
    for rec in recs:
        n = len(rec["tokens"])
        toks = np.zeros((1, pad), np.int32)
        toks[0, :n] = rec["tokens"]
        ex = np.zeros((cfg.num_moe_layers, 1, pad, cfg.num_experts_per_tok), np.int32)
        ex[:, 0, :n] = rec["experts"]
        m = np.asarray(rec["mask"][1:], bool)
        sampler = np.asarray(rec["logprobs"][1:])[m]
        for name, forced in (("replay", jnp.asarray(ex)), ("free", None)):
            out = fwd(jnp.asarray(toks), forced)
            lp = jax.nn.log_softmax(mask_invalid(out.logits[0, : n - 1], TOK.vocab_size), -1)
            lp = np.asarray(jnp.take_along_axis(lp, jnp.asarray(rec["tokens"][1:])[:, None], -1))
            gaps[name].append(np.abs(lp[:, 0][m] - sampler))
            if forced is None:
                free = np.sort(np.asarray(out.expert_ids)[:, 0, : n - 1], -1)
                rep = np.sort(ex[:, 0, : n - 1], -1)
                routing_diff.append(np.any(free != rep, -1)[:, m].mean())
    out = {
        k: (float(np.concatenate(v).mean()), float(np.concatenate(v).max()))
        for k, v in gaps.items()
    }
    out["policy_tokens"] = int(sum(len(g) for g in gaps["replay"]))
    out["routing_differs_without_replay"] = float(np.mean(routing_diff))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--slots", default="8,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--gap_tasks", type=int, default=4)
    args = parse_tiny(ap, dict(tasks=2, slots="2", rounds=1, gap_tasks=1))
    cfg = presets.get("tiny", max_position_embeddings=CACHE)
    params = init_params(cfg, jax.random.PRNGKey(0))
    tasks = generate_tasks(args.tasks, seed=0)
    configs = [1] + [int(s) for s in args.slots.split(",") if s]
    print(f"tiny preset, {args.tasks} scripted episodes per run, cache {CACHE}; {load()}")
    engines = {s: make_engine(cfg, params, tasks, s) for s in configs} if args.rounds else {}
    for r in range(args.rounds):
        for slots in configs:
            s = throughput(engines[slots], tasks)
            print(
                f"round {r} slots={slots:3d}: {s['episodes_per_s']:.3f} episodes/s, "
                f"{s['policy_tokens_per_s']:.1f} policy tok/s end-to-end, "
                f"{s['policy_tokens'] / max(s['decode_share'] * s['wall_s'], 1e-9):.1f}"
                f" tok/s while decoding, wall {s['wall_s']:.1f}s; share "
                f"decode {s['decode_share']:.2f} prefill {s['prefill_share']:.2f} "
                f"sandbox-wait {s['sandbox_wait_share']:.2f}; "
                f"{s['mean_active_slots']:.1f} slots active per decode step; pass "
                f"{s['pass_rate']:.2f}; {load()}",
                flush=True,
            )
    if args.gap_tasks == 0:
        return
    g = bf16_gap(args.gap_tasks)
    print(
        f"bf16 sampler vs bf16 training forward over {g['policy_tokens']} policy tokens: "
        f"|dlogprob| mean/max with replay {g['replay'][0]:.2e}/{g['replay'][1]:.2e}, without "
        f"{g['free'][0]:.2e}/{g['free'][1]:.2e}; routing differs without replay on "
        f"{g['routing_differs_without_replay']:.1%} of policy positions; {load()}"
    )


if __name__ == "__main__":
    main()
