"""The completion length as a failure (beyond the paper: the order parameter ``p = E[R]`` of Assumption 1 can move
for a reason the task does not reward, or stay put while the policy degenerates).

``length_collapse``: the mean completion length (``completions/mean_length``) falls to ``(1 - length.length_drop)``
of its early level or below (early: the median of the first moving-average window; late: the median of the late
window) while the reward does not rise beyond its noise over the collapse (:func:`reward_over`: its mean over the episode
against its mean before, each episode read alone, so a collapse that resolved is judged on its own steps): the policy answers shorter and shorter without getting better (om-ai-lab/VLM-R1#280,
alibaba/ROLL#303). A shrinking length while the reward rises is a policy learning to be concise: not flagged.

``length_hacking``: the reward's rise is explained by the length. Flagged when the reward rose beyond its noise,
the length grew by ``length_rise`` or more, the reward per token (``reward / mean_length``) fell to ``(1 -
per_token_drop)`` of its initial level or below (initial: the medians of the first moving-average window; the reward
grew slower than the length), and the partial correlation
of reward and length given the step (both detrended by a least-squares line in the step; Pearson on the residuals,
of the moving averages so that the batch noise does not hide a shared bend) is at least ``min_partial_correlation``
(the post-training toolkit's reward-length rule asks only the length drift, ``diagnostics.toolkit.length_drift``).

Episodes: the steps where the smoothed length is beyond its threshold (collapse) or where the smoothed length is
above ``(1 + length_rise)`` of its early level while the reward is above its early level (hacking), bridged over
gaps of one moving-average window. A collapse that resolved counts when its points, each weighted by its depth
(:func:`depth_weighted_points`: 1 at the threshold, up to ``1 / length_drop`` at zero length), reach
``modes.min_episode_fraction`` of the run's logged points: a few steps at a few tokens is a collapse, a few steps
just under the threshold is noise.
"""

from __future__ import annotations

import math

import numpy as np

from pgrpo.diagnose.modes.no_learning import rise, rise_test
from pgrpo.diagnose.modes.record import LENGTH_COLLAPSE, LENGTH_HACKING, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import Curve, change_onset, curve, episodes_from_mask, missing_reason, start_at
from pgrpo.diagnose.numerics import fmt, pct
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig

LENGTH = "completions/mean_length"


def levels(c: Curve, config: DiagnosticsConfig) -> tuple[float, float]:
    """(early, late) medians: the first moving-average window and the late window."""
    return float(np.median(c.values[:c.window])), float(np.median(c.values[c.late_mask(config.late_fraction)]))


