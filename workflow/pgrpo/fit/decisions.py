"""The decisions a forecast serves (beyond the paper; the mean curves are the laws of Section 3.5, Eq. 14-16): when
a run reaches a target level, which runs of a sweep end highest, and which ones to stop now.

* :func:`target_reach`: ``P(plateau >= X)`` from the forecaster's plateau draws and the first step at which the
  mean curve (and each mean-curve draw) reaches ``X``, with its central 80% band over the draws that reach it, or
  "not within the horizon" where fewer than half do;
* :func:`p_highest`: ``P(run i ends highest)`` from independent plateau draws of the runs (the share of joint
  draws in which run ``i``'s plateau is the largest);
* :func:`pairs_ordered`: the share of pairs of runs a score orders as the truth does, over the pairs whose order
  the truth settles (:func:`settled_pairs`: their true ends differ by more than 1% of the range and, where the truth
  is the denoised reference, by more than twice the s.e. of their difference);
* :func:`brier`: the multi-class Brier score ``sum_i (p_i - 1[i is the best])^2`` of those probabilities;
* :func:`stop_decisions`: the stop rule of Domhan et al. (2015): stop a run when ``P(its plateau > the best level
  seen so far) < threshold`` (0.05), and :func:`stop_rule_outcome` its saving (the share of the sweep's steps not
  run) against its loss (the best final level of all runs minus that of the runs kept, over the reward's range),
  and :func:`steps_saved_ceiling` the most any stop rule deciding at the cut can save.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from pgrpo.fit.intervals import band_holding

#: Domhan et al.'s threshold: a run whose plateau beats the best so far with probability below it is stopped
STOP_THRESHOLD = 0.05

#: a pair of runs counts toward the pairs ordered right when their true ends differ by more than this share of the
#: reward's range and, where the truth is an estimate (the denoised reference), by more than this many s.e. of
#: their difference: an order the truth does not settle is not one a forecast can get right
PAIR_TOLERANCE_SHARE, PAIR_TOLERANCE_Z = 0.01, 2.0


@dataclass
class TargetReach:
    """``target``: the level asked about; ``p_plateau_at_least``: P(plateau >= target) over the plateau draws;
    ``already``: whether the log's smoothed level at the cut is already at or past it; ``step``: the first step at
    which the mean curve reaches it (NaN: not within the horizon), ``lo80``/``hi80`` its band over the draws that
    reach it, ``share_reached``: the share of mean-curve draws that reach it by the horizon; ``message``: in words."""

    target: float
    p_plateau_at_least: float
    already: bool
    step: float
    lo80: float
    hi80: float
    share_reached: float
    horizon: float
    message: str

    def to_dict(self) -> dict:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


def _first_crossing(steps: np.ndarray, curve: np.ndarray, target: float, rising: bool) -> float:
    hit = curve >= target if rising else curve <= target
    return float(steps[int(np.argmax(hit))]) if hit.any() else float("nan")


def target_reach(steps: Sequence[float], mean: Sequence[float], mean_draws: np.ndarray, plateau_draws: np.ndarray,
                 target: float, level_at_cut: float) -> TargetReach:
    """When the run reaches ``target`` (see the module docstring): a run whose mean curve ends above its level at the
    cut (``level_at_cut``, the log's smoothed end level) reaches it from below, one whose curve ends below it (a loss,
    a length) from above; a target already passed in that direction is ``already`` reached."""
    steps, mean = np.asarray(steps, float), np.asarray(mean, float)
    draws = np.atleast_2d(np.asarray(mean_draws, float))
    rising = bool(mean[-1] >= level_at_cut) if mean.size else True
    plateau_draws = np.asarray(plateau_draws, float)
    p_at_least = float(np.mean(plateau_draws >= target)) if plateau_draws.size else float("nan")
    horizon = float(steps[-1]) if steps.size else float("nan")
    already = bool(level_at_cut >= target) if rising else bool(level_at_cut <= target)
    point = _first_crossing(steps, mean, target, rising) if steps.size else float("nan")
    crossings = np.array([_first_crossing(steps, d, target, rising) for d in draws]) if steps.size else np.array([])
    reached = np.isfinite(crossings)
    share = float(reached.mean()) if crossings.size else 0.0
    lo = hi = float("nan")
    if share >= 0.5:
        band = band_holding(crossings[reached], point)
        lo, hi = band["lo80"], band["hi80"]
        if share < 0.9:
            hi = float("nan")  # more than 10% of the draws never reach it: the band's top is beyond the horizon
    if already:
        message = f"already at {target:g} at the cut (smoothed level {level_at_cut:.3g})"
    elif np.isfinite(point):
        band = (f" (80% band {lo:.0f} to {'beyond the horizon' if not np.isfinite(hi) else f'{hi:.0f}'})"
                if np.isfinite(lo) else "")
        message = f"reaches {target:g} at step {point:.0f}{band}; {share:.0%} of the draws reach it by step {horizon:.0f}"
    else:
        message = (f"not within the horizon (step {horizon:.0f}): the mean curve does not reach {target:g}; "
                   f"{share:.0%} of the draws do")
    return TargetReach(float(target), p_at_least, already, point, lo, hi, share, horizon, message)


def p_highest(plateau_draws: Sequence[np.ndarray], seed: int = 0) -> np.ndarray:
    """P(run i ends highest): the runs' plateau draws taken as independent, each resampled to a common count; ties
    (equal draws) are shared."""
    if not plateau_draws:
        return np.array([])
    n = max(len(d) for d in plateau_draws)
    rng = np.random.default_rng(seed)
    joint = np.vstack([np.asarray(d, float)[rng.integers(0, len(d), n)] if len(d) != n else np.asarray(d, float)
                       for d in plateau_draws])
    top = joint.max(axis=0)
    winners = joint == top[None, :]
    return (winners / winners.sum(axis=0, keepdims=True)).mean(axis=1)


def settled_pairs(truth: Sequence[float], tolerance: float = 0.0, truth_se: Sequence[float] | None = None,
                  z: float = 0.0) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j``, whose true values differ by more than ``tolerance`` and, given the truths'
    s.e., by more than ``z sqrt(se_i^2 + se_j^2)``: the pairs whose order the truth itself settles."""
    truth = np.asarray(truth, float)
    se = np.zeros(truth.size) if truth_se is None else np.nan_to_num(np.asarray(truth_se, float), nan=0.0)
    return [(i, j) for i in range(truth.size) for j in range(i + 1, truth.size)
            if np.isfinite(truth[i] - truth[j])
            and abs(truth[i] - truth[j]) > max(tolerance, z * math.hypot(se[i], se[j]))]


