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


# --- the bandit curves' bound: the true dynamics ------------------------------------------------------------------


def test_the_bandit_oracle_reads_the_learning_rate_off_the_early_window():
    """The exact map told its setting but eta: on the map's own noiseless early window it finds eta within the fine
    grid's step (the search cannot know it; 0.037 lies off both grids) and so the whole curve."""
    from pgrpo import bandit
    from pgrpo.fit.family_oracle import BanditSetting, fit_bandit

    rewards = (0.0, 0.0, 0.0, 1.0)
    truth = np.asarray(bandit.simulate(np.array(rewards), 0.037, 0.9, 1.0, 2, 300), float)
    t = np.arange(0, 76, 3.0)
    fit = fit_bandit(BanditSetting(rewards, 0.9, 1.0, 2), t, truth[t.astype(int)], 300)
    assert fit.eta == pytest.approx(0.037, rel=0.01)
    assert np.max(np.abs(fit(np.arange(301.0)) - truth)) < 0.01


def test_a_finite_g_run_continues_from_its_state_as_if_it_had_never_stopped():
    """run_finite_g stopped at step 77 and continued from its state with the same generator is bitwise the run
    that never stopped (sliding and periodic references, K_ref 0 and more): the state holds all there is."""
    from pgrpo.bandit.finite_g import run_finite_g

    r = np.array([0, 0, 0, 0, 0, 0, 1.666, 1.666])
    for refresh, k_ref in (("sliding", 3), ("periodic", 4), ("sliding", 0)):
        whole = run_finite_g(r, 0.05, 0.9, 1.0, k_ref, 200, 4, 3, seed=7, refresh=refresh, diagnostics=False).p
        rng = np.random.default_rng(7)
        first = run_finite_g(r, 0.05, 0.9, 1.0, k_ref, 77, 4, 3, seed=rng, refresh=refresh, diagnostics=False)
        rest = run_finite_g(r, 0.05, 0.9, 1.0, k_ref, 123, 4, 3, seed=rng, refresh=refresh, diagnostics=False,
                            state0=first.state)
        assert np.array_equal(np.concatenate([first.p[:, :77], rest.p], axis=1), whole)
    with pytest.raises(ValueError, match="not of this run"):
        run_finite_g(r, 0.05, 0.9, 1.0, 3, 5, 4, 2, state0=first.state)


def test_the_finite_g_bound_is_the_runs_own_past_then_its_mean_future():
    """finite_g_continuation: up to the cut the run itself (the benchmark's truth for that replica, rerun from its
    seed), after it the mean of independent futures, which spread about it; at the cut the run's level."""
    from pgrpo.bandit.finite_g import simulate_finite_g
    from pgrpo.fit.family_oracle import BanditSetting, finite_g_continuation

    rewards = (0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0)
    runs = simulate_finite_g(np.array(rewards), 0.05, 0.5, 1.0, 8, 240, 4, 2, seed=1013)
    setting = BanditSetting(rewards, 0.5, 1.0, 8, G=4, eta=0.05, seed=1013, replicas=2, replica=1)
    path = finite_g_continuation(setting, 60, 240, copies=32)
    assert path.shape == (241,) and np.array_equal(path[:60], runs[1, :60])
    assert path[60] == pytest.approx(runs[1, 60], abs=1e-12)  # every future starts where the run stands
    assert not np.array_equal(path[61:], runs[1, 61:])  # one future of many: the mean is another curve


def _truth_cell(part, mean_curve, family_mean_curve, plateau, family_plateau):
    return {"part": part, "split": "dev", "truth_kind": "true mean", "truth_moves": 0.8,
            "moving_mean_rmse_ratio": mean_curve, "hindsight_moving_mean_rmse_ratio": 0.12,
            "family_moving_mean_rmse_ratio": family_mean_curve, "moving_plateau_error_ratio": plateau,
            "hindsight_moving_plateau_error_ratio": 0.03, "family_moving_plateau_error_ratio": family_plateau,
            "coverage80": 0.8}


@pytest.mark.parametrize("part, name", [
    ("closed-form", "the true family fitted to the early window"),
    ("bandit", "the true dynamics (the exact map fitted to the early window, a finite-G run continued from its "
               "state at the cut)")])
def test_the_page_says_where_the_early_window_puts_a_target_out_of_reach(part, name):
    from pgrpo.tables.results_pages import _forecast_truth

    text = "\n".join(_forecast_truth([_truth_cell(part, 0.95, 0.99, 0.4, 0.3)]))
    assert f"{name} 0.990: out of the early window's reach" in text
    assert "0.400 met" in text  # the plateau target is met: no bound is read
    text = "\n".join(_forecast_truth([_truth_cell(part, 0.95, 0.99, 0.6, 0.3)]))
    assert f"{name} 0.300: in reach" in text
