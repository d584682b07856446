"""The forecasts a user would make instead of the theory (beyond the paper), each fitted to the first steps of a
run by least squares and extrapolated, with a Gaussian interval (noise s.d. of the fit plus the delta-method s.e.
of the curve):

- ``persistence``: the mean of the last 10% of the early window carried forward;
- ``exponential``: the single-pole saturation law of Corollary 13, Eq. 14, ``R_inf - (R_inf - R0) e^{-lambda t}``;
- ``sigmoid``: ScaleRL's sigmoid in steps, ``R0 + (A - R0) / (1 + (t_mid / t)^B)`` (Khatri et al. 2025);
- ``power_law``: ``a + b t^c`` with ``0 < c <= 1`` (a rise or fall that never saturates);
- ``domhan``: the parametric learning-curve ensemble of Domhan et al. (2015): MMF
  ``alpha - (alpha - beta) / (1 + (kappa t)^delta)``, pow3 ``c - a t^{-alpha}``, Janoschek
  ``alpha - (alpha - beta) e^{-kappa t^delta}`` and Weibull ``alpha - (alpha - beta) e^{-(kappa t)^delta}``, each
  fitted by least squares and combined with non-negative weights fitted by least squares on the same window.

No baseline knows the reward's range, the optimizer or the batch: they are fitted as a user fits a curve.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy.optimize import least_squares, nnls

from pgrpo.fit.intervals import PLATEAU_SHARE, gaussian_intervals, robust_noise_sd

BASELINES: tuple[str, ...] = ("persistence", "exponential", "sigmoid", "power_law", "domhan")


@dataclass
class Predictive:
    """A forecast of the logged values at ``steps`` (after the cut): the mean, central intervals ``lo80 .. hi95``
    (for the logged value, noise included), draws of the mean curve (``mean_draws``, for plateau and t90 bands) and
    of the logged value (``value_draws``, for the CRPS); ``fitted``: the mean at the early steps; ``details``: the law
    or mixture and its parameters."""

    method: str
    steps: np.ndarray
    mean: np.ndarray
    intervals: dict[str, np.ndarray]
    mean_draws: np.ndarray
    value_draws: np.ndarray
    fitted: np.ndarray
    noise_sd: float
    success: bool = True
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


# ---- parametric families: (names, curve(t, *p), start points(t, y), lower, upper) --------------------------------


@dataclass(frozen=True)
class Family:
    name: str
    equation: str
    params: tuple[str, ...]
    curve: Callable[..., np.ndarray]
    starts: Callable[[np.ndarray, np.ndarray], list[list[float]]]
    lower: tuple[float, ...]
    upper: tuple[float, ...]


def _lvl(y: np.ndarray) -> tuple[float, float, float]:
    q = max(1, y.size // 5)
    first, last = float(np.mean(y[:q])), float(np.mean(y[-q:]))
    spread = float(np.ptp(y)) or 1.0
    return first, last, spread


def _exp_starts(t, y):
    first, last, spread = _lvl(y)
    span = float(t[-1]) or 1.0
    return [[first, last + s * (last - first), r / span] for s in (0.0, 0.5, 2.0) for r in (0.5, 2.0, 8.0)]


def _sigmoid_starts(t, y):
    first, last, spread = _lvl(y)
    span = float(t[-1]) or 1.0
    return [[first, last + s * (last - first), m * span, b] for s in (0.0, 1.0) for m in (0.3, 1.0, 3.0)
            for b in (1.0, 3.0)]


def _power_starts(t, y):
    first, last, spread = _lvl(y)
    span = float(t[-1]) or 1.0
    out = []
    for c in (0.25, 0.5, 1.0):
        b = (last - first) / (span**c - float(t[0]) ** c) if span**c != float(t[0]) ** c else 0.0
        out.append([first - b * float(t[0]) ** c, b, c])
    return out


def _mmf_starts(t, y):
    first, last, spread = _lvl(y)
    span = float(t[-1]) or 1.0
    return [[last + s * (last - first), first, k / span, d] for s in (0.0, 1.0) for k in (1.0, 4.0) for d in (1.0, 2.0)]


def _pow3_starts(t, y):
    first, last, spread = _lvl(y)
    t0 = max(float(t[0]), 1.0)
    return [[last + s * (last - first), (last - first) * t0**a if last != first else spread, a]
            for s in (0.0, 1.0) for a in (0.3, 1.0)]


def _weibull_starts(t, y):
    return _mmf_starts(t, y)


def _janoschek_starts(t, y):
    first, last, spread = _lvl(y)
    span = float(t[-1]) or 1.0
    return [[last + s * (last - first), first, (k / span) ** d, d] for s in (0.0, 1.0) for k in (1.0, 4.0)
            for d in (1.0, 2.0)]


def _pos_power(t: np.ndarray, x: float) -> np.ndarray:
    return np.power(np.maximum(np.asarray(t, float), 1e-12), x)


INF = math.inf
FAMILIES: dict[str, Family] = {
    "exponential": Family("exponential", "R_inf - (R_inf - R0) exp(-lambda t)  (Eq. 14)", ("R0", "R_inf", "lambda"),
                          lambda t, r0, ri, lam: ri - (ri - r0) * np.exp(-lam * t), _exp_starts,
                          (-INF, -INF, 0.0), (INF, INF, INF)),
    "sigmoid": Family("sigmoid", "R0 + (A - R0) / (1 + (t_mid / t)^B)  (ScaleRL, in steps)", ("R0", "A", "t_mid", "B"),
                      lambda t, r0, a, tm, b: r0 + (a - r0) / (1.0 + _pos_power(tm / np.maximum(t, 1e-12), b)),
                      _sigmoid_starts, (-INF, -INF, 1e-9, 0.05), (INF, INF, INF, 20.0)),
    "power_law": Family("power_law", "a + b t^c, 0 < c <= 1", ("a", "b", "c"),
                        lambda t, a, b, c: a + b * _pos_power(t, c), _power_starts, (-INF, -INF, 1e-3), (INF, INF, 1.0)),
    "mmf": Family("mmf", "alpha - (alpha - beta) / (1 + (kappa t)^delta)", ("alpha", "beta", "kappa", "delta"),
                  lambda t, a, b, k, d: a - (a - b) / (1.0 + _pos_power(k * t, d)), _mmf_starts,
                  (-INF, -INF, 1e-12, 0.05), (INF, INF, INF, 20.0)),
    "pow3": Family("pow3", "c - a t^(-alpha)", ("c", "a", "alpha"),
                   lambda t, c, a, al: c - a * _pos_power(t, -al), _pow3_starts, (-INF, -INF, 1e-3), (INF, INF, 10.0)),
    "janoschek": Family("janoschek", "alpha - (alpha - beta) exp(-kappa t^delta)", ("alpha", "beta", "kappa", "delta"),
                        lambda t, a, b, k, d: a - (a - b) * np.exp(-k * _pos_power(t, d)), _janoschek_starts,
                        (-INF, -INF, 1e-12, 0.05), (INF, INF, INF, 20.0)),
    "weibull": Family("weibull", "alpha - (alpha - beta) exp(-(kappa t)^delta)", ("alpha", "beta", "kappa", "delta"),
                      lambda t, a, b, k, d: a - (a - b) * np.exp(-_pos_power(k * t, d)), _weibull_starts,
                      (-INF, -INF, 1e-12, 0.05), (INF, INF, INF, 20.0)),
}


DOMHAN_FAMILIES: tuple[str, ...] = ("mmf", "pow3", "janoschek", "weibull")


#: local fits per family (from the start points with the lowest initial RSS) and their evaluation budget
N_STARTS, MAX_NFEV = 3, 150


@dataclass
class FamilyFit:
    """One family fitted on rescaled coordinates ``(t / t_scale, (y - y_mean) / y_scale)``; ``params`` are in those
    coordinates (rates per ``t_scale`` steps)."""

    family: str
    params: np.ndarray
    covariance: np.ndarray | None
    rss: float
    n: int
    success: bool
    t_scale: float = 1.0
    y_mean: float = 0.0
    y_scale: float = 1.0

    def predict(self, t: np.ndarray) -> np.ndarray:
        ts = np.asarray(t, float) / self.t_scale
        return self.y_mean + self.y_scale * FAMILIES[self.family].curve(ts, *self.params)

    def mean_sd(self, t: np.ndarray) -> np.ndarray:
        """Delta-method s.e. of the fitted curve at ``t`` (0 where the covariance is unknown)."""
        ts = np.asarray(t, float) / self.t_scale
        if self.covariance is None:
            return np.zeros(ts.size)
        f = FAMILIES[self.family].curve
        jac = np.empty((ts.size, self.params.size))
        with np.errstate(all="ignore"):
            for j in range(self.params.size):
                h = 1e-6 * max(1.0, abs(self.params[j]))
                up, down = self.params.copy(), self.params.copy()
                up[j] += h
                down[j] -= h
                jac[:, j] = (f(ts, *up) - f(ts, *down)) / (2 * h)
            var = np.einsum("ij,jk,ik->i", jac, self.covariance, jac)
        return self.y_scale * np.sqrt(np.clip(np.nan_to_num(var, nan=0.0, posinf=0.0), 0.0, None))


def fit_family(name: str, t: Sequence[float], y: Sequence[float]) -> FamilyFit:
    """Least squares of one family (trust-region reflective from several start points) on time rescaled to the
    window's last step and the reward to zero mean, unit s.d.; the covariance is ``s^2 (J^T J)^-1``."""
    family = FAMILIES[name]
    t, y = np.asarray(t, float), np.asarray(y, float)
    k = len(family.params)
    t_scale = float(np.max(np.abs(t))) if t.size else 1.0
    t_scale = t_scale or 1.0
    y_mean, y_scale = (float(np.mean(y)), float(np.std(y))) if y.size else (0.0, 1.0)
    y_scale = y_scale or 1.0
    if t.size <= k:
        return FamilyFit(name, np.full(k, np.nan), None, float("nan"), int(t.size), False)
    ts, ys = t / t_scale, (y - y_mean) / y_scale
    best = None
    lower, upper = np.array(family.lower), np.array(family.upper)
    starts = []
    for start in family.starts(ts, ys):
        p0 = np.clip(np.asarray(start, float), lower + 1e-12, np.where(np.isfinite(upper), upper - 1e-12, upper))
        with np.errstate(all="ignore"):
            r = family.curve(ts, *p0) - ys
        if np.all(np.isfinite(r)):
            starts.append((float(r @ r), p0))
    for _, p0 in sorted(starts, key=lambda pair: pair[0])[:N_STARTS]:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                res = least_squares(lambda p: family.curve(ts, *p) - ys, p0, bounds=(lower, upper), method="trf",
                                    x_scale="jac", max_nfev=MAX_NFEV)
            except (ValueError, np.linalg.LinAlgError):
                continue
        if not np.all(np.isfinite(res.fun)):
            continue
        rss = float(res.fun @ res.fun)
        if best is None or rss < best[0]:
            best = (rss, res)
    if best is None:
        return FamilyFit(name, np.full(k, np.nan), None, float("nan"), int(t.size), False, t_scale, y_mean, y_scale)
    rss, res = best
    s2 = rss / max(t.size - k, 1)
    cov = None
    with np.errstate(all="ignore"):
        try:
            cov = np.linalg.pinv(res.jac.T @ res.jac) * s2
            if not np.all(np.isfinite(cov)):
                cov = None
        except np.linalg.LinAlgError:
            cov = None
    return FamilyFit(name, res.x, cov, rss * y_scale**2, int(t.size), True, t_scale, y_mean, y_scale)