def partial_correlation(steps: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of ``a`` and ``b`` after each is detrended by a least-squares line in ``steps``."""
    x = np.c_[np.ones(steps.size), steps - steps.mean()]
    ra = a - x @ np.linalg.lstsq(x, a, rcond=None)[0]
    rb = b - x @ np.linalg.lstsq(x, b, rcond=None)[0]
    denominator = math.sqrt(float(np.sum(ra ** 2) * np.sum(rb ** 2)))
    return float(np.sum(ra * rb) / denominator) if denominator > 0 else float("nan")


def _inputs(curves: RunCurves, config: DiagnosticsConfig, mode: str,
            thresholds: dict) -> tuple[Curve, Curve, float, float] | ModeVerdict:
    """(length, reward, early length, late length), or the not-run verdict (with ``thresholds``) saying why not."""
    length = curve(curves, LENGTH, config)
    reward = curve(curves, "reward", config)
    for c, column in ((length, LENGTH), (reward, "reward")):
        if c is None:
            why, missing = missing_reason(curves, column, config)
            verdict = not_run(mode, why, missing)
            verdict.thresholds = thresholds
            return verdict
    early, late = levels(length, config)
    if not early > 0:
        return not_run(mode, f"early mean length {fmt(early)} is not positive", thresholds=thresholds)
    return length, reward, early, late


def length_collapse(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.modes.length
    thresholds = {"length_drop": cfg.length_drop, "rise_over_noise": config.modes.no_learning.rise_over_noise,
                  "late_fraction": config.late_fraction}
    got = _inputs(curves, config, LENGTH_COLLAPSE, thresholds)
    if isinstance(got, ModeVerdict):
        return got
    length, reward, early, late = got
    ratio = late / early
    level = (1 - cfg.length_drop) * early
    below = length.smooth <= level
    margin = np.where(length.smooth > 0, (1 - length.smooth / early) / cfg.length_drop, np.inf)
    episodes = episodes_from_mask(length.steps, below, margin, min_points=max(2, length.window // 2),
                                  max_gap=length.window, values=length.smooth)
    numbers = {"length_early": early, "length_late": late, "length_ratio": ratio, "threshold_length": level}
    text = f"mean length {fmt(early)} -> {fmt(late)} tokens ({pct(ratio - 1)}; collapse at <= {pct(-cfg.length_drop)})"
    long = [e for e in episodes if e["end"] is None or depth_weighted_points(length.steps, margin, e, cfg.length_drop)
            >= config.modes.min_episode_fraction * length.n]
    if not long:
        return clear(LENGTH_COLLAPSE, "length stable" if abs(ratio - 1) < cfg.length_drop / 2 else
                     "length moved, within bounds", text, numbers, thresholds)
    z = config.modes.no_learning.rise_over_noise
    starts = [change_onset(length, early, -1, int(np.searchsorted(length.steps, e["start"])), z,
                           config.modes.persistence) for e in long]
    reads = [reward_over(reward, s, e["end"], z) for s, e in zip(starts, long)]
    numbers["reward_over_episodes"] = reads
    kept = [dict(e, start=min(s, e["start"])) for s, e, r in zip(starts, long, reads) if not r["rose"]]
    if not kept:
        return clear(LENGTH_COLLAPSE, "shorter completions while the reward rises (concision, not a collapse)",
                     f"{text}; the reward rose over it ({fmt(reads[0]['before'])} -> {fmt(reads[0]['during'])})",
                     numbers, thresholds)
    spans = ", ".join(f"{fmt(e['start'])}-{fmt(e['end']) if e['end'] is not None else 'end'}" for e in kept)
    worst = min(float(e["peak_value"]) for e in kept if e["peak_value"] is not None)
    return flagged(LENGTH_COLLAPSE, "length collapse: completions shrink, the reward does not rise",
                   f"{text}; below the threshold at steps {spans} (down to {fmt(worst)} tokens), the reward not "
                   "rising over it", kept[0]["start"], (1 - worst / early) / cfg.length_drop, numbers, thresholds,
                   episodes=kept)


def depth_weighted_points(steps: np.ndarray, margin: np.ndarray, e: dict, length_drop: float) -> float:
    """The logged points of a resolved episode, each weighted by how far below the threshold it goes (its margin,
    at least 1, so a point bridged over a gap or just under the threshold counts as one: 1 at the threshold,
    ``1 / length_drop`` at zero length, and so for a length logged as zero or below), so that a short collapse to a
    few tokens counts as much as a longer one at the threshold."""
    inside = (steps >= e["start"]) & (steps <= e["end"])
    depth = np.nan_to_num(margin[inside], nan=1.0, posinf=1.0 / length_drop, neginf=1.0)
    return float(np.sum(np.maximum(depth, 1.0)))


def reward_over(reward: Curve, start: float, end: float | None, z: float) -> dict:
    """Whether the reward rose over an episode ``[start, end]``: its mean there against the mean over as many
    logged points before ``start`` (the first moving-average window if there are fewer than 2), beyond ``z``
    standard errors of the difference."""
    inside = (reward.steps >= start) & (reward.steps <= (end if end is not None else reward.steps[-1]))
    during = reward.values[inside]
    before = reward.values[reward.steps < start][-max(int(inside.sum()), reward.window):]
    if before.size < 2:
        before = reward.values[:reward.window]
    if during.size < 1 or not math.isfinite(reward.sd):
        return {"before": float("nan"), "during": float("nan"), "rose": False}
    se = reward.sd * math.sqrt(1 / before.size + 1 / during.size)
    rose = float(during.mean() - before.mean()) > z * se
    return {"start": float(start), "before": float(before.mean()), "during": float(during.mean()), "rose": bool(rose)}


def length_hacking(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.modes.length
    thresholds = {"length_rise": cfg.length_rise, "min_partial_correlation": cfg.min_partial_correlation,
                  "per_token_drop": cfg.per_token_drop, "rise_over_noise": config.modes.no_learning.rise_over_noise}
    got = _inputs(curves, config, LENGTH_HACKING, thresholds)
    if isinstance(got, ModeVerdict):
        return got
    length, reward, early, late = got
    steps = np.intersect1d(length.steps, reward.steps)
    if steps.size < config.modes.min_points:
        return not_run(LENGTH_HACKING, "reward and mean length share too few logged steps", thresholds=thresholds)
    ls = np.interp(steps, length.steps, length.smooth)
    rs = np.interp(steps, reward.steps, reward.smooth)
    partial = partial_correlation(steps, rs, ls)
    reward_initial = float(np.median(reward.values[:reward.window]))
    per_token_early = reward_initial / max(early, 1e-12)
    per_token_late = reward.late / max(late, 1e-12)
    test = rise_test(reward, config.modes.no_learning.rise_over_noise)
    rose = rise(test)
    grew = late >= (1 + cfg.length_rise) * early
    per_token_fell = per_token_late <= (1 - cfg.per_token_drop) * per_token_early if per_token_early > 0 else False
    numbers = {"length_early": early, "length_late": late, "length_ratio": late / early, "reward_rose": rose,
               "partial_correlation": partial, "reward_per_token_early": per_token_early,
               "reward_per_token_late": per_token_late, "reward_early": reward.early, "reward_late": reward.late}
    text = (f"reward {fmt(reward.early)} -> {fmt(reward.late)} ({'rose' if rose else 'no rise beyond its noise'}); "
            f"mean length {fmt(early)} -> {fmt(late)} ({pct(late / early - 1)}, grown at >= {pct(cfg.length_rise)}); "
            f"partial correlation of reward and length given the step {fmt(partial, 2)} (at >= "
            f"{cfg.min_partial_correlation:g}); reward per token {fmt(per_token_early)} -> {fmt(per_token_late)}")
    ok = rose and grew and per_token_fell and math.isfinite(partial) and partial >= cfg.min_partial_correlation
    if not ok:
        verdict = ("the reward rises with the length, but not by it" if rose and grew else
                   "the length did not grow" if rose else "no reward rise to explain")
        return clear(LENGTH_HACKING, verdict, text, numbers, thresholds)
    on = (ls >= (1 + cfg.length_rise) * early) & (rs > reward.early)
    margin = np.minimum(ls / early - 1, 10.0) / cfg.length_rise
    episodes = episodes_from_mask(steps, on, margin, min_points=2, max_gap=length.window, values=ls)
    index = int(np.flatnonzero(on)[0]) if on.any() else length.n - 1
    start = change_onset(length, early, +1, int(np.searchsorted(length.steps, steps[index])),
                         config.modes.no_learning.rise_over_noise, config.modes.persistence)
    episodes = start_at(episodes, start)
    total = min(partial / cfg.min_partial_correlation, (late / early - 1) / cfg.length_rise)
    return flagged(LENGTH_HACKING, "length hacking: the reward rises with the completion length", text, start,
                   total, numbers, thresholds, episodes=episodes)
