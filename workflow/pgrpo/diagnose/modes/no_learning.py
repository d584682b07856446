"""No learning: the reward never rises beyond its noise (beyond the paper; the null case of the three-phase law of
Prop. 14, ``R_inf = R0``).

Read-outs on the train reward (:class:`~pgrpo.diagnose.modes.signals.Curve`, noise from first differences): the net
rise ``late - early`` against ``z`` standard errors of that difference; the peak rise ``max(moving average) - early``
against ``(z + sqrt(2 ln k))`` standard errors (``k`` = number of independent windows, the bias of a maximum); and
the rise of the least-squares line over the run, ``slope x span``, against ``z`` times its standard error
``sd x span / sqrt(sum (t - mean t)^2)`` (every point counts: the most sensitive to a steady climb), with
``z = modes.no_learning.rise_over_noise``. Flagged when none rises and the reward did not fall either (a fall is
:mod:`~pgrpo.diagnose.modes.regression`'s). The three-phase fit's plateau ``R_inf`` (the forecast plateau) is
reported beside it: a fit whose plateau is within the noise of the start says the run is not going anywhere even if
trained longer. A reward that rings (:mod:`~pgrpo.diagnose.modes.oscillation` flagged on it) moves beyond its noise:
not flagged, whatever its early and late levels. A reward that began within the net rise's threshold of the top of
its declared ``reward_range`` had no headroom to show a rise: saturated from the start, not flagged (without a
declared range the top is not known, and such a run reads as not learning). Onset: the first logged step (a
whole-run property).

Severity reads how much rise the run has ruled out, not only how far it is from rising: a short run with little data
has not crossed any threshold, yet it cannot exclude a rise either. The margin is the smaller of the evidence margin
(threshold over the largest rise seen) and the power margin ``sd / (max(trend, 0) + bound_z x se_trend)``: one
logged point's noise s.d. over the one-sided upper bound on the linear trend's rise
(``z = modes.no_learning.bound_z``, 1.645 for 95%). A flag is ``high`` only once the run has excluded any rise above
a third of one point's noise; at the first reads of a run (10 points) it is ``low``, so a live stop rule, which acts
on ``medium`` and above, waits for the evidence.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from pgrpo.diagnose.modes.record import NO_LEARNING, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import curve, max_bias, missing_reason
from pgrpo.diagnose.numerics import fit_summary, fit_three_phase_curve, fmt, least_squares_line
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig


def rise_test(reward: Any, z: float) -> dict[str, float]:
    """Net and peak rise of a reward :class:`Curve` with their thresholds (see the module docstring)."""
    net = reward.late - reward.early
    se_net = reward.se_early_late
    peak = float(np.max(reward.smooth)) - reward.early
    se_peak = reward.sd * math.sqrt(1 / reward.window + 1 / max(reward.n_early, 1))
    k = reward.n / reward.window
    floor = 1e-9 * (1 + abs(reward.early))
    slope, _, _ = least_squares_line(reward.steps, reward.values)
    span = float(np.ptp(reward.steps))
    spread = float(np.sqrt(np.sum((reward.steps - reward.steps.mean()) ** 2)))
    trend = slope * span if np.isfinite(slope) else 0.0
    se_trend = reward.sd * span / spread if spread > 0 else float("inf")
    return {"early": reward.early, "late": reward.late, "net_rise": net, "net_threshold": max(z * se_net, floor),
            "peak_rise": peak, "peak_threshold": max((z + max_bias(k)) * se_peak, floor), "trend_rise": trend,
            "trend_threshold": max(z * se_trend, floor), "se_trend": se_trend, "noise_sd": reward.sd, "se_net": se_net,
            "window_points": reward.window, "n_points": reward.n}


def rise(test: dict[str, float]) -> bool:
    """Any of the three rises beyond its threshold."""
    return (test["net_rise"] > test["net_threshold"] or test["peak_rise"] > test["peak_threshold"]
            or test["trend_rise"] > test["trend_threshold"])


def power_margin(test: dict[str, float], bound_z: float) -> tuple[float, float]:
    """The one-sided upper bound on the linear trend's rise and the power margin ``noise_sd / bound`` (capped at
    10): how many times smaller than one logged point's noise the largest rise the run still allows is."""
    upper = max(test["trend_rise"], 0.0) + bound_z * test["se_trend"]
    if not math.isfinite(upper):
        return upper, 0.0
    return upper, (min(test["noise_sd"] / upper, 10.0) if upper > 0 else 10.0)


