"""Episode metrics, defined once. The agentic suite (eval/agentic.py), the RL loop's logs
(rl/learning/batch_source.py), the rollout driver's summary (rl/sampling/rollout.py) and the
benchmarks (bench/bench_rl_coding.py, bench/bench_rl.py) all call `episode_metrics`:

    episode_metrics(records, ks=(1, 4)) -> {"pass_rate": ..., "best_of_4": ..., ...}

Every episode is read through the one schema, rl.episodes.schema.Episode.from_record (a record,
an eval episode or a report sample; a missing field is a one-line error naming it): its task_id
(best-of-K groups a task's episodes), grade (tests_passed, tests_total, tampered), done_reason,
counts (turns, tool_calls, malformed_calls, summaries), segments and reward (optional: its mean
is reported when every episode has one; a dropped episode, `Episode.dropped`, has none). Besides
the episode, the policy's tokens: `completion_tokens` (eval's episodes), else the records' masks
summed over segments.

Chains (rl/episodes/records.py, rl/envs/agent/summary.py): a record with a `segment` field is one
segment of the episode named by (task_id, group / group_id, sample / chain). Every segment must be
present; the episode counts once, with the grade, counts and reward of its last segment (they are
the chain's, identical on every segment) and the tokens of all. A record without `segment` is a
whole episode (eval/agentic.py's episodes: a record's `Episode.to_dict()` plus the suite's own
fields).

Metrics, means over episodes unless said:

    episodes, tasks                  counts
    pass_rate                        every hidden test passed and no tampering (schema.all_pass)
    best_of_<k>                      mean over tasks of the unbiased pass@k (rl/episodes/passk.py)
                                     from all n episodes of the task: P(some of k samples passes).
                                     Not the fraction of tasks with any pass among n (that is
                                     pass@n, and is biased for k < n). Needs n >= k for every task.
    partial_credit                   tests_passed / tests_total (schema.partial_credit: 0 if
                                     tampered, whatever the tampered run counted as passed)
    completion_tokens, tool_calls, turns, summaries, segments     per episode
    malformed_rate                   malformed calls / all calls (well-formed + malformed)
    malformed_episodes               episodes with a malformed call (rl/episodes/rewards.py's
                                     penalty)
    done/<reason>                    fraction of episodes that ended that way
    reward                           mean reward, when every episode's record carries one
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from rl.episodes.passk import pass_at_k
from rl.episodes.schema import Episode

_WHOLE = object()  # _chains' key for a record that is a whole episode


def passes(rec: Mapping) -> bool:
    """A record passes: rl.episodes.schema.all_pass on its episode."""
    return Episode.from_record(rec).passes


def credit(rec: Mapping) -> float:
    """A record's partial credit: rl.episodes.schema.partial_credit on its episode."""
    return Episode.from_record(rec).credit


def _chains(records: Sequence[Mapping]) -> list[list[Mapping]]:
    """Records -> episodes, each the list of its records (one, or a chain's segments in order)."""
    chains: dict[tuple, list] = {}
    for i, rec in enumerate(records):
        if rec.get("segment") is None:
            chains[(_WHOLE, i)] = [rec]
            continue
        index = rec.get("sample", rec.get("chain"))
        if index is None:
            raise ValueError(
                f"episode_metrics: record {i} (task {rec.get('task_id')!r}) is a segment but "
                "names no sample or chain"
            )
        key = (rec.get("task_id"), rec.get("group"), rec.get("group_id"))
        chains.setdefault((*key, index), []).append(rec)
    out = []
    for key, recs in chains.items():
        if key[0] is _WHOLE:  # a whole episode: its 'segments' counts the chain it summarizes
            out.append(recs)
            continue
        recs = sorted(recs, key=lambda r: int(r["segment"]))
        want = int(recs[-1].get("segments", 1))
        got = [int(r["segment"]) for r in recs]
        if got != list(range(want)):
            raise ValueError(f"episode_metrics: chain {key} has segments {got} of {want}")
        out.append(recs)
    return out


def _completion_tokens(recs: list[Mapping]) -> int:
    """Tokens the policy emitted in a chain: its 'completion_tokens' (eval's episodes), else its
    masks summed (records); an episode with neither has no transcript (`Episode.dropped`): 0."""
    tokens = recs[-1].get("completion_tokens")
    if tokens is None:
        tokens = sum(int(np.sum(r["mask"])) for r in recs if "mask" in r)
    return int(tokens)


def _best_of(task_ids: list[str], solved: list[bool], ks: Sequence[int]) -> dict[str, float]:
    per_task: dict[str, list[bool]] = defaultdict(list)
    for task, ok in zip(task_ids, solved):
        per_task[task].append(ok)
    out = {}
    for k in ks:
        short = {t: len(v) for t, v in per_task.items() if len(v) < k}
        if short:
            task, n = next(iter(short.items()))
            raise ValueError(
                f"episode_metrics: best_of_{k} needs >= {k} episodes of every task; "
                f"task {task!r} has {n} ({len(short)} such tasks)"
            )
        out[f"best_of_{k}"] = sum(pass_at_k(len(v), sum(v), k) for v in per_task.values()) / len(
            per_task
        )
    return out


def episode_metrics(records: Sequence, ks: Sequence[int] = (1,)) -> dict:
    """The metrics in this module's docstring over `records` (segments or whole episodes). An
    episode is read from its last record (a chain's grade, counts and reward are on every
    segment) and the tokens of all its records."""
    if any(int(k) < 1 for k in ks):
        raise ValueError(f"episode_metrics: ks must be >= 1, got {list(ks)}")
    chains = _chains(records)
    if not chains:
        raise ValueError("episode_metrics: no episodes")
    ends = [Episode.from_record(recs[-1]) for recs in chains]
    n = len(ends)
    tasks = [e.task_id for e in ends]
    solved = [e.passes for e in ends]
    calls, bad = [e.counts.tool_calls for e in ends], [e.counts.malformed_calls for e in ends]
    m = {
        "episodes": n,
        "tasks": len(set(tasks)),
        "pass_rate": sum(solved) / n,
        "partial_credit": sum(e.credit for e in ends) / n,
        "completion_tokens": sum(_completion_tokens(recs) for recs in chains) / n,
        "tool_calls": sum(calls) / n,
        "turns": sum(e.counts.turns for e in ends) / n,
        "malformed_rate": sum(bad) / (sum(calls) + sum(bad)) if sum(calls) + sum(bad) else 0.0,
        "malformed_episodes": sum(b > 0 for b in bad) / n,
        "summaries": sum(e.counts.summaries for e in ends) / n,
        "segments": sum(e.segments for e in ends) / n,
    }
    m.update(_best_of(tasks, solved, [int(k) for k in ks]))
    for reason, count in sorted(Counter(e.done_reason for e in ends).items()):
        m[f"done/{reason}"] = count / n
    rewards = [e.reward for e in ends]
    if all(r is not None for r in rewards):  # a mean over some would not be comparable: omitted
        m["reward"] = sum(float(r) for r in rewards) / n
    return m
