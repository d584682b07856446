"""The forecaster's parts against hand-computed cases (pgrpo.fit.level_guard, pgrpo.fit.shape_grid,
pgrpo.fit.forecaster): the level guard (a handful of points carry the end level forward; the smoothed level), the
mean-curve guard weight and the residual drift (issue 21), the power-tail law, t90 of the point forecast, each law's
slowest rate, and the shape grid's deficits row by row and its amplitude draws against numpy's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgrpo.fit.forecaster import ForecasterSettings, RunContext, forecast_early_window
from tests._forecaster_helpers import EARLY, T

# --- the level guard: a handful of points, the smoothed end level ------------------------------------------


def test_too_few_points_carry_the_end_level_forward_with_the_mixtures_spread():
    """Four eval points of a rise (0, 25, 50, 75; the workflow's eval column at f = 0.25): only the flat law fits, and
    its mean (0.3175) lags; the guard centres on the last point (persistence's last 10% of 4 points is 1 point)."""
    t = np.array([0.0, 25.0, 50.0, 75.0])
    y = np.array([0.24, 0.24, 0.36, 0.43])
    steps = np.arange(100.0, 301.0, 25.0)
    context = RunContext(reward_range=(0.0, 1.0))
    raw = forecast_early_window(t, y, steps, context, ForecasterSettings(guard="off", flat_level="mean", center="best"))
    guarded = forecast_early_window(t, y, steps, context)
    assert np.allclose(raw.mean, np.mean(y))  # the flat law's best fit alone: the window's mean
    assert np.allclose(guarded.mean, 0.43)
    assert guarded.details["guard"]["law_weight"] == 0.0 and "too few" in guarded.details["guard"]["reason"]
    # the spread is the mixture's (same settings, guard off), moved with the centre (no clip: far from 0 and 1)
    mixture = forecast_early_window(t, y, steps, context, ForecasterSettings(guard="off"))
    assert np.allclose(guarded.intervals["hi80"] - guarded.intervals["lo80"],
                       mixture.intervals["hi80"] - mixture.intervals["lo80"], atol=1e-9)


def test_the_smoothed_level_is_the_mean_of_flat_noise_and_the_new_level_after_a_step():
    from pgrpo.fit.level_guard import smoothed_level

    level, sd, alpha = smoothed_level(np.full(20, 0.5))  # no error for any alpha: the first (0.02), level exact
    assert level == pytest.approx(0.5) and sd == pytest.approx(0.0) and alpha == pytest.approx(0.02)
    rng = np.random.default_rng(21)
    noise = 0.4 + rng.normal(0, 0.05, 400)
    level, sd, alpha = smoothed_level(noise)
    assert alpha <= 0.1 and abs(level - 0.4) < 3 * 0.05 * math.sqrt(alpha / (2 - alpha)) + 0.01
    step = np.concatenate([np.full(30, 0.2), np.full(30, 0.8)]) + rng.normal(0, 0.01, 60)
    level, _, alpha = smoothed_level(step)
    assert abs(level - 0.8) < 0.02 and alpha > 0.5
    # the recursion by hand for y = (0, 1, 1): alpha = 1 makes errors (1, 0), the least SSE; level 1
    assert smoothed_level(np.array([0.0, 1.0, 1.0]))[0] == pytest.approx(1.0)


# --- the mean-curve guard weight and the residual drift (issue 21): hand-computed cases ------------------------------


def test_the_excess_mse_weight_subtracts_the_noise_both_forecasts_share():
    """Backtest MSEs 0.05 (law) and 0.09 (level) on points of noise variance 0.04, 10 points scored: the floor is
    0.04 / 10 = 0.004, the excesses 0.01 + 0.004 = 0.014 and 0.05 + 0.004 = 0.054, so w_law = 0.054 / 0.068 = 0.7941
    (Bates-Granger on the raw MSEs: 0.09 / 0.14 = 0.6429); both below the noise: only the floors, 0.5."""
    from pgrpo.fit.level_guard import excess_mse_weight

    assert excess_mse_weight(0.05, 0.09, 0.04, 10) == pytest.approx(0.054 / 0.068)
    assert excess_mse_weight(0.05, 0.09, 0.0, 10) == pytest.approx(0.09 / 0.14)
    assert excess_mse_weight(0.03, 0.035, 0.04, 10) == pytest.approx(0.5)
    assert excess_mse_weight(0.0, 0.0, 0.0, 10) == pytest.approx(0.5)


def test_the_guard_excess_mode_reports_the_weight_of_its_backtest():
    """A straight rise 0.1 + 0.01 t on 20 points without noise: the law mixture fitted on the first 10 follows it,
    the level of the first half's end (0.19) misses the second half by 0.01 .. 0.10, so the law gets nearly all the
    weight (noise s.d. 0: the excesses are the MSEs themselves)."""
    from pgrpo.fit.level_guard import guard_weight

    t = np.arange(20.0)
    y = 0.1 + 0.01 * t

    def mixture(ta, ya, sa):
        return forecast_early_window(ta, ya, sa, RunContext(reward_range=(0.0, 1.0)), ForecasterSettings(guard="off",
                                                                                                        draws=60))

    weight = guard_weight(t, y, mixture, "excess", 8)
    level_mse = float(np.mean((y[10:] - 0.19) ** 2))  # the level: the mean of the last 10% of 10 points, y[9]
    assert weight.backtest_level_rmse == pytest.approx(math.sqrt(level_mse), rel=1e-6)
    assert weight.backtest_law_rmse < 0.2 * weight.backtest_level_rmse
    assert weight.law_weight > 0.95


def test_the_ses_drift_is_etss_level_variance():
    """ETS(A,N,N): h-step variance sigma^2 (1 + alpha^2 (h - 1)); the level's part for alpha 0.2, sigma 0.1:
    0.02 sqrt(h - 1): 0 at h = 0 and 1, 0.04 at h = 5, 0.2 at h = 101."""
    from pgrpo.fit.level_guard import ses_drift_sd

    assert np.allclose(ses_drift_sd(0.2, 0.1, np.array([0.0, 1.0, 5.0, 101.0])), [0.0, 0.0, 0.04, 0.2])


def test_the_residual_drift_is_zero_for_explained_windows_and_grows_for_a_step_the_laws_miss():
    """Residuals 0 everywhere: no drift. Residuals 0, 0, 0, 0, 1, 1, 1, 1 (a step the laws missed), steps 0..7: simple
    exponential smoothing's one-step SSE is least at alpha = 1 (one error of 1, at the step), sigma = sqrt(1/7); at
    steps 8, 10, 17 (h = 1, 3, 10 intervals ahead) the drift is sigma sqrt(h - 1) = 0, sqrt(2/7), 3 sqrt(1/7)."""
    from pgrpo.fit.forecaster import residual_drift_sd

    t = np.arange(8.0)
    steps = np.array([8.0, 10.0, 17.0])
    assert np.allclose(residual_drift_sd(t, np.zeros(8), steps), 0.0)
    drift = residual_drift_sd(t, np.array([0.0, 0, 0, 0, 1, 1, 1, 1]), steps)
    assert np.allclose(drift, [0.0, math.sqrt(2.0 / 7.0), 3.0 * math.sqrt(1.0 / 7.0)])


# --- the laws and the shape grid: the power tail, t90, the slowest rates, the grid's rows and draws --------


def test_the_power_tail_deficit_by_hand_and_its_law_recovers_its_own_curve():
    """``(1 + r t)^(-alpha)`` at r = 1, t = 3: 1/4 for alpha = 1, 1/16 for alpha = 2. A curve with a 1/t approach
    (R0 = 0.2, R_inf = 0.9, r = 0.05, alpha = 1: the softmax-PG rate) plus noise: the power-tail law alone takes the
    mixture's weight against the exponential, finds alpha = 1, and forecasts the tail within the noise."""
    from pgrpo.fit.shape_grid import deficit_power_tail

    assert deficit_power_tail(np.array([0.0, 3.0]), 1.0, 1.0) == pytest.approx([1.0, 0.25])
    assert deficit_power_tail(np.array([3.0]), 1.0, 2.0) == pytest.approx([1.0 / 16])
    rng = np.random.default_rng(5)
    truth = 0.9 - 0.7 * deficit_power_tail(T, 0.05, 1.0)
    y = truth + rng.normal(0, 0.01, T.size)
    settings = ForecasterSettings(laws=("exponential", "power_tail"), guard="off")
    p = forecast_early_window(T[EARLY], y[EARLY], T[~EARLY], RunContext(reward_range=(0.0, 1.0)), settings)
    assert p.details["weights"]["power_tail"] > 0.9
    assert p.details["params"]["power_tail"]["alpha"] == 1.0
    assert np.sqrt(np.mean((p.mean - truth[~EARLY]) ** 2)) < 0.02


def test_the_logistic_deficit_by_hand_and_its_law_recovers_a_take_off_inside_the_window():
    """``(1 + e^{-r m}) / (1 + e^{r (t - m)})``: 1 at t = 0, (1 + e^{-r m}) / 2 at the midpoint, 0 late; its grid's
    midpoints are 0.2 to 1.25 times the cut. A rise from 0.2 to 0.8 whose take-off (step 40 of 200, rate 1/8) lies
    inside the window (steps up to 50): the flat and logistic laws alone, the logistic takes the weight and the tail
    is forecast within 0.05 of the truth. Opt-in: measured on the dev split and not kept
    (docs/forecast-history.md)."""
    from pgrpo.fit.shape_grid import deficit_logistic, shape_grid, slowest_rate

    r, m = 0.5, 4.0
    d = deficit_logistic(np.array([0.0, m, 1e4]), r, m)
    assert d == pytest.approx([1.0, (1.0 + math.exp(-r * m)) / 2.0, 0.0])
    assert np.all(np.diff(deficit_logistic(np.arange(0.0, 50.0), r, m)) < 0)
    assert shape_grid("logistic", 0.01, 1.0) is None  # its midpoints need the cut
    grid = shape_grid("logistic", 0.01, 1.0, t_cut=50.0)
    assert sorted({s["midpoint"] for s in grid.shapes}) == pytest.approx(
        [10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0, 62.5])
    assert slowest_rate("logistic", grid.shapes[0]) == grid.shapes[0]["rate"]
    steps = np.arange(1.0, 201.0)
    truth = 0.2 + 0.6 / (1.0 + np.exp(-(steps - 40.0) / 8.0))
    y = truth + np.random.default_rng(3).normal(0, 0.01, steps.size)
    early = steps <= 50
    settings = ForecasterSettings(laws=("flat", "logistic"), guard="off")
    p = forecast_early_window(steps[early], y[early], steps[~early], RunContext(reward_range=(0.0, 1.0)), settings)
    assert p.details["weights"]["logistic"] > 0.9
    assert np.max(np.abs(p.mean - truth[~early])) < 0.05


def test_the_amplitude_volume_by_hand_laplace_and_bounded_by_the_range_box():
    """Laplace: -logdet / 2. Bounded (range [0, 2], box area 4, log 4 = 1.386): log(2 pi scale) - logdet / 2, at most
    log 4. With scale 1: logdet = 10 gives log(2 pi) - 5 = -3.162 (well identified, under the cap); logdet = -10 gives
    log(2 pi) + 5 = 6.838, capped at 1.386 (amplitudes the window cannot tell apart gain no more than the box)."""
    from pgrpo.fit.forecaster import amplitude_log_volume

    logdet = np.array([10.0, -10.0])
    assert amplitude_log_volume(logdet, 1.0, (0.0, 2.0)) == pytest.approx([-5.0, 5.0])
    assert amplitude_log_volume(logdet, 1.0, (0.0, 2.0), "bounded") == pytest.approx(
        [math.log(2 * math.pi) - 5.0, math.log(4.0)])
    assert amplitude_log_volume(logdet, 1.0, None, "bounded") == pytest.approx([-5.0, 5.0])  # no range, no box
    assert amplitude_log_volume(logdet, 1.0, (0.0, 2.0), "bounded", flat=True) == pytest.approx([-5.0, 5.0])


def test_t90_is_that_of_the_point_forecast_with_the_draws_mean_beside_it():
    """Early log flat at 0 (steps 0-9), the mean curve 0 until step 14 then 1 (plateau: the last 10% of 20 steps = 1,
    t90 = 15). Half the draws are that curve (t90 = 15), half rise at step 19 only (their plateau 0.5, reached at
    19): the draws' mean t90 is 17, a step neither mode has; t90's ``mean`` is the point forecast's 15."""
    from pgrpo.fit.baselines import Predictive
    from pgrpo.fit.forecaster import plateau_and_t90

    steps = np.arange(10.0, 20.0)
    mean = np.where(steps >= 15, 1.0, 0.0)
    late = np.where(steps >= 19, 1.0, 0.0)
    draws = np.vstack([mean] * 50 + [late] * 50)
    prediction = Predictive("forecaster", steps, mean, {}, draws, draws, np.zeros(10), 0.1)
    summary = plateau_and_t90(prediction, np.arange(10.0), np.zeros(10), 20, 0.0)
    assert summary["plateau"]["mean"] == pytest.approx(1.0)
    assert summary["t90"]["mean"] == 15.0 and summary["t90"]["mean_of_draws"] == pytest.approx(17.0)
    assert (summary["t90"]["lo80"], summary["t90"]["hi80"]) == (15.0, 19.0)


def test_the_slowest_rate_of_each_law_by_hand():
    """The time scale the window note compares with the window: each law's slowest approach."""
    from pgrpo.fit.shape_grid import slowest_rate

    assert slowest_rate("exponential", {"lambda": 0.1}) == 0.1
    assert slowest_rate("overdamped", {"omega_n": 0.2, "zeta": 1.25, "slow_pole": 0.1}) == 0.1
    assert slowest_rate("two_mode", {"slow": 0.01, "fast": 0.1, "w_slow": 0.5}) == 0.01
    assert slowest_rate("power_tail", {"rate": 0.05, "alpha": 1.0}) == 0.05
    assert slowest_rate("theory", {"K_eta": 0.1, "omega_n": 0.4, "zeta": 0.5}) == pytest.approx(0.2)
    assert slowest_rate("flat", {}) is None


@pytest.mark.parametrize("law", ["exponential", "three_phase", "overdamped", "two_mode", "power_tail", "logistic",
                                 "theory"])
def test_each_grid_row_of_deficits_is_its_law_at_that_point_alone(law):
    """The grid's deficits, computed for all points at once, are bitwise each point's own formula (laws.py and
    shape_grid.py, one point and a row of times), so the vectorised grid changes no forecast."""
    from pgrpo.fit.laws import deficit_exponential, deficit_overdamped, deficit_three_phase
    from pgrpo.fit.shape_grid import deficit_logistic, deficit_power_tail, shape_grid, theory_deficit

    def alone(shape: dict) -> np.ndarray:
        if law == "exponential":
            return deficit_exponential(t, shape["lambda"])
        if law == "three_phase":
            return deficit_three_phase(t, shape["omega_n"])
        if law == "overdamped":
            return deficit_overdamped(t, shape["omega_n"], shape["zeta"])
        if law == "two_mode":
            w = shape["w_slow"]
            return w * np.exp(-shape["slow"] * t) + (1.0 - w) * np.exp(-shape["fast"] * t)
        if law == "power_tail":
            return deficit_power_tail(t, shape["rate"], shape["alpha"])
        if law == "logistic":
            return deficit_logistic(t, shape["rate"], shape["midpoint"])
        return theory_deficit(t, shape["omega_n"], shape["zeta"])

    t = np.concatenate([np.arange(0.0, 300.0, 1.0), [1e-9, 0.5, 1e4]])
    grid = shape_grid(law, 1e-3, 1.5, mu=0.9, k_ref=2.0, t_cut=75.0)
    together = grid.deficits(t)
    assert together.shape == (len(grid.shapes), t.size)
    for row, shape in zip(together, grid.shapes):
        assert np.array_equal(row, alone(shape))
    assert np.array_equal(grid.deficits(t), together)  # the cached parameter columns give the same again


def test_an_amplitude_draw_is_numpys_multivariate_normal_from_the_same_generator():
    """``_amplitude_draw`` reuses one SVD factor per grid point; its draws are those of
    ``Generator.multivariate_normal(mean, scale * cov)`` from a generator in the same state, near-singular and
    slightly indefinite covariances included, and a point with a non-finite covariance keeps its best amplitudes."""
    from pgrpo.fit.forecaster import LawFit, _amplitude_draw
    from pgrpo.fit.shape_grid import shape_grid

    source = np.random.default_rng(3)
    covs = []
    for k in range(40):
        a = source.standard_normal((2, 2)) * 10 ** source.uniform(-6, 2)
        cov = a @ a.T
        if k % 5 == 0:
            cov[0, 1] = cov[1, 0] = math.sqrt(cov[0, 0] * cov[1, 1]) * (1 + 1e-7)
        covs.append(cov)
    covs.append(np.full((2, 2), np.nan))
    grid = shape_grid("exponential", 1e-3, 1.0)
    n = len(covs)
    fit = LawFit("exponential", grid, np.zeros(n), np.ones(n), np.zeros(n), np.zeros(n), 10, 3, np.array(covs))
    ours, numpys, factors = np.random.default_rng(11), np.random.default_rng(11), {}
    for repeat in range(3):
        for i in range(n):
            mean = (0.1 * i, 0.5 + 0.01 * i)
            got = _amplitude_draw(fit, i, *mean, 1.7, ours, factors)
            if i == n - 1:
                assert got == mean
                continue
            want = numpys.multivariate_normal(mean, fit.cov[i] * 1.7, check_valid="ignore")
            assert got == (float(want[0]), float(want[1]))


# --- the settings: a lever no code path reads is named when the settings are made --------------------------------


@pytest.mark.parametrize(("changes", "named"), [
    ({"laws": ("flat", "exponentail")}, "exponentail"),
    ({"laws": ()}, "at least one law"),
    ({"guard": "blnd"}, "ForecasterSettings.guard = 'blnd'"),
    ({"center": "median"}, "ForecasterSettings.center = 'median'"),
    ({"occam": "Laplace"}, "ForecasterSettings.occam"),
    ({"criterion": "bic"}, "ForecasterSettings.criterion"),
    ({"draws": 0}, "draws (0)"),
])
def test_settings_name_a_value_no_code_path_reads(changes, named):
    """Before this check a misspelt guard mode fell silently to the inverse-MSE blend (level_guard's last branch) and a
    misspelt law failed only at the first forecast, mid-benchmark."""
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        ForecasterSettings().replace(**changes)


def test_settings_accept_every_value_the_benchmark_levers_use():
    """The levers the forecast benchmark scores (opt-in laws, every guard mode, every centre) are valid settings."""
    for law in ("logistic", "theory", "two_mode", "power_tail", "overdamped", "three_phase"):
        assert law in ForecasterSettings(laws=("flat", law)).laws
    for guard in ("off", "points", "blend", "excess", "switch"):
        assert ForecasterSettings(guard=guard).guard == guard
    for center in ("auto", "draws", "best", "recenter"):
        assert ForecasterSettings(center=center).center == center
