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
* ``B: early + bound``: the early level plus that bound (the rule kept,
  :func:`pgrpo.live.reads.forecast_allows_recovery`).

Printed per variant and split (planted, dev): with every mode in ``stop_on`` and for ``no_learning`` alone, the failed
runs found and stopped, the healthy runs stopped and the mean share of a failed run's steps saved
(:func:`pgrpo.live.benchmark.summary_records`).

Run: ``python benchmarks/live/no_learning_gates.py`` (about 15 minutes on one core).
"""

from __future__ import annotations

from contextlib import contextmanager

from gate_replay import SPLITS, replay_variants, summary

import pgrpo.live.stop_rules as rules_module
from pgrpo.live.reads import _finite

#: variant -> the no_learning ceiling as (level, rise): the flag's numbers whose sum the forecast's hi80 must pass
CEILINGS = {"detection threshold": ("late", "net_threshold"), "A: late + bound": ("late", "trend_upper"),
            "B: early + bound": ("early", "trend_upper")}
VARIANTS = tuple(CEILINGS)


@contextmanager
def variant(name: str):
    """The stop rules with the variant's no_learning ceiling, ``numbers[level] + max(numbers[rise], 0)`` (B is the
    rule kept in session 26; ``net_threshold`` is positive, so the max leaves the first ceiling as it was), restored
    after."""
    saved = rules_module.forecast_allows_recovery
    level_key, rise_key = CEILINGS[name]

    def gate(read, mode: str) -> bool:
        if mode != "no_learning":
            return saved(read, mode)
        numbers = ((read.diagnosis.get("modes") or {}).get(mode) or {}).get("numbers") or {}
        level, rise, hi80 = numbers.get(level_key), numbers.get(rise_key), read.plateau.get("hi80")
        return all(_finite(v) for v in (level, rise, hi80)) and hi80 > level + max(rise, 0.0)

    rules_module.forecast_allows_recovery = gate
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
