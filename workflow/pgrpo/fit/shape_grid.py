"""The forecaster's laws on a grid of their shape parameters (beyond the paper; the laws of Section 3.5, Eq. 14-16,
and the shape Eq. 9-10 fix), used by :mod:`pgrpo.fit.forecaster`.

Each law is ``R(t) = R_inf - (R_inf - R0) d(t)`` with a deficit ``d`` from 1 to 0: the single exponential (Cor. 13,
Eq. 14), the critically damped three-phase law (Prop. 14, Eq. 16), the two-pole overdamped response (Prop. 14), two
relaxation modes with free weights, the response whose shape the optimizer fixes through Eq. 9-10 (``theory``), a
flat law, and a power-law tail ``d(t) = (1 + r t)^(-alpha)``: a softmax policy trained by exact policy gradient
approaches its optimum as ``O(1/t)``, not exponentially, while an entropy (or KL) term makes the approach to the
regularised optimum exponential again (Mei, Xiao, Szepesvari & Schuurmans 2020, "On the global convergence rates of
softmax policy gradient methods", ICML); the exact bandit of Section 5.6 shows the slow tail after its fast rise.
An opt-in logistic law (a success rate whose logit moves at a constant speed, as under Adam's normalised steps, its
take-off at a midpoint the window sees) was measured on the dev split and not kept (docs/forecast-history.md).
On the grid the amplitudes ``(R0, R_inf)`` are linear, so each law is fitted by variable projection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pgrpo.fit.laws import (
    EXPONENTIAL,
    OVERDAMPED,
    THREE_PHASE,
    deficit_exponential,
    deficit_from_poles,
    deficit_overdamped,
    deficit_three_phase,
    deficit_underdamped,
    overdamped_poles,
)

FLAT = "flat"


THEORY = "theory"


TWO_MODE = "two_mode"


POWER_TAIL = "power_tail"


LOGISTIC = "logistic"


_TWO_MODE_RATIOS, _TWO_MODE_WEIGHTS = (4.0, 10.0, 30.0, 100.0), (0.1, 0.25, 0.5, 0.75)


#: the power tail's exponents: octaves around Mei et al.'s alpha = 1 (1/t)
_POWER_TAIL_EXPONENTS = (0.5, 1.0, 2.0, 4.0)


FORECAST_LAWS: tuple[str, ...] = (FLAT, EXPONENTIAL, THREE_PHASE, OVERDAMPED, TWO_MODE, POWER_TAIL, LOGISTIC, THEORY)


#: the logistic law's midpoints, in units of the cut: a take-off the window sees bend (a later one leaves the plateau
#: unidentified, its amplitudes' covariance singular, and the grid posterior's Occam factor would favour it)
_LOGISTIC_MIDPOINTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25)


_N_RATES = 90


_OVERDAMPED_RATIOS = (1.5, 3.0, 8.0, 25.0, 100.0)


def deficit_power_tail(t: np.ndarray, rate: float, alpha: float) -> np.ndarray:
    """``(1 + rate t)^(-alpha)``: 1 at ``t = 0``, a power-law approach (``~ (rate t)^(-alpha)``) late."""
    return (1.0 + rate * np.maximum(np.asarray(t, float), 0.0)) ** (-alpha)


def deficit_logistic(t: np.ndarray, rate: float, midpoint: float) -> np.ndarray:
    """``(1 + exp(-rate m)) / (1 + exp(rate (t - m)))``: 1 at ``t = 0``, half of the way at ``t ~ m``, 0 late; the
    logit of a success rate moving at a constant speed, as it does under Adam's normalised steps."""
    t = np.maximum(np.asarray(t, float), 0.0)
    return (1.0 + np.exp(-rate * midpoint)) / (1.0 + np.exp(np.minimum(rate * (t - midpoint), 700.0)))


def theory_shape(x: np.ndarray, mu: float, k_ref: float) -> tuple[np.ndarray, np.ndarray]:
    """``(omega_n, zeta)`` of Eq. 9-10 at ``delta = 1`` as functions of ``x = K eta``."""
    x = np.asarray(x, float)
    mass = (1.0 + mu) + x * k_ref**2
    omega = np.sqrt(2.0 * x / mass)
    zeta = ((1.0 - mu) - x * k_ref) / np.sqrt(2.0 * x * mass)
    return omega, zeta


def theory_deficit(t: np.ndarray, omega: float, zeta: float) -> np.ndarray:
    if zeta >= 1.0:
        return deficit_overdamped(t, omega, zeta)
    return deficit_underdamped(t, omega, max(zeta, 1e-3))


