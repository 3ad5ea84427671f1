"""Rollout driver: many CodingEnv episodes at once on one RolloutEngine (model/engine/).

    from model.engine import RolloutEngine
    from rl.sampling.rollout import play_episodes
    eng = RolloutEngine(cfg, params, slots=8, cache_len=2048, temperature=1.0,
                        valid_vocab=tok.vocab_size)
    out = play_episodes(eng, tok, tasks, group_size=4, reward=RewardConfig())  # G = 4 per task
    out.records[0]["tokens"], ["reward"], ["reward_terms"]   # records: rl/episodes/records.py
    out.summary()                                 # reward/*, pass rate, tokens/s, wait shares

One thread drives the engine; sandbox work (env.reset, env.step: tool calls, grading) runs in worker
threads, so while some episodes wait on their sandbox the engine decodes the others. At most
`engine.spec.slots` episodes are live; each holds its slot (and latent cache) across turns, and an
observation is prefilled into that cache alone (no re-prefill of the transcript).

Self-summarization (env_kwargs summary=SummaryConfig, rl/envs/agent/summary.py): after a summary
turn the env returns the next segment's rebuilt context; the driver keeps the finished segment's
arrays, rewinds the episode's slot to the prefix the two contexts share (system + task prompt:
its latent cache is kept, not prefilled again) and prefills only the rest. An episode then yields
one record per segment, all with the chain's counts, grade and reward (`segment`, `segments`).
Stats: `segments_started` and `prefix_reused_tokens` (prefill tokens the rewind saved);
`reuse_prefix=False` prefills each segment's context whole instead (to measure the saving).

Best-of-K from a shared mid-episode prefix (`prefix_turns=N`, group_size=K >= 2): a group's
first episode plays its first N turns alone; then its sandbox and token state are snapshotted
(rl/envs/agent/snapshot.py: files + the env's episode state) and K-1 more episodes are branched from
it, each in its own sandbox, so the prefix is decoded and its tool calls run once instead of K
times.
Branch 0 goes on in the prefix's own slot (its latent cache); each other branch is a new request
whose prompt is the whole shared transcript (one prefill, no decode) and whose own seed gives it
its own sampling stream; a scripted policy is copied at the branch point. Every branch's record is
the whole episode (prefix included), equal to a fresh episode replayed to the same state, and
carries `shared_prefix` = the number of leading tokens the group shares. Loss: rl/learning/batch.py
keeps those tokens out of the loss. Their policy-gradient terms would be the same in all K records
(same tokens, same context, same log-probs), so they would only add (sum_i A_i) x the same term,
which is 0 for group-relative advantages, or noise (a malformed-turn override, a dropped episode,
a k2 KL term counted K times); the group carries no signal about the prefix, whose turns learn
only from unbranched groups. A prefix that ends before N turns is sample 0 of its group and the
other K-1 play fresh. Stats: `branched_groups`, `shared_prefix_tokens` (policy tokens not decoded
again) and `shared_tool_calls` (tool calls not run again). Not with summaries (a snapshot holds
one segment) and only on CodingEnv.

`scripted=lambda task: OraclePolicy(tok, task)` plays scripted turns through the same engine by
teacher forcing (records get the model's log-probs and routing for those tokens): used by tests and
benchmarks. `env_factory` replaces CodingEnv (a stand-in env for loop-mechanics tests).

Rewards: each record carries rl/episodes/rewards.py's episode_reward of its grade and counts under
the `reward` RewardConfig (default RewardConfig(): all-pass outcome, malformed penalty 0.5, no
length terms; the RL sampler passes the run's `rl.reward`), and summary() reports it with the same
`reward/*` and `pass_rate` scalars as the RL trainer's logs (rl.episodes.records.reward_metrics).
Records: rl/episodes/records.py.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import copy
import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from data.tokenizers import Tokenizer
from rl.episodes import records as rr
from rl.episodes import timeline
from rl.episodes.episode_metrics import episode_metrics, passes
from rl.episodes.rewards import RewardConfig


@dataclasses.dataclass
class Rollouts:
    records: list[dict]  # rl/episodes/records.py
    stats: dict  # wall_s, decode_s, prefill_s, wait_s, sandbox_s, errors, programs, ...

    def summary(self) -> dict:
        return summarize(self.records, self.stats)


@dataclasses.dataclass
class _Episode:
    rid: tuple  # (group, sample)
    task: object
    env: object
    policy: Callable | None
    context: list[int] = dataclasses.field(default_factory=list)
    pieces: list[list[int]] = dataclasses.field(default_factory=list)  # prompt, turn, obs, turn, ..
    turns: list = dataclasses.field(default_factory=list)  # engine Turns (this segment's)
    done_segments: list[dict] = dataclasses.field(default_factory=list)  # _segment_arrays of each
    shared: int = 0  # a branched group's shared prefix: tokens [0, shared) (0: none)


def _timed(stats: dict, fn, *args):
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        stats["sandbox_s"] += time.perf_counter() - t0  # float += under the GIL: fine for stats


@dataclasses.dataclass(frozen=True)
class _Rules:
    """What play_episodes was asked for, as its steps need it."""

    tok: Tokenizer
    max_turn_tokens: int
    cache: int  # the engine's cache_len: no context outgrows it
    stops: tuple[int, ...]  # a turn ends at <|end|> or EOS
    forced: bool  # scripted turns (teacher forcing): records say policy 'forced'
    reward: RewardConfig
    reuse_prefix: bool
    on_record: Callable[[dict], None] | None
    prefix_turns: int  # > 0: a group's episodes branch from its first episode after this many turns
    group_size: int
    env_factory: Callable  # the branches' environments


@dataclasses.dataclass
class _Run:
    """One play_episodes call's moving parts: the engine, the sandbox workers, live episodes, the
    sandbox calls in flight (future -> (episode, 'reset' | 'step')) and what came out."""

    engine: object
    pool: cf.ThreadPoolExecutor
    todo: collections.deque  # (group, sample, task) not started yet
    live: dict = dataclasses.field(default_factory=dict)  # rid -> _Episode
    inflight: dict = dataclasses.field(default_factory=dict)
    records: list[dict] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    stats: dict = dataclasses.field(
        default_factory=lambda: dict(
            sandbox_s=0.0,
            wait_s=0.0,
            errors=0,
            segments_started=0,
            prefix_reused_tokens=0,
            branched_groups=0,
            shared_prefix_tokens=0,
            shared_tool_calls=0,
        )
    )


def play_episodes(
    engine,
    tok: Tokenizer,
    tasks: Sequence,
    *,
    group_size: int = 1,
    max_turn_tokens: int = 512,
    workers: int = 4,
    env_kwargs: dict | None = None,
    env_factory: Callable | None = None,
    scripted: Callable | None = None,
    max_iterations: int = 64,
    on_record: Callable[[dict], None] | None = None,
    before_step: Callable[[], None] | None = None,
    log_every_s: float = 30.0,
    log: Callable[[str], None] = print,
    reuse_prefix: bool = True,
    reward: RewardConfig = RewardConfig(),
    prefix_turns: int = 0,
) -> Rollouts:
    """Plays group_size episodes of every task; returns their records (in completion order),
    each rewarded by rl.episodes.rewards.episode_reward under `reward`.

    `before_step()` runs on the driver thread before each engine.step (every `max_iterations`
    decode iterations): the RL sampler swaps newer weights in there (engine.set_params).
    `prefix_turns` N > 0: best-of-K from a shared N-turn prefix per group (module docstring)."""
    if group_size < 1 or max_turn_tokens < 1 or workers < 1 or prefix_turns < 0:
        raise ValueError(
            f"play_episodes: group_size={group_size}, max_turn_tokens={max_turn_tokens}, "
            f"workers={workers} must all be >= 1 and prefix_turns={prefix_turns} >= 0"
        )
    if prefix_turns and (env_kwargs or {}).get("summary") is not None:
        raise ValueError("play_episodes: prefix_turns does not work with summaries")
    cache = engine.spec.cache_len
    env_factory = env_factory or _coding_env_factory(tok, env_kwargs, cache)
    stops = (tok.special_id("end"), tok.eos_id)
    branching = prefix_turns > 0 and group_size > 1
    rules = _Rules(
        tok, max_turn_tokens, cache, stops, scripted is not None, reward, reuse_prefix, on_record,
        prefix_turns if branching else 0, group_size, env_factory,
    )  # fmt: skip
    first = 1 if branching else group_size  # a branched group starts with its prefix alone
    todo = collections.deque((g, i, t) for g, t in enumerate(tasks) for i in range(first))
    total = len(tasks) * group_size
    t_start = last_log = time.perf_counter()
    timing0, counters0 = dict(engine.timing), engine.counters()
    with cf.ThreadPoolExecutor(workers) as pool:
        run = _Run(engine, pool, todo)
        while run.todo or run.live:
            _start_episodes(run, env_factory, scripted)
            for fut in _ready(run):
                ep, kind = run.inflight.pop(fut)
                try:
                    _advance(run, ep, kind, fut.result(), rules)
                except Exception as e:  # a broken episode is skipped and counted, not fatal
                    _drop(run, ep, e, rules)
            if engine.busy:
                _step_engine(run, max_iterations, before_step)
            now = time.perf_counter()
            if log_every_s and now - last_log >= log_every_s:
                last_log = now
                log(_progress(run.records, total, len(run.live), now - t_start))
    wall = time.perf_counter() - t_start
    return Rollouts(run.records, _final_stats(run, wall, timing0, counters0))


def _coding_env_factory(tok: Tokenizer, env_kwargs: dict | None, cache: int) -> Callable:
    from rl.envs.agent.env import CodingEnv

    kw = dict(env_kwargs or {})
    kw["max_tokens"] = min(kw.get("max_tokens", cache), cache)  # the context must fit the cache
    return lambda: CodingEnv(tok, **kw)


def _start_episodes(run: _Run, env_factory, scripted) -> None:
    """Fills the engine's free slots with the next episodes; each starts with its env's reset."""
    while run.todo and len(run.live) < run.engine.spec.slots:
        g, i, task = run.todo.popleft()
        ep = _Episode((g, i), task, env_factory(), scripted(task) if scripted else None)
        run.live[ep.rid] = ep
        run.inflight[run.pool.submit(_timed, run.stats, ep.env.reset, task)] = (ep, "reset")


def _ready(run: _Run) -> list[cf.Future]:
    """The sandbox calls that have returned; with none and nothing to decode, waits for one."""
    done = [f for f in run.inflight if f.done()]
    if not done and not run.engine.busy:
        t0 = time.perf_counter()
        with timeline.span("sandbox_wait"):
            cf.wait(list(run.inflight), return_when=cf.FIRST_COMPLETED)
        run.stats["wait_s"] += time.perf_counter() - t0
        done = [f for f in run.inflight if f.done()]
    return done


def _advance(run: _Run, ep: _Episode, kind: str, result, rules: _Rules) -> None:
    """An episode's sandbox call returned: a reset's prompt starts its first turn; a branch's
    environments start the group's other episodes; a step's (observation, finished) ends the
    episode, starts its next segment, branches its group (at the branch point) or its next turn."""
    if kind == "reset":
        ep.context, ep.pieces = list(result), [list(result)]
        run.engine.submit(ep.rid, result, **_turn_args(ep, rules))
        return
    if kind == "branch":
        _start_branches(run, ep, result, rules)
        return
    obs, finished = result
    if finished:
        _unbranched(run, ep, rules)
        ep.pieces.append(list(obs))  # context_limit ends with an observation
        _finish(run, ep, rules)
        return
    keep = getattr(ep.env, "segment_start", None)
    if keep is not None:  # a summary ended the segment: obs is the next context
        _start_segment(run, ep, obs, keep, rules)
        return
    ep.pieces.append(list(obs))
    ep.context += obs
    if _at_branch_point(ep, rules):  # snapshot + restore K-1 environments, off the driver thread
        job = run.pool.submit(
            _timed, run.stats, _branch_envs, ep.env, rules.group_size - 1, rules.env_factory
        )
        run.inflight[job] = (ep, "branch")
        return
    run.engine.extend(ep.rid, obs, **_turn_args(ep, rules))


def _at_branch_point(ep: _Episode, rules: _Rules) -> bool:
    """A group's first episode (not yet branched) has played the shared prefix's turns."""
    prefix = rules.prefix_turns and ep.rid[1] == 0 and not ep.shared
    return bool(prefix) and len(ep.turns) == rules.prefix_turns


def _unbranched(run: _Run, ep: _Episode, rules: _Rules) -> None:
    """A group's prefix episode that ended (or broke) before its branch point: the rest of its
    group then plays fresh."""
    if rules.prefix_turns and ep.rid[1] == 0 and not ep.shared:
        run.todo.extend((ep.rid[0], i, ep.task) for i in range(1, rules.group_size))


def _start_branches(run: _Run, ep: _Episode, envs: list, rules: _Rules) -> None:
    """The prefix episode `ep` at its branch point, and K-1 environments restored to it: K
    episodes sharing its transcript; branch 0 is `ep` itself, in its own slot, the others new
    engine requests whose prompt is the shared transcript (prefilled, not decoded)."""
    ep.shared = len(ep.context)
    run.stats["branched_groups"] += 1
    run.stats["shared_prefix_tokens"] += len(envs) * sum(len(t.tokens) for t in ep.turns)
    run.stats["shared_tool_calls"] += len(envs) * ep.env.record().tool_calls
    for i, env in enumerate(envs, start=1):
        child = _Episode(
            (ep.rid[0], i),
            ep.task,
            env,
            copy.deepcopy(ep.policy),  # a scripted policy's state at the branch point
            context=list(ep.context),
            pieces=[list(p) for p in ep.pieces],
            turns=list(ep.turns),  # the prefix's turns: their log-probs and versions
            shared=ep.shared,
        )
        run.live[child.rid] = child
        run.engine.submit(child.rid, child.context, **_turn_args(child, rules))
    run.engine.extend(ep.rid, ep.pieces[-1], **_turn_args(ep, rules))


def _turn_args(ep: _Episode, rules: _Rules) -> dict:
    """engine.submit / extend's arguments for the episode's next turn (scripted: forced tokens)."""
    room = min(
        rules.max_turn_tokens, ep.env.max_tokens - len(ep.context), rules.cache - len(ep.context)
    )
    if room <= 0:  # the env ends an episode at its budget, so only a prompt can overflow here
        raise ValueError(
            f"context of {len(ep.context)} tokens leaves no room for a turn (episode budget "
            f"{ep.env.max_tokens}, cache {rules.cache} tokens): raise the context or shorten the "
            "prompt"
        )
    forced = list(ep.policy(ep.context)) if ep.policy else None
    max_new = len(forced) if forced else room
    return dict(max_new=max_new, stop_tokens=list(rules.stops), forced=forced)


def _finish(run: _Run, ep: _Episode, rules: _Rules) -> None:
    """The episode is over: its records (one per segment) go out, its slot is free."""
    recs = _make_records(ep, run.engine, rules.tok, rules.forced, rules.reward)
    run.live.pop(ep.rid)
    run.records.extend(recs)
    if rules.on_record:
        for rec in recs:
            rules.on_record(rec)


def _start_segment(run: _Run, ep: _Episode, context: list[int], keep: int, rules: _Rules) -> None:
    """A summary ended a segment: the next one starts from `context`, its first `keep` tokens
    (what both contexts share) kept in the slot's cache when reuse_prefix."""
    _next_segment(ep, run.engine, context, keep if rules.reuse_prefix else 0)
    run.stats["segments_started"] += 1
    if rules.reuse_prefix:
        run.stats["prefix_reused_tokens"] += keep
        run.engine.extend(ep.rid, context[keep:], **_turn_args(ep, rules))
    else:
        run.engine.submit(ep.rid, context, **_turn_args(ep, rules))


