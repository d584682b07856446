"""Stage ``diagnose_benchmark`` (``pgrpo diagnose-benchmark``): ``pgrpo diagnose`` with our rule set and with the
post-training toolkit's GRPO rules (:mod:`pgrpo.diagnose.toolkit`) over a labelled set of logs, scored per log and
failure mode beside the hand label (:mod:`pgrpo.diagnose.benchmark`).

The logs: the planted synthetic ones of :mod:`pgrpo.diagnose.planted` (fixed seed, written to ``OUT/planted/``) and
the real public TRL GRPO logs of ``benchmarks/forecast/data`` (``labels.json``: a hand label per mode with its reason
and onset, ``SOURCES.md``: where each log comes from; its ``split`` is ``dev`` or ``holdout``, fixed by a hash of the
file name before any threshold was chosen). Thresholds are the defaults of ``diagnostics:`` (chosen on the planted
logs and the dev split). What a practitioner would know is passed as ``meta``: the completion cap and the group
size where the source's notes state them. Each reward function's range where the source's code states it
(``ranges.json``, :func:`declared_ranges`) rides in ``meta`` for the live benchmark's summed forecast; no range is
declared to the rules: one made of each function's extreme returns misplaces tied groups (measured on dev and the
holdout: ``docs/diagnose.md``, "Which range to declare").

Writes ``OUT/table.md`` (the summary and the per-log matrix), ``OUT/table.csv`` (one row per log and mode),
``OUT/summary.csv`` (the counts per split, rule set and mode) and ``OUT/verdicts/<log>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from pgrpo.atomic import write_csv, write_json, write_text
from pgrpo.diagnose.benchmark import GROUPS, RULE_SETS, in_group, meta_from_notes, rows_for, summary_records
from pgrpo.diagnose.modes.record import MODES
from pgrpo.diagnose.planted import SEED, planted_logs
from pgrpo.diagnose.readouts.report import diagnose_curves
from pgrpo.diagnose.settings import diagnostics_config
from pgrpo.errors import InputError, range_bounds
from pgrpo.stages.diagnose import log_curves
from pgrpo.tables.diagnose_benchmark import benchmark_markdown

DEFAULT_DATA_DIR = "benchmarks/forecast/data"
#: the reward ranges the logs' sources state (per log file: ``reward_range`` and ``reward_function_ranges``)
DECLARED_RANGES = "ranges.json"
#: the blind batch: the logs added after the live and diagnose rules last changed (nothing chosen on them)
BLIND_BATCH = "batches.json"
#: the corpus folder's files that are not logs
CORPUS_META_FILES = ("labels.json", DECLARED_RANGES, BLIND_BATCH)
#: labels of the modes added after ``labels.json`` was written (oscillation, length_collapse, length_hacking)
EXTRA_LABELS = "benchmarks/diagnose/labels_new_modes.json"


def write_planted(out: Path) -> list[dict[str, Any]]:
    """The planted logs as TRL-style JSON files under ``out/planted/`` (with their labels), and their runs."""
    folder = out / "planted"
    runs, labels = [], {}
    for name, case in planted_logs(SEED).items():
        path = folder / f"{name}.json"
        write_json(path, {"source": f"planted (pgrpo.diagnose.planted, seed {SEED})", "notes": case["notes"],
                          "meta": case["meta"], "log_history": case["log_history"]})
        labels[path.name] = dict(case["labels"], split="planted")
        runs.append({"name": name, "path": path, "split": "planted", "labels": case["labels"], "meta": case["meta"]})
    write_json(folder / "labels.json", labels)
    return runs


def blind_batch(data_dir: str | Path, labelled: Any = None) -> tuple[str | None, frozenset[str]]:
    """The blind batch ``data_dir/batches.json`` names (``{"blind": {"name", "logs": [file, ...], ...}}``, its
    other keys recording when and after which rule change it was added): the logs added after the rules last
    changed, on which nothing has been chosen, whatever their split. Returns its name and files; no file:
    ``(None, frozenset())``. A file it names that ``labelled`` (the labelled files, when given) lacks, or an entry
    without ``name`` or ``logs``, is an input error naming it."""
    path = Path(data_dir) / BLIND_BATCH
    if not path.is_file():
        return None, frozenset()
    blind = json.loads(path.read_text()).get("blind")
    if blind is None:
        return None, frozenset()
    if not isinstance(blind, dict) or not blind.get("name") or not isinstance(blind.get("logs"), list):
        raise InputError(f"diagnose benchmark: {path}: 'blind' needs a 'name' and a 'logs' list")
    logs = frozenset(blind["logs"])
    unknown = sorted(logs - set(labelled)) if labelled is not None else []
    if unknown:
        raise InputError(f"diagnose benchmark: {path}: 'blind' names '{unknown[0]}', which labels.json does not")
    return str(blind["name"]), logs


def declared_ranges(data_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The reward ranges ``data_dir/ranges.json`` records as facts of each log's source (``SOURCES.md``, "Declared
    reward ranges"): file -> ``{"reward_range": (lo, hi) or None, "reward_function_ranges": {fn: (lo, hi)}}``, a
    function whose range the source leaves open left out. No file: none declared. A range that is not two numbers
    LO < HI is an input error naming the file and the key."""
    path = Path(data_dir) / DECLARED_RANGES
    if not path.is_file():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for file, entry in json.loads(path.read_text()).items():
        functions = {}
        for fn, value in (entry.get("reward_function_ranges") or {}).items():
            where = f"{path}: '{file}' reward_function_ranges '{fn}'"
            if (r := range_bounds(value, where, null_ok=True)) is not None:
                functions[fn] = r
        out[file] = {"reward_range": range_bounds(entry.get("reward_range"), f"{path}: '{file}' reward_range",
                                                  null_ok=True),
                     "reward_function_ranges": functions}
    return out


