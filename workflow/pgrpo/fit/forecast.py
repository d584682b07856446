"""Forecasts of a run from its first steps (beyond the paper): :func:`forecast_run` cuts a log at a fraction of its
steps and forecasts the rest with the forecaster of :mod:`pgrpo.fit.forecaster` (the laws of Section 3.5, Eq. 14-16,
averaged by Akaike weights, with calibrated intervals for the logged value); :func:`forecast_curve` is the single
law (Eq. 16 by default) fitted to the early window and extrapolated, with a parameter band from its covariance.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.errors import InputError
from pgrpo.fit.baselines import baseline_forecast
from pgrpo.fit.decisions import target_reach
from pgrpo.fit.forecaster import (
    ForecasterSettings,
    RunContext,
    backtest_on_seen,
    forecast_early_window,
    plateau_and_t90,
)
from pgrpo.fit.intervals import LEVELS, PLATEAU_SHARE, coverage, rmse
from pgrpo.fit.laws import LAWS, OVERDAMPED, THREE_PHASE, Law
from pgrpo.fit.level_guard import smoothed_level
from pgrpo.fit.least_squares import FitResult, finite_or_none, fit_law, prepare, r_squared


@dataclass
class Forecast:
    """A law fitted to the first ``fraction`` of a run's steps, extrapolated, and scored against the whole run.

    ``plateau_*``: the forecast ``R_inf`` (with s.e.), the full-run fit's ``R_inf`` and the observed plateau (mean
    of the last 10% of the points); ``t90_*``: time to 90% of the rise, forecast vs full-run fit; ``holdout_*``:
    error of the extrapolated curve on the points after the cutoff, and ``persistence_rmse`` that of the naive
    forecast "the curve stays at the mean of the last 10% of the early window", for scale.
    """

    column: str
    law: str
    fraction: float
    total_steps: float
    cutoff_step: float
    n_early: int
    n_holdout: int
    success: bool
    message: str
    early: FitResult
    full: FitResult
    plateau_forecast: float = float("nan")
    plateau_forecast_se: float = float("nan")
    plateau_full_fit: float = float("nan")
    plateau_observed: float = float("nan")
    plateau_error_vs_full_fit: float = float("nan")
    plateau_error_vs_observed: float = float("nan")
    plateau_relative_error: float = float("nan")
    t90_forecast: float = float("nan")
    t90_forecast_se: float = float("nan")
    t90_full_fit: float = float("nan")
    t90_error: float = float("nan")
    holdout_rmse: float = float("nan")
    holdout_mae: float = float("nan")
    holdout_r2: float = float("nan")
    persistence_rmse: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["early"], data["full"] = self.early.to_dict(), self.full.to_dict()
        return finite_or_none(data)


def _cut(t: Sequence[float], y: Sequence[float], fraction: float,
         total_steps: float | None) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The finite points in step order, the run's length (``total_steps``, default the last step) and the cut
    ``fraction * total``; an InputError for a fraction outside (0, 1]."""
    if not 0 < fraction <= 1:
        raise InputError(f"forecast fraction must be in (0, 1], got {fraction}")
    t_arr, y_arr, _ = prepare(t, y)
    total = float(total_steps) if total_steps is not None else (float(t_arr[-1]) if t_arr.size else float("nan"))
    return t_arr, y_arr, total, fraction * total


