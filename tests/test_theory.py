"""pgrpo.theory against hand-computed values, closed forms and an independent ODE / companion-matrix check."""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
from pgrpo.errors import InputError
from pgrpo.theory import (
    coefficients,
    discrete_characteristic_polynomial,
    discrete_critical_k_ref,
    discrete_map_regime,
    discrete_trajectory,
    predicted_reward,
    predicted_trajectory,
)
from pgrpo.stages.predict import run_predict
from pgrpo.tables.prediction import prediction_report
from scipy.integrate import solve_ivp


def test_hand_computed_case():
    # eta=0.1, mu=0.5, K=2, K_ref=1 (delta=1): M = (1.5 + 2*0.1*1)/(2*0.1) = 8.5, C = (0.5 - 0.2)/0.1 = 3
    co = coefficients(0.1, 0.5, 2.0, 1)
    assert co.m_eff == pytest.approx(8.5)
    assert co.c_eff == pytest.approx(3.0)
    assert co.k_eff == 2.0
    assert co.zeta == pytest.approx(3 / (2 * math.sqrt(17)))
    assert co.omega_n == pytest.approx(math.sqrt(2 / 8.5))
    expected = {complex(-3, math.sqrt(59)) / 17, complex(-3, -math.sqrt(59)) / 17}
    for pole in co.poles:
        assert min(abs(pole - e) for e in expected) < 1e-12
    assert co.regime == "underdamped"
    assert co.time_constant == pytest.approx(1.5)
    assert co.critical_k_ref == pytest.approx(2.5)
    assert co.slowest_decay_time == pytest.approx(17 / 3)


def test_no_momentum_no_lag_zeta_is_inverse_sqrt_2_k_eta():
    for eta, K in [(0.01, 1.0), (1e-5, 37.0), (0.2, 0.3)]:
        co = coefficients(eta, 0.0, K, 0)
        assert co.zeta == pytest.approx((2 * K * eta) ** -0.5)
        assert co.m_eff == pytest.approx(1 / (2 * eta))
        assert co.c_eff == pytest.approx(1 / eta)
        assert co.time_constant == pytest.approx(1 / (eta * K))
    assert coefficients(0.01, 0.0, 1.0, 0).regime == "overdamped"


def test_delta_scales_eq6_and_tau():
    # general delta: M = (1+mu) delta^2/(2 eta) + K (K_ref delta)^2 / 2, C = (1-mu) delta/eta - K K_ref delta
    co = coefficients(0.2, 0.3, 1.5, 2, delta=0.5)
    assert co.m_eff == pytest.approx(1.3 * 0.25 / 0.4 + 0.5 * 1.5 * 1.0)
    assert co.c_eff == pytest.approx(0.7 * 0.5 / 0.2 - 1.5 * 1.0)
    assert co.critical_k_ref == pytest.approx(0.7 / (1.5 * 0.2))


def test_critical_damping_exact():
    # mu = tau = 0, eta K = 1/2: M = 1, C = 2, K = 1 -> repeated pole -1, Eq. 17: e0 (1 + t) e^{-t}
    co = coefficients(0.5, 0.0, 1.0, 0)
    assert co.regime == "critical"
    assert co.poles[0] == pytest.approx(-1.0) and co.poles[1] == pytest.approx(-1.0)
    traj = predicted_trajectory(0.1, 0.9, 20, 0.5, 0.0, 1.0, 0)
    t = np.arange(21.0)
    np.testing.assert_allclose(traj, 0.9 - 0.8 * (1 + t) * np.exp(-t), rtol=1e-12, atol=1e-14)


def test_instability_threshold_prop9():
    # (1 - mu)/(K eta) = 0.5 / 0.2 = 2.5: K_ref = 2 stable (C = 5 - 4), K_ref = 3 unstable (C = 5 - 6)
    assert coefficients(0.1, 0.5, 2.0, 2).c_eff == pytest.approx(1.0)
    assert coefficients(0.1, 0.5, 2.0, 2).regime != "unstable"
    co = coefficients(0.1, 0.5, 2.0, 3)
    assert co.c_eff == pytest.approx(-1.0)
    assert co.regime == "unstable"
    assert max(p.real for p in co.poles) > 0
    assert math.isinf(co.time_constant) and math.isinf(co.slowest_decay_time)


