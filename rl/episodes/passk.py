"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on
Code", eq. 1): with n samples of which c pass,

    pass@k = 1 - C(n - c, k) / C(n, k)

the probability that at least one of k samples drawn without replacement from the n passes.
Computed as 1 - prod_{i=n-c+1}^{n} (1 - k / i), which never forms the huge binomials.
"""

from __future__ import annotations

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem. n >= k samples, c of them correct."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def mean_pass_at_k(counts: list[tuple[int, int]], k: int) -> float:
    """Mean of pass@k over problems given (n, c) per problem."""
    if not counts:
        raise ValueError("mean_pass_at_k: no problems")
    return float(np.mean([pass_at_k(n, c, k) for n, c in counts]))
