"""Tests of the exact softmax-bandit reduction (Section 5.6) and its report stage.

Every expected number comes from an independent derivation: finite differences of J, a naive reference map that
stores the whole theta history, the closed-form fixed-point condition for binary rewards, the Jacobian of the
on-policy flow, hand-built trajectories, and the closed forms of Eq. 9-11.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pgrpo import bandit, theory
from pgrpo.bandit.experiments import calibrate  # noqa: E402
from pgrpo.bandit.settings import DEFAULT_REWARDS, bandit_settings  # noqa: E402
from pgrpo.bandit.verdict import row_frontier  # noqa: E402
from pgrpo.errors import InputError
from pgrpo.stages.bandit import run_calibrate, run_regime_map, run_sweep, run_verdict  # noqa: E402
from scipy.optimize import brentq

RNG = np.random.default_rng(20260529)
BINARY_2_OF_8 = np.array([0, 0, 0, 0, 0, 0, 1, 1], dtype=float)
ONE_HOT = np.array([0, 0, 0, 0, 0, 0, 0, 1], dtype=float)


# ---------------------------------------------------------------------------------------------------------------
# The gradient
# ---------------------------------------------------------------------------------------------------------------
def _finite_difference(func, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    grad = np.empty_like(x)
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        grad[j] = (func(x + e) - func(x - e)) / (2 * h)
    return grad


@pytest.mark.parametrize("trial", range(5))
def test_importance_weighted_gradient_is_the_gradient_of_J(trial):
    r = RNG.normal(size=6) * 3 + 1
    beta = float(RNG.uniform(0.1, 2.0))
    theta, theta_old = RNG.normal(size=6), RNG.normal(size=6)
    expected = _finite_difference(lambda t: bandit.objective(t, theta_old, r, beta), theta)
    got = bandit.objective_gradient(theta, theta_old, r, beta, gradient="importance_weighted")
    np.testing.assert_allclose(got, expected, atol=1e-8)


@pytest.mark.parametrize("trial", range(5))
def test_stale_gradient_is_the_reward_gradient_at_theta_old_plus_kl_at_theta(trial):
    r = RNG.normal(size=5)
    beta = float(RNG.uniform(0.1, 2.0))
    theta, theta_old = RNG.normal(size=5), RNG.normal(size=5)
    reward_part = _finite_difference(lambda t: bandit.objective(t, theta_old, r, 0.0), theta_old)
    kl_part = _finite_difference(lambda t: bandit.kl_to_uniform(t), theta)
    got = bandit.objective_gradient(theta, theta_old, r, beta, gradient="stale")
    np.testing.assert_allclose(got, reward_part - beta * kl_part, atol=1e-8)


def test_readings_agree_on_policy():
    r, theta = RNG.normal(size=7), RNG.normal(size=7)
    a = bandit.objective_gradient(theta, theta, r, 0.7, "importance_weighted")
    b = bandit.objective_gradient(theta, theta, r, 0.7, "stale")
    np.testing.assert_allclose(a, b, atol=1e-14)


def test_advantage_is_standardised_and_zero_for_equal_rewards():
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    r = np.array([1.0, -2.0, 0.5, 3.0])
    a = bandit.advantage(pi, r)
    assert pi @ a == pytest.approx(0.0, abs=1e-14)
    assert pi @ a**2 == pytest.approx(1.0)
    np.testing.assert_array_equal(bandit.advantage(pi, np.full(4, 2.0)), np.zeros(4))


# ---------------------------------------------------------------------------------------------------------------
# The map: a naive reference with the whole history, and the vectorised grid against per-cell runs
# ---------------------------------------------------------------------------------------------------------------
def _reference_map(r, eta, mu, beta, k_ref, steps, refresh, gradient):
    """Eq. 3 read literally, with a list of every theta (no ring buffer)."""
    thetas = [np.zeros(r.size)]
    previous = np.zeros(r.size)
    for k in range(steps):
        if refresh == "sliding":
            old = thetas[max(k - k_ref, 0)]
        else:
            old = thetas[k_ref * (k // k_ref)]
        theta = thetas[k]
        step = eta * bandit.objective_gradient(theta, old, r, beta, gradient) + mu * (theta - previous)
        previous = theta
        thetas.append(theta + step)
    return np.array([bandit.order_parameter(t, r) for t in thetas])


@pytest.mark.parametrize("refresh", ["sliding", "periodic"])
@pytest.mark.parametrize("gradient", ["importance_weighted", "stale"])
def test_vectorised_map_matches_the_literal_map(refresh, gradient):
    r = np.array([0.0, 0.3, 0.0, 1.0, 0.2])
    k_refs = np.array([1, 2, 3, 5, 8])
    etas = np.array([0.2, 0.5])
    got = bandit.simulate(r, etas[:, None], 0.7, 0.8, k_refs[None, :], 60, refresh=refresh, gradient=gradient)
    assert got.shape == (2, 5, 61)
    for i, eta in enumerate(etas):
        for j, k in enumerate(k_refs):
            expected = _reference_map(r, eta, 0.7, 0.8, int(k), 60, refresh, gradient)
            np.testing.assert_allclose(got[i, j], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("refresh", ["sliding", "periodic"])
@pytest.mark.parametrize("gradient", ["importance_weighted", "stale"])
def test_grid_of_the_papers_rewards_matches_per_cell_literal_maps(refresh, gradient):
    """The grid pass (lumped reward classes, eta folded into the ring, theta_0 prefilled) against Eq. 3 written
    per cell and per completion, on the default rewards (two classes of equal reward) and mu != 0."""
    r = np.array(DEFAULT_REWARDS)
    etas = np.array([0.03, 0.3, 0.6])
    k_refs = np.array([1, 4, 9, 17]) if refresh == "periodic" else np.array([0, 1, 4, 17])
    got = bandit.run(r, etas[:, None], 0.8, 1.0, k_refs[None, :], 120, refresh=refresh, gradient=gradient)
    for i, eta in enumerate(etas):
        for j, k in enumerate(k_refs):
            expected = _reference_map(r, eta, 0.8, 1.0, int(k), 120, refresh, gradient)
            np.testing.assert_allclose(got.p[i, j], expected, rtol=0, atol=1e-12)
            single = bandit.simulate(r, float(eta), 0.8, 1.0, int(k), 120, refresh=refresh, gradient=gradient)
            np.testing.assert_allclose(got.p[i, j], single, rtol=0, atol=1e-12)
    # completions of equal reward keep equal theta, and the spread is the largest theta less the smallest
    assert np.all(got.theta_final[..., :6] == got.theta_final[..., :1])
    np.testing.assert_allclose(got.theta_spread, got.theta_final.max(-1) - got.theta_final.min(-1), atol=0)


def test_theta_past_the_exp_overflow_matches_the_literal_map():
    """A step so large that theta passes exp's overflow (~709): the shifted softmax takes over."""
    r = np.array([0.0, 0.0, 0.2, 1.0])
    p = bandit.run(r, 4000.0, 0.0, 1.0, 0, 6)
    assert p.theta_final.max() > 750
    np.testing.assert_allclose(p.p, _reference_map(r, 4000.0, 0.0, 1.0, 0, 6, "sliding", "importance_weighted"),
                               rtol=0, atol=1e-12)


