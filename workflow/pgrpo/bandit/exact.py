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

Refresh = Literal["sliding", "periodic"]


Gradient = Literal["importance_weighted", "stale"]


REFRESHES: tuple[str, ...] = ("sliding", "periodic")


GRADIENTS: tuple[str, ...] = ("importance_weighted", "stale")


STD_FLOOR = 1e-300  # below this the advantage is the indeterminate 0/0 and is set to 0 (all rewards equal)


# Policy, advantage, objective and its gradient (single points or batches: the completion axis is the last one)
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
    safe = np.where(std > STD_FLOOR, std, 1.0)
    return np.where(std > STD_FLOOR, centred / safe, 0.0)


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
    check_choice("gradient", gradient, GRADIENTS)
    log_pi = log_softmax(theta)
    pi = np.exp(log_pi)
    pi_old = softmax(theta_old)
    a_old = advantage(pi_old, rewards)
    return _reward_gradient(pi, pi_old, a_old, gradient) - beta * _kl_gradient(pi, log_pi)


# The vectorised heavy-ball map
@dataclass(frozen=True)
class BanditRun:
    """Trajectories of a grid of cells (leading axes = the broadcast shape of ``eta, mu, k_ref, beta``).

    ``p``: order parameter, shape ``(*grid, steps + 1)``; ``theta_final``: ``theta_steps``, shape ``(*grid, |O|)``;
    ``theta_spread``: ``max_o theta - min_o theta`` at the end (grows without bound under collapse).
    """

    p: np.ndarray
    theta_final: np.ndarray
    theta_spread: np.ndarray


