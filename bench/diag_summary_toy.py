"""Why a summary_toy run stalls (issue 55): per-step diagnostics of a finished (or running)
bench/bench_rl_summary.py workdir, read from its rollout store, journal and TensorBoard events.

    python bench/diag_summary_toy.py WORKDIR [WORKDIR ...] [--every 10] [--facts 4]

Per window of `--every` steps it prints: the reward, the fraction of tied groups (every chain one
reward: zero advantage), per fact the carry rate (chains whose summary decodes to the fact under
bench_rl_summary.py's decoder, fitted on the 10 steps before), per fact the entropy (bits) of its
summaries and its most common summary with that summary's share, the facts that share a summary
(a collision: both facts' top summary is the same), the receiver's answer on each colliding
summary, and the trainer's KL (k1 to the initial policy) and token entropy from TensorBoard.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from rl.stores.store import RolloutStore  # noqa: E402


def chains(workdir: str) -> list[list[dict]]:
    """Per trained step, its chains: {fact, summary, answer, reward, group}."""
    store = RolloutStore(os.path.join(workdir, "rollouts"))
    out = []
    with open(os.path.join(workdir, "journal.jsonl")) as f:
        for line in f:
            step = []
            for gid in json.loads(line)["groups"]:
                recs = store.get(gid)
                by_chain = collections.defaultdict(dict)
                for r in recs:
                    by_chain[r["chain"]][r["segment"]] = r
                for seg in by_chain.values():
                    s0, s1 = seg[0], seg[1]
                    step.append(
                        dict(
                            fact=int(s0["tokens"][1]),  # USER f f
                            summary=tuple(s0["tokens"][s0["mask"] > 0].tolist()),
                            answer=tuple(s1["tokens"][s1["mask"] > 0].tolist()),
                            reward=float(s0["reward"]),
                            group=gid,
                        )
                    )
            out.append(step)
    return out


def entropy_bits(counter: collections.Counter) -> float:
    p = np.array(list(counter.values()), float)
    p /= p.sum()
    return float(-(p * np.log2(p)).sum())


def tb_scalars(workdir: str) -> dict[str, dict[int, float]]:
    from train.tensorboard import read_events

    out = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(workdir, "tb", "events.out.tfevents.*"))):
        for step, tag, kind, value in read_events(path):
            if kind == "scalars":
                out[tag][step] = value
    return out


def decoders(steps: list[list[dict]]) -> list[dict]:
    """Per step, summary -> most common fact over the 10 steps before (bench_rl_summary.py)."""
    out = []
    for i in range(len(steps)):
        by = collections.defaultdict(collections.Counter)
        for c in (c for cs in steps[max(i - 10, 0) : i] for c in cs):
            by[c["summary"]][c["fact"]] += 1
        out.append({s: c.most_common(1)[0][0] for s, c in by.items()})
    return out


def report(workdir: str, every: int, facts: int) -> None:
    steps = chains(workdir)
    dec = decoders(steps)
    tb = tb_scalars(workdir)
    kl, ent = tb.get("kl_k1", {}), tb.get("entropy", {})
    print(f"== {workdir}: {len(steps)} steps")
    for a in range(0, len(steps), every):
        win = range(a, min(a + every, len(steps)))
        cs = [c for i in win for c in steps[i]]
        rew = np.mean([c["reward"] for c in cs])
        groups = collections.defaultdict(set)
        for c in cs:
            groups[(c["group"])].add(c["reward"])
        tied = np.mean([len(v) == 1 for v in groups.values()])
        carry = [
            np.mean([dec[i].get(c["summary"]) == c["fact"] for i in win for c in steps[i]
                     if c["fact"] == f] or [np.nan])
            for f in range(facts)
        ]  # fmt: skip
        per_fact = {f: collections.Counter(c["summary"] for c in cs if c["fact"] == f)
                    for f in range(facts)}  # fmt: skip
        tops = {f: per_fact[f].most_common(1)[0] for f in range(facts) if per_fact[f]}
        n = {f: sum(per_fact[f].values()) for f in per_fact}
        klv = [kl[s] for s in kl if a < s <= a + every]
        env = [ent[s] for s in ent if a < s <= a + every]
        print(
            f"steps {a + 1:3d}-{win[-1] + 1:3d} reward {rew:.3f} tied {tied:.2f} "
            f"kl {np.mean(klv) if klv else float('nan'):.3f} "
            f"tok-entropy {np.mean(env) if env else float('nan'):.3f}"
        )
        print(
            "   carry "
            + " ".join(f"f{f}:{carry[f]:.2f}" for f in range(facts))
            + "   summary-entropy "
            + " ".join(f"f{f}:{entropy_bits(per_fact[f]):.2f}" for f in range(facts))
        )
        print(
            "   top summary " + " ".join(f"f{f}:{tops[f][0]}x{tops[f][1] / n[f]:.2f}" for f in tops)
        )
        by_top = collections.defaultdict(list)
        for f, (s, _) in tops.items():
            by_top[s].append(f)
        for s, fs in by_top.items():
            if len(fs) > 1:
                ans = collections.Counter(t for c in cs if c["summary"] == s for t in c["answer"])
                tot = sum(ans.values())
                dist = " ".join(f"{t}:{k / tot:.2f}" for t, k in ans.most_common(4))
                pair_rewards = {
                    f: np.mean([c["reward"] for c in cs if c["fact"] == f and c["summary"] == s])
                    for f in fs
                }
                print(
                    f"   COLLISION facts {fs} on {s}: answer tokens {dist}; reward there "
                    + " ".join(f"f{f}:{v:.2f}" for f, v in pair_rewards.items())
                )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workdirs", nargs="+")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--facts", type=int, default=4)
    args = ap.parse_args()
    for w in args.workdirs:
        report(w, args.every, args.facts)


if __name__ == "__main__":
    main()