# ---- the baselines as predictive distributions ------------------------------------------------------------------


def _gaussian_predictive(method: str, steps: np.ndarray, mean: np.ndarray, sd_mean: np.ndarray, noise: float,
                         fitted: np.ndarray, details: dict[str, Any], draws: int, seed: int) -> Predictive:
    rng = np.random.default_rng(seed)
    sd_mean = np.nan_to_num(np.asarray(sd_mean, float), nan=0.0)
    mean_draws = mean[None, :] + sd_mean[None, :] * rng.standard_normal((draws, 1))
    value_draws = mean_draws + noise * rng.standard_normal((draws, mean.size))
    sd = np.sqrt(sd_mean**2 + noise**2)
    return Predictive(method, steps, mean, gaussian_intervals(mean, sd), mean_draws, value_draws, fitted, noise,
                      details=details)


def _failed(method: str, steps: np.ndarray, why: str) -> Predictive:
    nan = np.full(steps.size, np.nan)
    return Predictive(method, steps, nan, {k: nan for k in ("lo80", "hi80", "lo95", "hi95")},
                      np.full((1, steps.size), np.nan), np.full((1, steps.size), np.nan), np.array([]),
                      float("nan"), success=False, message=why)


def persistence(t: np.ndarray, y: np.ndarray, steps: np.ndarray, draws: int = 400, seed: int = 0) -> Predictive:
    """The mean of the last 10% of the early window, carried forward; noise s.d. from the window's differences."""
    n_last = max(1, int(round(PLATEAU_SHARE * y.size)))
    level = float(np.mean(y[-n_last:]))
    noise = robust_noise_sd(y)
    noise = noise if math.isfinite(noise) else float(np.std(y))
    mean = np.full(steps.size, level)
    return _gaussian_predictive("persistence", steps, mean, np.full(steps.size, noise / math.sqrt(n_last)), noise,
                                np.full(t.size, level), {"level": level, "points": n_last}, draws, seed)


