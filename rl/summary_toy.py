"""The toy task of self-summarization (rl.task='summary_toy'): success needs one fact carried
across a summary, and the fact is visible only before it. Each episode is a chain of two
segments, each one training sequence, sharing one reward (rl/records.py, rl/batch.py):

    segment 0:  <|user|> f f <|end|> <|assistant|> <|summary|>  s_1 .. s_K          (policy: s)
    segment 1:  <|user|> <|summary|> s_1 .. s_K <|/summary|> <|end|> <|assistant|>  a_1 .. a_A

The fact f is one of `facts` ids, and so is every sampled token (rl.valid_vocab = facts). Reward
= the fraction of answer tokens a_i equal to f. Segment 1 never sees f, only the summary: the
answer can beat chance (1 / facts) only by copying what the summary kept, and the summary earns
credit only through the answer it makes possible, i.e. through the chain's shared advantage.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from data.tokenizers import ByteTokenizer

_TOK = ByteTokenizer()  # its special ids as plain markers (the toy samples only ids < facts)
USER, END, ASSISTANT = (_TOK.special_id(n) for n in ("user", "end", "assistant"))
SUMMARY, END_SUMMARY = _TOK.special_id("summary"), _TOK.special_id("/summary")


@dataclasses.dataclass(frozen=True)
class FactTask:
    task_id: str
    fact: int


def make_fact_task(seed: int, j: int, facts: int) -> FactTask:
    rng = np.random.default_rng(seed * 7919 + j)
    return FactTask(f"{j:06d}", int(rng.integers(facts)))


def first_prompt(task: FactTask) -> list[int]:
    return [USER, task.fact, task.fact, END, ASSISTANT, SUMMARY]


def second_prompt(summary: list[int]) -> list[int]:
    return [USER, SUMMARY, *summary, END_SUMMARY, END, ASSISTANT]


def chain_reward(answer, fact: int) -> float:
    a = np.asarray(answer)
    return float(np.mean(a == fact)) if a.size else 0.0


class SummaryToySampler:
    """`play(tasks, weights, seed)` (rl/samplers.py's contract): per task, `group_size` chains of
    two segments, generated on the single-turn sampler's engine path (`inner.generate`)."""

    def __init__(self, inner, *, summary_tokens: int, answer_tokens: int):
        self.inner, self.k, self.a = inner, summary_tokens, answer_tokens

    @property
    def swaps(self) -> int:
        return self.inner.swaps

    def play(self, tasks, weights, seed: int) -> list[list[dict]]:
        g = self.inner.group_size
        chains = [(t, i) for t in tasks for i in range(g)]
        gids = [t.task_id for t, _ in chains]
        first_prompts = [first_prompt(t) for t, _ in chains]
        first = self.inner.generate(first_prompts, gids, weights, seed, max_new=self.k)
        summaries = [r["tokens"][r["mask"] > 0].tolist() for r in first]
        prompts = [second_prompt(s) for s in summaries]
        second = self.inner.generate(prompts, gids, weights, seed + 1, max_new=self.a)
        groups: list[list[dict]] = [[] for _ in tasks]
        for n, ((task, i), r0, r1) in enumerate(zip(chains, first, second)):
            reward = chain_reward(r1["tokens"][r1["mask"] > 0], task.fact)
            kept = float(task.fact in summaries[n])
            for seg, r in enumerate((r0, r1)):
                r.update(
                    reward=reward,
                    reward_terms={"outcome": reward},
                    chain=i,
                    segment=seg,
                    segments=2,
                    fact_kept=kept,  # diagnostics: did the summary keep the fact?
                )
                groups[n // g].append(r)
        return groups
