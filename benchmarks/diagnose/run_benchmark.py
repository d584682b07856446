"""Benchmark of ``pgrpo diagnose``: our rule set against the post-training toolkit's GRPO rules on a labelled set of
logs, per log and per failure mode, flagged or not and when, beside the hand label.

The logs: the planted synthetic ones of ``planted.py`` (fixed seed, written to ``OUT/planted/``) and the real public
TRL GRPO logs of ``benchmarks/forecast/data`` (``labels.json``: a hand label per mode with its reason and onset,
``SOURCES.md``: where each log comes from; its ``split`` is ``dev`` or ``holdout``, fixed by a hash of the file
name before any threshold was chosen). Thresholds are the defaults of ``diagnostics:`` (chosen on the planted logs
and the dev split); the holdout split is reported separately. What a practitioner would know is passed as
``meta``: the completion cap and the group size where the source's notes state them.

Scoring, per rule set and mode, over the logs whose label is not unknown: a log labelled yes counts as found when
the rule set flags it (a verdict that could not run counts as not flagged); precision is over the logs it flagged.
An onset is within tolerance when it is within ``max(10% of the run's step span, 2 logging intervals)`` of the
labelled onset (only where the label has one).

Writes ``OUT/table.md`` (the summary and the per-log matrix), ``OUT/table.csv`` (one row per log and mode) and
``OUT/summary.csv``. Run: ``python benchmarks/diagnose/run_benchmark.py [--out results/diagnose_benchmark]``
(``make diagnose-benchmark``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(HERE))

from pgrpo.diagnose.modes.record import MODES  # noqa: E402
from pgrpo.diagnose.settings import diagnostics_config  # noqa: E402
from pgrpo.stages.diagnose import diagnose_log  # noqa: E402
from pgrpo.tables.render import markdown_table  # noqa: E402
from planted import SEED, planted_logs  # noqa: E402

REAL = ROOT / "benchmarks" / "forecast" / "data"
RULE_SETS = ("ours", "toolkit")
SPLITS = ("planted", "dev", "holdout")
SHORT = {"hacking": "hack", "degeneracy": "degen", "concentration": "conc", "instability": "instab",
         "no_learning": "no_learn", "regression": "regress", "truncation": "trunc"}


def meta_from_notes(notes: str) -> dict:
    """What the run's author states in the source: ``max_completion_length N`` and ``num_generations N``."""
    meta = {}
    if m := re.search(r"max_completion_length\s*[=:]?\s*(\d+)", notes or ""):
        meta["max_completion_length"] = int(m[1])
    if m := re.search(r"num_generations\s*[=:]?\s*(\d+)", notes or ""):
        meta["G"] = int(m[1])
    return meta


def write_planted(out: Path) -> list[dict]:
    folder = out / "planted"
    folder.mkdir(parents=True, exist_ok=True)
    runs, labels = [], {}
    for name, case in planted_logs(SEED).items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps({"source": f"planted (benchmarks/diagnose/planted.py, seed {SEED})",
                                    "notes": case["notes"], "meta": case["meta"],
                                    "log_history": case["log_history"]}))
        labels[path.name] = dict(case["labels"], split="planted")
        runs.append({"name": name, "path": path, "split": "planted", "labels": case["labels"],
                     "meta": case["meta"]})
    (folder / "labels.json").write_text(json.dumps(labels, indent=1))
    return runs


def real_runs() -> list[dict]:
    labels = json.loads((REAL / "labels.json").read_text())
    runs = []
    for file, entry in sorted(labels.items()):
        data = json.loads((REAL / file).read_text())
        runs.append({"name": file[:-5], "path": REAL / file, "split": entry["split"],
                     "labels": {m: entry[m] for m in MODES}, "meta": meta_from_notes(data.get("notes", ""))})
    return runs


def diagnose(run: dict) -> dict[str, dict]:
    out = {}
    for rule_set in RULE_SETS:
        config = diagnostics_config({"modes": {"rule_set": rule_set}})
        report = diagnose_log(str(run["path"]), meta=run["meta"] or None, config=config)
        out[rule_set] = report.to_dict()
    return out


def tolerance(report: dict) -> float:
    steps = np.asarray([report["first_step"], report["last_step"]], float)
    interval = (steps[1] - steps[0]) / max(report["n_steps"] - 1, 1)
    return max(0.1 * (steps[1] - steps[0]), 2 * interval)


def rows_for(run: dict, reports: dict[str, dict]) -> list[dict]:
    rows = []
    tol = tolerance(reports["ours"])
    for mode in MODES:
        label = run["labels"][mode]
        row = {"log": run["name"], "split": run["split"], "mode": mode, "label": label["label"],
               "label_onset": label["onset_step"], "label_reason": label["reason"], "onset_tolerance": tol}
        for rule_set in RULE_SETS:
            verdict = reports[rule_set]["modes"][mode]
            row[f"{rule_set}_flagged"] = verdict["flagged"]
            row[f"{rule_set}_onset"] = verdict["onset_step"]
            row[f"{rule_set}_verdict"] = verdict["verdict"]
            ok = None
            if label["label"] is not None:
                ok = bool(verdict["flagged"]) == bool(label["label"])
            row[f"{rule_set}_correct"] = ok
            onset_ok = None
            if label["label"] and label["onset_step"] is not None and verdict["flagged"]:
                onset_ok = verdict["onset_step"] is not None and abs(verdict["onset_step"] - label["onset_step"]) <= tol
            row[f"{rule_set}_onset_ok"] = onset_ok
        rows.append(row)
    return rows


