"""Staged rises (beyond the paper; each reward function's mean curve is forecast with the laws of Section 3.5,
Eq. 14-16): a GRPO run with several reward functions (TRL logs each as ``rewards/<fn>/mean``) learns them in turn,
the format first, the correctness later. Forecast as one curve, the sum's plateau is read from the part that has
risen and a function still at its floor is taken as flat; forecast one by one, each with its own range, a function
that has not started to rise by the cut keeps its headroom in the plateau's interval.

:func:`forecast_components` forecasts each function with :func:`pgrpo.fit.forecast.forecast_run` and sums them:
the mean curve is the sum of the functions' mean curves (no forecast can time a rise that has not begun); the
plateau's draws are the sum of the functions' draws (independent), where a function that has not started (its
smoothed level at the cut within three standard errors of its start) adds, in half of the draws
(:data:`RISE_PROBABILITY`: no log tells whether it will start before the horizon), its headroom (its declared top
minus its level; undeclared: the largest span another function has shown by the cut, said in the notes): the
plateau's 80% interval then reaches from the function staying where it is to its reaching its top.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.fit.intervals import PLATEAU_SHARE, robust_noise_sd

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
                        total_range: tuple[float, float] | None = None, seed: int = 0) -> StagedForecast:
    """Forecast each reward function of ``series`` (fn -> (steps, values)) from its first ``fraction`` of steps and
    sum them (see the module docstring). ``ranges``: declared ranges per function; ``total_range``: the summed
    reward's declared range (the sum's draws are clipped to it)."""
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
        runs[fn] = (t, y, forecast_run(t, y, fraction, total, context, settings, f"rewards/{fn}/mean"))
        cut = fraction * (total if total is not None else 0.0)
        early = y[t <= cut]
        early_spans[fn] = float(np.ptp(early)) if early.size else 0.0
    notes: list[str] = []
    per: dict[str, ComponentForecast] = {}
    draws_sum = None
    grid, mean_sum = None, None
    for fn, (t, y, result) in runs.items():
        if not result.success:
            notes.append(f"{fn}: {result.message}")
            per[fn] = ComponentForecast(fn, False, False, float("nan"), float("nan"), ranges.get(fn), "", {})
            continue
        early = y[t <= result.cutoff_step]
        started = has_started(early, result.level_at_cut)
        declared = ranges.get(fn)
        headroom, source = 0.0, "declared" if declared else "none"
        draws = np.asarray(result.plateau_draws, float)
        if not started:
            if declared:
                headroom = max(float(declared[1]) - result.level_at_cut, 0.0)
            else:
                others = [span for other, span in early_spans.items() if other != fn]
                headroom = max(others) if others else 0.0
                source = "the largest span another function shows by the cut"
                notes.append(f"{fn} has not started to rise by the cut; its range is not declared, so its headroom "
                             f"is taken as {headroom:.3g} ({source}); declare it with --component-range {fn} LO HI")
            rises = rng.uniform(0.0, 1.0, draws.size) < RISE_PROBABILITY
            draws = draws + np.where(rises, headroom, 0.0)
            if headroom > 0:
                notes.append(f"{fn} is still at {result.level_at_cut:.3g}: its headroom {headroom:.3g} widens the "
                             "plateau's interval (the rise cannot be timed before it starts)")
        per[fn] = ComponentForecast(fn, True, started, result.level_at_cut, headroom, declared, source,
                                    {"mean": float(result.plateau["mean"]),
                                     "lo80": float(np.quantile(draws, 0.1)), "hi80": float(np.quantile(draws, 0.9))})
        draws = rng.permutation(draws)
        draws_sum = draws if draws_sum is None else draws_sum + draws[:draws_sum.size]
        steps = np.asarray(result.forecast["step"], float)
        mean = np.asarray(result.forecast["mean"], float)
        if grid is None:
            grid, mean_sum = steps, mean.copy()
        else:
            mean_sum = mean_sum + np.interp(grid, steps, mean)
    if draws_sum is None:
        return StagedForecast(list(series), {}, {}, per, notes or ["no reward function could be forecast"])
    if total_range is not None:
        draws_sum = np.clip(draws_sum, *total_range)
    plateau_mean = float(sum(c.plateau["mean"] for c in per.values() if c.success))
    plateau = {"mean": plateau_mean, "lo80": float(np.quantile(draws_sum, 0.1)),
               "hi80": float(np.quantile(draws_sum, 0.9))}
    return StagedForecast(list(series), {"step": grid.tolist(), "mean": mean_sum.tolist()}, plateau, per, notes,
                          draws_sum)