def test_discrete_map_complex_roots_at_mu_08_eta_k_0036():
    # K_ref = 0: z^2 - (1.8 - 0.036) z + 0.8, discriminant 1.764^2 - 3.2 = -0.088304 < 0: complex pair of modulus sqrt(0.8)
    d = discrete_map_regime(0.3, 0.8, 0.12, 0)
    assert d.has_complex_roots
    assert d.regime == "oscillatory"
    assert d.spectral_radius == pytest.approx(math.sqrt(0.8))
    expected = (1.764 + cmath.sqrt(1.764**2 - 3.2)) / 2
    assert d.dominant_root == pytest.approx(expected)
    # with the lag the dominant root stays complex for every K_ref (and the map never turns monotone)
    for k in range(1, 7):
        assert discrete_map_regime(0.3, 0.8, 0.12, k).regime == "oscillatory"


def test_characteristic_polynomial_by_hand():
    np.testing.assert_allclose(discrete_characteristic_polynomial(0.1, 0.5, 1.0, 0), [1, -1.4, 0.5])
    np.testing.assert_allclose(discrete_characteristic_polynomial(0.1, 0.5, 1.0, 1), [1, -1.5, 0.6])
    np.testing.assert_allclose(discrete_characteristic_polynomial(0.1, 0.5, 1.0, 3), [1, -1.5, 0.5, 0, 0.1])


def _companion_spectral_radius(eta, mu, K, k_ref):
    """Spectral radius of the state-transition matrix of the recurrence, built directly from the map."""
    lag = max(k_ref, 1)
    n = lag + 1  # state (e_k, e_{k-1}, ..., e_{k-lag})
    A = np.zeros((n, n))
    A[0, 0] += 1 + mu
    A[0, 1] += -mu
    A[0, k_ref] += -eta * K
    for i in range(1, n):
        A[i, i - 1] = 1.0
    return max(abs(np.linalg.eigvals(A)))


@pytest.mark.parametrize("eta,mu,K,k_ref", [(0.3, 0.8, 0.12, 0), (0.3, 0.8, 0.12, 1), (0.3, 0.8, 0.12, 7),
                                            (0.05, 0.0, 1.0, 9), (0.1, 0.5, 2.0, 3), (1e-3, 0.9, 5.0, 40)])
def test_spectral_radius_matches_state_matrix(eta, mu, K, k_ref):
    assert discrete_map_regime(eta, mu, K, k_ref).spectral_radius == pytest.approx(
        _companion_spectral_radius(eta, mu, K, k_ref), rel=1e-8)


def test_discrete_stability_matches_delayed_gradient_descent_bound():
    # mu = 0: x_{k+1} = x_k - a x_{k-T} is stable iff a < 2 sin(pi / (2 (2T + 1)))  (classical result)
    for T in (1, 3, 10):
        bound = 2 * math.sin(math.pi / (2 * (2 * T + 1)))
        assert discrete_map_regime(bound * 0.99, 0.0, 1.0, T).spectral_radius < 1
        assert discrete_map_regime(bound * 1.01, 0.0, 1.0, T).regime == "unstable"
    # a = 0.01: the first unstable T is the smallest T with 2 sin(pi/(2(2T+1))) <= 0.01
    first = next(T for T in range(1, 1000) if 2 * math.sin(math.pi / (2 * (2 * T + 1))) <= 0.01)
    assert discrete_critical_k_ref(0.01, 0.0, 1.0) == first


def test_discrete_trajectory_first_steps_by_hand():
    # K_ref = 1, eta K = 0.2, mu = 0.5, e_j = 1 for j <= 0: e1 = 0.8, e2 = 0.5, e3 = 0.19
    traj = discrete_trajectory(1.0, 0.0, 3, 0.1, 0.5, 2.0, 1)
    np.testing.assert_allclose(traj, [1.0, 0.8, 0.5, 0.19])
    # K_ref = 0: e1 = (1 - eta K) e0 from rest
    np.testing.assert_allclose(discrete_trajectory(1.0, 0.0, 1, 0.1, 0.5, 2.0, 0), [1.0, 0.8])


@pytest.mark.parametrize("eta,mu,K,k_ref", [(0.01, 0.0, 1.0, 0), (0.1, 0.5, 2.0, 1), (1e-3, 0.9, 5.0, 3),
                                            (0.3, 0.8, 0.12, 7)])
