"""The closed forms of Section 3 as numbers, and the regime of a training configuration.

- Theorem 7, Eq. (9): ``M_eff = [(1+mu) + K eta tau^2] / (2 eta)``, ``C_eff = [(1-mu) - K eta tau] / eta``,
  ``K_eff = K`` with ``tau = K_ref delta`` (general ``delta``: Eq. 6 inserted into Eq. 7).
- Proposition 8, Eq. (10): the damping ratio ``zeta = C_eff / (2 sqrt(K_eff M_eff))``; the poles.
- Proposition 9, Eq. (11): unstable iff ``K eta K_ref > 1 - mu``; the critical refresh interval ``(1-mu)/(K eta)``.
- Corollary 13, Eq. (14): the saturation time scale ``C_eff / K_eff``.
- Proposition 14, Eq. (16)-(17): the mean trajectory from rest, ``M R'' + C R' + K (R - R_inf) = 0``,
  ``R(0) = R_0``, ``R'(0) = 0`` (critically, over- and underdamped, and unstable).

The ODE is the O(delta^2, tau^2) truncation of the discrete map (3); its regime can disagree with that of the
exact linear delayed heavy-ball map ``e_{k+1} = e_k - eta K e_{k-K_ref} + mu (e_k - e_{k-1})``, which is
therefore classified alongside from the roots of its characteristic polynomial (the eigenvalues of its
companion matrix).

"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pgrpo.errors import InputError

#: |zeta - 1| below this counts as critical damping
CRITICAL_TOL = 1e-9


#: a root whose imaginary part exceeds this (relative to its modulus) counts as complex; numpy.roots puts
#: ~sqrt(machine eps) imaginary noise on double roots, so the tolerance is well above that
COMPLEX_TOL = 1e-6


#: roots within this relative distance of the spectral radius count as dominant
DOMINANT_RTOL = 1e-9


ODE_REGIMES = ("overdamped", "critical", "underdamped", "unstable")


MAP_REGIMES = ("monotone", "oscillatory", "unstable")


@dataclass(frozen=True)
class DiscreteMapRegime:
    """Regime of the exact linear delayed heavy-ball map, from the roots of its characteristic polynomial.

    ``regime``: "unstable" if the spectral radius is >= 1; else "oscillatory" if a dominant root (largest
    modulus) is complex or negative real; else "monotone". ``has_complex_roots``: any root is complex.
    """

    spectral_radius: float
    dominant_root: complex
    has_complex_roots: bool
    regime: str
    roots: tuple[complex, ...]


@dataclass(frozen=True)
class Coefficients:
    """Effective coefficients of Theorem 7 for one configuration, and what they imply."""

    eta: float
    mu: float
    K: float
    k_ref: int
    delta: float
    m_eff: float
    c_eff: float
    k_eff: float
    zeta: float
    omega_n: float
    poles: tuple[complex, complex]
    regime: str  # ODE: overdamped / critical / underdamped / unstable
    time_constant: float  # C_eff / K_eff (Cor. 13); inf when C_eff <= 0
    slowest_decay_time: float  # -1 / max Re(pole); inf when no pole decays
    critical_k_ref: float  # (1 - mu) / (K eta), Prop. 9
    discrete: DiscreteMapRegime


def validate_inputs(eta: float, mu: float, K: float, k_ref: int, delta: float = 1.0) -> None:
    """Raise :class:`InputError` naming the first argument outside the paper's assumptions."""
    checks = (
        ("eta", eta, lambda v: v > 0, "must be > 0"),
        ("mu", mu, lambda v: 0 <= v < 1, "must be in [0, 1)"),
        ("K", K, lambda v: v > 0, "must be > 0"),
        ("delta", delta, lambda v: v > 0, "must be > 0"),
    )
    for name, value, ok, why in checks:
        if not is_real(value) or not math.isfinite(float(value)) or not ok(float(value)):
            raise InputError(f"{name}={value!r} {why}")
    if isinstance(k_ref, bool) or not is_real(k_ref) or float(k_ref) != int(k_ref) or int(k_ref) < 0:
        raise InputError(f"k_ref={k_ref!r} must be an integer >= 0 (refresh interval in optimizer steps)")


