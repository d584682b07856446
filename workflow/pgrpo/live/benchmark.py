"""The live benchmark's scoring: the reads of :func:`pgrpo.stages.live.replay_curves` (the callback's reads of the
failure modes of Section 5, Figures 2-5, over a saved log as if live) scored against the labelled onsets of the
forecast/diagnose corpus, for our rules and for the post-training toolkit's live callback replayed the same way.

Per run and failure mode, with ``R`` the read interval in steps (``every`` x the median logging interval) and
``span`` the run's step span:

- **detection latency**: the step of the first read that flags the mode minus the labelled onset (runs labelled yes
  with an onset; negative: flagged before it), in steps, in reads (``/ R``) and as a share of the run (``/ span``);
  the target (issue 20) is met when the median of ``latency / max(10% of span, 3 R)`` is at most 1, a run the
  rules never flag counting as an infinite latency;
- **false alarms**: runs labelled no for the mode that some read flags; **false stops**: those the stop rule with
  ``stop_on = [mode]`` stops (target: at most 1 per 10 runs labelled no);
- **the false-stop rate's 95% interval**: Clopper and Pearson's exact binomial interval for the rate behind
  ``k`` false stops in ``n`` healthy runs (:func:`rate_interval`): how far a handful of healthy runs pins the rate
  the target is about;
- **steps saved**: on a run labelled yes, the share of its steps after the stop, ``(last - stop) / span`` (0 when
  not stopped);
- **reward lost**: on a false stop, the final reward (mean of the run's last 10% of rows) minus the reward at the
  stop (mean of as many rows up to it), over the run's reward range (max - min): what stopping there forwent.

The stop rules are :class:`pgrpo.live.stop_rules.StopRules` (ours: flagged with severity at least medium at two
consecutive reads; the toolkit's callback: one "critical", here ``high``, insight at one read, over its 200-row
window). Our stop lands one read after the read that decided it (``lag_reads = 1``), as the callback's default
background reads do (``lag_reads = 0`` scores ``background=False``); the toolkit's callback reads synchronously
(``lag_reads = 0``). ``mode = all``: every mode in ``stop_on``; failed runs are those with any mode labelled yes,
healthy runs those with none. Pure: reads in, rows and records out.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.diagnose.benchmark import BLIND, GROUPS, SPLITS, in_group  # noqa: F401 (the live tables' groups too)
from pgrpo.diagnose.modes.record import MODES
from pgrpo.live.reads import DEFAULT_FORECAST_EVERY, DEFAULT_LAG_READS, LiveRead, LiveSettings
from pgrpo.live.stop_rules import StopRules

RULE_SETS: tuple[str, ...] = ("ours", "toolkit")

#: the post-training toolkit's DiagnosticsCallback: every 10 logged steps, over its last 200 rows
TOOLKIT_EVERY, TOOLKIT_WINDOW = 10, 200
#: the targets of issue 20: latency in units of max(10% of the run, 3 reads); false stops per healthy run
LATENCY_SHARE, LATENCY_READS, FALSE_STOP_RATE = 0.1, 3, 0.1
#: the share of a run's rows the final reward (and the reward at a stop) is the mean of
FINAL_SHARE = 0.1


def live_settings(rule_set: str, every: int = 10, forecast_every: int = DEFAULT_FORECAST_EVERY) -> LiveSettings:
    """The settings each rule set is replayed with: ours as the callback's defaults (report only; the stop rules
    are applied per mode afterwards); the toolkit's callback with its cadence, window and stop on one critical
    insight, no forecast (it has none)."""
    if rule_set == "ours":
        return LiveSettings(every, forecast_every=forecast_every)
    return LiveSettings(TOOLKIT_EVERY, forecast_every=0, rule_set="toolkit", window_rows=TOOLKIT_WINDOW,
                        consecutive_reads=1, stop_severities=("high",))


def default_lag_reads(rule_set: str) -> int:
    """Reads by which a rule set's stop lags its deciding read: ours as the callback by default (background reads,
    :data:`pgrpo.live.reads.DEFAULT_LAG_READS`), the toolkit's callback none (it reads on the trainer's thread)."""
    return DEFAULT_LAG_READS if rule_set == "ours" else 0


def first_stop(reads: Sequence[LiveRead], settings: LiveSettings, stop_on: Sequence[str],
               stoppable: int, lag_reads: int = DEFAULT_LAG_READS) -> float | None:
    """The step where the stop rules with ``stop_on`` first stop, over the first ``stoppable`` reads (the read at
    the end of training stops nothing), or None. ``lag_reads`` (the callback's default 1: background reads): a
    decision at read ``i`` stops at read ``i + lag_reads``'s step, nothing when that read is not a stoppable one
    (it would be applied at the end of training)."""
    rules = StopRules(replace(settings, stop_on=tuple(stop_on), stop_if_plateau_below=None, stop_if_reached=None))
    for index, read in enumerate(reads[:stoppable]):
        if rules.update(read) is not None:
            lands = index + int(lag_reads)
            return float(reads[lands].step) if lands < min(stoppable, len(reads)) else None
    return None


def _mean_window(values: np.ndarray, end: int, n: int) -> float:
    part = values[max(0, end - n):end]
    return float(np.mean(part)) if part.size else float("nan")


def reward_lost(steps: np.ndarray, rewards: np.ndarray, stop_step: float) -> float | None:
    """(final reward - reward at the stop) / the run's reward range (module docstring); None if the range is 0."""
    ok = np.isfinite(rewards)
    steps, rewards = steps[ok], rewards[ok]
    span = float(np.max(rewards) - np.min(rewards)) if rewards.size else 0.0
    if span <= 0:
        return None
    n = max(1, int(math.ceil(FINAL_SHARE * rewards.size)))
    at_stop = int(np.searchsorted(steps, stop_step, side="right"))
    return (_mean_window(rewards, rewards.size, n) - _mean_window(rewards, at_stop, n)) / span


def run_rows(name: str, split: str, labels: Mapping[str, Mapping[str, Any]], rule_set: str,
             reads: Sequence[LiveRead], settings: LiveSettings, stoppable: int, steps: np.ndarray,
             rewards: np.ndarray, lag_reads: int | None = None, blind: bool = False) -> list[dict[str, Any]]:
    """One row per mode (and ``all``) of one run under one rule set (module docstring); the stops land
    ``lag_reads`` reads after the read that decided (:func:`first_stop`; None: :func:`default_lag_reads`);
    ``blind``: the run is one of the blind batch (:data:`BLIND`)."""
    lag_reads = default_lag_reads(rule_set) if lag_reads is None else int(lag_reads)
    steps = np.asarray(steps, float)
    first, last = float(steps[0]), float(steps[-1])
    span = max(last - first, 1.0)
    interval = float(np.median(np.diff(steps))) if steps.size > 1 else 1.0
    read_interval = settings.every * interval
    allowance = max(LATENCY_SHARE * span, LATENCY_READS * read_interval)
    base = {"log": name, "split": split, "rule_set": rule_set, "first_step": first, "last_step": last,
            "read_interval": read_interval, "allowance": allowance, "reads": len(reads), "lag_reads": lag_reads,
            "blind": bool(blind)}
    rows = []
    for mode in (*MODES, "all"):
        if mode == "all":
            known = [labels[m]["label"] for m in MODES]
            label = True if any(v is True for v in known) else False
            onsets = [labels[m]["onset_step"] for m in MODES if labels[m]["label"] and
                      labels[m]["onset_step"] is not None]
            onset = min(onsets) if onsets else None
            flags = [r.step for r in reads if any(v.get("flagged") for v in r.modes.values())]
            covered = True
            stop_on: Sequence[str] = MODES
        else:
            label, onset = labels[mode]["label"], labels[mode]["onset_step"]
            flags = [r.step for r in reads if (r.modes.get(mode) or {}).get("flagged")]
            covered = any((r.modes.get(mode) or {}).get("flagged") is not None for r in reads)
            stop_on = (mode,)
        first_flag = float(flags[0]) if flags else None
        stop = first_stop(reads, settings, stop_on, stoppable, lag_reads)
        row = {**base, "mode": mode, "label": label, "label_onset": onset, "covered": covered,
               "first_flag": first_flag, "stop_step": stop, "latency": None, "latency_share": None,
               "latency_reads": None, "latency_ok": None, "saved_share": None, "reward_lost": None}
        if label and onset is not None:
            row["latency"] = None if first_flag is None else first_flag - float(onset)
            if row["latency"] is not None:
                row.update(latency_share=row["latency"] / span, latency_reads=row["latency"] / read_interval,
                           latency_ok=row["latency"] <= allowance)
            else:
                row["latency_ok"] = False
        if label:
            row["saved_share"] = 0.0 if stop is None else (last - stop) / span
        elif label is False and stop is not None:
            row["reward_lost"] = reward_lost(steps, np.asarray(rewards, float), stop)
        rows.append(row)
    return rows


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def rate_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper and Pearson's exact interval for a binomial rate from ``k`` events in ``n`` trials: the ``alpha / 2``
    quantile of Beta(k, n - k + 1) and the ``1 - alpha / 2`` quantile of Beta(k + 1, n - k), 0 and 1 at the ends."""
    from scipy.stats import beta

    if n <= 0:
        return (0.0, 1.0)
    alpha = 1.0 - level
    lo = 0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def summary_records(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per split (and the blind batch, :data:`GROUPS`), rule set and mode: failed runs, detected, stopped, the
    median latency (steps, reads, share of the run) and whether the latency target is met; healthy runs, false
    alarms and stops per healthy run and whether the false-stop target is met; the mean share of steps saved on
    failed runs; the mean reward lost on false stops."""
    records = []
    for split in GROUPS:
        for rule_set in RULE_SETS:
            for mode in (*MODES, "all"):
                part = [r for r in rows if in_group(r, split) and r["rule_set"] == rule_set and r["mode"] == mode]
                if not part:
                    continue
                failed = [r for r in part if r["label"] is True]
                healthy = [r for r in part if r["label"] is False]
                timed = [r for r in failed if r["label_onset"] is not None]
                latencies = [r["latency"] for r in timed if r["latency"] is not None]
                normalised = [r["latency"] / r["allowance"] if r["latency"] is not None else math.inf
                              for r in timed]
                lost = [r["reward_lost"] for r in healthy if r["reward_lost"] is not None]
                false_stops = sum(r["stop_step"] is not None for r in healthy)
                records.append({
                    "split": split, "rule_set": rule_set, "mode": mode,
                    "covered": any(r["covered"] for r in part), "logs": len(part),
                    "failed": len(failed), "detected": sum(r["first_flag"] is not None for r in failed),
                    "stopped": sum(r["stop_step"] is not None for r in failed), "timed": len(timed),
                    "median_latency": _median(latencies),
                    "median_latency_reads": _median([r["latency_reads"] for r in timed
                                                     if r["latency_reads"] is not None]),
                    "median_latency_share": _median([r["latency_share"] for r in timed
                                                     if r["latency_share"] is not None]),
                    "latency_met": (None if not timed else bool(np.median(normalised) <= 1.0)),
                    "healthy": len(healthy), "false_alarms": sum(r["first_flag"] is not None for r in healthy),
                    "false_stops": false_stops,
                    "false_stops_per_run": false_stops / len(healthy) if healthy else None,
                    "false_stop_met": (None if not healthy else false_stops / len(healthy) <= FALSE_STOP_RATE),
                    "saved_share": _mean([r["saved_share"] for r in failed]),
                    "reward_lost": _mean(lost)})
    return records