def forecast_curve(
    t: Sequence[float],
    y: Sequence[float],
    fraction: float = 0.25,
    law: str = THREE_PHASE,
    total_steps: float | None = None,
    column: str = "reward",
) -> Forecast:
    """Fit ``law`` on the points with ``t <= fraction * total_steps`` (default ``total_steps``: the last ``t``),
    forecast the plateau, ``t90`` and the rest of the curve, and score the forecast against the full run."""
    t_arr, y_arr, total, cutoff = _cut(t, y, fraction, total_steps)
    early_mask = t_arr <= cutoff
    early = fit_law(t_arr[early_mask], y_arr[early_mask], law)
    full = fit_law(t_arr, y_arr, law)
    holdout_mask = ~early_mask
    result = Forecast(
        column=column, law=law, fraction=fraction, total_steps=total, cutoff_step=cutoff,
        n_early=int(early_mask.sum()), n_holdout=int(holdout_mask.sum()), success=early.success,
        message="", early=early, full=full,
    )
    tail = max(1, int(round(0.1 * t_arr.size))) if t_arr.size else 0
    if t_arr.size:
        result.plateau_observed = float(np.mean(y_arr[-tail:]))
    if full.success:
        result.plateau_full_fit = full.R_inf
        result.t90_full_fit = full.derived.get("t90", float("nan"))
    if not early.success:
        result.message = f"no forecast from the first {fraction:.0%} of steps: {early.message}"
        return result
    result.plateau_forecast = early.R_inf
    result.plateau_forecast_se = early.stderr["R_inf"]
    result.plateau_error_vs_full_fit = early.R_inf - result.plateau_full_fit
    result.plateau_error_vs_observed = early.R_inf - result.plateau_observed
    rise = result.plateau_observed - (full.R0 if full.success else float(y_arr[0]))
    result.plateau_relative_error = result.plateau_error_vs_observed / rise if rise else float("nan")
    result.t90_forecast = early.derived.get("t90", float("nan"))
    result.t90_forecast_se = early.derived.get("t90_se", float("nan"))
    result.t90_error = result.t90_forecast - result.t90_full_fit
    if holdout_mask.any():
        observed = y_arr[holdout_mask]
        predicted = early.predict(t_arr[holdout_mask])
        residual = observed - predicted
        result.holdout_rmse = float(np.sqrt(np.mean(residual**2)))
        result.holdout_mae = float(np.mean(np.abs(residual)))
        result.holdout_r2 = r_squared(observed, predicted) if observed.size > 1 else float("nan")
        early_y = y_arr[early_mask]
        persistence = float(np.mean(early_y[-max(1, int(round(0.1 * early_y.size))):]))
        result.persistence_rmse = float(np.sqrt(np.mean((observed - persistence) ** 2)))
    relative_se = early.stderr["R_inf"] / abs(early.R_inf - early.R0) if early.R_inf != early.R0 else float("inf")
    result.message = (
        f"fitted {law} on {result.n_early} points up to step {cutoff:.0f} ({fraction:.0%} of {total:.0f})"
        + ("" if relative_se < 0.5 else "; the plateau is poorly constrained this early (s.e. > half the rise)")
    )
    return result


def forecast_band(fit: FitResult, t: np.ndarray, level: float = 0.9, draws: int = 400, seed: int = 0) -> np.ndarray:
    """Pointwise ``level`` band of the fitted curve from parameter draws ``N(params, covariance)``; shape (2, len(t)).
    NaN where the fit failed or has no covariance."""
    t = np.asarray(t, dtype=float)
    if not fit.success or fit.covariance is None:
        return np.full((2, t.size), np.nan)
    law = LAWS[fit.law]
    mean = np.array([fit.params[name] for name in law.param_names])
    cov = np.asarray(fit.covariance)
    rng = np.random.default_rng(seed)
    samples = rng.multivariate_normal(mean, cov, size=draws, check_valid="ignore")
    curves = []
    for sample in samples:
        params = dict(zip(law.param_names, sample))
        if any(params[name] <= 0 for name in law.rate_names) or ("zeta" in params and not _zeta_ok(law, params)):
            continue
        curves.append(law.curve(t, params))
    if len(curves) < 10:
        return np.full((2, t.size), np.nan)
    lo, hi = np.nanquantile(np.array(curves), [(1 - level) / 2, (1 + level) / 2], axis=0)
    return np.vstack([lo, hi])


def _zeta_ok(law: Law, params: Mapping[str, float]) -> bool:
    z = params["zeta"]
    return z >= 1 if law.name == OVERDAMPED else 0 < z <= 1


