"""The forecast judged against the run, not the noise (beyond the paper; the laws of Section 3.5, Eq. 14-16, are
the forecaster's): the true mean curve where it is known, a denoised reference where it is not.

* :func:`closed_form_families`: sweeps of closed-form mean curves logged with binomial noise (the mean of ``B``
  completions, each a Bernoulli of the mean's share of the range): rises, sigmoids, rise-then-decline, flat, slow
  drifts, and two-stage curves (a format reward first, a correctness reward later, each logged as its own reward
  function); each member's true mean is known, the members of a family run the same steps (a sweep);
* :func:`denoised_reference`: a Gaussian-kernel local-linear smoother of the held-out values whose bandwidth is
  chosen by leave-one-out cross-validation (closed form through the smoother's hat matrix), with its pointwise
  standard error ``sigma sqrt(sum_j w_ij^2)``;
* :func:`truth_scores`: the mean-curve RMSE against that truth (and its ratio to persistence's), the plateau error
  (the mean of the truth over the run's last 10% of steps; where the truth is the reference, its s.e. with it) and
  the t90 error, normalised by the reward's range and
  the run's length, and whether the truth moves after the cut at all.

The forecast benchmark scores the two-stage curves' reward functions forecast one by one and summed with
:func:`pgrpo.fit.staged.forecast_components`, the function ``pgrpo forecast`` and the live callback call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from pgrpo.fit.intervals import PLATEAU_SHARE, moving_average, rmse
from pgrpo.fit.intervals import time_to_fraction_of_change

#: the generated families' run length, logging interval and completions per logged mean
FAMILY_STEPS, FAMILY_EVERY, FAMILY_BATCH = 300, 2, 32

#: a truth that moves by less than this share of the reward's range after the cut "does not move"
MOVES_SHARE = 0.03


def _rise(a, b, tau):
    return lambda t: a + (b - a) * (1 - np.exp(-t / tau))


def _sigmoid(a, b, t0, w):
    return lambda t: a + (b - a) / (1 + np.exp(-(t - t0) / w))


def _rise_decline(a, b, tau, t_peak, slope):
    return lambda t: a + (b - a) * (1 - np.exp(-t / tau)) - slope * np.clip(t - t_peak, 0, None)


def _flat(c):
    return lambda t: np.full(np.shape(t), float(c))


def _drift(c, s):
    return lambda t: c + s * t / FAMILY_STEPS


#: family -> members (name, mean curve on [0, 1]); members cross (a slow run that ends higher) so the sweep's order
#: at the cut is not its final order
FAMILIES: dict[str, list[tuple[str, Callable[[np.ndarray], np.ndarray]]]] = {
    "rise": [("fast-low", _rise(0.1, 0.5, 25)), ("mid", _rise(0.1, 0.62, 60)), ("slow-high", _rise(0.1, 0.8, 140)),
             ("slower-higher", _rise(0.05, 0.9, 220)), ("fast-mid", _rise(0.15, 0.6, 40))],
    "sigmoid": [("early", _sigmoid(0.1, 0.55, 50, 12)), ("mid", _sigmoid(0.1, 0.7, 110, 18)),
                ("late-high", _sigmoid(0.05, 0.85, 160, 20)), ("late-low", _sigmoid(0.1, 0.45, 140, 25))],
    "rise_then_decline": [("peak-early", _rise_decline(0.1, 0.7, 25, 90, 0.0015)),
                          ("peak-mid", _rise_decline(0.1, 0.65, 40, 150, 0.002)),
                          ("no-decline", _rise_decline(0.1, 0.55, 50, 300, 0.0)),
                          ("steep", _rise_decline(0.1, 0.8, 20, 60, 0.0022))],
    "flat": [("low", _flat(0.2)), ("mid", _flat(0.45)), ("high", _flat(0.7)), ("near", _flat(0.47))],
    "slow_drift": [("up", _drift(0.3, 0.2)), ("down", _drift(0.6, -0.2)), ("up-slow", _drift(0.45, 0.08)),
                   ("down-slow", _drift(0.5, -0.06))],
}

#: two-stage members: (name, format ramp time, correctness onset, correctness width); format on [0, 0.4],
#: correctness on [0, 0.6]
TWO_STAGE: list[tuple[str, float, float, float]] = [("onset110", 15.0, 110.0, 12.0), ("onset150", 20.0, 150.0, 15.0),
                                                    ("onset190", 12.0, 190.0, 12.0), ("onset230", 25.0, 230.0, 18.0)]
FORMAT_RANGE, CORRECT_RANGE = (0.0, 0.4), (0.0, 0.6)


@dataclass
class GeneratedCurve:
    """One generated curve: its family and member, steps, logged values and true mean; ``components``: per reward
    function (steps, logged, true mean, range) where it logs them."""

    family: str
    member: str
    steps: np.ndarray
    values: np.ndarray
    truth: np.ndarray
    components: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, tuple[float, float]]] | None = None


def _log(mean: np.ndarray, lo: float, hi: float, rng: np.random.Generator) -> np.ndarray:
    share = np.clip((mean - lo) / (hi - lo), 0.0, 1.0)
    return lo + (hi - lo) * rng.binomial(FAMILY_BATCH, share) / FAMILY_BATCH


def closed_form_families(seed: int = 0) -> list[GeneratedCurve]:
    """Every member of :data:`FAMILIES` and :data:`TWO_STAGE` logged once with binomial noise (see the module
    docstring)."""
    t = np.arange(0, FAMILY_STEPS + 1, FAMILY_EVERY, dtype=float)
    out = []
    for f_index, (family, members) in enumerate(FAMILIES.items()):
        for m_index, (member, curve) in enumerate(members):
            rng = np.random.default_rng([seed, f_index, m_index])
            truth = np.clip(curve(t), 0.0, 1.0)
            out.append(GeneratedCurve(family, member, t, _log(truth, 0.0, 1.0, rng), truth))
    for m_index, (member, ramp, onset, width) in enumerate(TWO_STAGE):
        rng = np.random.default_rng([seed, 99, m_index])
        fmt = FORMAT_RANGE[1] * (1 - np.exp(-t / ramp))
        correct = CORRECT_RANGE[1] / (1 + np.exp(-(t - onset) / width))
        correct = correct - CORRECT_RANGE[1] / (1 + math.exp(onset / width))  # starts at 0
        y_f, y_c = _log(fmt, *FORMAT_RANGE, rng), _log(np.clip(correct, 0, None), *CORRECT_RANGE, rng)
        out.append(GeneratedCurve("two_stage", member, t, y_f + y_c, fmt + np.clip(correct, 0, None),
                                  {"format": (t, y_f, fmt, FORMAT_RANGE),
                                   "correct": (t, y_c, np.clip(correct, 0, None), CORRECT_RANGE)}))
    return out


# ---- the denoised reference ----------------------------------------------------------------------------------


def _local_linear_hat(t: np.ndarray, bandwidth: float) -> np.ndarray:
    """The hat matrix ``H`` (n, n) of the Gaussian-kernel local-linear smoother: ``fitted = H y``."""
    d = t[None, :] - t[:, None]
    k = np.exp(-0.5 * (d / bandwidth) ** 2)
    s0, s1, s2 = k.sum(1), (k * d).sum(1), (k * d * d).sum(1)
    weights = k * (s2[:, None] - s1[:, None] * d)
    return weights / np.maximum(weights.sum(1, keepdims=True), 1e-300)


@dataclass
class Reference:
    """The denoised reference at the held-out steps, its pointwise s.e., and the bandwidth CV chose; ``sigma`` and
    ``hat`` (the residual s.d. and the smoother's hat matrix) give the s.e. of any average of its values."""

    values: np.ndarray
    se: np.ndarray
    bandwidth: float
    sigma: float = float("nan")
    hat: np.ndarray | None = None

    def se_of_mean(self, last: int) -> float:
        """The s.e. of the mean of the reference's last ``last`` values: ``sigma |w|`` with ``w`` the mean of those
        rows of the hat matrix (the smoothed values are linear in the logged ones, noise independent)."""
        if self.hat is None or not math.isfinite(self.sigma) or last < 1:
            return float("nan")
        weights = self.hat[-min(last, self.hat.shape[0]):].mean(axis=0)
        return float(self.sigma * np.sqrt(np.sum(weights**2)))


def denoised_reference(t: np.ndarray, y: np.ndarray) -> Reference:
    """Local-linear smoothing of ``y`` with the leave-one-out CV bandwidth (``e_i / (1 - H_ii)``), on a grid from
    twice the logging interval to the span."""
    t, y = np.asarray(t, float), np.asarray(y, float)
    if t.size < 4:
        return Reference(y.copy(), np.full(t.size, np.nan), float("nan"))
    spacing = float(np.median(np.diff(t))) or 1.0
    span = float(t[-1] - t[0]) or 1.0
    best = (np.inf, None, None)
    for bandwidth in np.geomspace(2 * spacing, span, 20):
        hat = _local_linear_hat(t, bandwidth)
        fitted = hat @ y
        leverage = np.clip(np.diag(hat), 0, 0.99)
        cv = float(np.mean(((y - fitted) / (1 - leverage)) ** 2))
        if cv < best[0]:
            best = (cv, bandwidth, hat)
    _, bandwidth, hat = best
    fitted = hat @ y
    dof = max(t.size - float(np.trace(hat)), 1.0)
    sigma = math.sqrt(float(np.sum((y - fitted) ** 2)) / dof)
    return Reference(fitted, sigma * np.sqrt(np.sum(hat**2, axis=1)), float(bandwidth), sigma, hat)


# ---- scores against the truth ---------------------------------------------------------------------------------


def truth_scores(t: np.ndarray, y: np.ndarray, early: np.ndarray, truth: np.ndarray | None, span: float,
                 prediction_mean: np.ndarray, persistence_mean: np.ndarray, plateau_forecast: float,
                 t90_forecast: float) -> dict[str, Any]:
    """The scores of item 1 for one forecast (see the module docstring). ``truth``: the true mean at every step
    (None: the denoised reference of the held-out values stands in); ``span``: the reward's range."""
    held = ~early
    n_end = max(1, int(round(PLATEAU_SHARE * t.size)))
    if truth is not None:
        ref_held, kind, ref_se = np.asarray(truth, float)[held], "true mean", 0.0
        path, plateau_se = np.asarray(truth, float), 0.0
    else:
        ref = denoised_reference(t[held], y[held])
        ref_held, kind, ref_se = ref.values, "smoothed reference", float(np.nanmedian(ref.se))
        path = np.concatenate([moving_average(y[early], max(1, int(round(0.05 * t.size)))), ref_held])
        plateau_se = ref.se_of_mean(n_end) if n_end <= ref_held.size else float("nan")
    plateau_true = float(np.mean(path[-n_end:]))
    start = float(np.mean(path[:n_end]))
    at_cut = float(path[early][-1]) if early.any() else float(path[0])
    moves = bool(np.max(np.abs(ref_held - at_cut)) > MOVES_SHARE * span) if ref_held.size else False
    ours, theirs = rmse(ref_held, prediction_mean), rmse(ref_held, persistence_mean)
    persistence_plateau = float(np.mean(persistence_mean[-min(n_end, persistence_mean.size):]))
    run = float(t[-1] - t[0]) or 1.0
    t90_true = (time_to_fraction_of_change(t, path, start, plateau_true)
                if abs(plateau_true - start) > MOVES_SHARE * span else float("nan"))
    t90_f = t90_forecast if math.isfinite(t90_forecast) else float(t[-1])
    out = {
        "truth_kind": kind, "reference_se": ref_se, "truth_moves": moves,
        "mean_rmse": ours, "persistence_mean_rmse": theirs,
        "mean_rmse_ratio": ours / theirs if theirs > 0 else float("nan"),
        "plateau_true": plateau_true, "plateau_true_se": plateau_se,
        "plateau_error_range": abs(plateau_forecast - plateau_true) / span if span > 0 else float("nan"),
        "persistence_plateau_error_range": abs(persistence_plateau - plateau_true) / span if span > 0 else float(
            "nan"),
        "t90_true": t90_true,
        "t90_true_error_share": abs(t90_f - t90_true) / run if math.isfinite(t90_true) else float("nan"),
    }
    out["plateau_error_ratio"] = (out["plateau_error_range"] / out["persistence_plateau_error_range"]
                                  if out["persistence_plateau_error_range"] > 0 else float("nan"))
    return out
