"""Tests of the finite-G softmax bandit (Proposition 10's 1/G law, Lemma 6's forcing, Section 5.3's spread).

Every expected number is derived independently of the code under test: the G -> infinity simulator of
pgrpo.bandit, a literal per-sample loop, exact enumeration of all G-tuples of completions, closed-form KL-only and
autoregressive recursions, and synthetic processes with a planted variance law.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from pgrpo import bandit as exact
from pgrpo.bandit.finite_g import (  # noqa: E402
    DEFAULT_REWARDS,
    DIAGNOSTICS,
    forcing_moments,
    linear_map_variance,
    run_finite_g,
    sampled_gradient,
    simulate_finite_g,
    simulate_finite_g_loop,
)
from pgrpo.bandit.finite_g_study import (  # noqa: E402
    GridSettings,
    NoiseEstimate,
    VarianceEstimate,
    analyse_grid,
    compare_mean_trajectories,
    fit_power_law,
    local_stiffness,
    prop10_check,
    run_grid,
    stationary_variance,
    trajectory_stats,
    variance_scaling,
)
from scipy.signal import lfilter

REWARDS = np.array(DEFAULT_REWARDS)


def _softmax(t):
    z = np.exp(t - np.max(t))
    return z / z.sum()


# ---------------------------------------------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------------------------------------------
def test_shapes_and_seeding():
    args = (REWARDS, 0.2, 0.5, 1.0, 2, 50)
    a = simulate_finite_g(*args, G=8, replicas=16, seed=1)
    assert a.shape == (16, 51)
    np.testing.assert_array_equal(a, simulate_finite_g(*args, G=8, replicas=16, seed=1))
    assert np.abs(a - simulate_finite_g(*args, G=8, replicas=16, seed=2)).max() > 1e-3
    np.testing.assert_allclose(a[:, 0], REWARDS.mean())  # uniform start: p(0) = p_ref
    run = run_finite_g(*args, G=8, replicas=16, seed=1, burn_in=20)
    np.testing.assert_array_equal(run.p, a)  # the diagnostics do not touch the random stream
    assert run.theta_final.shape == (16, REWARDS.size)
    assert all(run.per_step[k].shape == (50,) and run.window[k].shape == (16,) for k in DIAGNOSTICS)
    np.testing.assert_allclose(run.pi_mean.sum(), 1.0)


@pytest.mark.parametrize("refresh,k_ref", [("sliding", 0), ("sliding", 1), ("sliding", 3), ("periodic", 3)])
@pytest.mark.parametrize("gradient", exact.GRADIENTS)
@pytest.mark.parametrize("ddof", [0, 1])
def test_vectorised_simulator_equals_the_per_sample_loop(refresh, k_ref, gradient, ddof):
    kw = {"seed": 7, "refresh": refresh, "gradient": gradient, "ddof": ddof}
    theta0 = np.linspace(-0.3, 0.4, REWARDS.size)
    vec = simulate_finite_g(REWARDS, 0.3, 0.5, 1.0, k_ref, 80, 5, 6, theta0=theta0, **kw)
    loop = simulate_finite_g_loop(REWARDS, 0.3, 0.5, 1.0, k_ref, 80, 5, 6, theta0=theta0, **kw)
    np.testing.assert_allclose(vec, loop, rtol=0, atol=1e-12)


@pytest.mark.parametrize("refresh", exact.REFRESHES)
@pytest.mark.parametrize("gradient", exact.GRADIENTS)
def test_large_group_reduces_to_the_exact_simulator(refresh, gradient):
    """G = 4096: the replica mean lies within 5 standard errors plus a bias allowance 5/G of exact.simulate.

    The finite-G bias is O(1/G) (sample std and zero-spread groups); its coefficient is ~2.5 for these settings, so
    5/G is a generous allowance (1.2e-3) that is still ~10x below the deviation at G = 256.
    """
    G, steps = 4096, 300
    p_inf = exact.simulate(REWARDS, 0.3, 0.5, 1.0, 2, steps, refresh=refresh, gradient=gradient)
    p = simulate_finite_g(REWARDS, 0.3, 0.5, 1.0, 2, steps, G, 64, seed=11, refresh=refresh, gradient=gradient)
    se = p.std(axis=0, ddof=1) / np.sqrt(p.shape[0])
    deviation = np.abs(p.mean(axis=0) - p_inf)
    assert deviation.max() <= 5 * se.max() + 5.0 / G
    small = simulate_finite_g(REWARDS, 0.3, 0.5, 1.0, 2, steps, 256, 64, seed=11, refresh=refresh,
                                 gradient=gradient)
    assert np.abs(small.mean(axis=0) - p_inf).max() > 3 * deviation.max()  # the gap closes as G grows


def test_zero_spread_groups_give_no_update_beyond_kl():
    r = np.full(4, 0.7)  # every group has zero spread
    theta0 = np.array([0.5, -0.2, 0.1, -0.4])
    eta, mu, beta, steps = 0.3, 0.5, 0.8, 25
    run = run_finite_g(r, eta, mu, beta, 1, steps, 3, 5, seed=0, theta0=theta0)
    theta, prev = theta0.copy(), theta0.copy()
    for _ in range(steps):  # the KL-only heavy ball, by hand
        pi = _softmax(theta)
        kl = pi * (np.log(pi) - pi @ np.log(pi))
        theta, prev = theta - eta * beta * kl + mu * (theta - prev), theta
    np.testing.assert_allclose(run.theta_final, np.broadcast_to(theta, (5, 4)), atol=1e-12)
    np.testing.assert_array_equal(run.per_step["zero_spread"], 1.0)
    np.testing.assert_array_equal(run.per_step["sigma_adv"], 0.0)
    # a group of two reward-0 completions of three is degenerate too: exactly no reward gradient
    r3 = np.array([0.0, 0.0, 1.0])
    lp = np.log(np.array([0.2, 0.3, 0.5]))
    g, sigma, zero = sampled_gradient(lp, lp - 0.1, np.array([[2, 1, 0], [1, 1, 1]]), r3)
    np.testing.assert_array_equal(g[0], 0.0)
    assert zero.tolist() == [True, False] and sigma[0] == 0.0
    np.testing.assert_allclose(sigma[1], np.std([0.0, 0.0, 1.0], ddof=1))


# ---------------------------------------------------------------------------------------------------------------
# One step: exact moments by enumeration of every G-tuple
# ---------------------------------------------------------------------------------------------------------------
def _enumerate(theta, theta_old, r, G, gradient, ddof=1):
    """Mean and covariance of the one-step estimator (Eq. 1-2 written per sample), E[std], P(zero spread)."""
    pi, pi_old = _softmax(theta), _softmax(theta_old)
    n = r.size
    mean, second, e_sigma, p_zero = np.zeros(n), np.zeros((n, n)), 0.0, 0.0
    for tup in itertools.product(range(n), repeat=G):
        prob = float(np.prod(pi_old[list(tup)]))
        rew = r[list(tup)]
        g = np.zeros(n)
        if np.ptp(rew) == 0:
            p_zero += prob
        else:
            std = rew.std(ddof=ddof)
            e_sigma += prob * std
            for o, a in zip(tup, (rew - rew.mean()) / std):
                base = pi if gradient == "importance_weighted" else pi_old
                weight = pi[o] / pi_old[o] if gradient == "importance_weighted" else 1.0
                g += weight * a * (np.eye(n)[o] - base) / G
        mean += prob * g
        second += prob * np.outer(g, g)
    return mean, second - np.outer(mean, mean), e_sigma, p_zero


CASES = [  # (rewards, theta, theta_old, G)
    (np.array([0.0, 1.0]), np.array([0.3, -0.2]), np.array([-0.1, 0.4]), 3),
    (np.array([0.0, 0.0, 1.0]), np.array([0.2, -0.3, 0.1]), np.array([0.0, 0.3, -0.2]), 4),
    (np.array([0.0, 1.0, 3.0]), np.array([0.1, 0.0, -0.2]), np.array([0.1, 0.0, -0.2]), 3),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("gradient", exact.GRADIENTS)
def test_one_step_moments_match_enumeration(case, gradient):
    r, theta, theta_old, G = CASES[case]
    mean, cov, e_sigma, p_zero = _enumerate(theta, theta_old, r, G, gradient)
    v = _softmax(theta) * (r - _softmax(theta) @ r)  # grad_theta p
    g_inf = exact.objective_gradient(theta, theta_old, r, 0.0, gradient)  # G -> infinity reward gradient
    moments = forcing_moments(theta, theta_old, r, G, gradient)
    assert moments.variance == pytest.approx(v @ cov @ v, rel=1e-10, abs=1e-15)
    assert moments.bias == pytest.approx((mean - g_inf) @ v, rel=1e-10, abs=1e-15)
    assert moments.D == pytest.approx(G * v @ cov @ v, rel=1e-10)
    assert moments.sigma_adv == pytest.approx(e_sigma, rel=1e-12)
    assert moments.zero_spread == pytest.approx(p_zero, rel=1e-12)
    # Monte Carlo of the vectorised estimator: mean and covariance within 5 standard errors
    n_groups = 200_000
    counts = np.random.default_rng(case).multinomial(G, _softmax(theta_old), size=n_groups)
    g, _, _ = sampled_gradient(exact.log_softmax(theta), exact.log_softmax(theta_old), counts, r, gradient)
    np.testing.assert_array_less(np.abs(g.mean(axis=0) - mean), 5 * g.std(axis=0) / np.sqrt(n_groups) + 1e-15)
    centred = g - mean
    products = centred[:, :, None] * centred[:, None, :]
    np.testing.assert_array_less(np.abs(products.mean(axis=0) - cov),
                                 5 * products.std(axis=0) / np.sqrt(n_groups) + 1e-15)


def test_one_simulated_step_has_the_enumerated_variance_and_forcing():
    """From a fixed theta_0 (on-policy, sliding K_ref = 0), theta_1 = theta_0 + eta (g_hat - beta grad KL), so
    Var(theta_1) = eta^2 Cov(g_hat) and the measured forcing is eta (g_hat - g_inf) . grad p."""
    r, theta0, _, G = CASES[1]
    eta, beta, n_rep = 0.5, 0.7, 100_000
    mean, cov, _, _ = _enumerate(theta0, theta0, r, G, "importance_weighted")
    run = run_finite_g(r, eta, 0.3, beta, 0, 1, G, n_rep, seed=5, theta0=theta0)
    pi = _softmax(theta0)
    kl = pi * (np.log(pi) - pi @ np.log(pi))
    expected_mean = theta0 + eta * (mean - beta * kl)
    step = run.theta_final
    np.testing.assert_array_less(np.abs(step.mean(axis=0) - expected_mean),
                                 5 * step.std(axis=0) / np.sqrt(n_rep) + 1e-15)
    dev2 = (step - expected_mean) ** 2
    np.testing.assert_array_less(np.abs(dev2.mean(axis=0) - eta**2 * np.diag(cov)),
                                 5 * dev2.std(axis=0) / np.sqrt(n_rep) + 1e-15)
    v = pi * (r - pi @ r)
    g_inf = exact.objective_gradient(theta0, theta0, r, 0.0)
    bias, var = eta * (mean - g_inf) @ v, eta**2 * v @ cov @ v
    f_mean, f_sq = run.per_step["forcing"][0], run.per_step["forcing_sq"][0]
    assert abs(f_mean - bias) <= 5 * np.sqrt(var / n_rep)
    assert f_sq - f_mean**2 == pytest.approx(var, rel=0.03)


# ---------------------------------------------------------------------------------------------------------------
# Estimators on synthetic processes with known answers
# ---------------------------------------------------------------------------------------------------------------
def _ar1(a, innovation_var, replicas, steps, seed):
    """AR(1) started in its stationary law: stationary variance innovation_var / (1 - a^2)."""
    rng = np.random.default_rng(seed)
    stationary = innovation_var / (1 - a * a)
    noise = rng.normal(scale=np.sqrt(innovation_var), size=(replicas, steps))
    noise[:, 0] = rng.normal(scale=np.sqrt(stationary), size=replicas)
    return lfilter([1.0], [1.0, -a], noise, axis=1), stationary


@pytest.mark.parametrize("planted", [-1.0, -0.5])
def test_exponent_estimator_recovers_a_planted_power_law(planted):
    a, c = 0.9, 0.02
    estimates, truth = {}, {}
    for i, G in enumerate((2, 4, 8, 16, 32, 64)):
        x, truth[G] = _ar1(a, c * G**planted, 300, 1500, seed=100 + i)
        estimates[G] = stationary_variance(x + 0.3, burn_in=100)  # offset: about the grand mean
        assert abs(estimates[G].value - truth[G]) <= 4 * estimates[G].se
        about = stationary_variance(x + 0.3, burn_in=100, center=0.3)
        assert abs(about.value - truth[G]) <= 4 * about.se
    fit = variance_scaling(estimates)
    assert fit.ci[0] <= planted <= fit.ci[1]
    assert abs(fit.exponent - planted) < 0.03 and fit.ci[1] - fit.ci[0] < 0.1
    assert fit.prefactor == pytest.approx(c / (1 - a * a), rel=0.1)
    assert fit.chi2_red < 4


def test_power_law_fit_is_exact_on_exact_data():
    x = np.array([2.0, 4.0, 8.0, 16.0])
    fit = fit_power_law(x, 3.0 * x**-0.7, 0.01 * 3.0 * x**-0.7)
    assert fit.exponent == pytest.approx(-0.7) and fit.prefactor == pytest.approx(3.0)
    # the standard error of a two-parameter weighted fit of log y with sd 0.01 per point, by hand
    lx = np.log(x)
    assert fit.exponent_se == pytest.approx(0.01 / np.sqrt(((lx - lx.mean()) ** 2).sum()))


def test_linear_map_variance_matches_the_ar_closed_forms():
    eta, K, sigma2 = 0.1, 0.3, 2e-4
    # mu = 0, no delay: AR(1) with coefficient 1 - eta K
    assert linear_map_variance(eta, 0.0, K, 0, sigma2) == pytest.approx(sigma2 / (1 - (1 - eta * K) ** 2))
    # mu > 0, no delay: AR(2) with phi1 = 1 + mu - eta K, phi2 = -mu
    mu = 0.5
    phi1, phi2 = 1 + mu - eta * K, -mu
    ar2 = (1 - phi2) / ((1 + phi2) * ((1 - phi2) ** 2 - phi1**2)) * sigma2
    assert linear_map_variance(eta, mu, K, 0, sigma2) == pytest.approx(ar2)
    # one step of delay, simulated: e_{k+1} = (1 + mu) e_k - (mu + eta K) e_{k-1} + f_k
    noise = np.random.default_rng(3).normal(scale=np.sqrt(sigma2), size=(200, 4000))
    e = lfilter([1.0], [1.0, -(1 + mu), mu + eta * K], noise, axis=1)[:, 1000:]
    assert linear_map_variance(eta, mu, K, 1, sigma2) == pytest.approx(e.var(), rel=0.03)
    # small eta K: Eq. 12 with D = G Var(f) / eta^2 and C_eff = (1 - mu) / eta gives Var(f) / (2 eta K (1 - mu))
    noise_est = NoiseEstimate(G=8, forcing_mean=0.0, forcing_var=sigma2, D=8 * sigma2 / eta**2, D_se=0.0,
                                 sigma_adv=1.0, sigma_adv_se=0.0, zero_spread=0.0, zero_spread_se=0.0)
    measured = VarianceEstimate(value=1.0, se=0.0, center=0.0, mean=0.0, mean_se=0.0, first_half=1.0,
                                   second_half=1.0)
    check = prop10_check(noise_est, measured, eta, mu, 0, K)
    assert check.predicted == pytest.approx(sigma2 / (2 * eta * K * (1 - mu)))


def test_local_stiffness_recovers_k_of_a_delayed_heavy_ball():
    eta, mu, K = 0.2, 0.3, 0.15
    noise = np.random.default_rng(9).normal(scale=0.01, size=(100, 3000))
    e = lfilter([1.0], [1.0, -(1 + mu), mu + eta * K], noise, axis=1) + 1.2
    est = local_stiffness(e, 500, eta, k_ref=1)
    assert abs(est.value - K) <= 4 * est.se and est.se < 0.01


def test_mean_trajectory_comparison_finds_a_planted_offset():
    rng = np.random.default_rng(4)
    base = 1 - np.exp(-np.arange(200) / 30.0)
    runs = {G: base + offset + rng.normal(scale=0.05, size=(400, 200)) for G, offset in ((4, 0.02), (64, 0.0))}
    rows = compare_mean_trajectories({G: trajectory_stats(p) for G, p in runs.items()}, base)
    small = rows[0]
    assert small.G == 4 and small.reference_G == 64
    assert small.max_abs_diff == pytest.approx(0.02, abs=0.015) and small.max_z > 3
    assert rows[1].max_abs_diff == 0.0 and rows[1].max_z == 0.0
    assert rows[1].max_abs_diff_exact < 0.025  # the reference vs G = infinity: noise only


def test_grid_and_verdicts_run_end_to_end():
    settings = GridSettings(group_sizes=(4, 16), replicas=64, steps=600, burn_in=300)
    points = run_grid(settings)
    report = analyse_grid(points, settings, K_calibrated=0.123)
    assert [pt.G for pt in points] == [4, 16]
    assert len(report.verdicts) == 6
    assert all(v.verdict in ("reproduced", "partly", "not") and v.evidence and v.rule for v in report.verdicts)
    assert report.K_linearised == pytest.approx(exact.linearised_stiffness(REWARDS, 1.0))
    assert set(report.prefactor) == {"linearised", "calibrated", "local"}
