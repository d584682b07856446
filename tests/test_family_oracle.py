"""The forecast benchmark's family bound (issue 21, item 5): the generating form least-squares fitted to a window,
checked against the generator's own truth (pgrpo.fit.truth) and hand-made curves."""

from __future__ import annotations

import numpy as np
import pytest
from pgrpo.fit.family_oracle import FORMS, fit_family
from pgrpo.fit.truth import FAMILIES, closed_form_families


def test_every_generated_family_has_a_form():
    assert set(FAMILIES) | {"two_stage"} == set(FORMS)


@pytest.mark.parametrize("curve", closed_form_families(), ids=lambda g: f"{g.family}/{g.member}")
def test_the_form_fitted_to_the_whole_logged_curve_recovers_its_truth(curve):
    # 151 binomial means of 32 completions: the noise s.d. is at most 0.5 / sqrt(32) = 0.088 a point; the fitted
    # curve of a right form with 2-5 parameters lies far closer to the truth than one point's noise
    fit = fit_family(curve.family, curve.steps, curve.values)
    rmse = float(np.sqrt(np.mean((fit(curve.steps) - curve.truth) ** 2)))
    assert rmse < 0.03, (curve.family, curve.member, fit.params)


def test_a_noise_free_rise_cut_early_is_extrapolated_exactly():
    t = np.arange(0.0, 301.0, 2.0)
    truth = 0.1 + (0.7 - 0.1) * (1 - np.exp(-t / 60.0))
    early = t <= 75
    fit = fit_family("rise", t[early], truth[early])
    assert fit.params == pytest.approx((0.1, 0.7, 60.0), rel=1e-4)
    assert np.max(np.abs(fit(t) - truth)) < 1e-4


def _tail_rmse(family, truth, seed):
    t = np.arange(0.0, 301.0, 2.0)
    rng = np.random.default_rng(seed)
    logged = rng.binomial(32, truth) / 32
    early = t <= 75
    fit = fit_family(family, t[early], logged[early])
    return float(np.sqrt(np.mean((fit(t[~early]) - truth[~early]) ** 2)))


def test_a_sigmoid_that_has_not_started_by_the_cut_is_not_pinned_down_but_a_rise_is():
    # logged with the benchmark's binomial noise (32 completions a point): a rise half done by the cut is read from
    # the early window; a sigmoid whose rise starts after it leaves its onset and height to the noise
    t = np.arange(0.0, 301.0, 2.0)
    rise = 0.1 + (0.7 - 0.1) * (1 - np.exp(-t / 60.0))
    late = 0.1 + (0.8 - 0.1) / (1 + np.exp(-(t - 200.0) / 15.0))
    gap = 0.7 - 0.1  # both truths move by about this after the cut
    rise_errors = [_tail_rmse("rise", rise, seed) for seed in range(5)]
    late_errors = [_tail_rmse("sigmoid", late, seed) for seed in range(5)]
    # persistence's error on the rise's tail is about 0.4 x gap (its level at the cut is 0.36, its tail's mean 0.64)
    assert np.median(rise_errors) < 0.25 * gap
    assert np.median(late_errors) > 0.5 * gap


def test_the_benchmark_tells_the_form_to_generated_curves_only():
    import dataclasses

    from pgrpo.fit.benchmark import FAMILY_ORACLE, baseline_method, family_oracle_method, run_protocol
    from pgrpo.stages.forecast_benchmark import closed_form_corpus

    generated = [c for c in closed_form_corpus() if c.family in ("rise", "flat")][:2]
    real_like = dataclasses.replace(generated[0], id="real/x", part="real", family=None, sweep=None)
    rows = run_protocol([*generated, real_like], {"persistence": baseline_method("persistence"),
                                                  FAMILY_ORACLE: family_oracle_method()}, fractions=(0.25,))
    told = {r["curve"] for r in rows if r.get("method") == FAMILY_ORACLE and r.get("kind") != "sweep"}
    assert told == {c.id for c in generated}


def test_the_page_says_where_the_early_window_puts_a_target_out_of_reach():
    from pgrpo.tables.results_pages import _forecast_truth

    cell = {"part": "closed-form", "split": "dev", "truth_kind": "true mean", "truth_moves": 0.8,
            "moving_mean_rmse_ratio": 0.95, "hindsight_moving_mean_rmse_ratio": 0.12,
            "family_moving_mean_rmse_ratio": 0.99, "moving_plateau_error_ratio": 0.4,
            "hindsight_moving_plateau_error_ratio": 0.03, "family_moving_plateau_error_ratio": 0.3,
            "coverage80": 0.8}
    text = "\n".join(_forecast_truth([cell]))
    assert "the true family fitted to the early window 0.990: out of the early window's reach" in text
    assert "0.400 met" in text  # the plateau target is met: no bound is read
    cell["moving_plateau_error_ratio"] = 0.6
    text = "\n".join(_forecast_truth([cell]))
    assert "the true family fitted to the early window 0.300: in reach" in text