def pairs_ordered(score: Sequence[float], truth: Sequence[float], tolerance: float = 0.0,
                  truth_se: Sequence[float] | None = None, z: float = 0.0) -> float:
    """The share of the :func:`settled_pairs` that ``score`` orders as the truth does (a tie in ``score`` counts
    half); NaN without such a pair."""
    return _share_ordered(score, truth, settled_pairs(truth, tolerance, truth_se, z))


def _share_ordered(score: Sequence[float], truth: Sequence[float], pairs: Sequence[tuple[int, int]]) -> float:
    """The share of ``pairs`` that ``score`` orders as ``truth`` does (a tie in ``score`` counts half)."""
    score, truth = np.asarray(score, float), np.asarray(truth, float)
    right = 0.0
    for i, j in pairs:
        s, gap = score[i] - score[j], truth[i] - truth[j]
        right += 0.5 if s == 0 else float(np.sign(s) == np.sign(gap))
    return right / len(pairs) if pairs else float("nan")


def brier(probabilities: Sequence[float], truth: Sequence[float]) -> float:
    """``sum_i (p_i - o_i)^2`` with ``o`` one-hot at the truly highest run (ties share it)."""
    p, truth = np.asarray(probabilities, float), np.asarray(truth, float)
    best = truth == np.max(truth)
    outcome = best / best.sum()
    return float(np.sum((p - outcome) ** 2))


def p_beats(plateau_draws: Sequence[np.ndarray], best_so_far: float) -> np.ndarray:
    """Per run, P(its plateau > ``best_so_far``)."""
    return np.array([float(np.mean(np.asarray(d, float) > best_so_far)) for d in plateau_draws])


