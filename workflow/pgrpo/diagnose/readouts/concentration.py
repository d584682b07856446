"""Policy concentration (Section 5.4, Figure 4): entropy and KL against the saturation of the reward, i.e.
whether the policy concentrates before or after it reaches its plateau (Assumption 1's premise).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from pgrpo.diagnose.numerics import (
    early_late_levels,
    fit_summary,
    fit_three_phase_curve,
    fmt,
    pct,
    saturation_step,
    smooth,
)
from pgrpo.diagnose.records import (
    BENIGN_SHIFT,
    CONCENTRATION_AFTER,
    CONCENTRATION_BEFORE,
    CONCENTRATION_UNTIMED,
    ENTROPY_STABLE,
    INCONCLUSIVE,
    NO_SHIFT,
    NOT_RUN,
    POLICY_CONCENTRATION,
    DiagnosticResult,
    RunCurves,
)
from pgrpo.diagnose.settings import DiagnosticsConfig


def policy_concentration(curves: RunCurves, config: DiagnosticsConfig | None = None,
                         fits: Mapping[str, Any] | None = None) -> DiagnosticResult:
    """Figure 4 for one run: entropy change, KL rise, benign shift vs concentration, and the timing of the entropy
    drop against reward saturation (the step where the train reward's three-phase fit reaches 90% of its rise)."""
    config = config or DiagnosticsConfig()
    cfg = config.policy_concentration
    fits = dict(fits or {})

    def result(verdict: str, reason: str, **kw: Any) -> DiagnosticResult:
        return DiagnosticResult(POLICY_CONCENTRATION, curves.model, curves.G, verdict, reason, **kw)

    if not curves.has("entropy"):
        missing = ["entropy"] + ([] if curves.has("kl") else ["kl"])
        return result(NOT_RUN, "column 'entropy' missing" + (" (and 'kl')" if len(missing) == 2 else ""),
                      missing=missing)
    missing: list[str] = []
    steps, entropy, entropy_sd = curves.series("entropy")
    if steps.size < config.min_points:
        return result(INCONCLUSIVE, f"only {steps.size} entropy point(s); need {config.min_points}")
    early, late = early_late_levels(steps, entropy, config.early_fraction, config.late_fraction)
    change = (late - early) / early if early > 0 else float("nan")
    numbers: dict[str, Any] = {"entropy_early": early, "entropy_late": late, "entropy_change": change,
                               "entropy_drop_min": cfg.entropy_drop_min, "kl_rise_min": cfg.kl_rise_min}
    series: dict[str, Any] = {"entropy_steps": steps, "entropy_progress": curves.progress(steps),
                              "entropy": entropy, "entropy_sd": entropy_sd}
    if not math.isfinite(change):
        return result(INCONCLUSIVE, f"early entropy {fmt(early)} is not positive", numbers=numbers, series=series)
    dropped = change <= -cfg.entropy_drop_min
    entropy_text = (f"entropy {fmt(early)} -> {fmt(late)} ({pct(change)}; concentration at "
                    f"<= -{cfg.entropy_drop_min:.0%})")
    kl_rising = None
    kl_text = "KL not logged"
    if curves.has("kl"):
        k_steps, kl, kl_sd = curves.series("kl")
        kl_early, kl_late = early_late_levels(k_steps, kl, config.early_fraction, config.late_fraction)
        kl_rising = kl_late - kl_early >= cfg.kl_rise_min
        numbers.update({"kl_early": kl_early, "kl_late": kl_late, "kl_rise": kl_late - kl_early})
        series.update({"kl_steps": k_steps, "kl_progress": curves.progress(k_steps), "kl": kl, "kl_sd": kl_sd})
        trend = "rising" if kl_rising else "flat"
        kl_text = f"KL {fmt(kl_early)} -> {fmt(kl_late)} ({trend} at >= {cfg.kl_rise_min:g})"
    else:
        missing.append("kl")
    numbers["kl_rising"] = kl_rising
    if not dropped:
        verdict = {True: BENIGN_SHIFT, False: NO_SHIFT, None: ENTROPY_STABLE}[kl_rising]
        return result(verdict, f"{entropy_text}; {kl_text}", numbers=numbers, series=series, missing=missing)

    threshold = early * (1 - cfg.entropy_drop_min)
    below = np.nonzero(smooth(entropy, config.smoothing) <= threshold)[0]
    drop_step = float(steps[below[0]]) if below.size else float(steps[-1])
    numbers.update({"entropy_drop_step": drop_step, "entropy_drop_progress": float(curves.progress(drop_step))})
    drop_text = (f"entropy reached -{cfg.entropy_drop_min:.0%} at step {fmt(drop_step)} "
                 f"({curves.progress(drop_step):.0%})")
    if kl_rising is False:
        kl_text += ", entropy fell without a KL rise"
    fit = fits.get("reward")
    if fit is None and curves.has("reward"):
        fit = fit_three_phase_curve(*curves.series("reward")[:2])
    t_sat = saturation_step(fit, cfg.saturation_fraction)
    numbers.update({"saturation_step": t_sat, "saturation_progress": float(curves.progress(t_sat)),
                    "saturation_fraction": cfg.saturation_fraction, "reward_fit": fit_summary(fit)})
    if not math.isfinite(t_sat):
        why = "'reward' missing" if not curves.has("reward") else f"reward fit: {getattr(fit, 'message', 'no fit')}"
        if not curves.has("reward"):
            missing.append("reward")
        return result(CONCENTRATION_UNTIMED, f"{entropy_text}; {kl_text}; {drop_text}; saturation unknown ({why})",
                      numbers=numbers, series=series, missing=missing)
    beyond = " (after the run's last step: the reward had not saturated)" if t_sat > curves.last_step else ""
    sat_text = f"reward reached {cfg.saturation_fraction:.0%} of its fitted rise at step {fmt(t_sat)}{beyond}"
    verdict = CONCENTRATION_BEFORE if drop_step < t_sat else CONCENTRATION_AFTER
    numbers["drop_precedes_saturation"] = drop_step < t_sat
    return result(verdict, f"{entropy_text}; {kl_text}; {drop_text}; {sat_text}", numbers=numbers, series=series,
                  missing=missing)
