"""Instability (Section 5.5, Figure 5, Prop. 9): the dynamics leaving the stable regime, read from every witness a
TRL log has. Each signal below is *unstable* (flagged), or a *warning* (reported, not flagged):

- grad_norm spikes (> ``stability.spike_factor`` x the median of the previous ``spike_window`` positive values at
  steps whose groups had some spread): unstable when they recur in a burst (``spikes_unstable`` or more within
  ``2 x spike_window`` logged points), when they recur over the run however far apart (``spikes_unstable`` or more
  in all, the onset at the first), or when one is followed by a reward crash (the mean of the next ``window``
  rewards below the previous ``window`` by ``instability.crash_over_noise`` standard errors); isolated spikes
  (fewer than ``spikes_unstable``) without effect are a warning;
- a climb of grad_norm or the KL (session 26, chosen on the dev split): the value at or above
  ``instability.climb_factor`` x the median of the positive values 10 to 30 logged points before (``spike_window``
  to ``3 x spike_window``; for the KL also ``kl_spike_min`` nats above it) at ``climb_points`` consecutive points,
  with a reward crash from its first point: a blow-up that builds over several steps and stays up, which the
  spike rule's rolling reference absorbs as it goes (a sixfold KL and grad_norm climb over a dozen steps while the
  reward falls);
- grad_norm growth: the last-half log-linear growth factor of Figure 5 at or above ``growth_unstable`` (R^2 >=
  ``growth_min_r2``);
- KL spikes: KL > ``kl_spike_factor`` x the median of the previous ``spike_window`` values at steps whose groups
  had some spread, and ``kl_spike_min`` nats above it, with the same recurrence/crash rule. Like with like: on a run
  whose prompts are mostly solved, the tied steps are the confident ones and their KL sits orders of magnitude below
  that of the steps still learning, so a reference that counts them reads every step with spread as a spike (chosen
  on the dev split: the live false stops 2 -> 1 of 14 healthy runs, false flags 8 -> 7, every detection kept);
- the importance-sampling ratio on both sides: the late median of its max at or above ``is_ratio_high`` (Figure 5,
  row 2), of its mean at or below ``is_ratio_low``;
- vanishing updates: grad_norm 0 on at least ``vanishing_fraction`` of the late steps, at steps whose groups all
  have zero spread (the update has stopped: nothing is left to learn from);
- a divergence: entropy exploding (x ``concentration.explosion_factor``) with a reward crash at its onset, or a
  NaN/infinite grad_norm, loss, reward, KL or entropy (``pgrpo diagnose --allow-nan``);
- Prop. 9 (Eq. 11), when the run's eta, mu and K_ref are known: ``K eta K_ref / (1 - mu)`` at or above 1
  (``threshold_warning``: a warning).

Onset: the earliest step among the unstable signals. Episodes: one per unstable signal, overlapping ones merged: a
burst of spikes from its first to its last spike, a spike with a reward crash from the spike to the step the reward
is back (:func:`~pgrpo.diagnose.modes.signals.recovery_step`; null if it never is), the lasting signals (growth,
the IS ratio, vanishing updates, a divergence, Prop. 9) from their onset on.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pgrpo.diagnose.modes.concentration import entropy_levels
from pgrpo.diagnose.modes.record import INSTABILITY, ModeVerdict, clear, episode, flagged, not_run
from pgrpo.diagnose.modes.signals import (
    Curve,
    bursts,
    change_onset,
    climbs,
    crash_after,
    curve,
    recovery_step,
    persistent_onset,
    spikes,
)
from pgrpo.diagnose.numerics import fmt
from pgrpo.diagnose.records import DiagnosticResult, RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig
from pgrpo.diagnose.readouts.stability import log_growth

WATCHED = ("grad_norm", "loss", "reward", "kl", "entropy")


def _spike_signal(name: str, c: Curve, idx: np.ndarray, reward: Curve | None, config: DiagnosticsConfig,
                  signals: list[dict[str, Any]]) -> dict[str, Any]:
    stab, z = config.stability, config.modes.instability.crash_over_noise
    steps = c.steps[idx]
    crashed = [float(s) for s in steps if crash_after(reward, float(s), z)[0]]
    burst = bursts(idx, stab.spikes_unstable, 2 * stab.spike_window)
    info = {"n_spikes": int(idx.size), "spike_steps": [float(s) for s in steps[:20]],
            "spikes_with_reward_crash": crashed[:20], "burst_start": None if burst is None else float(c.steps[burst])}
    if idx.size == 0:
        return info
    listed = ", ".join(fmt(s) for s in steps[:6]) + (" ..." if idx.size > 6 else "")
    text = f"{idx.size} {name} spike(s) at step(s) {listed}"
    if crashed:
        text += f", the reward crashing after {', '.join(fmt(s) for s in crashed[:4])}"
    # spikes that recur over the run, however far apart, are no isolated spikes either
    recurring = burst is None and idx.size >= stab.spikes_unstable
    if burst is not None:
        text += f", {stab.spikes_unstable} or more within {2 * stab.spike_window} logged points from step " \
                f"{fmt(c.steps[burst])}"
    elif recurring:
        text += f", recurring ({stab.spikes_unstable} or more over the run)"
    if burst is not None or crashed or recurring:
        onset = min(([float(c.steps[burst])] if burst is not None else [])
                    + ([float(steps[0])] if recurring else []) + crashed[:1])
        margin = max(idx.size / stab.spikes_unstable, 1.0)
        spans = []
        if burst is not None:
            chain = [int(i) for i in idx if i >= burst]
            end = chain[0]
            for i in chain[1:]:  # the burst goes on while the next spike comes within 2 x spike_window points
                if i - end >= 2 * stab.spike_window:
                    break
                end = i
            spans.append((float(c.steps[burst]), float(c.steps[end])))
        if recurring:
            spans.append((float(steps[0]), float(steps[-1])))
        for s in crashed:
            back = recovery_step(reward, s, config.modes.instability.crash_over_noise)
            spans.append((s, back))
        signals.append({"kind": f"{name} spikes", "unstable": True, "step": onset, "text": text, "margin": margin,
                        "spans": spans})
    else:
        signals.append({"kind": f"{name} spikes", "unstable": False, "step": float(steps[0]),
                        "text": text + " (isolated, no reward crash)", "margin": 0.0})
    return info


def _climb_signal(name: str, c: Curve, reference: np.ndarray | None, min_excess: float, reward: Curve | None,
                  config: DiagnosticsConfig, signals: list[dict[str, Any]]) -> dict[str, Any]:
    """A climb of ``c`` (:func:`~pgrpo.diagnose.modes.signals.climbs`) counts where the reward crashes from its first
    point (unstable, episode from there to the step the reward is back); a climb without a crash is not reported
    (a KL that grows while the policy learns is the method working)."""
    cfg, lag = config.modes.instability, config.stability.spike_window
    runs = climbs(c.values, cfg.climb_factor, lag, cfg.climb_points, min_excess, reference)
    crashed = [(float(c.steps[i]), level, i, drop) for i, level in runs
               for hit, drop in [crash_after(reward, float(c.steps[i]), cfg.crash_over_noise)] if hit]
    info = {"climb_steps": [float(c.steps[i]) for i, _ in runs[:20]],
            "climbs_with_reward_crash": [s for s, *_ in crashed]}
    if not crashed:
        return info
    step, level, i, drop = crashed[0]
    peak = float(np.nanmax(c.values[i:]))
    signals.append({"kind": f"{name} climb", "unstable": True, "step": step,
                    "margin": peak / level / cfg.climb_factor,
                    "text": f"{name} climbing x{fmt(peak / level)} from step {fmt(step)} (>= x{cfg.climb_factor:g} its "
                            f"level {fmt(level)} at {cfg.climb_points} or more points in a row), the reward crashing by "
                            f"{fmt(drop)}",
                    "spans": [(step, recovery_step(reward, step, cfg.crash_over_noise))]})
    return info


def _zero_spread(curves: RunCurves, steps: np.ndarray) -> np.ndarray | None:
    if curves.has("frac_reward_zero_std"):
        s, v, _ = curves.series("frac_reward_zero_std")
        return np.interp(steps, s, v) >= 0.99
    if curves.has("reward_std"):
        s, v, _ = curves.series("reward_std")
        return np.interp(steps, s, v) <= 1e-9
    return None


def instability(curves: RunCurves, config: DiagnosticsConfig, figure5: DiagnosticResult | None = None) -> ModeVerdict:
    stab, cfg = config.stability, config.modes.instability
    thresholds = {"spike_factor": stab.spike_factor, "spike_window": stab.spike_window,
                  "spikes_unstable": stab.spikes_unstable, "growth_unstable": stab.growth_unstable,
                  "growth_min_r2": stab.growth_min_r2, "kl_spike_factor": cfg.kl_spike_factor,
                  "kl_spike_min": cfg.kl_spike_min, "crash_over_noise": cfg.crash_over_noise,
                  "is_ratio_high": stab.is_ratio_high, "is_ratio_low": cfg.is_ratio_low,
                  "vanishing_fraction": cfg.vanishing_fraction,
                  "explosion_factor": config.modes.concentration.explosion_factor,
                  "threshold_warning": stab.threshold_warning, "climb_factor": cfg.climb_factor,
                  "climb_points": cfg.climb_points}
    reward = curve(curves, "reward", config)
    grad = curve(curves, "grad_norm", config)
    kl = curve(curves, "kl", config)
    entropy = curve(curves, "entropy", config)
    is_max = curve(curves, "importance_sampling_ratio_max", config)
    is_mean = curve(curves, "importance_sampling_ratio_mean", config)
    prop9 = (figure5.numbers.get("prop9") if figure5 is not None else None) or None
    non_finite = {c: s for c, s in curves.non_finite.items() if c in WATCHED and s}
    if all(x is None for x in (grad, kl, entropy, is_max, is_mean)) and prop9 is None and not non_finite:
        return not_run(INSTABILITY, "no grad_norm, KL, entropy or IS-ratio column with enough points and no meta.json "
                                    "(eta, mu, k_ref) for Prop. 9", ["grad_norm", "kl"], thresholds=thresholds)
    signals: list[dict[str, Any]] = []
    numbers: dict[str, Any] = {}
    for column, steps in non_finite.items():
        signals.append({"kind": "divergence", "unstable": True, "step": min(steps), "margin": math.inf,
                        "text": f"'{column}' NaN or infinite from step {fmt(min(steps))} ({len(steps)} value(s))"})
    if grad is not None:
        zero_spread = _zero_spread(curves, grad.steps)
        reference = None if zero_spread is None else ~zero_spread
        numbers["grad_norm"] = _spike_signal("grad_norm", grad, spikes(grad.steps, grad.values, stab.spike_factor,
                                                                       stab.spike_window, reference=reference),
                                             reward, config, signals)
        numbers["grad_norm"].update(_climb_signal("grad_norm", grad, reference, 0.0, reward, config, signals))
        _, growth, r2 = log_growth(grad.steps, grad.values)
        numbers["grad_norm"].update({"growth_last_half": growth, "growth_r2": r2})
        if math.isfinite(growth) and growth >= stab.growth_unstable and r2 >= stab.growth_min_r2:
            base = float(np.median(grad.values[grad.early_mask(config.early_fraction)]))
            above = grad.smooth >= base * stab.growth_warning
            start = persistent_onset(grad.steps, above, config.modes.persistence)
            signals.append({"kind": "grad_norm growth", "unstable": True,
                            "step": start if start is not None else float(grad.steps[grad.n // 2]),
                            "margin": growth / stab.growth_unstable,
                            "text": f"grad_norm x{fmt(growth)} over the last half (log-linear R^2 {fmt(r2, 2)})"})
        if zero_spread is not None:
            positive = grad.values[grad.values > 0]
            tiny = 1e-6 * float(np.median(positive)) if positive.size else 0.0
            stopped = (grad.values <= tiny) & zero_spread
            late = grad.late_mask(config.late_fraction)
            share = float(np.mean(stopped[late]))
            numbers["vanishing_late_share"] = share
            if share >= cfg.vanishing_fraction:
                start = persistent_onset(grad.steps, stopped, config.modes.persistence)
                signals.append({"kind": "vanishing updates", "unstable": True,
                                "step": start if start is not None else float(grad.steps[late][0]),
                                "margin": share / cfg.vanishing_fraction,
                                "text": f"grad_norm 0 at zero-spread steps on {share:.0%} of the late window: the "
                                        "update has stopped"})
    if kl is not None:
        # measured against the KL of steps whose groups had some spread, as grad_norm is (module docstring)
        tied = _zero_spread(curves, kl.steps)
        numbers["kl"] = _spike_signal("KL", kl, spikes(kl.steps, kl.values, cfg.kl_spike_factor, stab.spike_window,
                                                       cfg.kl_spike_min, reference=None if tied is None else ~tied),
                                      reward, config, signals)
        numbers["kl"].update(_climb_signal("KL", kl, None if tied is None else ~tied, cfg.kl_spike_min, reward, config,
                                           signals))
    if is_max is not None:
        late = float(np.median(is_max.values[is_max.late_mask(0.5)]))
        numbers["is_ratio_max_late_median"] = late
        if late >= stab.is_ratio_high:
            start = persistent_onset(is_max.steps, is_max.values >= stab.is_ratio_high, config.modes.persistence)
            signals.append({"kind": "IS ratio (high side)", "unstable": True, "step": start or float(is_max.steps[0]),
                            "margin": late / stab.is_ratio_high,
                            "text": f"IS-ratio max late median {fmt(late)} (diverging at >= {stab.is_ratio_high:g})"})
    if is_mean is not None:
        late = float(np.median(is_mean.values[is_mean.late_mask(0.5)]))
        numbers["is_ratio_mean_late_median"] = late
        if late <= cfg.is_ratio_low:
            start = persistent_onset(is_mean.steps, is_mean.values <= cfg.is_ratio_low, config.modes.persistence)
            signals.append({"kind": "IS ratio (low side)", "unstable": True, "step": start or float(is_mean.steps[0]),
                            "margin": cfg.is_ratio_low / max(late, 1e-12),
                            "text": f"IS-ratio mean late median {fmt(late)} (policy far from the sampler at <= "
                                    f"{cfg.is_ratio_low:g})"})
    if entropy is not None and reward is not None:
        early, _ = entropy_levels(entropy, config)
        factor = config.modes.concentration.explosion_factor
        over = np.flatnonzero(entropy.smooth >= factor * early) if early > 0 else np.array([], int)
        if over.size:
            start = change_onset(entropy, early, +1, int(over[0]), config.modes.no_learning.rise_over_noise,
                                 config.modes.persistence)
            crashed, drop = crash_after(reward, start, cfg.crash_over_noise, float(entropy.steps[over[0]]))
            peak = float(np.max(entropy.smooth))
            numbers["entropy_explosion"] = {"onset_step": start, "peak_ratio": peak / early, "reward_drop": drop,
                                            "reward_crash": crashed}
            if crashed:
                signals.append({"kind": "divergence", "unstable": True, "step": start, "margin": peak / early / factor,
                                "text": f"entropy x{fmt(peak / early)} from step {fmt(start)} with the reward "
                                        f"crashing by {fmt(drop)}"})
    if prop9:
        ratio = prop9.get("threshold_ratio", float("nan"))
        numbers["prop9"] = prop9
        if math.isfinite(ratio) and ratio >= stab.threshold_warning:
            signals.append({"kind": "Prop. 9", "unstable": ratio >= 1, "step": curves.first_step, "margin": ratio,
                            "text": f"Prop. 9: K eta K_ref / (1 - mu) = {fmt(ratio)} (unstable at >= 1)"})
    numbers["signals"] = [{k: v for k, v in s.items() if k != "spans"} for s in signals]
    unstable = [s for s in signals if s["unstable"]]
    warnings = [s for s in signals if not s["unstable"]]
    checked = ", ".join(n for n, c in (("grad_norm", grad), ("KL", kl), ("entropy", entropy), ("IS max", is_max),
                                       ("IS mean", is_mean)) if c is not None)
    if not unstable:
        text = "; ".join(s["text"] for s in warnings) or f"no spike, growth or divergence ({checked} checked)"
        return clear(INSTABILITY, "approaching threshold" if warnings else "stable regime", text, numbers,
                     thresholds)
    unstable.sort(key=lambda s: s["step"])
    kinds = list(dict.fromkeys(s["kind"] for s in unstable))
    text = "; ".join(s["text"] for s in unstable + warnings)
    last = curves.last_step if curves.last_step is not None else math.inf
    spans = [(a, None if b is None or b >= last else b, s["margin"]) for s in unstable
             for a, b in (s.get("spans") or [(s["step"], None)])]
    return flagged(INSTABILITY, "unstable: " + ", ".join(kinds), text, unstable[0]["step"],
                   max(s["margin"] for s in unstable), numbers, thresholds, episodes=merge_spans(spans))


def merge_spans(spans: list[tuple[float, float | None, float]]) -> list[dict[str, Any]]:
    """Episodes from (start, end or None, margin) spans, overlapping ones merged (the larger margin kept)."""
    out: list[dict[str, Any]] = []
    for start, end, margin in sorted(spans, key=lambda s: s[0]):
        if out and (out[-1]["end"] is None or start <= out[-1]["end"]):
            top = out[-1]
            top["end"] = None if end is None or top["end"] is None else max(top["end"], end)
            if margin > top["peak_value"]:
                top.update(severity=episode(start, None, margin)["severity"], peak=float(start), peak_value=margin)
            continue
        out.append(episode(start, end, margin, start, margin))
    return out