@dataclass
class RunForecast:
    """The forecaster's forecast of one log from its first ``fraction`` of steps.

    ``forecast``: at every step after the cut (the logged ones, then the rest up to ``total_steps`` at the log's
    spacing), ``step, mean, lo80, hi80, lo95, hi95`` (intervals for the logged value, noise included); ``plateau``
    (the mean over the run's last 10% of steps) and ``t90`` (first step with 90% of the change from the run's start
    to that plateau), each with ``mean, lo80, hi80``; ``mixture``: law -> Akaike weight with ``params`` and
    ``notes``; ``seen``: how it scored against persistence on the part of the log it has seen (fitted on the first
    half of the window, scored on the second); ``held_out``: the same scores on the logged points after the cut;
    ``level_at_cut``: the log's exponentially smoothed level at the cut; ``target`` (only when one is asked):
    P(plateau >= target) and the step it is reached at (:func:`pgrpo.fit.decisions.target_reach`);
    ``plateau_draws``: the plateau's draws (for comparing runs; not in the JSON).
    """

    column: str
    fraction: float
    total_steps: float
    cutoff_step: float
    n_early: int
    n_held_out: int
    success: bool
    message: str
    forecast: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    plateau: dict[str, float] = dataclasses.field(default_factory=dict)
    t90: dict[str, float] = dataclasses.field(default_factory=dict)
    mixture: dict[str, float] = dataclasses.field(default_factory=dict)
    params: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    seen: dict[str, float] = dataclasses.field(default_factory=dict)
    held_out: dict[str, float] = dataclasses.field(default_factory=dict)
    plateau_observed: float = float("nan")
    level_at_cut: float = float("nan")
    target: dict[str, Any] = dataclasses.field(default_factory=dict)
    plateau_draws: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)
    prediction: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def law(self) -> str:
        """The mixture in words: ``three_phase 0.61 + exponential 0.30 + ...``."""
        return " + ".join(f"{law} {w:.2f}" for law, w in sorted(self.mixture.items(), key=lambda kv: -kv[1])
                          if w >= 0.005) or "none"

    def to_dict(self) -> dict[str, Any]:
        # a shallow record: finite_or_none builds new dicts and lists all the way down (no deep copy needed)
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("plateau_draws", "prediction")}
        if not data["target"]:
            data.pop("target")
        data["law"] = self.law
        return finite_or_none(data)


def undeclared_range_note(y_early: Sequence[float], plateau: Mapping[str, float],
                          reward_range: Sequence[float] | None) -> str | None:
    """A note for a plateau band that nothing bounds: no reward range declared, and the band's 80% interval reaches
    past the values logged by the cut by more than their spread (where the forecast's draws are bounded only by
    the early window's span widened, and the drift carried forward from there); None otherwise."""
    y = np.asarray(y_early, float)
    y = y[np.isfinite(y)]
    lo80, hi80 = plateau.get("lo80"), plateau.get("hi80")
    if reward_range is not None or y.size < 2 or lo80 is None or hi80 is None:
        return None
    low, high = float(np.min(y)), float(np.max(y))
    spread = high - low
    if not (spread > 0 and (float(hi80) > high + spread or float(lo80) < low - spread)):
        return None
    return (f"no reward range declared: the plateau's 80% band [{float(lo80):.3g}, {float(hi80):.3g}] reaches past "
            f"the values logged by the cut [{low:.3g}, {high:.3g}] by more than their spread; declare the reward's "
            "range (--reward-range LO HI, the callback's reward_range) to bound it")


def forecast_steps(t: np.ndarray, cutoff: float, total: float) -> np.ndarray:
    """The logged steps after ``cutoff``, then on to ``total`` at the log's median spacing."""
    after = t[t > cutoff]
    last = float(t[-1]) if t.size else cutoff
    if total > last and t.size > 1:
        spacing = float(np.median(np.diff(t))) or 1.0
        after = np.concatenate([after, np.arange(last + spacing, total + 0.5 * spacing, spacing)])
    return after


