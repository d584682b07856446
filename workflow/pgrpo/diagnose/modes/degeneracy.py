"""Advantage degeneracy (Section 5.3, Figure 3, row 2), told apart from saturation.

A group whose ``G`` completions all get one reward has advantage ``0/0`` (Eq. 1) and carries no signal. TRL logs the
share of such groups, ``frac_reward_zero_std`` (without it, a step whose batch ``reward_std`` is 0 counts as all
groups uniform). A high share means one of two opposite things: the task is solved (every completion right, the
reward at the top of its range: saturation, healthy) or the run is stuck (every completion equally wrong, the reward
at the bottom). Each step is read with the moving average of the share (``smoothing_fraction`` of the points) and
the reward's position in its range (:func:`~pgrpo.diagnose.modes.signals.reward_position`: ``reward_range`` if
given, else the run's own range; with several reward functions the lowest position of any that moved): a step is
*stuck* when the share is at or above ``frac_high`` and the position at or below ``stuck_position``, *saturated*
when the share is that high above it. A reward that never moved beyond its noise has no range: its zero-spread groups
are read as stuck (they carried no signal from the first step), unless ``reward_range`` places it at the top.
Flagged when at least half of the late window is stuck and a persistent onset exists (the first stuck step from
which ``persistence`` of the later steps are stuck), or when a stuck phase that resolved lasted at least
``modes.min_episode_fraction`` of the logged points with a mean share of at least ``(1 + frac_high) / 2``
and the reward in the bottom ``stuck_position / 2`` of its range (zero-spread groups of the first steps that the run
left; at small ``G`` many groups are uniform by chance alone, and mid-range they are polarised prompts, not a stuck
run).
Episodes: the runs of stuck steps, bridged over gaps of one moving-average window.

The same signal per reward function: a function that scored every completion alike at every logged step (a
*silent* one, :func:`~pgrpo.diagnose.modes.signals.silent_functions`: its logged mean exactly constant, its logged
s.d. 0) cancels in every group's advantage; the verdict names it (``numbers.silent_functions``) without flagging the
run, which may learn from its other functions.
"""

from __future__ import annotations

import numpy as np

from pgrpo.diagnose.modes.record import DEGENERACY, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import (
    curve,
    episodes_from_mask,
    long_episodes,
    persistent_onset,
    reward_position,
    silent_functions,
    smooth,
    smoothing_window,
)
from pgrpo.diagnose.numerics import fmt, window_mask
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig


def _zero_spread(curves: RunCurves, config: DiagnosticsConfig) -> tuple[np.ndarray, np.ndarray, str] | None:
    if curves.has("frac_reward_zero_std") and curves.series("frac_reward_zero_std")[0].size >= config.modes.min_points:
        steps, values, _ = curves.series("frac_reward_zero_std")
        return steps, values, "frac_reward_zero_std"
    if curves.has("reward_std") and curves.series("reward_std")[0].size >= config.modes.min_points:
        steps, values, _ = curves.series("reward_std")
        return steps, (values <= 1e-9).astype(float), "reward_std == 0 (batch uniform; frac_reward_zero_std missing)"
    return None


