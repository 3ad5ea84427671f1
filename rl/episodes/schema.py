"""The episode schema, defined once: what an episode is, from the environment that plays it to
everything after it.

    Episode(task_id, done_reason, tests_passed, tests_total, tampered, counts=Counts(...),
            segments=1, reward=None, reward_terms=None)
    EpisodeRecord(task_id, tokens, mask, prompt_len, turns, ..., done_reason, ...)   in progress

The environment (rl/envs/agent/env.py) builds each episode turn by turn as an `EpisodeRecord`
(below: its transcript, and Episode's grade and counts under their names), and the finished one
becomes the Episode (`EpisodeRecord.episode`; rl.episodes.records.episode_facts adds the token
classes and the reward). Every record of its chain carries it as fields (`to_dict`: the counts as
one 'counts' dict, identical on every segment; rl/episodes/records.py); `--mode=rollout` and the
RL logs write those records as JSON; eval keeps an episode as `to_dict()` plus its own
bookkeeping and writes a report sample as `flat()` plus that bookkeeping; `Episode.from_record`
reads any of those forms back (a record, a JSON line, an eval episode, a report sample), and the
metrics (rl/episodes/episode_metrics.py) read every episode through it. Served exchanges
(rl/serve) are single-turn records with no grade: they carry the per-token fields and the reward
only (rl.episodes.records.completion_record).

Counts: turns, tool_calls (well-formed, executed) and malformed_calls are every episode's and
required; the token classes (tool_io_tokens: call + observation tokens; thinking_tokens: emitted
tokens inside <|think|>..<|/think|>; output_tokens: the other emitted tokens outside tool calls)
and the chain's summaries / summary_tokens default to 0, which is what a record written before
they were counted means (no length term, no summary).

The grade rules, one function each, used by the grader (rl.envs.grading.tasks.Grade), the
environment's record, the reward (rl/episodes/rewards.py) and the metrics:

    all_pass        every hidden test ran and passed, and the grader caught no tampering
    partial_credit  passed / total; 0 when no test ran; 0 when the grader caught tampering

Why tampering zeroes partial credit (fail closed): a reward is never decided by anything the
policy's code can write or patch. A tampered run is one where the policy's code forged or bent
the test run, so its count of passed tests is exactly such a thing: it is not read at all, not
even capped or discounted. The reward adds its own penalty on top (rewards.TAMPER_SCORE, below
every honest outcome); partial credit itself is never negative.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


def all_pass(passed: int, total: int, tampered: bool) -> bool:
    """The pass rule: every hidden test ran and passed, and the grader caught no tampering."""
    return total > 0 and passed == total and not tampered


def partial_credit(passed: int, total: int, tampered: bool) -> float:
    """The fraction of hidden tests passed; 0 when none ran or the grader caught tampering (the
    module docstring: a tampered run's pass count is the policy's, never read)."""
    if tampered or total <= 0:
        return 0.0
    return passed / total


@dataclasses.dataclass(frozen=True)
class Counts:
    """An episode's counts (the whole chain's, identical on every segment)."""

    turns: int
    tool_calls: int
    malformed_calls: int
    tool_io_tokens: int = 0
    thinking_tokens: int = 0
    output_tokens: int = 0
    summaries: int = 0
    summary_tokens: int = 0


COUNT_NAMES = tuple(f.name for f in dataclasses.fields(Counts))
_REQUIRED_COUNTS = tuple(
    f.name for f in dataclasses.fields(Counts) if f.default is dataclasses.MISSING
)


@dataclasses.dataclass(frozen=True)
class Episode:
    """One episode (a chain of `segments` records): its grade, counts and reward."""

    task_id: str
    done_reason: str  # submit | no_tool_call | malformed_streak | turn_limit | context_limit | ...
    tests_passed: int
    tests_total: int
    tampered: bool  # the grader caught the repo bending its results
    counts: Counts
    segments: int = 1
    reward: float | None = None  # rl/episodes/rewards.py's; None until rewarded
    reward_terms: dict | None = None

    @property
    def passes(self) -> bool:
        return all_pass(self.tests_passed, self.tests_total, self.tampered)

    @property
    def credit(self) -> float:
        return partial_credit(self.tests_passed, self.tests_total, self.tampered)

    def to_dict(self) -> dict:
        """The record form: these fields, the counts as one 'counts' dict (JSON values)."""
        return dataclasses.asdict(self)

    def flat(self) -> dict:
        """The report-sample form: these fields with the counts spelled out beside them."""
        out = self.to_dict()
        return {**out.pop("counts"), **out}

    @classmethod
    def dropped(cls, task_id: str) -> Episode:
        """An episode the driver dropped (e.g. a prompt longer than the context): scored as a
        failure, never left out, so a task's n stays the number of samples asked for."""
        return cls(task_id, "error", 0, 0, False, Counts(0, 0, 0))

    @classmethod
    def from_record(cls, rec: Mapping) -> Episode:
        """The episode of a record (any segment of its chain), an eval episode or a report
        sample: counts from its 'counts' dict, else beside the other fields (`flat`). A missing
        field, or an unknown count, is a ValueError naming the record's task and the field."""
        task = rec.get("task_id", "?")

        def need(d: Mapping, name: str):
            if name not in d:
                raise ValueError(f"episode record of task {task!r} has no field {name!r}")
            return d[name]

        nested = "counts" in rec
        counts = rec["counts"] if nested else rec
        if nested and set(counts) - set(COUNT_NAMES):
            unknown = sorted(set(counts) - set(COUNT_NAMES))
            raise ValueError(f"episode record of task {task!r}: unknown count(s) {unknown}")
        return cls(
            task_id=str(need(rec, "task_id")),
            done_reason=str(need(rec, "done_reason")),
            tests_passed=int(need(rec, "tests_passed")),
            tests_total=int(need(rec, "tests_total")),
            tampered=bool(need(rec, "tampered")),
            counts=Counts(
                **{n: int(need(counts, n)) for n in _REQUIRED_COUNTS},
                **{
                    n: int(counts[n])
                    for n in COUNT_NAMES
                    if n in counts and n not in _REQUIRED_COUNTS
                },
            ),
            segments=int(rec.get("segments", 1)),
            reward=None if rec.get("reward") is None else float(rec["reward"]),
            reward_terms=None if rec.get("reward_terms") is None else dict(rec["reward_terms"]),
        )