def scores(frame: pd.DataFrame, rule_set: str) -> dict[str, int]:
    known = frame[frame["label"].notna()]
    flagged = known[f"{rule_set}_flagged"].fillna(False).astype(bool)
    label = known["label"].astype(bool)
    onset = known[f"{rule_set}_onset_ok"].dropna()
    return {"tp": int((flagged & label).sum()), "fp": int((flagged & ~label).sum()),
            "fn": int((~flagged & label).sum()), "tn": int((~flagged & ~label).sum()),
            "onset_ok": int(onset.astype(bool).sum()), "onset_n": int(onset.size)}


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "–"


def summary_table(frame: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    headers = ["split", "rule set"] + [SHORT[m] for m in MODES] + ["all modes: recall", "precision", "onset ok"]
    rows, records = [], []
    for split in SPLITS:
        part = frame[frame["split"] == split]
        if part.empty:
            continue
        for rule_set in RULE_SETS:
            cells = []
            for mode in MODES:
                s = scores(part[part["mode"] == mode], rule_set)
                covered = part[(part["mode"] == mode)][f"{rule_set}_verdict"].ne("could not run").any()
                cells.append(f"{_ratio(s['tp'], s['tp'] + s['fn'])} · {s['fp']} FP" if covered or s["tp"] else
                             f"{_ratio(0, s['tp'] + s['fn'])} · n/a")
                records.append({"split": split, "rule_set": rule_set, "mode": mode, **s})
            s = scores(part, rule_set)
            precision = s["tp"] / (s["tp"] + s["fp"]) if s["tp"] + s["fp"] else float("nan")
            recall = s["tp"] / (s["tp"] + s["fn"]) if s["tp"] + s["fn"] else float("nan")
            records.append({"split": split, "rule_set": rule_set, "mode": "all", **s})
            rows.append([split, rule_set] + cells + [f"{recall:.2f} ({s['tp']}/{s['tp'] + s['fn']})",
                                                     f"{precision:.2f} ({s['tp']}/{s['tp'] + s['fp']})",
                                                     _ratio(s["onset_ok"], s["onset_n"])])
    return markdown_table(headers, rows), pd.DataFrame(records)


def _mark(flag, onset) -> str:
    if flag is None or (isinstance(flag, float) and np.isnan(flag)):
        return "–"
    if not flag:
        return "N"
    return "Y" + (f"@{onset:g}" if onset is not None and not (isinstance(onset, float) and np.isnan(onset)) else "")


def matrix_table(frame: pd.DataFrame) -> str:
    headers = ["log", "split"] + [SHORT[m] for m in MODES]
    rows = []
    for (log, split), part in frame.groupby(["log", "split"], sort=False):
        cells = []
        for mode in MODES:
            r = part[part["mode"] == mode].iloc[0]
            label = "?" if r["label"] is None or pd.isna(r["label"]) else _mark(bool(r["label"]), r["label_onset"])
            cells.append(f"{label} · {_mark(r['ours_flagged'], r['ours_onset'])} · "
                         f"{_mark(r['toolkit_flagged'], r['toolkit_onset'])}")
        rows.append([log.replace("planted_", "p:"), split] + cells)
    return markdown_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "results" / "diagnose_benchmark"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = write_planted(out) + real_runs()
    rows = []
    for run in runs:
        reports = diagnose(run)
        (out / "verdicts").mkdir(exist_ok=True)
        (out / "verdicts" / f"{run['name']}.json").write_text(json.dumps(
            {r: {"summary": reports[r]["summary"], "modes": reports[r]["modes"]} for r in RULE_SETS}, indent=1))
        rows += rows_for(run, reports)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "table.csv", index=False)
    summary, records = summary_table(frame)
    records.to_csv(out / "summary.csv", index=False)
    n = {s: frame[frame["split"] == s]["log"].nunique() for s in SPLITS}
    text = ["# pgrpo diagnose: ours vs the post-training toolkit's GRPO rules", "",
            f"{n['planted']} planted logs (seed {SEED}), {n['dev']} real dev logs, {n['holdout']} real holdout logs. "
            "Per mode: found/labelled yes · false flags (n/a: the rule set has no rule for the mode). Onset within "
            "max(10% of the step span, 2 logging intervals) of the labelled one.", "", summary, "",
            "Per log: label · ours · toolkit (Y@step: flagged, with its onset; N: not flagged; –: could not run or "
            "not covered; ?: label unknown).", "", matrix_table(frame)]
    (out / "table.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"\nwritten: {os.path.relpath(out / 'table.md')}, table.csv, summary.csv", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
