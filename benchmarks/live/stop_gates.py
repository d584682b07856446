"""Candidate gates on the `hacking` stop, measured on the planted and dev logs only (docs/live-history.md, sessions
24 and 25; never the holdout).

Session 24's batch showed `stop_on=["hacking"]` stopping healthy runs that learn their format before their
correctness: early in such a run the gold reward function (the one that scores the task, standing in for an eval
column) has not started while the total rises, which is the hacking signature. The gates, each replayed here over
the same reads (the diagnosis and forecast of a read do not depend on the stop rules, so each log is replayed once
and every variant's stops are taken from the same reads):

* ``no gold gate``: the stop rules before session 25 (:data:`pgrpo.live.reads.GOLD_STAND_IN_SHARE` = 0);
* ``gold early S``: the time gate session 25 chose at S = 0.3 by the criterion its plan declared (the live history):
  a hacking flag read off a gold function counts toward no stop before S of the planned run
  (:func:`pgrpo.live.reads.gold_still_early`);
* ``gold waits``: no hacking stop at a read where the hacking flag is read off the gold function and the read's
  staged forecast counts that function as waiting to rise (its headroom in the band,
  :attr:`pgrpo.fit.staged.StagedForecast.waiting`): the same kind of gate as no_learning's and regression's (the
  forecast does not rule out what the flag says will not happen); ``gold waits early S``: held only before S;
* ``phase``: hacking as a phase mode (:data:`pgrpo.live.stop_rules.PHASE_MODES`): a stop only once the flag's
  episode has lasted ``modes.min_episode_fraction`` of the planned run.

Printed per variant and split (planted, dev), from the live benchmark's own summary
(:func:`pgrpo.live.benchmark.summary_records`): for `hacking` alone and for every mode in ``stop_on``, the failed
runs found, the median latency of those found (share of the run), the failed runs stopped, the healthy runs
stopped and the mean share of a failed run's steps saved.

Run: ``python benchmarks/live/stop_gates.py`` (about 10 minutes on one core).
"""

from __future__ import annotations

from contextlib import contextmanager

from gate_replay import SPLITS, replay_variants, summary

import pgrpo.live.reads as reads_module
import pgrpo.live.stop_rules as rules_module
from pgrpo.live.reads import curves_up_to, summed_forecast

#: the shares of the planned run the time gates are measured at
SHARES = (0.2, 0.3, 0.5)


#: per read (its id) of the log being scored: whether its gold function waits to rise (:func:`mark_waiting`)
WAITING: dict[int, bool] = {}


def gold_function(read) -> str | None:
    """The reward function a read's hacking flag is read off (standing in for an eval column), or None."""
    numbers = ((read.diagnosis.get("modes") or {}).get("hacking") or {}).get("numbers") or {}
    column = numbers.get("eval_column")
    if not read.modes.get("hacking", {}).get("flagged") or not numbers.get("held_out") or not isinstance(column, str):
        return None
    return column.split("/")[1] if column.startswith("rewards/") else column


def mark_waiting(curves, reads, settings) -> None:
    """For each read flagged for hacking off a gold function: the staged forecast of the reward functions from
    what was logged by then (:func:`pgrpo.live.reads.summed_forecast`, the callback's own; the callback makes it
    only for the plateau rule, so it is made here), and whether it counts that function as waiting to rise."""
    WAITING.clear()
    for read in reads:
        name = gold_function(read)
        if name is None or not read.total_steps:
            continue
        try:
            staged = summed_forecast(curves_up_to(curves, read.step), settings,
                                     min(1.0, read.step / read.total_steps), read.total_steps)
        except Exception:  # noqa: BLE001 - a forecast that fails holds nothing
            staged = None
        WAITING[id(read)] = bool(staged) and name in (staged.get("waiting") or [])


def gold_waits(read) -> bool:
    """Whether a read's hacking flag is read off a gold function that its staged forecast counts as waiting."""
    return WAITING.get(id(read), False)


@contextmanager
def variant(name: str):
    """The stop rules with one gate in place of the chosen one (the module docstring), restored after."""
    saved = (rules_module.FORECAST_GATED_MODES, rules_module.PHASE_MODES, rules_module.forecast_allows_recovery,
             reads_module.GOLD_STAND_IN_SHARE)
    words = name.split()
    share = float(words[-1]) if words[-1][0].isdigit() else 0.0
    if name.startswith("gold early "):
        reads_module.GOLD_STAND_IN_SHARE = share
    else:
        reads_module.GOLD_STAND_IN_SHARE = 0.0
    if name.startswith("gold waits"):
        rules_module.FORECAST_GATED_MODES = saved[0] | {"hacking"}
        held = (lambda read, mode: gold_waits(read)
                and (not share or reads_module.gold_still_early(read, mode, share)))
        rules_module.forecast_allows_recovery = (
            lambda read, mode: held(read, mode) if mode == "hacking" else saved[2](read, mode))
    elif name == "phase":
        rules_module.PHASE_MODES = saved[1] | {"hacking"}
    try:
        yield
    finally:
        (rules_module.FORECAST_GATED_MODES, rules_module.PHASE_MODES, rules_module.forecast_allows_recovery,
         reads_module.GOLD_STAND_IN_SHARE) = saved


def main() -> None:
    variants = ("no gold gate", "gold waits", "phase") + tuple(f"gold early {x}" for x in SHARES) + tuple(
        f"gold waits early {x}" for x in SHARES)
    rows = replay_variants(variants, variant, on_reads=mark_waiting)
    for name in variants:
        print(f"\n{name}")
        for split in SPLITS:
            for mode in ("hacking", "all"):
                print(f"  {split:8s} {mode:8s} {summary(rows[name], split, mode)}")


if __name__ == "__main__":
    main()
