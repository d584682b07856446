"""The forecaster and its baselines (pgrpo.fit.forecaster, pgrpo.fit.baselines, pgrpo.fit.forecast.forecast_run):
intervals that cover at their nominal rate on curves with known parameters and noise, the scores and the deviation
model by hand, each baseline recovering its own generating law, falling and flat curves forecast (not refused), and
the law constraints (reward range, sampling interval)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgrpo.fit.baselines import BASELINES, FAMILIES, baseline_forecast, fit_family
from pgrpo.fit.deviation import fit_deviation
from pgrpo.fit.forecast import forecast_run
from pgrpo.fit.forecaster import ForecasterSettings, RunContext, forecast_early_window, plateau_and_t90
from pgrpo.fit.intervals import crps_from_samples, interval_score, robust_noise_sd
from pgrpo.fit.laws import EXPONENTIAL, UNDERDAMPED
from pgrpo.fit.least_squares import fit_law, resolvable_rate
from tests._forecaster_helpers import EARLY, T, three_phase

# --- intervals: nominal coverage on curves with known parameters and noise -----------------------------------------


@pytest.mark.parametrize("sigma", [0.03, 0.08])
def test_intervals_cover_at_their_nominal_rate(sigma):
    """Over 40 noisy three-phase curves (random plateau and rate, the inflection inside the window) the 80% and 95%
    intervals of the held-out logged values cover 80% and 95% of them, within simulation error."""
    rng = np.random.default_rng(1)
    hits80, hits95, points = 0, 0, 0
    for _ in range(40):
        rinf, omega = rng.uniform(0.5, 0.9), rng.uniform(0.02, 0.05)
        y = three_phase(T, 0.1, rinf, omega) + rng.normal(0, sigma, T.size)
        p = forecast_early_window(T[EARLY], y[EARLY], T[~EARLY], settings=ForecasterSettings(draws=300))
        held = y[~EARLY]
        hits80 += int(np.sum((held >= p.intervals["lo80"]) & (held <= p.intervals["hi80"])))
        hits95 += int(np.sum((held >= p.intervals["lo95"]) & (held <= p.intervals["hi95"])))
        points += held.size
    # 40 curves: a curve's misses are correlated (a biased plateau misses a run of points), s.e. ~ 0.03
    assert hits80 / points == pytest.approx(0.80, abs=0.08)
    assert hits95 / points == pytest.approx(0.95, abs=0.04)


def test_the_point_forecast_tracks_the_generating_curve():
    rng = np.random.default_rng(2)
    truth = three_phase(T, 0.1, 0.7, 0.03)
    y = truth + rng.normal(0, 0.03, T.size)
    p = forecast_early_window(T[EARLY], y[EARLY], T[~EARLY], RunContext(reward_range=(0.0, 1.0)))
    assert np.sqrt(np.mean((p.mean - truth[~EARLY]) ** 2)) < 0.03
    naive = baseline_forecast("persistence", T[EARLY], y[EARLY], T[~EARLY])
    assert np.sqrt(np.mean((y[~EARLY] - p.mean) ** 2)) < np.sqrt(np.mean((y[~EARLY] - naive.mean) ** 2))


def test_scores_by_hand():
    y = np.array([0.0, 1.0, 2.0])
    lo, hi = np.array([0.5, 0.5, 0.5]), np.array([1.5, 1.5, 1.5])
    # widths 1; misses 0.5 below and 0.5 above, each penalised 2/alpha = 10 at level 0.8
    assert interval_score(y, lo, hi, 0.8) == pytest.approx((1 + 1 + 1 + 10 * 0.5 + 10 * 0.5) / 3)
    # CRPS of a point mass at 0 against y = 1 is 1; of a two-point {0, 2} against 1: E|X-y| - E|X-X'|/2 = 1 - 0.5
    assert crps_from_samples(np.zeros((4, 1)), np.array([1.0])) == pytest.approx(1.0)
    assert crps_from_samples(np.array([[0.0], [2.0]]), np.array([1.0])) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    assert robust_noise_sd(np.cumsum(np.full(2000, 0.01)) + rng.normal(0, 0.1, 2000)) == pytest.approx(0.1, rel=0.1)


def test_the_deviation_model_finds_white_noise_white_and_a_persistent_offset_persistent():
    rng = np.random.default_rng(3)
    t = np.arange(200, dtype=float)
    white = fit_deviation(t, rng.normal(0, 1, t.size))
    assert white.white_weight > 0.3
    ou = np.zeros(t.size)
    for i in range(1, t.size):
        ou[i] = 0.97 * ou[i - 1] + rng.normal(0, 0.25)
    ou += 2.0  # a run sitting above its mean trajectory at the cut
    dev = fit_deviation(t, ou + rng.normal(0, 0.1, t.size))
    mean, var, _ = dev.forecast(t[-1] + np.array([1.0, 1000.0]))
    assert dev.white_weight < 0.05
    assert dev.weights @ mean[:, 0] > 1.0  # the deviation persists one step on
    assert abs(dev.weights @ mean[:, 1]) < 0.2 * abs(dev.weights @ mean[:, 0])  # and has relaxed 1000 steps on


# --- baselines recover their own laws -----------------------------------------------------------------------------


FAMILY_TRUTH = {
    "exponential": (0.1, 0.8, 0.01),
    "sigmoid": (0.1, 0.8, 120.0, 3.0),
    "power_law": (0.1, 0.02, 0.6),
    "mmf": (0.8, 0.1, 0.01, 2.0),
    "pow3": (0.8, 2.0, 0.7),
    "janoschek": (0.8, 0.1, 1e-4, 1.8),
    "weibull": (0.8, 0.1, 0.008, 1.5),
}


@pytest.mark.parametrize("name", sorted(FAMILY_TRUTH))
def test_each_baseline_family_recovers_its_generating_law(name):
    rng = np.random.default_rng(4)
    truth = FAMILIES[name].curve(T, *FAMILY_TRUTH[name])
    fit = fit_family(name, T, truth + rng.normal(0, 0.01, T.size))
    assert fit.success
    assert np.sqrt(np.mean((fit.predict(T) - truth) ** 2)) < 0.004  # well under the noise (0.01)
    if name in ("exponential", "sigmoid", "power_law"):
        # in data units: the amplitudes directly, the rate through the time scale
        p = fit.params
        if name == "exponential":
            assert fit.y_mean + fit.y_scale * p[1] == pytest.approx(0.8, abs=0.01)
            assert p[2] / fit.t_scale == pytest.approx(0.01, rel=0.05)
        if name == "sigmoid":
            assert p[2] * fit.t_scale == pytest.approx(120.0, rel=0.05)
            assert p[3] == pytest.approx(3.0, rel=0.1)
        if name == "power_law":
            assert p[2] == pytest.approx(0.6, abs=0.05)


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_forecasts_with_ordered_intervals(name):
    rng = np.random.default_rng(5)
    y = three_phase(T) + rng.normal(0, 0.03, T.size)
    p = baseline_forecast(name, T[EARLY], y[EARLY], T[~EARLY])
    assert p.success and p.mean.shape == (int((~EARLY).sum()),)
    assert np.all(p.intervals["lo95"] <= p.intervals["lo80"]) and np.all(p.intervals["lo80"] <= p.mean + 1e-9)
    assert np.all(p.intervals["hi80"] <= p.intervals["hi95"])


def test_persistence_carries_the_last_tenth_of_the_window_forward():
    y = np.concatenate([np.zeros(90), np.ones(10)])
    p = baseline_forecast("persistence", T[:100], y, T[100:])
    assert np.all(p.mean == 1.0)


def test_domhan_ensemble_recovers_an_mmf_curve():
    rng = np.random.default_rng(6)
    truth = FAMILIES["mmf"].curve(T, *FAMILY_TRUTH["mmf"])
    p = baseline_forecast("domhan", T[:200], truth[:200] + rng.normal(0, 0.01, 200), T[200:])
    assert np.sqrt(np.mean((p.mean - truth[200:]) ** 2)) < 0.02
    assert set(p.details["families"]) <= {"mmf", "pow3", "janoschek", "weibull"}


# --- curves that fall or never rise get a forecast ----------------------------------------------------------------


def test_a_falling_curve_gets_a_falling_forecast():
    rng = np.random.default_rng(7)
    truth = 0.3 + 0.5 * np.exp(-T / 80.0)
    y = truth + rng.normal(0, 0.02, T.size)
    result = forecast_run(T, y, 0.25, context=RunContext(reward_range=(0.0, 1.0)))
    assert result.success
    mean = np.asarray(result.forecast["mean"])
    assert mean[-1] < y[EARLY][-10:].mean() - 0.05
    assert abs(result.plateau["mean"] - truth[-40:].mean()) < 0.1
    assert result.plateau["lo80"] <= result.plateau["mean"] <= result.plateau["hi80"]


def test_a_flat_curve_gets_a_flat_forecast_with_its_noise():
    rng = np.random.default_rng(8)
    y = 0.4 + rng.normal(0, 0.05, T.size)
    result = forecast_run(T, y, 0.25)
    assert result.success
    mean = np.asarray(result.forecast["mean"])
    assert np.all(np.abs(mean - 0.4) < 0.03)
    held = y[~EARLY]
    inside = (held >= np.asarray(result.forecast["lo80"])) & (held <= np.asarray(result.forecast["hi80"]))
    assert 0.65 <= inside.mean() <= 0.95
    assert set(result.mixture) >= {"flat", "exponential", "three_phase"}


# --- what the data can show: the reward's range and the sampling interval -------------------------------------------


def test_an_alias_of_the_sampling_grid_is_not_fitted():
    """Points 25 steps apart cannot show 0.49 rad/step (the issue's G=4 eval curve): the underdamped fit is held to
    at most pi / (2 * 25) rad/step."""
    t = np.arange(0, 301, 25, dtype=float)
    rng = np.random.default_rng(9)
    y = three_phase(t, 0.2, 0.5, 0.02) + 0.03 * np.cos(0.49 * t) + rng.normal(0, 0.01, t.size)
    fit = fit_law(t, y, UNDERDAMPED)
    assert resolvable_rate(t) == pytest.approx(math.pi / 50)
    assert fit.success and fit.params["omega_n"] <= math.pi / 50 + 1e-9
    assert fit.derived["omega_d"] <= math.pi / 50 + 1e-9


def test_the_plateau_stays_inside_the_reward_range():
    t = np.arange(1, 76, dtype=float)
    y = np.linspace(0.2, 0.8, t.size) + np.random.default_rng(10).normal(0, 0.01, t.size)  # no bend: any plateau
    free = fit_law(t, y, EXPONENTIAL)
    bounded = fit_law(t, y, EXPONENTIAL, reward_range=(0.0, 1.0))
    assert free.success and free.R_inf > 1.0
    assert "longer than the data's span" in free.message  # the time scale is not constrained, and it says so
    assert bounded.success and bounded.R_inf <= 1.0 + 1e-9 and "range bound" in bounded.message


def test_a_declared_range_bounds_the_mean_curve_draws_and_the_plateau_band():
    """The run's mean cannot leave a declared reward range: a noisy run near its ceiling, whose early residuals
    wander (the random walk carried forward widens the draws), keeps every mean-curve draw, and so the plateau's
    80% band, inside [0, 1]; the point forecast is the draws' mean before the bound, as without it."""
    rng = np.random.default_rng(4)
    t = np.arange(1, 41, dtype=float)
    y = np.clip(0.9 + 0.08 * np.sin(t / 3.0) + rng.normal(0, 0.06, t.size), 0.0, 1.0)
    steps = np.arange(41, 161, dtype=float)
    p = forecast_early_window(t, y, steps, RunContext(reward_range=(0.0, 1.0)), ForecasterSettings(guard="off"))
    assert p.mean_draws.min() >= 0.0 and p.mean_draws.max() <= 1.0
    free = forecast_early_window(t, y, steps, RunContext(), ForecasterSettings(guard="off", range_prior=False))
    assert free.mean_draws.max() > 1.0  # the same draws unbounded do leave it
    plateau = plateau_and_t90(p, t, y, 160, float(y[0]))["plateau"]
    assert plateau["hi80"] <= 1.0