def _step_engine(run: _Run, max_iterations: int, before_step) -> None:
    """Up to max_iterations decode iterations; each finished turn goes to its sandbox."""
    if before_step:
        before_step()
    for turn in run.engine.step(max_iterations):
        ep = run.live[turn.request]
        ep.turns.append(turn)
        ep.pieces.append(turn.tokens)
        ep.context += turn.tokens
        run.inflight[run.pool.submit(_timed, run.stats, ep.env.step, turn.tokens)] = (ep, "step")


def _drop(run: _Run, ep: _Episode, err: BaseException, rules: _Rules) -> None:
    """A broken episode (its sandbox or the engine raised): counted, its slot freed (a group's
    prefix episode that broke before branching: the rest of the group plays fresh)."""
    _unbranched(run, ep, rules)
    run.stats["errors"] += 1
    run.errors.append(f"{ep.task.id} #{ep.rid}: {type(err).__name__}: {err}")
    try:
        run.engine.finish(ep.rid)
    except ValueError:
        pass  # never started / still queued
    ep.env.close()
    run.live.pop(ep.rid)


def _final_stats(run: _Run, wall: float, timing0: dict, counters0: dict) -> dict:
    """The run's stats: its own, the engine's timing and counters over the run, and the errors."""
    engine, stats = run.engine, run.stats
    stats.update({k: v - timing0[k] for k, v in engine.timing.items()})
    stats.update({k: v - counters0[k] for k, v in engine.counters().items()})
    stats.update(
        wall_s=wall,
        programs=len(engine.programs),
        max_programs=engine.max_programs,
        error_messages=run.errors,
    )
    return stats


