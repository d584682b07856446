"""The forecast benchmark's Markdown (beyond the paper; the laws of Section 3.5, Eq. 14-16, against a user's
baselines): the verdict on the targets, one table per fraction (per corpus part and split, and overall), the levers,
the corpus with its provenance.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from pgrpo.fit.benchmark import FAMILY_ORACLE, HINDSIGHT, PANEL, SEEDS_TRUTH, STAGED
from pgrpo.fit.recalibration import CALIBRATION_TARGET
from pgrpo.fit.truth_targets import TARGET_FRACTION, truth_cell
from pgrpo.tables.forecast_truth import standing_lines, verdict_line
from pgrpo.tables.render import finite_number, markdown_table

#: the forecaster's targets on the logged values at f = 0.25 (issue 10: "a forecaster that wins"; issue 21's are in
#: :mod:`pgrpo.fit.truth_targets`)
TARGET_PERSISTENCE, TARGET_BEST_BASELINE, TARGET_COVERAGE = 0.85, 0.90, CALIBRATION_TARGET

_COLUMNS = (("curves", "curves", 0), ("rmse_ratio", "RMSE / persistence", 3),
            ("noise_floor_ratio", "noise floor / pers.", 3),
            ("ratio_to_best_baseline", "RMSE / best baseline", 3), ("coverage80", "80% cover", 2),
            ("coverage95", "95% cover", 2), ("interval_score_ratio", "interval score / pers.", 3),
            ("crps_ratio", "CRPS / pers.", 3), ("plateau_abs_error_noise", "plateau abs err / noise sd", 2),
            ("t90_abs_error_share", "t90 abs err / run", 3), ("wins_vs_persistence", "beats pers.", 2))



_TRUTH_COLUMNS = (("curves", "curves", 0), ("truth_moves", "truth moves", 2),
                  ("mean_rmse_ratio", "mean-curve RMSE / pers.", 3),
                  ("moving_mean_rmse_ratio", "same, moving truth", 3),
                  ("plateau_error_range", "plateau abs err / range", 3),
                  ("moving_plateau_error_ratio", "plateau err / pers., moving", 3),
                  ("plateau_covered80", "plateau in 80%", 2), ("t90_true_error_share", "t90 abs err / run", 3),
                  ("sweeps", "sweeps", 0), ("pairs_right", "pairs right", 2),
                  ("pairs_right_at_cut", "pairs right at cut", 2), ("brier", "Brier P(top)", 3),
                  ("steps_saved", "stop: steps saved", 2), ("stop_loss_share", "stop: loss / range", 3),
                  ("rmse_ratio", "logged RMSE / pers.", 3), ("coverage80", "80% cover", 2),
                  ("crps_ratio", "CRPS / pers.", 3))


def _truth_table(rows: Sequence[Mapping[str, Any]]) -> str:
    headers = ["part", "split", "method", "truth", *[label for _, label, _ in _TRUTH_COLUMNS]]
    body = [[r["part"], r["split"], r["method"], str(r.get("truth_kind") or ""),
             *[_f(r.get(key), d) for key, _, d in _TRUTH_COLUMNS]] for r in rows]
    return markdown_table(headers, body)


def truth_verdict_lines(summary: Sequence[Mapping[str, Any]], method: str = "forecaster") -> list[str]:
    """Per (part, split) at the target fraction: the forecaster against issue 21's targets with the bounds beside
    each missed one (:func:`pgrpo.fit.truth_targets.target_readings`, rendered by
    :func:`pgrpo.tables.forecast_truth.verdict_line`, as the docs' Benchmarks page renders them), then where the
    cells stand (:func:`pgrpo.tables.forecast_truth.standing_lines`)."""
    at = [r for r in summary if abs(r["fraction"] - TARGET_FRACTION) < 1e-9]
    by_cell = {(r["part"], r["split"], r["method"]): r for r in at}
    cells = [truth_cell(by_cell, r["part"], r["split"], method, HINDSIGHT, FAMILY_ORACLE, PANEL)
             for r in in_part_order(at) if r["method"] == method and finite_number(r.get("mean_rmse_ratio"))]
    lines = [verdict_line(c) for c in cells]
    standing = standing_lines(cells)
    return lines + ([""] + standing if standing else [])


def _f(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if digits == 0:
        return str(int(round(value)))
    return f"{value:.{digits}f}"


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    headers = ["part", "split", "method", *[label for _, label, _ in _COLUMNS], "best baseline"]
    body = [[r["part"], r["split"], r["method"], *[_f(r.get(key), d) for key, _, d in _COLUMNS],
             str(r.get("best_baseline"))] for r in rows]
    return markdown_table(headers, body)


def in_part_order(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows by corpus part (workflow, bandit, real, overall), then split (dev, holdout, all)."""
    part_rank = {"workflow": 0, f"workflow: {SEEDS_TRUTH}": 0.5, "bandit": 1, "bandit sweep": 2, "real": 3,
                 "kref sweep": 3.5, "closed-form": 4, "overall": 9}
    split_rank = {"dev": 0, "holdout": 1, "all": 2}
    return sorted(rows, key=lambda r: (part_rank.get(r["part"], part_rank["closed-form"] + 0.5), r["part"],
                                       split_rank.get(r["split"], 9)))


def floor_reading(ratio: float, floor: float, target: float = TARGET_PERSISTENCE,
                  hindsight: float = float("nan")) -> str:
    """What the cell's bounds say of it: a target under the cubic fitted in hindsight to the held-out values
    themselves (``hindsight``, its median ratio) asks a forecast to beat the best smooth curve through the answer;
    a target under the noise floor cannot be met by any method (no forecast's expected RMSE is below the noise),
    unless the cubic in hindsight is under the target (the floor, an estimate, is then loose: the bounds disagree);
    else the share of the gap from persistence (1) down to the floor that the ratio closes,
    ``(1 - ratio) / (1 - floor)``."""
    if finite_number(hindsight) and hindsight >= target:
        return (f"a cubic fitted in hindsight to the held-out values themselves reaches {hindsight:.3f} x: the target "
                "is under the best smooth curve through them, out of any forecast's reach on this cell")
    if not finite_number(floor):
        return "no noise floor"
    if floor >= target and finite_number(hindsight):
        return (f"the noise floor is above the target and the cubic fitted in hindsight below it ({hindsight:.3f} x): "
                "the two bounds disagree on this cell, so neither rules the target out")
    if floor >= target:
        return "the target is under the noise floor: no method can meet it on this cell"
    if not math.isfinite(ratio):
        return "no ratio"
    return f"it closes {100 * (1 - ratio) / (1 - floor):.0f}% of the gap from persistence to the noise floor"


def hindsight_gap(ratio: float, hindsight: float) -> str:
    """The share of the gap from persistence (1) down to the cubic fitted in hindsight that ``ratio`` closes,
    ``(1 - ratio) / (1 - hindsight)``: what a forecast achieves of what the best smooth curve through the held-out
    values would (empty where the cubic is not under persistence)."""
    if not (finite_number(ratio) and finite_number(hindsight)) or hindsight >= 1.0:
        return ""
    return f"; it closes {100 * (1 - ratio) / (1 - hindsight):.0f}% of the gap from persistence to the hindsight cubic"


def verdict_lines(summary: Sequence[Mapping[str, Any]], method: str = "forecaster") -> list[str]:
    """One line per (part, split) at the target fraction: the forecaster's numbers against the targets."""
    lines = []
    at_target = [r for r in summary if r["method"] == method and abs(r["fraction"] - TARGET_FRACTION) < 1e-9]
    hindsight = {(r["part"], r["split"]): r for r in summary
                 if r["method"] == HINDSIGHT and abs(r["fraction"] - TARGET_FRACTION) < 1e-9}
    for r in in_part_order(at_target):
        lo, hi = TARGET_COVERAGE
        bound = hindsight.get((r["part"], r["split"]), {})
        cubic = bound.get("rmse_ratio", float("nan"))
        reading = floor_reading(r["rmse_ratio"], r.get("noise_floor_ratio"), hindsight=cubic)
        reading += hindsight_gap(r["rmse_ratio"], cubic)
        to_best = bound.get("ratio_to_best_baseline", float("nan"))
        best_reading = (f"; a cubic fitted in hindsight to the held-out values reaches {to_best:.3f} x it: out of "
                        "any forecast's reach" if finite_number(to_best) and to_best >= TARGET_BEST_BASELINE else "")
        checks = [
            (r["rmse_ratio"] <= TARGET_PERSISTENCE, f"RMSE {_f(r['rmse_ratio'], 3)} x persistence "
                                                    f"(target <= {TARGET_PERSISTENCE}; the held-out noise alone is "
                                                    f"{_f(r.get('noise_floor_ratio'), 3)} x; "
                                                    f"{reading})"),
            (r["ratio_to_best_baseline"] <= TARGET_BEST_BASELINE,
             f"{_f(r['ratio_to_best_baseline'], 3)} x the best baseline, {r['best_baseline']} "
             f"(target <= {TARGET_BEST_BASELINE}{best_reading})"),
            (lo <= r["coverage80"] <= hi, f"80% interval covers {_f(100 * r['coverage80'], 0)}% "
                                          f"(target {lo:.0%}-{hi:.0%})"),
        ]
        met = all(ok for ok, _ in checks)
        lines.append(f"- **{r['part']} / {r['split']}** ({r['curves']} curves): " + "; ".join(
            f"{text} {'met' if ok else 'NOT met'}" for ok, text in checks) + (" -> all met" if met else ""))
    return lines


def benchmark_markdown(summary: Sequence[Mapping[str, Any]], lever_summary: Sequence[Mapping[str, Any]],
                       parts: Sequence[str], notes: Sequence[str], provenance: Sequence[Mapping[str, Any]],
                       fractions: Sequence[float]) -> str:
    md = ["# Forecast benchmark", "",
          "Each curve is cut at a fraction f of its steps (`step <= f * last step`); every method is fitted on the "
          "points up to the cut and scored on the logged values after it: held-out RMSE (median of the per-curve "
          "ratio to persistence, and to the best baseline of the cell), mean coverage of the 80% and 95% intervals, "
          "the 80% interval score and the CRPS (median ratios to persistence), the plateau error against the mean of "
          "the last 10% of the curve in units of the early window's noise s.d., and the time-to-90% error as a "
          "share of the run (only where the curve changes by more than three standard errors). `dev`: methods and "
          "levers were chosen on it; `holdout`: reported only. `overall`: every part weighted equally. "
          "`oracle (tail mean)` is no method: the held-out values' own mean, the floor any constant forecast has. "
          "`noise floor / pers.`: the held-out values' own noise s.d. (from their first differences) over "
          "persistence's RMSE, the median over the cell's curves: no forecast's expected RMSE is below the noise, "
          "so a target under this number cannot be met on that cell by any method. `oracle (cubic in hindsight)` is "
          "no method either: a cubic in the step least-squares fitted to the held-out values themselves, the least "
          "RMSE any forecast of that form has on the curve; a target under its ratio asks a forecast to beat the "
          "best smooth curve drawn through the answer.",
          "", f"Corpus parts present: {', '.join(parts)}.", ""]
    md += [f"- {note}" for note in notes]
    md += ["", f"## Verdict at f = {TARGET_FRACTION}", ""] + verdict_lines(summary) + [""]
    for fraction in fractions:
        rows = in_part_order([r for r in summary if abs(r["fraction"] - fraction) < 1e-9])
        if rows:
            md += [f"## f = {fraction}", "", _table(rows), ""]
    truth_rows = [r for r in summary if finite_number(r.get("mean_rmse_ratio"))
                  and r["method"] in ("forecaster", "persistence", STAGED, HINDSIGHT, FAMILY_ORACLE)]
    if truth_rows:
        md += [f"## Against the truth and in decisions: verdict at f = {TARGET_FRACTION}", "",
               "The forecast judged as users decide (issue 21): the mean curve against the true mean (the bandit's "
               "own expected reward, the generated families' closed forms) or, where none is known, a smoother of "
               "the held-out values with its span chosen by leave-one-out cross-validation; the plateau (mean over "
               "the run's last 10% of steps) and t90 errors normalised by the reward's range and the run's length; "
               "within a sweep (runs of one family or grid, same steps): the share of pairs ordered right by the "
               "forecast plateau, against the order of the levels at the cut, the Brier score of P(ends highest) and "
               "the stop rule of Domhan et al. (stop a run when P(its plateau > the best level so far) < 0.05): the "
               "share of the sweep's steps it saves and the best final level it loses (the worst sweep of the cell). "
               "`same, moving truth`: only the curves whose truth moves by more than 3% of the range after the cut.",
               ""] + truth_verdict_lines(summary) + [""]
        for fraction in fractions:
            rows = in_part_order([r for r in truth_rows if abs(r["fraction"] - fraction) < 1e-9])
            if rows:
                md += [f"### Against the truth, f = {fraction}", "", _truth_table(rows), ""]
    if lever_summary:
        md += [f"## Levers at f = {TARGET_FRACTION}", "",
               "Each row switches one lever of the forecaster against its default (`forecaster`); a lever is kept "
               "where it helps on `dev`.", "",
               _table(in_part_order([r for r in lever_summary if r["method"].startswith("forecaster")])), ""]
    md += ["## Corpus", "", markdown_table(
        ["curve", "part", "split", "provenance"],
        [[p["id"], p["part"], p["split"], _provenance(p)] for p in provenance]), ""]
    return "\n".join(md)


def _provenance(p: Mapping[str, Any]) -> str:
    source = p.get("source")
    if isinstance(source, Mapping):
        text = f"{source.get('repo', '')} ({source.get('license', 'license unknown')}) {source.get('url', '')}"
    else:
        text = str(source or "")
    if p.get("setting"):
        text = f"{p['setting']}; {text}"
    return text.replace("|", "/")
