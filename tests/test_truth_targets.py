"""Issue 21's targets per cell against their bounds (pgrpo.fit.truth_targets): each target met, shown out of reach
by a bound that holds for any forecast or for the early window, beyond every forecast the benchmark runs, beyond any
recalibration of the forecaster, or open; a cell counts as its worst target; benchmark.md and the docs page say the
same (one rendering, pgrpo.tables.forecast_truth). Every cell below is written by hand against the targets of the
issue (mean curve <= 0.6, plateau <= 0.5 of persistence's, pairs >= 80% and +10 points, stop >= 40% for <= 2%,
coverage 70-90%)."""

import pytest

from pgrpo.fit.truth_targets import (BEYOND_HERE, BEYOND_RECALIBRATION, MET, OPEN, OUT_OF_REACH, cell_status,
                                     standing, target_readings, truth_cell)


def _cell(**over):
    base = {"part": "real", "split": "dev", "truth_kind": "true mean", "coverage80": 0.8,
            "moving_mean_rmse_ratio": 0.5, "moving_plateau_error_ratio": 0.4}
    return {**base, **over}


def _status(cell, target):
    return next(r for r in target_readings(cell) if r.target == target).status


def test_met_targets_and_a_cell_all_met():
    cell = _cell()
    assert [r.target for r in target_readings(cell)] == ["mean curve", "plateau", "coverage"]
    assert cell_status(target_readings(cell)) == MET


def test_a_miss_every_bound_leaves_in_reach_is_open():
    cell = _cell(moving_mean_rmse_ratio=0.8, hindsight_moving_mean_rmse_ratio=0.1, panel_moving_mean_rmse_ratio=0.55)
    assert _status(cell, "mean curve") == OPEN and cell_status(target_readings(cell)) == OPEN


@pytest.mark.parametrize("bound, status", [
    ({"hindsight_moving_mean_rmse_ratio": 0.7}, OUT_OF_REACH),  # the best cubic through the answer misses it
    ({"family_moving_mean_rmse_ratio": 0.9}, OUT_OF_REACH),  # the true form, fitted to the early window, misses it
    ({"panel_moving_mean_rmse_ratio": 0.65}, BEYOND_HERE),  # only the benchmark's own forecasts miss it
    ({"hindsight_moving_mean_rmse_ratio": 0.1, "panel_moving_mean_rmse_ratio": 0.4}, OPEN)])
def test_the_bound_that_misses_names_the_status(bound, status):
    assert _status(_cell(moving_mean_rmse_ratio=0.8, **bound), "mean curve") == status


def test_the_arithmetic_bounds_on_the_decisions():
    # the order at the cut right on 95% of pairs: +10 points is past every pair; two runs a sweep cut at a quarter:
    # stopping all but one at the cut saves 37.5% < 40%
    cell = _cell(pairs_right=0.9, pairs_right_at_cut=0.95, hindsight_pairs_right=1.0, steps_saved=0.1,
                 stop_loss_share=0.0, steps_saved_ceiling=0.375, hindsight_steps_saved=0.375,
                 hindsight_stop_loss_share=0.0)
    assert _status(cell, "pairs") == OUT_OF_REACH and _status(cell, "stop rule") == OUT_OF_REACH
    # 70% right against 50% at the cut, three runs a sweep: both bounds in reach, both targets open
    cell.update(pairs_right=0.7, pairs_right_at_cut=0.5, steps_saved_ceiling=0.5, hindsight_steps_saved=0.5)
    assert _status(cell, "pairs") == OPEN and _status(cell, "stop rule") == OPEN
    # 85% right against 80% at the cut: the 80% is met, the +10 points are not
    cell.update(pairs_right=0.85, pairs_right_at_cut=0.8)
    assert _status(cell, "pairs") == OPEN
    cell.update(pairs_right=0.95)
    assert _status(cell, "pairs") == MET


