"""Noise levels, predictive intervals and their scores for forecasts of a reward curve (beyond the paper).

The logged reward of a step is a batch mean, so around the mean trajectory of Theorem 7 it carries two noises: the
sampling noise of the batch, ``sqrt(p (1 - p) / B)`` for a binary reward over ``B`` completions (``(p - lo)(hi - p)``
for a reward bounded in ``[lo, hi]``), and the fluctuation of the order parameter itself, ``<e^2> ∝ 1/G``
(Prop. 10, Eq. 12). Where neither is declared, the noise is read off the log: a robust scale of its first
differences (``1.4826 MAD / sqrt 2``, blind to a slow trend).

Scores (Gneiting & Raftery 2007): held-out RMSE; empirical coverage of a central interval; the interval score
``(u - l) + (2/alpha)(l - y) 1[y < l] + (2/alpha)(y - u) 1[y > u]`` of a ``1 - alpha`` interval; the CRPS of a
sample ``x`` of the predictive, ``E|X - y| - E|X - X'| / 2``. Plateau: the mean of the last 10% of a curve; t90:
the first step at which a curve has made 90% of its change from its start to that plateau.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: the central intervals every forecast reports
LEVELS: tuple[float, ...] = (0.8, 0.95)


#: the share of a curve's points (at its end) whose mean is its plateau
PLATEAU_SHARE = 0.1


def robust_noise_sd(y: Sequence[float], ddof: int = 0) -> float:
    """The noise s.d. of a series from its first differences (``Var(y_i - y_{i-1}) = 2 sigma^2`` for independent
    noise), ``1.4826 median|dy - median dy| / sqrt 2`` so that steps and spikes do not inflate it; the plain s.d. of
    the differences (``ddof``) when more than half of them are equal (a discrete reward: a binary reward near 0 has
    mostly zero differences), NaN for < 3 points. The one noise estimate of the forecast, the diagnoses and the
    K_ref sweep."""
    y = np.asarray(y, float)
    y = y[np.isfinite(y)]
    if y.size < 3:
        return float("nan")
    d = np.diff(y)
    mad = float(np.median(np.abs(d - np.median(d))))
    sd = 1.4826 * mad / math.sqrt(2.0)
    if sd <= 0:
        sd = float(np.std(d, ddof=ddof)) / math.sqrt(2.0)
    return sd


def binomial_noise_sd(mean: np.ndarray, reward_range: tuple[float, float], batch: float) -> np.ndarray:
    """The s.d. of the mean of ``batch`` rewards each in ``{lo, hi}`` with mean ``mean``: ``sqrt((m-lo)(hi-m)/B)``
    (the largest s.d. any reward bounded in ``[lo, hi]`` with that mean can have)."""
    lo, hi = reward_range
    m = np.clip(np.asarray(mean, float), lo, hi)
    return np.sqrt(np.maximum((m - lo) * (hi - m), 0.0) / float(batch))


def plateau_of(values: Sequence[float], share: float = PLATEAU_SHARE) -> float:
    """Mean of the last ``share`` of the finite values (at least one)."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan")
    return float(np.mean(v[-max(1, int(round(share * v.size))):]))


def band_holding(draws: Sequence[float], point: float, level: float = 0.8) -> dict[str, float]:
    """The central ``level`` interval of ``draws`` (``lo80``, ``hi80`` for 0.8), widened to hold ``point`` where the
    point forecast falls outside it: a plateau or t90 is read off the mean curve, the interval off the draws, and a
    mixture of a flat law and a rising one (or a rise drawn in most draws) can leave the curve's value below or above
    most draws. A point outside its own interval is no forecast to decide with; the widened interval runs from the
    curve drawn to the draws' quantile. A NaN point leaves the quantiles as they are."""
    draws = np.asarray(draws, float)
    draws = draws[np.isfinite(draws)]
    tail = (1.0 - level) / 2.0
    key = f"{round(100 * level)}"
    if not draws.size:
        return {f"lo{key}": float("nan"), f"hi{key}": float("nan")}
    lo, hi = (float(q) for q in np.quantile(draws, [tail, 1.0 - tail]))
    if np.isfinite(point):
        lo, hi = min(lo, float(point)), max(hi, float(point))
    return {f"lo{key}": lo, f"hi{key}": hi}


