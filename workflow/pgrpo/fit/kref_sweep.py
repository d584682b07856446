"""The deep-network K_ref sweep the paper leaves to future work (Section 5.6, "Scope"; Section 6).

The same model is trained at several refresh intervals ``K_ref`` (TRL ``steps_per_generation x num_iterations``,
Eq. 3's ``theta_old = theta_{k - K_ref}``) and learning rates ``eta``. Each reward curve is read as the exact bandit
stage reads its trajectories (Figures 6-7), against the predictions of Theorem 7 with a stiffness measured once:

- **K from the baseline's early slope** (Section 5.6's protocol, Cor. 13): the single exponential of Eq. 14 is
  fitted to the train reward of the stable baseline (the smallest ``eta`` at the smallest ``K_ref``); its rate
  ``lambda = K_eff / C_eff = eta K / ((1 - mu) - K eta K_ref)`` is inverted for ``K`` (``mu`` = Adam's beta1, as in
  Section 3.1). ``K`` is then held fixed.
- **Each run's regime**: the train reward is smoothed by a centred moving average of ``smoothing`` points; its
  target ``p*`` is the plateau of Eq. 14 fitted to the smoothed curve where that plateau lies inside the observed
  range (the fixed point, which a still-rising tail has not reached), else the mean of the run's last
  ``tail_fraction``; its start is the mean of the first ``smoothing`` points; and the labels are those of
  :func:`pgrpo.bandit.regimes.classify_regime` (monotone / overshoot / oscillatory) with the hysteresis tolerance
  set to ``noise_multiple`` standard errors of the smoothed curve (the per-point noise from the curve's first
  differences, :func:`pgrpo.fit.intervals.robust_noise_sd`, over sqrt(smoothing)) over the initial gap, at least the
  bandit stage's 1% (:data:`MIN_TOLERANCE`), so that sampling noise is not read as ringing. *collapsed*: the run
  ends below its start by more than that tolerance (learning undone), the deep-network face of a run that leaves its
  fixed point. A run whose rise is within the noise is *flat*: there is nothing to classify. A run that refreshes
  every ``K_ref`` steps logs its reward only on the steps that generate, so the window shrinks to keep four windows
  in the run.
- **The predictions** for each run: the margin ``(1 - mu) - K eta K_ref`` of Prop. 9 (Eq. 11; negative:
  linearly unstable) and the damping ratio of Eq. 10 (``zeta < 1``: oscillatory onset). Agreement is counted
  between "monotone" and ``zeta >= 1`` with a positive margin, and between overshoot/oscillatory and the other
  side; a collapsed or flat run is outside what the linear model describes and is reported, not counted.

The importance-sampling ratio each run logged (``importance_sampling_ratio_max``, Figure 5 row 2) is summarised
beside it: the direct witness of the lag that erodes ``C_eff`` (Lemma 5).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from pgrpo import theory
from pgrpo.bandit.regimes import classify_regime
from pgrpo.fit.intervals import robust_noise_sd
from pgrpo.fit.laws import EXPONENTIAL
from pgrpo.fit.least_squares import fit_law
from pgrpo.fit.settings import smooth
from pgrpo.fit.theory_link import stiffness_from_saturation_rate

FLAT = "flat"
#: the smallest hysteresis tolerance, as a fraction of the initial gap: the bandit stage's default (Figure 7)
MIN_TOLERANCE = 0.01
#: the fewest logged reward values a run needs to be classified
MIN_POINTS = 8
COLLAPSED = "collapsed"


@dataclass(frozen=True)
class SweepRun:
    """One run of the sweep: its settings (from its ``meta.json``) and its logged curves."""

    name: str
    eta: float
    k_ref: float
    mu: float
    steps: np.ndarray
    reward: np.ndarray
    is_ratio_max: np.ndarray | None = None


@dataclass(frozen=True)
class StiffnessEstimate:
    """``K`` backed out of the baseline's saturation rate (Eq. 14); ``K`` is NaN with a ``message`` when the fit
    failed or the rate is not positive."""

    run: str
    K: float
    rate: float
    rate_se: float
    eta: float
    mu: float
    k_ref: float
    r0: float
    r_inf: float
    r2: float
    message: str


@dataclass(frozen=True)
class RunRegime:
    """A run's observed regime beside the regime Theorem 7 predicts for it with the measured ``K``."""

    run: str
    eta: float
    k_ref: float
    label: str
    crossings: int
    overshoot: float
    start: float
    target: float
    noise_se: float
    tolerance: float
    k_eta_k_ref: float
    margin: float
    zeta: float
    predicted: str
    agrees: bool | None
    is_ratio_max_median: float
    is_ratio_max_max: float

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def measure_stiffness(run: SweepRun, smoothing: int = 1) -> StiffnessEstimate:
    """Fit Eq. 14 to the (optionally smoothed) train reward of ``run`` and invert its rate for ``K``."""
    ok = np.isfinite(run.reward)
    t, y = run.steps[ok].astype(float), smooth(run.reward[ok], smoothing)
    fit = fit_law(t - t[0] if t.size else t, y, EXPONENTIAL)
    nan = float("nan")
    if not fit.success:
        return StiffnessEstimate(run.name, nan, nan, nan, run.eta, run.mu, run.k_ref, nan, nan, nan,
                                 f"the exponential fit failed: {fit.message}")
    rate = fit.params["lambda"]
    K = stiffness_from_saturation_rate(rate, run.eta, run.mu, run.k_ref)
    message = "" if math.isfinite(K) and K > 0 else "the fitted rate gives no positive K"
    return StiffnessEstimate(run.name, K, rate, fit.stderr.get("lambda", nan), run.eta, run.mu, run.k_ref,
                             fit.params["R0"], fit.params["R_inf"], fit.r2, message)


