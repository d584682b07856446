"""Regression: the reward falls after a peak, by more than its noise, and stays down (beyond the paper: a run that
leaves the fixed point ``p*`` of Assumption 1 after reaching it).

For the train reward and each reward function that moved (``rewards/<fn>/mean``): the peak of the moving average
(before the late window), the late level, the drop ``peak - late`` against ``(z + sqrt(2 ln k))`` standard errors of
``peak - late`` (``z = modes.regression.drop_over_noise``, ``k`` windows: the bias of reading a maximum), and the
drop as a share of what the curve had gained by its peak (``peak - min(early, late)``), at least
``min_drop_fraction``. Onset: where the fall began (:func:`~pgrpo.diagnose.modes.signals.change_onset`, back from the step
where the moving average is halfway down). ``peak_step`` is
reported. The total reward is reported when it regressed, else the reward function with the largest margin.

A regression needs a gain: the peak must rise above the early level beyond the noise (``peak - early`` over
``(z + sqrt(2 ln k))`` standard errors, with ``z = no_learning.rise_over_noise``, the peak-rise test of
:mod:`~pgrpo.diagnose.modes.no_learning`), or hold a level from the start that it then loses by half or more (a
crash); a run that never rose has nothing to lose. And a fall that an
oscillation explains (:mod:`~pgrpo.diagnose.modes.oscillation` flagged on the train reward, the drop within its
peak-to-trough ``2 A``) is the oscillation's trough, not a regression.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pgrpo.diagnose.modes.record import REGRESSION, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import Curve, change_onset, components, curve, max_bias, missing_reason
from pgrpo.diagnose.numerics import fmt
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig


def peak_drop(c: Curve, config: DiagnosticsConfig) -> dict[str, Any]:
    """The peak-then-fall read-out of one curve (see the module docstring)."""
    cfg = config.modes.regression
    late_start = float(c.steps[c.late_mask(config.late_fraction)][0])
    before_late = c.steps < late_start
    if not before_late.any():
        return {"column": c.column, "ok": False}
    i_peak = int(np.argmax(np.where(before_late, c.smooth, -np.inf)))
    peak = float(c.smooth[i_peak])
    drop = peak - c.late
    gain = peak - min(c.early, c.late)
    se = c.sd * math.sqrt(1 / c.window + 1 / max(c.n_late, 1))
    threshold = (cfg.drop_over_noise + max_bias(c.n / c.window)) * se
    share = drop / gain if gain > 0 else 0.0
    out = {"column": c.column, "ok": True, "peak": peak, "peak_step": float(c.steps[i_peak]), "late": c.late,
           "early": c.early, "drop": drop, "drop_threshold": threshold, "drop_share_of_gain": share,
           "drop_relative_to_peak": drop / abs(peak) if peak else float("nan"), "noise_sd": c.sd}
    se_rise = c.sd * math.sqrt(1 / c.window + 1 / max(c.n_early, 1))
    rise_threshold = (config.modes.no_learning.rise_over_noise + max_bias(c.n / c.window)) * se_rise
    crash = peak > 0 and drop >= 0.5 * peak  # a level held from the start and then lost by half or more
    out.update(rise_to_peak=peak - c.early, rise_threshold=rise_threshold,
               gained=bool(peak - c.early > rise_threshold or crash))
    out["regressed"] = bool(drop > threshold and share >= cfg.min_drop_fraction and out["gained"])
    out["margin"] = min(drop / threshold if threshold > 0 else 10.0, share / cfg.min_drop_fraction)
    if out["regressed"]:
        after = np.flatnonzero((np.arange(c.n) > i_peak) & (c.smooth <= peak - drop / 2))
        index = int(after[0]) if after.size else c.n - 1
        out["onset_step"] = change_onset(c, peak, -1, index, cfg.drop_over_noise, config.modes.persistence)
    return out


def regression(curves: RunCurves, config: DiagnosticsConfig, oscillation: ModeVerdict | None = None) -> ModeVerdict:
    cfg = config.modes.regression
    thresholds = {"drop_over_noise": cfg.drop_over_noise, "min_drop_fraction": cfg.min_drop_fraction,
                  "late_fraction": config.late_fraction, "smoothing_fraction": config.modes.smoothing_fraction}
    reward = curve(curves, "reward", config)
    if reward is None:
        why, missing = missing_reason(curves, "reward", config)
        return not_run(REGRESSION, why, missing, thresholds=thresholds)
    reads = [peak_drop(reward, config)]
    for column in components(curves):
        part = curve(curves, column, config)
        if part is not None and column != "rewards/total_reward/mean":
            reads.append(peak_drop(part, config))
    reads = [r for r in reads if r["ok"]]
    if not reads:
        return not_run(REGRESSION, "the reward has no point before its late window", thresholds=thresholds)
    total = reads[0]
    numbers = {k: v for k, v in total.items() if k not in ("ok",)}
    numbers["components"] = {r["column"]: {k: r[k] for k in ("peak", "peak_step", "late", "drop", "drop_threshold",
                                                            "drop_share_of_gain", "regressed")} for r in reads[1:]}
    hit = total if total["regressed"] else max((r for r in reads[1:] if r["regressed"]), key=lambda r: r["margin"],
                                               default=None)

    def text(r: dict[str, Any]) -> str:
        return (f"{r['column']} peaked at {fmt(r['peak'])} (step {fmt(r['peak_step'])}) and ends at "
                f"{fmt(r['late'])}: drop {fmt(r['drop'])} (threshold {fmt(r['drop_threshold'])}, noise s.d. "
                f"{fmt(r['noise_sd'])}), {r['drop_share_of_gain']:.0%} of its gain "
                f"(regression at >= {cfg.min_drop_fraction:.0%})")

    if hit is None:
        fell = total["drop"] > total["drop_threshold"] and total["drop_share_of_gain"] >= cfg.min_drop_fraction
        verdict = "no gain to lose: the reward never rose beyond its noise" if fell and not total["gained"] else \
            "no fall after a peak"
        return clear(REGRESSION, verdict, text(total), numbers, thresholds)
    rings = oscillation is not None and oscillation.flagged and oscillation.numbers.get("column") == "reward"
    if rings and hit is total and hit["drop"] <= 2 * oscillation.numbers["amplitude"] + hit["drop_threshold"]:
        numbers["explained_by_oscillation"] = True
        return clear(REGRESSION, "the fall is an oscillation's trough (see oscillation)",
                     f"{text(hit)}; within the oscillation's peak-to-trough 2 x {fmt(oscillation.numbers['amplitude'])}",
                     numbers, thresholds)
    numbers.update({"regressed_column": hit["column"], "peak_step": hit["peak_step"]})
    which = "reward" if hit is total else f"reward function {hit['column']}"
    return flagged(REGRESSION, f"{which} fell after its peak", text(hit), hit["onset_step"], hit["margin"], numbers,
                   thresholds)
