"""Session 27's third round (docs/live-history.md): the planted and dev logs replayed live with the gold term read by
elimination (``diagnostics.reward_hacking.gold_by_elimination``, opt-in) and compared, row by row, with the main job's
live benchmark (``results/live_benchmark/summary.json`` and ``table.csv``, the default reading). Dev only; never the holdout.

    python benchmarks/live/gold_by_elimination.py   # about 10 minutes on two cores, after the main job
"""

from __future__ import annotations

import csv
import json
import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_replay import ROOT, SPLITS, record, replay_variants, summary_line  # noqa: E402

from pgrpo.diagnose.readouts import hacking  # noqa: E402
from pgrpo.live.benchmark import summary_records  # noqa: E402

MAIN_JOB = ROOT / "results" / "live_benchmark"


def main() -> None:
    original = hacking.gold_column
    hacking.gold_column = lambda curves, cfg: original(curves, replace(cfg, gold_by_elimination=True))
    try:
        rows = replay_variants(["elimination"], lambda name: nullcontext())["elimination"]
    finally:
        hacking.gold_column = original
    # the third round's criterion: hacking's and every mode's summary on dev, the main job's against the replay's
    base, candidate = json.loads((MAIN_JOB / "summary.json").read_text())["records"], summary_records(rows)
    for mode in ("hacking", "all"):
        print(f"dev, {mode}: by name only (the main job): {summary_line(record(base, 'dev', mode))}")
        print(f"dev, {mode}: by elimination too:          {summary_line(record(candidate, 'dev', mode))}")
    table = csv.DictReader((MAIN_JOB / "table.csv").open())
    before = {(r["log"], r["mode"]): r for r in table if r["split"] in SPLITS and r["rule_set"] == "ours"}
    for r in rows:
        b = before.get((r["log"], r["mode"]))
        now = (str(r["first_flag"] or ""), str(r["stop_step"] or ""))
        if b is not None and (b["first_flag"], b["stop_step"]) != now and r["mode"] != "all":
            print(f"changed: {r['log']} {r['mode']} (label {r['label']}): flag {b['first_flag'] or '-'} -> "
                  f"{now[0] or '-'}, stop {b['stop_step'] or '-'} -> {now[1] or '-'}")


if __name__ == "__main__":
    main()
