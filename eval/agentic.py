"""Agentic suite in the style of CursorBench: multi-turn episodes in `rl.envs.CodingEnv` on terse
tasks, K samples per task; pass rate, partial credit, completion tokens, tool calls, turns and the
malformed-call rate per family and best-of-K (all by rl.episodes.episode_metrics.episode_metrics,
the one definition the RL loop and the benchmarks use too); score against completion tokens. With
self-summarization (env_kwargs summary=SummaryConfig, rl/envs/agent/summary.py) an episode's
summaries and segments are reported too, and `compare_summaries` plays the suite with and without
summaries at the same context budget (per family pass rates side by side).

A *policy* here is anything with `play(jobs) -> list[dict]` (episodes: `played_episode`), where a
job is (task, sample index): `ScriptedPolicy` (known behaviour, for tests), `ModelPolicy` (the model
on the rollout driver, rl.sampling.rollout.play_episodes). Episodes are graded by the environment's
hidden tests only; an episode whose grader caught tampering counts as failed (no pass, no partial
credit).
Each episode also carries the reward RL would train on (rl/episodes/rewards.py under the policy's
RewardConfig, default RewardConfig(): the record's own reward, rl/episodes/records.py), reported as
the mean `reward`.

Task sets: procedural families from rl.envs.taskgen drawn from a seed stream that training never
uses (EVAL_SEED_BASE + seed), families in HELD_OUT_TEMPLATES that an RL task pool should leave out
(`training_templates()`), and any bring-your-own task JSONL (rl.envs.grading.tasks format).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence

# HELD_OUT_TEMPLATES (never in an RL pool) live beside the templates, so rl/ need not import eval/
from rl.envs.taskgen import HELD_OUT_TEMPLATES, training_templates  # noqa: F401
from rl.episodes.episode_metrics import episode_metrics
from rl.episodes.rewards import RewardConfig
from rl.episodes.schema import Episode

EVAL_SEED_BASE = 1_000_003  # eval task seeds: generate_tasks(n, seed=EVAL_SEED_BASE + seed)


def family(task) -> str:
    return task.meta.get("template", task.kind) if task.meta else task.kind


def transcript_digest(tokens) -> str:
    """16 hex digits of sha256 over the token ids: equal reports mean equal transcripts."""
    return hashlib.sha256(",".join(map(str, tokens)).encode()).hexdigest()[:16]


def played_episode(task, sample: int, episode, completion_tokens: int, tokens) -> dict:
    """An episode as the suite keeps it: the one schema's record form (rl.episodes.schema.Episode:
    grade, counts, reward; `episode` is one, or a record to read it from, e.g. a chain's last
    segment) with the suite's bookkeeping: family, sample, completion_tokens, transcript
    (`tokens`: the whole chain's ids)."""
    if not isinstance(episode, Episode):
        episode = Episode.from_record(episode)
    return dict(
        episode.to_dict(),
        family=family(task),
        sample=sample,
        completion_tokens=completion_tokens,
        transcript=transcript_digest(tokens),
    )


def dropped(task, sample: int) -> dict:
    """An episode the driver dropped (rl.episodes.schema.Episode.dropped: a failure, not a gap),
    with the suite's bookkeeping; its reward counts as 0."""
    episode = dataclasses.replace(Episode.dropped(task.id), reward=0.0)
    return dict(played_episode(task, sample, episode, 0, []), transcript="")


# ----------------------------------------------------------------------------- task sets


def build_tasks(
    n_tasks: int,
    seed: int,
    templates: Sequence[str] = (),
    difficulties: Sequence[int] = (1, 2, 3),
    tasks_jsonl: str = "",
    verify: bool = False,
) -> list:
    """Generated held-out tasks (+ the JSONL's tasks). With `verify`, only tasks that pass the
    rl.envs gate (reference solution passes, original repo fails) are kept."""
    from rl.envs import generate_tasks, load_tasks, verify_tasks
    from rl.envs.grading.tasks import require_test_deps

    tasks = []
    if n_tasks > 0:
        tasks = generate_tasks(
            n_tasks,
            seed=EVAL_SEED_BASE + seed,
            difficulties=tuple(difficulties),
            templates=tuple(templates) or None,
        )
    if tasks_jsonl:
        tasks += load_tasks(tasks_jsonl)
        require_test_deps(tasks)  # declared test dependencies cached here, or one line
    if verify:
        tasks, _ = verify_tasks(tasks)
    if not tasks:
        raise ValueError("agentic: no tasks (set agentic.n_tasks > 0 or agentic.tasks_jsonl)")
    return tasks


# ----------------------------------------------------------------------------- policies


def _next_turn(turns: list[list[int]], context: list[int]) -> list[int]:
    del context  # a script does not read the context
    return turns.pop(0)


class ScriptedPolicy:
    """Plays a known script through CodingEnv: when `solves(task_index, sample)` it writes the
    reference solution and submits, otherwise it submits the repo unchanged. Its pass rate is
    known in advance, which is what validates the suite's bookkeeping. `reads=True` solves like an
    agent instead (rl.envs.agent.scripted.TracePolicy: reads the files the fix needs first,
    summarizing when the environment asks): its pass rate then depends on the context budget."""

    def __init__(
        self,
        tok,
        tasks: Sequence,
        solves: Callable[[int, int], bool],
        reads: bool = False,
        reward: RewardConfig = RewardConfig(),
        **env_kwargs,
    ):
        self.tok, self.solves, self.reads, self.env_kwargs = tok, solves, reads, env_kwargs
        self.reward = reward
        self.index = {t.id: i for i, t in enumerate(tasks)}

    def _turns(self, task, solve: bool) -> list[list[int]]:
        from data.chat import tool_call_text

        calls = []
        review = (task.meta or {}).get("review") if solve else None
        if review:  # a code review task: its solution is the report, not an edit
            calls.append(("report", {"path": review["path"], "line": review["lines"][0]}))
        for path, content in (task.solution if solve and not review else {}).items():
            calls.append(
                ("run", {"command": f"rm -f {path}"})
                if content is None
                else ("write_file", {"path": path, "content": content})
            )
        calls.append(("submit", {}))
        end = self.tok.special_id("end")
        return [self.tok.encode(tool_call_text(n, a), allow_special=True) + [end] for n, a in calls]

    def play(self, jobs: Sequence[tuple]) -> list[dict]:
        from rl.envs import CodingEnv, run_episode
        from rl.episodes.records import episode_facts

        out = []
        for task, sample in jobs:
            solve = self.solves(self.index[task.id], sample)
            if solve and self.reads:
                policy = _reading_oracle(self.tok, task, sample)
            else:
                policy = functools.partial(_next_turn, self._turns(task, solve))
            env = CodingEnv(self.tok, **self.env_kwargs)
            rec = run_episode(env, task, policy)
            chain = [t for s in rec.all_segments() for t in s["tokens"]]
            facts = episode_facts(rec, self.tok, self.reward)
            out.append(played_episode(task, sample, facts, rec.generated_tokens, chain))
        return out


def _reading_oracle(tok, task, sample: int):
    import random

    from rl.envs.agent.scripted import SummarizingPolicy, TracePolicy

    return SummarizingPolicy(tok, TracePolicy(tok, task, random.Random(sample)), task)


class ModelPolicy:
    """The model plays on the rollout driver (rl.sampling.rollout.play_episodes on a model.engine
    RolloutEngine): each episode keeps its latent cache across turns (an observation is prefilled
    alone, never the whole transcript), the engine's compiled programs are shared by every call,
    and ids past the tokenizer's vocab (the model vocab is padded) are never sampled.

    `play(jobs)` takes whole groups: consecutive jobs of one task, the same number K of each, played
    with group_size=K. Reproducible: one engine per policy, seeded by `seed`, with ONE slot:
    episodes run one after another and the engine's key stream never depends on when a sandbox call
    returns (with several slots, the order in which episodes resume after their tool calls is a
    race).

    `scripted(task) -> f(context) -> ids` (rl.sampling.rollout.play_episodes) teacher-forces the
    turns f returns; an empty list lets the model sample that turn (a fixed opening, for harness
    tests)."""

    def __init__(
        self,
        cfg,
        params,
        tok,
        *,
        max_turn_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        scripted: Callable | None = None,
        reward: RewardConfig = RewardConfig(),
        **env_kwargs,
    ):
        self.cfg, self.params, self.tok, self.reward = cfg, params, tok, reward
        self.max_turn_tokens, self.temperature, self.top_p = max_turn_tokens, temperature, top_p
        self.seed, self.scripted = seed, scripted
        # The episode's context must fit the engine's cache: the env ends it at max_tokens.
        self.cache_len = min(
            env_kwargs.get("max_tokens", cfg.max_position_embeddings), cfg.max_position_embeddings
        )
        self.env_kwargs = env_kwargs
        self.errors: list[str] = []  # episodes the driver dropped (scored as failed)
        self.engine = None  # made on the first play; its key stream runs on across calls

    def engine_config(self):
        from model.engine_config import EngineConfig

        return EngineConfig(
            slots=1,  # one slot: reproducible (class docstring)
            cache_len=self.cache_len,
            min_bucket=16,
            temperature=self.temperature,
            seed=self.seed,
            speculative_k=0,
            top_p=self.top_p,
        )

    def _engine(self):
        from model.engine_config import build_engine

        if self.engine is None:
            ec = self.engine_config()
            self.engine = build_engine(self.cfg, self.params, ec, valid_vocab=self.tok.vocab_size)
        return self.engine

    def play(self, jobs: Sequence[tuple]) -> list[dict]:
        from rl.episodes.records import policy_tokens as policy_tokens_of
        from rl.sampling.rollout import play_episodes

        tasks, k = _groups(jobs)
        out = play_episodes(
            self._engine(),
            self.tok,
            tasks,
            group_size=k,
            max_turn_tokens=self.max_turn_tokens,
            workers=1,
            env_kwargs=self.env_kwargs,
            scripted=self.scripted,
            log_every_s=0,
            reward=self.reward,
        )
        for msg in out.stats["error_messages"]:  # e.g. a prompt longer than the context
            print(f"agentic: episode dropped (scored as failed): {msg}")
        self.errors += out.stats["error_messages"]
        episodes: list[dict | None] = [None] * len(jobs)
        chains = defaultdict(list)  # a summarizing episode is several records, one per segment
        for rec in out.records:
            chains[rec["group"] * k + rec["sample"]].append(rec)
        for i, recs in chains.items():
            recs.sort(key=lambda r: r["segment"])
            task, sample = jobs[i]
            tokens = [int(t) for r in recs for t in r["tokens"]]
            policy_tokens = sum(policy_tokens_of(r) for r in recs)
            episodes[i] = played_episode(task, sample, recs[-1], policy_tokens, tokens)
        for i, (task, sample) in enumerate(jobs):  # dropped by the driver: a failure, not a gap
            if episodes[i] is None:
                episodes[i] = dropped(task, sample)
        return episodes


def _groups(jobs: Sequence[tuple]) -> tuple[list, int]:
    """jobs = K consecutive (task, 0..K-1) per task -> (tasks, K)."""
    tasks, samples = [], []
    for task, sample in jobs:
        if not tasks or tasks[-1].id != task.id:
            tasks.append(task)
            samples.append([])
        samples[-1].append(sample)
    k = len(samples[0]) if samples else 0
    if not jobs or any(s != list(range(k)) for s in samples):
        raise ValueError("ModelPolicy.play: jobs must be K consecutive (task, 0..K-1) per task")
    return tasks, k


# ----------------------------------------------------------------------------- the suite


def run_suite(policy, tasks: Sequence, n_samples: int, progress=None, chunk: int = 8):
    """Plays n_samples episodes per task: jobs in task-major order, whole tasks at a time (about
    `chunk` jobs), so a policy gets each task's samples together (ModelPolicy: one group)."""
    per_call = max(1, chunk // n_samples)
    episodes = []
    for start in range(0, len(tasks), per_call):
        jobs = [(t, s) for t in tasks[start : start + per_call] for s in range(n_samples)]
        episodes += policy.play(jobs)
        if progress is not None:
            progress.update(len(jobs))
    return episodes


def summarize(episodes: Sequence[dict], ks: Sequence[int]) -> tuple[dict, list[dict]]:
    """(metrics, items): rl.episodes.episode_metrics.episode_metrics overall (pass rate,
    best_of_<K>, partial credit, tokens, calls, turns, malformed rate, summaries) and per family as
    '<family>/<metric>', and one item per task with its samples."""
    if not episodes:
        raise ValueError("agentic: no episodes to summarize")
    metrics = episode_metrics(episodes, ks)
    by_family: dict[str, list[dict]] = defaultdict(list)
    for e in episodes:
        by_family[e["family"]].append(e)
    for fam in sorted(by_family):
        for k, v in episode_metrics(by_family[fam], ks).items():
            metrics[f"{fam}/{k}"] = v
    per_task: dict[str, list[dict]] = defaultdict(list)
    for e in episodes:
        per_task[e["task_id"]].append(e)
    items = [
        dict(
            id=tid,
            family=eps[0]["family"],
            held_out_family=eps[0]["family"] in HELD_OUT_TEMPLATES,
            solved=sum(Episode.from_record(e).passes for e in eps),
            n=len(eps),
            samples=[_sample(e) for e in sorted(eps, key=lambda e: e["sample"])],
        )
        for tid, eps in per_task.items()
    ]
    return metrics, items


def _sample(episode: dict) -> dict:
    """One sample of a report item: the episode flat (rl.episodes.schema.Episode.flat: grade,
    counts, reward), the suite's bookkeeping, whether it passed and its partial credit. A sample
    reads back as the same Episode (Episode.from_record)."""
    ep = Episode.from_record(episode)
    keep = {k: episode[k] for k in ("family", "sample", "completion_tokens", "transcript")}
    return dict(ep.flat(), **keep, solved=ep.passes, partial=ep.credit)


def tokens_curve(metrics: dict, ks: Sequence[int]) -> list[tuple[float, float, int]]:
    """(completion tokens spent per task, best-of-K score, K) for each reported K: K samples cost
    K x the mean completion tokens of one episode."""
    return [
        (k * metrics["completion_tokens"], metrics[f"best_of_{k}"], k)
        for k in ks
        if f"best_of_{k}" in metrics
    ]


def compare_summaries(
    make_policy: Callable, summary, tasks: Sequence, n_samples: int, ks
) -> tuple[dict, list[dict]]:
    """The suite twice at one context budget: `make_policy(s)` -> a policy whose episodes use
    rl.envs.agent.summary.SummaryConfig s (None: no summaries). -> (metrics, items) of the run with
    `summary`, the metrics gaining, overall and per family, 'pass_rate_without_summary' and
    'pass_rate_with_summary' side by side ('summaries' and 'segments' are per episode)."""
    m_with, items = summarize(run_suite(make_policy(summary), tasks, n_samples), ks)
    without = make_policy(None)
    m_without, _ = summarize(run_suite(without, tasks, n_samples), ks)
    out = dict(m_with)
    for key, value in m_without.items():
        if key == "pass_rate" or key.endswith("/pass_rate"):
            out[key + "_without_summary"] = value
            out[key + "_with_summary"] = m_with[key]
    return out, items