def check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def _reward_classes(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Completions of equal reward as classes: ``(reward per class, class of each completion, class sizes)``.

    From ``theta_0 = 0`` the map treats completions of equal reward identically, so their ``theta`` stay equal for
    ever: the grid is iterated on one ``theta`` per class, each completion's policy ``pi_c / m_c`` (exact lumping).
    """
    values, inverse, counts = np.unique(r, return_inverse=True, return_counts=True)
    return values, inverse.ravel(), counts.astype(float)


def run(rewards: Sequence[float] | np.ndarray, eta, mu, beta, k_ref, steps: int, refresh: Refresh = "sliding",
        gradient: Gradient = "importance_weighted", progress: bool = False) -> BanditRun:
    """Iterate the exact map (3) for every cell of the broadcast grid of ``eta, mu, beta, k_ref`` at once.

    One numpy pass per step updates every cell, in place, in float64. Three identities keep that pass short
    (all exact; only the rounding differs from Eq. 3 written term by term, see the tests):

    * completions of equal reward are lumped into classes (:func:`_reward_classes`);
    * the ascent direction of both readings is ``w (h - <h>_pi)`` with ``w`` the per-completion policy and the KL
      part ``h = -beta theta`` (``log pi`` less a constant, which the centring removes);
    * ``A_old - <A_old>_pi = (r - p(theta)) / Std_old[r]``: the importance-weighted reading needs of the sampling
      policy only ``1 / Std_old[r]`` per cell, so its ring buffer of past policies holds one number per cell and
      step; the stale reading keeps ``pi_old A_old`` per class (its ``pi_old``-mean is zero, Lemma 2).
    """
    r = as_rewards(rewards)
    check_choice("refresh", refresh, REFRESHES)
    check_choice("gradient", gradient, GRADIENTS)
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
    n_cells = kref.size
    values, inverse, sizes = _reward_classes(r)
    n_cls = values.size

    # Layout: classes on axis 0, cells on axis 1 (reductions over classes are a few vector adds or a matmul).
    ring = int(kref.max()) + 1 if n_cells else 1
    importance = gradient == "importance_weighted"
    r_col = values[:, None]
    sized_r = sizes * values
    eta_row, mu_row = eta_b.ravel()[None, :], mu_b.ravel()[None, :]
    eta_beta_row = (eta_b * beta_b).ravel()[None, :]
    # the ring holds, per past step and cell, what the reward gradient needs of the sampling policy, times eta:
    # eta / Std_old[r] (importance_weighted) or eta pi_old A_old per class (stale); theta_0's (the uniform policy's)
    # fills it, so a cell reads theta_0 until its first refresh without a test
    uniform_adv = advantage(np.full(r.size, 1.0 / r.size), r)
    uniform_std = float(np.sqrt(np.mean((r - r.mean()) ** 2)))
    if importance:
        initial_old = np.full((1, 1), 1.0 / uniform_std if uniform_std > STD_FLOOR else 0.0)
    else:
        initial_old = np.zeros((n_cls, 1))
        initial_old[inverse, 0] = uniform_adv / r.size
    history = np.empty((initial_old.shape[0], ring, n_cells))
    history[:] = (initial_old * eta_row)[:, None, :]
    history = history.reshape(initial_old.shape[0], ring * n_cells)
    offsets = np.arange(n_cells, dtype=np.int64)
    if refresh == "sliding":  # the flat ring index of theta_{k - K_ref} depends on k only through k mod ring
        sliding_index = np.mod(offsets[None, :] + (np.arange(ring)[:, None] - kref[None, :]) * n_cells,
                               ring * n_cells)

    theta = np.zeros((n_cls, n_cells))
    spare = np.zeros((n_cls, n_cells))  # theta_{k-1}, then theta_{k+1} (swapped with theta every step)
    w = np.empty((n_cls, n_cells))  # per-completion policy pi_theta(o) of each class
    centred = np.empty((n_cls, n_cells))
    w_centred = np.empty((n_cls, n_cells))
    moments = np.empty((2, n_cls, n_cells))  # w theta and w (r - p)^2: <theta>_pi and Var_pi[r] in one matmul
    w_theta, w_square = moments
    ascent = np.empty((n_cls, n_cells))
    p_hist = np.empty((steps + 1, n_cells))
    # the per-cell constants spread over the class axis (same-shape operations are the fastest numpy has)
    mu_full = np.ascontiguousarray(np.broadcast_to(mu_row, (n_cls, n_cells)))
    eta_beta_full = np.ascontiguousarray(np.broadcast_to(eta_beta_row, (n_cls, n_cells)))
    iterator = range(steps)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc=f"bandit {refresh}/{gradient} ({n_cells} cells)", leave=False)
    with np.errstate(over="ignore", divide="ignore"):  # exp past ~709 is caught below; 1/0 is set to 0
        for k in iterator:
            # sum_o theta_o stays 0 (every step's ascent sums to 0 over completions), so max theta >= 0 and the sum
            # of exp(theta) is >= 1; exp(theta) overflows only when theta passes ~709, then theta - max theta is used
            np.exp(theta, out=w)
            total = sizes @ w
            if not np.isfinite(total.max()):
                np.subtract(theta, theta.max(axis=0), out=w)
                np.exp(w, out=w)
                total = sizes @ w
            np.divide(w, total, out=w)
            p_now = np.matmul(sized_r, w, out=p_hist[k])
            np.subtract(r_col, p_now, out=centred)
            np.multiply(w, centred, out=w_centred)
            np.multiply(w, theta, out=w_theta)
            np.multiply(w_centred, centred, out=w_square)
            # Std_pi[r] > STD_FLOOR exactly where its square is > 0 (the smallest positive float64 is ~5e-324)
            mean_theta, variance = sizes @ moments
            slot = slice((k % ring) * n_cells, (k % ring + 1) * n_cells)
            if k:  # (step 0 is theta_0, already in the ring)
                scale = np.divide(eta_row[0], np.sqrt(variance))
                if not variance.all():
                    scale[variance == 0.0] = 0.0
                if importance:
                    history[0, slot] = scale
                else:
                    np.multiply(w_centred, scale, out=history[:, slot])
            # the sampling policy of every cell: sliding theta_{k - K_ref}, periodic theta_{K_ref floor(k / K_ref)}
            if refresh == "sliding":
                index = sliding_index[k % ring]
            else:
                index = np.mod(k - k % kref, ring) * n_cells + offsets
            if importance:
                np.multiply(w_centred, history[0].take(index), out=ascent)
            else:
                history.take(index, axis=1, out=ascent)
            # minus eta beta times the KL gradient, w (theta - <theta>_pi)
            np.subtract(theta, mean_theta, out=centred)
            centred *= w
            centred *= eta_beta_full
            ascent -= centred
            # heavy ball: theta_{k+1} = theta_k + ascent + mu (theta_k - theta_{k-1}), written into theta_{k-1}'s array
            np.subtract(theta, spare, out=spare)
            spare *= mu_full
            spare += ascent
            spare += theta
            theta, spare = spare, theta
    theta_full = theta[inverse]
    p_hist[steps] = r @ softmax(theta_full.T).T
    spread = theta.max(axis=0) - theta.min(axis=0)
    return BanditRun(p=p_hist.T.reshape(shape + (steps + 1,)), theta_final=theta_full.T.reshape(shape + (r.size,)),
                     theta_spread=spread.reshape(shape))


def simulate(rewards: Sequence[float] | np.ndarray, eta, mu, beta, k_ref, steps: int, refresh: Refresh = "sliding",
             gradient: Gradient = "importance_weighted") -> np.ndarray:
    """Order parameter ``p(t)``, ``t = 0..steps`` (``p(0) = p_ref``), of the exact map (3).

    ``eta``, ``mu``, ``beta`` and ``k_ref`` may be arrays: they are broadcast together and the whole grid is run in
    one vectorised pass; the result has shape ``(*broadcast_shape, steps + 1)``.
    """
    return run(rewards, eta, mu, beta, k_ref, steps, refresh=refresh, gradient=gradient).p
