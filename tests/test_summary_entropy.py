"""The summary segment's entropy bonus (rl/learning/batch.py summary_entropy_bonus;
rl.task='summary_toy' through rl.summary_toy.entropy_bonus, off by default): on a hand-made
batch, collate's advantages equal a numpy reference (chain advantage + beta x centred surprisal
on summary segments only), and the bonus is an unbiased (up to GRPO's (G-1)/G) estimate of
beta x the gradient of the summary's entropy, checked by exact enumeration against the analytic
gradient.
"""

import itertools

import numpy as np
import pytest

from rl.learning import batch as rb

# chains: (group, chain, reward, summary logprobs, answer logprobs); prompt tokens 3, then policy
CHAINS = [
    ("g0", 0, 1.0, [-0.1, -0.2], [-0.5, -0.1]),
    ("g0", 1, 0.5, [-2.0, -1.5], [-0.3, -0.9]),
    ("g0", 2, 0.0, [-0.7, -3.0], [-1.2, -0.4]),
    ("g1", 0, 0.0, [-1.0, -1.0], [-0.2, -0.2]),
    ("g1", 1, 0.0, [-0.05, -4.0], [-0.6, -0.7]),
]


def _records():
    recs = []
    for gid, chain, reward, *lps in CHAINS:
        for seg, lp in enumerate(lps):
            recs.append(
                dict(
                    tokens=np.arange(5, dtype=np.int32),
                    mask=np.array([0, 0, 0, 1, 1], np.float32),
                    logprobs=np.array([0.0, 0.0, 0.0, *lp], np.float32),
                    group_id=gid,
                    chain=chain,
                    segment=seg,
                    segments=2,
                    reward=reward,
                )
            )
    return recs


def _reference(beta):
    """Per record (chain-major, segment-minor): advantage by hand."""
    out = []
    for gid, _, reward, s_lp, _ in CHAINS:
        group = [c for c in CHAINS if c[0] == gid]
        base = np.mean([c[2] for c in group])
        mean_surprisal = np.mean([-sum(c[3]) for c in group])
        out += [reward - base + beta * (-sum(s_lp) - mean_surprisal), reward - base]
    return np.array(out, np.float32)


@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_collate_adds_the_centred_surprisal_to_summary_segments_only(beta):
    recs = _records()
    b = rb.collate(recs, seq_len=4, rows=12, n_moe_layers=0, k=1, summary_entropy=beta)
    ref = _reference(beta)
    # advantages sit on the policy targets (positions 2, 3: tokens 3, 4) and are 0 elsewhere
    np.testing.assert_allclose(b["advantages"][:10, 2:], np.repeat(ref[:, None], 2, 1), atol=1e-6)
    assert not b["advantages"][:10, :2].any() and not b["advantages"][10:].any()
    if beta:  # tied group g1 (both rewards 0) now carries a signal on its summaries only
        g1 = b["advantages"][6:10, 2]
        assert g1[0] == -g1[2] != 0 and g1[1] == g1[3] == 0
    plain = rb.collate(recs, seq_len=4, rows=12, n_moe_layers=0, k=1)
    assert np.array_equal(
        plain["advantages"], rb.collate(recs, seq_len=4, rows=12, n_moe_layers=0, k=1,
                                        summary_entropy=0.0)["advantages"]
    )  # fmt: skip


def test_records_without_segments_get_no_bonus():
    recs = [dict(r) for r in _records()]
    for r in recs:
        del r["segment"]
    assert not rb.summary_entropy_bonus(recs, 0.1).any()


def test_bonus_is_an_entropy_gradient_estimate():
    """A one-token 'summary' from softmax(theta) over 4 ids, groups of G = 3 samples: the expected
    policy gradient with advantage = the bonus, sum over all G-tuples of p(tuple) x
    mean_i grad log p(s_i) x bonus_i, equals (G-1)/G x beta x grad H(theta) (GRPO's group mean
    includes the sample itself), with grad H from the closed form -p_k (log p_k + H)."""
    theta, beta, g = np.array([1.0, -0.5, 0.3, 2.0]), 0.07, 3
    p = np.exp(theta - theta.max())
    p /= p.sum()
    h = -(p * np.log(p)).sum()
    grad_h = -p * (np.log(p) + h)
    expected = np.zeros(4)
    for tup in itertools.product(range(4), repeat=g):
        recs = [
            dict(
                tokens=np.array([0, s]),
                mask=np.array([0, 1]),
                logprobs=np.array([0.0, np.log(p[s])]),
                group_id="g",
                chain=i,
                segment=0,
                segments=2,
                reward=0.0,
            )
            for i, s in enumerate(tup)
        ]
        bonus = rb.summary_entropy_bonus(recs, beta)
        for s, a in zip(tup, bonus):
            grad_logp = np.eye(4)[s] - p  # d log softmax(theta)_s / d theta
            expected += np.prod(p[list(tup)]) * grad_logp * a / g
    np.testing.assert_allclose(expected, (g - 1) / g * beta * grad_h, rtol=1e-5, atol=1e-7)
