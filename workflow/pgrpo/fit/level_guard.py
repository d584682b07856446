"""The forecaster's guard against a law the early window cannot carry (beyond the paper; the laws are those of
Section 3.5, Eq. 14-16, averaged in :mod:`pgrpo.fit.forecaster`).

At a quarter of a run the window often holds a rise whose end it has not seen: a saturation law then extrapolates
the rise's slope (a plateau of 0.86 for a run that levels off at 0.44), and with a handful of points (an eval
column logged every 25 steps has four at step 75) only the flat law can be fitted at all, which is the window's
mean, not its end. The guard combines the law mixture with the level a user would carry forward (persistence: the
mean of the window's last 10%), weighted by how each did on the part of the window the forecaster has already seen
(a rolling-origin backtest: fitted on the first half, scored on the second half; Bates & Granger 1969 inverse-MSE
weights, ``w_law = mse_level / (mse_law + mse_level)``). Below ``min_law_points`` early points the level alone is
used. On noisy points both MSEs carry the noise variance, the same for law and level, which pulls the weights toward
one half; mode ``excess`` subtracts it first (:func:`excess_mse_weight`), weighting by the error against the mean
curve. In every case the predictive spread stays the mixture's (its noise and parameter band): only the centre moves,
so the intervals keep their calibration.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pgrpo.fit.baselines import Predictive, baseline_forecast
from pgrpo.fit.intervals import LEVELS, rmse, robust_noise_sd, sample_intervals


@dataclass(frozen=True)
class GuardWeight:
    """How the centre was chosen: the law mixture's weight against the carried-forward level, the backtest's RMSEs
    (law, level) on the seen window's second half, and why, in words."""

    law_weight: float
    backtest_law_rmse: float
    backtest_level_rmse: float
    reason: str


def guard_weight(t: np.ndarray, y: np.ndarray, mixture: Callable[[np.ndarray, np.ndarray, np.ndarray], Predictive],
                 mode: str, min_law_points: int) -> GuardWeight:
    """The law mixture's weight: 1 (``mode = "off"``), 0 below ``min_law_points`` points, else 1 (``"points"``) or
    from the backtest (``"blend"``: inverse-MSE; ``"excess"``: inverse MSE less the noise variance,
    :func:`excess_mse_weight`; ``"switch"``: 1 if the laws beat the level on the seen half, else 0)."""
    nan = float("nan")
    if mode == "off":
        return GuardWeight(1.0, nan, nan, "guard off")
    if t.size < min_law_points:
        return GuardWeight(0.0, nan, nan, f"{t.size} early points (< {min_law_points}): too few to fit a saturation "
                                          "law, the level of the window's end is carried forward")
    if mode == "points":
        return GuardWeight(1.0, nan, nan, f"{t.size} early points: the law mixture")
    half = t.size // 2
    ours = mixture(t[:half], y[:half], t[half:])
    level = baseline_forecast("persistence", t[:half], y[:half], t[half:], draws=10)
    a, b = rmse(y[half:], ours.mean), rmse(y[half:], level.mean)
    if not (math.isfinite(a) and math.isfinite(b)):
        return GuardWeight(1.0, a, b, "backtest not possible: the law mixture alone")
    if mode == "switch":
        weight = 1.0 if a <= b else 0.0
    elif mode == "excess":
        noise = robust_noise_sd(y)
        weight = excess_mse_weight(a * a, b * b, noise * noise if math.isfinite(noise) else 0.0, t.size - half)
        return GuardWeight(float(weight), a, b, f"backtest on the seen window's second half: law mixture RMSE "
                                                f"{a:.3g}, carried-forward level {b:.3g}, noise s.d. {noise:.3g} "
                                                f"(subtracted from both); law weight {weight:.2f}")
    else:
        weight = b * b / (a * a + b * b) if a * a + b * b > 0 else 0.5
    return GuardWeight(float(weight), a, b, f"backtest on the seen window's second half: law mixture RMSE {a:.3g}, "
                                            f"carried-forward level {b:.3g}; law weight {weight:.2f}")


