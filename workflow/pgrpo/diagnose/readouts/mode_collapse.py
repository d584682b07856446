"""Mode collapse (Section 5.3, Figure 3): drift of the forcing intensity ``sigma_adv^2 / G`` (Lemma 6), the
collapsed-prompt fraction (the 0/0 of Eq. 1), and the separation of ``sigma_adv^2`` across G (Prop. 10).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from pgrpo.diagnose.modes.signals import curve, reward_position
from pgrpo.diagnose.numerics import early_late_levels, fmt, least_squares_line, pct
from pgrpo.diagnose.records import (
    COLLAPSE,
    HEALTHY,
    INCONCLUSIVE,
    MODE_COLLAPSE,
    NOT_RUN,
    WARNING,
    DiagnosticResult,
    RunCurves,
)
from pgrpo.diagnose.settings import DiagnosticsConfig
from pgrpo.fit.settings import implied_range


def relative_drift(progress: np.ndarray, values: np.ndarray, reference: float) -> float:
    """Fractional change over the run implied by the least-squares line of ``values`` on ``progress``:
    ``slope x (progress span) / reference``."""
    slope, _, _ = least_squares_line(progress, values)
    span = float(np.ptp(progress)) if np.size(progress) else float("nan")
    if not (reference > 0) or not math.isfinite(slope):
        return float("nan")
    return slope * span / reference


def mode_collapse(curves: RunCurves, config: DiagnosticsConfig | None = None) -> DiagnosticResult:
    """Figure 3 for one run: drift of ``sigma_adv^2 / G`` and the collapsed-prompt fraction's level and trend."""
    config = config or DiagnosticsConfig()
    cfg = config.mode_collapse
    missing = [c for c in ("reward_std", "frac_reward_zero_std") if not curves.has(c)]
    if len(missing) == 2:
        return DiagnosticResult(MODE_COLLAPSE, curves.model, curves.G, NOT_RUN,
                                "columns 'reward_std' and 'frac_reward_zero_std' missing", missing=missing)
    numbers: dict[str, Any] = {"G": curves.G}
    series: dict[str, Any] = {}
    issues, notes, fine = [], [], []
    sigma_state = frac_state = "missing"
    G = curves.G if curves.G else 1
    few = {c: curves.series(c)[0].size for c in ("reward_std", "frac_reward_zero_std")
           if curves.has(c) and curves.series(c)[0].size < config.min_points}
    for column, n in few.items():
        notes.append(f"'{column}' has only {n} point(s) (need {config.min_points})")
    if curves.has("reward_std") and "reward_std" not in few:
        steps, std, std_sd = curves.series("reward_std")
        progress = curves.progress(steps)
        s = std**2 / G
        early, late = early_late_levels(steps, s, config.early_fraction, config.late_fraction)
        drift = relative_drift(progress, s, early)
        numbers.update({"sigma2_over_G_early": early, "sigma2_over_G_late": late, "sigma2_over_G_drift": drift,
                        "sigma2_late": late * G, "drift_max": cfg.drift_max,
                        "G_used": curves.G})
        series.update({"sigma2_over_G_steps": steps, "sigma2_over_G_progress": progress, "sigma2_over_G": s,
                       "sigma2_over_G_low": np.clip(std - std_sd, 0, None) ** 2 / G,
                       "sigma2_over_G_high": (std + std_sd) ** 2 / G})
        text = (f"sigma^2/G early {fmt(early)} -> late {fmt(late)}, trend {pct(drift)} of the early level "
                f"(flat within +/-{cfg.drift_max:.0%})")
        if not curves.G:
            text += " [G unknown: sigma^2 shown]"
        if not math.isfinite(drift):
            sigma_state = "no plateau"
            notes.append(f"sigma^2/G is {fmt(early)} over the first {config.early_fraction:.0%} of training "
                         "(every group uniform): no early plateau to drift from")
        elif drift <= -cfg.drift_max:
            sigma_state = "drifting down"
            issues.append(text)
        elif drift >= cfg.drift_max:
            sigma_state = "drifting up"
            notes.append(text)
        else:
            sigma_state = "flat"
            fine.append(text)
    if curves.has("frac_reward_zero_std") and "frac_reward_zero_std" not in few:
        steps, frac, frac_sd = curves.series("frac_reward_zero_std")
        early, late = early_late_levels(steps, frac, config.early_fraction, config.late_fraction)
        slope, _, _ = least_squares_line(curves.progress(steps), frac)
        numbers.update({"frac_zero_std_early": early, "frac_zero_std_late": late, "frac_zero_std_rise": late - early,
                        "frac_zero_std_slope": slope, "frac_zero_std_max": cfg.frac_zero_std_max,
                        "frac_zero_std_rise_max": cfg.frac_zero_std_rise_max})
        series.update({"frac_steps": steps, "frac_progress": curves.progress(steps), "frac": frac,
                       "frac_sd": frac_sd})
        text = (f"collapsed-prompt fraction early {fmt(early)} -> late {fmt(late)} "
                f"(healthy: late < {cfg.frac_zero_std_max:g}, rise < {cfg.frac_zero_std_rise_max:g})")
        if late >= cfg.frac_zero_std_max:
            frac_state = "high"
            issues.append(text)
        elif late - early >= cfg.frac_zero_std_rise_max:
            frac_state = "climbing"
            issues.append(text)
        else:
            frac_state = "near zero" if late < cfg.frac_zero_std_max / 2 else "moderate"
            fine.append(text)
    numbers.update({"sigma_state": sigma_state, "frac_state": frac_state})
    saturated = False
    if frac_state in ("high", "climbing"):
        note, saturated = _saturation_note(curves, config, numbers)
        notes.append(note)
    numbers["saturated"] = saturated
    solved = saturated and sigma_state != "drifting up"
    missing_text = "; ".join(f"'{m}' missing" for m in missing)
    # a solved task leads with the saturation reading, anything else with what is wrong
    parts = (notes + issues if solved else issues + notes) + fine + ([missing_text] if missing_text else [])
    if solved:
        verdict = HEALTHY  # a solved task: all-correct groups have zero spread, and sigma^2 falls with them
    elif sigma_state == "drifting down" and frac_state in ("high", "climbing"):
        verdict = COLLAPSE
    elif issues:
        verdict = WARNING
    elif sigma_state in ("flat", "drifting up") or frac_state in ("near zero", "moderate"):
        verdict = HEALTHY  # an upward drift is not the collapse direction; it is named in the reason
    else:
        verdict = INCONCLUSIVE
    return DiagnosticResult(MODE_COLLAPSE, curves.model, curves.G, verdict, "; ".join(parts), numbers, series,
                            missing)