def no_learning(curves: RunCurves, config: DiagnosticsConfig, fits: Mapping[str, Any] | None = None,
                oscillation: Any = None) -> ModeVerdict:
    cfg = config.modes.no_learning
    thresholds = {"rise_over_noise": cfg.rise_over_noise, "bound_z": cfg.bound_z,
                  "early_fraction": config.early_fraction, "late_fraction": config.late_fraction,
                  "smoothing_fraction": config.modes.smoothing_fraction}
    reward = curve(curves, "reward", config)
    if reward is None:
        why, missing = missing_reason(curves, "reward", config)
        return not_run(NO_LEARNING, why, missing, thresholds=thresholds)
    numbers = rise_test(reward, cfg.rise_over_noise)
    fit = (fits or {}).get("reward") or fit_three_phase_curve(reward.steps, reward.values)
    numbers["forecast"] = fit_summary(fit)
    plateau = getattr(fit, "R_inf", float("nan")) if getattr(fit, "success", False) else float("nan")
    numbers["forecast_plateau"] = plateau
    numbers["forecast_rise"] = plateau - reward.early if math.isfinite(plateau) else float("nan")
    noise = (f"noise s.d. {fmt(reward.sd)} per logged point from first differences, s.e. of the difference "
             f"{fmt(numbers['se_net'])}")
    forecast = (f"; forecast plateau R_inf {fmt(plateau)}" if math.isfinite(plateau)
                else f"; no forecast plateau ({getattr(fit, 'message', 'no fit')})")
    text = (f"reward {fmt(reward.early)} -> {fmt(reward.late)} (net {fmt(numbers['net_rise'])}, threshold "
            f"{fmt(numbers['net_threshold'])}; peak rise {fmt(numbers['peak_rise'])}, threshold "
            f"{fmt(numbers['peak_threshold'])}; linear trend {fmt(numbers['trend_rise'])}, threshold "
            f"{fmt(numbers['trend_threshold'])}; {noise}){forecast}")
    if rise(numbers):
        return clear(NO_LEARNING, "learning", text, numbers, thresholds)
    if oscillation is not None and oscillation.flagged and oscillation.numbers.get("column") == "reward":
        return clear(NO_LEARNING, "the reward rings (see oscillation): it moves beyond its noise", text, numbers,
                     thresholds)
    if -numbers["net_rise"] > numbers["net_threshold"]:
        return clear(NO_LEARNING, "reward fell (see regression)", text, numbers, thresholds)
    top = config.modes.reward_range[1] if config.modes.reward_range is not None else None
    if top is not None and top - reward.early <= numbers["net_threshold"]:
        numbers["headroom"] = float(top - reward.early)
        return clear(NO_LEARNING, "saturated from the start: no headroom to rise",
                     f"{text}; the reward began {fmt(top - reward.early)} below the top of its declared range "
                     f"({fmt(top)}), within the net rise's threshold: a rise could not show", numbers, thresholds)
    evidence = max(abs(numbers["net_rise"]) / numbers["net_threshold"],
                   max(numbers["peak_rise"], 0) / numbers["peak_threshold"],
                   max(numbers["trend_rise"], 0) / numbers["trend_threshold"])
    evidence_margin = min(1 / evidence, 10.0) if evidence > 0 else 10.0
    upper, power = power_margin(numbers, cfg.bound_z)
    numbers.update(trend_upper=upper, evidence_margin=evidence_margin, power_margin=power)
    text += (f"; a rise above {fmt(upper)} excluded (one-sided, z {fmt(cfg.bound_z)}), {fmt(power)}x below one "
             f"point's noise")
    return flagged(NO_LEARNING, "not learning", text, reward.steps[0], min(evidence_margin, power), numbers,
                   thresholds)
