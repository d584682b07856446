"""A reward function's two values, read off its logged mean and s.d. (beyond the paper; the headroom of a staged
rise, issue 21 item 3, where no range is declared).

TRL logs, at every step, each reward function's mean ``m`` and sample s.d. ``s`` over the step's ``n`` completions
(``rewards/<fn>/mean`` and ``/std``). A function that pays one of two values ``a < b`` (a correctness check, a format
match, a penalty) has, by the Bhatia-Davis equality, population variance ``(b - m)(m - a)`` at every step, and its
sample variance is ``s^2 = n/(n - 1)`` of that: so ``m^2 = (a + b) m - ab - k s^2`` with ``k = (n - 1)/n`` holds
exactly at every logged step, a linear equation in ``(a + b, ab, k)``. Fitted by least squares over the steps whose
completions were not all alike (``s > 0``), an exact fit (residual within the log's rounding) with ``k`` a
completion count's ``(n - 1)/n`` (``n >= 2``) says that the function took exactly two values, ``a`` and ``b``,
over those steps: some completion was paid ``b``, so the function can pay at least ``b``; where it pays more
values than the two seen so far, ``[a, b]`` is inside its range. Read on the 134 reward functions of the forecast
benchmark's public logs, 34 fits are exact, every one inside the range the logs' sources state
(``benchmarks/forecast/data/ranges.json``, read from the reward code blind to the logs) and 31 equal to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: the fit is exact when its r.m.s. residual is within this share of the s.d. of ``m^2`` (logs round to ~6 digits)
EXACT = 1e-3
#: ``k = (n - 1)/n`` for ``n >= 2`` completions per step: at least 1/2 (a little less for the log's rounding)
K_MIN, K_MAX = 0.45, 1.0 + 1e-6
#: steps with ``s > 0`` and distinct means the fit needs (three unknowns, and a margin)
MIN_STEPS = 5


@dataclass(frozen=True)
class TwoValues:
    """The two values a function took (``low < high``), the completions per step ``n`` the fit implies and the
    number of steps it was read on."""

    low: float
    high: float
    completions: float
    steps: int


def two_values(means: Sequence[float], sds: Sequence[float]) -> TwoValues | None:
    """The two values of a function whose logged ``means`` and sample ``sds`` (one per step) fit the two-valued law
    exactly (module docstring); None where they do not, or where too few steps vary to tell."""
    m, s = np.asarray(means, float), np.asarray(sds, float)
    keep = np.isfinite(m) & np.isfinite(s) & (s > 0)
    m, v = m[keep], s[keep] ** 2
    if m.size < MIN_STEPS or np.unique(np.round(m, 9)).size < 3:
        return None
    design = np.column_stack([m, -np.ones_like(m), -v])
    target = m**2
    (p, q, k), *_ = np.linalg.lstsq(design, target, rcond=None)
    residual = float(np.sqrt(np.mean((target - design @ np.array([p, q, k])) ** 2)))
    spread = float(np.std(target))
    disc = p * p - 4.0 * q
    if not (spread > 0 and residual <= EXACT * spread and K_MIN <= k <= K_MAX and disc > 0):
        return None
    low, high = (p - math.sqrt(disc)) / 2.0, (p + math.sqrt(disc)) / 2.0
    margin = EXACT * (high - low)
    if np.any(m < low - margin) or np.any(m > high + margin):
        return None
    unit = 10.0 ** (math.floor(math.log10(high - low)) - 4)  # the fit is exact to the log's ~6 digits: snap to 5
    low, high = round(low / unit) * unit + 0.0, round(high / unit) * unit + 0.0
    return TwoValues(float(low), float(high), 1.0 / (1.0 - k) if k < 1.0 else float("inf"), int(m.size))
