"""Skipping tasks that are predicted to carry no signal (rl.curriculum), before they are sampled.

Dynamic sampling (rl/learning/loop.py) drops a group whose rewards are all equal only after its
episodes were played: on bench_rl_coding's pool a third of the sampled groups were such groups (run
21:
97 of 296), most of them from task kinds the policy never solves (or always solves). Here a sampler
keeps, per value of a task attribute (`rl.curriculum.key`, e.g. 'meta.package'), whether each of
that kind's groups had outcome spread (some episodes passed the hidden tests and some did not). A
task whose kind had none in each of its last `after` groups is skipped with probability `prob`; the
other (1 - prob) keep probing whether the policy has moved, and one group with spread resumes the
kind.

A skipped task is written to the rollout store as an empty group: the trainer counts it and never
trains it (exactly-once bookkeeping unchanged). The history is the sampler's own (what it played
since it started); a restarted sampler starts it afresh. Decisions draw from a generator seeded by
(rl.seed, task index), so a rerun skips the same tasks given the same history.
"""

from __future__ import annotations

import collections

import numpy as np


def task_key(task, path: str):
    """The value at a dotted attribute / dict path of a task ('meta.package'), or None."""
    value = task
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        else:
            value = getattr(value, part, None)
        if value is None:
            return None
    return value


def outcome_spread(group: list[dict]) -> bool:
    """Some episodes passed and some did not (the reward's 'outcome' term differs)."""
    return len({r.get("reward_terms", {}).get("outcome", 0.0) for r in group}) > 1


class Curriculum:
    """Per-kind history of outcome spread; `skip(task, index)` decides before sampling."""

    def __init__(self, key: str = "", after: int = 0, prob: float = 0.0, seed: int = 0):
        if after < 0 or not 0.0 <= prob <= 1.0:
            raise ValueError(
                f"rl.curriculum: need after >= 0 and 0 <= prob <= 1, got {after}, {prob}"
            )
        self.key, self.after, self.prob, self.seed = key, after, prob, seed
        self.history: dict = collections.defaultdict(lambda: collections.deque(maxlen=after))
        self.skipped = 0

    @property
    def enabled(self) -> bool:
        return bool(self.key) and self.after > 0 and self.prob > 0

    def settled(self, kind) -> bool:
        """The kind's last `after` groups all had no outcome spread."""
        h = self.history.get(kind)
        return h is not None and len(h) == self.after and not any(h)

    def skip(self, task, index: int) -> bool:
        if not self.enabled:
            return False
        kind = task_key(task, self.key)
        if kind is None or not self.settled(kind):
            return False
        if np.random.default_rng([self.seed, index]).random() >= self.prob:
            return False
        self.skipped += 1
        return True

    def record(self, task, group: list[dict]) -> None:
        if not self.enabled or not group:
            return
        kind = task_key(task, self.key)
        if kind is not None:
            self.history[kind].append(outcome_spread(group))
