"""The reward laws of Section 3.5 as deficits ``d(t)`` in ``R(t) = R_inf - (R_inf - R0) d(t)``: the three-phase law
(Prop. 14, Eq. 16), the single exponential (Cor. 13, Eq. 14), the general overdamped two-pole response (Prop. 14)
and the underdamped step response of Eq. 8; their parameter spaces and the time to a fraction of the rise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from scipy.optimize import brentq

from pgrpo.errors import InputError

THREE_PHASE = "three_phase"


EXPONENTIAL = "exponential"


OVERDAMPED = "overdamped"


UNDERDAMPED = "underdamped"


ALL_LAWS: tuple[str, ...] = (THREE_PHASE, EXPONENTIAL, OVERDAMPED, UNDERDAMPED)


FIT_COLUMNS: tuple[str, ...] = ("reward", "eval_reward", "eval_accuracy")


_LOG_RATE_BOUNDS = (math.log(1e-4), math.log(1e4))  # rates in units of 1 / (time span of the data)


_MAX_RATIO = 1e4  # overdamped: largest fast/slow pole ratio, zeta_max = cosh(ln(1e4)/2) ~ 50


_ZETA_MIN = 1e-3


_X90_CRITICAL = 3.889720169867429  # (1 + x) exp(-x) = 0.1


def deficit_three_phase(t: np.ndarray, omega_n: float) -> np.ndarray:
    """``(1 + omega_n t) exp(-omega_n t)``: the critically damped step response from rest (Eq. 16)."""
    x = omega_n * np.asarray(t, dtype=float)
    return (1.0 + x) * np.exp(-x)


def deficit_exponential(t: np.ndarray, lam: float) -> np.ndarray:
    """``exp(-lambda t)``: the single-pole (first-order) law of Eq. 14."""
    return np.exp(-lam * np.asarray(t, dtype=float))


def overdamped_poles(omega_n: float, zeta: float) -> tuple[float, float]:
    """Slow and fast pole magnitudes ``omega_n (zeta -+ sqrt(zeta^2 - 1))`` (Prop. 14), computed without cancellation."""
    s = math.sqrt(max(zeta * zeta - 1.0, 0.0))
    return omega_n / (zeta + s), omega_n * (zeta + s)


def deficit_overdamped(t: np.ndarray, omega_n: float, zeta: float) -> np.ndarray:
    """Two-pole response from rest, ``(b e^{-at} - a e^{-bt}) / (b - a)``, written as
    ``e^{-at} [1 + a t phi((b - a) t)]`` with ``phi(x) = (1 - e^{-x}) / x`` so that zeta -> 1 is exact."""
    a, b = overdamped_poles(omega_n, zeta)
    return deficit_from_poles(np.asarray(t, dtype=float), a, b)


def deficit_from_poles(t: np.ndarray, a: float | np.ndarray, b: float | np.ndarray) -> np.ndarray:
    """:func:`deficit_overdamped` from its slow and fast poles ``a <= b`` (scalars, or columns against a row of
    times ``t``)."""
    x = (b - a) * t
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(np.abs(x) < 1e-8, 1.0 - x / 2.0, -np.expm1(-x) / np.where(x == 0, 1.0, x))
    return np.exp(-a * t) * (1.0 + a * t * phi)


def deficit_underdamped(t: np.ndarray, omega_n: float, zeta: float) -> np.ndarray:
    """``e^{-zeta w t} [cos(w_d t) + zeta w t sinc(w_d t)]``: the step response from rest for ``zeta <= 1``
    (``sin(x)/x`` written as a sinc so that zeta -> 1 reduces exactly to Eq. 16)."""
    t = np.asarray(t, dtype=float)
    omega_d = omega_n * math.sqrt(max(1.0 - zeta * zeta, 0.0))
    x = omega_d * t
    return np.exp(-zeta * omega_n * t) * (np.cos(x) + zeta * omega_n * t * np.sinc(x / np.pi))


@dataclass(frozen=True)
class Law:
    """A saturation law ``R = R_inf - (R_inf - R0) d(t; shape)``.

    ``shape_names`` are its public shape parameters (rates in 1/step, ``zeta`` dimensionless); the fit works on
    internal coordinates (log rates, etc.) mapped to them by ``to_shape``.
    """

    name: str
    label: str
    equation: str
    shape_names: tuple[str, ...]
    rate_names: tuple[str, ...]
    deficit: Callable[..., np.ndarray]
    to_shape: Callable[[np.ndarray], tuple[float, ...]]
    internal_bounds: tuple[tuple[float, float], ...]
    grid: Callable[[], list[np.ndarray]]

    @property
    def param_names(self) -> tuple[str, ...]:
        return ("R0", "R_inf") + self.shape_names

    @property
    def n_params(self) -> int:
        return len(self.param_names)

    def curve(self, t: np.ndarray, params: Mapping[str, float]) -> np.ndarray:
        shape = [params[name] for name in self.shape_names]
        return params["R_inf"] - (params["R_inf"] - params["R0"]) * self.deficit(np.asarray(t, float), *shape)

    def slowest_rate(self, params: Mapping[str, float]) -> float:
        """The decay rate of the slowest mode (sets how long the approach to the plateau takes)."""
        if self.name == EXPONENTIAL:
            return params["lambda"]
        if self.name == OVERDAMPED:
            return overdamped_poles(params["omega_n"], params["zeta"])[0]
        if self.name == UNDERDAMPED:
            return params["zeta"] * params["omega_n"]
        return params["omega_n"]


def _log_grid(lo: float, hi: float, num: int) -> np.ndarray:
    return np.linspace(math.log(lo), math.log(hi), num)


LAWS: dict[str, Law] = {
    THREE_PHASE: Law(
        name=THREE_PHASE,
        label="three-phase (critically damped, Eq. 16)",
        equation="R_inf - (R_inf - R0)(1 + omega_n t) exp(-omega_n t)",
        shape_names=("omega_n",),
        rate_names=("omega_n",),
        deficit=deficit_three_phase,
        to_shape=lambda v: (math.exp(v[0]),),
        internal_bounds=(_LOG_RATE_BOUNDS,),
        grid=lambda: [np.array([u]) for u in _log_grid(0.05, 500.0, 60)],
    ),
    EXPONENTIAL: Law(
        name=EXPONENTIAL,
        label="single exponential (Eq. 14)",
        equation="R_inf - (R_inf - R0) exp(-lambda t)",
        shape_names=("lambda",),
        rate_names=("lambda",),
        deficit=deficit_exponential,
        to_shape=lambda v: (math.exp(v[0]),),
        internal_bounds=(_LOG_RATE_BOUNDS,),
        grid=lambda: [np.array([u]) for u in _log_grid(0.02, 500.0, 60)],
    ),
    OVERDAMPED: Law(
        name=OVERDAMPED,
        label="overdamped two-pole (Prop. 14, zeta >= 1)",
        equation="R_inf - (R_inf - R0)(b e^{-a t} - a e^{-b t})/(b - a), a,b = omega_n (zeta -+ sqrt(zeta^2-1))",
        shape_names=("omega_n", "zeta"),
        rate_names=("omega_n",),
        deficit=deficit_overdamped,
        # internal (log slow pole a, log ratio r = b/a): omega_n = a sqrt(r), zeta = cosh(ln(r)/2)
        to_shape=lambda v: (math.exp(v[0] + 0.5 * v[1]), math.cosh(0.5 * v[1])),
        internal_bounds=(_LOG_RATE_BOUNDS, (0.0, math.log(_MAX_RATIO))),
        grid=lambda: [
            np.array([u, w]) for u in _log_grid(0.02, 300.0, 30) for w in (0.0, 0.7, 1.5, 2.5, 3.5, 5.0, 7.0, 9.2)
        ],
    ),
    UNDERDAMPED: Law(
        name=UNDERDAMPED,
        label="underdamped (0 < zeta <= 1)",
        equation="R_inf - (R_inf - R0) e^{-zeta omega_n t}[cos(omega_d t) + zeta omega_n/omega_d sin(omega_d t)]",
        shape_names=("omega_n", "zeta"),
        rate_names=("omega_n",),
        deficit=deficit_underdamped,
        to_shape=lambda v: (math.exp(v[0]), float(v[1])),
        internal_bounds=(_LOG_RATE_BOUNDS, (_ZETA_MIN, 1.0)),
        grid=lambda: [
            np.array([u, z]) for u in _log_grid(0.3, 300.0, 30) for z in (0.05, 0.12, 0.25, 0.4, 0.6, 0.8, 1.0)
        ],
    ),
}


def get_law(name: str) -> Law:
    if name not in LAWS:
        raise InputError(f"unknown law '{name}' (known: {', '.join(LAWS)})")
    return LAWS[name]


def time_to_fraction(law_name: str, params: Mapping[str, float], fraction: float = 0.9) -> float:
    """First time at which the progress ``(R - R0)/(R_inf - R0)`` reaches ``fraction`` (in steps)."""
    law = LAWS[law_name]
    shape = [params[name] for name in law.shape_names]
    if not all(math.isfinite(v) for v in shape):
        return float("nan")
    if law_name == THREE_PHASE and fraction == 0.9:
        return _X90_CRITICAL / params["omega_n"]
    if law_name == EXPONENTIAL:
        return -math.log(1.0 - fraction) / params["lambda"]
    slowest = law.slowest_rate(params)
    if not slowest > 0:
        return float("nan")
    horizon = 60.0 / slowest
    grid = np.linspace(0.0, horizon, 6001)
    progress = 1.0 - law.deficit(grid, *shape)
    above = np.nonzero(progress >= fraction)[0]
    if above.size == 0 or above[0] == 0:
        return float("nan")
    i = above[0]
    return float(brentq(lambda s: 1.0 - law.deficit(np.array([s]), *shape)[0] - fraction, grid[i - 1], grid[i]))