def moving_average(y: Sequence[float], window: int) -> np.ndarray:
    """Centred moving average (the ends average the points they have)."""
    y = np.asarray(y, float)
    if window <= 1 or y.size == 0:
        return y.copy()
    kernel = np.ones(int(window))
    num = np.convolve(y, kernel, mode="same")
    den = np.convolve(np.ones_like(y), kernel, mode="same")
    return num / den


def time_to_fraction_of_change(steps: Sequence[float], path: Sequence[float], start: float, plateau: float,
                               fraction: float = 0.9) -> float:
    """First step at which ``path`` has made ``fraction`` of its change from ``start`` to ``plateau`` (either
    direction); NaN if it never does or there is no change."""
    steps, path = np.asarray(steps, float), np.asarray(path, float)
    change = plateau - start
    if not (math.isfinite(change) and change != 0):
        return float("nan")
    progress = (path - start) / change
    above = np.nonzero(progress >= fraction)[0]
    return float(steps[above[0]]) if above.size else float("nan")


def rmse(y: np.ndarray, m: np.ndarray) -> float:
    y, m = np.asarray(y, float), np.asarray(m, float)
    return float(np.sqrt(np.mean((y - m) ** 2))) if y.size else float("nan")


def coverage(y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Share of ``y`` inside ``[lo, hi]``."""
    y = np.asarray(y, float)
    return float(np.mean((y >= lo) & (y <= hi))) if y.size else float("nan")


def interval_score(y: np.ndarray, lo: np.ndarray, hi: np.ndarray, level: float) -> float:
    """Mean interval score of the central ``level`` interval (lower is better; Gneiting & Raftery 2007, Eq. 43)."""
    y, lo, hi = np.asarray(y, float), np.asarray(lo, float), np.asarray(hi, float)
    alpha = 1.0 - level
    score = (hi - lo) + (2.0 / alpha) * np.maximum(lo - y, 0.0) + (2.0 / alpha) * np.maximum(y - hi, 0.0)
    return float(np.mean(score)) if y.size else float("nan")


def crps_from_samples(samples: np.ndarray, y: np.ndarray) -> float:
    """Mean CRPS over the points: ``samples`` has shape (draws, points); the energy form with sorted draws."""
    x = np.sort(np.asarray(samples, float), axis=0)
    y = np.asarray(y, float)
    if y.size == 0:
        return float("nan")
    n = x.shape[0]
    term1 = np.mean(np.abs(x - y[None, :]), axis=0)
    weights = (2.0 * np.arange(1, n + 1) - n - 1)[:, None]
    term2 = np.sum(weights * x, axis=0) / (n * n)  # E|X - X'| / 2 for the empirical distribution
    return float(np.mean(term1 - term2))


def gaussian_samples(mean: np.ndarray, sd: np.ndarray, draws: int = 400, seed: int = 0) -> np.ndarray:
    """Draws of a pointwise Gaussian predictive (for CRPS of the Gaussian baselines)."""
    rng = np.random.default_rng(seed)
    mean, sd = np.asarray(mean, float), np.asarray(sd, float)
    return mean[None, :] + sd[None, :] * rng.standard_normal((draws, mean.size))


def gaussian_intervals(mean: np.ndarray, sd: np.ndarray, levels: Sequence[float] = LEVELS) -> dict[str, np.ndarray]:
    """``lo80, hi80, lo95, hi95`` of a pointwise Gaussian."""
    from scipy.stats import norm

    out: dict[str, np.ndarray] = {}
    for level in levels:
        z = float(norm.ppf(0.5 + level / 2.0))
        tag = f"{round(level * 100):d}"
        out[f"lo{tag}"], out[f"hi{tag}"] = mean - z * sd, mean + z * sd
    return out


def sample_intervals(samples: np.ndarray, levels: Sequence[float] = LEVELS) -> dict[str, np.ndarray]:
    """``lo80, hi80, lo95, hi95`` from draws of shape (draws, points)."""
    out: dict[str, np.ndarray] = {}
    for level in levels:
        tag = f"{round(level * 100):d}"
        out[f"lo{tag}"], out[f"hi{tag}"] = np.quantile(samples, [0.5 - level / 2.0, 0.5 + level / 2.0], axis=0)
    return out
