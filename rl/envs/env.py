"""Token-level coding environment: what an RL rollout worker drives with a sampler.

    env = CodingEnv(tok)
    ids = env.reset(task)                  # bos, [system], user prompt, "<|assistant|>"  (mask 0)
    while True:
        emitted = sampler(ids)             # the policy's turn, ending at <|end|> / <|eos|>  (mask 1)
        obs, done = env.step(emitted)      # tool results + next "<|assistant|>"            (mask 0)
        if done: break
        ids = ids + emitted + obs
    rec = env.record()                     # rec.tokens == ids + emitted; rec.mask; reward; counts

The record is exactly the concatenation of those ids: RL trains on it without re-tokenizing.
Every tool call's result is one tool message; a turn without tool calls, a `submit`, or the turn
limit ends the episode, after which the hidden tests grade a fresh copy of the repo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from data.chat import generation_prompt
from data.tokenizers import Tokenizer
from rl.envs import tools
from rl.envs.sandbox import Limits, Sandbox
from rl.envs.tasks import Grade, Task, episode_all_pass, episode_score, grade_repo

DEFAULT_SYSTEM = (
    "You are a coding agent working in a repository. Use tools to inspect and change it, "
    "then submit.\n" + tools.TOOLS_HELP
)


@dataclasses.dataclass
class EpisodeRecord:
    task_id: str
    tokens: list[int]  # prompt + every emitted turn + every observation, in order
    mask: list[int]  # 1 exactly on tokens the policy emitted
    prompt_len: int
    turns: int
    tool_calls: int  # well-formed calls executed
    tool_io_tokens: int  # tokens of emitted calls + tokens of tool observations
    malformed_calls: int
    malformed_turns: list[int]  # indices of turns with a malformed call or no <|end|>
    turn_spans: list[tuple[int, int]]  # [start, end) of each emitted turn in `tokens`
    # "submit" | "no_tool_call" | "malformed_streak" | "turn_limit" | "context_limit"
    done_reason: str
    tests_passed: int = 0
    tests_total: int = 0
    tampered: bool = False  # the grader caught the repo bending its results (Grade.tampered)

    @property
    def reward(self) -> float:
        return episode_score(self.tests_passed, self.tests_total, self.tampered)

    @property
    def all_pass(self) -> bool:
        return episode_all_pass(self.tests_passed, self.tests_total, self.tampered)

    @property
    def generated_tokens(self) -> int:
        return sum(self.mask)

    def to_dict(self) -> dict:
        """JSON-ready, with the derived reward fields included."""
        return dict(dataclasses.asdict(self), reward=self.reward, all_pass=self.all_pass)


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
    ):
        """max_malformed_streak > 0 ends the episode ("malformed_streak") after that many
        consecutive turns with a malformed call or no <|end|>: a policy that has lost the tool
        format rarely recovers (2 of 262 successes in an RL run of bench/RESULTS.md did), and its
        remaining turns are the longest and costliest to sample. 0 = never."""
        self.tok = tok
        self.max_turns, self.max_tokens = max_turns, max_tokens
        self.obs_token_budget = obs_token_budget
        self.command_timeout_s, self.test_timeout_s = command_timeout_s, test_timeout_s
        self.system_prompt, self.limits = system_prompt, limits
        self.max_calls_per_turn = max_calls_per_turn
        if max_malformed_streak < 0:
            raise ValueError(f"max_malformed_streak={max_malformed_streak} must be >= 0")
        self.max_malformed_streak = max_malformed_streak
        self.sandbox: Sandbox | None = None
        self.task: Task | None = None
        self._record: EpisodeRecord | None = None
        self.grade: Grade | None = None

    # -- episode

    def reset(self, task: Task) -> list[int]:
        self.close()
        self.task, self.grade = task, None
        self.sandbox = Sandbox.from_files(task.files, limits=self.limits)
        for i, command in enumerate(task.setup):
            result = self.sandbox.run(command, self.test_timeout_s)
            if not result.ok:
                self.close()
                raise RuntimeError(
                    f"task {task.id}: setup command {i} ({command!r}) ended "
                    f"{result.status}: {result.output[-500:]}"
                )
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        prompt = generation_prompt(self.tok, messages + [{"role": "user", "content": task.prompt}])
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
        rec.turn_spans.append((len(rec.tokens), len(rec.tokens) + len(emitted)))
        rec.tokens += emitted
        rec.mask += [1] * len(emitted)
        turn = rec.turns
        rec.turns += 1
        parsed = tools.parse_turn(self.tok, emitted)
        malformed_before = rec.malformed_calls
        observations, submitted = self._run_items(parsed)
        if rec.malformed_calls > malformed_before or not parsed.terminated:
            rec.malformed_turns.append(turn)
        reason = self._done_reason(parsed, submitted)
        if reason:
            self._finish(reason)
            return [], True
        obs = self._observation_ids(observations, parsed.terminated)
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

    # -- internals

    def _run_items(self, parsed: tools.ParsedTurn) -> tuple[list[str], bool]:
        rec, observations, submitted = self._record, [], False
        rec.tool_io_tokens += sum(item.n_tokens for item in parsed.items)
        for item in parsed.items:
            if len(observations) >= self.max_calls_per_turn:
                rec.malformed_calls += 1
                observations.append(
                    tools.malformed_observation(
                        f"more than {self.max_calls_per_turn} tool calls in one turn; the rest were not run"
                    )
                )
                break
            if isinstance(item, tools.Malformed):
                rec.malformed_calls += 1
                observations.append(tools.malformed_observation(item.detail))
                continue
            rec.tool_calls += 1
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
        self.grade = grade_repo(self.task, self.sandbox.root, self.test_timeout_s, self.limits)
        rec.tests_passed, rec.tests_total = self.grade.passed, self.grade.total
        rec.tampered = self.grade.tampered
        self.close()


def run_episode(
    env: CodingEnv, task: Task, policy: Callable[[list[int]], list[int]]
) -> EpisodeRecord:
    """Drives one episode: `policy(context_ids) -> emitted_ids` is a sampler (or a scripted agent)."""
    context = env.reset(task)
    try:
        while True:
            emitted = list(policy(context))
            obs, done = env.step(emitted)
            context = context + emitted + obs
            if done:
                return env.record()
    finally:
        env.close()