def is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def effective_coefficients(eta: float, mu: float, K: float, k_ref: int, delta: float = 1.0) -> tuple[float, float, float]:
    """``(M_eff, C_eff, K_eff)`` of Eq. (6)+(7) with ``tau = K_ref delta``; Eq. (9) at ``delta = 1``."""
    tau = k_ref * delta
    m_eff = (1 + mu) * delta**2 / (2 * eta) + 0.5 * K * tau**2
    c_eff = (1 - mu) * delta / eta - K * tau
    return m_eff, c_eff, K


def damping_ratio(eta, mu, K, k_ref, delta: float = 1.0):
    """Eq. (10), ``zeta = C_eff / (2 sqrt(K_eff M_eff))``; vectorised over numpy arrays (no validation)."""
    m_eff, c_eff, k_eff = effective_coefficients(eta, mu, K, np.asarray(k_ref, dtype=float), delta)
    return c_eff / (2.0 * np.sqrt(k_eff * m_eff))


def critical_refresh_interval(eta, mu, K):
    """Proposition 9, Eq. (11): the ``K_ref`` at which ``K eta K_ref = 1 - mu``; vectorised."""
    return (1.0 - mu) / (K * np.asarray(eta, dtype=float))


def critical_damping_refresh_interval(eta, mu, K):
    """The ``K_ref`` at which Eq. (10) gives ``zeta = 1`` (``zeta < 1`` beyond it); 0 where ``zeta < 1`` already at
    ``K_ref = 0``. With ``x = K eta K_ref``, ``zeta = 1`` reads ``x^2 + 2 (1 - mu) x - (1 - mu)^2 + 2 K eta (1 + mu)
    = 0``, whose non-negative root is ``x = sqrt(2 (1 - mu)^2 - 2 K eta (1 + mu)) - (1 - mu)``. Vectorised."""
    k_eta = K * np.asarray(eta, dtype=float)
    disc = 2.0 * (1.0 - mu) ** 2 - 2.0 * k_eta * (1.0 + mu)
    x = np.sqrt(np.maximum(disc, 0.0)) - (1.0 - mu)
    return np.where(x > 0, x / k_eta, 0.0)


def ode_regime(c_eff: float, zeta: float, tol: float = CRITICAL_TOL) -> str:
    """Regime of the second-order ODE (8): unstable if C_eff <= 0, else by the damping ratio."""
    if c_eff <= 0:
        return "unstable"
    if abs(zeta - 1) < tol:
        return "critical"
    return "overdamped" if zeta > 1 else "underdamped"


def discrete_characteristic_polynomial(eta: float, mu: float, K: float, k_ref: int) -> np.ndarray:
    """Coefficients (highest power first) of the characteristic polynomial of the delayed heavy-ball map.

    With ``e_j = z^j`` in ``e_{k+1} = e_k - eta K e_{k-K_ref} + mu (e_k - e_{k-1})``:

    - ``K_ref >= 1``: multiply by ``z^(K_ref - k)``: ``z^(K_ref+1) - (1+mu) z^K_ref + mu z^(K_ref-1) + eta K``
      (degree ``K_ref + 1``; at ``K_ref = 1`` the last two terms share the power 0);
    - ``K_ref = 0`` (undelayed, Lemma 4): multiply by ``z^(1-k)``: ``z^2 - (1 + mu - eta K) z + mu``.
    """
    k_ref = int(k_ref)
    if k_ref == 0:
        return np.array([1.0, -(1.0 + mu - eta * K), mu])
    by_power = np.zeros(k_ref + 2)
    by_power[k_ref + 1] += 1.0
    by_power[k_ref] -= 1.0 + mu
    by_power[k_ref - 1] += mu
    by_power[0] += eta * K
    return by_power[::-1].copy()


