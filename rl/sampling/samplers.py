"""Samplers for the RL loop: a task -> a group of episode records, with weights swapped in flight.

rl/sampling/sampler_process.py only needs `sampler.play(tasks, weights, seed) -> list of groups`
(one list of records per task) where `weights` is a `rl.stores.weight_store.Follower` (newest
params + version, polled between decode iterations). This file holds the single-turn sampler on the
one engine (model/engine/, through `model.prompt_batch.PromptBatch`: prompts -> completions, graded
by a pure function of the tokens) and the decode counters every sampler reports; the multi-turn
CodingEnv sampler (`rl.sampling.coding_sampler.CodingSampler`, episodes from rl/sampling/rollout.py)
and the summary chain (`rl.sampling.summary_toy.SummaryToySampler`) plug in the same way with their
own `play`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from model.prompt_batch import PromptBatch
from rl.episodes.records import completion_record


def records_from_generate(out, prompts, group_ids, rewards=None) -> list[dict]:
    """model.generate output -> records (rl/episodes/records.py). rewards: one per sequence, a task
    score that is the whole reward (its one term the outcome); None = not rewarded yet (reward and
    reward_terms None until the caller sets them)."""
    return [
        completion_record(
            prompt,
            seq.tokens,
            seq.logprobs,
            seq.versions,
            seq.replay_experts(),  # [n, plen + m, k]
            group_id=group_ids[n],
            reward=None if rewards is None else float(rewards[n]),
            reward_terms=None if rewards is None else {"outcome": float(rewards[n])},
        )
        for n, (seq, prompt) in enumerate(zip(out.sequences, prompts))
    ]


@dataclasses.dataclass
class PromptTask:
    """A single-turn task: a prompt and a pure reward on the completion's token ids."""

    task_id: str
    prompt: list[int]


class SingleTurnSampler:
    """Plays `group_size` completions per task on one engine (a PromptBatch); between chunks of
    `swap_every` decode iterations it asks `weights` for a newer version and swaps it in (the KV
    caches of running sequences are kept: in-flight update, every token records its version)."""

    def __init__(
        self,
        cfg,
        reward_fn: Callable[[Sequence[int], str], tuple[float, dict]],
        *,
        group_size: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        swap_every: int = 2,
        speculative_k: int = 0,
        stop_tokens=None,
        valid_vocab: int = 0,
        mesh=None,
        rules=None,
    ):
        """mesh / rules: the engine's own mesh (rl.sampler_mesh) and logical rules; None = one
        device, unsharded. speculative_k: MTP draft tokens per verify step (0 = plain decoding;
        the recorded log-probs are the main model's either way)."""
        self.cfg, self.reward_fn = cfg, reward_fn
        self.speculative_k = speculative_k
        self.mesh, self.rules = mesh, rules
        self.group_size, self.max_new = group_size, max_new_tokens
        self.temperature, self.swap_every, self.stop_tokens = temperature, swap_every, stop_tokens
        self.valid_vocab = (
            valid_vocab  # ids >= it never sampled (0 = all): the loss's rl.valid_vocab
        )
        self.swaps = 0
        self.decode_stats: dict = {}
        self.counters = decode_counters()  # summed over play calls (speculative acceptance)

    def play(self, tasks: Sequence[PromptTask], weights, seed: int) -> list[list[dict]]:
        prompts = [t.prompt for t in tasks for _ in range(self.group_size)]
        gids = [t.task_id for t in tasks for _ in range(self.group_size)]
        recs = self.generate(prompts, gids, weights, seed)
        for r in recs:
            r["reward"], r["reward_terms"] = self.reward_fn(
                r["tokens"][r["mask"] > 0], r["group_id"]
            )
        return [recs[i : i + self.group_size] for i in range(0, len(recs), self.group_size)]

    def generate(self, prompts, group_ids, weights, seed: int, max_new: int = 0) -> list[dict]:
        """Completions (max_new tokens; 0 = max_new_tokens) of `prompts` with the newest
        weights, swapped in flight -> records (records_from_generate, no reward yet)."""
        params, version = weights.latest()
        batch = PromptBatch(
            self.cfg,
            params,
            prompts,
            max_new or self.max_new,
            num_draft=self.speculative_k,
            temperature=self.temperature,
            stop_tokens=self.stop_tokens,
            seed=seed,
            params_version=version,
            valid_vocab=self.valid_vocab,
            mesh=self.mesh,
            rules=self.rules,
        )
        while not batch.step(self.swap_every):
            newer = weights.poll(version)
            if newer is not None:
                params, version = newer
                batch.engine.set_params(params, version)
                self.swaps += 1
        out = batch.results()
        self.decode_stats = out.stats  # iterations, drafted/accepted (speculative), tokens
        add_counters(self.counters, out.stats)
        return records_from_generate(out, prompts, group_ids)


COUNTERS = ("drafted", "accepted", "slot_steps", "tokens")


def decode_counters() -> dict:
    """A sampler's running decode counters: MTP tokens drafted and accepted, slot-steps (one
    verify step of one sequence; a plain decode step when not speculative) and tokens emitted.
    Acceptance = accepted / drafted; tokens per verify step = tokens / slot_steps."""
    return dict.fromkeys(COUNTERS, 0)


def add_counters(total: dict, stats: dict) -> None:
    for k in COUNTERS:
        total[k] += int(stats.get(k, 0))


def acceptance(counts: dict) -> dict:
    """Decode counters (rl/sampling/samplers.py decode_counters) -> speculative acceptance (accepted
    / drafted; absent without drafts) and tokens per verify step (tokens / slot-steps)."""
    out = {}
    if counts.get("drafted", 0) > 0:
        out["spec/acceptance"] = counts["accepted"] / counts["drafted"]
    if counts.get("slot_steps", 0) > 0:
        out["spec/tokens_per_verify"] = counts["tokens"] / counts["slot_steps"]
    return out
