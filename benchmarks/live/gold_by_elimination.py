"""Session 27's third round (docs/live-history.md): the planted and dev logs replayed live with the gold term read by
elimination (``diagnostics.reward_hacking.gold_by_elimination``, opt-in) and compared, row by row, with the main job's
live benchmark (``results/live_benchmark/table.csv``, the default reading). Dev only; never the holdout.

    python benchmarks/live/gold_by_elimination.py   # about 10 minutes on two cores, after the main job
"""

from __future__ import annotations

import csv
import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_replay import ROOT, SPLITS, replay_variants  # noqa: E402

from pgrpo.diagnose.readouts import hacking  # noqa: E402

MAIN_JOB_TABLE = ROOT / "results" / "live_benchmark" / "table.csv"


def counts(rows: list[dict], split: str = "dev") -> dict[str, int]:
    """The third round's criterion counts: hacking found and labelled, runs not labelled hacking that hacking stops,
    healthy and failed runs stopped with every mode in stop_on."""
    truth = lambda r: str(r["label"]) == "True"  # noqa: E731 (the CSV holds strings, the replay booleans)
    hack = [r for r in rows if r["split"] == split and r["mode"] == "hacking"]
    every = [r for r in rows if r["split"] == split and r["mode"] == "all"]
    return {"hacking labelled": sum(truth(r) for r in hack),
            "hacking found": sum(truth(r) and bool(r["first_flag"]) for r in hack),
            "others stopped by hacking": sum(not truth(r) and bool(r["stop_step"]) for r in hack),
            "healthy": sum(str(r["label"]) == "False" for r in every),
            "healthy stopped": sum(str(r["label"]) == "False" and bool(r["stop_step"]) for r in every),
            "failed": sum(truth(r) for r in every),
            "failed stopped": sum(truth(r) and bool(r["stop_step"]) for r in every)}


def main() -> None:
    original = hacking.gold_column
    hacking.gold_column = lambda curves, cfg: original(curves, replace(cfg, gold_by_elimination=True))
    try:
        rows = replay_variants(["elimination"], lambda name: nullcontext())["elimination"]
    finally:
        hacking.gold_column = original
    base = [r for r in csv.DictReader(MAIN_JOB_TABLE.open()) if r["split"] in SPLITS and r["rule_set"] == "ours"]
    print("by name only (the main job):", counts(base))
    print("by elimination too:         ", counts(rows))
    before = {(r["log"], r["mode"]): r for r in base}
    for r in rows:
        b = before.get((r["log"], r["mode"]))
        now = (str(r["first_flag"] or ""), str(r["stop_step"] or ""))
        if b is not None and (b["first_flag"], b["stop_step"]) != now and r["mode"] != "all":
            print(f"changed: {r['log']} {r['mode']} (label {r['label']}): flag {b['first_flag'] or '-'} -> "
                  f"{now[0] or '-'}, stop {b['stop_step'] or '-'} -> {now[1] or '-'}")


if __name__ == "__main__":
    main()
