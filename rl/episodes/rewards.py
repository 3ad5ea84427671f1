"""Episode rewards: pure functions of an episode record (never of anything the policy's code wrote).

    reward = outcome - malformed_penalty * [malformed_calls > 0] - sum_q length_penalty(x_q)

outcome: 'all_pass' (1 if every hidden test passed else 0) or 'fraction' (passed / total), from the
grader's counts in the record (`tests_passed`, `tests_total`), which come from the environment's
hidden tests run outside the policy's reach: rl/episodes/schema.py's all_pass and partial_credit,
the rules the grader and the metrics use too. A record the grader flagged as tampered gets
TAMPER_SCORE (-1), below every honest outcome, in either mode: its pass count is never read
(fail closed; rl/episodes/schema.py says why). This module is the only reward: the environment
reports the grade (rl/envs: passed, total, tampered, all_pass), never a score of its own, and every
record (rl/episodes/records.py) carries the reward computed here and its terms.

Concave length penalty, per quantity q in LENGTH_QUANTITIES (thinking tokens, tool-I/O tokens,
output tokens, tool calls, turns):
    length_penalty(x) = lam_q * ((1 + x / s_q) ** p_q - 1),   lam_q >= 0, s_q > 0, 0 < p_q < 1
It is 0 at x = 0, increasing (derivative lam p (1 + x/s)^(p-1) / s > 0) and concave (second
derivative lam p (p-1) (1 + x/s)^(p-2) / s^2 < 0): the first tokens cost the most, so a long
but necessary episode is not crushed, while needless verbosity still loses reward.

Every term is returned separately (for TensorBoard) together with the total.

Served responses (rl/serve/realtime.py) are rewarded here too: `feedback_reward` maps a user's
signal (accepted, rejected, edited, dissatisfied, rating) to a reward, its one term the outcome;
rl/serve/feedback.py documents the mapping.

The toy tasks' rewards live here too: `pattern_reward` (the single-turn pattern task,
rl/sampling/samplers.py) and `chain_reward` (the summary chain, rl/sampling/summary_toy.py).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rl.episodes.schema import all_pass, partial_credit

TAMPER_SCORE = -1.0  # below every honest outcome (an honest failure scores 0)
LENGTH_QUANTITIES = ("thinking_tokens", "tool_io_tokens", "output_tokens", "tool_calls", "turns")


@dataclasses.dataclass(frozen=True)
class LengthTerm:
    lam: float = 0.0  # weight (0 = off)
    scale: float = 1000.0  # s: the x at which (1 + x/s) doubles
    power: float = 0.5  # p in (0, 1): concavity

    def __post_init__(self):
        if self.lam < 0 or self.scale <= 0 or not 0 < self.power < 1:
            raise ValueError(f"length penalty {self}: need lam >= 0, scale > 0, 0 < power < 1")


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    outcome: str = "all_pass"  # 'all_pass' | 'fraction'
    malformed_penalty: float = 0.5  # subtracted once if the episode has any malformed tool call
    length: Mapping[str, LengthTerm] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.outcome not in ("all_pass", "fraction"):
            raise ValueError(f"rl.reward.outcome={self.outcome!r}: expected all_pass|fraction")
        unknown = set(self.length) - set(LENGTH_QUANTITIES)
        if unknown:
            raise ValueError(
                f"rl.reward.length: unknown quantities {sorted(unknown)}; known {LENGTH_QUANTITIES}"
            )


def length_penalty(x: float, term: LengthTerm) -> float:
    return term.lam * ((1.0 + max(float(x), 0.0) / term.scale) ** term.power - 1.0)


def outcome_reward(passed: int, total: int, mode: str, tampered: bool = False) -> float:
    if tampered:  # the grader caught the repo bending its results: worse than an honest failure
        return TAMPER_SCORE
    if mode == "all_pass":  # the one pass rule (rl/episodes/schema.py)
        return float(all_pass(passed, total, tampered))
    return partial_credit(passed, total, tampered)  # the one partial credit (0: no test ran)


def episode_reward(record: Mapping, cfg: RewardConfig) -> tuple[float, dict]:
    """record: {'tests_passed', 'tests_total', 'tampered' (optional), 'counts':
    {malformed_calls, <LENGTH_QUANTITIES>}}.
    -> (total reward, {term name: value}) with every term signed as it enters the total."""
    counts = record.get("counts", {})
    terms = {
        "outcome": outcome_reward(
            int(record.get("tests_passed", 0)),
            int(record.get("tests_total", 0)),
            cfg.outcome,
            bool(record.get("tampered", False)),
        )
    }
    malformed = int(counts.get("malformed_calls", 0))
    terms["malformed"] = -cfg.malformed_penalty if malformed > 0 else 0.0
    for q, term in cfg.length.items():
        terms[f"len_{q}"] = -length_penalty(counts.get(q, 0), term)
    return sum(terms.values()), terms


def reward_config_from_dict(d: Mapping) -> RewardConfig:
    """From the ml_collections `rl.reward` block: {outcome, malformed_penalty, length: {q: {lam,
    scale, power}}}."""
    # `length` is optional: configs set no length terms unless a run names some
    length = {q: LengthTerm(**dict(v)) for q, v in dict(d.get("length", {})).items()}
    return RewardConfig(
        outcome=d["outcome"],
        malformed_penalty=float(d["malformed_penalty"]),
        length=length,
    )


def feedback_reward(fb: dict, completion_text: str, m) -> float:
    """A served response's reward from a user's signal (rl/serve/feedback.py documents the mapping),
    under mapping `m` (configs/realtime.py realtime.reward). Pure: the signal and the text only."""
    s = fb["signal"]
    if s == "edited":
        sim = difflib.SequenceMatcher(None, completion_text, fb["final_text"]).ratio()
        return m.edited_min + (m.edited_max - m.edited_min) * sim
    if s == "rating":
        return (float(fb["rating"]) - 3.0) / 2.0
    return float(
        {"accepted": m.accepted, "rejected": m.rejected, "dissatisfied": m.dissatisfied}[s]
    )


# ---------------------------------------------------------------- toy tasks


def pattern_reward(target_ids: Sequence[int]) -> Callable:
    """Toy task reward: the fraction of completion tokens in `target_ids` (the 'learns' test)."""
    target = np.asarray(sorted(target_ids))

    def reward(completion, task_id):
        del task_id
        c = np.asarray(completion)
        frac = float(np.isin(c, target).mean()) if c.size else 0.0
        return frac, {"outcome": frac}

    return reward


def chain_reward(answer, fact: int) -> float:
    """The summary chain's reward (rl/sampling/summary_toy.py): the fraction of answer tokens that
    are the fact, shared by the chain's two episodes."""
    a = np.asarray(answer)
    return float(np.mean(a == fact)) if a.size else 0.0
