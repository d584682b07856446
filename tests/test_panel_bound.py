"""The forecast benchmark's last bound (issue 21, "the bound that puts it out of reach"): of the forecasts the
benchmark runs, each score's best on each curve, chosen in hindsight (``pgrpo.fit.benchmark.PANEL``), and what the
docs page and benchmark.md say of a target with it."""

import math

import numpy as np
import pytest

from pgrpo.fit.benchmark import PANEL, panel_rows, panel_sweep_rows


def _row(method, mean_ratio, plateau_ratio, rmse, **extra):
    return {"curve": "c", "part": "real", "split": "dev", "column": "reward", "fraction": 0.25, "method": method,
            "success": True, "rmse": rmse, "rmse_ratio": rmse / 2.0, "mean_rmse_ratio": mean_ratio,
            "plateau_error_ratio": plateau_ratio, "truth_moves": 1.0, "truth_kind": "true mean", **extra}


def test_the_panel_takes_each_scores_least_over_the_forecasts_only():
    rows = [_row("persistence", 1.0, 1.0, 2.0), _row("sigmoid", 0.7, 0.9, 1.5),
            _row("forecaster", 0.8, 0.3, 1.8, seeds_mean_rmse_ratio=0.9),
            _row("power_law", float("nan"), 0.6, 1.9),
            # oracles see the held-out values: never chosen, however good
            _row("oracle (cubic in hindsight)", 0.01, 0.01, 0.1), _row("oracle (tail mean)", 0.02, 0.02, 0.2),
            {**_row("exponential", 0.1, 0.1, 0.1), "success": False}]
    (panel,) = panel_rows(rows)
    assert panel["method"] == PANEL and panel["success"] is True
    assert panel["mean_rmse_ratio"] == 0.7 and panel["plateau_error_ratio"] == 0.3  # from different methods
    assert panel["rmse"] == 1.5 and panel["rmse_ratio"] == 0.75
    assert panel["seeds_mean_rmse_ratio"] == 0.9  # the one forecast scored against the other seeds' mean
    assert panel["truth_moves"] == 1.0 and panel["curve"] == "c"
    assert "mean_rmse_ratio: sigmoid" in panel["message"] and "plateau_error_ratio: forecaster" in panel["message"]
    assert math.isnan(panel.get("coverage80", float("nan")))  # no interval of its own


def test_no_choice_without_two_forecasts():
    assert panel_rows([_row("forecaster", 0.8, 0.3, 1.8), _row("oracle (cubic in hindsight)", 0.1, 0.1, 0.1)]) == []


def test_the_panel_of_a_sweep_orders_pairs_as_its_best_member():
    base = {"kind": "sweep", "curve": "s", "part": "real", "split": "dev", "fraction": 0.25, "success": True,
            "pairs_right_at_cut": 0.5}
    rows = [{**base, "method": "persistence", "pairs_right": 0.5, "brier": 0.4},
            {**base, "method": "forecaster", "pairs_right": 0.75, "brier": 0.3},
            {**base, "method": "sigmoid", "pairs_right": 0.6, "brier": 0.1},
            {**base, "method": "oracle (cubic in hindsight)", "pairs_right": 1.0, "brier": 0.0}]
    (panel,) = panel_sweep_rows(rows)
    assert (panel["pairs_right"], panel["brier"], panel["pairs_right_at_cut"]) == (0.75, 0.1, 0.5)
    assert "steps_saved" not in panel


