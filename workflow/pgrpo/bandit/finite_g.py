"""The softmax bandit at finite group size ``G``: a test of Proposition 10's ``1/G`` fluctuation law (Section 3.4).

:mod:`pgrpo.bandit` iterates the heavy-ball GRPO map (3) at ``G -> infinity``. Here every replica draws, at every step,
``G`` completions from its sampling policy ``pi_old`` (the exact simulator's ``theta_old``: ``sliding``
``theta_{k-K_ref}``, ``periodic`` ``theta_{K_ref floor(k/K_ref)}``, ``theta_0`` before that) and ascends a
Monte-Carlo estimate of Eq. 2, from rest (``theta_{-1} = theta_0``, default ``theta_0 = 0``, the uniform ``pi_ref``):

* Eq. 1 from the group alone, ``A_i = (r_i - mean r) / std r``, ``std`` the *unbiased* sample std (``ddof = 1``, as
  TRL's ``GRPOTrainer``, which calls ``torch.std``; TRL's extra ``+1e-4`` in the denominator is left out). A group
  whose rewards are all equal (zero spread, detected exactly from the reward levels drawn) contributes nothing;
* Eq. 2 ``importance_weighted``: ``(1/G) sum_i pi_theta(o_i)/pi_old(o_i) A_i (e_{o_i} - pi_theta)``; ``stale``
  (Lemma 2 at the sampling point): ``(1/G) sum_i A_i (e_{o_i} - pi_old)``; the KL gradient is exact, as in
  :mod:`pgrpo.bandit`; Eq. 3: ``theta_{k+1} = theta_k + eta (g - beta grad KL) + mu (theta_k - theta_{k-1})``.

The estimator depends on a group only through its multinomial counts ``c_o``, so one ``Generator.multinomial`` call
per step serves every replica. As ``G -> infinity``, ``c_o / G -> pi_old(o)``, the sample mean and std tend to the
population ones (the ``ddof`` factor ``sqrt(G/(G-1)) -> 1``) and the replica mean tends to
:func:`pgrpo.bandit.simulate`, with an ``O(1/G)`` bias and an ``O(G^-1/2)`` spread.

Read-outs: the forcing ``f_k = eta (g_hat - g_inf) . grad_theta p``, the change of ``p`` the sampling noise causes
in one step (``g_inf``: the ``G -> infinity`` gradient at the same state); with ``delta = 1`` the noise of Eq. 8 is
``f / eta``, so Lemma 6's ``D = G Var(f) / eta^2``, and ``E[f]`` is the finite-``G`` bias (it moves the stationary
mean). Prop. 10, Eq. 12 with the oscillator's constant: ``<e^2> = D / (2 G C_eff K_eff)``, ``C_eff, K_eff`` of Eq. 9
(:func:`pgrpo.theory.effective_coefficients`), beside the exact variance of the linear delayed heavy-ball map.
Section 5.3's ``sigma_adv`` (TRL's ``reward_std``: with one prompt a step, the group's ``ddof = 1`` std) and
zero-spread fraction (``frac_reward_zero_std``) with their pure-sampling values; the one-step bias and variance in
closed form (:func:`forcing_moments`). :func:`run_grid` and :func:`analyse_grid` do the whole study, with verdicts.

"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

from pgrpo.bandit.exact import GRADIENTS, REFRESHES, advantage, as_rewards, log_softmax, softmax

DEFAULT_REWARDS: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.666, 1.666)  # the calibration rewards


_MAX_COMPOSITIONS = 200_000


DIAGNOSTICS: tuple[str, ...] = ("sigma_adv", "zero_spread", "forcing", "forcing_sq")


# ---- One step: the Monte-Carlo estimator of Eq. 2 from the counts of a group ----
def _levels(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct reward values and the one-hot map completion -> level, shape ``(|O|, L)``."""
    values, index = np.unique(r, return_inverse=True)
    return values, np.eye(values.size)[index]


def _check(G: int, ddof: int, gradient: str, refresh: str | None = None) -> None:
    if gradient not in GRADIENTS or refresh not in (None, *REFRESHES):
        raise ValueError(f"gradient must be in {GRADIENTS}, refresh in {REFRESHES}")
    if ddof not in (0, 1) or int(G) != G or G < 2:
        raise ValueError(f"need ddof in (0, 1) and an integer G >= 2, got ddof={ddof!r}, G={G!r}")


