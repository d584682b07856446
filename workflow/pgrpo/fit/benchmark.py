"""The forecast benchmark's protocol (beyond the paper; the laws are those of Section 3.5, Eq. 14-16): cut each curve
of a corpus at a fraction ``f`` of its steps, forecast the rest with every method, and score the forecast on the
held-out logged values.

Scores per curve and method: held-out RMSE (and its ratio to persistence's; beside it the noise floor, the
held-out values' own noise s.d. from their first differences over persistence's RMSE, below which no forecast's
expected RMSE can go), the plateau error against the mean of
the last 10% of the curve, the time-to-90% error (as a share of the run; only where the curve changes by more than
three standard errors of its end means), the coverage of the 80% and 95% intervals, the 80% interval score and the
CRPS (both also as ratios to persistence's). Summaries: the median of each ratio and the mean coverage per corpus
part and split, and overall with every part weighted equally.

Two oracles see the held-out values and are no methods: their own mean (the least RMSE of any constant forecast)
and a cubic in the step least-squares fitted to them (the best smooth curve through the answer): a target under a
cell's hindsight cubic cannot be met by any forecast that a cubic follows over the tail. On the generated
closed-form curves a third bound is told their functional form, on the bandit curves the exact map of their
setting with eta unknown, and sees the early window only (:mod:`pgrpo.fit.family_oracle`): a target below its
error is out of the early window's reach. On every curve a fourth bound, :data:`PANEL`, takes each score's best
over the forecasts the benchmark runs (the baselines, the forecaster, the forecaster per reward function), chosen
per curve in hindsight: each of them sees only the early window, so a target it misses is out of the reach of all
of them, however well a user knew which one to trust.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pgrpo.fit.baselines import BASELINES, Predictive, baseline_forecast
from pgrpo.fit.decisions import score_sweep
from pgrpo.fit.forecaster import ForecasterSettings, RunContext, forecast_early_window, plateau_and_t90
from pgrpo.fit.level_guard import smoothed_level
from pgrpo.fit.recalibration import LEVELS as RECALIBRATION_LEVELS
from pgrpo.fit.recalibration import coverage_at_levels, coverage_key, with_recalibration
from pgrpo.fit.truth import denoised_reference, truth_scores
from pgrpo.fit.intervals import (
    PLATEAU_SHARE,
    coverage,
    crps_from_samples,
    interval_score,
    moving_average,
    plateau_of,
    rmse,
    robust_noise_sd,
    time_to_fraction_of_change,
)

FRACTIONS: tuple[float, ...] = (0.1, 0.25, 0.5)


#: the fewest early points a forecast is attempted from, and held-out points it is scored on
MIN_EARLY, MIN_HELD_OUT = 4, 4


@dataclass
class Curve:
    """One curve of the corpus with its true tail: ``part`` (``workflow``, ``bandit``, ``real``), ``split``
    (``dev``: methods are chosen on it; ``holdout``: reported only), ``group`` (runs of one model and setting at other
    G or seeds, for pooling), the run's ``context`` and ``provenance`` (source, license, settings); ``truth``: the
    true mean at every step where it is known; ``sweep``: the runs compared with one another (same steps);
    ``family``: a generated curve's family; ``components``: reward function -> (steps, logged, declared range);
    ``bandit_setting``: a bandit curve's setting (what the family oracle is told of it); ``seed_reference``: the
    other seeds' mean logged values (steps, values) of a run with seeds, a second truth (:func:`other_seeds_truth`)."""

    id: str
    part: str
    split: str
    column: str
    steps: np.ndarray
    values: np.ndarray
    context: RunContext = field(default_factory=RunContext)
    provenance: dict[str, Any] = field(default_factory=dict)
    group: str | None = None
    eval_steps: np.ndarray | None = None
    eval_values: np.ndarray | None = None
    truth: np.ndarray | None = None
    sweep: str | None = None
    family: str | None = None
    components: dict[str, tuple[np.ndarray, np.ndarray, tuple[float, float] | None]] | None = None
    bandit_setting: Any = None
    seed_reference: tuple[np.ndarray, np.ndarray] | None = None


