"""A reward that has not started to rise keeps its headroom in the forecast (beyond the paper; issue 21, item 3):
no log can time a rise that has not begun, so a curve still at its start when the window ends rises, in half of the
draws, by its headroom (its declared top minus its level) at an onset uniform over the steps ahead.

:func:`has_started` tells a curve that has moved from one still at its start; :func:`rise_by_headroom` makes the
rise; :func:`waiting_reward` adds it to a single reward's forecast (the forecaster's ``headroom`` lever,
:func:`pgrpo.fit.forecaster.forecast_early_window`); :mod:`pgrpo.fit.staged` adds it to each reward function that
waits in a sum.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from pgrpo.fit.baselines import Predictive
from pgrpo.fit.intervals import LEVELS, PLATEAU_SHARE, robust_noise_sd, sample_intervals

#: the chance a function that has not started rises within the horizon (no log can tell it before the rise begins)
RISE_PROBABILITY = 0.5


def start_level(y_early: np.ndarray) -> float:
    """The mean of a function's first 10% of early points (two at least)."""
    y = np.asarray(y_early, float)
    return float(np.mean(y[:max(2, int(round(PLATEAU_SHARE * y.size)))]))


def has_started(y_early: np.ndarray, level_at_cut: float) -> bool:
    """Whether a function has moved by the cut: its smoothed level more than three standard errors (the noise s.d.
    from first differences, over the start mean's points) from the mean of its first 10% of points."""
    y = np.asarray(y_early, float)
    n_start = max(2, int(round(PLATEAU_SHARE * y.size)))
    start = start_level(y)
    noise = robust_noise_sd(y)
    if not (math.isfinite(noise) and noise > 0):
        return bool(abs(level_at_cut - start) > 1e-12 or np.ptp(y) > 0)
    return bool(abs(level_at_cut - start) > 3.0 * noise * math.sqrt(2.0 / n_start))


def rise_coins(rng: np.random.Generator) -> np.ndarray:
    """One coin per draw (cycled by :func:`rise_by_headroom`), True with :data:`RISE_PROBABILITY`: the next stage
    begins within the horizon in that draw."""
    return rng.uniform(0.0, 1.0, 1 << 16) < RISE_PROBABILITY


def rise_by_headroom(n: int, grid: np.ndarray, headroom: float, coins: np.ndarray,
                     rng: np.random.Generator, onset: np.ndarray | None = None) -> np.ndarray:
    """The rise added to ``n`` draws on the steps ``grid`` of a curve that has not started: ``headroom`` from an
    onset uniform over the steps ahead (``onset``: given, one per draw), in the draws whose coin (``coins``,
    cycled; True with :data:`RISE_PROBABILITY`) says the next stage begins within the horizon, nothing in the
    others."""
    if onset is None:
        onset = rng.uniform(grid[0], grid[-1], n)
    return (headroom * coins[np.arange(n) % coins.size])[:, None] * (grid[None, :] >= np.asarray(onset)[:n, None])


def waiting_reward(prediction: Predictive, y_early: np.ndarray, level_at_cut: float,
                   reward_range: tuple[float, float], seed: int = 0) -> Predictive:
    """A single reward's forecast (:func:`pgrpo.fit.forecaster.forecast_early_window`, ``settings.headroom``) with
    the headroom of a reward that has not started to rise by the cut (:func:`has_started`) added to its draws as a
    waiting function's is in the sum (:func:`rise_by_headroom`: its declared top minus its level, in
    :data:`RISE_PROBABILITY` of the draws, at an onset uniform over the steps ahead; the draws clipped to the range),
    so that a flat early window with room above it is not read as a plateau the run cannot leave. The mean curve
    (the point forecast) is left as it is: no forecast can time a rise that has not begun. A reward that has started,
    or has no room above its level, is returned as it is."""
    if not prediction.success or has_started(y_early, level_at_cut):
        return prediction
    lo, hi = float(reward_range[0]), float(reward_range[1])
    headroom = max(hi - float(level_at_cut), 0.0)
    if not headroom > 0:
        return prediction
    rng = np.random.default_rng([seed, 1])  # a stream of its own, not the forecaster's
    coins = rise_coins(rng)
    grid = prediction.steps
    # draw i of the mean curve and of the logged value (its noise around that mean) rise together
    n_mean, n_value = prediction.mean_draws.shape[0], prediction.value_draws.shape[0]
    onset = rng.uniform(grid[0], grid[-1], max(n_mean, n_value))
    mean_d = np.clip(prediction.mean_draws + rise_by_headroom(n_mean, grid, headroom, coins, rng, onset), lo, hi)
    value_d = np.clip(prediction.value_draws + rise_by_headroom(n_value, grid, headroom, coins, rng, onset), lo, hi)
    details = dict(prediction.details or {})
    details["waiting"] = {"level_at_cut": float(level_at_cut), "headroom": headroom,
                          "rise_probability": RISE_PROBABILITY}
    details["notes"] = list(details.get("notes", [])) + [
        f"the reward has not started to rise by the cut (still at {level_at_cut:.3g}): its headroom {headroom:.3g} "
        f"to the declared top {hi:g} widens the interval (a rise cannot be timed before it starts)"]
    return replace(prediction, mean_draws=mean_d, value_draws=value_d,
                   intervals=sample_intervals(value_d, LEVELS), details=details)