def family_forecast(name: str, t: np.ndarray, y: np.ndarray, steps: np.ndarray, draws: int = 400,
                    seed: int = 0) -> Predictive:
    fit = fit_family(name, t, y)
    if not fit.success:
        return _failed(name, steps, f"{name}: the least-squares fit failed")
    noise = math.sqrt(fit.rss / max(fit.n - len(FAMILIES[name].params), 1))
    return _gaussian_predictive(name, steps, fit.predict(steps), fit.mean_sd(steps), noise, fit.predict(t),
                                {"law": name, "equation": FAMILIES[name].equation, "time_unit": fit.t_scale,
                                 "params": dict(zip(FAMILIES[name].params, map(float, fit.params)))}, draws, seed)


def domhan_forecast(t: np.ndarray, y: np.ndarray, steps: np.ndarray, draws: int = 400, seed: int = 0) -> Predictive:
    """Domhan et al. (2015): each of MMF, pow3, Janoschek, Weibull by least squares, then non-negative combination
    weights (summing to one) by least squares on the window; the interval adds the weighted spread of the
    families and the delta-method s.e. to the residual noise."""
    fits = [fit_family(name, t, y) for name in DOMHAN_FAMILIES]
    fits = [f for f in fits if f.success and np.all(np.isfinite(f.predict(steps)))]
    if not fits:
        return _failed("domhan", steps, "domhan: no family could be fitted")
    design = np.column_stack([f.predict(t) for f in fits])
    weights, _ = nnls(design, y)
    if weights.sum() <= 0:
        weights = np.ones(len(fits))
    weights = weights / weights.sum()
    future = np.column_stack([f.predict(steps) for f in fits])
    mean = future @ weights
    fitted = design @ weights
    k = sum(len(FAMILIES[f.family].params) for f in fits) + len(fits) - 1
    noise = math.sqrt(float(np.sum((y - fitted) ** 2)) / max(y.size - min(k, y.size - 1), 1))
    spread = np.sqrt(np.maximum(((future - mean[:, None]) ** 2) @ weights, 0.0))
    delta = np.sqrt(sum(w * f.mean_sd(steps) ** 2 for w, f in zip(weights, fits)))
    sd_mean = np.sqrt(spread**2 + delta**2)
    details = {"families": {f.family: float(w) for f, w in zip(fits, weights)}}
    return _gaussian_predictive("domhan", steps, mean, sd_mean, noise, fitted, details, draws, seed)


def baseline_forecast(name: str, t: Sequence[float], y: Sequence[float], steps: Sequence[float], draws: int = 400,
                      seed: int = 0) -> Predictive:
    """One of :data:`BASELINES` fitted to the early window ``(t, y)`` and forecast at ``steps``."""
    t, y, steps = np.asarray(t, float), np.asarray(y, float), np.asarray(steps, float)
    if name == "persistence":
        return persistence(t, y, steps, draws, seed)
    if name == "domhan":
        return domhan_forecast(t, y, steps, draws, seed)
    if name in FAMILIES:
        return family_forecast(name, t, y, steps, draws, seed)
    raise ValueError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")
