"""The calibration bound of issue 21 (pgrpo.fit.recalibration): the forecaster's predictive read at one level for
every curve of a split, chosen in hindsight, against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgrpo.fit.recalibration import coverage_at_levels, coverage_key, with_recalibration
from pgrpo.tables.recalibration import leaving_cells, recalibration_reading


def test_coverage_at_levels_against_the_normal_quantiles():
    """Draws of N(0, 1) at every step: the central 50/80/95/99% intervals are +-0.674, 1.282, 1.960, 2.576, so
    of the values -2, -1, 0, 1, 2 they cover 1, 3, 3 and 5."""
    rng = np.random.default_rng(0)
    draws = rng.normal(0.0, 1.0, (40000, 5))
    got = coverage_at_levels(draws, np.array([-2.0, -1.0, 0.0, 1.0, 2.0]), levels=(0.5, 0.8, 0.95, 0.99))
    assert got == {"coverage_at_50": 0.2, "coverage_at_80": 0.6, "coverage_at_95": 0.6, "coverage_at_99": 1.0}


def _cell(part, split, **coverages):
    return {"part": part, "split": split, "fraction": 0.25, "method": "forecaster",
            **{coverage_key(int(k[1:]) / 100): v for k, v in coverages.items()}}


def test_one_level_for_the_whole_split():
    """Three dev cells read at 80/90/95%: ``narrow`` is in range only at 90% (75%) and 95% (85%); at 90% ``wide``
    (in range at 80%) leaves (92%), at 95% ``wide`` (97%) and ``fine`` (93%) do: the best level is 90% with one cell
    leaving, so ``narrow`` is out of reach of a recalibration. ``wide`` is in range at 80% already and none leaves.
    A holdout cell, alone in its split, is in reach at the level nearest 0.8 that brings it in; the overall row and
    another method's rows get nothing."""
    rows = [_cell("narrow", "dev", l80=0.60, l90=0.75, l95=0.85),
            _cell("wide", "dev", l80=0.85, l90=0.92, l95=0.97),
            _cell("fine", "dev", l80=0.80, l90=0.88, l95=0.93),
            _cell("alone", "holdout", l80=0.95, l90=0.97, l95=0.99) | {coverage_key(0.7): 0.88,
                                                                      coverage_key(0.5): 0.75},
            _cell("overall", "dev", l80=0.8), {**_cell("narrow", "dev", l80=0.6), "method": "persistence"}]
    out = {(r["part"], r["split"], r["method"]): r for r in with_recalibration(
        rows, levels=(0.5, 0.7, 0.8, 0.9, 0.95))}
    narrow = out[("narrow", "dev", "forecaster")]
    assert narrow["recalibrated_level"] == 0.9 and narrow["recalibrated_coverage"] == 0.75
    assert narrow["recalibrated_out"] == [("wide", 0.92)] and narrow["recalibrated_reach"] is False
    assert "out of reach of any recalibration" in recalibration_reading(narrow)
    assert "wide (92%), within 70%-90% at 80%, falls outside it" in recalibration_reading(narrow)
    wide = out[("wide", "dev", "forecaster")]
    assert wide["recalibrated_level"] == 0.8 and wide["recalibrated_out"] == [] and wide["recalibrated_reach"]
    alone = out[("alone", "holdout", "forecaster")]
    assert alone["recalibrated_level"] == 0.7 and alone["recalibrated_reach"] is True
    assert "in reach of a recalibration" in recalibration_reading(alone)
    assert "recalibrated_level" not in out[("overall", "dev", "forecaster")]
    assert "recalibrated_level" not in out[("narrow", "dev", "persistence")]
    assert recalibration_reading(out[("overall", "dev", "forecaster")]) == ""


def test_only_cells_in_range_at_80_percent_count_as_leaving():
    """A is in range at 90% (80%); B, out at every level, does not count against it; C, in range at 80% (85%),
    leaves at 90% (90.4%, shown with its decimal). C itself is in range at 80% with nothing leaving."""
    rows = [_cell("A", "dev", l80=0.60, l90=0.80), _cell("B", "dev", l80=0.30, l90=0.40),
            _cell("C", "dev", l80=0.85, l90=0.904)]
    a, b, c = with_recalibration(rows, levels=(0.8, 0.9))
    assert a["recalibrated_level"] == 0.9 and leaving_cells(a["recalibrated_out"]) == "C (90.4%)"
    assert math.isnan(b["recalibrated_level"]) and c["recalibrated_reach"] is True


def test_a_part_with_family_cells_is_their_union():
    """``closed-form`` (the union of its families ``a`` and ``b``) is not counted against another cell beside its
    families, nor are its families counted against it: ``a`` is in at 90% with only ``bandit`` leaving (not the
    parent too); the parent is in at 90% with ``bandit`` leaving (not ``b``)."""
    rows = [_cell("closed-form", "dev", l80=0.65, l90=0.75), _cell("closed-form: a", "dev", l80=0.55, l90=0.72),
            _cell("closed-form: b", "dev", l80=0.75, l90=0.95), _cell("bandit", "dev", l80=0.88, l90=0.93)]
    parent, a, _, _ = with_recalibration(rows, levels=(0.8, 0.9))
    assert a["recalibrated_level"] == 0.9 and leaving_cells(a["recalibrated_out"]) == "closed-form: b (95%); bandit (93%)"
    assert parent["recalibrated_level"] == 0.9 and parent["recalibrated_out"] == [("bandit", 0.93)]


def test_results_without_the_levels_get_no_reading():
    row = {"part": "bandit", "split": "dev", "fraction": 0.25, "method": "forecaster", "coverage80": 0.95}
    assert "recalibrated_level" not in with_recalibration([row])[0]
    assert recalibration_reading(row) == ""


def test_a_cell_no_level_brings_in():
    rows = [_cell("jumps", "dev", l80=0.5, l90=0.95)]
    row = with_recalibration(rows, levels=(0.8, 0.9))[0]
    assert math.isnan(row["recalibrated_level"]) and row["recalibrated_reach"] is False
    assert recalibration_reading(row).startswith("no central level")


@pytest.mark.parametrize("suffix", [": other seeds' mean"])
def test_a_cell_repeating_another_cells_forecasts_is_left_out(suffix):
    rows = [_cell("workflow", "dev", l80=0.95, l90=0.97), _cell("workflow" + suffix, "dev", l80=0.95, l90=0.97),
            _cell("bandit", "dev", l80=0.85, l90=0.89)]
    out = with_recalibration(rows, levels=(0.8, 0.9), skip_suffix=suffix)
    assert math.isnan(out[0]["recalibrated_level"])  # 95% and 97%: no level on this grid brings it in
    assert out[1]["recalibrated_out"] == out[0]["recalibrated_out"] == []  # the repeat reads as its cell
    assert math.isnan(out[1]["recalibrated_level"])


def test_a_coverage_at_a_bound_is_shown_with_a_decimal():
    from pgrpo.tables.recalibration import coverage_percent

    assert coverage_percent(0.9041) == "90.4%" and coverage_percent(0.9) == "90%"
    assert coverage_percent(0.6962) == "69.6%" and coverage_percent(0.8549) == "85%"
    assert coverage_percent(0.9004) == "90.04%" and coverage_percent(0.69996) == "69.996%"
