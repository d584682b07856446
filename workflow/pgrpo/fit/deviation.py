"""A run's own deviation from its mean trajectory (beyond the paper; the noise model of Theorem 7, Eq. 8, and
Prop. 10, Eq. 12): the white forcing ``sqrt(D/G) xi`` drives the order parameter around the mean trajectory as an
Ornstein-Uhlenbeck process ``e`` (stationary variance ``<e^2> = D / (2 G C_eff K_eff)``, correlation time of the
slow pole), and the log sees it through the batch's sampling noise ``eps`` (white):

    residual_i = e_i + eps_i,   e_i = a_i e_{i-1} + w_i,   a_i = exp(-(t_i - t_{i-1}) / tau),

``Var(e) = q s^2``, ``Var(eps) = (1 - q) s^2``. The scale ``s^2`` is profiled out of the Gaussian likelihood
(Kalman filter innovations); ``(tau, q)`` are averaged over a grid by Akaike weights, with white noise (``q = 0``,
no extra parameter) as one of the candidates. The forecast of the deviation ``h`` steps past the last point is
``e_hat exp(-h / tau)`` with variance ``P exp(-2h/tau) + q s^2 (1 - exp(-2h/tau))``: the deviation at the cut
persists for a correlation time, then returns to the mean trajectory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

_Q_GRID = (0.15, 0.3, 0.5, 0.7, 0.85, 0.95)


@dataclass(frozen=True)
class Deviation:
    """The fitted deviation model: grid weights and, per grid point, the filtered state at the last point."""

    taus: np.ndarray
    qs: np.ndarray
    weights: np.ndarray
    e_last: np.ndarray
    p_last: np.ndarray
    scale2: np.ndarray
    t_last: float

    @property
    def white_weight(self) -> float:
        return float(self.weights[self.qs == 0].sum())

    def forecast(self, steps: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per grid point (rows): the deviation's mean and variance at ``steps``, and the white-noise variance."""
        h = np.clip(np.asarray(steps, float) - self.t_last, 0.0, None)[None, :]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            decay = np.where(self.taus[:, None] > 0, np.exp(-h / np.where(self.taus[:, None] > 0,
                                                                           self.taus[:, None], 1.0)), 0.0)
        mean = self.e_last[:, None] * decay
        var = self.p_last[:, None] * decay**2 + (self.qs * self.scale2)[:, None] * (1.0 - decay**2)
        white = ((1.0 - self.qs) * self.scale2)[:, None] * np.ones_like(h)
        return mean, var, white

    def summary(self) -> dict[str, float]:
        i = int(np.argmax(self.weights))
        return {"tau": float(self.taus[i]), "q": float(self.qs[i]), "white_weight": self.white_weight,
                "deviation_at_cut": float(np.sum(self.weights * self.e_last))}


def _filter(t: np.ndarray, r: np.ndarray, tau: float, q: float) -> tuple[float, float, float, float]:
    """Kalman filter at unit scale: (log likelihood with the scale profiled, e_last, P_last, scale^2)."""
    n = r.size
    e, p = 0.0, q  # stationary start
    v2f, logf = 0.0, 0.0
    e_hist = p_hist = 0.0
    for i in range(n):
        if i > 0:
            a = math.exp(-(t[i] - t[i - 1]) / tau)
            e, p = a * e, a * a * p + q * (1.0 - a * a)
        f = p + (1.0 - q)
        v = r[i] - e
        v2f += v * v / f
        logf += math.log(f)
        gain = p / f
        e, p = e + gain * v, p * (1.0 - gain)
        e_hist, p_hist = e, p
    scale2 = v2f / n
    loglik = -0.5 * (n * math.log(max(scale2, 1e-300)) + logf)
    return loglik, e_hist, p_hist, scale2


def fit_deviation(t: Sequence[float], residual: Sequence[float], n_fitted: float = 0.0) -> Deviation:
    """The deviation model fitted to the residuals of the mean trajectory on the early window (``n_fitted``:
    parameters the mean already used, for the small-sample scale)."""
    t, r = np.asarray(t, float), np.asarray(residual, float)
    n = r.size
    span = float(t[-1] - t[0]) if n > 1 else 1.0
    spacing = float(np.median(np.diff(t))) if n > 1 else 1.0
    taus = [0.0]
    qs = [0.0]
    logliks = []
    e_last, p_last, scales = [0.0], [0.0], []
    white2 = float(np.mean(r**2)) if n else 0.0
    logliks.append(-0.5 * n * math.log(max(white2, 1e-300)))
    scales.append(white2)
    if n >= 6 and span > 0:
        for tau in np.geomspace(max(spacing, 1e-9), 3.0 * span, 8):
            for q in _Q_GRID:
                ll, e, p, s2 = _filter(t, r, float(tau), q)
                taus.append(float(tau))
                qs.append(q)
                logliks.append(ll)
                e_last.append(e * math.sqrt(1.0))
                p_last.append(p)
                scales.append(s2)
    taus_a, qs_a = np.array(taus), np.array(qs)
    ll = np.array(logliks)
    k = np.where(qs_a == 0, 0.0, 2.0)
    aic = -2.0 * ll + 2.0 * k
    weights = np.exp(-0.5 * (aic - aic.min()))
    weights /= weights.sum()
    scale2 = np.array(scales) * n / max(n - n_fitted, 1.0)
    e_last_a = np.array(e_last)
    p_last_a = np.array(p_last) * scale2
    return Deviation(taus_a, qs_a, weights, e_last_a, p_last_a, scale2, float(t[-1]) if n else 0.0)