def stop_decisions(plateau_draws: Sequence[np.ndarray], levels: Sequence[float],
                   threshold: float = STOP_THRESHOLD) -> tuple[np.ndarray, np.ndarray, float]:
    """Domhan's rule on runs at their cut: (stop?, P(beats the best so far), the best so far), the best so far being
    the highest of the runs' ``levels`` (their smoothed levels at the cut). The run that holds it is never stopped."""
    levels = np.asarray(levels, float)
    best_so_far = float(np.max(levels))
    p = p_beats(plateau_draws, best_so_far)
    stop = (p < threshold) & (levels < best_so_far)
    return stop, p, best_so_far


@dataclass
class StopOutcome:
    """The stop rule applied at a cut ``fraction`` of every run of a sweep: ``stopped`` runs, ``steps_saved``: the
    share of the sweep's steps not run, ``loss``: the best true final level minus the best among the kept runs
    (0 when the best is kept), over the reward's range (``loss_share``) and over the best level (``loss_of_best``)."""

    stopped: int
    runs: int
    steps_saved: float
    loss: float
    loss_share: float
    loss_of_best: float


def stop_rule_outcome(stop: Sequence[bool], fraction: float, true_final: Sequence[float],
                      reward_span: float) -> StopOutcome:
    """Score a stop decision taken at ``fraction`` of each run against the runs' true final levels."""
    stop, final = np.asarray(stop, bool), np.asarray(true_final, float)
    kept = final[~stop]
    best = float(np.max(final))
    loss = best - float(np.max(kept)) if kept.size else best - float(np.min(final))
    saved = float(stop.mean() * (1.0 - fraction)) if stop.size else 0.0
    return StopOutcome(int(stop.sum()), int(stop.size), saved, loss,
                       loss / reward_span if reward_span > 0 else float("nan"),
                       loss / abs(best) if best else float("nan"))


def score_sweep(plateau_draws: Sequence[np.ndarray], plateau_forecast: Sequence[float],
                levels_at_cut: Sequence[float], true_final: Sequence[float], fraction: float, span: float,
                threshold: float = STOP_THRESHOLD, true_final_se: Sequence[float] | None = None) -> dict[str, float]:
    """The decision scores of one method on one sweep cut at ``fraction``: pairs ordered right by the forecast
    plateaus and by the levels at the cut (pairs whose true finals differ by more than
    :data:`PAIR_TOLERANCE_SHARE` of ``span`` and, given ``true_final_se``, by more than :data:`PAIR_TOLERANCE_Z`
    s.e. of their difference; ``pairs``: how many), the Brier score of P(ends highest), and the stop rule's saving
    and loss (:func:`stop_rule_outcome`)."""
    pairs = settled_pairs(true_final, PAIR_TOLERANCE_SHARE * span, true_final_se, PAIR_TOLERANCE_Z)
    stop, _, _ = stop_decisions(plateau_draws, levels_at_cut, threshold)
    outcome = stop_rule_outcome(stop, fraction, true_final, span)
    return {
        "runs": len(true_final), "pairs": len(pairs),
        "pairs_right": _share_ordered(plateau_forecast, true_final, pairs),
        "pairs_right_at_cut": _share_ordered(levels_at_cut, true_final, pairs),
        "brier": brier(p_highest(plateau_draws), true_final),
        "stopped": outcome.stopped, "steps_saved": outcome.steps_saved, "stop_loss_share": outcome.loss_share,
        "stop_loss_of_best": outcome.loss_of_best,
        "steps_saved_ceiling": steps_saved_ceiling(len(true_final), fraction),
    }


def steps_saved_ceiling(runs: int, fraction: float) -> float:
    """The most of a sweep's steps any stop rule that decides at the cut ``fraction`` and keeps a run can save:
    every run but one stopped there, ``(runs - 1) / runs x (1 - fraction)`` (the scale of
    :func:`stop_rule_outcome`'s saving). A saving target above it is out of any stop rule's reach at that cut,
    whatever the forecast: two runs cut at a quarter save at most 37.5%."""
    return (runs - 1) / runs * (1.0 - fraction) if runs > 0 else 0.0
