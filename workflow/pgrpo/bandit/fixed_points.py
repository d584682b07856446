"""Fixed points of the exact softmax bandit (Section 5.6) and the linearisation of its drift there.

Every interior fixed point is a Gibbs policy ``pi ∝ exp(b r)`` with ``b beta Std_b[r] = 1`` (Assumption 1's
``p*``); the slowest mode of the drift Jacobian is the linearised stiffness (the ``K`` of Lemma 3 at ``p*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.optimize import brentq

from pgrpo.bandit.exact import Gradient, as_rewards, objective_gradient, softmax


# Fixed points (exact) and the linearisation at them
def gibbs_policy(rewards: np.ndarray, inverse_temperature: float) -> np.ndarray:
    """``pi_b(o) ∝ exp(b r_o)``."""
    return softmax(inverse_temperature * np.asarray(rewards, float))


def _fixed_point_residual(b: float, r: np.ndarray, beta: float) -> float:
    pi = gibbs_policy(r, b)
    mean = pi @ r
    std = np.sqrt(pi @ (r - mean) ** 2)
    return b * beta * std - 1.0


@dataclass(frozen=True)
class FixedPoint:
    """An interior fixed point: the Gibbs policy ``pi ∝ exp(b r)`` with ``b beta Std_b[r] = 1``.

    ``theta`` is the centred logit vector ``b (r - mean r)``; ``p`` the order parameter; ``stable`` whether the
    on-policy gradient flow is linearly stable there; ``stiffness`` the slowest decay rate of the flow (per unit
    ``eta``) among modes that move ``p`` (the linearised ``K`` of Lemma 3).
    """

    inverse_temperature: float
    pi: np.ndarray
    theta: np.ndarray
    p: float
    stable: bool
    stiffness: float


def fixed_points(rewards: Sequence[float] | np.ndarray, beta: float, grid_points: int = 4001) -> list[FixedPoint]:
    """All interior fixed points of the map, found exactly (brentq on ``b beta Std_b[r] = 1`` after a scan).

    At a fixed point ``theta_old = theta``, so the importance ratio is one and both readings and both refresh rules
    share the fixed points: ``pi (A - beta (log pi + H)) = 0`` forces ``log pi = A / beta + const``, i.e. a Gibbs
    policy with inverse temperature ``b = 1 / (beta Std[r])``. ``b Std_b[r]`` vanishes at ``b = 0`` and as
    ``b -> infinity``, so the equation has an even number of roots (none when ``beta`` is too small for the reward
    shape: then there is no interior fixed point and the policy collapses). Sorted by ``b`` (nearest uniform first).
    """
    r = as_rewards(rewards)
    if beta <= 0:
        raise ValueError("beta must be > 0")
    spread = r.max() - r.min()
    if spread == 0:
        return []
    # b in units of 1 / spread: b * spread up to 60 covers exp(-60) tails, far beyond any finite root
    grid = np.linspace(0.0, 60.0, grid_points) / spread
    values = np.array([_fixed_point_residual(b, r, beta) for b in grid])
    roots: list[float] = []
    for lo, hi, vlo, vhi in zip(grid[:-1], grid[1:], values[:-1], values[1:]):
        if vlo == 0.0:
            roots.append(lo)
        elif vlo * vhi < 0:
            roots.append(brentq(_fixed_point_residual, lo, hi, args=(r, beta), xtol=1e-15, rtol=1e-15, maxiter=200))
    points = []
    for b in roots:
        pi = gibbs_policy(r, b)
        theta = b * (r - r.mean())
        jac = drift_jacobians(theta, r, beta, gradient="importance_weighted")
        total = jac.current + jac.old
        rate, stable = _slowest_p_mode(total, theta, pi, r)
        points.append(FixedPoint(inverse_temperature=float(b), pi=pi, theta=theta, p=float(pi @ r), stable=stable,
                                 stiffness=rate))
    return points


def interior_fixed_point(rewards: Sequence[float] | np.ndarray, beta: float) -> FixedPoint | None:
    """The stable interior fixed point nearest the uniform policy (the one a run from uniform approaches), or None."""
    for point in fixed_points(rewards, beta):
        if point.stable:
            return point
    return None


@dataclass(frozen=True)
class DriftJacobians:
    """Linearisation of the ascent direction ``F(theta, theta_old)`` at ``theta = theta_old = theta*``.

    ``current = dF/dtheta`` (KL term, and for ``importance_weighted`` the ratio's weight) and ``old =
    dF/dtheta_old`` (the advantage, and for ``stale`` also the weight). The on-policy flow's Jacobian is their sum.
    """

    current: np.ndarray
    old: np.ndarray


def _numerical_jacobian(func, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    n = x.size
    jac = np.empty((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        jac[:, j] = (func(x + e) - func(x - e)) / (2 * h)
    return jac


def drift_jacobians(theta_star: np.ndarray, rewards: Sequence[float] | np.ndarray, beta: float,
                    gradient: Gradient = "importance_weighted") -> DriftJacobians:
    """Central-difference Jacobians of the ascent direction w.r.t. the current and the sampling state."""
    r = as_rewards(rewards)
    x = np.asarray(theta_star, float)
    current = _numerical_jacobian(lambda t: objective_gradient(t, x, r, beta, gradient), x)
    old = _numerical_jacobian(lambda t: objective_gradient(x, t, r, beta, gradient), x)
    return DriftJacobians(current=current, old=old)


def _slowest_p_mode(jacobian: np.ndarray, theta_star: np.ndarray, pi: np.ndarray, r: np.ndarray
                    ) -> tuple[float, bool]:
    """Slowest decay rate (``-Re`` eigenvalue) among the modes that a run from uniform excites and ``p`` sees;
    and whether the fixed point is linearly stable (every mode but the shift decays).

    The ascent direction sums to zero over completions, so ``J`` maps into ``1^perp`` and ``J 1 = 0`` (the shift
    ``theta + c`` leaves ``pi`` unchanged): the dynamics live on ``1^perp``, where ``J`` is ``Q^T J Q``. A mode is
    seen by ``p`` when ``dp/dtheta = pi (r - p)`` overlaps its right eigenvector, and excited by the start when the
    initial displacement ``-theta*`` overlaps its left eigenvector (symmetric modes of tied rewards are neither).
    """
    n = r.size
    basis = np.linalg.qr(np.eye(n) - 1.0 / n)[0][:, : n - 1]  # orthonormal basis of 1^perp
    reduced = basis.T @ jacobian @ basis
    eigvals, right = np.linalg.eig(reduced)
    left = np.linalg.inv(right)
    stable = bool(np.all(eigvals.real < 0))
    seen = np.abs((pi * (r - pi @ r)) @ basis @ right)
    excited = np.abs(left @ (basis.T @ -theta_star))
    weights = seen * excited
    relevant = weights > 1e-8 * max(weights.max(), 1e-300)
    rates = -eigvals.real[relevant]
    return (float(rates.min()) if rates.size else float("nan")), stable


def linearised_stiffness(rewards: Sequence[float] | np.ndarray, beta: float) -> float:
    """``K_lin``: slowest decay rate per unit ``eta`` of ``p`` near the stable interior fixed point (on-policy, mu=0).

    The late-time slope of ``-log|p* - p(t)|`` of a small-``eta`` run, divided by ``eta``, tends to this number.
    """
    point = interior_fixed_point(rewards, beta)
    if point is None:
        raise ValueError("no stable interior fixed point: the policy collapses and there is no stiffness at p*")
    return point.stiffness
