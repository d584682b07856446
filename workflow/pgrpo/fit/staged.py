"""Staged rises (beyond the paper; each reward function's mean curve is forecast with the laws of Section 3.5, Eq.
14-16): a GRPO run with several reward functions (TRL logs each as ``rewards/<fn>/mean``) learns them in turn, the
format first, the correctness later. Forecast as one curve, the sum's plateau is read from the part that has risen
and a function still at its floor is taken as flat; forecast one by one, each with its own range, a function that
has not started to rise by the cut keeps its headroom in the plateau's interval.

:func:`forecast_components` forecasts each function with :func:`pgrpo.fit.forecast.forecast_run` and sums them at
every step ahead: the mean curve is the sum of the functions' mean curves, each its laws' best fits (no forecast can
time a rise that has not begun, and a declared range's bounds are not where a function is going: chosen on the real
dev logs with their sources' ranges declared, mean-curve error 0.771 -> 0.708 of persistence's, plateau 0.718 ->
0.678, against each function's draws' mean; the generated two-stage curves unchanged); the draws (of the mean curve
and of the logged value) are the sums of the functions' draws, paired at random (independent), where a function that
has not started (its smoothed level at the cut within three standard errors of its start) rises, in half of the
draws (:data:`RISE_PROBABILITY`: no log tells whether the run's next stage begins before the horizon; one coin per
draw for all the functions not yet started, so that the band keeps the run staying where it is however many there
are), by its headroom (its declared top minus its level; undeclared: the largest rise a function that has started
shows by the cut (the span of its fitted mean curve over the early window), none if none has, said in the notes) at
an onset of its own uniform over the steps ahead. The plateau (the mean over the run's last 10% of steps) then has
an 80% interval from the functions staying where they are to their reaching their tops, and the per-step intervals
widen from the cut on. The plateau's point is the sum of the functions' best-fit plateaus (inside the logged
reward's declared range, as the draws are), and the interval holds it (:func:`pgrpo.fit.intervals.band_holding`):
the rise drawn in most draws can leave the sum of the fits, the run staying where it is, below 90% of them.
:func:`reward_components` picks the functions that make up the logged reward (a total logged as a function left out,
TRL's reward weights read off the log). ``pgrpo forecast`` (key ``components``), the live callback's plateau stop
rule and the forecast benchmark's two-stage family all call it. Where a function waits to rise
(:attr:`StagedForecast.waiting`), the sum replaces the reward's own forecast in ``pgrpo forecast --compare`` (the
ranking, P(ends highest) and the stop rule) and as the forecast benchmark's forecaster.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.fit.baselines import Predictive
from pgrpo.fit.headroom import has_started, rise_by_headroom, rise_coins, start_level
from pgrpo.fit.intervals import LEVELS, PLATEAU_SHARE, band_holding, sample_intervals

#: the reward functions add up to the logged reward when the r.m.s. of the difference is within this share of the
#: reward's s.d. (logged values are rounded; a weight other than 1 misses by about that function's own s.d.)
SUM_TOLERANCE = 0.01
#: the headroom source of a waiting function whose higher value was read off its logged mean and s.d.
FROM_TWO_VALUES = "two-valued in the log"


@dataclass
class RewardComponents:
    """The reward functions that make up a log's reward: ``series`` (fn -> (steps, weighted values), the terms of
    the logged reward), ``weights`` (TRL's ``reward_weights``, 1 unless the log shows otherwise) and notes."""

    series: dict[str, tuple[np.ndarray, np.ndarray]]
    weights: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def weighted_ranges(self, ranges: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, float]]:
        """Declared ranges (in each function's own units) as ranges of its term in the reward."""
        out = {}
        for fn, (lo, hi) in ranges.items():
            w = self.weights.get(fn, 1.0)
            out[fn] = (min(w * float(lo), w * float(hi)), max(w * float(lo), w * float(hi)))
        return out