#: saturation explains a fall of sigma^2 when sigma^2 keeps at least this share of the fall of the bounded-variance
#: ceiling (m - lo)(hi - m) between the early and the late reward level (Bhatia-Davis; p(1 - p) for a binary reward)
SATURATION_SIGMA_SHARE = 0.75


def _saturation_note(curves: RunCurves, config: DiagnosticsConfig, numbers: dict[str, Any]) -> tuple[str, bool]:
    """Where the reward sits in its range when the collapsed-prompt fraction is high, and whether that is
    saturation. At the top the zero-spread groups are solved prompts, at the bottom dead ones (``modes.degeneracy``
    draws the same line). Saturation is read only on a known range (``diagnostics.modes.reward_range``, or [0, 1]
    when every reward lies in it; the run's own range puts any rise at its top) and only where the fall of sigma^2
    is no steeper than the approach to the top explains: the late/early ratio of sigma^2 at least
    :data:`SATURATION_SIGMA_SHARE` of that of the ceiling ``q (1 - q)`` at the early and late reward positions ``q``
    (sigma^2 that falls while the reward sits mid-range is the collapse of Figure 3, not saturation)."""
    reward = curve(curves, "reward", config)
    if reward is None:
        return "reward not logged: saturation and degeneracy not told apart", False
    where = reward_position(curves, reward, config)
    late = float(np.mean(where.position[reward.late_mask(config.late_fraction)])) if where.moved else 0.0
    numbers["reward_position_late"] = late
    text = f"reward at {late:.0%} of its range [{fmt(where.lo)}, {fmt(where.hi)}] late"
    if late <= config.modes.degeneracy.stuck_position:
        return f"{text}: the reward is in the lower part of its range: degenerate groups (stuck) (modes.degeneracy)", \
            False
    steps, values, _ = curves.series("reward")
    known = config.modes.reward_range if config.modes.reward_range is not None else implied_range(values)
    if known is None:
        return (f"{text}, the run's own range: saturation (solved prompts) or collapse not told apart without the "
                "reward's range (diagnostics.modes.reward_range)"), False
    lo, hi = float(known[0]), float(known[1])
    early_level, late_level = early_late_levels(steps, values, config.early_fraction, config.late_fraction)
    q_early, q_late = (float(np.clip((v - lo) / (hi - lo), 0.0, 1.0)) for v in (early_level, late_level))
    ceiling_ratio = q_late * (1 - q_late) / max(q_early * (1 - q_early), 1e-12)
    early_s, late_s = numbers.get("sigma2_over_G_early"), numbers.get("sigma2_over_G_late")
    observed = late_s / early_s if early_s and late_s is not None and early_s > 0 else None
    numbers.update({"reward_position_late_known_range": q_late, "sigma2_ceiling_ratio": ceiling_ratio,
                    "sigma2_observed_ratio": observed, "saturation_sigma_share": SATURATION_SIGMA_SHARE})
    text = f"reward at {q_late:.0%} of its range [{fmt(lo)}, {fmt(hi)}] late"
    if q_late <= config.modes.degeneracy.stuck_position:
        return (f"{text}: not at the top of its range, so the zero-spread groups are not solved prompts alone "
                "(saturation does not explain them)"), False
    if observed is not None and observed < SATURATION_SIGMA_SHARE * ceiling_ratio:
        return (f"{text}, but sigma^2 fell to {observed:.2f}x its early level where the approach to the top explains "
                f"{ceiling_ratio:.2f}x: groups collapsed beyond saturation"), False
    return (f"{text}: saturation: the reward is at the top of its range, the zero-spread groups are solved prompts, "
            "not a collapse (modes.degeneracy)"), True