def forecast_run(
    t: Sequence[float],
    y: Sequence[float],
    fraction: float = 0.25,
    total_steps: float | None = None,
    context: RunContext | None = None,
    settings: ForecasterSettings = ForecasterSettings(),
    column: str = "reward",
    target: float | None = None,
    cutoff_step: float | None = None,
) -> RunForecast:
    """Cut the log at ``fraction * total_steps`` (default: its last step; ``cutoff_step``: at that step instead),
    forecast the rest with the forecaster, and score it on the points the log has after the cut (if any) and on the
    part it has seen; with ``target``, when the run reaches that level (:func:`pgrpo.fit.decisions.target_reach`).
    ``prediction`` keeps the forecaster's predictive (its draws; not in the JSON)."""
    t_arr, y_arr, total, cutoff = _cut(t, y, fraction, total_steps)
    cutoff = float(cutoff_step) if cutoff_step is not None else cutoff
    early = t_arr <= cutoff
    held = ~early
    steps = forecast_steps(t_arr, cutoff, total)
    result = RunForecast(column=column, fraction=fraction, total_steps=total, cutoff_step=cutoff,
                         n_early=int(early.sum()), n_held_out=int(held.sum()), success=False, message="")
    if early.sum() < 3:
        result.message = f"no forecast: {int(early.sum())} point(s) up to step {cutoff:.0f}, need at least 3"
        return result
    if steps.size == 0:
        result.message = f"nothing to forecast: the run ends at step {total:.0f}, the cut is at {cutoff:.0f}"
        return result
    t_e, y_e = t_arr[early], y_arr[early]
    prediction = forecast_early_window(t_e, y_e, steps, context, settings)
    if not prediction.success:
        result.message = prediction.message
        return result
    n_total = int(early.sum()) + int(steps.size)
    n_start = max(1, int(round(PLATEAU_SHARE * n_total)))
    start = float(np.mean(y_e[:n_start]))
    summary = plateau_and_t90(prediction, t_e, y_e, n_total, start)
    result.success = True
    result.prediction = prediction
    result.forecast = {"step": steps.tolist(), "mean": prediction.mean.tolist(),
                       **{key: prediction.intervals[key].tolist() for key in
                          [f"{side}{round(level * 100)}" for level in LEVELS for side in ("lo", "hi")]}}
    result.plateau, result.t90 = summary["plateau"], summary["t90"]
    tail = min(max(1, int(round(PLATEAU_SHARE * n_total))), steps.size)
    result.plateau_draws = np.mean(prediction.mean_draws[:, -tail:], axis=1)
    result.level_at_cut = smoothed_level(y_e)[0]
    if target is not None:
        result.target = target_reach(steps, prediction.mean, prediction.mean_draws, result.plateau_draws,
                                     float(target), result.level_at_cut).to_dict()
    details = prediction.details or {}
    result.mixture = details.get("weights", {})
    result.params = details.get("params", {})
    result.notes = list(details.get("notes", []))
    unbounded = undeclared_range_note(y_e, result.plateau, context.reward_range if context else None)
    if unbounded:
        result.notes.append(unbounded)
    result.seen = backtest_on_seen(t_e, y_e, context, settings)
    if held.any():
        logged = np.isin(steps, t_arr[held])
        observed = y_arr[held]
        naive = baseline_forecast("persistence", t_e, y_e, steps[logged], draws=10)
        ours, theirs = rmse(observed, prediction.mean[logged]), rmse(observed, naive.mean)
        result.held_out = {
            "rmse": ours, "persistence_rmse": theirs, "ratio": ours / theirs if theirs > 0 else float("nan"),
            "coverage80": coverage(observed, prediction.intervals["lo80"][logged],
                                   prediction.intervals["hi80"][logged]),
            "coverage95": coverage(observed, prediction.intervals["lo95"][logged],
                                   prediction.intervals["hi95"][logged]),
        }
        tail = max(1, int(round(PLATEAU_SHARE * t_arr.size)))
        result.plateau_observed = float(np.mean(y_arr[-tail:]))
    result.message = (f"forecaster ({result.law}) fitted on {int(early.sum())} points up to step {cutoff:.0f} "
                      f"({fraction:.0%} of {total:.0f})")
    return result
