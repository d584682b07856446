"""The replay the stop-gate scripts share (``stop_gates.py``, ``no_learning_gates.py``): every planted and dev log
replayed once as if live (:func:`pgrpo.stages.live.replay_curves`, the callback's defaults), and each variant of the
stop rules scored over the same reads (a read's diagnosis and forecast do not depend on the stop rules), with the
live benchmark's own rows and summary (:func:`pgrpo.live.benchmark.run_rows`, :func:`summary_records`). Never the
holdout."""

from __future__ import annotations

import sys
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Callable, ContextManager, Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.live.benchmark import run_rows, summary_records  # noqa: E402
from pgrpo.live.reads import DEFAULT_FORECAST_EVERY, training_steps  # noqa: E402
from pgrpo.stages.diagnose import log_curves  # noqa: E402
from pgrpo.stages.diagnose_benchmark import DEFAULT_DATA_DIR, real_runs, write_planted  # noqa: E402
from pgrpo.stages.live import replay_curves  # noqa: E402
from pgrpo.stages.live_benchmark import run_settings  # noqa: E402

SPLITS = ("planted", "dev")


def replay_variants(variants: Sequence[str], variant: Callable[[str], ContextManager],
                    on_reads: Callable | None = None) -> dict[str, list[dict]]:
    """Each variant's benchmark rows over the planted and dev logs; ``variant(name)`` puts a variant's rules in place
    for the scoring of one log; ``on_reads(curves, reads, settings)`` runs once per log before the scoring."""
    rows: dict[str, list[dict]] = {v: [] for v in variants}
    with TemporaryDirectory() as planted_dir:
        runs = [r for r in write_planted(Path(planted_dir)) + real_runs(DEFAULT_DATA_DIR) if r["split"] in SPLITS]
        for number, run in enumerate(runs, 1):
            curves = log_curves(str(run["path"]), run["meta"] or None, None, allow_non_finite=True)
            steps, rewards, _ = curves.series("reward")
            settings = run_settings("ours", run["meta"], 10, DEFAULT_FORECAST_EVERY)
            reads = replay_curves(curves, settings)["_reads"]
            stoppable = len(training_steps(curves)) // settings.every
            if on_reads is not None:
                on_reads(curves, reads, settings)
            for name in variants:
                with variant(name):
                    rows[name] += run_rows(run["name"], run["split"], run["labels"], "ours", reads, settings,
                                           stoppable, steps, rewards)
            print(f"[{number}/{len(runs)}] {run['name']}", file=sys.stderr, flush=True)
    return rows


def percent(share: float | None, sign: str = "") -> str:
    return "n/a" if share is None else f"{100 * share:{sign}.0f}%"


def record(records: Sequence[dict], split: str, mode: str) -> dict:
    """The live benchmark's summary record (:func:`summary_records`, or the main job's ``summary.json``) for
    ``split`` and ``mode``, rule set ours."""
    return next(r for r in records if r["split"] == split and r["rule_set"] == "ours" and r["mode"] == mode)


def summary_line(r: dict) -> str:
    """A summary record in one line: failed runs found and stopped, latency, healthy runs stopped, steps saved."""
    return (f"found {r['detected']}/{r['failed']}, latency {percent(r['median_latency_share'], '+')}, "
            f"stopped {r['stopped']}/{r['failed']}, healthy stopped {r['false_stops']}/{r['healthy']}, "
            f"saved {percent(r['saved_share'])}")


def summary(rows: list[dict], split: str, mode: str) -> str:
    """One line of the live benchmark's summary record for ``split`` and ``mode`` (rule set ours)."""
    return summary_line(record(summary_records(rows), split, mode))