def predicted_regime(zeta: float, margin: float) -> str:
    """Theorem 7's reading: unstable past Prop. 9's threshold, oscillatory below zeta = 1, else monotone."""
    if not (math.isfinite(zeta) and math.isfinite(margin)):
        return "unknown"
    if margin < 0:
        return "unstable"
    return "monotone" if zeta >= 1 else "oscillatory"


def classify_run(run: SweepRun, K: float, smoothing: int = 9, tail_fraction: float = 0.2,
                 noise_multiple: float = 2.0) -> RunRegime:
    """The observed regime of one run and Theorem 7's prediction for it (see the module docstring)."""
    ok = np.isfinite(run.reward)
    raw = run.reward[ok]
    nan = float("nan")
    # a run that refreshes every K_ref steps logs its reward only on the steps that generate: fewer points, so the
    # window shrinks to keep at least four windows in the run
    window = max(1, min(int(smoothing), raw.size // 4))
    if raw.size < MIN_POINTS:
        label, crossings, overshoot, start, target, noise_se, tol = "too short", 0, nan, nan, nan, nan, nan
    else:
        smoothed = smooth(raw, window)
        noise_se = robust_noise_sd(raw, ddof=1) / math.sqrt(window)
        start = float(np.mean(raw[:window]))
        tail = max(window, int(round(tail_fraction * raw.size)))
        target = float(np.mean(raw[-tail:]))
        gap = target - start
        band = max(noise_multiple * noise_se, MIN_TOLERANCE * abs(gap))
        if gap < -band:
            label, crossings, overshoot, tol = COLLAPSED, 0, 0.0, band / abs(gap)
        elif abs(gap) <= band:
            label, crossings, overshoot, tol = FLAT, 0, 0.0, nan
        else:
            steps = run.steps[ok].astype(float)
            plateau = fit_law(steps - steps[0], smoothed, EXPONENTIAL)
            if plateau.success and target <= plateau.params["R_inf"] <= max(raw):
                target = float(plateau.params["R_inf"])  # the fixed point p*, not a still-rising tail's mean
                gap = target - start
            tol = max(band / gap, MIN_TOLERANCE)
            regime = classify_regime(np.concatenate([[start], smoothed[window:]]), target, tolerance=tol)
            label, crossings, overshoot = regime.label, regime.crossings, regime.overshoot
    x = K * run.eta * run.k_ref
    margin = (1.0 - run.mu) - x
    zeta = float(theory.damping_ratio(run.eta, run.mu, K, run.k_ref)) if K > 0 and math.isfinite(K) else nan
    predicted = predicted_regime(zeta, margin)
    if predicted == "unknown" or label not in ("monotone", "overshoot", "oscillatory"):
        agrees: bool | None = None  # flat, too short, or collapsed: outside what the linear model describes
    else:
        agrees = (label == "monotone") == (predicted == "monotone")
    ratio = run.is_ratio_max[np.isfinite(run.is_ratio_max)] if run.is_ratio_max is not None else np.array([])
    return RunRegime(run.name, run.eta, run.k_ref, label, int(crossings), float(overshoot), start, target, noise_se,
                     float(tol), x, margin, zeta, predicted, agrees,
                     float(np.median(ratio)) if ratio.size else nan, float(np.max(ratio)) if ratio.size else nan)


def baseline_of(runs: Sequence[SweepRun]) -> SweepRun:
    """The stable baseline of Section 5.6's protocol: the smallest ``eta``, then the smallest ``K_ref``."""
    if not runs:
        raise ValueError("no runs in the sweep")
    return min(runs, key=lambda r: (r.eta, r.k_ref))


def agreement(regimes: Sequence[RunRegime]) -> tuple[int, int]:
    """(runs whose label agrees with Theorem 7's prediction, runs where both could be read)."""
    judged = [r for r in regimes if r.agrees is not None]
    return sum(bool(r.agrees) for r in judged), len(judged)
