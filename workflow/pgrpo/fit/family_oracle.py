"""A bound for the forecast benchmark (issue 21, item 5): the generating family of a closed-form curve
(:data:`pgrpo.fit.truth.FAMILIES`, :data:`pgrpo.fit.truth.TWO_STAGE`), least-squares fitted to the early window alone.

Not a method: it is told what no forecaster is told, the curve's functional form (an exponential rise, a sigmoid, a
rise that then declines linearly, a constant, a linear drift, an exponential plus a sigmoid), and it sees what every
forecaster sees, the logged values up to the cut. Its error against the true mean is what remains when the form is
known and only its parameters must be read from the noisy early window: where a target lies below that error, the
early window does not pin the tail down (a sigmoid whose rise starts after the cut, a decline that starts after it),
and a forecaster that meets the target there would have to guess better than the true form fitted to the same points.

The fit: :func:`scipy.optimize.least_squares` within each parameter's bounds from a grid of starts, the least sum of
squares kept; the curve clipped to [0, 1] as the generator clips its truth.

The bandit curves of the benchmark (Section 5.6's exact softmax-bandit map, Eq. 3, and its finite-G runs) have a
family too: :func:`fit_bandit` is told the setting (the arm rewards, mu, beta and K_ref) but not the learning rate,
and fits eta to the early window (a log grid, then a finer one about its best), the map run from the reference
policy as the generator runs it. Its error is what remains when the dynamics are known and only their speed must be
read from the early points.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import least_squares


def _rise(t, a, b, tau):
    return a + (b - a) * (1.0 - np.exp(-t / tau))


def _sigmoid(t, a, b, t0, w):
    return a + (b - a) / (1.0 + np.exp(-np.clip((t - t0) / w, -60.0, 60.0)))


def _rise_decline(t, a, b, tau, t_peak, slope):
    return _rise(t, a, b, tau) - slope * np.clip(t - t_peak, 0.0, None)


def _flat(t, c):
    return np.full(np.shape(t), float(c))


def _drift(t, c, s):
    return c + s * t


def _two_stage(t, f, ramp, g, t0, w):
    def sig(x):
        return 1.0 / (1.0 + np.exp(-np.clip((x - t0) / w, -60.0, 60.0)))

    return f * (1.0 - np.exp(-t / ramp)) + g * np.clip(sig(t) - sig(0.0), 0.0, None)


@dataclass(frozen=True)
class FamilyForm:
    """A family's curve ``curve(t, *p)``, its bounds and a grid of starting values (per parameter) given the cut."""

    curve: Callable[..., np.ndarray]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    starts: Callable[[float], Sequence[Sequence[float]]]


#: family -> form; the bounds hold every member the generator makes, with room on every side
FORMS: dict[str, FamilyForm] = {
    "rise": FamilyForm(_rise, (0.0, 0.0, 1.0), (1.0, 1.0, 5000.0),
                       lambda cut: ((0.1,), (0.5, 0.9), (cut / 4, cut, 4 * cut))),
    "sigmoid": FamilyForm(_sigmoid, (0.0, 0.0, -1000.0, 1.0), (1.0, 1.0, 3000.0, 500.0),
                          lambda cut: ((0.1,), (0.5, 0.9), (cut / 2, cut, 2 * cut, 4 * cut), (5.0, 20.0))),
    "rise_then_decline": FamilyForm(_rise_decline, (0.0, 0.0, 1.0, 0.0, 0.0), (1.0, 1.0, 5000.0, 3000.0, 0.05),
                                    lambda cut: ((0.1,), (0.5, 0.9), (cut / 4, cut), (cut / 2, 2 * cut, 6 * cut),
                                                 (0.0, 0.002))),
    "flat": FamilyForm(_flat, (0.0,), (1.0,), lambda cut: ((0.5,),)),
    "slow_drift": FamilyForm(_drift, (0.0, -0.01), (1.0, 0.01), lambda cut: ((0.5,), (-0.001, 0.0, 0.001))),
    "two_stage": FamilyForm(_two_stage, (0.0, 1.0, 0.0, 0.0, 1.0), (1.0, 5000.0, 1.0, 3000.0, 500.0),
                            lambda cut: ((0.4,), (cut / 4,), (0.3, 0.6), (cut, 2 * cut, 4 * cut), (5.0, 20.0))),
}


@dataclass(frozen=True)
class FamilyFit:
    """The least-squares parameters of ``family`` on the early window, their sum of squares, and the curve."""

    family: str
    params: tuple[float, ...]
    sse: float

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return np.clip(FORMS[self.family].curve(np.asarray(t, float), *self.params), 0.0, 1.0)


