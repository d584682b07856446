"""Session 28's fourth round (docs/live-history.md): a stop on a process mode (``instability``, ``length_collapse``)
held while the reward has risen since the flag's onset, measured on the planted and dev logs only (never the
holdout) against today's rules, by the keep rule the plan declared before this ran.

The gate: at a read where the mode is flagged, the mean of the reward's last ``window`` logged points (the reward
:class:`~pgrpo.diagnose.modes.signals.Curve`'s own window) against the mean of the ``window`` points up to and
including the flag's onset (the log's first ``window`` where fewer than 2 come before): the read counts toward no
stop when the difference exceeds ``instability.crash_over_noise`` (3) standard errors,
``3 sd sqrt(1/n_before + 1/n_after)`` with the curve's noise s.d.: the mirror of the crash test
(:func:`pgrpo.diagnose.modes.signals.crash_after`) that ``instability`` already uses. The flags and the alerts are
unchanged. Measured and not kept (the live history has the numbers), so it lives here, not in the package: the
replay puts it in front of the stop rules' hacking time gate, which every mode's stop already asks.

    python benchmarks/live/rise_gate.py   # about 15 minutes on one core
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
from gate_replay import SPLITS, replay_variants, summary

import pgrpo.live.stop_rules as rules_module
from pgrpo.diagnose.modes.signals import Curve, curve
from pgrpo.live.reads import curves_up_to

#: the modes the candidate holds
GATED = ("instability", "length_collapse")

#: per read (its id) of the log being scored: the gated modes whose reward has risen since their onset
RISING: dict[int, set[str]] = {}


def rise_since(reward: Curve | None, step: float, z: float) -> tuple[float, float] | None:
    """(rise, threshold): the mean of the last ``window`` rewards after ``step`` minus the mean of the ``window``
    up to and including it, and ``z`` standard errors of that difference; None with fewer than 2 after."""
    if reward is None or not math.isfinite(reward.sd):
        return None
    k = reward.window
    before = reward.values[reward.steps <= step][-k:]
    if before.size < 2:
        before = reward.values[:k]
    after = reward.values[reward.steps > step][-k:]
    if after.size < 2:
        return None
    return float(after.mean() - before.mean()), float(z * reward.sd * math.sqrt(1 / before.size + 1 / after.size))


def mark_rising(curves, reads, settings) -> None:
    """For each read: the gated modes flagged there whose reward has risen since the flag's onset, from what had
    been logged by then."""
    RISING.clear()
    config = settings.config()
    for read in reads:
        flagged = {m: (read.modes.get(m) or {}).get("onset_step") for m in GATED
                   if (read.modes.get(m) or {}).get("flagged")}
        flagged = {m: s for m, s in flagged.items() if isinstance(s, (int, float)) and np.isfinite(s)}
        if not flagged:
            continue
        reward = curve(curves_up_to(curves, read.step), "reward", config)
        for mode, onset in flagged.items():
            change = rise_since(reward, float(onset), config.modes.instability.crash_over_noise)
            if change is not None and change[0] > change[1]:
                RISING.setdefault(id(read), set()).add(mode)


@contextmanager
def variant(name: str):
    """Today's stop rules, or the candidate: the rise gate in front of the hacking time gate that every mode's stop
    asks (:func:`pgrpo.live.reads.gold_still_early`, held where either holds)."""
    saved = rules_module.gold_still_early
    if name == "rise gate":
        rules_module.gold_still_early = lambda read, mode: mode in RISING.get(id(read), ()) or saved(read, mode)
    try:
        yield
    finally:
        rules_module.gold_still_early = saved


def main() -> None:
    variants = ("today", "rise gate")
    rows = replay_variants(variants, variant, on_reads=mark_rising)
    for name in variants:
        print(f"\n{name}")
        for split in SPLITS:
            for mode in (*GATED, "all"):
                print(f"  {split:8s} {mode:16s} {summary(rows[name], split, mode)}")
    before = {(r["log"], r["mode"]): r for r in rows["today"]}
    for r in rows["rise gate"]:
        b = before[(r["log"], r["mode"])]
        if r["mode"] != "all" and b["stop_step"] != r["stop_step"]:
            print(f"changed: {r['log']} {r['mode']} (label {r['label']}): stop {b['stop_step'] or '-'} -> "
                  f"{r['stop_step'] or '-'}")


if __name__ == "__main__":
    main()
