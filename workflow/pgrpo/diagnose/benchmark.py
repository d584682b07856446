"""The diagnose benchmark's scoring (the failure modes of :mod:`pgrpo.diagnose.modes`, Figures 2-5 and beyond): per
log and mode, a rule set's verdict beside the hand label, and per split, rule set and mode the counts a reader
needs (found, false flags, onsets within tolerance).

A log labelled yes counts as found when the rule set flags it (a verdict that could not run counts as not flagged);
precision is over the logs it flagged. An onset is within tolerance when it lies within
``max(10% of the run's step span, 2 logging intervals)`` of the labelled onset (only where the label has one).
Episodes, where a label lists them (``[{start, end}]``, ``end`` null: to the last step), are scored by overlap: the
intersection over union of the steps the labelled and the flagged episodes cover (0 when the rule set did not flag).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.diagnose.modes.record import MODES

RULE_SETS: tuple[str, ...] = ("ours", "toolkit")
SPLITS: tuple[str, ...] = ("planted", "dev", "holdout")
#: the pseudo-split of the logs added after the rules last changed (dev and holdout alike: nothing was chosen on any
#: of them), ``blind`` in their rows (``benchmarks/forecast/data/batches.json``)
BLIND = "blind batch"
#: the splits and the blind batch, in the order the tables show them
GROUPS: tuple[str, ...] = (*SPLITS, BLIND)


def in_group(row: Mapping[str, Any], group: str) -> bool:
    """Whether a row counts in ``group``: its split, or :data:`BLIND` for a run of the blind batch."""
    return bool(row.get("blind")) if group == BLIND else row["split"] == group


def meta_from_notes(notes: str) -> dict:
    """What the run's author states in the source: ``max_completion_length N`` and ``num_generations N``."""
    meta = {}
    if m := re.search(r"max_completion_length\s*[=:]?\s*(\d+)", notes or ""):
        meta["max_completion_length"] = int(m[1])
    if m := re.search(r"num_generations\s*[=:]?\s*(\d+)", notes or ""):
        meta["G"] = int(m[1])
    return meta


def onset_tolerance(report: Mapping[str, Any]) -> float:
    """``max(10% of the step span, 2 logging intervals)`` of a diagnose report (its first/last step and count)."""
    first, last = float(report["first_step"]), float(report["last_step"])
    interval = (last - first) / max(int(report["n_steps"]) - 1, 1)
    return max(0.1 * (last - first), 2 * interval)


def covered_steps(episodes: Sequence[Mapping[str, Any]], first: float, last: float) -> list[tuple[float, float]]:
    """The step intervals episodes cover (``end`` null: to ``last``)."""
    return [(float(e["start"]), float(last if e.get("end") is None else e["end"])) for e in episodes or []
            if e.get("start") is not None and e["start"] <= last]


def episode_overlap(labelled: Sequence[Mapping[str, Any]], found: Sequence[Mapping[str, Any]], first: float,
                    last: float) -> float:
    """Intersection over union of the step ranges two lists of episodes cover (a one-step episode counts 1)."""
    grid = np.arange(np.floor(first), np.ceil(last) + 1)

    def mask(episodes: Sequence[Mapping[str, Any]]) -> np.ndarray:
        out = np.zeros(grid.size, bool)
        for a, b in covered_steps(episodes, first, last):
            out |= (grid >= a) & (grid <= b)
        return out

    a, b = mask(labelled), mask(found)
    union = int((a | b).sum())
    return float((a & b).sum() / union) if union else float("nan")


def rows_for(name: str, split: str, labels: Mapping[str, Mapping[str, Any]],
             reports: Mapping[str, Mapping[str, Any]], blind: bool = False) -> list[dict[str, Any]]:
    """One row per mode: the label, and per rule set its flag, onset, verdict, whether the flag matches the label
    and whether the onset is within tolerance; ``blind``: the log is one of the blind batch (:data:`BLIND`)."""
    rows = []
    tol = onset_tolerance(reports[RULE_SETS[0]])
    for mode in MODES:
        label = labels[mode]
        row = {"log": name, "split": split, "blind": bool(blind), "mode": mode, "label": label["label"],
               "label_onset": label["onset_step"], "label_reason": label["reason"], "onset_tolerance": tol}
        for rule_set in RULE_SETS:
            verdict = reports[rule_set]["modes"][mode]
            row[f"{rule_set}_flagged"] = verdict["flagged"]
            row[f"{rule_set}_onset"] = verdict["onset_step"]
            row[f"{rule_set}_verdict"] = verdict["verdict"]
            row[f"{rule_set}_correct"] = (None if label["label"] is None
                                          else bool(verdict["flagged"]) == bool(label["label"]))
            onset_ok = None
            if label["label"] and label["onset_step"] is not None and verdict["flagged"]:
                onset_ok = (verdict["onset_step"] is not None
                            and abs(verdict["onset_step"] - label["onset_step"]) <= tol)
            row[f"{rule_set}_onset_ok"] = onset_ok
            row[f"{rule_set}_episodes"] = verdict.get("episodes") or []
            overlap = None
            if label["label"] and label.get("episodes"):
                report = reports[rule_set]
                overlap = episode_overlap(label["episodes"], row[f"{rule_set}_episodes"] if verdict["flagged"]
                                          else [], float(report["first_step"]), float(report["last_step"]))
            row[f"{rule_set}_episode_overlap"] = overlap
        row["label_episodes"] = label.get("episodes")
        rows.append(row)
    return rows


def counts(rows: Sequence[Mapping[str, Any]], rule_set: str) -> dict[str, int]:
    """True/false positives and negatives over the rows whose label is known, and the onsets within tolerance."""
    known = [r for r in rows if r["label"] is not None]
    out = {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "onset_ok": 0, "onset_n": 0, "episode_n": 0,
           "episode_overlap": float("nan")}
    overlaps = [r.get(f"{rule_set}_episode_overlap") for r in known]
    overlaps = [o for o in overlaps if o is not None and o == o]
    if overlaps:
        out.update(episode_n=len(overlaps), episode_overlap=float(np.mean(overlaps)))
    for r in known:
        flagged, label = bool(r[f"{rule_set}_flagged"]), bool(r["label"])
        out["tp" if flagged and label else "fp" if flagged else "fn" if label else "tn"] += 1
        if r[f"{rule_set}_onset_ok"] is not None:
            out["onset_n"] += 1
            out["onset_ok"] += int(bool(r[f"{rule_set}_onset_ok"]))
    return out


def summary_records(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per split (and the blind batch, :data:`GROUPS`), rule set and mode (and ``all`` modes): the counts, the
    split's number of logs, and whether the rule set has a rule for the mode (``covered``: some verdict of it ran)."""
    records = []
    for split in GROUPS:
        part = [r for r in rows if in_group(r, split)]
        if not part:
            continue
        logs = len({r["log"] for r in part})
        for rule_set in RULE_SETS:
            for mode in MODES:
                of_mode = [r for r in part if r["mode"] == mode]
                covered = any(r[f"{rule_set}_verdict"] != "could not run" for r in of_mode)
                records.append({"split": split, "rule_set": rule_set, "mode": mode, "covered": covered,
                                "logs": logs, **counts(of_mode, rule_set)})
            records.append({"split": split, "rule_set": rule_set, "mode": "all", "covered": True, "logs": logs,
                            **counts(part, rule_set)})
    return records
