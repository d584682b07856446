"""Policy concentration both ways (Section 5.4, Figure 4): the token entropy collapsing, or exploding.

The initial entropy is the median of the first moving-average window (``smoothing_fraction`` of the points, at
least 3), the late one the median of the last ``late_fraction`` of the steps (medians, so one transient does not set
a level). *Collapse*: the late level at or below
``(1 - collapse_drop)`` of the early one. As in Section 5.4, the timing decides: a collapse that begins after the
reward reached ``saturation_fraction`` of its rise (the first step where the reward's moving average is that far
from its early level to its peak) is the benign sharpening of a solved task, not flagged; one that begins before,
or in a run whose reward never rose beyond its noise (:func:`~pgrpo.diagnose.modes.no_learning.rise_test`), is the
failure of Assumption 1. *Explosion*: the late level at or above ``explosion_factor`` x the early one (the policy
spreading its mass over the vocabulary: incoherent text). Onset: where the departure began
(:func:`~pgrpo.diagnose.modes.signals.change_onset`, back from the first persistent crossing of the threshold, with
``z = no_learning.rise_over_noise``). KL (Figure 4, row 2) is reported beside it.
"""

from __future__ import annotations

import numpy as np

from pgrpo.diagnose.modes.no_learning import rise, rise_test
from pgrpo.diagnose.modes.record import CONCENTRATION, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import Curve, change_onset, curve, missing_reason, persistent_onset
from pgrpo.diagnose.numerics import fmt, pct
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig


def entropy_levels(entropy: Curve, config: DiagnosticsConfig) -> tuple[float, float]:
    """(initial, late) entropy: medians of the first moving-average window and of the last ``late_fraction``."""
    return (float(np.median(entropy.values[:entropy.window])),
            float(np.median(entropy.values[entropy.late_mask(config.late_fraction)])))


def _onset(entropy: Curve, baseline: float, threshold: float, direction: int, config: DiagnosticsConfig) -> float:
    hits = direction * (entropy.smooth - threshold) >= 0
    start = persistent_onset(entropy.steps, hits, config.modes.persistence)
    index = int(np.searchsorted(entropy.steps, start)) if start is not None else int(np.flatnonzero(hits)[0])
    return change_onset(entropy, baseline, direction, index, config.modes.no_learning.rise_over_noise,
                        config.modes.persistence)


def saturation_step(reward: Curve | None, config: DiagnosticsConfig) -> tuple[float | None, bool]:
    """(step at which the reward's moving average reached ``saturation_fraction`` of its rise, whether it rose)."""
    if reward is None:
        return None, False
    if not rise(rise_test(reward, config.modes.no_learning.rise_over_noise)):
        return None, False
    target = reward.early + config.modes.concentration.saturation_fraction * (float(np.max(reward.smooth))
                                                                              - reward.early)
    return float(reward.steps[np.flatnonzero(reward.smooth >= target)[0]]), True


def concentration(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.modes.concentration
    thresholds = {"collapse_drop": cfg.collapse_drop, "explosion_factor": cfg.explosion_factor,
                  "saturation_fraction": cfg.saturation_fraction, "early_fraction": config.early_fraction,
                  "late_fraction": config.late_fraction}
    entropy = curve(curves, "entropy", config)
    if entropy is None:
        why, missing = missing_reason(curves, "entropy", config)
        return not_run(CONCENTRATION, why, missing, thresholds=thresholds)
    early, late = entropy_levels(entropy, config)
    if not early > 0:
        return not_run(CONCENTRATION, f"early entropy {fmt(early)} is not positive", thresholds=thresholds)
    ratio = late / early
    numbers = {"entropy_initial": early, "entropy_late": late, "entropy_ratio": ratio, "entropy_change": ratio - 1,
               "noise_sd": entropy.sd}
    kl = curve(curves, "kl", config, minimum=3)
    kl_text = "KL not logged (beta = 0?)"
    if kl is not None:
        numbers.update({"kl_early": kl.early, "kl_late": kl.late})
        kl_text = f"KL {fmt(kl.early)} -> {fmt(kl.late)}"
    text = f"entropy {fmt(early)} -> {fmt(late)} ({pct(ratio - 1)}); {kl_text}"
    if ratio >= cfg.explosion_factor:
        onset = _onset(entropy, early, early * cfg.explosion_factor, +1, config)
        return flagged(CONCENTRATION, "entropy explosion", f"{text}: explosion at >= x{cfg.explosion_factor:g}",
                       onset, ratio / cfg.explosion_factor, dict(numbers, direction="explosion"), thresholds)
    if ratio > 1 - cfg.collapse_drop:
        verdict = "entropy stable" if abs(ratio - 1) < cfg.collapse_drop / 2 else "entropy moved, within bounds"
        return clear(CONCENTRATION, verdict, f"{text}: collapse at <= {pct(-cfg.collapse_drop)}, explosion at >= "
                                             f"x{cfg.explosion_factor:g}", numbers, thresholds)
    onset = _onset(entropy, early, early * (1 - cfg.collapse_drop), -1, config)
    t_sat, rose = saturation_step(curve(curves, "reward", config), config)
    numbers.update({"direction": "collapse", "saturation_step": t_sat, "reward_rose": rose})
    margin = (1 - ratio) / cfg.collapse_drop
    if rose and t_sat is not None and onset >= t_sat:
        return clear(CONCENTRATION, "entropy collapse after saturation (benign)",
                     f"{text}; the fall began at step {fmt(onset)}, after the reward reached "
                     f"{cfg.saturation_fraction:.0%} of its rise (step {fmt(t_sat)})", numbers, thresholds)
    when = (f"before the reward reached {cfg.saturation_fraction:.0%} of its rise (step {fmt(t_sat)})" if rose
            else "while the reward did not rise beyond its noise")
    return flagged(CONCENTRATION, "entropy collapse", f"{text}; the fall began at step {fmt(onset)}, {when}", onset,
                   margin, numbers, thresholds)
