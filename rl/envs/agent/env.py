"""Token-level coding environment: what an RL rollout worker drives with a sampler.

    env = CodingEnv(tok)
    ids = env.reset(task)                  # bos, [system], user prompt, "<|assistant|>"  (mask 0)
    while True:
        emitted = sampler(ids)             # the policy's turn, ending at
                                             <|end|> / <|eos|> (mask 1)
        obs, done = env.step(emitted)      # tool results + next "<|assistant|>"            (mask 0)
        if done: break
        ids = ids + emitted + obs
    rec = env.record()                     # rec.tokens == ids + emitted; rec.mask; grade; counts
    episode = rl.episodes.records.episode_facts(rec, tok, reward_cfg)   # the one schema's Episode

The record (rl.episodes.schema.EpisodeRecord, the one schema's episode in progress) is exactly
the concatenation of those ids: RL trains on it without re-tokenizing.
Every tool call's result is one tool message; a turn without tool calls, a `submit`, or the turn
limit ends the episode, after which the hidden tests grade a fresh copy of the repo.

With `summary=SummaryConfig(...)` (rl/envs/agent/summary.py) an episode is a chain of segments: at
the trigger the observation ends with a summarize instruction; after the policy's summary turn,
step() returns the next segment's whole rebuilt context (not an observation to append) and sets
`env.segment_start` to the number of leading tokens it shares with the previous segment (the
engine keeps their cache). The record's tokens/mask/turn_spans/prompt_len are then the current
segment's; finished segments are in `record().segments`; counts and the grade are the chain's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from data.chat import generation_prompt
from data.tokenizers import Tokenizer
from rl.envs.agent import tools
from rl.envs.agent.summary import (
    SUMMARY_HELP,
    SummaryConfig,
    changed_files,
    continue_ids,
    instruction_ids,
    is_summary_turn,
)
from rl.envs.grading.dispatch import grade_episode
from rl.envs.grading.tasks import Grade, Task, deps_of
from rl.envs.isolation.sandbox import Limits, Sandbox
from rl.episodes.schema import EpisodeRecord

DEFAULT_SYSTEM = (
    "You are a coding agent working in a repository. Use tools to inspect and change it, "
    "then submit.\n" + tools.TOOLS_HELP
)


class CodingEnv:
    """One episode at a time on one task; not thread-safe (use one env per worker thread)."""

    def __init__(
        self,
        tok: Tokenizer,
        *,
        max_turns: int = 30,
        max_tokens: int = 32768,
        obs_token_budget: int = 2048,
        command_timeout_s: float = 10.0,
        test_timeout_s: float = 60.0,
        system_prompt: str | None = DEFAULT_SYSTEM,
        limits: Limits = Limits(),
        max_calls_per_turn: int = 16,
        max_malformed_streak: int = 0,
        summary: SummaryConfig | None = None,
    ):
        """max_malformed_streak > 0 ends the episode ("malformed_streak") after that many
        consecutive turns with a malformed call or no <|end|>: a policy that has lost the tool
        format rarely recovers (2 of 262 successes in an RL run of bench/RESULTS_LOG.md did), and
        its remaining turns are the longest and costliest to sample. 0 = never.
        summary: self-summarization (rl/envs/agent/summary.py); None = an episode ends at max_tokens
        ("context_limit") and a summary turn is a malformed one."""
        self.tok = tok
        self.max_turns, self.max_tokens = max_turns, max_tokens
        self.obs_token_budget = obs_token_budget
        self.command_timeout_s, self.test_timeout_s = command_timeout_s, test_timeout_s
        self.system_prompt, self.limits = system_prompt, limits
        self.max_calls_per_turn = max_calls_per_turn
        if max_malformed_streak < 0:
            raise ValueError(f"max_malformed_streak={max_malformed_streak} must be >= 0")
        self.max_malformed_streak = max_malformed_streak
        self.summary = summary
        self.segment_start: int | None = None  # set by step() when it started a new segment
        self._summary_requested = False
        self._prefix_len = 0  # tokens every segment's context starts with (bos .. task's <|end|>)
        self.sandbox: Sandbox | None = None
        self.task: Task | None = None
        self._record: EpisodeRecord | None = None
        self.grade: Grade | None = None
        self._extra: tuple[str, ...] = ()
        # The first `report` call's (path, line): kept here on the host, graded at the end
        # (rl/envs/grading/grade_review.py); the policy's code never sees or writes it.
        self._report: tuple[str, int] | None = None

    # -- episode

    def reset(self, task: Task) -> list[int]:
        self.close()
        self.task, self.grade, self._report = task, None, None
        self.sandbox = Sandbox.from_files(task.files, limits=self.limits, test_deps=deps_of(task))
        for i, command in enumerate(task.setup):
            result = self.sandbox.run(command, self.test_timeout_s)
            if not result.ok:
                self.close()
                raise RuntimeError(
                    f"task {task.id}: setup command {i} ({command!r}) ended "
                    f"{result.status}: {result.output[-500:]}"
                )
        self._extra = tuple(task.meta.get("tools", ()))  # search tools etc. (tools.EXTRA_SCHEMAS)
        system = self.system_prompt
        if system and self._extra:
            system += tools.extra_help(self._extra)
        if system and self.summary is not None:  # the policy may summarize by its own choice
            system += SUMMARY_HELP
        messages = [{"role": "system", "content": system}] if system else []
        prompt = generation_prompt(self.tok, messages + [{"role": "user", "content": task.prompt}])
        self._prefix_len = len(prompt) - 1  # without the closing "<|assistant|>"
        self._summary_requested, self.segment_start = False, None
        self._record = EpisodeRecord(
            task_id=task.id,
            tokens=list(prompt),
            mask=[0] * len(prompt),
            prompt_len=len(prompt),
            turns=0,
            tool_calls=0,
            tool_io_tokens=0,
            malformed_calls=0,
            malformed_turns=[],
            turn_spans=[],
            done_reason="",
        )
        return list(prompt)

    def step(self, emitted_ids: Sequence[int]) -> tuple[list[int], bool]:
        rec = self._record
        if rec is None or rec.done_reason:
            raise RuntimeError("step() before reset() or after the episode ended")
        emitted = [int(t) for t in emitted_ids]
        bad = [t for t in emitted if not 0 <= t < self.tok.vocab_size]
        if bad:  # a sampler bug, not a model mistake: refuse rather than record garbage
            raise ValueError(
                f"emitted token id {bad[0]} is outside the vocab (size {self.tok.vocab_size})"
            )
        self.segment_start = None
        rec.turn_spans.append((len(rec.tokens), len(rec.tokens) + len(emitted)))
        rec.tokens += emitted
        rec.mask += [1] * len(emitted)
        turn = rec.turns
        rec.turns += 1
        if self.summary is not None and is_summary_turn(self.tok, emitted):
            return self._summary_turn(emitted)
        if self._summary_requested:  # told to summarize, did something else: a broken turn
            rec.malformed_calls += 1
            rec.malformed_turns.append(turn)
            self._finish("no_summary")
            return [], True
        parsed = tools.parse_turn(self.tok, emitted, self._extra)
        malformed_before = rec.malformed_calls
        observations, submitted = self._run_items(parsed)
        if rec.malformed_calls > malformed_before or not parsed.terminated:
            rec.malformed_turns.append(turn)
        reason = self._done_reason(parsed, submitted)
        if reason:
            self._finish(reason)
            return [], True
        obs = self._maybe_request_summary(self._observation_ids(observations, parsed.terminated))
        rec.tokens += obs
        rec.mask += [0] * len(obs)
        if len(rec.tokens) >= self.max_tokens:
            self._finish("context_limit")
            return obs, True
        return obs, False

    def record(self) -> EpisodeRecord:
        if self._record is None:
            raise RuntimeError("record() before reset()")
        return self._record

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None

    # -- summaries (rl/envs/agent/summary.py)

    def _segments_left(self) -> bool:
        return (
            self.summary is not None and len(self._record.segments) + 1 < self.summary.max_segments
        )

    def _maybe_request_summary(self, obs: list[int]) -> list[int]:
        """At the trigger, the observation ends with the summarize instruction (before its
        closing "<|assistant|>"); not on the chain's last segment."""
        trigger = self.summary.trigger(self.max_tokens) if self.summary else 0
        if not self._segments_left() or len(self._record.tokens) + len(obs) < trigger:
            return obs
        self._summary_requested = True
        return obs[:-1] + instruction_ids(self.tok) + obs[-1:]

    def _summary_turn(self, emitted: list[int]) -> tuple[list[int], bool]:
        """A well-formed summary turn: close this segment and return the next one's context."""
        rec, tok = self._record, self.tok
        if not self._segments_left():  # a voluntary summary on the last segment: refused
            if rec.turns >= self.max_turns:
                self._finish("turn_limit")
                return [], True
            why = f"error: no segments left (max {self.summary.max_segments}); finish here"
            ids = self._observation_ids([why], terminated=True)
            rec.tokens += ids
            rec.mask += [0] * len(ids)
            return ids, False
        if rec.turns >= self.max_turns:  # no turn left to use the summary in
            self._finish("turn_limit")
            return [], True
        rec.summaries += 1  # == len(rec.segments) after the append below
        rec.summary_tokens += len(emitted)
        keep = self._prefix_len
        note = continue_ids(
            tok,
            len(rec.segments) + 1,
            self.summary.max_segments,
            changed_files(self.sandbox, self.task.files),
        )
        context = rec.tokens[:keep] + [tok.special_id("assistant")] + emitted + note
        context.append(tok.special_id("assistant"))
        rec.segments.append(rec.current_segment())
        rec.tokens, rec.mask = context, [0] * len(context)
        rec.prompt_len, rec.turn_spans, rec.first_turn = len(context), [], rec.turns
        self._summary_requested, self.segment_start = False, keep
        return list(context), False

    # -- internals

    def _run_items(self, parsed: tools.ParsedTurn) -> tuple[list[str], bool]:
        rec, observations, submitted = self._record, [], False
        rec.tool_io_tokens += sum(item.n_tokens for item in parsed.items)
        for item in parsed.items:
            if len(observations) >= self.max_calls_per_turn:
                rec.malformed_calls += 1
                observations.append(
                    tools.malformed_observation(
                        f"more than {self.max_calls_per_turn} tool calls in one turn; the rest "
                        "were not run"
                    )
                )
                break
            if isinstance(item, tools.Malformed):
                rec.malformed_calls += 1
                observations.append(tools.malformed_observation(item.detail))
                continue
            rec.tool_calls += 1
            if item.name == "report":
                observations.append(self._take_report(item.arguments))
                continue
            out = tools.execute(
                self.sandbox,
                item,
                test_command=self.task.test_command,
                command_timeout_s=self.command_timeout_s,
                test_timeout_s=self.test_timeout_s,
            )
            observations.append(out.text)
            submitted = submitted or out.submitted
            if submitted:
                break  # calls after submit are not executed
        return observations, submitted

    def _take_report(self, arguments: dict) -> str:
        """Records the first report; later ones change nothing. Says nothing about correctness."""
        if self._report is not None:
            path, line = self._report
            return f"already reported {path}:{line}; only the first report counts"
        self._report = (str(arguments["path"]), int(arguments["line"]))
        return f"reported {self._report[0]}:{self._report[1]}"

    def _done_reason(self, parsed: tools.ParsedTurn, submitted: bool) -> str:
        if submitted:
            return "submit"
        if not parsed.items:
            return "no_tool_call"
        rec, n = self._record, self.max_malformed_streak
        if n and rec.malformed_turns[-n:] == list(range(rec.turns - n, rec.turns)):
            return "malformed_streak"
        if rec.turns >= self.max_turns:
            return "turn_limit"
        return ""

    def _observation_ids(self, observations: list[str], terminated: bool) -> list[int]:
        tok = self.tok
        # A turn cut off before <|end|> gets one closing it (env-inserted, mask 0) so the context
        # stays well-formed; the turn is already flagged.
        ids = [] if terminated else [tok.special_id("end")]
        for text in observations:
            body = tools.truncate_to_budget(tok, text, self.obs_token_budget)
            ids += (
                [tok.special_id("tool"), tok.special_id("tool_result")]
                + body
                + [tok.special_id("/tool_result"), tok.special_id("end")]
            )
        ids.append(tok.special_id("assistant"))
        self._record.tool_io_tokens += len(ids) - 1 - (0 if terminated else 1)
        return ids

    def _finish(self, reason: str) -> None:
        rec = self._record
        rec.done_reason = reason
        self.grade = grade_episode(
            self.task, self.sandbox.root, self._report, self.test_timeout_s, self.limits
        )
        rec.tests_passed, rec.tests_total = self.grade.passed, self.grade.total
        rec.tampered = self.grade.tampered
        self.close()


def run_episode(
    env: CodingEnv, task: Task, policy: Callable[[list[int]], list[int]]
) -> EpisodeRecord:
    """Drives one episode: `policy(context_ids) -> emitted_ids` is a sampler (or a scripted
    agent)."""
    context = env.reset(task)
    try:
        while True:
            emitted = list(policy(context))
            obs, done = env.step(emitted)
            # after a summary, obs is the next segment's whole context
            context = obs if env.segment_start is not None else context + emitted + obs
            if done:
                return env.record()
    finally:
        env.close()