def _branch_envs(env, k: int, make_env: Callable) -> list:
    """K environments restored to `env`'s episode state now (rl/envs/agent/snapshot.py); `env` goes
    on."""
    from rl.envs.agent.snapshot import branch, snapshot

    with snapshot(env) as snap:
        return branch(snap, k, make_env)


def _progress(records, total: int, live: int, wall: float) -> str:
    n = len(records)
    toks = sum(rr.policy_tokens(r) for r in records)
    passed = sum(passes(r) for r in rr.episode_ends(records))
    return (
        f"[rollout] {n}/{total} episodes ({live} live), pass {passed}/{max(n, 1)}, "
        f"{toks / max(wall, 1e-9):.1f} policy tok/s, {wall:.0f}s"
    )


def _segment_arrays(ep: _Episode, engine, segment: dict, finish: bool) -> dict:
    """One segment's engine-side arrays, checked token-exact against the env's segment:
    {tokens, logprobs, versions, experts [n, L, k]} (rl/episodes/records.py). `finish` frees the
    slot."""
    tokens = list(segment["tokens"])
    joined = [t for piece in ep.pieces for t in piece]
    seq = engine.sequence(ep.rid)
    if joined != tokens or seq != tokens[: len(seq)]:
        raise RuntimeError(f"{ep.task.id}: transcript is not token-exact (engine/env disagree)")
    experts = engine.finish(ep.rid) if finish else engine.experts(ep.rid)  # [consumed, n, k]
    n_tok = len(tokens)
    logprobs, versions = np.zeros(n_tok, np.float32), np.full(n_tok, -1, np.int32)
    for turn, (a, b) in zip(ep.turns, segment["turn_spans"]):
        if turn.start != a or b - a != len(turn.tokens):
            raise RuntimeError(f"{ep.task.id}: turn at {a}..{b} != engine turn at {turn.start}")
        logprobs[a:b], versions[a:b] = turn.logprobs, turn.versions
    filled = np.concatenate([experts, np.repeat(experts[-1:], n_tok - len(experts), 0)], 0)
    return {
        "tokens": tokens,
        "logprobs": logprobs,
        "versions": versions,
        "experts": np.moveaxis(filled, 1, 0),  # [L,n,k] -> [n,L,k]
    }


