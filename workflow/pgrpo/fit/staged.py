"""Staged rises (beyond the paper; each reward function's mean curve is forecast with the laws of Section 3.5,
Eq. 14-16): a GRPO run with several reward functions (TRL logs each as ``rewards/<fn>/mean``) learns them in turn,
the format first, the correctness later. Forecast as one curve, the sum's plateau is read from the part that has
risen and a function still at its floor is taken as flat; forecast one by one, each with its own range, a function
that has not started to rise by the cut keeps its headroom in the plateau's interval.

:func:`forecast_components` forecasts each function with :func:`pgrpo.fit.forecast.forecast_run` and sums them
at every step ahead: the mean curve is the sum of the functions' mean curves (no forecast can time a rise that has
not begun); the draws (of the mean curve and of the logged value) are the sums of the functions' draws, paired at
random (independent), where a function that has not started (its smoothed level at the cut within three standard
errors of its start) rises, in half of its draws (:data:`RISE_PROBABILITY`: no log tells whether it will start
before the horizon), by its headroom (its declared top minus its level; undeclared: the largest span another
function has shown by the cut, said in the notes) at an onset uniform over the steps ahead. The plateau (the mean
over the run's last 10% of steps) then has an 80% interval from the function staying where it is to its reaching
its top, and the per-step intervals widen from the cut on. ``pgrpo forecast`` (key ``components``), the live
callback's plateau stop rule and the forecast benchmark's two-stage family all call it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.fit.baselines import Predictive
from pgrpo.fit.intervals import LEVELS, PLATEAU_SHARE, robust_noise_sd, sample_intervals

#: the chance a function that has not started rises within the horizon (no log can tell it before the rise begins)
RISE_PROBABILITY = 0.5

_COMPONENT = re.compile(r"^rewards/(?P<fn>[^/]+)/mean$")


def component_columns(columns: Sequence[str]) -> dict[str, str]:
    """Reward function name -> its column, for every ``rewards/<fn>/mean`` column."""
    out = {}
    for column in columns:
        match = _COMPONENT.match(str(column))
        if match:
            out[match["fn"]] = str(column)
    return out


@dataclass
class ComponentForecast:
    """One reward function at the cut: its forecast plateau (``mean, lo80, hi80``, headroom included), its level at
    the cut, whether it has started to rise, the headroom added and where its range came from."""

    function: str
    success: bool
    started: bool
    level_at_cut: float
    headroom: float
    range: tuple[float, float] | None
    range_source: str
    plateau: dict[str, float]


@dataclass
class StagedForecast:
    """The sum of the reward functions' forecasts: ``forecast`` (``step``, ``mean``: the summed mean curve),
    ``plateau`` (``mean, lo80, hi80``: the summed draws), each function's record and notes in words."""

    functions: list[str]
    forecast: dict[str, list[float]]
    plateau: dict[str, float]
    per_function: dict[str, ComponentForecast]
    notes: list[str] = field(default_factory=list)
    plateau_draws: np.ndarray | None = None
    #: the summed predictive at every step ahead (mean, intervals, draws; not in the JSON)
    prediction: Any = None

    def to_dict(self) -> dict[str, Any]:
        from pgrpo.fit.least_squares import finite_or_none

        return finite_or_none({
            "functions": self.functions, "forecast": self.forecast, "plateau": self.plateau,
            "per_function": {fn: {"success": c.success, "started": c.started, "level_at_cut": c.level_at_cut,
                                  "headroom": c.headroom, "range": list(c.range) if c.range else None,
                                  "range_source": c.range_source, "plateau": c.plateau}
                             for fn, c in self.per_function.items()},
            "notes": self.notes})


def has_started(y_early: np.ndarray, level_at_cut: float) -> bool:
    """Whether a function has moved by the cut: its smoothed level more than three standard errors (the noise s.d.
    from first differences, over the start mean's points) from the mean of its first 10% of points."""
    y = np.asarray(y_early, float)
    n_start = max(2, int(round(PLATEAU_SHARE * y.size)))
    start = float(np.mean(y[:n_start]))
    noise = robust_noise_sd(y)
    if not (math.isfinite(noise) and noise > 0):
        return bool(abs(level_at_cut - start) > 1e-12 or np.ptp(y) > 0)
    return bool(abs(level_at_cut - start) > 3.0 * noise * math.sqrt(2.0 / n_start))


