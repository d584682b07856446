"""Reward hacking as a failure mode (Section 5.2, Figure 2): the verdict of
:func:`pgrpo.diagnose.readouts.hacking.reward_hacking` (deficit of the doubly normalised eval progress below the diagonal and
the rolling coupling ratio ``rho``) read as flagged / not flagged / could not run, with where it began.

Flagged on the *hacking signature*; not flagged when train and eval *co-saturate*; null when no eval column was
logged (hacking cannot be told from learning without a held-out curve) or the read-outs are inconclusive. Where the
reward function that scores the task stands in for the eval column (:func:`pgrpo.diagnose.readouts.hacking.gold_column`),
a reward that did not rise beyond its noise (net or trend, :func:`pgrpo.diagnose.modes.no_learning.rise_test`) is
not flagged: the gold term has nothing to follow. Onset:
the first eval step from which the gap ``u_train - u_eval`` stays above ``deficit_max`` (``modes.persistence`` of
the later eval points), else the first interior window with ``rho < rho_min``, else (an eval curve that never rose)
where the train reward began to rise.
"""

from __future__ import annotations

import numpy as np

from pgrpo.diagnose.modes.no_learning import rise_test
from pgrpo.diagnose.modes.record import HACKING, ModeVerdict, clear, flagged, not_run
from pgrpo.diagnose.modes.signals import curve, departure_onset, persistent_onset
from pgrpo.diagnose.records import CO_SATURATING, NOT_RUN, DiagnosticResult, RunCurves
from pgrpo.diagnose.records import HACKING as HACKING_SIGNATURE
from pgrpo.diagnose.numerics import fmt
from pgrpo.diagnose.settings import DiagnosticsConfig


def hacking(curves: RunCurves, config: DiagnosticsConfig, figure2: DiagnosticResult) -> ModeVerdict:
    cfg = config.reward_hacking
    thresholds = {"rho_min": cfg.rho_min, "deficit_max": cfg.deficit_max, "window_fraction": cfg.window_fraction,
                  "interior": list(cfg.interior), "min_eval_points": cfg.min_eval_points}
    numbers = {k: v for k, v in figure2.numbers.items() if k not in ("train_fit", "eval_fit")}
    if figure2.verdict == NOT_RUN:
        return not_run(HACKING, f"{figure2.reason}: without a held-out curve hacking cannot be told from learning",
                       figure2.missing, numbers, thresholds)
    reward = curve(curves, "reward", config)
    if "held_out" in numbers and reward is not None:
        test = rise_test(reward, config.modes.no_learning.rise_over_noise)
        if not (test["net_rise"] > test["net_threshold"] or test["trend_rise"] > test["trend_threshold"]):
            return clear(HACKING, "the reward did not rise: nothing for the gold term to follow",
                         f"reward {fmt(reward.early)} -> {fmt(reward.late)}, within its noise; "
                         f"{numbers['held_out']}", numbers, thresholds)
    if figure2.verdict == CO_SATURATING:
        return clear(HACKING, "train and eval co-saturate", figure2.reason, numbers, thresholds)
    if figure2.verdict != HACKING_SIGNATURE:
        return not_run(HACKING, f"inconclusive: {figure2.reason}", numbers=numbers, thresholds=thresholds)
    series = figure2.series
    onset = None
    if "u_train" in series:
        gap = np.asarray(series["u_train"], float) - np.asarray(series["u_eval"], float)
        steps = np.asarray(series["eval_steps"], float)
        onset = persistent_onset(steps, gap > cfg.deficit_max, config.modes.persistence)
        if onset is None:
            rho, centers = np.asarray(series["rho"], float), np.asarray(series["rho_steps"], float)
            low = np.flatnonzero(np.isfinite(rho) & (rho < cfg.rho_min))
            onset = float(centers[low[0]]) if low.size else None
    if onset is None and reward is not None:
        band = config.modes.no_learning.rise_over_noise * reward.se_early_late
        above = np.flatnonzero(reward.smooth > reward.early + band)
        index = int(above[0]) if above.size else reward.n - 1
        onset = departure_onset(reward.steps, reward.smooth, reward.early, band / 2, +1, index)
    deficit = numbers.get("deficit")
    margin = (deficit / cfg.deficit_max) if isinstance(deficit, float) and deficit > 0 else 1.0
    if numbers.get("decided_by") == "gold_share":
        margin = cfg.gold_share_min / max(numbers["gold_share"]["share"], 1e-9)  # how far below the share the gold term is
    return flagged(HACKING, "hacking signature: eval does not follow the train reward", figure2.reason, onset,
                   max(margin, 1.0), numbers, thresholds)
