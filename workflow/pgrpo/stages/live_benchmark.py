"""Stage ``live_benchmark`` (``pgrpo live-benchmark``): the live callback's reads (Section 5's failure modes,
Figures 2-5, through ``pgrpo replay``'s code path, :func:`pgrpo.stages.live.replay_curves`) over every log of the
forecast/diagnose corpus as if live, ours beside the post-training toolkit's live callback replayed the same way,
scored against the labelled onsets (:mod:`pgrpo.live.benchmark`).

The corpus is the diagnose benchmark's (:mod:`pgrpo.stages.diagnose_benchmark`): the planted logs of
:mod:`pgrpo.diagnose.planted` (written to ``OUT/planted/``) and the labelled public TRL logs of
``benchmarks/forecast/data`` (``dev`` and ``holdout`` splits, labels with onsets in ``labels.json`` and
``benchmarks/diagnose/labels_new_modes.json``). Nothing here is tuned: the callback's defaults are replayed, told
what a user would know (the completion cap, and each reward function's range where the log's source states it:
``ranges.json``, for the summed forecast; the reward's summed range is not declared, as in the diagnose benchmark),
and the holdout split is reported apart. Each run is replayed once per rule set with no stop rule (every read kept);
the stop rules are then applied per mode to the same reads. The forecast runs on the callback's schedule (the first
and every ``forecast_every``-th read); the stop rules scored here read the diagnosis, and for no_learning and
regression also the read's forecast plateau (:data:`pgrpo.live.stop_rules.FORECAST_GATED_MODES`).

Writes ``OUT/table.md``, ``OUT/table.csv`` (one row per log, rule set and mode), ``OUT/summary.json`` (the
records per split, rule set and mode, and the settings) and ``OUT/reads/<log>.json`` (every read of both).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from pgrpo.atomic import write_csv, write_json, write_text
from pgrpo.diagnose.planted import SEED
from pgrpo.live.benchmark import GROUPS, RULE_SETS, in_group, live_settings, run_rows, summary_records
from pgrpo.live.reads import DEFAULT_FORECAST_EVERY, LiveSettings, training_steps
from pgrpo.parallel import ordered_map
from pgrpo.stages.diagnose import log_curves
from pgrpo.stages.diagnose_benchmark import DEFAULT_DATA_DIR, blind_batch, real_runs, write_planted
from pgrpo.stages.live import replay_curves
from pgrpo.tables.live_benchmark import benchmark_markdown


def run_settings(rule_set: str, meta: Mapping[str, Any] | None, every: int, forecast_every: int) -> LiveSettings:
    """A rule set's settings for one labelled run: its completion cap from the run's notes and, for ours, each reward
    function's range (for the summed forecast, docs/live.md)."""
    meta = meta or {}
    settings = live_settings(rule_set, every, forecast_every).with_completion_cap(meta.get("max_completion_length"))
    if rule_set == "ours":
        settings = settings.with_component_ranges(meta.get("reward_function_ranges"))
    return settings


def replay_run(run: dict[str, Any], every: int, forecast_every: int) -> tuple[list[dict[str, Any]], dict]:
    """Both rule sets' reads of one labelled run and their rows."""
    curves = log_curves(str(run["path"]), run["meta"] or None, None, allow_non_finite=True)
    steps, rewards, _ = curves.series("reward")
    rows, reads_out = [], {}
    for rule_set in RULE_SETS:
        settings = run_settings(rule_set, run["meta"], every, forecast_every)
        started = time.perf_counter()
        replay = replay_curves(curves, settings)
        seconds = time.perf_counter() - started
        stoppable = len(training_steps(curves)) // settings.every
        rows += run_rows(run["name"], run["split"], run["labels"], rule_set, replay["_reads"], settings, stoppable,
                         steps, rewards, blind=bool(run.get("blind")))
        reads_out[rule_set] = {"settings": settings.to_dict(), "seconds": seconds,
                               "reads": [r.to_dict() for r in replay["_reads"]]}
    return rows, reads_out


def run_live_benchmark(out_dir: str, data_dir: str = DEFAULT_DATA_DIR, every: int = 10,
                       forecast_every: int = DEFAULT_FORECAST_EVERY,
                       progress: Callable[[str], None] | None = None, workers: int = 1) -> dict[str, Any]:
    """Replay every planted and labelled log with both rule sets on ``workers`` processes (each log's replay is
    its own: :mod:`pgrpo.parallel`), score, write the tables (module docstring). Returns the summary records and the
    rows."""
    out = Path(out_dir)
    runs = real_runs(data_dir)  # bad input fails before any work
    runs = write_planted(out) + runs
    rows: list[dict[str, Any]] = []
    seconds = {r: 0.0 for r in RULE_SETS}
    reads = {r: 0 for r in RULE_SETS}

    def keep(index: int, replayed: tuple[list[dict[str, Any]], dict]) -> None:
        run_rows_, replays = replayed
        rows.extend(run_rows_)
        for rule_set, replay in replays.items():
            seconds[rule_set] += replay["seconds"]
            reads[rule_set] += len(replay["reads"])
        write_json(out / "reads" / f"{runs[index]['name']}.json", replays)
        if progress:
            progress(runs[index]["name"])

    ordered_map(lambda index: replay_run(runs[index], every, forecast_every), len(runs), workers, keep)
    records = summary_records(rows)
    logs_per_split = {s: len({r["log"] for r in rows if in_group(r, s)}) for s in GROUPS}
    settings = {"every": every, "forecast_every": forecast_every, "seed": SEED,
                "blind_batch": blind_batch(data_dir)[0],
                "toolkit": live_settings("toolkit").to_dict(),
                "ms_per_read": {r: 1000 * seconds[r] / reads[r] if reads[r] else None for r in RULE_SETS},
                "reads": reads}
    write_csv(out / "table.csv", pd.DataFrame(rows))
    write_json(out / "summary.json", {"settings": settings, "logs_per_split": logs_per_split, "records": records})
    write_text(out / "table.md", benchmark_markdown(records, logs_per_split, settings))
    return {"records": records, "rows": rows, "logs_per_split": logs_per_split, "settings": settings}