def fit_family(family: str, t: np.ndarray, y: np.ndarray) -> FamilyFit:
    """The family's form least-squares fitted to ``(t, y)`` from every start of its grid (see the module
    docstring); ``KeyError`` for a family without a form."""
    form = FORMS[family]
    t, y = np.asarray(t, float), np.asarray(y, float)
    lower, upper = np.array(form.lower), np.array(form.upper)
    best: FamilyFit | None = None
    for start in itertools.product(*form.starts(float(t[-1]) or 1.0)):
        x0 = np.clip(np.array(start, float), lower, upper)

        def residual(p):
            return np.clip(form.curve(t, *p), 0.0, 1.0) - y

        found = least_squares(residual, x0, bounds=(lower, upper), method="trf", max_nfev=400)
        sse = float(np.sum(found.fun ** 2))
        if best is None or sse < best.sse:
            best = FamilyFit(family, tuple(float(v) for v in found.x), sse)
    assert best is not None
    return best


#: the learning rates :func:`fit_bandit` searches (log grid), and the finer grid's half-width (a factor) and size
BANDIT_ETA_RANGE, BANDIT_ETA_POINTS, BANDIT_REFINE = (1e-4, 3.0), 121, 25


@dataclass(frozen=True)
class BanditSetting:
    """What the bandit oracle is told of a bandit curve: its arm rewards, mu, beta and K_ref (not eta); for a finite-G
    run (``G`` set) the whole run: ``eta``, the simulator's ``seed``, its number of ``replicas`` and which one it is."""

    rewards: tuple[float, ...]
    mu: float
    beta: float
    k_ref: int
    G: int | None = None
    eta: float | None = None
    seed: int | None = None
    replicas: int = 1
    replica: int = 0


#: the independent futures a finite-G run is continued along from its state at the cut
CONTINUATIONS = 64


def finite_g_continuation(setting: BanditSetting, cut: int, horizon: int,
                          copies: int = CONTINUATIONS) -> np.ndarray:
    """The finite-G run's expected reward from step ``cut`` to ``horizon`` given everything it is at the cut (its
    logits, the heavy ball's memory and the reference ring, from rerunning it with its own seed), averaged over
    ``copies`` independent futures: ``E[p_t | state at the cut]``, the least mean-square error any forecast of that
    run can have, since no early window tells more than the state (:func:`pgrpo.bandit.finite_g.run_finite_g`)."""
    from pgrpo.bandit.finite_g import run_finite_g

    r, g = np.asarray(setting.rewards, float), int(setting.G)
    past = run_finite_g(r, setting.eta, setting.mu, setting.beta, setting.k_ref, cut, g, setting.replicas,
                        seed=setting.seed, diagnostics=False)
    ahead = run_finite_g(r, setting.eta, setting.mu, setting.beta, setting.k_ref, horizon - cut, g, copies,
                         seed=[int(setting.seed), setting.replica, cut, 23], diagnostics=False,
                         state0=past.state.replica(setting.replica, copies))
    return np.concatenate([past.p[setting.replica, :cut], ahead.p.mean(axis=0)])


@dataclass(frozen=True)
class BanditFit:
    """The learning rate fitted to the early window, its sum of squares, and the map's curve at every step."""

    setting: BanditSetting
    eta: float
    sse: float
    path: np.ndarray

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(t, float), np.arange(self.path.size, dtype=float), self.path)


def fit_bandit(setting: BanditSetting, t: np.ndarray, y: np.ndarray, horizon: float) -> BanditFit:
    """The exact bandit map of ``setting`` (:func:`pgrpo.bandit.simulate`, run to ``horizon``) whose eta makes the
    least sum of squares against ``(t, y)``: the best of a log grid over :data:`BANDIT_ETA_RANGE`, then of a finer
    grid one grid step either side of it (see the module docstring)."""
    from pgrpo import bandit

    t, y = np.asarray(t, float), np.asarray(y, float)
    steps = int(math.ceil(max(float(horizon), float(t[-1]))))
    index = np.clip(np.round(t).astype(int), 0, steps)

    def best_of(etas: np.ndarray) -> tuple[float, float, np.ndarray]:
        paths = np.asarray(bandit.simulate(np.asarray(setting.rewards, float), etas, setting.mu, setting.beta,
                                           setting.k_ref, steps), float)
        sse = np.sum((paths[:, index] - y[None, :]) ** 2, axis=1)
        k = int(np.argmin(sse))
        return float(etas[k]), float(sse[k]), paths[k]

    lo, hi = BANDIT_ETA_RANGE
    grid = np.geomspace(lo, hi, BANDIT_ETA_POINTS)
    eta, _, _ = best_of(grid)
    ratio = float(grid[1] / grid[0])
    eta, sse, path = best_of(np.geomspace(eta / ratio, eta * ratio, BANDIT_REFINE))
    return BanditFit(setting, eta, sse, path)