def test_sliding_k_ref_zero_and_periodic_k_ref_one_are_on_policy():
    r = ONE_HOT
    a = bandit.simulate(r, 0.3, 0.5, 1.0, 0, 80, refresh="sliding")
    b = bandit.simulate(r, 0.3, 0.5, 1.0, 1, 80, refresh="periodic", gradient="stale")
    np.testing.assert_allclose(a, b, atol=1e-13)


def test_starts_at_p_ref_from_rest():
    r = np.array([0.0, 1.0, 2.0, 5.0])
    p = bandit.simulate(r, 0.1, 0.9, 1.0, 3, 5)
    assert p[0] == pytest.approx(r.mean())
    # from rest: the first step is eta * grad only (no momentum); by hand at the uniform policy
    grad = bandit.advantage(np.full(4, 0.25), r) / 4
    expected_p1 = bandit.order_parameter(0.1 * grad, r)
    assert p[1] == pytest.approx(expected_p1, abs=1e-14)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        bandit.simulate(ONE_HOT, 0.1, 0.5, 1.0, 0, 10, refresh="periodic")
    with pytest.raises(ValueError):
        bandit.simulate(ONE_HOT, 0.1, 0.5, 1.0, 1.5, 10)
    with pytest.raises(ValueError):
        bandit.simulate(ONE_HOT, 0.1, 0.5, 1.0, 1, 10, gradient="clipped")