def degeneracy(curves: RunCurves, config: DiagnosticsConfig) -> ModeVerdict:
    cfg = config.modes.degeneracy
    thresholds = {"frac_high": cfg.frac_high, "stuck_position": cfg.stuck_position,
                  "persistence": config.modes.persistence, "reward_range": config.modes.reward_range,
                  "late_fraction": config.late_fraction}
    spread = _zero_spread(curves, config)
    if spread is None:
        return not_run(DEGENERACY, "columns 'frac_reward_zero_std' and 'reward_std' missing (or too few points)",
                       ["frac_reward_zero_std"], thresholds=thresholds)
    steps, share, source = spread
    reward = curve(curves, "reward", config)
    if reward is None:
        return not_run(DEGENERACY, "column 'reward' missing: a zero-spread share alone cannot tell a stuck run from a "
                                   "solved task", ["reward"], thresholds=thresholds)
    share_smooth = smooth(share, smoothing_window(share.size, config.modes.smoothing_fraction))
    where = reward_position(curves, reward, config)
    position = np.interp(steps, where.steps, where.position) if where.moved else np.zeros(steps.size)
    high = share_smooth >= cfg.frac_high
    stuck = high & (position <= cfg.stuck_position)
    saturated = high & ~stuck
    late = window_mask(steps, config.late_fraction, late=True)
    early = window_mask(steps, config.early_fraction, late=False)
    late_share = float(np.mean(share[late]))
    numbers = {"source": source, "late_share": late_share, "early_share": float(np.mean(share[early])),
               "late_stuck_fraction": float(np.mean(stuck[late])),
               "late_saturated_fraction": float(np.mean(saturated[late])),
               "late_position": float(np.mean(position[late])), "reward_lo": where.lo, "reward_hi": where.hi,
               "range_source": where.source, "reward_moved": where.moved, "limiting_column": where.limiting}
    pos_text = (f"reward at {numbers['late_position']:.0%} of its range [{fmt(where.lo)}, {fmt(where.hi)}] "
                f"({where.source}" + (f"; lowest: {where.limiting}" if where.limiting != "reward" else "") + ")"
                if where.moved or config.modes.reward_range is not None
                else f"reward never moved beyond its noise (range [{fmt(where.lo)}, {fmt(where.hi)}]; with no "
                     f"reward_range declared it cannot be placed, and a task solved from the start reads as "
                     f"stuck: declare the range (--reward-range LO HI) to tell them apart)")
    text = (f"zero-spread share late {fmt(late_share)} ({source}; high at >= {cfg.frac_high:g}); {pos_text}; "
            f"late window {numbers['late_stuck_fraction']:.0%} stuck, {numbers['late_saturated_fraction']:.0%} "
            "saturated")
    silent = silent_functions(curves, config.modes.min_points)
    numbers["silent_functions"] = silent
    if silent:
        text += ("; silent reward functions (every completion scored alike at every logged step): "
                 + ", ".join(str(f["function"]) for f in silent))
    onset = persistent_onset(steps, stuck, config.modes.persistence)
    window = smoothing_window(share.size, config.modes.smoothing_fraction)
    episodes = episodes_from_mask(steps, stuck, share_smooth / cfg.frac_high, min_points=max(2, window // 2),
                                  max_gap=window, values=share_smooth)
    strong = (1 + cfg.frac_high) / 2  # a resolved phase must be clearly stuck (small G alone leaves many uniform)
    def inside(e: dict) -> np.ndarray:
        return (steps >= e["start"]) & (steps <= (e["end"] if e["end"] is not None else steps[-1]))

    long = [e for e in long_episodes(episodes, steps, config.modes.min_episode_fraction)
            if float(np.mean(share_smooth[inside(e)])) >= strong
            and float(np.mean(position[inside(e)])) <= cfg.stuck_position / 2]
    ongoing = numbers["late_stuck_fraction"] >= 0.5 and onset is not None
    kept = [e for e in episodes if e in long or (ongoing and (e["end"] is None or e["end"] >= onset))]
    if ongoing:
        return flagged(DEGENERACY, "stuck: zero-spread groups at the bottom of the reward range", text, onset,
                       late_share / cfg.frac_high, numbers, thresholds, episodes=kept or None)
    if long:
        spans = ", ".join(f"{fmt(e['start'])}-{fmt(e['end'])}" for e in long)
        return flagged(DEGENERACY, "stuck for a phase that resolved",
                       f"{text}; stuck at steps {spans}, then the groups carried signal", long[0]["start"],
                       max(e["peak_value"] or cfg.frac_high for e in long) / cfg.frac_high, numbers, thresholds,
                       episodes=long)
    if numbers["late_saturated_fraction"] >= 0.5:
        return clear(DEGENERACY, "saturation: zero-spread groups at the top of the reward range (a solved task)",
                     text, numbers, thresholds)
    return clear(DEGENERACY, "groups carry signal", text, numbers, thresholds)
