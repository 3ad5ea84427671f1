"""The summary toy's expected reward for the sender (rl.summary_toy.expected_reward, off by
default; rl/sampling/summary_toy.py answer_expectation, rl/learning/batch.py sender_advantages):
the expectation equals a numpy reference on hand-made logits; collate gives summary records
sender_reward minus its group mean and leaves answer records (and records without it) their chain
advantage; by exact enumeration its expected sender gradient equals the sampled reward's (the
estimator is unbiased). On the tiny preset (tests/test_summary.py, the toy chains' test) the
sampler's values come from the distribution the answers were sampled from (the records' logprobs).
"""

import itertools

import numpy as np
import pytest

from rl.learning import batch as rb
from rl.learning.grpo import chain_advantages
from rl.sampling.summary_toy import answer_expectation


def _softmax_rows(logits, temperature, valid):
    """Loop-per-row reference: softmax over ids < valid of logits / temperature."""
    out = np.zeros_like(logits, dtype=np.float64)
    for t, row in enumerate(logits):
        z = np.exp(row[:valid] / temperature - np.max(row[:valid] / temperature))
        out[t, :valid] = z / z.sum()
    return out


@pytest.mark.parametrize("temperature,valid", [(1.0, 9), (0.7, 6), (1.3, 11)])
def test_answer_expectation_matches_numpy(temperature, valid):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 11)) * 2  # record of 5 tokens: 4 forward positions
    mask = np.array([0, 0, 0, 1, 1])  # tokens 3, 4 are the answer: predicted at rows 2, 3
    p = _softmax_rows(logits, temperature, valid)
    for fact in range(3):
        want = (p[2, fact] + p[3, fact]) / 2
        got = answer_expectation(logits, mask, fact, temperature, valid)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="mask of 4 tokens for 4 logits rows"):
        answer_expectation(logits, mask[1:], 0, temperature, valid)
    if valid < 11:  # ids >= valid are never sampled: their probability (so the value) is 0
        assert answer_expectation(logits, mask, valid, temperature, valid) == 0.0


def _records(chains):
    """chains: (group, chain, reward, sender_reward or None) -> 2 records a chain."""
    recs = []
    for gid, chain, reward, sender in chains:
        for seg in (0, 1):
            r = dict(
                tokens=np.arange(5, dtype=np.int32),
                mask=np.array([0, 0, 0, 1, 1], np.float32),
                logprobs=np.zeros(5, np.float32),
                group_id=gid,
                chain=chain,
                segment=seg,
                segments=2,
                reward=reward,
            )
            if seg == 0 and sender is not None:
                r["sender_reward"] = sender
            recs.append(r)
    return recs


def test_collate_gives_summaries_their_centred_expectation():
    chains = [
        ("g0", 0, 0.0, 0.10),  # a tied group (every reward 0): summaries still ordered
        ("g0", 1, 0.0, 0.30),
        ("g0", 2, 0.0, 0.05),
        ("g1", 0, 1.0, 0.9),
        ("g1", 1, 0.5, 0.6),
    ]
    b = rb.collate(_records(chains), seq_len=4, rows=12, n_moe_layers=0, k=1)
    m0 = np.mean([0.10, 0.30, 0.05])
    m1, r1 = np.mean([0.9, 0.6]), np.mean([1.0, 0.5])
    want = [0.10 - m0, 0.0, 0.30 - m0, 0.0, 0.05 - m0, 0.0, 0.9 - m1, 1.0 - r1, 0.6 - m1, 0.5 - r1]
    np.testing.assert_allclose(b["advantages"][:10, 2:], np.repeat(np.c_[want], 2, 1), atol=1e-6)
    # without sender_reward: exactly the chain advantages, as before the option
    plain = _records([(g, c, r, None) for g, c, r, _ in chains])
    np.testing.assert_array_equal(
        rb.sender_advantages(plain, chain_advantages(plain)), chain_advantages(plain)
    )
    half = _records(chains[:1] + [("g0", 1, 0.0, None)])
    with pytest.raises(ValueError, match="sender_reward on some chains only"):
        rb.sender_advantages(half, chain_advantages(half))


def test_expected_reward_is_an_unbiased_sender_gradient():
    """Sender: one summary token s ~ softmax(theta) over 3 ids; receiver: a1 ~ q1[s], a2 ~
    q2[s, a1] over 3 ids; fact 0; groups of G = 2 chains. Summing over every outcome of the group,
    E[mean_i grad log pi(s_i) A_i] with A from the sampled reward (chain_advantages) equals the
    same with A from the expectation (sender_advantages): same gradient, less noise."""
    rng = np.random.default_rng(1)
    theta = np.array([0.4, -0.3, 1.1])
    pi = np.exp(theta) / np.exp(theta).sum()
    q1 = rng.dirichlet(np.ones(3), size=3)  # [s, a1]
    q2 = rng.dirichlet(np.ones(3), size=(3, 3))  # [s, a1, a2]
    fact, g = 0, 2
    outcomes = list(itertools.product(range(3), repeat=3))  # (s, a1, a2) of one chain
    grads = {"sampled": np.zeros(3), "expected": np.zeros(3)}
    for tup in itertools.product(outcomes, repeat=g):
        prob = np.prod([pi[s] * q1[s, a1] * q2[s, a1, a2] for s, a1, a2 in tup])
        chains = []
        for i, (s, a1, a2) in enumerate(tup):
            logits = np.log(np.stack([q1[s], q2[s, a1]]))  # rows predicting a1, a2
            e = answer_expectation(logits, [0, 1, 1], fact, 1.0, 3)  # tokens: s, a1, a2
            chains.append(("g", i, ((a1 == fact) + (a2 == fact)) / 2, e))
        recs = _records(chains)
        sampled = chain_advantages(recs)[::2]
        expected = rb.sender_advantages(recs, chain_advantages(recs))[::2]
        for (s, _, _), a_s, a_e in zip(tup, sampled, expected):
            grad_logp = np.eye(3)[s] - pi
            grads["sampled"] += prob * grad_logp * a_s / g
            grads["expected"] += prob * grad_logp * a_e / g
    assert np.abs(grads["sampled"]).max() > 1e-3  # a real gradient, not 0 = 0
    np.testing.assert_allclose(grads["expected"], grads["sampled"], rtol=1e-5, atol=1e-7)