def _group_advantage(m: np.ndarray, values: np.ndarray, G, ddof: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-level advantage (Eq. 1, sample std) and group std from level counts ``m``; both 0 at zero spread."""
    centred = values - ((m @ values) / G)[..., None]
    zero = m.max(axis=-1) == G
    sigma = np.where(zero, 0.0, np.sqrt((m * centred**2).sum(axis=-1) / (G - ddof)))
    inv = np.divide(1.0, sigma, out=np.zeros_like(sigma), where=~zero)
    return centred * inv[..., None], sigma


def sampled_gradient(log_pi: np.ndarray, log_pi_old: np.ndarray, counts: np.ndarray, rewards,
                     gradient: str = "importance_weighted", ddof: int = 1):
    """The reward part of ``grad J`` estimated from groups given by their ``counts`` (leading axes = groups).

    Returns ``(g, sigma, zero)``: the estimate (same shape as ``counts``), the group's reward std (``ddof``) and
    whether the group has zero spread (then ``g = 0``).
    """
    counts = np.asarray(counts)
    G = counts.sum(axis=-1)
    values, onehot = _levels(as_rewards(rewards))
    zero = (counts @ onehot).max(axis=-1) == G
    adv, sigma = _group_advantage(counts @ onehot, values, G, ddof)
    coef = counts * (adv @ onehot.T) / G[..., None]
    if gradient == "importance_weighted":
        ratio = np.exp(np.minimum(log_pi - log_pi_old, 700.0))
        coef = np.where(counts > 0, coef * ratio, 0.0)
        base = np.exp(log_pi)
    else:
        base = np.exp(log_pi_old)
    return coef - base * coef.sum(axis=-1, keepdims=True), sigma, zero


def _infinite_g_gradient(pi: np.ndarray, pi_old: np.ndarray, r: np.ndarray, gradient: str) -> np.ndarray:
    a_old = advantage(pi_old, r)
    weight = pi if gradient == "importance_weighted" else pi_old
    return weight * (a_old - (weight * a_old).sum(axis=-1, keepdims=True))


# ---- The vectorised simulator ----
@dataclass(frozen=True)
class FiniteGRun:
    """Trajectories and diagnostics of ``replicas`` independent finite-``G`` runs of one configuration.

    ``p``: ``(replicas, steps + 1)`` exact ``E_pi[r]`` of each replica; ``theta_final``: ``(replicas, |O|)``.
    ``per_step[name]``: replica means per step, shape ``(steps,)``; ``window[name]``: per replica, averaged over
    the steps ``k >= burn_in``, shape ``(replicas,)``; names :data:`DIAGNOSTICS`: the group's ``sigma_adv``, the
    zero-spread indicator, the forcing ``f_k`` and ``f_k^2``. ``pi_mean``: the policy averaged over the window.
    """

    p: np.ndarray
    theta_final: np.ndarray
    per_step: dict[str, np.ndarray]
    window: dict[str, np.ndarray]
    pi_mean: np.ndarray
    G: int
    eta: float
    burn_in: int
    state: "FiniteGState | None" = None


@dataclass(frozen=True)
class FiniteGState:
    """Where the replicas stand after ``k`` steps: ``theta_k``, ``theta_{k-1}`` (the heavy ball's memory), the ring of
    past log-policies the sliding reference reads (``ring[j % len]`` holds step ``j``'s) and the periodic refresh's
    current reference; :func:`run_finite_g` continues from it exactly as if it had never stopped."""

    k: int
    theta: np.ndarray
    theta_prev: np.ndarray
    ring: np.ndarray
    log_old: np.ndarray

    def replica(self, index: int, copies: int) -> "FiniteGState":
        """Replica ``index``'s state, ``copies`` times (to continue it along independent futures)."""
        def pick(a: np.ndarray, axis: int) -> np.ndarray:
            one = np.take(a, [index], axis=axis)
            return np.repeat(one, copies, axis=axis)

        return FiniteGState(self.k, pick(self.theta, 0), pick(self.theta_prev, 0), pick(self.ring, 1),
                            pick(self.log_old, 0))


def _initial_theta(theta0, replicas: int, n: int) -> np.ndarray:
    t = np.zeros(n) if theta0 is None else np.asarray(theta0, float)
    if t.shape not in ((n,), (replicas, n)) or not np.all(np.isfinite(t)):
        raise ValueError(f"theta0 must be finite with shape ({n},) or ({replicas}, {n})")
    return np.broadcast_to(t, (replicas, n)).copy()


def run_finite_g(rewards, eta: float, mu: float, beta: float, k_ref: int, steps: int, G: int, replicas: int,
                 seed=0, refresh: str = "sliding", gradient: str = "importance_weighted", ddof: int = 1,
                 theta0=None, burn_in: int = 0, diagnostics: bool = True,
                 state0: FiniteGState | None = None) -> FiniteGRun:
    """Iterate the finite-``G`` map for ``replicas`` independent replicas at once, with the diagnostics.

    ``seed``: anything :func:`numpy.random.default_rng` accepts (same seed, same result). ``theta0``: the start,
    ``(|O|,)`` or ``(replicas, |O|)`` (default ``0``), always from rest. ``burn_in``: first step of the window.
    ``state0``: continue from a run's :class:`FiniteGState` instead (its ``replicas``; ``p[:, 0]`` is at its step);
    the run's own ``state`` is where it ends.
    """
    r = as_rewards(rewards)
    _check(G, ddof, gradient, refresh)
    steps, replicas, k_ref, G = int(steps), int(replicas), int(k_ref), int(G)
    if steps < 0 or replicas < 1 or not 0 <= burn_in <= steps:
        raise ValueError("need steps >= 0, replicas >= 1 and 0 <= burn_in <= steps")
    if k_ref < (0 if refresh == "sliding" else 1):
        raise ValueError(f"k_ref must be >= {0 if refresh == 'sliding' else 1} for refresh={refresh!r}")
    rng = np.random.default_rng(seed)
    n = r.size
    ring_size = k_ref + 1 if refresh == "sliding" else 1
    if state0 is None:
        k0 = 0
        theta = _initial_theta(theta0, replicas, n)
        theta_prev = theta.copy()
        ring = np.empty((ring_size, replicas, n))
        log_old = np.zeros((replicas, n))
    else:
        if state0.theta.shape != (replicas, n) or state0.ring.shape != (ring_size, replicas, n):
            raise ValueError(f"state0 is of {state0.theta.shape[0]} replicas of {state0.theta.shape[1]} arms with a "
                             f"ring of {state0.ring.shape[0]}: not of this run")
        k0, theta, theta_prev = int(state0.k), state0.theta.copy(), state0.theta_prev.copy()
        ring, log_old = state0.ring.copy(), state0.log_old.copy()
    p = np.empty((replicas, steps + 1))
    per_step = np.zeros((4, steps))
    window = np.zeros((4, replicas))
    pi_sum = np.zeros(n)
    for j in range(steps):
        k = k0 + j
        log_pi = log_softmax(theta)
        pi = np.exp(log_pi)
        p[:, j] = p_now = pi @ r
        if refresh == "sliding":
            ring[k % ring.shape[0]] = log_pi
            log_old = ring[max(k - k_ref, 0) % ring.shape[0]]
        elif k % k_ref == 0:
            log_old = log_pi
        pi_old = np.exp(log_old)
        g, sigma, zero = sampled_gradient(log_pi, log_old, rng.multinomial(G, pi_old), r, gradient, ddof)
        if diagnostics:
            g_inf = _infinite_g_gradient(pi, pi_old, r, gradient)
            f = eta * ((g - g_inf) * (pi * (r - p_now[:, None]))).sum(axis=1)
            rows = (sigma, zero.astype(float), f, f * f)
            for i, row in enumerate(rows):
                per_step[i, j] = row.mean()
                if j >= burn_in:
                    window[i] += row
            if j >= burn_in:
                pi_sum += pi.sum(axis=0)
        g_kl = pi * (log_pi - (pi * log_pi).sum(axis=1, keepdims=True))
        theta_prev, theta = theta, theta + eta * (g - beta * g_kl) + mu * (theta - theta_prev)
    p[:, steps] = softmax(theta) @ r
    n_window = max(steps - burn_in, 1)
    window /= n_window
    return FiniteGRun(p=p, theta_final=theta, per_step=dict(zip(DIAGNOSTICS, per_step)),
                      window=dict(zip(DIAGNOSTICS, window)), pi_mean=pi_sum / (n_window * replicas),
                      G=G, eta=float(eta), burn_in=int(burn_in),
                      state=FiniteGState(k0 + steps, theta, theta_prev, ring, log_old))


def simulate_finite_g(rewards, eta: float, mu: float, beta: float, k_ref: int, steps: int, G: int, replicas: int,
                      seed=0, refresh: str = "sliding", gradient: str = "importance_weighted", ddof: int = 1,
                      theta0=None) -> np.ndarray:
    """``p`` of shape ``(replicas, steps + 1)``: the finite-``G`` map without diagnostics (see :func:`run_finite_g`)."""
    return run_finite_g(rewards, eta, mu, beta, k_ref, steps, G, replicas, seed, refresh, gradient, ddof, theta0,
                        diagnostics=False).p


def simulate_finite_g_loop(rewards, eta: float, mu: float, beta: float, k_ref: int, steps: int, G: int,
                           replicas: int, seed=0, refresh: str = "sliding", gradient: str = "importance_weighted",
                           ddof: int = 1, theta0=None) -> np.ndarray:
    """Reference implementation: a plain loop over replicas, the estimator written over the ``G`` samples.

    Same random stream as :func:`simulate_finite_g` (steps outer, replicas inner, one ``multinomial`` per group,
    drawn exactly as the vectorised call draws it); the group is expanded into ``o_1..o_G`` and Eq. 1-2 are
    evaluated literally (``numpy.std(ddof=...)``, the ratio as a quotient). ``pi`` is computed as in the vectorised
    path: numpy's binomial treats ``p`` and ``1 - p`` differently, so one ulp at ``p = 1/2`` changes a draw.
    """
    r = as_rewards(rewards)
    _check(G, ddof, gradient, refresh)
    rng = np.random.default_rng(seed)
    n = r.size
    start = _initial_theta(theta0, replicas, n)
    history = [deque([start[i].copy()], maxlen=k_ref + 2) for i in range(replicas)]
    old = [start[i].copy() for i in range(replicas)]
    p = np.empty((replicas, steps + 1))
    eye = np.eye(n)

    def policy(t):  # bit-identical to the vectorised path, so that multinomial sees the same pvals
        return np.exp(log_softmax(t))

    for k in range(steps):
        for i in range(replicas):
            theta = history[i][-1]
            pi = policy(theta)
            p[i, k] = pi @ r
            if refresh == "sliding":
                old[i] = history[i][-1 - min(k, k_ref)]
            elif k % k_ref == 0:
                old[i] = theta
            pi_old = policy(old[i])
            samples = np.repeat(np.arange(n), rng.multinomial(G, pi_old))
            sampled = r[samples]
            grad = np.zeros(n)
            if len(set(sampled.tolist())) > 1:
                adv = (sampled - sampled.mean()) / sampled.std(ddof=ddof)
                for o, a in zip(samples, adv):
                    if gradient == "importance_weighted":
                        grad += pi[o] / pi_old[o] * a * (eye[o] - pi) / G
                    else:
                        grad += a * (eye[o] - pi_old) / G
            kl = pi * (np.log(pi) - pi @ np.log(pi))
            previous = history[i][-2] if len(history[i]) > 1 else theta  # from rest
            history[i].append(theta + eta * (grad - beta * kl) + mu * (theta - previous))
    for i in range(replicas):
        p[i, steps] = policy(history[i][-1]) @ r
    return p


# ---- Closed forms: sampling statistics of a group and the one-step forcing's bias and variance ----
def _compositions(G: int, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All ways ``m`` (shape ``(N, L)``) that ``G`` draws fall on ``L`` levels, and their multinomial pmf."""
    L = probs.size
    n_comp = math.comb(G + L - 1, L - 1)
    if n_comp > _MAX_COMPOSITIONS:
        raise ValueError(f"{n_comp} level compositions: too many distinct rewards for the closed form")
    bars = np.array(list(itertools.combinations(range(G + L - 1), L - 1)), dtype=int).reshape(n_comp, L - 1)
    edges = np.hstack([np.full((n_comp, 1), -1), bars, np.full((n_comp, 1), G + L - 1)])
    m = np.diff(edges, axis=1) - 1
    with np.errstate(divide="ignore"):
        log_p = np.where(m > 0, m * np.log(probs), 0.0).sum(axis=1)
    log_pmf = special.gammaln(G + 1) - special.gammaln(m + 1).sum(axis=1) + log_p
    return m, np.exp(log_pmf)


@dataclass(frozen=True)
class ForcingMoments:
    """Exact moments over the group of ``y = g_hat . grad p`` (per unit ``eta``, ``f = eta (y - y_inf)``):
    ``bias = E[y] - y_inf``, ``variance = Var[y]``, ``D = G variance`` (Lemma 6's ``D`` at this state); and the
    pure-sampling ``E[sigma_adv]`` and ``P(zero spread)`` of a group drawn from ``pi_old``."""

    G: int
    bias: float
    variance: float
    D: float
    sigma_adv: float
    zero_spread: float


def forcing_moments(theta, theta_old, rewards, G: int, gradient: str = "importance_weighted",
                    ddof: int = 1) -> ForcingMoments:
    """Closed-form moments of the projected one-step estimator at ``(theta, theta_old)``: given how many draws land
    on each reward level (``m``, multinomial) the advantages are fixed and the draws within a level multinomial, so
    ``E[y|m]`` and ``Var[y|m]`` are closed forms; the sum over all ``m`` gives the exact moments."""
    r = as_rewards(rewards)
    _check(G, ddof, gradient)
    theta, theta_old = np.asarray(theta, float), np.asarray(theta_old, float)
    pi, pi_old = softmax(theta), softmax(theta_old)
    v = pi * (r - pi @ r)
    if gradient == "importance_weighted":
        b = pi / pi_old * (v - pi @ v)
    else:
        b = v - pi_old @ v
    values, onehot = _levels(r)
    level_p = pi_old @ onehot
    q = pi_old[:, None] * onehot / np.where(level_p > 0, level_p, 1.0)
    mu_l, second_l = b @ q, (b * b) @ q
    nu_l = second_l - mu_l**2
    m, pmf = _compositions(int(G), level_p)
    adv, sigma = _group_advantage(m, values, int(G), ddof)
    cond_mean = (adv * m * mu_l).sum(axis=1) / G
    cond_var = (adv**2 * m * nu_l).sum(axis=1) / G**2
    mean = float(pmf @ cond_mean)
    variance = float(pmf @ (cond_var + cond_mean**2) - mean**2)
    y_inf = float(_infinite_g_gradient(pi, pi_old, r, gradient) @ v)
    return ForcingMoments(G=int(G), bias=mean - y_inf, variance=variance, D=int(G) * variance,
                          sigma_adv=float(pmf @ sigma), zero_spread=float(pmf @ (m.max(axis=1) == G)))


def linear_map_variance(eta: float, mu: float, K: float, k_ref: int, forcing_var: float) -> float:
    """Stationary ``Var(e)`` of ``e_{k+1} = e_k - eta K e_{k-K_ref} + mu (e_k - e_{k-1}) + f_k``, ``Var f =
    forcing_var`` white (discrete Lyapunov equation of the companion form); ``inf`` when the map is unstable."""
    d = max(int(k_ref), 1) + 1
    a = np.zeros((d, d))
    a[0, 0], a[0, 1] = 1 + mu, -mu
    a[0, int(k_ref)] -= eta * K
    a[1:, :-1] = np.eye(d - 1)
    if np.max(np.abs(np.linalg.eigvals(a))) >= 1:
        return float("inf")
    q = np.zeros((d, d))
    q[0, 0] = forcing_var
    return float(linalg.solve_discrete_lyapunov(a, q)[0, 0])
