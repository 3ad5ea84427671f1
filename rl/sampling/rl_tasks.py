"""The RL tasks by name (`rl.task`): each entry says how to make pool task j, how to make its
sampler, whether its episodes are graded (a pass rate to log), and what it checks and sets in the
run config before any model loads. A new task is one entry here; no caller compares `rl.task`
with a string.

    spec = rl_task(config.rl.task)       # ConfigError naming the known tasks if unknown
    task, sampler = spec.make_task(rl, j), spec.make_sampler(rl, cfg, mesh, rules)

'pattern': toy single-turn prompts (rl/sampling/samplers.py); 'summary_toy': toy two-segment
chains joined by a summary (rl/sampling/summary_toy.py); 'coding': multi-turn CodingEnv episodes
in the sandbox (rl/sampling/coding_sampler.py).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import ml_collections
import numpy as np

from model.errors import ConfigError
from rl.episodes.rewards import pattern_reward
from rl.sampling.run_config import pool_order
from rl.sampling.samplers import PromptTask, SingleTurnSampler
from train.config_check import check_rl_coding, check_rl_summary_toy, check_rl_vocab


@dataclasses.dataclass(frozen=True)
class RLTask:
    make_task: Callable  # (rl block, j) -> pool task j
    make_sampler: Callable  # (rl block, model cfg, mesh, rules) -> a sampler with `play`
    graded: bool  # episodes carry a hidden-test grade (the trainer logs pass_rate)
    # (resolved run config) -> None: checks its block (train/config_check.py), sets what follows
    resolve: Callable


def _pattern_task(rl, j: int):
    rng = np.random.default_rng(rl.seed * 7919 + j)
    return PromptTask(f"{j:06d}", [int(x) for x in rng.integers(rl.pattern_size, 320, size=4)])


def _single_turn(rl, cfg, mesh=None, rules=None):
    return SingleTurnSampler(
        cfg,
        pattern_reward(range(rl.pattern_size)),
        group_size=rl.group_size,
        max_new_tokens=rl.max_new_tokens,
        temperature=rl.temperature,
        swap_every=rl.swap_every,
        speculative_k=rl.speculative_k,
        valid_vocab=rl.valid_vocab,
        mesh=mesh,
        rules=rules,
    )


def _nothing_to_resolve(config) -> None:
    pass


@functools.cache
def _pool_positions(seed: int, pool_size: int) -> dict[int, int]:
    """Task index -> its place in the training order (rl/sampling/run_config.py's pool_order)."""
    rl = ml_collections.ConfigDict(dict(seed=seed, pool_size=pool_size))
    return {j: p for p, j in enumerate(pool_order(rl))}


def _summary_toy_task(rl, j: int):
    from rl.sampling.summary_toy import make_fact_task

    t = rl.summary_toy
    position = _pool_positions(rl.seed, rl.pool_size)[j] if t.balanced else None
    return make_fact_task(rl.seed, j, t.facts, position)


def _summary_toy_sampler(rl, cfg, mesh=None, rules=None):
    from rl.sampling.summary_toy import SummaryToySampler

    t = rl.summary_toy
    return SummaryToySampler(
        _single_turn(rl, cfg, mesh, rules),
        facts=t.facts,
        summary_tokens=t.summary_tokens,
        answer_tokens=t.answer_tokens,
        expected_reward=t.expected_reward,
    )


def _summary_toy_resolve(config) -> None:
    """Two segments a chain; samples and loss on the toy's ids."""
    from rl.sampling.summary_toy import vocab

    rl = config.rl
    check_rl_summary_toy(rl, vocab(rl.summary_toy.facts))
    rl.valid_vocab = vocab(rl.summary_toy.facts)


@functools.cache
def coding_pool(
    seed: int, n: int, difficulties: tuple[int, ...], templates: tuple[str, ...] = ()
) -> list:
    """The RL pool: n procedural tasks from `templates` (default: every training template; the
    held-out families are the agentic eval's, and naming one is an error; the long-context
    families, e.g. long_lookup for self-summarization, only when named), seeded; the eval draws
    from its own seed stream (EVAL_SEED_BASE)."""
    from rl.envs import generate_tasks
    from rl.envs.taskgen import LONG_CONTEXT_TEMPLATES, training_templates

    allowed = training_templates() + tuple(LONG_CONTEXT_TEMPLATES)
    bad = [t for t in templates if t not in allowed]
    if bad:
        raise ValueError(
            f"rl.coding.templates: {', '.join(bad)} not a training template "
            f"(choose from {', '.join(allowed)})"
        )
    return generate_tasks(
        n, seed=seed, difficulties=difficulties, templates=tuple(templates) or training_templates()
    )


@functools.cache
def file_pool(path: str) -> list:
    """A task file's tasks (rl/envs/grading/tasks.py's JSONL: e.g. the pool `python -m
    rl.envs.repos add` mines from a user's repository), in file order."""
    from rl.envs import load_tasks

    return load_tasks(path)


def _coding_task(rl, j: int):
    if rl.coding.get("tasks"):  # a task file: its first pool_size tasks (resolve checked the size)
        return file_pool(rl.coding.tasks)[j]
    templates = tuple(rl.coding.templates or ())
    return coding_pool(rl.seed, rl.pool_size, tuple(rl.coding.difficulties), templates)[j]


def _coding_sampler(rl, cfg, mesh=None, rules=None):
    from data.tokenizers import load_tokenizer
    from rl.envs.agent.summary import summary_config
    from rl.episodes.rewards import reward_config_from_dict
    from rl.sampling.coding_sampler import CodingSampler

    c = rl.coding
    return CodingSampler(
        cfg,
        load_tokenizer(rl.coding.tokenizer or "byte"),
        reward_config_from_dict(rl.reward.to_dict()),
        group_size=rl.group_size,
        max_tokens=rl.max_tokens,
        temperature=rl.temperature,
        swap_every=rl.swap_every,
        slots=c.slots,
        max_turns=c.max_turns,
        max_turn_tokens=c.max_turn_tokens,
        obs_token_budget=c.obs_token_budget,
        max_malformed_streak=c.max_malformed_streak,
        summary=summary_config(c.summary),
        shared_prefix_turns=c.shared_prefix_turns,
        workers=c.workers,
        min_bucket=c.min_bucket,
        speculative_k=rl.speculative_k,
        mesh=mesh,
        rules=rules,
        cache_split=c.cache_split,
    )


def _coding_resolve(config) -> None:
    """Summaries, shared prefixes and the engine agree; the sandbox must isolate (fail closed:
    rl.envs.require_isolation raises unless bubblewrap works or the caller opted in), and the
    trainer's valid vocab is the tokenizer's (the engine samples from it; log-probs must match):
    data.tokenizer's, which the samplers load from rl.coding.tokenizer."""
    from data.tokenizers import load_tokenizer
    from rl.envs import require_isolation
    from rl.envs.agent.summary import summary_config

    rl = config.rl
    summary = summary_config(rl.coding.summary)
    check_rl_coding(rl, summary.max_segments if summary else 0)
    if rl.coding.get("tasks"):
        try:
            have = len(file_pool(rl.coding.tasks))
        except (OSError, ValueError) as e:
            raise ConfigError(f"rl.coding.tasks={rl.coding.tasks}: {e}") from None
        if rl.pool_size > have:
            raise ConfigError(
                f"rl.pool_size={rl.pool_size}: rl.coding.tasks={rl.coding.tasks} holds {have} "
                "tasks (set rl.pool_size to at most that)"
            )
        from rl.envs.grading.tasks import require_test_deps
        from rl.envs.isolation.dep_cache import MissingTestDeps

        try:  # a task whose declared test dependencies this machine lacks: fail before loading
            require_test_deps(file_pool(rl.coding.tasks)[: rl.pool_size])
        except MissingTestDeps as e:
            raise ConfigError(f"rl.coding.tasks={rl.coding.tasks}: {e}") from None
    require_isolation()
    spec = config.data.tokenizer
    if rl.coding.tokenizer not in ("", spec):
        raise ConfigError(
            f"rl.coding.tokenizer={rl.coding.tokenizer!r}: it is set from data.tokenizer "
            f"({spec!r}); set that instead"
        )
    try:
        vocab = load_tokenizer(spec).vocab_size
    except (OSError, ValueError, KeyError) as e:
        raise ConfigError(f"data.tokenizer={spec!r}: {e}") from None
    rl.coding.tokenizer = spec
    check_rl_vocab(rl, vocab)
    rl.valid_vocab = vocab


RL_TASKS = {
    "pattern": RLTask(_pattern_task, _single_turn, graded=False, resolve=_nothing_to_resolve),
    "summary_toy": RLTask(
        _summary_toy_task, _summary_toy_sampler, graded=False, resolve=_summary_toy_resolve
    ),
    "coding": RLTask(_coding_task, _coding_sampler, graded=True, resolve=_coding_resolve),
}


def rl_task(name: str) -> RLTask:
    """The registered task `name`; ConfigError (one line, naming the known ones) otherwise."""

    if name not in RL_TASKS:
        raise ConfigError(f"rl.task={name!r}: unknown RL task (known: {', '.join(RL_TASKS)})")
    return RL_TASKS[name]
