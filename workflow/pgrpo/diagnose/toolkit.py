"""The post-training toolkit's GRPO rules as a selectable rule set (``pgrpo diagnose --rules toolkit``), for
comparison with ours (:mod:`pgrpo.diagnose.modes`).

A re-implementation, from its description, of the GRPO heuristics of microsoft/post-training-toolkit
(``post_training_toolkit/diagnostics/heuristics.py``: ``detect_grpo_group_reward_collapse``,
``detect_grpo_entropy_collapse``, ``detect_grpo_kl_divergence``, ``detect_grpo_completion_length_drift``,
``detect_grpo_clip_ratio``, and the gradient-explosion part of ``detect_gradient_issues``). Windows count logged
rows, as there; thresholds are ``diagnostics.toolkit``:

- group reward std (TRL ``reward_std``): mean of the last ``reward_std_window`` (20) rows below ``reward_std_min``
  (0.01) -> ``degeneracy``;
- entropy: mean of the last ``entropy_window`` (30) rows below ``entropy_floor`` (0.1), or below ``(1 -
  entropy_drop)`` (50%) of the mean of the first 30 -> ``concentration``;
- KL above ``kl_cap`` (0.3) at any row -> ``instability`` (the toolkit: "policy may be diverging too fast");
- completion length: first-30 to last-30 mean changed by more than ``length_drift`` (30%), with at least 60 rows ->
  ``hacking`` (the toolkit: "check for reward hacking");
- clip ratio (TRL ``clip_ratio/region_mean``, older ``clip_ratio``): mean of the last ``clip_window`` (20) rows above
  ``clip_ratio_max`` (0.25) -> ``instability``;
- grad_norm: the last value above ``grad_factor`` (10) x the mean of the first ``min(grad_window, n/3)`` rows, with at
  least ``grad_window`` (50) rows -> ``instability``.

The toolkit reads the columns our reader normalised (so ``completions/mean_length`` counts as its
``completion_length``): a generous reading, so that a miss is the rule's, not a naming mismatch. Its rules give no
step except for KL (the steps above the cap), so ``onset_step`` is the first such step for KL and null otherwise.
The length-drift rule is also read by direction as ``length_hacking`` (the length grew) and ``length_collapse``
(it shrank). ``no_learning``, ``regression``, ``truncation`` and ``oscillation`` have no GRPO rule there: null, "not
covered".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pgrpo.diagnose.modes.ours import identity
from pgrpo.diagnose.modes.record import (
    CONCENTRATION,
    DEGENERACY,
    HACKING,
    INSTABILITY,
    LENGTH_COLLAPSE,
    LENGTH_HACKING,
    MODES,
    ModeVerdict,
    RunVerdicts,
    clear,
    flagged,
    not_run,
)
from pgrpo.diagnose.numerics import fmt
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig

NAME = "toolkit"


def _rows(curves: RunCurves, *columns: str) -> tuple[np.ndarray, np.ndarray, str] | None:
    for column in columns:
        if curves.has(column):
            steps, values, _ = curves.series(column)
            return steps, values, column
    return None


def _hit(mode: str, rule: str, text: str, severity: str, onset: float | None, numbers: dict[str, Any],
         thresholds: dict[str, Any]) -> ModeVerdict:
    return flagged(mode, rule, text, onset, 1.0, numbers, thresholds, severity=severity)


def group_reward_collapse(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.toolkit
    thresholds = {"reward_std_min": cfg.reward_std_min, "reward_std_window": cfg.reward_std_window}
    found = _rows(curves, "reward_std")
    if found is None or found[1].size < cfg.reward_std_window:
        return not_run(DEGENERACY, f"needs {cfg.reward_std_window} rows of reward_std", ["reward_std"],
                       thresholds=thresholds)
    recent = float(np.mean(found[1][-cfg.reward_std_window:]))
    text = f"group reward std, mean of the last {cfg.reward_std_window} rows: {fmt(recent)}"
    if recent < cfg.reward_std_min:
        return _hit(DEGENERACY, "grpo_reward_collapse", f"{text} < {cfg.reward_std_min:g}", "high", None,
                    {"recent_reward_std": recent}, thresholds)
    return clear(DEGENERACY, "no rule fired", text, {"recent_reward_std": recent}, thresholds)


def entropy_collapse(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.toolkit
    thresholds = {"entropy_drop": cfg.entropy_drop, "entropy_floor": cfg.entropy_floor,
                  "entropy_window": cfg.entropy_window}
    found = _rows(curves, "entropy")
    if found is None or found[1].size < cfg.entropy_window:
        return not_run(CONCENTRATION, f"needs {cfg.entropy_window} rows of entropy", ["entropy"],
                       thresholds=thresholds)
    values = found[1]
    initial, recent = float(np.mean(values[:cfg.entropy_window])), float(np.mean(values[-cfg.entropy_window:]))
    numbers = {"initial_entropy": initial, "recent_entropy": recent}
    text = f"entropy {fmt(initial)} (first {cfg.entropy_window} rows) -> {fmt(recent)} (last {cfg.entropy_window})"
    if recent < cfg.entropy_floor:
        return _hit(CONCENTRATION, "grpo_entropy_collapse", f"{text} < floor {cfg.entropy_floor:g}", "high", None,
                    numbers, thresholds)
    if initial > 0 and (initial - recent) / initial > cfg.entropy_drop:
        return _hit(CONCENTRATION, "grpo_entropy_drop", f"{text}: dropped > {cfg.entropy_drop:.0%}", "medium", None,
                    numbers, thresholds)
    return clear(CONCENTRATION, "no rule fired", text, numbers, thresholds)


def length_drift(curves: RunCurves, config: DiagnosticsConfig, mode: str = HACKING) -> ModeVerdict:
    """The length-drift rule for ``mode``: ``hacking`` either way (the toolkit's reading), ``length_hacking`` when
    the length grew, ``length_collapse`` when it shrank."""
    cfg = config.toolkit
    thresholds = {"length_drift": cfg.length_drift, "length_window": cfg.length_window}
    found = _rows(curves, "completions/mean_length", "completion_length")
    if found is None or found[1].size < 2 * cfg.length_window:
        return not_run(mode, f"needs {2 * cfg.length_window} rows of completion length",
                       ["completions/mean_length"], thresholds=thresholds)
    values = found[1]
    early, recent = float(np.mean(values[:cfg.length_window])), float(np.mean(values[-cfg.length_window:]))
    change = abs(recent - early) / early if early > 0 else float("nan")
    numbers = {"early_mean": early, "recent_mean": recent, "relative_change": change}
    text = f"completion length {fmt(early)} -> {fmt(recent)} ({change:+.0%})"
    way = {HACKING: True, LENGTH_HACKING: recent > early, LENGTH_COLLAPSE: recent < early}[mode]
    if early > 0 and change > cfg.length_drift and way:
        return _hit(mode, "grpo_length_drift", f"{text}: drift > {cfg.length_drift:.0%}", "medium", None, numbers,
                    thresholds)
    return clear(mode, "no rule fired", text, numbers, thresholds)


def instability_rules(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    """KL cap, clip ratio and gradient explosion, any of which flags ``instability``."""
    cfg = config.toolkit
    thresholds = {"kl_cap": cfg.kl_cap, "clip_ratio_max": cfg.clip_ratio_max, "clip_window": cfg.clip_window,
                  "grad_factor": cfg.grad_factor, "grad_window": cfg.grad_window}
    fired, texts, numbers, onset, missing = [], [], {}, None, []
    kl = _rows(curves, "kl")
    if kl is not None:
        above = kl[0][kl[1] > cfg.kl_cap]
        numbers["kl_max"] = float(np.max(kl[1]))
        if above.size:
            fired.append("grpo_kl_divergence")
            onset = float(above[0])
            texts.append(f"KL above {cfg.kl_cap:g} at {above.size} step(s) from step {fmt(onset)}")
    else:
        missing.append("kl")
    clip = _rows(curves, "clip_ratio")
    if clip is not None and clip[1].size >= cfg.clip_window:
        recent = float(np.mean(clip[1][-cfg.clip_window:]))
        numbers["recent_clip_ratio"] = recent
        if recent > cfg.clip_ratio_max:
            fired.append("grpo_clip_ratio_high")
            texts.append(f"clip ratio {fmt(recent)} over the last {cfg.clip_window} rows")
    else:
        missing.append("clip_ratio")
    grad = _rows(curves, "grad_norm")
    if grad is not None and grad[1].size >= cfg.grad_window:
        head = grad[1][:min(cfg.grad_window, grad[1].size // 3)]
        baseline, current = float(np.mean(head)), float(grad[1][-1])
        numbers.update({"grad_baseline": baseline, "grad_current": current})
        if baseline > 0 and current > cfg.grad_factor * baseline:
            fired.append("gradient_explosion")
            texts.append(f"last grad_norm {fmt(current)} > {cfg.grad_factor:g} x baseline {fmt(baseline)}")
    else:
        missing.append("grad_norm")
    if len(missing) == 3:
        return not_run(INSTABILITY, "no kl, no 20 rows of clip_ratio and no 50 rows of grad_norm", missing,
                       thresholds=thresholds)
    numbers["rules_fired"] = fired
    if fired:
        severity = "high" if {"grpo_kl_divergence", "gradient_explosion"} & set(fired) else "medium"
        return _hit(INSTABILITY, ", ".join(fired), "; ".join(texts), severity, onset, numbers, thresholds)
    checked = [n for n in ("kl", "clip_ratio", "grad_norm") if n not in missing]
    return clear(INSTABILITY, "no rule fired", f"checked {', '.join(checked)}", numbers, thresholds)


def toolkit_verdicts(curves: RunCurves, config: DiagnosticsConfig) -> RunVerdicts:
    """The toolkit's GRPO rules on one run, in the shape of our ``modes``."""
    modes = {v.mode: v for v in (length_drift(curves, config), length_drift(curves, config, LENGTH_HACKING),
                                 length_drift(curves, config, LENGTH_COLLAPSE), group_reward_collapse(curves, config),
                                 entropy_collapse(curves, config), instability_rules(curves, config))}
    for mode in MODES:
        modes.setdefault(mode, not_run(mode, "not covered by the post-training toolkit's GRPO rules"))
    return identity(curves, NAME, {m: modes[m] for m in MODES})