@dataclasses.dataclass
class EpisodeRecord:
    """An episode in progress, as the environment (rl/envs/agent/env.py) builds it turn by turn:
    the current segment's transcript, the finished segments of its chain, and the grade and
    counts of the Episode it becomes (`episode`), under Episode's and Counts' names and meanings
    (the counts are the chain's; the token classes, which need the tokenizer, are counted from
    the transcript by rl.episodes.records.episode_facts)."""

    task_id: str
    tokens: list[int]  # prompt + every emitted turn + every observation, in order (this segment)
    mask: list[int]  # 1 exactly on tokens the policy emitted
    prompt_len: int  # this segment's prompt (the rebuilt context after a summary)
    turns: int
    tool_calls: int
    tool_io_tokens: int
    malformed_calls: int
    malformed_turns: list[int]  # chain turn indices of turns with a malformed call or no <|end|>
    # [start, end) of each emitted turn of this segment in `tokens`
    turn_spans: list[tuple[int, int]]
    done_reason: str  # Episode's; "" while the episode runs
    tests_passed: int = 0
    tests_total: int = 0
    tampered: bool = False
    # Chains (rl/envs/agent/summary.py): finished segments, each {tokens, mask, prompt_len,
    # turn_spans, first_turn, malformed_turns (segment-local)}; the current segment's first chain
    # turn index.
    segments: list[dict] = dataclasses.field(default_factory=list)
    first_turn: int = 0
    summaries: int = 0
    summary_tokens: int = 0

    def current_segment(self) -> dict:
        """The segment in progress (the last one once the episode is done), as in `segments`."""
        return {
            "tokens": self.tokens,
            "mask": self.mask,
            "prompt_len": self.prompt_len,
            "turn_spans": self.turn_spans,
            "first_turn": self.first_turn,
            "malformed_turns": [
                t - self.first_turn for t in self.malformed_turns if t >= self.first_turn
            ],
        }

    def all_segments(self) -> list[dict]:
        return self.segments + [self.current_segment()]

    @property
    def all_pass(self) -> bool:
        return all_pass(self.tests_passed, self.tests_total, self.tampered)

    @property
    def generated_tokens(self) -> int:
        """Policy tokens of the whole chain (summary turns included)."""
        return sum(sum(s["mask"]) for s in self.all_segments())

    def episode(self, *, thinking_tokens: int = 0, output_tokens: int = 0) -> Episode:
        """The Episode this record is (no reward yet): its grade, its chain's counts with the
        token classes given, its number of segments."""
        counts = Counts(
            turns=self.turns,
            tool_calls=self.tool_calls,
            malformed_calls=self.malformed_calls,
            tool_io_tokens=self.tool_io_tokens,
            thinking_tokens=thinking_tokens,
            output_tokens=output_tokens,
            summaries=self.summaries,
            summary_tokens=self.summary_tokens,
        )
        return Episode(
            task_id=self.task_id,
            done_reason=self.done_reason,
            tests_passed=self.tests_passed,
            tests_total=self.tests_total,
            tampered=self.tampered,
            counts=counts,
            segments=len(self.all_segments()),
        )

    def to_dict(self) -> dict:
        """JSON-ready, with the grader's all_pass included (the reward is rl/episodes/rewards.py's,
        carried by the episode's records: rl/episodes/records.py)."""
        return dict(dataclasses.asdict(self), all_pass=self.all_pass)