def _next_segment(ep: _Episode, engine, context: list[int], keep: int) -> None:
    """Closes the segment a summary ended and points the episode at the next one's context,
    rewinding its slot to the `keep` tokens both contexts start with (0: freeing it)."""
    finished = ep.env.record().segments[-1]
    ep.done_segments.append(_segment_arrays(ep, engine, finished, finish=keep == 0))
    if context[:keep] != finished["tokens"][:keep]:
        raise RuntimeError(f"{ep.task.id}: the next segment does not start with the shared prefix")
    if keep:
        engine.rewind(ep.rid, keep)
    ep.context, ep.pieces, ep.turns = list(context), [list(context)], []


def _make_records(ep: _Episode, engine, tok: Tokenizer, forced: bool, reward) -> list[dict]:
    """One record per segment of the episode's chain (rl.episodes.records.episode_records), each
    with its own tokens, mask, log-probs, versions and experts and the chain's grade, counts and
    reward."""
    segments = ep.env.record().all_segments()
    arrays = ep.done_segments + [_segment_arrays(ep, engine, segments[-1], finish=True)]
    recs = rr.episode_records(
        ep.env.record(),
        arrays,
        tok,
        reward,
        group=ep.rid[0],
        sample=ep.rid[1],
        policy="forced" if forced else "model",
    )
    if ep.shared:  # a branched group's: tokens [0, shared) are in every record of the group
        for rec in recs:
            rec["shared_prefix"] = ep.shared
    return recs