def test_the_protocol_scores_the_panel_on_every_curve():
    """On generated curves with the true mean known: the panel's mean-curve ratio is the least of the three
    forecasts' own, curve by curve, and the summary's cell takes the median of those."""
    from pgrpo.fit.benchmark import baseline_method, run_protocol, summarize
    from pgrpo.stages.forecast_benchmark import closed_form_corpus

    corpus = [c for c in closed_form_corpus() if c.family in ("rise", "sigmoid")][:3]
    methods = {name: baseline_method(name) for name in ("persistence", "exponential", "sigmoid")}
    rows = run_protocol(corpus, methods, fractions=(0.25,))
    for curve in corpus:
        mine = {r["method"]: r for r in rows if r["curve"] == curve.id and r.get("success")}
        assert mine[PANEL]["mean_rmse_ratio"] == pytest.approx(min(
            mine[m]["mean_rmse_ratio"] for m in methods if np.isfinite(mine[m]["mean_rmse_ratio"])))
    cell = next(r for r in summarize(rows) if r["method"] == PANEL and r["part"] == "closed-form")
    per_curve = [r["mean_rmse_ratio"] for r in rows if r["method"] == PANEL and r.get("kind") != "sweep"
                 and r["truth_moves"]]
    assert cell["moving_mean_rmse_ratio"] == pytest.approx(float(np.sort(per_curve)[(len(per_curve) - 1) // 2]))


def _cell(mean_curve, panel_mean, plateau, panel_plateau, pairs=None, panel_pairs=None):
    return {"part": "real", "split": "dev", "truth_kind": "smoothed reference", "truth_moves": 1.0,
            "moving_mean_rmse_ratio": mean_curve, "hindsight_moving_mean_rmse_ratio": 0.2,
            "panel_moving_mean_rmse_ratio": panel_mean, "moving_plateau_error_ratio": plateau,
            "hindsight_moving_plateau_error_ratio": 0.05, "panel_moving_plateau_error_ratio": panel_plateau,
            "coverage80": 0.8, "pairs_right": pairs, "pairs_right_at_cut": 0.5 if pairs is not None else None,
            "hindsight_pairs_right": 1.0 if pairs is not None else None, "panel_pairs_right": panel_pairs,
            "sweeps": 1 if pairs is not None else 0}


def test_the_page_names_the_panel_bound_beside_the_cubic():
    from pgrpo.tables.forecast_truth import PANEL_NAME, PANEL_SWEEP_NAME
    from pgrpo.tables.results_pages import _forecast_truth

    text = "\n".join(_forecast_truth([_cell(0.9, 0.75, 0.8, 0.3)]))
    assert f"hindsight cubic 0.200: in reach; {PANEL_NAME} 0.750: out of the reach of every forecast here" in text
    assert f"{PANEL_NAME} 0.300: in reach" in text  # the plateau: the forecaster's own shortfall
    text = "\n".join(_forecast_truth([_cell(0.5, 0.4, 0.4, 0.3)]))
    assert "0.500 met" in text and "0.400 met" in text and PANEL_NAME not in text.split("|", 20)[-1]
    # pairs: 70% right with the order at the cut at 50% misses 80%; a panel at 85% (+35 points) is in reach
    text = "\n".join(_forecast_truth([_cell(0.9, 0.75, 0.8, 0.3, pairs=0.7, panel_pairs=0.85)]))
    assert f"70% · 50% **not met** (hindsight cubic 100%: in reach; {PANEL_SWEEP_NAME} 85%: in reach)" in text
    text = "\n".join(_forecast_truth([_cell(0.9, 0.75, 0.8, 0.3, pairs=0.7, panel_pairs=0.55)]))
    assert f"{PANEL_SWEEP_NAME} 55%: out of the reach of every forecast here" in text


def test_benchmark_md_verdicts_read_the_panel():
    from pgrpo.tables.forecast_benchmark import truth_verdict_lines

    common = {"part": "real", "split": "dev", "fraction": 0.25}
    summary = [{**common, "method": "forecaster", "curves": 3, "truth_kind": "true mean", "coverage80": 0.8,
                "mean_rmse_ratio": 0.9, "moving_mean_rmse_ratio": 0.9, "moving_plateau_error_ratio": 0.8},
               {**common, "method": PANEL, "moving_mean_rmse_ratio": 0.7, "moving_plateau_error_ratio": 0.4}]
    line = truth_verdict_lines(summary)[0]
    assert "chosen per curve in hindsight 0.700: out of the reach of every forecast here" in line
    assert "chosen per curve in hindsight 0.400: in reach" in line
    assert line.endswith("-> open: a missed target that every bound leaves in reach")  # the plateau's


def test_arithmetic_bounds_on_the_decision_targets():
    """Two bounds no forecast can move: a stop rule that decides at the cut f and keeps a run saves at most
    (n - 1) / n x (1 - f) of a sweep's steps (two runs cut at a quarter: 37.5%, under the 40% target; four runs:
    56.25%); and where the order at the cut is already right on more than 90% of the pairs, +10 points is beyond
    every pair. Both the docs page and benchmark.md name them, and only where they bind."""
    from pgrpo.fit.decisions import score_sweep, steps_saved_ceiling
    from pgrpo.tables.forecast_benchmark import truth_verdict_lines
    from pgrpo.tables.results_pages import _forecast_truth

    assert steps_saved_ceiling(2, 0.25) == pytest.approx(0.375)
    assert steps_saved_ceiling(4, 0.25) == pytest.approx(0.5625)
    draws = [np.full(50, 0.2), np.full(50, 0.9), np.full(50, 0.5)]
    scores = score_sweep(draws, [0.2, 0.9, 0.5], [0.3, 0.6, 0.4], [0.2, 0.9, 0.5], 0.5, 1.0)
    assert scores["steps_saved_ceiling"] == pytest.approx(2 / 3 * 0.5)
    assert scores["steps_saved"] == pytest.approx(scores["steps_saved_ceiling"])  # both losers stopped at the cut

    cell = {**_cell(0.9, 0.75, 0.8, 0.3, pairs=0.92, panel_pairs=0.96), "pairs_right_at_cut": 0.96,
            "steps_saved": 0.0, "stop_loss_share": 0.0, "steps_saved_ceiling": 0.375,
            "hindsight_steps_saved": 0.2, "hindsight_stop_loss_share": 0.0}
    text = "\n".join(_forecast_truth([cell]))
    assert "the order at the cut is already right on 96%: +10 points would need more than every pair" in text
    assert "stopping every run but one at the cut saves 38%: out of any stop rule's reach at this cut" in text
    wide = {**cell, "pairs_right_at_cut": 0.5, "steps_saved_ceiling": 0.6}
    text = "\n".join(_forecast_truth([wide]))
    assert "already right on" not in text and "stopping every run but one" not in text

    row = {"part": "real", "split": "dev", "fraction": 0.25, "method": "forecaster", "curves": 4,
           "truth_kind": "true mean", "coverage80": 0.8, "mean_rmse_ratio": 0.5, "moving_mean_rmse_ratio": 0.5,
           "moving_plateau_error_ratio": 0.4, "pairs_right": 0.92, "pairs_right_at_cut": 0.96, "steps_saved": 0.1,
           "stop_loss_share": 0.0, "steps_saved_ceiling": 0.375}
    line = truth_verdict_lines([row])[0]
    assert "out of any forecast's reach" in line and "out of any stop rule's reach" in line


def test_benchmark_md_pairs_verdict_reads_the_panel():
    """The pairs target (>= 80% and >= +10 points on the order at the cut) read against the most pairs any of the
    panel's forecasts orders right per sweep, chosen in hindsight: 71% is out of reach whatever the margin; 90% with
    the order at the cut at 50% is in reach; 85% with the order at the cut at 80% misses the margin."""
    from pgrpo.tables.forecast_benchmark import truth_verdict_lines

    common = {"part": "real", "split": "dev", "fraction": 0.25}

    def line(panel_pairs, at_cut):
        summary = [{**common, "method": "forecaster", "curves": 6, "truth_kind": "true mean", "coverage80": 0.8,
                    "mean_rmse_ratio": 0.5, "moving_mean_rmse_ratio": 0.5, "moving_plateau_error_ratio": 0.4,
                    "pairs_right": 0.6, "pairs_right_at_cut": at_cut, "steps_saved": 0.5, "stop_loss_share": 0.0},
                   {**common, "method": PANEL, "pairs_right": panel_pairs, "pairs_right_at_cut": at_cut}]
        return truth_verdict_lines(summary)[0]

    assert "chosen per sweep in hindsight 71%: out of the reach of every forecast here" in line(0.71, 0.5)
    assert "chosen per sweep in hindsight 90%: in reach" in line(0.9, 0.5)
    assert "chosen per sweep in hindsight 85%: out of the reach" in line(0.85, 0.8)