def reward_components(steps: np.ndarray, reward: np.ndarray | None,
                      columns: Mapping[str, np.ndarray]) -> RewardComponents:
    """The terms of the logged ``reward`` among the reward functions' columns (``columns``: fn -> values, rows
    aligned with ``steps``), checked against the reward where both are logged: a column that is the reward itself (a
    total logged as a function, ``rewards/total_reward/mean``) is left out; the rest must add up to the reward,
    plainly or with weights (TRL logs each function unweighted and the reward as ``sum(w_i r_i)``: the weights are
    read off by least squares, a function constant over the log keeping weight 1). Functions that do not add up to
    the reward, or fewer than two, give no series (the notes say why)."""
    steps = np.asarray(steps, float)
    values = {fn: np.asarray(v, float) for fn, v in columns.items()}
    if len(values) < 2:
        return RewardComponents({}, {}, [])
    notes: list[str] = []
    weights = {fn: 1.0 for fn in values}
    total = None if reward is None else np.asarray(reward, float)
    rows = np.isfinite(steps) & (np.isfinite(total) if total is not None else False)
    for v in values.values():
        rows &= np.isfinite(v)
    if total is not None and rows.sum() >= 3:
        y = total[rows]
        tol = SUM_TOLERANCE * max(float(np.std(y)), 1e-12)

        def rms(x: np.ndarray) -> float:
            return float(np.sqrt(np.mean(np.square(x))))

        for fn in list(values):
            others_vary = any(float(np.std(v[rows])) > tol for other, v in values.items() if other != fn)
            if len(values) > 2 and others_vary and rms(values[fn][rows] - y) <= tol:
                notes.append(f"{fn} is the reward itself (a total logged as a function): left out of the sum")
                del values[fn], weights[fn]
        residual = rms(sum(v[rows] for v in values.values()) - y)
        if residual > tol:
            varying = [fn for fn, v in values.items() if float(np.std(v[rows])) > tol]
            rest = y - sum((v[rows] for fn, v in values.items() if fn not in varying), np.zeros(y.size))
            w = np.linalg.lstsq(np.stack([values[fn][rows] for fn in varying], axis=1), rest, rcond=None)[0] \
                if varying else np.zeros(0)
            fitted = sum((wi * values[fn][rows] for wi, fn in zip(w, varying)), np.zeros(y.size))
            if varying and rms(fitted - rest) <= tol and np.all(np.abs(w) > 1e-6):
                weights.update({fn: float(wi) for fn, wi in zip(varying, w)})
                notes.append("the reward is the functions' weighted sum (TRL's reward_weights), weights read off "
                             "the log: " + ", ".join(f"{fn} {weights[fn]:.3g}" for fn in values))
            else:
                return RewardComponents({}, {}, [
                    f"the reward functions ({', '.join(values)}) do not add up to the logged reward (r.m.s. "
                    f"difference {residual:.3g} over {int(rows.sum())} steps): no summed forecast"])
    series = {}
    for fn, v in values.items():
        keep = np.isfinite(steps) & np.isfinite(v)
        series[fn] = (steps[keep], weights[fn] * v[keep])
    return RewardComponents(series, weights, notes)


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

    @property
    def waiting(self) -> list[str]:
        """The functions that have not started to rise by the cut and have headroom to rise by: where there is one,
        the sum is the forecast a user decides with (``pgrpo forecast --compare``, the forecast benchmark's
        forecaster): the reward's own forecast reads the run as staying where it is."""
        return [fn for fn, c in self.per_function.items() if c.success and not c.started and c.headroom > 0]

    def to_dict(self) -> dict[str, Any]:
        from pgrpo.fit.least_squares import finite_or_none

        return finite_or_none({
            "functions": self.functions, "forecast": self.forecast, "plateau": self.plateau,
            "per_function": {fn: {"success": c.success, "started": c.started, "level_at_cut": c.level_at_cut,
                                  "headroom": c.headroom, "range": list(c.range) if c.range else None,
                                  "range_source": c.range_source, "plateau": c.plateau}
                             for fn, c in self.per_function.items()},
            "waiting": self.waiting, "notes": self.notes})


def _rise_shown(y_early: np.ndarray, result: Any) -> float:
    """How far a function that has started has moved by the cut: the span of its fitted mean curve over the early
    window (the noise left out), else its level at the cut against its start."""
    fitted = np.asarray(getattr(result.prediction, "fitted", np.array([])), float)
    fitted = fitted[np.isfinite(fitted)]
    if fitted.size >= 2:
        return float(np.ptp(fitted))
    return abs(result.level_at_cut - start_level(y_early))


