"""The diagnose benchmark's Markdown (the failure modes of :mod:`pgrpo.diagnose.modes`, Figures 2-5 and beyond):
the summary per split and rule set, and the per-log matrix of label, our verdict and the toolkit's."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from pgrpo.diagnose.benchmark import BLIND, GROUPS, RULE_SETS, SPLITS
from pgrpo.diagnose.modes.record import MODES
from pgrpo.tables.render import markdown_table

SHORT = {"hacking": "hack", "degeneracy": "degen", "concentration": "conc", "instability": "instab",
         "no_learning": "no_learn", "regression": "regress", "truncation": "trunc", "oscillation": "osc",
         "length_collapse": "len_coll", "length_hacking": "len_hack"}


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "–"


def summary_table(records: Sequence[Mapping[str, Any]]) -> str:
    """One row per split and rule set: per mode found/labelled yes and false flags, then recall, precision and
    onsets within tolerance over all modes."""
    by = {(r["split"], r["rule_set"], r["mode"]): r for r in records}
    headers = ["split", "rule set"] + [SHORT[m] for m in MODES] + ["all modes: recall", "precision", "onset ok",
                                                                   "episode overlap"]
    rows = []
    for split in GROUPS:
        for rule_set in RULE_SETS:
            total = by.get((split, rule_set, "all"))
            if total is None:
                continue
            cells = []
            for mode in MODES:
                s = by.get((split, rule_set, mode))
                if s is None:  # a mode that results older than it do not hold
                    cells.append("–")
                    continue
                cells.append(f"{_ratio(s['tp'], s['tp'] + s['fn'])} · {s['fp']} FP" if s["covered"] or s["tp"] else
                             f"{_ratio(0, s['tp'] + s['fn'])} · n/a")
            tp, fp, fn = total["tp"], total["fp"], total["fn"]
            precision = tp / (tp + fp) if tp + fp else float("nan")
            recall = tp / (tp + fn) if tp + fn else float("nan")
            rows.append([split, rule_set, *cells, f"{recall:.2f} ({tp}/{tp + fn})",
                         f"{precision:.2f} ({tp}/{tp + fp})", _ratio(total["onset_ok"], total["onset_n"]),
                         f"{total['episode_overlap']:.2f} (n={total['episode_n']})" if total.get("episode_n") else "–"])
    return markdown_table(headers, rows)


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _mark(flag: Any, onset: Any) -> str:
    if _missing(flag):
        return "–"
    if not flag:
        return "N"
    return "Y" + (f"@{onset:g}" if not _missing(onset) else "")


def matrix_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per log: label · ours · toolkit for each mode (Y@step, N, – not run, ? label unknown)."""
    logs: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        logs.setdefault((r["log"], r["split"]), {})[r["mode"]] = r
    body = []
    for (log, split), modes in logs.items():
        cells = []
        for mode in MODES:
            r = modes[mode]
            label = "?" if _missing(r["label"]) else _mark(bool(r["label"]), r["label_onset"])
            cells.append(f"{label} · {_mark(r['ours_flagged'], r['ours_onset'])} · "
                         f"{_mark(r['toolkit_flagged'], r['toolkit_onset'])}")
        body.append([log.replace("planted_", "p:"), split] + cells)
    return markdown_table(["log", "split"] + [SHORT[m] for m in MODES], body)


def blind_clause(logs_per_split: Mapping[str, int], blind_name: str | None = None) -> str:
    """" (36 of the dev and holdout logs the blind batch, NAME: added after the rules last changed, nothing chosen
    on them)", or "" where there is no blind batch (:data:`pgrpo.diagnose.benchmark.BLIND`)."""
    blind = logs_per_split.get(BLIND)
    if not blind:
        return ""
    return (f" ({blind} of the dev and holdout logs the blind batch" + (f", {blind_name}" if blind_name else "")
            + ": added after the rules last changed, nothing chosen on them)")


def logs_sentence(logs_per_split: Mapping[str, int], blind_name: str | None = None) -> str:
    """"24 planted logs, 121 dev logs, 69 holdout logs" and :func:`blind_clause`: the logs a benchmark read."""
    return (", ".join(f"{n} {s} logs" for s, n in logs_per_split.items() if s in SPLITS)
            + blind_clause(logs_per_split, blind_name))


def benchmark_markdown(records: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]],
                       logs_per_split: Mapping[str, int], seed: int) -> str:
    return "\n".join([
        "# pgrpo diagnose: ours vs the post-training toolkit's GRPO rules", "",
        f"{logs_per_split.get('planted', 0)} planted logs (seed {seed}), {logs_per_split.get('dev', 0)} real dev "
        f"logs, {logs_per_split.get('holdout', 0)} real holdout logs" + blind_clause(logs_per_split)
        + ". Per mode: found/labelled yes · false flags "
        "(n/a: the rule set has no rule for the mode). Onset within max(10% of the step span, 2 logging intervals) "
        "of the labelled one; episode overlap: mean intersection over union of the labelled and flagged episodes' steps, "
        "over the labels that list episodes.", "", summary_table(records), "",
        "Per log: label · ours · toolkit (Y@step: flagged, with its onset; N: not flagged; –: could not run or not "
        "covered; ?: label unknown).", "", matrix_table(rows)]) + "\n"