# ---------------------------------------------------------------------------------------------------------------
# Invariance under r -> a r + b
# ---------------------------------------------------------------------------------------------------------------
def test_affine_reward_change_maps_p_and_keeps_theta_K_and_regimes():
    r = BINARY_2_OF_8
    a, b = 1.666, -0.3
    etas, k_refs = np.array([0.05, 0.3]), np.array([1, 6, 20])
    for gradient in ("importance_weighted", "stale"):
        one = bandit.run(r, etas[:, None], 0.8, 1.0, k_refs[None, :], 400, gradient=gradient)
        two = bandit.run(a * r + b, etas[:, None], 0.8, 1.0, k_refs[None, :], 400, gradient=gradient)
        np.testing.assert_allclose(two.p, a * one.p + b, atol=1e-9)
        np.testing.assert_allclose(two.theta_final, one.theta_final, atol=1e-8)
    fp1, fp2 = bandit.interior_fixed_point(r, 1.0), bandit.interior_fixed_point(a * r + b, 1.0)
    assert fp2.p == pytest.approx(a * fp1.p + b, rel=1e-10)
    np.testing.assert_allclose(fp2.pi, fp1.pi, atol=1e-10)
    assert fp2.stiffness == pytest.approx(fp1.stiffness, rel=1e-5)
    base1 = bandit.simulate(r, 0.05, 0.0, 1.0, 1, 3000)
    base2 = bandit.simulate(a * r + b, 0.05, 0.0, 1.0, 1, 3000)
    k1 = bandit.relaxation_rate(base1, fp1.p, 0.05, (0.0, 0.5)).stiffness
    k2 = bandit.relaxation_rate(base2, fp2.p, 0.05, (0.0, 0.5)).stiffness
    assert k2 == pytest.approx(k1, rel=1e-9)


def test_negative_scale_is_not_a_symmetry():
    up = bandit.simulate(ONE_HOT, 0.2, 0.0, 1.0, 1, 2000)
    down = bandit.simulate(-ONE_HOT, 0.2, 0.0, 1.0, 1, 2000)
    # with -r the policy flees the single (now worst) completion instead of concentrating on it
    assert up[-1] > 0.5 and -0.01 < down[-1] < 0.0
    assert abs(down[-1] - (-up[-1])) > 0.4


# ---------------------------------------------------------------------------------------------------------------
# Fixed points
# ---------------------------------------------------------------------------------------------------------------
def _binary_fixed_points(n: int, m: int, beta: float) -> list[float]:
    """Binary rewards (m of n correct, values 0/1): with q the mass on the correct set the Gibbs log-odds give
    b = log(q (n - m) / (m (1 - q))), and the condition b beta Std = 1 reads beta b sqrt(q (1 - q)) = 1."""
    def residual(q):
        return beta * math.log(q * (n - m) / (m * (1 - q))) * math.sqrt(q * (1 - q)) - 1

    qs = np.linspace(m / n + 1e-9, 1 - 1e-12, 20001)
    values = [residual(q) for q in qs]
    roots = []
    for lo, hi, vlo, vhi in zip(qs[:-1], qs[1:], values[:-1], values[1:]):
        if vlo * vhi < 0:
            roots.append(brentq(residual, lo, hi, xtol=1e-15))
    return roots


@pytest.mark.parametrize("m", [1, 2])
def test_fixed_points_match_the_binary_closed_form(m):
    r = np.array([0.0] * (8 - m) + [1.0] * m)
    expected = _binary_fixed_points(8, m, 1.0)
    got = bandit.fixed_points(r, 1.0)
    assert len(got) == len(expected) == 2
    for point, q in zip(got, expected):
        assert point.p == pytest.approx(q, abs=1e-10)
        # a fixed point of the map: the ascent direction vanishes there (theta_old = theta)
        np.testing.assert_allclose(bandit.objective_gradient(point.theta, point.theta, r, 1.0), 0.0, atol=1e-12)
    assert got[0].stable and not got[1].stable


def test_run_from_uniform_converges_to_the_stable_fixed_point():
    point = bandit.interior_fixed_point(ONE_HOT, 1.0)
    p = bandit.simulate(ONE_HOT, 0.2, 0.0, 1.0, 0, 3000)
    assert p[-1] == pytest.approx(point.p, abs=1e-10)


