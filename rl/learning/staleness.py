"""The staleness bound: how many params versions behind the trainer a sampled group may be and
still be trained (off-policy samples beyond it are dropped, counted, never trained).

A group's staleness at trainer version v is v - (the oldest params version of any policy token in
it: every policy token keeps the version of the forward that sampled it, rl/episodes/records.py).
The RL trainer's batch source (rl/learning/batch_source.py) drops a group whose staleness exceeds
`rl.max_staleness` when its batch forms; the real-time cycle (rl/serve/feedback.py) drops a served
response whose staleness against the cycle's base params exceeds `realtime.max_staleness`. Both
bounds are configs/ defaults (configs/rl.py, configs/realtime.py); the rule is this file's.

Within the bound the loss's truncated importance weight (rl/learning/grpo.py, TIS with rl.tis_c)
corrects for the sampler/trainer mismatch; rl.max_ahead (backpressure) keeps most groups well
inside it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def oldest_version(records: Sequence[dict]) -> int:
    """Oldest params version of any policy token in the records; -1 when none has one."""
    vs = [np.asarray(r["versions"])[np.asarray(r["mask"], bool)] for r in records]
    vs = [v for v in vs if v.size]
    return int(min(v.min() for v in vs)) if vs else -1


def staleness(version: int, oldest: int) -> int:
    """Versions between the trainer's `version` and a group's `oldest` policy token."""
    return version - oldest


def too_stale(version: int, oldest: int, max_staleness: int) -> bool:
    """The bound: a group more than `max_staleness` versions behind is not trained."""
    return staleness(version, oldest) > max_staleness
