"""The toy task of self-summarization (rl.task='summary_toy'): success needs one fact carried
across a summary, and the fact is visible only before it. Each episode is a chain of two
segments, each one training sequence, sharing one reward (rl/episodes/records.py,
rl/learning/batch.py):

    segment 0:  USER f f            s_1 .. s_K        (policy: the summary s)
    segment 1:  SUMMARY s_1 .. s_K  a_1 .. a_A        (policy: the answer a)

The fact f is one of the ids 0 .. facts-1; the markers are the five ids after them, and every
token is sampled from those facts + 5 ids (rl.valid_vocab, set by rl/learning/loop.py: the training
loss masks the same ids, and a target outside them would score -inf). Reward = the fraction of
answer tokens a_i equal to f. Segment 1 never sees f, only the summary: the
answer can beat chance (1 / facts) only by copying what the summary kept, and the summary earns
credit only through the answer it makes possible, i.e. through the chain's shared advantage.

Each prompt ends with what the next tokens should copy (no closing markers): a first layout with
the fact two tokens and four markers back (and the summary between markers in segment 1) did not
learn in 240 steps at lr 3e-3 (bench/RESULTS_LOG.md): every segment collapsed onto one constant id,
which scores 1 / facts and leaves GRPO no signal (all-fail and all-pass groups). The policy is
free to keep the fact in any code (the answer only has to decode it): bench/bench_rl_summary.py
measures both the literal id and whether the fact is decodable from the summary.

That layout learned in 1 run of 4. Two causes, measured (bench/RESULTS_LOG.md): (1) a group is one
fact's chains, so an answer that ignores the summary is pushed toward the facts of its batch, and
4 groups with independently drawn facts are rarely balanced: the answer chased each batch's
majority fact onto one constant (per-step reward swinging 0.03-0.67), where all of a group's
chains tie; hence balanced pools (`balanced_fact`: each batch of 4 groups holds every fact once).
(2) Balanced alone, sender and receiver still turned deterministic within ~50 steps with 2 of
the 4 facts carried (reward 0.5, every group tied: zero advantage, no gradient, for good); a small
k2 KL to the initial policy (rl.kl_beta=0.02; 0.1 stops learning) keeps enough exploration.
With 16 chains a group and the lr decayed (cosine to 0.1x: at a constant lr, runs lost facts they
had learned) the bench's recipe learned in the 5 seeds it was tuned on (bench/bench_rl_summary.py).
(3) On other seeds it stalled at 0.48-0.76 (issue 55): two facts' senders settled on one summary,
on which the answer hedged between them; GRPO pushed every other summary of those facts down (the
answer named them nowhere else), their senders turned deterministic within ~30 steps, and with no
exploration the collision never split (bench/diag_summary_toy.py measures it). An entropy
bonus on the summary segment (rl.summary_toy.entropy_bonus, rl/learning/batch.py
summary_entropy_bonus) split it on seed 5 (0.756 -> 0.967) but is off by default: on fresh
seeds it traded that trap for another (two facts' senders kept near uniform, overlapping,
decoded half the time; 4 of 8 fresh seeds >= 0.9, 7 of 10 without it), so it is not yet the fix.
(4) The stalls of seeds 108 and 109 were a saturated policy: the sender deterministic on a
summary two facts share, or the receiver answering one fact on every summary (so the other
facts' groups all tie at 0), where the k2 KL's gradient (and an entropy bonus's) vanishes,
pi_j (log pi_j / ref_j - KL) -> 0 as pi_j -> 1. rl.uniform_beta (KL(uniform over the toy's ids ||
pi) per policy token, gradient beta (pi_j - 1/n) on logit j: a floor under every id) at 0.01
fixed both (0.49 and 0.74 -> 0.96) but not fresh seeds: on 110-119 the runs that stalled
ended with one fact without a summary of its own and the receiver never naming it, or two facts'
exploring senders overlapping, decoded half the time (bench/RESULTS.md). Off in the recipe.
(5) About 40% of a stalled run's groups tie (every chain scores 0, or 1): a sampled 0/1 answer
gives their senders no signal at all, and a hedging receiver hides which summary was better.
rl.summary_toy.expected_reward (`answer_expectation`) gives the summary segment instead the
receiver's probability of the right answer given the summary it wrote (from the policy's own
logits at the answer positions, no new sampling): a Rao-Blackwellized reward, ordered and
non-zero in every group, the same sender gradient in expectation; the answer segment keeps its
sampled reward. Tuned on 108 and 109 (0.49, 0.74 -> 0.99, 0.94), checked once on fresh seeds
120-129: 9 of 10 >= 0.9 (the one stall, 121, two facts' senders deterministic on one summary,
the receiver naming the other: trap (3), which the expectation does not open). On in the bench's
recipe, off in configs/rl.py (bench/RESULTS.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rl.episodes import rewards

# ids facts .. facts + 4; the prompts use two: the others stay sampleable ids so that chance
# (1 / (facts + 5)) is the first layout's, for comparison (bench/RESULTS.md)
MARKERS = ("user", "end", "assistant", "summary", "/summary")


def vocab(facts: int) -> int:
    """The ids the toy uses and samples from: the facts, then the markers."""
    return facts + len(MARKERS)


def _marker(facts: int, name: str) -> int:
    return facts + MARKERS.index(name)


@dataclasses.dataclass(frozen=True)
class FactTask:
    task_id: str
    fact: int


def make_fact_task(seed: int, j: int, facts: int, position: int | None = None) -> FactTask:
    """Task j of the pool. `position` (its place in the pool's training order): the fact is
    balanced_fact's; None: drawn independently per task (the first recipe's,
    bench/RESULTS_LOG.md)."""
    if position is not None:
        return FactTask(f"{j:06d}", balanced_fact(seed, position, facts))
    rng = np.random.default_rng(seed * 7919 + j)
    return FactTask(f"{j:06d}", int(rng.integers(facts)))


def balanced_fact(seed: int, position: int, facts: int) -> int:
    """Each block of `facts` consecutive pool positions holds every fact once (seeded order in the
    block), so a batch of k x facts groups is balanced. Why: a group is one fact's chains, so an
    answer that ignores the summary is pushed toward the facts its batch holds; with facts drawn
    independently, 4 groups a batch are often 2-3 of one fact, and that noise drove the answer
    onto one constant, where every group's chains tie (zero advantage) and learning stops."""
    block = np.random.default_rng([seed, position // facts]).permutation(facts)
    return int(block[position % facts])


def first_prompt(task: FactTask, facts: int) -> list[int]:
    return [_marker(facts, "user"), task.fact, task.fact]


def second_prompt(summary: list[int], facts: int) -> list[int]:
    return [_marker(facts, "summary"), *summary]


def answer_expectation(logits, mask, fact: int, temperature: float, valid_vocab: int) -> float:
    """The expected reward of an answer segment given its prompt (the summary): logits [T, V] of
    the policy's forward over the record's tokens[:-1] (position t predicts token t+1), mask [T+1]
    the record's (1 on the answer tokens). -> mean over answer tokens a_i of pi(a_i = fact | the
    summary, a_<i), under the sampling distribution (softmax(logits / temperature) over the ids
    < valid_vocab; 0 = all), with the sampled a_<i as context.

    Why it is an unbiased reward for the summary (the sender): chain_reward is mean_i 1[a_i =
    fact], and E[1[a_i = fact] | s, a_<i] = pi(fact | s, a_<i), so this value has the same
    expectation given the summary s as the sampled reward (the tower rule), and
    E[grad log pi(s) X] depends on X only through E[X | s]: the sender's policy gradient is the
    same in expectation, with the answer's sampling noise (i = 1) integrated out. Not for the
    answer tokens: pi(fact | s) does not depend on a_1, so a_1's gradient would lose its signal;
    they keep the sampled reward (rl/learning/batch.py sender_advantages)."""
    logits = np.asarray(logits, np.float64)
    if len(mask) != len(logits) + 1:
        raise ValueError(
            f"answer_expectation: mask of {len(mask)} tokens for {len(logits)} logits rows"
        )
    scaled = logits / (temperature if temperature > 0 else 1.0)
    if valid_vocab:
        scaled = np.where(np.arange(scaled.shape[-1]) < valid_vocab, scaled, -np.inf)
    scaled -= scaled.max(axis=-1, keepdims=True)
    p = np.exp(scaled)
    p /= p.sum(axis=-1, keepdims=True)  # [T, V]
    at = np.asarray(mask)[1:] > 0  # logits row t predicts token t + 1
    return float(p[at, fact].mean()) if at.any() else 0.0


class SummaryToySampler:
    """`play(tasks, weights, seed)` (rl/sampling/samplers.py's contract): per task, `group_size`
    chains of two segments, generated on the single-turn sampler's engine path
    (`inner.generate`). expected_reward: each summary record also carries `sender_reward`, its
    answer's answer_expectation under the params that answered (one forward over the answer
    segments, the trainer's model code)."""

    def __init__(
        self,
        inner,
        *,
        facts: int,
        summary_tokens: int,
        answer_tokens: int,
        expected_reward: bool = False,
    ):
        self.inner, self.facts, self.k, self.a = inner, facts, summary_tokens, answer_tokens
        self.expected_reward = expected_reward
        self._forward = None

    @property
    def swaps(self) -> int:
        return self.inner.swaps

    @property
    def counters(self) -> dict:
        return self.inner.counters

    def play(self, tasks, weights, seed: int) -> list[list[dict]]:
        g = self.inner.group_size
        chains = [(t, i) for t in tasks for i in range(g)]
        gids = [t.task_id for t, _ in chains]
        first_prompts = [first_prompt(t, self.facts) for t, _ in chains]
        first = self.inner.generate(first_prompts, gids, weights, seed, max_new=self.k)
        summaries = [r["tokens"][r["mask"] > 0].tolist() for r in first]
        prompts = [second_prompt(s, self.facts) for s in summaries]
        second = self.inner.generate(prompts, gids, weights, seed + 1, max_new=self.a)
        expected = self._expected(second, [t.fact for t, _ in chains], weights)
        groups: list[list[dict]] = [[] for _ in tasks]
        for n, ((task, i), r0, r1) in enumerate(zip(chains, first, second)):
            reward = rewards.chain_reward(r1["tokens"][r1["mask"] > 0], task.fact)
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
                if seg == 0 and expected is not None:
                    r["sender_reward"] = expected[n]  # the summary's advantage comes from it
                groups[n // g].append(r)
        return groups

    def _expected(self, answers: list[dict], facts: list[int], weights) -> list[float] | None:
        """answer_expectation of every answer record, from one forward of the params that
        answered them (the newest: in the synchronous loop, the ones that sampled the step)."""
        if not self.expected_reward:
            return None
        import jax

        from model.transformer import Transformer

        if self._forward is None:
            module = Transformer(self.inner.cfg)
            self._forward = jax.jit(
                lambda p, t: module.apply({"params": p}, t, with_mtp=False).logits
            )
        params, _ = weights.latest()
        n = max(len(r["tokens"]) for r in answers) - 1
        tokens = np.zeros((len(answers), n), np.int32)  # right padding: causal, never attended
        for i, r in enumerate(answers):
            tokens[i, : len(r["tokens"]) - 1] = r["tokens"][:-1]
        logits = np.asarray(self._forward(params, tokens))  # [N, n, V]
        t, vv = self.inner.temperature, self.inner.valid_vocab
        return [
            answer_expectation(logits[i], r["mask"], f, t, vv)
            for i, (r, f) in enumerate(zip(answers, facts))
        ]