def cut(curve: Curve, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (early, held out) of the points with ``step <= fraction * last step`` and the rest."""
    t = curve.steps
    early = t <= fraction * float(t[-1])
    return early, ~early


Method = Callable[[Curve, np.ndarray, np.ndarray, np.ndarray, RunContext], Predictive]


def baseline_method(name: str) -> Method:
    def run(curve: Curve, t: np.ndarray, y: np.ndarray, steps: np.ndarray, context: RunContext) -> Predictive:
        return baseline_forecast(name, t, y, steps)

    return run


StagedOf = Callable[[Curve, np.ndarray, np.ndarray], Any]


def forecaster_method(settings: ForecasterSettings, staged_of: StagedOf | None = None) -> Method:
    """The forecaster on the curve; on a curve whose reward functions are logged, where one waits to rise
    (:attr:`pgrpo.fit.staged.StagedForecast.waiting`), their forecasts summed (its headroom in the band), as
    ``pgrpo forecast --compare`` decides with. ``staged_of``: the summed forecasts (:func:`staged_forecasts`; one
    of its own by default), shared with :func:`staged_method` so that a cut's sum is made once."""
    staged_of = staged_of or staged_forecasts(settings)

    def run(curve: Curve, t: np.ndarray, y: np.ndarray, steps: np.ndarray, context: RunContext) -> Predictive:
        if curve.components:
            staged = staged_of(curve, t, steps)
            if staged.prediction is not None and staged.waiting:
                from pgrpo.fit.staged import predictive_on_grid

                # a copy: the protocol names the predictive it is given, and the staged method is given this sum too
                return dataclasses.replace(predictive_on_grid(staged.prediction, steps))
        return forecast_early_window(t, y, steps, context, settings)

    return run


ORACLE = "oracle (tail mean)"


#: the best smooth curve in hindsight: a cubic in the step least-squares fitted to the held-out values themselves
HINDSIGHT = "oracle (cubic in hindsight)"


def _held_out(curve: Curve, steps: np.ndarray) -> np.ndarray:
    """The curve's logged values at ``steps`` (the held-out ones): what the oracles see."""
    return curve.values[np.isin(curve.steps, steps)]


def _quantile_band(values: np.ndarray, offset: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The 80% and 95% central intervals and 200 draws of ``offset + `` the quantiles of ``values`` (an oracle's
    spread about its curve ``offset``)."""
    intervals = {f"{side}{round(level * 100)}": offset + float(np.quantile(
        values, 0.5 - level / 2 if side == "lo" else 0.5 + level / 2)) for level in (0.8, 0.95)
        for side in ("lo", "hi")}
    spread = np.quantile(values, np.linspace(0.0025, 0.9975, 200))
    return intervals, offset[None, :] + spread[:, None]


def oracle_method() -> Method:
    """Not a method: the held-out values' own mean and quantiles (what no constant forecast can beat)."""

    def run(curve: Curve, t: np.ndarray, y: np.ndarray, steps: np.ndarray, context: RunContext) -> Predictive:
        tail = _held_out(curve, steps)
        mean = np.full(steps.size, float(np.mean(tail)))
        intervals, draws = _quantile_band(tail, np.zeros(steps.size))
        return Predictive(ORACLE, steps, mean, intervals, np.tile(mean, (10, 1)), draws, np.full(t.size, np.nan),
                          float(np.std(tail)))

    return run


def hindsight_method(degree: int = 3) -> Method:
    """Not a method: a polynomial of ``degree`` in the step, least-squares fitted to the held-out values themselves
    (in hindsight, on the very values it is scored on), with their residuals' quantiles as its intervals. Its RMSE is
    the least any forecast of that form can have on the curve, and a cubic follows a saturating tail closely: a
    target under its ratio asks a forecast to beat the best smooth curve drawn through the answer."""

    def run(curve: Curve, t: np.ndarray, y: np.ndarray, steps: np.ndarray, context: RunContext) -> Predictive:
        tail = _held_out(curve, steps)
        span = float(steps[-1] - steps[0]) or 1.0
        design = np.vander((steps - steps[0]) / span, min(degree, steps.size - 1) + 1)
        mean = design @ np.linalg.lstsq(design, tail, rcond=None)[0]
        residual = tail - mean
        intervals, draws = _quantile_band(residual, mean)
        return Predictive(HINDSIGHT, steps, mean, intervals, np.tile(mean, (10, 1)), draws, np.full(t.size, np.nan),
                          float(np.std(residual)))

    return run


#: a bound told the curve's functional form: the generating family least-squares fitted to the early window
FAMILY_ORACLE = "oracle (true family fitted to the early window)"


def family_oracle_method() -> Method:
    """Not a method: :func:`pgrpo.fit.family_oracle.fit_family` on the early window of a generated curve, told its
    family (closed-form curves), or :func:`pgrpo.fit.family_oracle.fit_bandit`, told a bandit curve's setting but
    its learning rate, with the early residuals' quantiles as its intervals: a target below its error is out of
    reach of the early window (see :mod:`pgrpo.fit.family_oracle`)."""
    from pgrpo.fit.family_oracle import fit_family

    from pgrpo.fit.family_oracle import fit_bandit, finite_g_continuation

    def run(curve: Curve, t: np.ndarray, y: np.ndarray, steps: np.ndarray, context: RunContext) -> Predictive:
        setting = curve.bandit_setting
        if setting is not None and setting.G is not None:
            path = finite_g_continuation(setting, int(round(t[-1])), int(math.ceil(curve.steps[-1])))

            def fit(x: np.ndarray) -> np.ndarray:
                return np.interp(np.asarray(x, float), np.arange(path.size, dtype=float), path)

            details = {"family": f"finite-G run continued from its state at the cut (G = {setting.G})",
                       "params": []}
        elif setting is not None:
            fit = fit_bandit(setting, t, y, float(curve.steps[-1]))
            details = {"family": "bandit map", "params": [fit.eta]}
        else:
            fit = fit_family(str(curve.family), t, y)
            details = {"family": fit.family, "params": list(fit.params)}
        mean, fitted = fit(steps), fit(t)
        intervals, draws = _quantile_band(y - fitted, mean)
        return Predictive(FAMILY_ORACLE, steps, mean, intervals, np.tile(mean, (10, 1)), draws, fitted,
                          float(np.std(y - fitted)), details=details)

    return run


def context_at_cut(curve: Curve, corpus_by_group: Mapping[str, Sequence[Curve]], fraction: float) -> RunContext:
    """The run's context with what is known at the cut: the siblings' and the eval column's points up to it."""
    base = curve.context
    cut_step = fraction * float(curve.steps[-1])
    siblings = []
    for other in corpus_by_group.get(curve.group, []) if curve.group else []:
        if other.id == curve.id or other.column != curve.column:
            continue
        keep = other.steps <= cut_step
        siblings.append((other.steps[keep], other.values[keep]))
    eval_series = None
    if curve.eval_steps is not None:
        keep = curve.eval_steps <= cut_step
        eval_series = (curve.eval_steps[keep], curve.eval_values[keep])
    return RunContext(reward_range=base.reward_range, batch=base.batch, mu=base.mu, k_ref=base.k_ref,
                      siblings=siblings, eval_series=eval_series)


#: the truth of item 1 for a run with seeds: the other seeds' mean curve (its logging noise smoothed away)
SEEDS_TRUTH = "other seeds' mean"


#: the prefix of a row's scores against :data:`SEEDS_TRUTH` (the same keys as :func:`truth_scores`')
SEEDS_PREFIX = "seeds_"


def other_seeds_truth(steps: np.ndarray, other_steps: np.ndarray, other_mean: np.ndarray) -> np.ndarray | None:
    """The other seeds' mean at ``steps``: their mean logged values (``other_steps``, ``other_mean``) interpolated
    onto the run's steps and smoothed by :func:`pgrpo.fit.truth.denoised_reference` (the local-linear smoother with
    its cross-validated bandwidth), so what remains is the seeds' shared mean trajectory (Prop. 10) and their own
    deviations, not their logging noise. None where they do not span the run's steps."""
    steps, other_steps, other_mean = (np.asarray(a, float) for a in (steps, other_steps, other_mean))
    ok = np.isfinite(other_steps) & np.isfinite(other_mean)
    other_steps, other_mean = other_steps[ok], other_mean[ok]
    if other_steps.size < 4 or other_steps[0] > steps[0] or other_steps[-1] < steps[-1]:
        return None
    on_steps = np.interp(steps, other_steps, other_mean)
    return denoised_reference(steps, on_steps).values


def score_curve(curve: Curve, fraction: float, prediction: Predictive, persistence: Predictive) -> dict[str, Any]:
    """Every score of one forecast of one curve (see the module docstring)."""
    early, held = cut(curve, fraction)
    t, y = curve.steps, curve.values
    y_held = y[held]
    n = t.size
    n_end = max(1, int(round(PLATEAU_SHARE * n)))
    start = float(np.mean(y[:n_end]))
    plateau_obs = plateau_of(y)
    noise = robust_noise_sd(y[early])
    change_se = noise * math.sqrt(2.0 / n_end) if math.isfinite(noise) else float("nan")
    changes = abs(plateau_obs - start) > 3.0 * change_se
    smooth = moving_average(y, max(1, int(round(0.05 * n))))
    t90_obs = time_to_fraction_of_change(t, smooth, start, plateau_obs) if changes else float("nan")
    row: dict[str, Any] = {"curve": curve.id, "part": curve.part, "split": curve.split, "column": curve.column,
                           "fraction": fraction, "method": prediction.method, "n_early": int(early.sum()),
                           "n_held_out": int(held.sum()), "success": bool(prediction.success)}
    if not prediction.success:
        return row
    span = float(t[-1] - t[0]) or 1.0
    summary = plateau_and_t90(prediction, t[early], y[early], n, start)
    t90_f = summary["t90"]["mean"]
    if changes and not math.isfinite(t90_f):
        t90_f = float(t[-1])  # never within the run
    lo80, hi80 = prediction.intervals["lo80"], prediction.intervals["hi80"]
    lo95, hi95 = prediction.intervals["lo95"], prediction.intervals["hi95"]
    row.update({
        "rmse": rmse(y_held, prediction.mean),
        "persistence_rmse": rmse(y_held, persistence.mean),
        "plateau_observed": plateau_obs,
        "plateau_forecast": summary["plateau"]["mean"],
        "plateau_lo80": summary["plateau"]["lo80"], "plateau_hi80": summary["plateau"]["hi80"],
        "plateau_error": summary["plateau"]["mean"] - plateau_obs,
        "noise_sd": noise,
        "t90_observed": t90_obs,
        "t90_forecast": t90_f,
        "t90_error_share": (t90_f - t90_obs) / span if changes and math.isfinite(t90_obs) else float("nan"),
        "coverage80": coverage(y_held, lo80, hi80),
        "coverage95": coverage(y_held, lo95, hi95),
        "interval_score80": interval_score(y_held, lo80, hi80, 0.8),
        "persistence_interval_score80": interval_score(y_held, persistence.intervals["lo80"],
                                                       persistence.intervals["hi80"], 0.8),
        **coverage_at_levels(prediction.value_draws, y_held),
        "crps": crps_from_samples(prediction.value_draws, y_held),
        "persistence_crps": crps_from_samples(persistence.value_draws, y_held),
    })
    row["rmse_ratio"] = row["rmse"] / row["persistence_rmse"] if row["persistence_rmse"] > 0 else float("nan")
    # what no forecast of the logged values can beat: their own noise (E RMSE^2 >= sigma^2), over persistence's RMSE
    held_noise = robust_noise_sd(y_held)
    row["noise_floor_ratio"] = (held_noise / row["persistence_rmse"]
                                if row["persistence_rmse"] > 0 and math.isfinite(held_noise) else float("nan"))
    row["interval_score_ratio"] = (row["interval_score80"] / row["persistence_interval_score80"]
                                   if row["persistence_interval_score80"] > 0 else float("nan"))
    row["crps_ratio"] = row["crps"] / row["persistence_crps"] if row["persistence_crps"] > 0 else float("nan")
    row["plateau_abs_error_noise"] = abs(row["plateau_error"]) / noise if noise and math.isfinite(noise) else float(
        "nan")
    span = (float(np.diff(curve.context.reward_range)[0]) if curve.context.reward_range is not None
            else float(np.ptp(y)) or 1.0)

    def scored_against(truth: np.ndarray | None) -> dict[str, Any]:
        """:func:`truth_scores` against ``truth``, with the true plateau's coverage by the 80% band."""
        scores = truth_scores(t, y, early, truth, span, prediction.mean, persistence.mean,
                              summary["plateau"]["mean"], summary["t90"]["mean"])
        scores["plateau_covered80"] = float(summary["plateau"]["lo80"] <= scores["plateau_true"]
                                            <= summary["plateau"]["hi80"])
        scores["truth_moves"] = float(scores["truth_moves"])  # 1/0: a number in the CSV, a share in the summaries
        return scores

    row.update(scored_against(curve.truth))
    reference = other_seeds_truth(t, *curve.seed_reference) if curve.seed_reference is not None else None
    if reference is not None:
        seeds = {**scored_against(reference), "truth_kind": SEEDS_TRUTH}
        row.update({f"{SEEDS_PREFIX}{key}": value for key, value in seeds.items()})
    if curve.family:
        row["family"] = curve.family
    weights = (prediction.details or {}).get("weights")
    if weights:
        row["mixture"] = ";".join(f"{k}={v:.2f}" for k, v in sorted(weights.items(), key=lambda kv: -kv[1]) if v >= 0.01)
    return row


def run_protocol(corpus: Sequence[Curve], methods: Mapping[str, Method], fractions: Sequence[float] = FRACTIONS,
                 progress: Callable[[str], None] | None = None, workers: int | None = 1) -> list[dict[str, Any]]:
    """Every (curve, fraction, method) scored; curves with too few early or held-out points are skipped (a row
    with ``success = False`` and a message); a baseline whose fit fails is scored as persistence (what its user
    falls back to; ``fell_back_to_persistence`` says where), so every method is scored on every curve. The curves
    are independent: ``workers`` processes score them side by side (:func:`pgrpo.parallel.ordered_map`), the rows
    merged in the corpus's order."""
    from pgrpo.parallel import ordered_map

    by_group: dict[str, list[Curve]] = {}
    for curve in corpus:
        if curve.group:
            by_group.setdefault(curve.group, []).append(curve)

    def announce(index: int, _: Any) -> None:
        if progress:
            progress(corpus[index].id)

    scored = ordered_map(lambda index: score_curve_cuts(corpus[index], methods, fractions, by_group), len(corpus),
                         workers, announce)
    rows: list[dict[str, Any]] = []
    sweeps: dict[tuple, list[tuple]] = {}
    for curve, (curve_rows, members) in zip(corpus, scored):
        rows += curve_rows
        for key, member in members:
            sweeps.setdefault(key, []).append((curve, *member))
    sweep_scores = sweep_rows(sweeps)
    return rows + sweep_scores + panel_sweep_rows(sweep_scores)


def score_curve_cuts(curve: Curve, methods: Mapping[str, Method], fractions: Sequence[float],
                     by_group: Mapping[str, Sequence[Curve]]) -> tuple[list[dict[str, Any]], list[tuple]]:
    """One curve of :func:`run_protocol`: its rows at every fraction, and its entries of the sweeps it is in,
    ``((sweep, fraction, method), (plateau draws, plateau forecast, level at the cut, true plateau, its s.e.))``."""
    rows: list[dict[str, Any]] = []
    members: list[tuple] = []
    for fraction in fractions:
        early, held = cut(curve, fraction)
        if early.sum() < MIN_EARLY or held.sum() < MIN_HELD_OUT:
            rows.append({"curve": curve.id, "part": curve.part, "split": curve.split, "column": curve.column,
                         "fraction": fraction, "method": "all", "success": False,
                         "message": f"{int(early.sum())} early / {int(held.sum())} held-out points"})
            continue
        t, y = curve.steps[early], curve.values[early]
        steps = curve.steps[held]
        context = context_at_cut(curve, by_group, fraction)
        naive = baseline_forecast("persistence", t, y, steps)
        first_row = len(rows)
        for name, method in methods.items():
            if name == STAGED and not curve.components:
                continue  # the staged method needs the reward functions' own logs
            if name == FAMILY_ORACLE and not has_family_form(curve):
                continue  # told the form only where the generator made the curve
            prediction = naive if name == "persistence" else method(curve, t, y, steps, context)
            fell_back = not prediction.success and name in BASELINES
            if fell_back:  # a user whose fit fails carries the level forward: every method scores every curve
                prediction = dataclasses.replace(naive)
            prediction.method = name
            row = score_curve(curve, fraction, prediction, naive)
            row["fell_back_to_persistence"] = fell_back
            rows.append(row)
            if curve.sweep and prediction.success and "plateau_true" in row:
                tail = min(max(1, int(round(PLATEAU_SHARE * curve.steps.size))), steps.size)
                members.append(((curve.sweep, fraction, name), (
                    np.mean(prediction.mean_draws[:, -tail:], axis=1), row["plateau_forecast"],
                    smoothed_level(y)[0], row["plateau_true"], row.get("plateau_true_se", 0.0))))
        rows.extend(panel_rows(rows[first_row:]))
    return rows, members


#: a bound that sees only the early window: of the benchmark's forecasts (:data:`PANEL_METHODS`), each score's best
#: on the curve, chosen in hindsight (a perfect per-curve choice among them)
PANEL = "oracle (best early-window forecast, chosen in hindsight)"

#: the scores :data:`PANEL` takes the least of per curve (and of their ``seeds_`` twins): errors, each the smaller
#: the better
PANEL_SCORES = ("rmse", "rmse_ratio", "mean_rmse", "mean_rmse_ratio", "plateau_error_range", "plateau_error_ratio")


def panel_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The :data:`PANEL` row of one (curve, fraction) from its forecasts' ``rows``: of the methods of
    :data:`PANEL_METHODS` scored there, each of :data:`PANEL_SCORES` (and its ``seeds_`` twin) at its least, which
    method gave it in ``message``; none without a scored forecast. A target this bound misses is out of reach of
    every forecast the benchmark runs, even one that knew in hindsight which of them to trust on each curve."""
    members = [r for r in rows if r.get("method") in PANEL_METHODS and r.get("success") and "rmse" in r]
    if len(members) < 2:
        return []  # a choice needs two forecasts
    base = next((r for r in members if r["method"] == "forecaster"), members[0])
    keep = ("curve", "part", "split", "column", "fraction", "n_early", "n_held_out", "noise_sd", "truth_kind",
            "truth_moves", "plateau_observed", "plateau_true", "family", f"{SEEDS_PREFIX}truth_kind",
            f"{SEEDS_PREFIX}truth_moves", f"{SEEDS_PREFIX}plateau_true")
    row: dict[str, Any] = {k: base[k] for k in keep if k in base}
    row.update({"method": PANEL, "success": True})
    chosen = []
    for key in (*PANEL_SCORES, *(f"{SEEDS_PREFIX}{k}" for k in PANEL_SCORES)):
        scored = [(float(r[key]), r["method"]) for r in members
                  if isinstance(r.get(key), (int, float)) and math.isfinite(float(r[key]))]
        if scored:
            row[key], best = min(scored)
            if key in ("mean_rmse_ratio", "plateau_error_ratio"):
                chosen.append(f"{key}: {best}")
    row["message"] = "; ".join(chosen)
    return [row]


def panel_sweep_rows(sweeps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The :data:`PANEL` row of each (sweep, fraction): the most pairs ordered right and the least Brier score of
    :data:`PANEL_METHODS`' rows there (the order at the cut as theirs); the stop rule is left out (its two scores
    trade against each other: no least of both)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in sweeps:
        if r.get("method") in PANEL_METHODS:
            groups.setdefault((r["curve"], r["fraction"]), []).append(r)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        first = members[0]
        row = {k: first[k] for k in ("kind", "curve", "part", "split", "fraction", "family", "runs",
                                     "pairs_right_at_cut") if k in first}
        row.update({"method": PANEL, "success": True})
        for key, pick in (("pairs_right", max), ("brier", min)):
            values = [float(r[key]) for r in members if isinstance(r.get(key), (int, float))
                      and math.isfinite(float(r[key]))]
            if values:
                row[key] = pick(values)
        out.append(row)
    return out


def sweep_rows(sweeps: Mapping[tuple, Sequence[tuple]]) -> list[dict[str, Any]]:
    """One row per (sweep, fraction, method) with :func:`pgrpo.fit.decisions.score_sweep`'s scores (``kind``:
    ``sweep``); a sweep needs two runs."""
    out = []
    for (sweep, fraction, method), members in sorted(sweeps.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        if len(members) < 2:
            continue
        first = members[0][0]
        r_range = first.context.reward_range
        span = float(r_range[1] - r_range[0]) if r_range is not None else float(
            np.ptp(np.concatenate([m[0].values for m in members]))) or 1.0
        scores = score_sweep([m[1] for m in members], [m[2] for m in members], [m[3] for m in members],
                             [m[4] for m in members], fraction, span, true_final_se=[m[5] for m in members])
        out.append({"kind": "sweep", "curve": sweep, "part": first.part, "split": first.split, "fraction": fraction,
                    "method": method, "success": True, **({"family": first.family} if first.family else {}),
                    **scores})
    return out


#: the forecaster on each reward function, summed (curves that log them only)
STAGED = "forecaster: per reward fn, summed"


def staged_forecasts(settings: ForecasterSettings) -> StagedOf:
    """A function ``(curve, t, steps) ->`` :func:`pgrpo.fit.staged.forecast_components` on ``curve``'s reward
    functions, each in its declared range, cut where the early window ``t`` ends (the held-out ``steps`` set the
    horizon). It keeps its last answer: the forecaster and the staged method ask for the same cut one after the
    other (the sum is seeded, so a second call would only repeat it)."""
    from pgrpo.fit.staged import forecast_components

    last: dict[tuple, Any] = {}

    def staged_of(curve: Curve, t: np.ndarray, steps: np.ndarray) -> Any:
        key = (curve.id, float(t[-1]), float(steps[-1]))
        if key not in last:
            series = {fn: (ct, cy) for fn, (ct, cy, _) in curve.components.items()}
            ranges = {fn: r for fn, (_, _, r) in curve.components.items() if r is not None}
            total = float(max(steps[-1], t[-1]))
            last.clear()
            last[key] = forecast_components(series, min(1.0, float(t[-1]) / total), total, settings, ranges,
                                            cutoff_step=float(t[-1]))
        return last[key]

    return staged_of


def staged_method(settings: ForecasterSettings, staged_of: StagedOf | None = None) -> Method:
    """``pgrpo forecast``'s ``components`` (:func:`pgrpo.fit.staged.forecast_components`, the same function) on the
    curve's reward functions, each in its declared range, cut where the curve is: its summed predictive at the
    held-out steps (``staged_of``: as :func:`forecaster_method`'s)."""
    staged_of = staged_of or staged_forecasts(settings)

    def run(curve: Curve, t: np.ndarray, y: np.ndarray, steps: np.ndarray, context: RunContext) -> Predictive:
        from pgrpo.fit.staged import predictive_on_grid

        staged = staged_of(curve, t, steps)
        if staged.prediction is None:
            return dataclasses.replace(baseline_forecast("persistence", t, y, steps), success=False,
                                       message="; ".join(staged.notes))
        return predictive_on_grid(staged.prediction, steps)

    return run


#: the forecasts :data:`PANEL` chooses among: the baselines, the forecaster and the forecaster per reward function
PANEL_METHODS = (*BASELINES, "forecaster", STAGED)


def default_methods(settings: ForecasterSettings = ForecasterSettings()) -> dict[str, Method]:
    """The baselines and the forecaster with its kept levers (and per reward function, where a curve logs them)."""
    methods: dict[str, Method] = {name: baseline_method(name) for name in BASELINES}
    staged_of = staged_forecasts(settings)  # one sum per cut for both
    methods["forecaster"] = forecaster_method(settings, staged_of)
    methods[STAGED] = staged_method(settings, staged_of)
    methods[ORACLE] = oracle_method()
    methods[HINDSIGHT] = hindsight_method()
    methods[FAMILY_ORACLE] = family_oracle_method()
    return methods


def has_family_form(curve: Curve) -> bool:
    """Whether ``curve`` is a generated closed-form curve whose family has a form in
    :data:`pgrpo.fit.family_oracle.FORMS`, or a bandit curve with its setting."""
    from pgrpo.fit.family_oracle import FORMS

    return (curve.part == "closed-form" and curve.family in FORMS) or curve.bandit_setting is not None


# ---- summaries ---------------------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], float)
    return float(np.median(v)) if v.size else float("nan")


def _mean(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], float)
    return float(np.mean(v)) if v.size else float("nan")


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    ok = np.isfinite(values)
    values, weights = values[ok], weights[ok]
    if values.size == 0:
        return float("nan")
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    cum = np.cumsum(weights) / weights.sum()
    return float(values[np.searchsorted(cum, 0.5)])


SUMMARY_FIELDS = ("rmse_ratio", "noise_floor_ratio", "ratio_to_best_baseline", "coverage80", "coverage95",
                  "interval_score_ratio",
                  "crps_ratio", "plateau_abs_error_noise", "t90_abs_error_share")


def summarize(rows: Sequence[Mapping[str, Any]], baselines: Sequence[str] = BASELINES) -> list[dict[str, Any]]:
    """Per (part, split, fraction, method) and overall (every part weighted equally, per split and for both):
    the median ratios, mean coverages, median |plateau error| in noise s.d. and median |t90 error| share; the best
    baseline of a cell is the one (other than persistence's ratio to itself) with the lowest median RMSE ratio."""
    ok = [r for r in rows if r.get("success") and r.get("method") != "all" and "rmse" in r
          and r.get("kind") != "sweep"]
    cells: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in ok:
        cells.setdefault((r["part"], r["split"], r["fraction"]), []).append(r)
        if isinstance(r.get("family"), str) and r["family"]:  # each generated family is also a cell of its own (not counted again overall)
            cells.setdefault((f"{r['part']}: {r['family']}", r["split"], r["fraction"]), []).append(r)
        if isinstance(r.get(f"{SEEDS_PREFIX}truth_kind"), str):  # scored against the other seeds' mean: a cell of its own
            cells.setdefault((f"{r['part']}: {SEEDS_TRUTH}", r["split"], r["fraction"]), []).append(
                {**r, **{k[len(SEEDS_PREFIX):]: v for k, v in r.items() if k.startswith(SEEDS_PREFIX)}})
    scopes: list[tuple[str, str, float, list[Mapping[str, Any]]]] = [
        (part, split, fraction, group) for (part, split, fraction), group in sorted(cells.items())]
    fractions = sorted({r["fraction"] for r in ok})
    for fraction in fractions:
        for split in ("dev", "holdout", "all"):
            group = [r for r in ok if r["fraction"] == fraction and (split == "all" or r["split"] == split)]
            if group:
                scopes.append(("overall", split, fraction, group))
    out = []
    for part, split, fraction, group in scopes:
        out.extend(_summarize_scope(part, split, fraction, group, baselines))
    out = _with_decisions(out, [r for r in rows if r.get("kind") == "sweep" and r.get("success")])
    return with_recalibration(out, skip_suffix=f": {SEEDS_TRUTH}")


DECISION_FIELDS = ("pairs_right", "pairs_right_at_cut", "brier", "steps_saved", "stop_loss_share", "pairs",
                   "steps_saved_ceiling")


def _with_decisions(summary: list[dict[str, Any]], sweeps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The summary rows with the mean decision scores of the cell's sweeps (``sweeps``: their number; the stop
    rule's loss: the largest over the sweeps; ``pairs``: the pairs whose order the truth settles, summed)."""
    for row in summary:
        scope = row["part"]
        members = [r for r in sweeps if r["method"] == row["method"] and abs(r["fraction"] - row["fraction"]) < 1e-9
                   and (row["split"] == "all" or r["split"] == row["split"])
                   and (scope == "overall" or r["part"] == scope or f"{r['part']}: {r.get('family')}" == scope)]
        row["sweeps"] = len(members)
        for key in DECISION_FIELDS:
            values = [r.get(key, np.nan) for r in members]
            finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(float(v))]
            pick = {"stop_loss_share": max, "pairs": sum}.get(key, _mean)
            row[key] = pick(finite) if finite else float("nan")
    return summary


def _summarize_scope(part: str, split: str, fraction: float, group: Sequence[Mapping[str, Any]],
                     baselines: Sequence[str]) -> list[dict[str, Any]]:
    methods = list(dict.fromkeys(r["method"] for r in group))
    parts = {r["part"] for r in group}
    part_curves = {p: len({r["curve"] for r in group if r["part"] == p}) for p in parts}

    def weight(r):  # every part counts equally overall
        return 1.0 / part_curves[r["part"]]

    by_method = {m: [r for r in group if r["method"] == m] for m in methods}
    ratio_median = {m: _weighted_median(np.array([r.get("rmse_ratio", np.nan) for r in rs], float),
                                        np.array([weight(r) for r in rs])) for m, rs in by_method.items()}
    candidates = [b for b in baselines if b in by_method]
    best = min(candidates, key=lambda b: ratio_median[b]) if candidates else None
    best_rmse = {r["curve"]: r["rmse"] for r in by_method.get(best, [])} if best else {}
    rows = []
    for m, rs in by_method.items():
        w = np.array([weight(r) for r in rs])

        def wmed(key, transform=lambda v: v):
            return _weighted_median(np.array([transform(r.get(key, np.nan)) for r in rs], float), w)

        def wmean(key):
            v = np.array([r.get(key, np.nan) for r in rs], float)
            okv = np.isfinite(v)
            return float(np.sum(v[okv] * w[okv]) / np.sum(w[okv])) if okv.any() else float("nan")

        to_best = np.array([r["rmse"] / best_rmse[r["curve"]] if best_rmse.get(r["curve"]) else np.nan for r in rs])
        rows.append({
            "part": part, "split": split, "fraction": fraction, "method": m, "curves": len({r["curve"] for r in rs}),
            "best_baseline": best,
            "rmse_ratio": ratio_median[m],
            "noise_floor_ratio": wmed("noise_floor_ratio"),
            "ratio_to_best_baseline": _weighted_median(to_best, w),
            "coverage80": wmean("coverage80"), "coverage95": wmean("coverage95"),
            **{coverage_key(level): wmean(coverage_key(level)) for level in RECALIBRATION_LEVELS},
            "interval_score_ratio": wmed("interval_score_ratio"), "crps_ratio": wmed("crps_ratio"),
            "plateau_abs_error_noise": wmed("plateau_abs_error_noise"),
            "t90_abs_error_share": wmed("t90_error_share", abs),
            "wins_vs_persistence": float(np.mean([r.get("rmse_ratio", np.nan) < 1 for r in rs])),
            "mean_rmse_ratio": wmed("mean_rmse_ratio"),
            "moving_mean_rmse_ratio": _weighted_median(np.array([r.get("mean_rmse_ratio", np.nan) if r.get(
                "truth_moves") else np.nan for r in rs], float), w),
            "plateau_error_range": wmed("plateau_error_range"),
            "plateau_error_ratio": wmed("plateau_error_ratio"),
            "moving_plateau_error_ratio": _weighted_median(np.array([r.get("plateau_error_ratio", np.nan) if r.get(
                "truth_moves") else np.nan for r in rs], float), w),
            "plateau_covered80": wmean("plateau_covered80"),
            "t90_true_error_share": wmed("t90_true_error_share"),
            "truth_moves": wmean("truth_moves"),
            "truth_kind": ", ".join(sorted({r["truth_kind"] for r in rs if isinstance(r.get("truth_kind"), str)
                                            and r["truth_kind"]})),
        })
    return rows