def summarize(records: Sequence[dict], stats: dict) -> dict:
    """The episode metrics (rl.episodes.episode_metrics.episode_metrics: pass rate, partial credit,
    tokens, turns, calls, malformed rate; a chain counts once), the reward scalars
    (rl.episodes.records.
    reward_metrics: reward/mean, reward/<term>, as the RL trainer logs them), tokens/s and where
    the wall time went."""
    wall = max(stats.get("wall_s", 0.0), 1e-9)
    policy = sum(rr.policy_tokens(r) for r in records)
    out = {"episodes": 0, **(episode_metrics(records) if records else {})}
    out.pop("reward", None)  # reward/mean below, from the same records
    return {
        **out,
        **rr.reward_metrics(records),
        "records": len(records),
        "errors": stats.get("errors", 0),
        "mean_tokens": sum(len(r["tokens"]) for r in records) / max(len(records), 1),  # per record
        "policy_tokens": policy,
        "policy_tokens_per_s": policy / wall,
        "episodes_per_s": out["episodes"] / wall,
        "wall_s": wall,
        "decode_share": stats.get("decode_s", 0.0) / wall,
        "prefill_share": stats.get("prefill_s", 0.0) / wall,
        "sandbox_wait_share": stats.get("wait_s", 0.0) / wall,
        "mean_active_slots": stats.get("slot_steps", 0) / max(stats.get("iterations", 0), 1),
        "programs": stats.get("programs"),
        "max_programs": stats.get("max_programs"),
    }