def real_runs(data_dir: str | Path, extra_labels: str | Path | None = EXTRA_LABELS) -> list[dict[str, Any]]:
    """The labelled public logs of ``data_dir``: every file named in its ``labels.json``, with the labels of
    ``extra_labels`` (per file, the later modes) merged in; a mode labelled in neither is unknown (``label``
    null)."""
    data_dir = Path(data_dir)
    labels_path = data_dir / "labels.json"
    if not labels_path.is_file():
        raise InputError(f"diagnose benchmark: {labels_path}: no such file")
    labels = json.loads(labels_path.read_text())
    extra = json.loads(Path(extra_labels).read_text()) if extra_labels and Path(extra_labels).is_file() else {}
    ranges = declared_ranges(data_dir)
    _, blind = blind_batch(data_dir, labels)
    runs = []
    for file, entry in sorted(labels.items()):
        entry = {**{m: {"label": None, "onset_step": None, "reason": "not labelled"} for m in MODES
                    if m not in entry}, **(extra.get(file) or {}), **entry}
        path = data_dir / file
        if not path.is_file():
            raise InputError(f"diagnose benchmark: {path} (named in {labels_path}): no such file")
        missing = [m for m in (*MODES, "split") if m not in entry]
        if missing:
            raise InputError(f"diagnose benchmark: {labels_path}: entry '{file}' has no '{missing[0]}'")
        data = json.loads(path.read_text())
        notes = data.get("notes", "") if isinstance(data, dict) else ""
        meta = meta_from_notes(notes)
        declared = ranges.get(file) or {}
        if declared.get("reward_function_ranges"):
            meta["reward_function_ranges"] = {fn: list(r) for fn, r in declared["reward_function_ranges"].items()}
        runs.append({"name": file[:-5], "path": path, "split": entry["split"],
                     "labels": {m: entry[m] for m in MODES}, "meta": meta, "blind": file in blind})
    return runs


def run_diagnose_benchmark(out_dir: str, data_dir: str = DEFAULT_DATA_DIR,
                           progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Diagnose every planted and labelled log with each rule set, score, and write the tables (module docstring).
    Returns the summary records and the per-mode rows."""
    out = Path(out_dir)
    runs = real_runs(data_dir)  # bad input fails before any work
    runs = write_planted(out) + runs
    rows: list[dict[str, Any]] = []
    for run in runs:
        curves = log_curves(str(run["path"]), run["meta"] or None, None)  # read once, diagnosed by each rule set
        reports = {rule_set: diagnose_curves(curves, diagnostics_config({"modes": {"rule_set": rule_set}})).to_dict()
                   for rule_set in RULE_SETS}
        write_json(out / "verdicts" / f"{run['name']}.json",
                   {r: {"summary": reports[r]["summary"], "modes": reports[r]["modes"]} for r in RULE_SETS})
        rows += rows_for(run["name"], run["split"], run["labels"], reports, blind=bool(run.get("blind")))
        if progress:
            progress(run["name"])
    records = summary_records(rows)
    write_csv(out / "table.csv", pd.DataFrame(rows))
    write_csv(out / "summary.csv", pd.DataFrame(records))
    logs_per_split = {s: len({r["log"] for r in rows if in_group(r, s)}) for s in GROUPS}
    write_text(out / "table.md", benchmark_markdown(records, rows, logs_per_split, SEED))
    return {"records": records, "rows": rows, "logs_per_split": logs_per_split}
