"""Candidate ceilings of the ``no_learning`` forecast gate, measured on the planted and dev logs only
(docs/live-history.md, session 26's second round; never the holdout).

A ``no_learning`` flag counts toward a stop only where the read's forecast plateau (its upper 80% bound) does not
reach past a ceiling (:func:`pgrpo.live.reads.forecast_allows_recovery`). The ceilings, each replayed here over the
same reads (the diagnosis and forecast of a read do not depend on the stop rules, so each log is replayed once and
every variant's stops are taken from the same reads):

* ``detection threshold`` (the rule before session 26's second round): the late level plus the net rise's threshold
  (``z`` standard errors of the late-minus-early difference: a rise the test would call one);
* ``A: late + bound``: the late level plus the flag's own one-sided upper bound on the rise (``trend_upper``: the
  least-squares trend's rise plus ``bound_z`` standard errors, the rise the flag rules out);
* ``B: early + bound``: the early level plus that bound (the rule kept, :func:`pgrpo.live.reads.forecast_allows_recovery`).

Printed per variant and split (planted, dev): with every mode in ``stop_on`` and for ``no_learning`` alone, the failed
runs found and stopped, the healthy runs stopped and the mean share of a failed run's steps saved
(:func:`pgrpo.live.benchmark.summary_records`).

Run: ``python benchmarks/live/no_learning_gates.py`` (about 15 minutes on one core).
"""

from __future__ import annotations

from contextlib import contextmanager

from gate_replay import SPLITS, replay_variants, summary

import pgrpo.live.reads as reads_module
import pgrpo.live.stop_rules as rules_module
from pgrpo.live.reads import _finite

VARIANTS = ("detection threshold", "A: late + bound", "B: early + bound")


def ceiling_by_bound(base: str):
    """The gate with the no_learning ceiling at ``base`` (``late`` or ``early``) plus the flag's ``trend_upper``."""
    saved = reads_module.forecast_allows_recovery

    def gate(read, mode: str) -> bool:
        if mode != "no_learning":
            return saved(read, mode)
        numbers = ((read.diagnosis.get("modes") or {}).get(mode) or {}).get("numbers") or {}
        level, bound, hi80 = numbers.get(base), numbers.get("trend_upper"), read.plateau.get("hi80")
        return all(_finite(v) for v in (level, bound, hi80)) and hi80 > level + max(bound, 0.0)
    return gate


def ceiling_by_threshold():
    """The gate before session 26's second round: the no_learning ceiling at the late level plus ``net_threshold``."""
    saved = reads_module.forecast_allows_recovery

    def gate(read, mode: str) -> bool:
        if mode != "no_learning":
            return saved(read, mode)
        numbers = ((read.diagnosis.get("modes") or {}).get(mode) or {}).get("numbers") or {}
        level, threshold, hi80 = numbers.get("late"), numbers.get("net_threshold"), read.plateau.get("hi80")
        return all(_finite(v) for v in (level, threshold, hi80)) and hi80 > level + threshold
    return gate


@contextmanager
def variant(name: str):
    """The stop rules with one no_learning ceiling in place (B is the rule kept in session 26), restored after."""
    saved = rules_module.forecast_allows_recovery
    if name == "detection threshold":
        rules_module.forecast_allows_recovery = ceiling_by_threshold()
    elif name.startswith("A"):
        rules_module.forecast_allows_recovery = ceiling_by_bound("late")
    elif name.startswith("B"):
        rules_module.forecast_allows_recovery = ceiling_by_bound("early")
    try:
        yield
    finally:
        rules_module.forecast_allows_recovery = saved


def main() -> None:
    rows = replay_variants(VARIANTS, variant)
    for name in VARIANTS:
        print(f"\n{name}")
        for split in SPLITS:
            for mode in ("no_learning", "all"):
                print(f"  {split:8s} {mode:12s} {summary(rows[name], split, mode)}")
        healthy = sorted({r["log"] for r in rows[name] if r["split"] == "dev" and r["mode"] == "all"
                          and not r["label"] and r.get("stop_step") is not None})
        print(f"  dev healthy runs stopped: {', '.join(healthy) or 'none'}")


if __name__ == "__main__":
    main()
