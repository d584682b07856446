"""Truncation: completions cut at the length cap (beyond the paper; a truncated completion's reward measures the
cap, not the policy, so the order parameter ``p = E[R]`` of Assumption 1 stops being the task's).

In order of preference: TRL's ``completions/clipped_ratio`` (the share of completions that hit
``max_completion_length``) at or above ``clipped_ratio_max``; else the mean length over the cap (``meta.json``
``max_completion_length``, else ``modes.truncation.max_completion_length``, ``pgrpo diagnose
--max-completion-length``) at or above ``length_at_cap``; else, with no cap known, a mean length pinned at its run
maximum (late s.d./mean below ``pinned_cv``: every completion at one length, which only a cap produces). Flagged
when the late level, or the median over the run, is at or above the threshold. Onset: where the rise into the cap began
(:func:`~pgrpo.diagnose.modes.signals.change_onset` from the initial level, back from the first step from which at
least ``modes.persistence`` of the later points are at or above the threshold). A phase at the cap that ended
(completions cut for the first third of a run, then not) is flagged when it lasted at least
``modes.min_episode_fraction`` of the logged points. Episodes: the runs of steps whose moving average is at or above
the threshold, bridged over gaps of one moving-average window.
"""

from __future__ import annotations

import numpy as np

from pgrpo.diagnose.modes.record import TRUNCATION, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import change_onset, curve, episodes_from_mask, long_episodes, persistent_onset, smooth
from pgrpo.diagnose.numerics import fmt
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig

CLIPPED = "completions/clipped_ratio"
LENGTH = "completions/mean_length"


def _cap(curves: RunCurves, config: DiagnosticsConfig) -> tuple[int | None, str]:
    meta = curves.meta or {}
    for key in ("max_completion_length", "max_new_tokens"):
        if isinstance(meta.get(key), (int, float)) and not isinstance(meta.get(key), bool) and meta[key] > 0:
            return int(meta[key]), f"meta {key}"
    cap = config.modes.truncation.max_completion_length
    return (cap, "diagnostics.modes.truncation.max_completion_length") if cap else (None, "")


def truncation(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.modes.truncation
    persist = config.modes.persistence
    cap, cap_source = _cap(curves, config)
    thresholds = {"clipped_ratio_max": cfg.clipped_ratio_max, "length_at_cap": cfg.length_at_cap,
                  "pinned_cv": cfg.pinned_cv, "max_completion_length": cap, "persistence": persist}
    clipped = curve(curves, CLIPPED, config, minimum=3)
    length = curve(curves, LENGTH, config, minimum=3)
    if clipped is not None:
        steps, values, threshold, what = clipped.steps, clipped.values, cfg.clipped_ratio_max, "clipped ratio"
    elif length is not None and cap:
        steps, values, threshold = length.steps, length.values / cap, cfg.length_at_cap
        what = f"mean length / cap ({cap}, {cap_source})"
    elif length is not None:
        late = length.values[length.late_mask(config.late_fraction)]
        cv = float(np.std(late) / np.mean(late)) if np.mean(late) > 0 else float("nan")
        top = float(np.max(length.values))
        numbers = {"source": LENGTH, "late_mean_length": float(np.mean(late)), "late_cv": cv, "max_mean_length": top}
        pinned = cv < cfg.pinned_cv and float(np.mean(late)) >= 0.99 * top
        if not pinned:
            return not_run(TRUNCATION, f"no '{CLIPPED}' and no cap known (give --max-completion-length or "
                                       "diagnostics.modes.truncation.max_completion_length); mean length not pinned "
                                       f"(late {fmt(np.mean(late))}, s.d./mean {fmt(cv)}, run maximum {fmt(top)})",
                           [CLIPPED], numbers, thresholds)
        onset = persistent_onset(length.steps, length.values >= 0.99 * top, persist)
        text = (f"mean length pinned at {fmt(top)} tokens over the late window (s.d./mean {fmt(cv)} < "
                f"{cfg.pinned_cv:g}): an inferred cap; no '{CLIPPED}' logged")
        return flagged(TRUNCATION, "completions pinned at a length cap", text, onset, cfg.pinned_cv / max(cv, 1e-12),
                       numbers, thresholds, severity="high")
    else:
        return not_run(TRUNCATION, f"columns '{CLIPPED}' and '{LENGTH}' missing", [CLIPPED, LENGTH],
                       thresholds=thresholds)
    late_mask = (clipped or length).late_mask(config.late_fraction)
    late, median = float(np.mean(values[late_mask])), float(np.median(values))
    hits = values >= threshold
    numbers = {"source": CLIPPED if clipped is not None else LENGTH, "late_level": late, "median_level": median,
               "share_at_or_above": float(hits.mean()), "threshold": threshold,
               "peak_level": float(np.max(values))}
    text = (f"{what}: late {fmt(late)}, median {fmt(median)}, {hits.mean():.0%} of the logged steps at or above "
            f"{threshold:g}")
    source = clipped if clipped is not None else length
    level = smooth(values, source.window)
    episodes = episodes_from_mask(steps, level >= threshold, level / threshold, min_points=max(2, source.window // 2),
                                  max_gap=source.window, values=level)
    long = long_episodes(episodes, steps, config.modes.min_episode_fraction)
    base = float(np.median(source.values[:source.window]))
    if late < threshold and median < threshold:
        if not long:
            return clear(TRUNCATION, "completions end before the cap", text, numbers, thresholds)
        first = change_onset(source, base, +1, int(np.searchsorted(steps, long[0]["start"])),
                             config.modes.no_learning.rise_over_noise, persist)
        long[0]["start"] = min(first, long[0]["start"])
        spans = ", ".join(f"{fmt(e['start'])}-{fmt(e['end'])}" for e in long)
        return flagged(TRUNCATION, "completions cut at the cap for a phase that ended",
                       f"{text}; at the cap at steps {spans}", long[0]["start"],
                       max(e["peak_value"] for e in long) / threshold, numbers, thresholds, episodes=long)
    onset = persistent_onset(steps, hits, persist)
    if onset is None:
        onset = float(steps[np.flatnonzero(hits)[0]])
    onset = change_onset(source, base, +1, int(np.searchsorted(steps, onset)), config.modes.no_learning.rise_over_noise,
                         persist)
    kept = [dict(e) for e in episodes if e in long or e["end"] is None or e["end"] >= onset]
    for e in kept:
        if (e["end"] is None or e["end"] >= onset) and e["start"] > onset:
            e["start"] = onset
            break
    kept = [e for e in kept if e["end"] is None or e["end"] >= onset or e in long]
    return flagged(TRUNCATION, "completions cut at the length cap", text, onset, max(late, median) / threshold,
                   numbers, thresholds, episodes=kept or None)
