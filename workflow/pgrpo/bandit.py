"""The exact softmax-bandit reduction of Section 5.6: the setting where Assumption 1 holds exactly.

One prompt, a finite completion set ``O`` with fixed rewards ``r``, a softmax policy ``pi_theta = softmax(theta)``,
a uniform reference policy, ``theta_0 = 0`` (the uniform policy) started from rest (``theta_{-1} = theta_0``).
The order parameter is ``p(theta) = sum_o pi_theta(o) r_o`` (Assumption 1, Section 3.2).

Dynamics (the heavy-ball GRPO map, Eq. 3, in the ``G -> infinity`` deterministic limit of Eq. 1-2):

* advantage under the sampling policy, population standard deviation (Eq. 1 with ``G -> infinity``)::

      A_old(o) = (r_o - E_old[r]) / Std_old[r]           (A_old = 0 where Std_old[r] = 0)

* objective (Eq. 2, unclipped)::

      J(theta; theta_old) = sum_o pi_theta(o) A_old(o) - beta KL(pi_theta || pi_ref)

  The KL gradient is always taken at the current ``theta``. Two readings of the reward gradient (``gradient``):

  - ``importance_weighted``: the exact gradient of ``sum_o pi_theta(o) A_old(o)`` at the current ``theta``
    (the importance ratio of Eq. 2 kept): ``pi (A_old - <A_old>_pi)``;
  - ``stale``: the score-function gradient evaluated wholly at ``pi_old`` (Lemma 2 at the on-policy point, i.e.
    the restoring force at the delayed state as Lemma 5 assumes): ``pi_old (A_old - <A_old>_old)``.

* heavy ball (Eq. 3): ``theta_{k+1} = theta_k + eta grad J(theta_k; theta_old(k)) + mu (theta_k - theta_{k-1})``;
* refresh (``refresh``): ``sliding``: ``theta_old(k) = theta_{k-K_ref}`` (``theta_0`` while ``k < K_ref``), Eq. 3
  read literally (``K_ref = 0`` is on-policy); ``periodic``: ``theta_old(k) = theta_{K_ref floor(k / K_ref)}``
  (``K_ref = 1`` is on-policy).

:func:`simulate` runs a whole ``(eta, mu, K_ref)`` grid in one vectorised pass with a ring buffer of past policies.

Closed forms provided here (used by the tests and the report of Figures 6-7):

* :func:`fixed_points`: every interior fixed point is a Gibbs policy ``pi ∝ exp(b r)`` with ``b beta Std_b[r] = 1``
  (at a fixed point ``theta_old = theta``, so both readings and both refreshes share it); found exactly by
  bracketing the scalar condition. When it has no root the policy collapses onto the best completions:
  ``theta`` grows without bound while ``p -> max r`` stays bounded.
* :func:`drift_jacobians`: the linearisation of the drift at a fixed point, split into the part that acts on the
  current state and the part that acts on the delayed (sampling) state, for each reading; its slowest mode is the
  linearised stiffness (the ``K`` of Lemma 3 at ``p*``).
* :func:`relaxation_rate`: the paper's read-out of ``lambda`` as the slope of ``-log(p* - p(t))`` over a window.
* :func:`classify_regime`: monotone / overshoot / oscillatory / collapsed with a hysteresis tolerance.

Invariance: the rewards enter only through the standardised advantage, so for ``a > 0`` the map
``r -> a r + b`` leaves ``theta(t)`` unchanged exactly (KL included: it depends on ``theta`` only); hence
``p(t) -> a p(t) + b``, ``p* -> a p* + b``, ``p_ref -> a p_ref + b``, while ``lambda``, ``K = lambda / eta``, the
fixed-point policy and every regime label are unchanged. ``a < 0`` is not a symmetry (the policy then seeks the
lowest reward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from scipy.optimize import brentq

Refresh = Literal["sliding", "periodic"]
Gradient = Literal["importance_weighted", "stale"]
REFRESHES: tuple[str, ...] = ("sliding", "periodic")
GRADIENTS: tuple[str, ...] = ("importance_weighted", "stale")
REGIMES: tuple[str, ...] = ("monotone", "overshoot", "oscillatory", "collapsed")

_STD_FLOOR = 1e-300  # below this the advantage is the indeterminate 0/0 and is set to 0 (all rewards equal)


# ----------------------------------------------------------------------------------------------------------------
# Policy, advantage, objective and its gradient (single points or batches: the completion axis is the last one)
# ----------------------------------------------------------------------------------------------------------------
def as_rewards(rewards: Sequence[float] | np.ndarray) -> np.ndarray:
    """The reward vector as a 1-D float array with at least two completions and finite entries."""
    r = np.asarray(rewards, dtype=float)
    if r.ndim != 1 or r.size < 2 or not np.all(np.isfinite(r)):
        raise ValueError("rewards must be a 1-D finite vector with at least two completions")
    return r


def log_softmax(theta: np.ndarray) -> np.ndarray:
    """``log pi_theta`` along the last axis, stable for large ``|theta|``."""
    shifted = theta - theta.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(theta: np.ndarray) -> np.ndarray:
    """``pi_theta = softmax(theta)`` along the last axis."""
    return np.exp(log_softmax(theta))


def order_parameter(theta: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """``p(theta) = E_{pi_theta}[r]`` (Assumption 1)."""
    return softmax(theta) @ rewards


def advantage(pi: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """``A(o) = (r_o - E_pi[r]) / Std_pi[r]`` (Eq. 1 at ``G -> infinity``, population s.d.); 0 where Std = 0."""
    mean = (pi * rewards).sum(axis=-1, keepdims=True)
    centred = rewards - mean
    std = np.sqrt((pi * centred**2).sum(axis=-1, keepdims=True))
    safe = np.where(std > _STD_FLOOR, std, 1.0)
    return np.where(std > _STD_FLOOR, centred / safe, 0.0)


def kl_to_uniform(theta: np.ndarray) -> np.ndarray:
    """``KL(pi_theta || uniform) = sum_o pi log pi + log |O|``."""
    log_pi = log_softmax(theta)
    return (np.exp(log_pi) * log_pi).sum(axis=-1) + np.log(theta.shape[-1])


def objective(theta: np.ndarray, theta_old: np.ndarray, rewards: np.ndarray, beta: float) -> np.ndarray:
    """``J(theta; theta_old) = sum_o pi_theta(o) A_old(o) - beta KL(pi_theta || pi_ref)`` (Eq. 2, G -> infinity)."""
    a_old = advantage(softmax(theta_old), rewards)
    return (softmax(theta) * a_old).sum(axis=-1) - beta * kl_to_uniform(theta)


def _kl_gradient(pi: np.ndarray, log_pi: np.ndarray) -> np.ndarray:
    """``grad_theta KL(pi_theta || uniform) = pi (log pi - <log pi>_pi)``."""
    return pi * (log_pi - (pi * log_pi).sum(axis=-1, keepdims=True))


def _reward_gradient(pi: np.ndarray, pi_old: np.ndarray, a_old: np.ndarray, gradient: str) -> np.ndarray:
    weight = pi if gradient == "importance_weighted" else pi_old
    return weight * (a_old - (weight * a_old).sum(axis=-1, keepdims=True))


def objective_gradient(theta: np.ndarray, theta_old: np.ndarray, rewards: np.ndarray, beta: float,
                       gradient: Gradient = "importance_weighted") -> np.ndarray:
    """The ascent direction of the map (3): reward gradient (per ``gradient`` reading) minus ``beta`` KL gradient.

    For ``importance_weighted`` this is exactly ``grad_theta J(theta; theta_old)``; for ``stale`` the reward part is
    ``grad_theta J`` evaluated at ``theta = theta_old`` (Lemma 2), the KL part at ``theta``.
    """
    _check_choice("gradient", gradient, GRADIENTS)
    log_pi = log_softmax(theta)
    pi = np.exp(log_pi)
    pi_old = softmax(theta_old)
    a_old = advantage(pi_old, rewards)
    return _reward_gradient(pi, pi_old, a_old, gradient) - beta * _kl_gradient(pi, log_pi)


# ----------------------------------------------------------------------------------------------------------------
# The vectorised heavy-ball map
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BanditRun:
    """Trajectories of a grid of cells (leading axes = the broadcast shape of ``eta, mu, k_ref, beta``).

    ``p``: order parameter, shape ``(*grid, steps + 1)``; ``theta_final``: ``theta_steps``, shape ``(*grid, |O|)``;
    ``theta_spread``: ``max_o theta - min_o theta`` at the end (grows without bound under collapse).
    """

    p: np.ndarray
    theta_final: np.ndarray
    theta_spread: np.ndarray


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def run(rewards: Sequence[float] | np.ndarray, eta, mu, beta, k_ref, steps: int, refresh: Refresh = "sliding",
        gradient: Gradient = "importance_weighted", progress: bool = False) -> BanditRun:
    """Iterate the exact map (3) for every cell of the broadcast grid of ``eta, mu, beta, k_ref`` at once.

    A ring buffer of the last ``max(K_ref) + 1`` policies supplies each cell's sampling policy; one numpy pass per
    step updates every cell. See the module docstring for the model.
    """
    r = as_rewards(rewards)
    _check_choice("refresh", refresh, REFRESHES)
    _check_choice("gradient", gradient, GRADIENTS)
    steps = int(steps)
    if steps < 0:
        raise ValueError("steps must be >= 0")
    eta_b, mu_b, beta_b, kref_b = np.broadcast_arrays(np.asarray(eta, float), np.asarray(mu, float),
                                                      np.asarray(beta, float), np.asarray(k_ref))
    shape = eta_b.shape
    if not np.all(np.equal(np.mod(kref_b, 1), 0)):
        raise ValueError("k_ref must be integer-valued")
    kref = kref_b.astype(np.int64).ravel()
    min_kref = 0 if refresh == "sliding" else 1
    if kref.size and kref.min() < min_kref:
        raise ValueError(f"k_ref must be >= {min_kref} for refresh={refresh!r}")
    n_cells, n_out = kref.size, r.size

    # Layout: completions on axis 0, cells on axis 1, so that every reduction over completions is a few vector adds.
    ring = int(kref.max()) + 1 if n_cells else 1
    importance = gradient == "importance_weighted"
    r_col = r[:, None]
    eta_row, mu_row = eta_b.ravel()[None, :], mu_b.ravel()[None, :]
    eta_beta_row = (eta_b * beta_b).ravel()[None, :]
    theta = np.zeros((n_out, n_cells))
    theta_prev = np.zeros((n_out, n_cells))
    # the ring holds, per past step, what the reward gradient needs of the sampling policy:
    # A_old (importance_weighted) or pi_old * A_old (stale; its pi_old-mean is zero, Lemma 2)
    uniform_adv = advantage(np.full(n_out, 1.0 / n_out), r)
    initial_old = (uniform_adv if importance else uniform_adv / n_out)[:, None]
    history = np.empty((n_out, ring * n_cells))
    offsets = np.arange(n_cells)
    p_hist = np.empty((steps + 1, n_cells))
    iterator = range(steps)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc=f"bandit {refresh}/{gradient} ({n_cells} cells)", leave=False)
    kref_max = int(kref.max()) if n_cells else 0
    for k in iterator:
        shifted = theta - theta.max(axis=0)
        z = np.exp(shifted)
        total = z.sum(axis=0)
        pi = z / total
        log_pi = shifted - np.log(total)
        p_now = r @ pi
        p_hist[k] = p_now
        centred = r_col - p_now
        std = np.sqrt((pi * centred * centred).sum(axis=0))
        inv_std = np.divide(1.0, std, out=np.zeros_like(std), where=std > _STD_FLOOR)
        own = centred * inv_std
        if not importance:
            own *= pi
        slot = k % ring
        history[:, slot * n_cells:(slot + 1) * n_cells] = own
        # the sampling policy of every cell: sliding theta_{k - K_ref}, periodic theta_{K_ref floor(k / K_ref)}
        j = k - kref if refresh == "sliding" else k - k % kref
        old = history.take(np.mod(j, ring) * n_cells + offsets, axis=1)
        if k < kref_max or refresh == "periodic":
            use_initial = j <= 0
            if use_initial.any():
                old[:, use_initial] = initial_old
        if importance:
            g_reward = pi * (old - (pi * old).sum(axis=0))
        else:
            g_reward = old
        g_kl = pi * (log_pi - (pi * log_pi).sum(axis=0))
        theta_next = theta + eta_row * g_reward - eta_beta_row * g_kl + mu_row * (theta - theta_prev)
        theta_prev = theta
        theta = theta_next
    p_hist[steps] = r @ softmax(theta.T).T
    spread = theta.max(axis=0) - theta.min(axis=0)
    return BanditRun(p=p_hist.T.reshape(shape + (steps + 1,)), theta_final=theta.T.reshape(shape + (n_out,)),
                     theta_spread=spread.reshape(shape))


def simulate(rewards: Sequence[float] | np.ndarray, eta, mu, beta, k_ref, steps: int, refresh: Refresh = "sliding",
             gradient: Gradient = "importance_weighted") -> np.ndarray:
    """Order parameter ``p(t)``, ``t = 0..steps`` (``p(0) = p_ref``), of the exact map (3).

    ``eta``, ``mu``, ``beta`` and ``k_ref`` may be arrays: they are broadcast together and the whole grid is run in
    one vectorised pass; the result has shape ``(*broadcast_shape, steps + 1)``.
    """
    return run(rewards, eta, mu, beta, k_ref, steps, refresh=refresh, gradient=gradient).p


# ----------------------------------------------------------------------------------------------------------------
# Fixed points (exact) and the linearisation at them
# ----------------------------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------------------------
# Read-outs: the relaxation rate (paper's K) and the regime of a trajectory
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RelaxationFit:
    """Least-squares slope ``lambda`` of ``-log(p* - p(t))`` over the steps whose completed fraction
    ``(p - p_ref) / (p* - p_ref)`` lies in ``window``; ``stiffness = lambda / eta`` (the paper's ``K``)."""

    rate: float
    stiffness: float
    window: tuple[float, float]
    first_step: int
    last_step: int
    n_points: int


def relaxation_rate(p: np.ndarray, p_star: float, eta: float, window: tuple[float, float]) -> RelaxationFit:
    """Fit ``lambda`` as the slope of ``-log(p* - p(t))`` over the part of the approach given by ``window``.

    ``window = (lo, hi)`` in completed fraction of the relaxation, ``0 <= lo < hi < 1``: ``(0, 0.5)`` uses the steps
    from the start until half the distance to ``p*`` is covered. Only the first contiguous stretch counts.
    """
    p = np.asarray(p, float)
    lo, hi = float(window[0]), float(window[1])
    if not 0.0 <= lo < hi < 1.0:
        raise ValueError("window must satisfy 0 <= lo < hi < 1")
    gap0 = p_star - p[0]
    if gap0 == 0:
        raise ValueError("p(0) == p*: nothing relaxes")
    done = (p - p[0]) / gap0
    after_lo = np.nonzero(done >= lo - 1e-12)[0]
    first = int(after_lo[0]) if after_lo.size else 0
    beyond = np.nonzero(done[first:] > hi)[0]
    last = first + int(beyond[0]) if beyond.size else p.size - 1
    # include the point that crosses hi so short windows keep two points at least
    t = np.arange(first, last + 1)
    gap = np.abs(p_star - p[first:last + 1])
    keep = gap > 0
    t, y = t[keep], -np.log(gap[keep])
    if t.size < 2:
        raise ValueError("the fit window holds fewer than two points; widen it or lower eta")
    slope = float(np.polyfit(t, y, 1)[0])
    return RelaxationFit(rate=slope, stiffness=slope / eta, window=(lo, hi), first_step=int(t[0]),
                         last_step=int(t[-1]), n_points=int(t.size))


@dataclass(frozen=True)
class Regime:
    """Classification of one trajectory (see :func:`classify_regime`)."""

    label: str
    crossings: int
    overshoot: float
    settled: bool
    final_amplitude: float


def classify_regime(p: np.ndarray, p_star: float, tolerance: float = 0.01, collapse_tolerance: float = 0.01,
                    p_max: float | None = None, settle_fraction: float = 0.1) -> Regime:
    """Label a trajectory monotone / overshoot / oscillatory / collapsed.

    With ``u(t) = (p(t) - p*) / (p* - p(0))`` (so ``u(0) = -1``, target 0), a *crossing* is counted with hysteresis
    each time ``u`` passes from below ``-tolerance`` to above ``+tolerance`` or back (so ringing smaller than
    ``tolerance`` of the initial gap is ignored). ``collapsed``: the last value lies within ``collapse_tolerance``
    of the initial gap from ``p_max`` (the policy has concentrated on the best completions; only checked when
    ``p_max`` is given and ``p_max`` is not itself within the tolerance of ``p*``). Otherwise 0 crossings =
    ``monotone``, 1 = ``overshoot``, >= 2 = ``oscillatory``. ``settled``: over the last ``settle_fraction`` of the
    run ``|u| <= tolerance``; ``final_amplitude``: ``max |u|`` over that tail. ``overshoot``: ``max u`` (>= 0).
    """
    labels, crossings, overshoot, settled, amplitude = classify_many(
        np.asarray(p, float)[None, :], p_star, tolerance, collapse_tolerance, p_max, settle_fraction)
    return Regime(label=str(labels[0]), crossings=int(crossings[0]), overshoot=float(overshoot[0]),
                  settled=bool(settled[0]), final_amplitude=float(amplitude[0]))


def classify_many(p: np.ndarray, p_star: float, tolerance: float = 0.01, collapse_tolerance: float = 0.01,
                  p_max: float | None = None, settle_fraction: float = 0.1):
    """Vectorised :func:`classify_regime` over the leading axes of ``p`` (time is the last axis).

    Returns ``(labels, crossings, overshoot, settled, final_amplitude)``, each of shape ``p.shape[:-1]``.
    """
    p = np.asarray(p, float)
    lead = p.shape[:-1]
    flat = p.reshape(-1, p.shape[-1])
    gap0 = p_star - flat[:, :1]
    u = (flat - p_star) / np.where(gap0 == 0, 1.0, gap0)
    # hysteresis state machine: +1 above +tol, -1 below -tol, else keep previous state
    state = np.where(u > tolerance, 1, np.where(u < -tolerance, -1, 0)).astype(np.int8)
    # forward-fill zeros with the last nonzero state
    idx = np.where(state != 0, np.arange(state.shape[1]), 0)
    np.maximum.accumulate(idx, axis=1, out=idx)
    filled = np.take_along_axis(state, idx, axis=1)
    filled[:, 0] = -1  # the run starts below the target (u(0) = -1)
    crossings = (np.diff(filled, axis=1) != 0).sum(axis=1)
    tail = max(1, int(round(settle_fraction * flat.shape[1])))
    amplitude = np.abs(u[:, -tail:]).max(axis=1)
    settled = amplitude <= tolerance
    overshoot = np.maximum(u.max(axis=1), 0.0)
    labels = np.where(crossings == 0, "monotone", np.where(crossings == 1, "overshoot", "oscillatory")).astype(object)
    if p_max is not None:
        scale = np.abs(gap0[:, 0])
        near_top = np.abs(flat[:, -1] - p_max) <= collapse_tolerance * scale
        top_is_target = abs(p_max - p_star) <= collapse_tolerance * float(np.max(scale)) if scale.size else False
        if not top_is_target:
            labels = np.where(near_top, "collapsed", labels)
    return (labels.reshape(lead), crossings.reshape(lead), overshoot.reshape(lead), settled.reshape(lead),
            amplitude.reshape(lead))