def test_no_interior_fixed_point_means_collapse():
    r = BINARY_2_OF_8
    # b beta Std_b for binary 2-of-8 peaks just above 1 at beta = 1; at beta = 0.8 it never reaches 1
    assert bandit.fixed_points(r, 0.8) == []
    assert bandit.interior_fixed_point(r, 0.8) is None
    result = bandit.run(r, 0.3, 0.0, 0.8, 0, 4000)
    assert result.p[-1] == pytest.approx(1.0, abs=2e-3)
    assert result.theta_spread > 8  # theta keeps growing (logarithmically) while p stays below max r
    longer = bandit.run(r, 0.3, 0.0, 0.8, 0, 16000)
    assert longer.theta_spread > result.theta_spread + 0.5
    assert np.all(longer.p <= 1.0)


# ---------------------------------------------------------------------------------------------------------------
# Linearised stiffness and the relaxation-rate read-out
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rewards", [ONE_HOT, BINARY_2_OF_8, np.array([0, 0, 0, 0, 0, 0, 0.3, 1.0])])
def test_linearised_stiffness_matches_the_late_relaxation_of_a_small_eta_run(rewards):
    eta = 0.05
    point = bandit.interior_fixed_point(rewards, 1.0)
    steps = int(math.log(1e11) / -math.log(1 - eta * point.stiffness))  # long enough to reach a 1e-10 gap
    p = bandit.simulate(rewards, eta, 0.0, 1.0, 0, steps)
    gap = np.abs(p - point.p)
    t = np.arange(p.size)
    late = (gap < 1e-5 * gap[0]) & (gap > 1e-10 * gap[0])
    rate = -np.polyfit(t[late], np.log(gap[late]), 1)[0]
    # discrete on-policy map with mu = 0: the slow mode contracts by (1 - eta K_lin) per step
    assert rate == pytest.approx(-math.log(1 - eta * point.stiffness), rel=1e-3)


def test_relaxation_rate_recovers_an_exponential_exactly():
    t = np.arange(400)
    p = 2.0 - 1.5 * np.exp(-0.013 * t)
    fit = bandit.relaxation_rate(p, 2.0, eta=0.1, window=(0.0, 0.5))
    assert fit.rate == pytest.approx(0.013, rel=1e-10)
    assert fit.stiffness == pytest.approx(0.13, rel=1e-10)
    assert fit.first_step == 0 and p[fit.last_step] >= 2.0 - 1.5 * 0.5
    with pytest.raises(ValueError):
        bandit.relaxation_rate(p, 2.0, 0.1, (0.5, 0.4))


# ---------------------------------------------------------------------------------------------------------------
# Classification on constructed trajectories
# ---------------------------------------------------------------------------------------------------------------
T = np.arange(2000, dtype=float)


def test_classify_monotone_and_small_ringing_inside_the_tolerance():
    regime = bandit.classify_regime(1.0 - np.exp(-0.01 * T), 1.0, tolerance=0.01)
    assert regime.label == "monotone" and regime.settled and regime.crossings == 0
    wobble = 1.0 - np.exp(-0.01 * T) + 0.005 * np.sin(0.3 * T) * np.exp(-0.001 * T)  # |ringing| < 1% of the gap
    assert bandit.classify_regime(wobble, 1.0, tolerance=0.01).label == "monotone"


def test_classify_single_overshoot():
    # critically damped approach plus one hump above the target, then back down without undershooting
    p = 1.0 - (1 - 0.05 * T) * np.exp(-0.05 * T)
    regime = bandit.classify_regime(p, 1.0, tolerance=0.01)
    overshoot = -(1 - 0.05 * T) * np.exp(-0.05 * T)
    assert regime.label == "overshoot" and regime.crossings == 1
    assert regime.overshoot == pytest.approx(overshoot.max(), rel=1e-12)  # e^-2 at t = 40


def test_classify_damped_and_sustained_oscillation():
    damped = 1.0 - np.exp(-0.01 * T) * np.cos(0.1 * T)
    regime = bandit.classify_regime(damped, 1.0, tolerance=0.01)
    assert regime.label == "oscillatory" and regime.crossings >= 2 and regime.settled
    sustained = 1.0 - np.exp(-0.01 * T) + 0.2 * np.sin(0.1 * T) * (1 - np.exp(-0.01 * T))
    regime = bandit.classify_regime(sustained, 1.0, tolerance=0.01)
    assert regime.label == "oscillatory" and not regime.settled
    assert regime.final_amplitude == pytest.approx(0.2, rel=0.05)