def mode_collapse_across_G(per_G: Sequence[DiagnosticResult],
                           config: DiagnosticsConfig | None = None) -> DiagnosticResult:
    """Figure 3 across group sizes: late ``sigma_adv^2`` ratios (Lemma 6: 1) and the model's overall verdict."""
    config = config or DiagnosticsConfig()
    cfg = config.mode_collapse
    model = per_G[0].model if per_G else ""
    late = {r.G: r.numbers.get("sigma2_late") for r in per_G
            if r.G and r.numbers.get("sigma2_late") is not None and r.numbers.get("G_used")}
    pairs = []
    separated = False
    Gs = sorted(late)
    for i, Gi in enumerate(Gs):
        for Gj in Gs[i + 1:]:
            ratio = late[Gi] / late[Gj] if late[Gj] > 0 else float("nan")
            is_separated = (not math.isfinite(ratio) or ratio <= 0
                            or max(ratio, 1 / ratio) > cfg.separation_max)
            pair = {"G_small": Gi, "G_large": Gj, "sigma2_ratio": ratio, "lemma6_sigma2_ratio": 1.0,
                    "sigma2_over_G_ratio": ratio * Gj / Gi, "lemma6_sigma2_over_G_ratio": Gj / Gi,
                    "separated": bool(is_separated)}
            separated |= pair["separated"]
            pairs.append(pair)
    verdicts = {r.G: r.verdict for r in per_G}
    numbers = {"pairs": pairs, "separation_max": cfg.separation_max, "per_G": verdicts}
    pair_text = "; ".join(
        f"late sigma^2 G={p['G_small']}/G={p['G_large']} = {fmt(p['sigma2_ratio'])} (Lemma 6: 1, separated outside "
        f"x{cfg.separation_max:g}; sigma^2/G ratio {fmt(p['sigma2_over_G_ratio'])} vs "
        f"{fmt(p['lemma6_sigma2_over_G_ratio'])})"
        for p in pairs)
    per_G_text = ", ".join(f"G={G}: {v}" for G, v in sorted(verdicts.items(), key=lambda kv: kv[0] or 0))
    ran = [r for r in per_G if r.ran and r.verdict != INCONCLUSIVE]
    if not ran:
        return DiagnosticResult(MODE_COLLAPSE, model, None, INCONCLUSIVE if per_G else NOT_RUN,
                                f"no group size could be assessed ({per_G_text or 'no runs'})", numbers,
                                across_G=True)
    if any(r.verdict == COLLAPSE for r in per_G):
        verdict = COLLAPSE
    elif any(r.verdict == WARNING for r in per_G) or separated:
        verdict = WARNING
    else:
        verdict = HEALTHY
    if not pairs:
        pair_text = "G-separation not tested (needs two group sizes with reward_std and a known G)"
    elif separated:
        pair_text = "G-dependence of sigma_adv beyond Lemma 6: " + pair_text
    return DiagnosticResult(MODE_COLLAPSE, model, None, verdict, f"{per_G_text}; {pair_text}", numbers,
                            across_G=True)