def test_a_coverage_no_recalibration_brings_in():
    cell = _cell(coverage80=0.55, recalibrated_level=None, recalibrated_out=[], recalibrated_reach=False)
    assert _status(cell, "coverage") == BEYOND_RECALIBRATION
    cell.update(recalibrated_level=0.9, recalibrated_coverage=0.72, recalibrated_out=[], recalibrated_reach=True)
    assert _status(cell, "coverage") == OPEN
    cell.update(coverage80=0.905)  # over 90%: a miss too
    assert _status(cell, "coverage") == OPEN
    assert _status(_cell(coverage80=0.9), "coverage") == MET


def test_a_truth_that_does_not_move_is_scored_on_its_interval_alone():
    cell = _cell(moving_mean_rmse_ratio=float("nan"), moving_plateau_error_ratio=float("nan"), pairs_right=0.1,
                 pairs_right_at_cut=0.1, steps_saved=0.0, stop_loss_share=0.5)
    assert [r.target for r in target_readings(cell)] == ["coverage"]


def test_a_cell_is_its_worst_target_and_the_standing_counts_cells():
    out = _cell(part="closed-form", moving_mean_rmse_ratio=0.9, family_moving_mean_rmse_ratio=0.95)
    here = _cell(part="bandit", moving_plateau_error_ratio=0.7, panel_moving_plateau_error_ratio=0.6)
    both = {**out, "part": "kref", "moving_plateau_error_ratio": 0.7, "hindsight_moving_plateau_error_ratio": 0.2}
    overall = _cell(part="overall", moving_mean_rmse_ratio=0.9)
    s = standing([_cell(), out, here, both, overall])
    assert s.total == 4  # the overall row pools the others
    assert s.cells[MET] == [("real", "dev")] and s.cells[OUT_OF_REACH] == [("closed-form", "dev")]
    assert s.cells[BEYOND_HERE] == [("bandit", "dev")] and s.cells[OPEN] == [("kref", "dev")]
    assert s.open_targets == {("kref", "dev"): ["plateau"]}


def test_truth_cell_takes_each_bound_from_its_row():
    by_cell = {("real", "dev", "forecaster"): {"part": "real", "split": "dev", "moving_mean_rmse_ratio": 0.8},
               ("real", "dev", "cubic"): {"moving_mean_rmse_ratio": 0.1, "pairs_right": 1.0},
               ("real", "dev", "family"): {"moving_mean_rmse_ratio": 0.9},
               ("real", "dev", "panel"): {"moving_plateau_error_ratio": float("nan")}}
    cell = truth_cell(by_cell, "real", "dev", "forecaster", "cubic", "family", "panel")
    assert cell["hindsight_moving_mean_rmse_ratio"] == 0.1 and cell["hindsight_pairs_right"] == 1.0
    assert cell["family_moving_mean_rmse_ratio"] == 0.9 and cell["panel_moving_plateau_error_ratio"] is None
    assert truth_cell({**by_cell, ("overall", "dev", "family"): {"moving_mean_rmse_ratio": 0.9}},
                      "overall", "dev", "forecaster", "cubic", "family", "panel")["family_moving_mean_rmse_ratio"] is None


def test_benchmark_md_and_the_docs_page_render_the_same_reading():
    from pgrpo.tables.forecast_truth import standing_lines, target_text, verdict_line
    from pgrpo.tables.results_pages import _forecast_truth

    cell = _cell(part="closed-form", curves=4, moving_mean_rmse_ratio=0.9, family_moving_mean_rmse_ratio=0.95,
                 hindsight_moving_mean_rmse_ratio=0.1)
    (reading, *_) = target_readings(cell)
    bounds = ("hindsight cubic 0.100: in reach; the true family fitted to the early window 0.950: out of the early "
              "window's reach")
    assert target_text(reading, cell) == f"0.900 **not met** ({bounds})"
    line = verdict_line(cell)
    assert bounds in line and line.endswith("-> every missed target out of reach (the bound named)")
    page = "\n".join(_forecast_truth([cell]))
    assert f"0.900 **not met** ({bounds})" in page
    assert "\n".join(standing_lines([cell])) in page
    assert "every missed target out of reach, by a bound that holds for any forecast or for the early window: 1 " \
           "(closed-form / dev)" in page