def discrete_map_regime(eta: float, mu: float, K: float, k_ref: int) -> DiscreteMapRegime:
    """Spectral radius, dominant root and regime of the exact delayed map (companion-matrix eigenvalues)."""
    roots = np.roots(discrete_characteristic_polynomial(eta, mu, K, k_ref))
    moduli = np.abs(roots)
    rho = float(moduli.max())
    is_complex = np.abs(roots.imag) > COMPLEX_TOL * np.maximum(moduli, 1e-300)
    dominant = moduli >= rho * (1 - DOMINANT_RTOL)
    # rho == 0 (e.g. eta K = 1, mu = 0, K_ref = 0) is dead-beat convergence: no oscillation
    dominant_oscillates = rho > 0 and bool(np.any(dominant & (is_complex | (roots.real <= 0))))
    # report the dominant root with non-negative imaginary part (of a complex pair) or the real one
    candidates = roots[dominant]
    pick = candidates[np.argmax(candidates.imag)]
    dominant_root = complex(pick.real, 0.0) if abs(pick.imag) <= COMPLEX_TOL * abs(pick) else complex(pick)
    if rho >= 1.0:
        regime = "unstable"
    else:
        regime = "oscillatory" if dominant_oscillates else "monotone"
    clean = tuple(complex(r.real, 0.0) if not c else complex(r) for r, c in zip(roots, is_complex))
    return DiscreteMapRegime(spectral_radius=rho, dominant_root=dominant_root,
                             has_complex_roots=bool(is_complex.any()), regime=regime, roots=clean)


def coefficients(eta: float, mu: float, K: float, k_ref: int, delta: float = 1.0) -> Coefficients:
    """Everything Section 3 predicts for ``(eta, mu, K, K_ref)``: Eq. (9), (10), (11), (14) and the exact map."""
    validate_inputs(eta, mu, K, k_ref, delta)
    eta, mu, K, delta, k_ref = float(eta), float(mu), float(K), float(delta), int(k_ref)
    m_eff, c_eff, k_eff = effective_coefficients(eta, mu, K, k_ref, delta)
    zeta = c_eff / (2.0 * math.sqrt(k_eff * m_eff))
    omega_n = math.sqrt(k_eff / m_eff)
    disc = complex(c_eff**2 - 4.0 * m_eff * k_eff)
    root = disc**0.5
    poles = ((-c_eff + root) / (2 * m_eff), (-c_eff - root) / (2 * m_eff))
    poles = tuple(complex(p.real, 0.0) if disc.real >= 0 else p for p in poles)
    max_re = max(p.real for p in poles)
    return Coefficients(
        eta=eta, mu=mu, K=K, k_ref=k_ref, delta=delta,
        m_eff=m_eff, c_eff=c_eff, k_eff=k_eff, zeta=zeta, omega_n=omega_n, poles=poles,
        regime=ode_regime(c_eff, zeta),
        time_constant=c_eff / k_eff if c_eff > 0 else math.inf,
        slowest_decay_time=-1.0 / max_re if max_re < 0 else math.inf,
        critical_k_ref=(1.0 - mu) / (K * eta),
        discrete=discrete_map_regime(eta, mu, K, k_ref),
    )


def predicted_trajectory(r0: float, r_inf: float, steps: int, eta: float, mu: float, K: float, k_ref: int,
                         delta: float = 1.0) -> np.ndarray:
    """Mean reward of Theorem 7 from rest at ``t = 0, delta, ..., steps*delta`` (length ``steps + 1``).

    The exact solution of ``M R'' + C R' + K (R - R_inf) = 0``, ``R(0) = r0``, ``R'(0) = 0``. With
    ``alpha = -C/(2M)`` and ``beta^2 = alpha^2 - K/M`` the deviation ``e = R - R_inf`` is
    ``e0 e^{alpha t} (cosh(beta t) - alpha sinh(beta t)/beta)`` (overdamped; the two-exponential of
    Prop. 14), ``e0 e^{alpha t} (1 - alpha t)`` (critical, Eq. 17), ``e0 e^{alpha t} (cos(w t) - alpha
    sin(w t)/w)`` with ``w = sqrt(-beta^2)`` (underdamped). For ``C <= 0`` the same formulas grow (unstable).
    """
    steps = validate_steps(steps)
    t = np.arange(steps + 1, dtype=float) * float(delta)
    return predicted_reward(t, r0, r_inf, eta, mu, K, k_ref, delta)


