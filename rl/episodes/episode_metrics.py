"""Episode metrics, defined once. The agentic suite (eval/agentic.py), the RL loop's logs
(rl/learning/batch_source.py), the rollout driver's summary (rl/sampling/rollout.py) and the benchmarks
(bench/bench_rl_coding.py, bench/bench_rl.py) all call `episode_metrics`:

    episode_metrics(records, ks=(1, 4)) -> {"pass_rate": ..., "best_of_4": ..., ...}

A record is an object or a dict; each field is read either way, and the counts also from a
training record's 'counts' dict (rl/episodes/records.py):

    task_id                          the task: best-of-K groups a task's episodes
    tests_passed, tests_total        the hidden tests' grade
    tampered                         the grader caught the repo bending its results: a failure
    done_reason                      how the episode ended
    turns, tool_calls, malformed_calls   the episode's counts
    completion_tokens, or mask       tokens the policy emitted (from masks: summed over segments)
    summaries / segments             a chain's summary turns / segments (either gives the other)
    reward                           optional: its mean is reported when every episode has one
                                     (dropped_episode has none)

Chains (rl/episodes/records.py, rl/envs/agent/summary.py): a record with a `segment` field is one segment of the
episode named by (task_id, group / group_id, sample / chain). Every segment must be present; the
episode counts once, with the grade, counts and reward of its last segment (they are the chain's,
identical on every segment) and the tokens of all. A record without `segment` is a whole episode
(eval/agentic.py's episodes: a record's chain facts, rl.episodes.records.FACTS, plus the suite's own
fields).

Metrics, means over episodes unless said:

    episodes, tasks                  counts
    pass_rate                        every hidden test passed and no tampering (`passes`)
    best_of_<k>                      mean over tasks of the unbiased pass@k (rl/episodes/passk.py) from
                                     all n episodes of the task: P(some of k samples passes). Not
                                     the fraction of tasks with any pass among n (that is pass@n,
                                     and is biased for k < n). Needs n >= k for every task.
    partial_credit                   tests_passed / tests_total (`credit`: 0 if tampered)
    completion_tokens, tool_calls, turns, summaries, segments     per episode
    malformed_rate                   malformed calls / all calls (well-formed + malformed)
    malformed_episodes               episodes with a malformed call (rl/episodes/rewards.py's penalty)
    done/<reason>                    fraction of episodes that ended that way
    reward                           mean reward, when every episode's record carries one
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from rl.episodes.passk import pass_at_k

_MISSING = object()
_WHOLE = object()  # _chains' key for a record that is a whole episode


def field(rec, name: str, default=_MISSING):
    """rec.name or rec[name], else the same name in the record's 'counts' dict (training records
    keep their counts there); `default` if absent, else a one-line error naming the field."""
    if isinstance(rec, Mapping):
        if name in rec:
            return rec[name]
        counts = rec.get("counts")
    else:
        if hasattr(rec, name):
            return getattr(rec, name)
        counts = getattr(rec, "counts", None)
    if isinstance(counts, Mapping) and name in counts:
        return counts[name]
    if default is _MISSING:
        task = rec.get("task_id") if isinstance(rec, Mapping) else getattr(rec, "task_id", None)
        raise ValueError(f"episode_metrics: a record of task {task!r} has no field {name!r}")
    return default


def all_pass(passed: int, total: int, tampered: bool) -> bool:
    """The pass rule, defined once (episodes, rl.envs.grading.tasks.Grade, rl/episodes/rewards.py's 'all_pass'
    outcome): every hidden test ran and passed, and the grader caught no tampering."""
    return total > 0 and passed == total and not tampered


def passes(rec) -> bool:
    """A record passes (all_pass on its tests_passed, tests_total and tampered fields)."""
    passed, total = int(field(rec, "tests_passed")), int(field(rec, "tests_total"))
    return all_pass(passed, total, bool(field(rec, "tampered")))


def credit(rec) -> float:
    """Partial credit: the fraction of hidden tests passed; 0 when tampered or none ran."""
    total = int(field(rec, "tests_total"))
    if total <= 0 or bool(field(rec, "tampered")):
        return 0.0
    return int(field(rec, "tests_passed")) / total


def dropped_episode(task_id: str) -> dict:
    """An episode the rollout driver dropped (e.g. a prompt longer than the context): scored as a
    failure, never left out, so a task's n stays the number of samples asked for."""
    return dict(
        task_id=task_id, tests_passed=0, tests_total=0, tampered=False, done_reason="error",
        turns=0, tool_calls=0, malformed_calls=0, completion_tokens=0,
    )  # fmt: skip


