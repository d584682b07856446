"""Read-outs of a bandit trajectory (Section 5.6, Figures 6-7): the relaxation rate ``lambda`` as the slope of
``-log(p* - p(t))`` (Cor. 13), and the regime label monotone / overshoot / oscillatory / collapsed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REGIMES: tuple[str, ...] = ("monotone", "overshoot", "oscillatory", "collapsed")


# Read-outs: the relaxation rate (paper's K) and the regime of a trajectory
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