def predicted_reward(t, r0: float, r_inf: float, eta: float, mu: float, K: float, k_ref: int,
                     delta: float = 1.0) -> np.ndarray:
    """The mean reward of :func:`predicted_trajectory` at arbitrary times ``t >= 0`` (same time unit as delta)."""
    validate_inputs(eta, mu, K, k_ref, delta)
    m_eff, c_eff, k_eff = effective_coefficients(float(eta), float(mu), float(K), int(k_ref), float(delta))
    t = np.asarray(t, dtype=float)
    return float(r_inf) + (float(r0) - float(r_inf)) * unit_from_rest(t, m_eff, c_eff, k_eff)


def unit_from_rest(t: np.ndarray, m: float, c: float, k: float) -> np.ndarray:
    """Solution of ``m e'' + c e' + k e = 0``, ``e(0) = 1``, ``e'(0) = 0`` at times ``t``."""
    alpha = -c / (2.0 * m)
    beta2 = alpha * alpha - k / m
    scale = max(alpha * alpha, k / m)
    with np.errstate(over="ignore", invalid="ignore"):
        if abs(beta2) <= 1e-14 * scale:  # critical: repeated pole alpha
            return np.exp(alpha * t) * (1.0 - alpha * t)
        if beta2 < 0:  # underdamped (or undamped / growing oscillation when c <= 0)
            w = math.sqrt(-beta2)
            return np.exp(alpha * t) * (np.cos(w * t) - alpha * np.sin(w * t) / w)
        beta = math.sqrt(beta2)
        s1 = alpha + beta  # the slow (or, if unstable, the fastest-growing) pole
        bt = beta * t
        small = bt < 1.0
        # exponential form (no cosh overflow against an underflowing exp, no inf - inf) where beta t >= 1,
        # hyperbolic form (no cancellation) where beta t < 1
        expo = np.exp(s1 * t) * ((beta - alpha) + (alpha + beta) * np.exp(-2.0 * bt)) / (2.0 * beta)
        hyper = np.exp(alpha * t) * (np.cosh(np.where(small, bt, 0.0))
                                     - alpha * np.sinh(np.where(small, bt, 0.0)) / beta)
        return np.where(small, hyper, expo)


def discrete_trajectory(r0: float, r_inf: float, steps: int, eta: float, mu: float, K: float,
                        k_ref: int) -> np.ndarray:
    """Iterate the exact delayed heavy-ball map from rest: ``e_j = r0 - r_inf`` for every ``j <= 0``.

    ``e_{k+1} = e_k - eta K e_{k-K_ref} + mu (e_k - e_{k-1})``; returns ``r_inf + e_k`` for ``k = 0..steps``.
    """
    validate_inputs(eta, mu, K, k_ref)
    steps = validate_steps(steps)
    k_ref = int(k_ref)
    lead = max(k_ref, 1)
    e = np.empty(steps + 1 + lead)
    e[: lead + 1] = float(r0) - float(r_inf)  # indices 0..lead hold e_{-lead}..e_0
    a = float(eta) * float(K)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(lead, lead + steps):
            e[k + 1] = e[k] - a * e[k - k_ref] + float(mu) * (e[k] - e[k - 1])
    return float(r_inf) + e[lead:]


def discrete_critical_k_ref(eta: float, mu: float, K: float, max_k_ref: int = 1000) -> int | None:
    """Smallest ``K_ref`` at which the exact delayed map is unstable (spectral radius >= 1), by bisection.

    Assumes instability persists for larger ``K_ref`` (checked at the bracket ends); ``None`` if the map is
    still stable at ``max_k_ref``. Compare with Prop. 9's ``(1 - mu) / (K eta)``.
    """
    validate_inputs(eta, mu, K, 0)

    def unstable(k: int) -> bool:
        return discrete_map_regime(eta, mu, K, k).spectral_radius >= 1.0

    if unstable(0):
        return 0
    hi = 1
    while not unstable(hi):
        if hi >= max_k_ref:
            return None
        hi = min(2 * hi, max_k_ref)
    lo = hi // 2  # stable
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if unstable(mid):
            hi = mid
        else:
            lo = mid
    return hi


def validate_steps(steps) -> int:
    if isinstance(steps, bool) or not is_real(steps) or float(steps) != int(steps) or int(steps) < 0:
        raise InputError(f"steps={steps!r} must be an integer >= 0")
    return int(steps)