def test_trajectory_solves_the_ode_from_rest(eta, mu, K, k_ref):
    co = coefficients(eta, mu, K, k_ref)
    steps, r0, r_inf = 60, 0.2, 0.8
    traj = predicted_trajectory(r0, r_inf, steps, eta, mu, K, k_ref)
    sol = solve_ivp(lambda t, y: [y[1], -(co.c_eff * y[1] + co.k_eff * (y[0] - r_inf)) / co.m_eff],
                    (0, steps), [r0, 0.0], t_eval=np.arange(steps + 1.0), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(traj, sol.y[0], rtol=1e-7, atol=1e-9)


def test_trajectory_starts_at_rest_and_tends_to_plateau():
    for args in [(0.01, 0.0, 1.0, 0), (0.1, 0.5, 2.0, 1), (0.5, 0.0, 1.0, 0), (0.3, 0.8, 0.12, 3)]:
        traj = predicted_trajectory(0.2, 0.8, 4000, *args)
        assert traj[0] == pytest.approx(0.2)
        assert traj[-1] == pytest.approx(0.8, abs=1e-6)
        # R'(0) = 0: R(h) - R(0) = O(h^2); with R'(0) = c != 0 it would be ~ c h
        co = coefficients(*args)
        h = 1e-4 / co.omega_n
        r_h = predicted_reward(np.array([0.0, h]), 0.2, 0.8, *args)
        second_order = 0.5 * abs(co.k_eff / co.m_eff * 0.6) * h**2  # |R''(0)| h^2 / 2, R''(0) = K (R_inf - R0) / M
        assert r_h[1] - r_h[0] == pytest.approx(second_order, rel=1e-3)


def test_overdamped_two_exponential_by_hand():
    # eta = 0.01, mu = 0, K = 1, K_ref = 0: M = 50, C = 100 -> s^2 + 2 s + 0.02 = 0
    s1, s2 = -1 + math.sqrt(0.98), -1 - math.sqrt(0.98)
    t = np.arange(0, 301.0)
    expected = 1.0 + (0.0 - 1.0) * (s2 * np.exp(s1 * t) - s1 * np.exp(s2 * t)) / (s2 - s1)
    np.testing.assert_allclose(predicted_trajectory(0.0, 1.0, 300, 0.01, 0.0, 1.0, 0), expected, rtol=1e-12)


def test_unstable_trajectory_grows():
    traj = predicted_trajectory(0.2, 0.8, 200, 0.1, 0.5, 2.0, 3)
    assert np.max(np.abs(traj[100:] - 0.8)) > 10 * 0.6
    assert np.all(np.isfinite(traj))


def test_report_and_run_predict(tmp_path, capsys):
    text = prediction_report(0.3, 0.8, 0.12, 2, r0=0.2, r_inf=0.8, steps=50)
    assert "underdamped" in text and "oscillatory" in text
    assert "5.55556" in text  # (1 - 0.8) / 0.036
    assert "step" in text and "exact map" in text
    out = tmp_path / "p.txt"
    printed = run_predict(eta=0.01, mu=0.0, k_ref=0, K=1.0, out_path=str(out))
    assert out.read_text() == printed == capsys.readouterr().out
    assert "overdamped" in printed


@pytest.mark.parametrize("kwargs,name", [
    (dict(eta=0.0, mu=0.5, K=1.0, k_ref=1), "eta"),
    (dict(eta=0.1, mu=1.0, K=1.0, k_ref=1), "mu"),
    (dict(eta=0.1, mu=-0.1, K=1.0, k_ref=1), "mu"),
    (dict(eta=0.1, mu=0.5, K=-2.0, k_ref=1), "K"),
    (dict(eta=0.1, mu=0.5, K=1.0, k_ref=-1), "k_ref"),
    (dict(eta=0.1, mu=0.5, K=1.0, k_ref=1.5), "k_ref"),
    (dict(eta=float("nan"), mu=0.5, K=1.0, k_ref=1), "eta"),
])
def test_input_errors_name_the_argument(kwargs, name):
    with pytest.raises(InputError, match=rf"^{name}="):
        coefficients(**kwargs)
    with pytest.raises(InputError):
        prediction_report(**kwargs)


def test_r0_without_r_inf_is_an_input_error():
    with pytest.raises(InputError, match="r_inf"):
        prediction_report(0.1, 0.5, 1.0, 1, r0=0.2)