def _chains(records: Sequence) -> list[list]:
    """Records -> episodes, each the list of its records (one, or a chain's segments in order)."""
    chains: dict[tuple, list] = {}
    for i, rec in enumerate(records):
        if field(rec, "segment", None) is None:
            chains[(_WHOLE, i)] = [rec]
            continue
        index = field(rec, "sample", field(rec, "chain", None))
        if index is None:
            raise ValueError(
                f"episode_metrics: record {i} (task {field(rec, 'task_id')!r}) is a segment but "
                "names no sample or chain"
            )
        key = (field(rec, "task_id"), field(rec, "group", None), field(rec, "group_id", None))
        chains.setdefault((*key, index), []).append(rec)
    out = []
    for key, recs in chains.items():
        if key[0] is _WHOLE:  # a whole episode: its 'segments' counts the chain it summarizes
            out.append(recs)
            continue
        recs = sorted(recs, key=lambda r: int(field(r, "segment", 0)))
        want = int(field(recs[-1], "segments", 1))
        got = [int(field(r, "segment", 0)) for r in recs]
        if got != list(range(want)):
            raise ValueError(f"episode_metrics: chain {key} has segments {got} of {want}")
        out.append(recs)
    return out


def _chain_counts(last) -> tuple[int, int]:
    """(summaries, segments) of a chain: segments = summaries + 1 (each summary joins two)."""
    summaries = field(last, "summaries", None)
    segments = field(last, "segments", None)
    if summaries is None:
        summaries = int(segments or 1) - 1
    return int(summaries), int(segments if segments is not None else summaries + 1)


def _completion_tokens(recs: list) -> int:
    """Tokens the policy emitted in a chain: its 'completion_tokens', else its masks summed."""
    tokens = field(recs[-1], "completion_tokens", None)
    if tokens is None:
        tokens = sum(int(np.sum(field(r, "mask"))) for r in recs)
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
    ends = [recs[-1] for recs in chains]
    n = len(ends)
    tasks = [str(field(e, "task_id")) for e in ends]
    solved = [passes(e) for e in ends]
    calls, bad = ([int(field(e, name)) for e in ends] for name in ("tool_calls", "malformed_calls"))
    chain_counts = [_chain_counts(e) for e in ends]
    m = {
        "episodes": n,
        "tasks": len(set(tasks)),
        "pass_rate": sum(solved) / n,
        "partial_credit": sum(credit(e) for e in ends) / n,
        "completion_tokens": sum(_completion_tokens(recs) for recs in chains) / n,
        "tool_calls": sum(calls) / n,
        "turns": sum(int(field(e, "turns")) for e in ends) / n,
        "malformed_rate": sum(bad) / (sum(calls) + sum(bad)) if sum(calls) + sum(bad) else 0.0,
        "malformed_episodes": sum(b > 0 for b in bad) / n,
        "summaries": sum(s for s, _ in chain_counts) / n,
        "segments": sum(g for _, g in chain_counts) / n,
    }
    m.update(_best_of(tasks, solved, [int(k) for k in ks]))
    for reason, count in sorted(Counter(str(field(e, "done_reason")) for e in ends).items()):
        m[f"done/{reason}"] = count / n
    rewards = [field(e, "reward", None) for e in ends]
    if all(r is not None for r in rewards):  # a mean over some would not be comparable: omitted
        m["reward"] = sum(float(r) for r in rewards) / n
    return m