def test_classify_collapse_to_the_best_completion():
    p = 1.0 - np.exp(-0.02 * T) + 0.4 * (1 - np.exp(-0.005 * T))  # passes p* = 1 and ends near max r = 1.4
    regime = bandit.classify_regime(p, 1.0, tolerance=0.01, collapse_tolerance=0.05, p_max=1.4)
    assert regime.label == "collapsed"
    assert bandit.classify_regime(p, 1.0, p_max=None).label == "overshoot"


def test_classify_many_matches_single_calls():
    rows = np.stack([1.0 - np.exp(-0.01 * T), 1.0 - np.exp(-0.01 * T) * np.cos(0.1 * T)])
    labels, *_ = bandit.classify_many(rows, 1.0)
    assert list(labels) == ["monotone", "oscillatory"]


# ---------------------------------------------------------------------------------------------------------------
# Closed forms used by the figures (Eq. 9-11)
# ---------------------------------------------------------------------------------------------------------------
def test_zeta_one_curve_and_threshold():
    k, mu = 0.12, 0.8
    etas = np.array([0.01, 0.03, 0.06])
    k_refs = theory.critical_damping_refresh_interval(etas, mu, k)
    np.testing.assert_allclose(theory.damping_ratio(etas, mu, k, k_refs), 1.0, rtol=1e-10)
    # beyond eta = (1 - mu)^2 / (2 K (1 + mu)) zeta < 1 already at K_ref = 0
    eta_c = (1 - mu) ** 2 / (2 * k * (1 + mu))
    assert theory.critical_damping_refresh_interval(np.array([1.01 * eta_c]), mu, k)[0] == 0.0
    assert theory.damping_ratio(1.01 * eta_c, mu, k, 0.0) < 1.0
    assert k * 0.3 * theory.critical_refresh_interval(0.3, mu, k) == pytest.approx(1 - mu)
    assert theory.damping_ratio(0.3, mu, k, theory.critical_refresh_interval(0.3, mu, k)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("k_ref", [0, 3, 5, 6, 12])
def test_theorem7_trajectory_solves_the_oscillator_from_rest(k_ref):
    eta, mu, k = 0.3, 0.8, 0.12
    mass, damping, _ = theory.effective_coefficients(eta, mu, k, k_ref)
    # fine time grid via a rescaled call: evaluate e(t) on the integer grid and check the ODE by finite differences
    p = theory.predicted_trajectory(0.4, 1.35, 60, eta, mu, k, k_ref)
    assert p[0] == pytest.approx(0.4)
    h = 1e-4
    e = lambda t: _theorem7_at(t, 0.4, 1.35, mass, damping, k)  # noqa: E731
    for t in (0.0 + 2 * h, 7.3, 20.0):
        e2 = (e(t + h) - 2 * e(t) + e(t - h)) / h**2
        e1 = (e(t + h) - e(t - h)) / (2 * h)
        assert mass * e2 + damping * e1 + k * e(t) == pytest.approx(0.0, abs=1e-5 * max(1, abs(e(t))))
    assert (e(h) - e(0)) / h == pytest.approx(0.0, abs=1e-3)
    np.testing.assert_allclose(p[[0, 7, 20]] - 1.35, [e(0.0), e(7.0), e(20.0)], rtol=1e-9, atol=1e-12)


def _theorem7_at(t, p0, p_star, mass, damping, k):
    """Independent solution by the 2x2 matrix exponential of x' = A x, x = (e, e')."""
    from scipy.linalg import expm

    a = np.array([[0.0, 1.0], [-k / mass, -damping / mass]])
    return float((expm(a * t) @ np.array([p0 - p_star, 0.0]))[0])


# ---------------------------------------------------------------------------------------------------------------
# Report stage: configuration, default calibration, a tiny end-to-end run
# ---------------------------------------------------------------------------------------------------------------
def test_config_errors_name_the_key():
    with pytest.raises(InputError, match="bandit.sweep.eta"):
        bandit_settings({"sweep": {"eta": -1}})
    with pytest.raises(InputError, match="bandit.regime_map.etas.n"):
        bandit_settings({"regime_map": {"etas": {"n": 1}}})
    with pytest.raises(InputError, match="bandit.readings\\[0\\].refresh"):
        bandit_settings({"readings": [{"refresh": "weekly", "gradient": "stale"}]})
    with pytest.raises(InputError, match="bandit.colour"):
        bandit_settings({"colour": 1})
    with pytest.raises(InputError, match="bandit.calibration.window"):
        bandit_settings({"calibration": {"window": [0.5, 0.2]}})
    with pytest.raises(InputError, match="bandit.rewards"):
        bandit_settings({"rewards": [1, 1, 1]})


def test_default_rewards_give_the_papers_p_star_and_K():
    result = calibrate(bandit_settings({}))
    assert result["interior_fixed_point"]
    assert result["p_star_exact"] == pytest.approx(1.35, abs=1e-5)
    assert result["p_star_measured"] == pytest.approx(result["p_star_exact"], abs=1e-6)
    assert 0.11 <= result["stiffness"] <= 0.13


def test_missing_calibration_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        run_sweep({}, str(tmp_path / "nope.json"), *(str(tmp_path / f) for f in ("a.csv", "b.csv", "c.pdf",
                                                                                 "d.png")))


def test_tiny_end_to_end(tmp_path):
    cfg = {
        "calibration": {"steps": 3000},
        "sweep": {"k_refs": [1, 6], "steps": 50, "settle_steps": 600, "dense_k_ref_max": 8},
        "regime_map": {"etas": {"min": 0.05, "max": 0.5, "n": 5}, "k_refs": {"min": 1, "max": 30, "n": 6},
                       "steps": 600},
        "readings": [{"refresh": "sliding", "gradient": "stale"}, {"refresh": "periodic",
                                                                   "gradient": "importance_weighted"}],
    }
    cal = tmp_path / "calibration.json"
    run_calibrate(cfg, str(cal))
    data = json.loads(cal.read_text())
    assert data["p_ref"] == pytest.approx(np.mean(DEFAULT_REWARDS))
    run_sweep(cfg, str(cal), str(tmp_path / "f6.csv"), str(tmp_path / "f6r.csv"), str(tmp_path / "f6.pdf"),
                 str(tmp_path / "f6.png"))
    maps = []
    for reading in bandit_settings(cfg).readings:
        path = tmp_path / f"map_{reading.refresh}_{reading.gradient}.csv"
        run_regime_map(cfg, str(cal), reading.refresh, reading.gradient, str(path), str(path.with_suffix(".pdf")),
                          str(path.with_suffix(".png")))
        maps.append(str(path))
    verdicts = run_verdict(cfg, str(cal), str(tmp_path / "f6r.csv"), maps, str(tmp_path / "verdict.md"),
                              str(tmp_path / "t.csv"), str(tmp_path / "t.md"), str(tmp_path / "t.tex"))
    assert len(verdicts) == 4 * 2
    assert {v.verdict for v in verdicts} <= {"reproduced", "partly", "not"}
    text = (tmp_path / "verdict.md").read_text()
    assert "Measured K" in text and "## Verdicts" in text
    for name in ("f6.pdf", "f6.png", "t.tex", "t.md"):
        assert (tmp_path / name).stat().st_size > 0


def test_row_frontier():
    k = np.array([1, 2, 3, 4, 5])
    f = row_frontier(k, ["overshoot", "monotone", "monotone", "oscillatory", "oscillatory"])
    assert f.exit_k_ref == 4 and f.status == "ok" and not f.cascade
    f = row_frontier(k, ["monotone", "monotone", "overshoot", "oscillatory", "oscillatory"])
    assert f.exit_k_ref == 3 and f.cascade and f.first_oscillatory_k_ref == 4
    assert row_frontier(k, ["monotone", "overshoot", "oscillatory", "collapsed", "collapsed"]).cascade
    assert not row_frontier(k, ["monotone", "overshoot", "collapsed", "collapsed", "collapsed"]).cascade
    assert not row_frontier(k, ["monotone", "oscillatory", "overshoot", "oscillatory", "oscillatory"]).cascade
    assert row_frontier(k, ["monotone"] * 5).status == "censored"
    assert row_frontier(k, ["oscillatory"] * 5).status == "never_monotone"