def excess_mse_weight(mse_law: float, mse_level: float, noise_var: float, n_scored: int) -> float:
    """Bates-Granger's inverse-MSE weight of the law against the level on the mean curve, not the noise: on noisy
    points ``E mse = bias^2 + var + sigma^2`` for either forecast, so the noise variance ``sigma^2`` (the same for
    both) is subtracted first, each excess floored at ``sigma^2 / n_scored`` (the resolution of an ``n``-point mean:
    excesses below it cannot be told apart), and ``w_law = e_level / (e_law + e_level)``."""
    floor = noise_var / max(n_scored, 1)
    e_law = max(mse_law - noise_var, 0.0) + floor
    e_level = max(mse_level - noise_var, 0.0) + floor
    total = e_law + e_level
    return e_level / total if total > 0 else 0.5


def recentre(prediction: Predictive, t: np.ndarray, y: np.ndarray, weight: GuardWeight,
             bounds: tuple[float, float] | None) -> Predictive:
    """``prediction`` with its centre moved to ``w * law + (1 - w) * level``, its draws moved with it (the spread
    unchanged) and clipped to ``bounds``; the guard's weight and reason in ``details['guard']``."""
    if weight.law_weight >= 1.0 or not prediction.success or t.size == 0:
        prediction.details = {**(prediction.details or {}), "guard": weight.__dict__}
        return prediction
    level = baseline_forecast("persistence", t, y, prediction.steps, draws=10).mean
    centre = weight.law_weight * prediction.mean + (1.0 - weight.law_weight) * level
    shift = centre - prediction.mean
    value_draws = prediction.value_draws + shift[None, :]
    mean_draws = prediction.mean_draws + shift[None, :]
    if bounds is not None:
        value_draws = np.clip(value_draws, *bounds)
        mean_draws = np.clip(mean_draws, *bounds)
    details = {**(prediction.details or {}), "guard": weight.__dict__}
    details["notes"] = [*details.get("notes", []), weight.reason]
    return dataclasses.replace(prediction, mean=centre, intervals=sample_intervals(value_draws, LEVELS),
                               mean_draws=mean_draws, value_draws=value_draws, details=details)


def ses_drift_sd(alpha: float, one_step_sd: float, ahead: np.ndarray) -> np.ndarray:
    """The s.d. of the level's own change ``ahead`` logged intervals past the window's end under simple exponential
    smoothing's state-space model ETS(A,N,N) (Hyndman et al. 2008, Ch. 6: the ``h``-step forecast variance is
    ``sigma^2 (1 + alpha^2 (h - 1))``; the ``1`` is the next point's own noise, the rest the level's random walk):
    ``sigma alpha sqrt(h - 1)`` for ``h >= 1``, 0 before."""
    h = np.maximum(np.asarray(ahead, float), 1.0)
    return float(one_step_sd) * float(alpha) * np.sqrt(h - 1.0)


def smoothed_level(y: np.ndarray) -> tuple[float, float, float]:
    """The level at the window's end by simple exponential smoothing (``L_i = L_{i-1} + alpha (y_i - L_{i-1})``),
    ``alpha`` the one with the least one-step-ahead squared error on a grid in (0, 1]: the window's mean when the
    window is flat noise (small ``alpha``), its recent values when it drifts. Returns ``(level, its s.d., alpha)``,
    the s.d. ``sigma_e sqrt(alpha / (2 - alpha))`` (the stationary s.d. of the smoothed level for white noise of
    s.d. ``sigma_e``, the one-step errors' r.m.s.)."""
    y = np.asarray(y, float)
    if y.size < 3:
        level = float(np.mean(y)) if y.size else float("nan")
        return level, float("nan"), 1.0
    alphas = np.linspace(0.02, 1.0, 50)
    level = np.full(alphas.size, float(y[0]))
    sse = np.zeros(alphas.size)
    for value in y[1:]:
        error = value - level
        sse += error * error
        level = level + alphas * error
    best = int(np.argmin(sse))
    alpha = float(alphas[best])
    sigma = math.sqrt(float(sse[best]) / (y.size - 1))
    return float(level[best]), sigma * math.sqrt(alpha / (2.0 - alpha)), alpha