def forecast_components(series: Mapping[str, tuple[np.ndarray, np.ndarray]], fraction: float,
                        total_steps: float | None, settings: Any = None,
                        ranges: Mapping[str, tuple[float, float]] | None = None,
                        total_range: tuple[float, float] | None = None, seed: int = 0,
                        cutoff_step: float | None = None) -> StagedForecast:
    """Forecast each reward function of ``series`` (fn -> (steps, values)) from its first ``fraction`` of steps (or
    up to ``cutoff_step``) and sum them (see the module docstring). ``ranges``: declared ranges per function;
    ``total_range``: the summed reward's declared range (the sum's draws are clipped to it).

    The sum is made draw by draw at every step ahead: each function's mean-curve and logged-value draws
    (:func:`pgrpo.fit.forecast.forecast_run`'s predictive), a function that has not started rising by its whole
    headroom in :data:`RISE_PROBABILITY` of its draws, at an onset uniform over the steps ahead (no log can time it),
    the functions' draws paired at random. The summed plateau is the mean of the summed mean-curve draws over the
    run's last 10% of steps, as a single forecast's is; ``prediction`` holds the summed predictive (the forecast
    benchmark scores it)."""
    from pgrpo.fit.forecast import forecast_run
    from pgrpo.fit.forecaster import ForecasterSettings, RunContext

    settings = settings or ForecasterSettings()
    ranges = dict(ranges or {})
    rng = np.random.default_rng(seed)
    runs, early_spans = {}, {}
    for fn, (t, y) in series.items():
        t, y = np.asarray(t, float), np.asarray(y, float)
        keep = np.isfinite(t) & np.isfinite(y)
        t, y = t[keep], y[keep]
        total = total_steps if total_steps is not None else (float(t[-1]) if t.size else None)
        context = RunContext(reward_range=ranges.get(fn))
        result = forecast_run(t, y, fraction, total, context, settings, f"rewards/{fn}/mean",
                              cutoff_step=cutoff_step)
        runs[fn] = (t, y, result)
        early = y[t <= result.cutoff_step]
        early_spans[fn] = float(np.ptp(early)) if early.size else 0.0
    notes: list[str] = []
    per: dict[str, ComponentForecast] = {}
    summed: Predictive | None = None
    tail = 1
    for fn, (t, y, result) in runs.items():
        if not result.success:
            notes.append(f"{fn}: {result.message}")
            per[fn] = ComponentForecast(fn, False, False, float("nan"), float("nan"), ranges.get(fn), "", {})
            continue
        early = y[t <= result.cutoff_step]
        started = has_started(early, result.level_at_cut)
        declared = ranges.get(fn)
        headroom, source = 0.0, "declared" if declared else "none"
        if not started:
            if declared:
                headroom = max(float(declared[1]) - result.level_at_cut, 0.0)
            else:
                others = [span for other, span in early_spans.items() if other != fn]
                headroom = max(others) if others else 0.0
                source = "the largest span another function shows by the cut"
                notes.append(f"{fn} has not started to rise by the cut; its range is not declared, so its headroom "
                             f"is taken as {headroom:.3g} ({source}); declare it with --component-range {fn} LO HI")
            if headroom > 0:
                notes.append(f"{fn} is still at {result.level_at_cut:.3g}: its headroom {headroom:.3g} widens the "
                             "plateau's interval (the rise cannot be timed before it starts)")
        p = predictive_on_grid(result.prediction, result.prediction.steps if summed is None else summed.steps)
        grid, mean_d, value_d = p.steps, p.mean_draws, p.value_draws
        if not started:
            n = max(mean_d.shape[0], value_d.shape[0])
            rises = rng.uniform(0.0, 1.0, n) < RISE_PROBABILITY
            onset = rng.uniform(grid[0], grid[-1], n)
            jump = (headroom * rises)[:, None] * (grid[None, :] >= onset[:, None])
            mean_d, value_d = mean_d + jump[:mean_d.shape[0]], value_d + jump[:value_d.shape[0]]
        if summed is None:
            tail = min(max(1, int(round(PLATEAU_SHARE * (result.n_early + grid.size)))), grid.size)
        own = np.mean(mean_d[:, -tail:], axis=1)
        per[fn] = ComponentForecast(fn, True, started, result.level_at_cut, headroom, declared, source,
                                    {"mean": float(result.plateau["mean"]), "lo80": float(np.quantile(own, 0.1)),
                                     "hi80": float(np.quantile(own, 0.9))})
        mean_d, value_d = rng.permutation(mean_d), rng.permutation(value_d)
        if summed is None:
            summed = Predictive("forecaster: per reward fn, summed", grid, p.mean, {}, mean_d, value_d,
                                np.asarray(p.fitted, float), float("nan"))
        else:
            k, j = min(summed.mean_draws.shape[0], mean_d.shape[0]), min(summed.value_draws.shape[0], value_d.shape[0])
            summed.mean = summed.mean + p.mean
            if np.shape(p.fitted) == np.shape(summed.fitted):
                summed.fitted = summed.fitted + p.fitted
            summed.mean_draws = summed.mean_draws[:k] + mean_d[:k]
            summed.value_draws = summed.value_draws[:j] + value_d[:j]
    if summed is None:
        return StagedForecast(list(series), {}, {}, per, notes or ["no reward function could be forecast"])
    if total_range is not None:
        summed.mean_draws = np.clip(summed.mean_draws, *total_range)
        summed.value_draws = np.clip(summed.value_draws, *total_range)
    summed.intervals = sample_intervals(summed.value_draws, LEVELS)
    draws = np.mean(summed.mean_draws[:, -tail:], axis=1)
    plateau = {"mean": float(sum(c.plateau["mean"] for c in per.values() if c.success)),
               "lo80": float(np.quantile(draws, 0.1)), "hi80": float(np.quantile(draws, 0.9))}
    forecast = {"step": summed.steps.tolist(), "mean": summed.mean.tolist(),
                **{key: summed.intervals[key].tolist() for key in sorted(summed.intervals)}}
    return StagedForecast(list(series), forecast, plateau, per, notes, draws, summed)


def predictive_on_grid(prediction: Predictive, grid: np.ndarray) -> Predictive:
    """``prediction`` at the steps ``grid``: as it is where its steps are the grid (the common case: every reward
    function logged at every step), else its mean and draws linearly interpolated and its intervals taken again
    from the interpolated value draws."""
    if prediction.steps.shape == grid.shape and np.array_equal(prediction.steps, grid):
        return prediction

    def on_grid(rows: np.ndarray) -> np.ndarray:
        return np.stack([np.interp(grid, prediction.steps, row) for row in np.asarray(rows, float)])

    values = on_grid(prediction.value_draws)
    return replace(prediction, steps=grid, mean=on_grid(prediction.mean[None, :])[0],
                   mean_draws=on_grid(prediction.mean_draws), value_draws=values,
                   intervals=sample_intervals(values, LEVELS))