def forecast_components(series: Mapping[str, tuple[np.ndarray, np.ndarray]], fraction: float,
                        total_steps: float | None, settings: Any = None,
                        ranges: Mapping[str, tuple[float, float]] | None = None,
                        total_range: tuple[float, float] | None = None, seed: int = 0,
                        cutoff_step: float | None = None,
                        tops: Mapping[str, tuple[float, Any]] | None = None) -> StagedForecast:
    """Forecast each reward function of ``series`` (fn -> (steps, values)) from its first ``fraction`` of steps (or
    up to ``cutoff_step``) and sum them (see the module docstring). ``ranges``: declared ranges per function;
    ``total_range``: the summed reward's declared range (the sum's draws are clipped to it); ``tops``: fn -> (the
    higher of the two values it took up to the cut, in the reward's units; its
    :class:`pgrpo.fit.two_valued.TwoValues`), for a function with no declared range: its headroom where it waits.

    The sum is made draw by draw at every step ahead: each function's mean-curve and logged-value draws
    (:func:`pgrpo.fit.forecast.forecast_run`'s predictive), a function that has not started rising by its whole
    headroom in :data:`RISE_PROBABILITY` of the draws (one coin per draw for all of them), at an onset of its own
    uniform over the steps ahead (no log can time it), the functions' draws paired at random. The summed plateau is the mean of the summed mean-curve draws over the
    run's last 10% of steps, as a single forecast's is; ``prediction`` holds the summed predictive (the forecast
    benchmark scores it)."""
    from pgrpo.fit.forecast import forecast_run
    from pgrpo.fit.forecaster import ForecasterSettings, RunContext

    # each function's own forecast without a single reward's headroom (a function waiting to rise gets it here), its
    # point forecast the laws' best fits: the draws of a function with a declared range spread up to its bounds where
    # the window cannot pin its plateau, and the headroom belongs in the band, not in the mean curve
    settings = (settings or ForecasterSettings()).replace(headroom=False, center="best")
    ranges = dict(ranges or {})
    rng = np.random.default_rng(seed)
    runs, early_rises = {}, {}
    for fn, (t, y) in series.items():
        t, y = np.asarray(t, float), np.asarray(y, float)
        keep = np.isfinite(t) & np.isfinite(y)
        t, y = t[keep], y[keep]
        total = total_steps if total_steps is not None else (float(t[-1]) if t.size else None)
        context = RunContext(reward_range=ranges.get(fn))
        result = forecast_run(t, y, fraction, total, context, settings, f"rewards/{fn}/mean",
                              cutoff_step=cutoff_step)
        runs[fn] = (t, y, result)
        if result.success:
            early = y[t <= result.cutoff_step]
            if early.size and has_started(early, result.level_at_cut):
                early_rises[fn] = _rise_shown(early, result)
    notes: list[str] = []
    per: dict[str, ComponentForecast] = {}
    summed: Predictive | None = None
    tail = 1
    # one coin per draw for every function not yet started: the run's next stage begins within the horizon or not
    coins = rise_coins(rng)
    silent: list[str] = []  # not started, no range declared and no function risen: no headroom to go by
    for fn, (t, y, result) in runs.items():
        if not result.success:
            notes.append(f"{fn}: {result.message}")
            per[fn] = ComponentForecast(fn, False, False, float("nan"), float("nan"), ranges.get(fn), "", {})
            continue
        started = fn in early_rises
        declared = ranges.get(fn)
        headroom, source = 0.0, "declared" if declared else "none"
        if not started:
            if declared:
                headroom = max(float(declared[1]) - result.level_at_cut, 0.0)
            elif fn in (tops or {}):
                top, values = tops[fn]
                headroom, source = max(float(top) - result.level_at_cut, 0.0), FROM_TWO_VALUES
                notes.append(f"{fn} took two values up to the cut, {values.low:.3g} and {values.high:.3g} (its "
                             f"logged mean and s.d. fit var = (b - m)(m - a) exactly at {values.steps} steps, "
                             f"{values.completions:.0f} completions each): it can pay at least {values.high:.3g}")
            elif early_rises:
                headroom, source = max(early_rises.values()), "the largest rise another function shows by the cut"
            else:
                silent.append(fn)
            if headroom > 0:
                why = ("its declared top minus its level" if declared else
                       "the higher value it took minus its level (a lower bound: declare its range with "
                       f"--component-range {fn} LO HI if it pays more)" if source == FROM_TWO_VALUES else
                       f"its range is not declared: {source}; declare it with --component-range {fn} LO HI")
                notes.append(f"{fn} has not started to rise by the cut (still at {result.level_at_cut:.3g}): its "
                             f"headroom {headroom:.3g} ({why}) widens the plateau's interval (the rise cannot be "
                             "timed before it starts)")
        p = predictive_on_grid(result.prediction, result.prediction.steps if summed is None else summed.steps)
        grid, mean_d, value_d = p.steps, rng.permutation(p.mean_draws), rng.permutation(p.value_draws)
        if not started:
            mean_d, value_d = (draws + rise_by_headroom(draws.shape[0], grid, headroom, coins, rng)
                               for draws in (mean_d, value_d))
        if summed is None:
            tail = min(max(1, int(round(PLATEAU_SHARE * (result.n_early + grid.size)))), grid.size)
        own = np.mean(mean_d[:, -tail:], axis=1)
        per[fn] = ComponentForecast(fn, True, started, result.level_at_cut, headroom, declared, source,
                                    {"mean": float(result.plateau["mean"]),
                                     **band_holding(own, float(result.plateau["mean"]))})
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
    if silent:
        notes.append(f"{', '.join(silent)}: not risen by the cut, no range declared and no function risen yet, so "
                     "no headroom is added (each is forecast from its own log; declare a range with "
                     "--component-range FN LO HI)")
    if summed is None:
        return StagedForecast(list(series), {}, {}, per, notes or ["no reward function could be forecast"])
    point = float(sum(c.plateau["mean"] for c in per.values() if c.success))
    if total_range is not None:  # the sum's curve, its plateau and its draws all inside the reward's declared range
        summed.mean = np.clip(summed.mean, *total_range)
        summed.mean_draws = np.clip(summed.mean_draws, *total_range)
        summed.value_draws = np.clip(summed.value_draws, *total_range)
        point = float(np.clip(point, *total_range))
    summed.intervals = sample_intervals(summed.value_draws, LEVELS)
    draws = np.mean(summed.mean_draws[:, -tail:], axis=1)
    plateau = {"mean": point, **band_holding(draws, point), "mean_of_draws": float(np.mean(draws))}
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


