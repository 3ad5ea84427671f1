"""pass@k (Chen et al. 2021) against hand-computed values and a brute-force subset count."""

import itertools
import math

import pytest

from rl.episodes.passk import mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (5, 0, 1, 0.0),  # c = 0: nothing can pass
        (10, 0, 10, 0.0),  # c = 0 and n = k
        (3, 1, 3, 1.0),  # n = k with one correct: the single 3-subset holds it
        (3, 3, 3, 1.0),
        (10, 3, 1, 0.3),  # k = 1 is c / n
        (10, 3, 2, 1 - 21 / 45),  # 1 - C(7,2)/C(10,2)
        (4, 2, 2, 5 / 6),  # 1 - C(2,2)/C(4,2)
        (5, 4, 2, 1.0),  # n - c < k
        (20, 5, 10, 1 - math.comb(15, 10) / math.comb(20, 10)),
    ],
)
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_pass_at_k_equals_subset_enumeration():
    """The estimator is the fraction of k-subsets of the n samples holding a correct one."""
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(samples, k))
                brute = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_mean_and_monotone_in_k():
    counts = [(10, 0), (10, 1), (10, 5), (10, 10)]
    values = [mean_pass_at_k(counts, k) for k in range(1, 11)]
    assert values[0] == pytest.approx((0 + 0.1 + 0.5 + 1) / 4)
    assert all(a <= b + 1e-15 for a, b in zip(values, values[1:]))
    assert values[-1] == pytest.approx(0.75)  # k = n: any correct sample counts


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (3, -1, 1), (3, 1, 4), (3, 1, 0)])
def test_pass_at_k_rejects_bad_counts(n, c, k):
    with pytest.raises(ValueError, match="pass_at_k"):
        pass_at_k(n, c, k)
