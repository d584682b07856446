"""pass@k (Section 4.3, Table 1): the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)``,
per problem and averaged over a benchmark, and the pass@k curve (k = 1..n) of a benchmark from its per-problem
correct counts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

#: the key of a pass@k value in an evaluation record ("pass@1", "pass@5", ...)
PASS_AT_K_KEY = re.compile(r"^pass@(\d+)$")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct among ``n`` samples: ``1 - C(n-c, k) / C(n, k)``.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` (Chen et al., 2021, Fig. 3), which is exact and avoids huge
    binomials; 1 when ``n - c < k`` (every k-subset holds a correct sample).
    """
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError("pass_at_k takes integers n, c, k")
    if k < 1 or n < k or c < 0 or c > n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


@dataclass(frozen=True)
class PassAtK:
    """pass@k over a benchmark: the mean over problems and its standard error (s.d. over problems / sqrt(P))."""

    k: int
    value: float
    stderr: float
    n_problems: int


def benchmark_pass_at_k(correct_counts: Sequence[int], n: int, k: int) -> PassAtK:
    """Mean of :func:`pass_at_k` over problems with ``correct_counts[p]`` correct among ``n`` samples each."""
    if not correct_counts:
        raise ValueError("no problems to score")
    per_problem = [pass_at_k(n, int(c), k) for c in correct_counts]
    p = len(per_problem)
    mean = sum(per_problem) / p
    var = sum((x - mean) ** 2 for x in per_problem) / (p - 1) if p > 1 else float("nan")
    return PassAtK(k=k, value=mean, stderr=math.sqrt(var / p) if p > 1 else float("nan"), n_problems=p)


def pass_at_k_curve(correct_counts: Sequence[int], n: int) -> list[float]:
    """The benchmark's pass@k for every k = 1..n (the unbiased estimator averaged over problems): the pass@k curve."""
    if not correct_counts:
        raise ValueError("no problems to score")
    if any(not 0 <= int(c) <= n for c in correct_counts):
        raise ValueError(f"a correct count is outside [0, n = {n}]")
    return [sum(pass_at_k(n, int(c), k) for c in correct_counts) / len(correct_counts) for k in range(1, n + 1)]
