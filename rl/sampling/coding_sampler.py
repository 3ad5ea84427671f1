"""Multi-turn coding sampler for the RL loop: CodingEnv episodes (rl/sampling/rollout.py's driver on
one RolloutEngine) -> groups of records (rl/episodes/records.py), with the same `play` contract as
rl.sampling.samplers.SingleTurnSampler.

    sampler = CodingSampler(cfg, reward_cfg, group_size=2, max_tokens=768, ...)
    groups = sampler.play(tasks, follower, seed)    # one group (records,
                                                      rl/episodes/records.py) per task

Weights are swapped in flight: before every engine step (`swap_every` decode iterations) the
driver calls back here, and a newer version from the weight store replaces the engine's params
(slot caches kept, later tokens record the new version). The driver rewards each record with
rl/episodes/rewards.py under `reward_cfg` (the run's rl.reward) on the grader's counts (tests_passed
/ tests_total of the hidden tests, run after the episode ends) and the episode's counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rl.episodes.records import EXPERTS, PER_TOKEN
from rl.sampling.rollout import play_episodes
from rl.sampling.samplers import add_counters, decode_counters


def fit_record(d: dict, max_tokens: int) -> dict:
    """Cuts trailing observation tokens so the record fits a training row (max_tokens + 1 tokens:
    the forward runs on tokens[:-1]). Only a context-limit episode's last observation can pass the
    engine cache; those tokens follow the last policy token, so no loss term changes."""
    n = max_tokens + 1
    if len(d["tokens"]) <= n:
        return d
    last = int(np.flatnonzero(d["mask"]).max(initial=0))
    if last >= n:
        raise ValueError(f"record {d['group_id']}: policy token at {last} >= row length {n}")
    out = dict(d, **{k: d[k][:n] for k in PER_TOKEN})
    out[EXPERTS] = d[EXPERTS][:, :n]  # [n_layers, L, k]
    return out


class CodingSampler:
    """Plays `group_size` CodingEnv episodes per task on a RolloutEngine; one engine per `play`
    call (seeded by `seed`; its compiled programs are shared across calls)."""

    def __init__(
        self,
        cfg,
        tok,
        reward_cfg,
        *,
        group_size: int,
        max_tokens: int,
        temperature: float = 1.0,
        swap_every: int = 2,
        slots: int = 8,
        max_turns: int = 4,
        max_turn_tokens: int = 128,
        obs_token_budget: int = 256,
        max_malformed_streak: int = 0,
        summary=None,
        shared_prefix_turns: int = 0,
        workers: int = 4,
        min_bucket: int = 64,
        speculative_k: int = 0,
        mesh=None,
        rules=None,
        cache_split: str = "none",
    ):
        """mesh / rules: the engine's own mesh (rl.sampler_mesh) and logical rules; None = one
        device, unsharded. speculative_k: MTP draft tokens per verify step (0 = plain).
        summary: rl.envs.agent.summary.SummaryConfig (None = off): an episode is then a chain of
        segments, one record each, all in its group.
        shared_prefix_turns: N > 0 plays each group as best-of-K from a shared N-turn prefix
        (rl/sampling/rollout.py: the prefix decoded and its tool calls run once, then K branches
        from a snapshot; the prefix's tokens are kept out of the loss by rl/learning/batch.py)."""
        if max_tokens > cfg.max_position_embeddings:
            raise ValueError(
                f"rl.max_tokens={max_tokens} > "
                f"max_position_embeddings={cfg.max_position_embeddings}"
            )
        self.cfg, self.tok, self.reward_cfg = cfg, tok, reward_cfg
        self.group_size, self.max_tokens = group_size, max_tokens
        self.temperature, self.swap_every, self.slots = temperature, swap_every, slots
        self.max_turn_tokens, self.workers, self.min_bucket = max_turn_tokens, workers, min_bucket
        self.env_kwargs = dict(
            max_tokens=max_tokens,
            max_turns=max_turns,
            obs_token_budget=obs_token_budget,
            max_malformed_streak=max_malformed_streak,
            summary=summary,
        )
        self.shared_prefix_turns = shared_prefix_turns
        self.mesh, self.rules, self.speculative_k = mesh, rules, speculative_k
        self.cache_split = (
            cache_split  # the latent cache over the engine's mesh (model/engine/split.py)
        )
        self.swaps = self.errors = 0
        self.counters = decode_counters()  # summed over play calls (speculative acceptance)
        self.sandbox_wait_s = 0.0  # the driver waiting for sandboxes with nothing to decode

    def engine_config(self, seed: int):
        from model.engine_config import EngineConfig

        return EngineConfig(
            slots=self.slots,
            cache_len=self.max_tokens,  # the episode's context budget (CodingEnv max_tokens)
            min_bucket=self.min_bucket,
            temperature=self.temperature,
            seed=seed,
            speculative_k=self.speculative_k,
            cache_split=self.cache_split,
        )

    def _engine(self, params, version: int, seed: int):
        from model.engine_config import build_engine

        ec = self.engine_config(seed)
        return build_engine(
            self.cfg,
            params,
            ec,
            valid_vocab=self.tok.vocab_size,
            params_version=version,
            mesh=self.mesh,
            rules=self.rules,
        )

    def play(self, tasks: Sequence, weights, seed: int) -> list[list[dict]]:
        params, version = weights.latest()
        eng = self._engine(params, version, seed)
        current = [version]

        def fetch_newer():  # in-flight update between engine steps
            newer = weights.poll(current[0])
            if newer is not None:
                eng.set_params(*newer)
                current[0] = newer[1]
                self.swaps += 1

        out = play_episodes(
            eng,
            self.tok,
            tasks,
            group_size=self.group_size,
            max_turn_tokens=self.max_turn_tokens,
            workers=self.workers,
            env_kwargs=self.env_kwargs,
            max_iterations=self.swap_every,
            before_step=fetch_newer,
            log_every_s=0,
            reward=self.reward_cfg,
            prefix_turns=self.shared_prefix_turns,
        )
        self.errors += out.stats["errors"]
        self.sandbox_wait_s += out.stats["wait_s"]
        # tokens emitted: the policy's (tool results and prompts are prefilled, not decoded)
        emitted = sum(int(np.sum(r["mask"])) for r in out.records)
        add_counters(self.counters, dict(out.stats, tokens=emitted))
        for msg in out.stats["error_messages"]:  # a broken episode is dropped from its group
            print(f"coding sampler: episode dropped: {msg}")
        groups: list[list[dict]] = [[] for _ in tasks]
        for rec in sorted(out.records, key=lambda r: (r["group"], r["sample"], r["segment"])):
            groups[rec["group"]].append(fit_record(rec, self.max_tokens))
        return groups