def forecast_logged_components(steps: np.ndarray, reward: np.ndarray | None, columns: Mapping[str, np.ndarray],
                               fraction: float, total_steps: float | None, settings: Any = None,
                               ranges: Mapping[str, Sequence[float]] | None = None,
                               total_range: tuple[float, float] | None = None,
                               sds: Mapping[str, np.ndarray] | None = None) -> StagedForecast | None:
    """A log's reward functions (``columns``: fn -> values, rows aligned with ``steps`` and the logged ``reward``)
    forecast and summed: :func:`reward_components` picks the terms of the reward, :func:`forecast_components`
    forecasts them (``ranges`` declared in each function's own units; ``sds``: fn -> its logged s.d., from which a
    function with no declared range that took two values up to the cut has them read off,
    :func:`pgrpo.fit.two_valued.two_values`, the higher one its top where it waits to rise). None for fewer than two
    functions; functions that do not add up to the reward give a record with no plateau and the note why. ``pgrpo
    forecast`` and the live callback both call it."""
    parts = reward_components(steps, reward, columns)
    if len(parts.series) < 2:
        if not parts.notes:
            return None
        return StagedForecast(list(columns), {}, {}, {}, parts.notes)
    seen = two_valued_functions(steps, columns, sds or {}, fraction, total_steps,
                                [fn for fn in parts.series if fn not in (ranges or {})])
    terms = parts.weighted_ranges({fn: (v.low, v.high) for fn, v in seen.items()})  # in the reward's units
    tops = {fn: (terms[fn][1], seen[fn]) for fn in seen}
    staged = forecast_components(parts.series, fraction, total_steps, settings,
                                 parts.weighted_ranges(ranges or {}), total_range, tops=tops)
    staged.notes = parts.notes + staged.notes
    return staged


def two_valued_functions(steps: np.ndarray, columns: Mapping[str, np.ndarray], sds: Mapping[str, np.ndarray],
                         fraction: float, total_steps: float | None, functions: Sequence[str]) -> dict[str, Any]:
    """fn -> :class:`pgrpo.fit.two_valued.TwoValues` for each of ``functions`` whose logged mean (``columns``) and
    s.d. (``sds``) up to the cut (``fraction`` of ``total_steps``, default the last step) fit the two-valued law."""
    from pgrpo.fit.two_valued import two_values

    steps = np.asarray(steps, float)
    finite = steps[np.isfinite(steps)]
    if not finite.size:
        return {}
    cut = fraction * (float(total_steps) if total_steps is not None else float(finite.max()))
    early = np.isfinite(steps) & (steps <= cut)
    out = {}
    for fn in functions:
        if fn in sds and fn in columns:
            found = two_values(np.asarray(columns[fn], float)[early], np.asarray(sds[fn], float)[early])
            if found is not None:
                out[fn] = found
    return out