@dataclass
class ShapeGrid:
    """A law's shape parameters on a grid: ``shapes`` (grid points, as dicts) and the deficit at any times."""

    law: str
    shapes: list[dict[str, float]]
    k: int
    _column_cache: dict[str, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def deficits(self, t: np.ndarray) -> np.ndarray:
        """The deficit of every grid point at times ``t``, shape ``(points, t.size)``: the laws' own formulas on a
        column of shape parameters against a row of times, each element the same arithmetic as the point alone."""
        t = np.asarray(t, float)
        if self.law == FLAT:
            return np.ones((1, t.size))
        column = self._columns()
        row = t[None, :]
        if self.law == EXPONENTIAL:
            return deficit_exponential(row, column["lambda"])
        if self.law == THREE_PHASE:
            return deficit_three_phase(row, column["omega_n"])
        if self.law == TWO_MODE:
            w = column["w_slow"]
            return w * np.exp(-column["slow"] * row) + (1.0 - w) * np.exp(-column["fast"] * row)
        if self.law == POWER_TAIL:  # one exponent at a time: numpy's power has exact shortcuts for a scalar one
            alphas, out = column["alpha"][:, 0], np.empty((len(self.shapes), t.size))
            for alpha in np.unique(alphas):
                rows = alphas == alpha
                out[rows] = deficit_power_tail(row, column["rate"][rows], float(alpha))
            return out
        if self.law == OVERDAMPED:
            return deficit_from_poles(row, column["slow_pole_exact"], column["fast_pole"])
        if self.law == LOGISTIC:
            return deficit_logistic(row, column["rate"], column["midpoint"])
        return np.array([theory_deficit(t, s["omega_n"], s["zeta"]) for s in self.shapes]).reshape(-1, t.size)

    def _columns(self) -> dict[str, np.ndarray]:
        """The grid's shape parameters as ``(points, 1)`` columns (the overdamped poles as Prop. 14 gives them),
        computed once per grid."""
        if self._column_cache is None:
            names = self.shapes[0].keys() if self.shapes else ()
            columns = {name: np.array([s[name] for s in self.shapes], float)[:, None] for name in names}
            if self.law == OVERDAMPED:
                poles = np.array([overdamped_poles(s["omega_n"], s["zeta"]) for s in self.shapes], float)
                columns["slow_pole_exact"], columns["fast_pole"] = poles[:, :1], poles[:, 1:]
            self._column_cache = columns
        return self._column_cache


def shape_grid(law: str, rate_min: float, rate_max: float, mu: float | None = None,
               k_ref: float | None = None, t_cut: float | None = None) -> ShapeGrid | None:
    """The grid of ``law`` with every rate in ``[rate_min, rate_max]`` (None for the theory law without mu, K_ref,
    or when no stable ``x`` has a rate in range; for the logistic law without ``t_cut``, the window's last step, which
    sets its midpoints)."""
    rates = np.geomspace(rate_min, rate_max, _N_RATES)
    if law == FLAT:
        return ShapeGrid(FLAT, [{}], 1)
    if law == EXPONENTIAL:
        return ShapeGrid(law, [{"lambda": float(r)} for r in rates], 3)
    if law == THREE_PHASE:
        return ShapeGrid(law, [{"omega_n": float(r)} for r in rates], 3)
    if law == OVERDAMPED:
        shapes = []
        for a in np.geomspace(rate_min, rate_max, _N_RATES // 2):
            for ratio in _OVERDAMPED_RATIOS:
                shapes.append({"omega_n": float(a * math.sqrt(ratio)), "zeta": float(math.cosh(0.5 * math.log(ratio))),
                               "slow_pole": float(a)})
        return ShapeGrid(law, shapes, 4)
    if law == TWO_MODE:
        shapes = [{"slow": float(a), "fast": float(a * ratio), "w_slow": w}
                  for a in np.geomspace(rate_min, rate_max, _N_RATES // 3) for ratio in _TWO_MODE_RATIOS
                  for w in _TWO_MODE_WEIGHTS]
        return ShapeGrid(law, shapes, 5)
    if law == POWER_TAIL:
        return ShapeGrid(law, [{"rate": float(r), "alpha": a} for r in np.geomspace(rate_min, rate_max, _N_RATES // 2)
                               for a in _POWER_TAIL_EXPONENTS], 4)
    if law == LOGISTIC:
        if not t_cut or t_cut <= 0:
            return None
        return ShapeGrid(law, [{"rate": float(r), "midpoint": float(m * t_cut)}
                               for r in np.geomspace(rate_min, rate_max, _N_RATES // 6)
                               for m in _LOGISTIC_MIDPOINTS], 4)
    if law == THEORY:
        if mu is None or k_ref is None:
            return None
        x_max = (1.0 - mu) / k_ref if k_ref > 0 else math.inf  # Prop. 9: stable only below K eta K_ref = 1 - mu
        x = np.geomspace(rate_min * (1.0 - mu) * 0.5, min(x_max * 0.999, 10.0), 3 * _N_RATES)
        omega, zeta = theory_shape(x, mu, k_ref)
        slow = np.where(zeta >= 1, omega * (zeta - np.sqrt(np.maximum(zeta**2 - 1, 0))), zeta * omega)
        ok = (slow >= rate_min) & (omega <= rate_max * 4) & (np.where(zeta < 1, omega * np.sqrt(
            np.clip(1 - zeta**2, 0, 1)), 0.0) <= rate_max)
        if not ok.any():
            return None
        idx = np.nonzero(ok)[0]
        idx = idx[np.linspace(0, idx.size - 1, min(idx.size, _N_RATES)).round().astype(int)]
        return ShapeGrid(law, [{"K_eta": float(x[i]), "omega_n": float(omega[i]), "zeta": float(zeta[i])}
                               for i in np.unique(idx)], 3)
    raise ValueError(f"unknown forecast law {law!r}")


def slowest_rate(law: str, shape: dict[str, float]) -> float | None:
    """The rate of a grid point's slowest approach to its plateau (1 / its time scale): the exponential's
    ``lambda``, the three-phase law's ``omega_n``, the overdamped response's slow pole, the two modes' slow one, the
    power tail's ``rate``, the theory law's decay ``zeta omega_n`` when underdamped (else its ``omega_n``); None for
    the flat law."""
    if law == THEORY:
        return shape["zeta"] * shape["omega_n"] if shape["zeta"] < 1 else shape["omega_n"]
    key = {EXPONENTIAL: "lambda", THREE_PHASE: "omega_n", OVERDAMPED: "slow_pole", TWO_MODE: "slow",
           POWER_TAIL: "rate", LOGISTIC: "rate"}.get(law)
    return shape[key] if key else None
