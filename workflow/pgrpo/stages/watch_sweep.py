"""``pgrpo watch PATH PATH ...``: a sweep watched overnight (beyond the paper; the failure modes of Section 5 and the
forecast of Section 4.4 read live, the runs ranked by :mod:`pgrpo.fit.decisions`). Each run is watched as ``pgrpo
watch PATH`` watches one (:class:`pgrpo.stages.live.RunWatch`: its verdict lines, each led by the run's name, its
``live.json``/``live.html``, its stop rules and hooks), and after every round of reads in which a log grew the runs
are ranked as ``pgrpo forecast --compare`` ranks them (:func:`pgrpo.stages.forecast_compare.run_forecast_compare`,
the same code, each run to its own planned length): ``sweep.json`` and ``sweep.png`` in the sweep's folder,
and one line naming the leader and the runs the stop rule of Domhan et al. would stop now (a report: which run to
cancel is the user's call; the watch's own stop rules act on failure modes only).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from pgrpo.errors import InputError
from pgrpo.stages.live import RunWatch, WatchOutcome
from pgrpo.stages.logs import log_runs, resolve_log_path

#: the sweep's folder, beside the runs' logs, when no --out is given
SWEEP_FOLDER = "pgrpo-sweep"


def sweep_runs(paths: Sequence[str]) -> list[str]:
    """The runs of ``paths`` (a W&B export of several runs gives each, ``FILE::RUN``), each once."""
    runs = [run for path in paths for run in log_runs(path)]
    if len(set(runs)) != len(runs):
        seen = sorted({r for r in runs if runs.count(r) > 1})
        raise InputError(f"pgrpo watch: a run is named twice ({', '.join(seen)})")
    return runs


def sweep_folder(runs: Sequence[str], out_dir: str | None) -> Path:
    """``out_dir``, else ``pgrpo-sweep/`` in the folder that holds every run's log (a run not written yet: the folder
    its path names)."""
    if out_dir:
        return Path(out_dir)

    def parent(run: str) -> str:
        try:
            return str(resolve_log_path(run).resolve().parent)
        except InputError:
            return str(Path(run).resolve().parent)

    return Path(os.path.commonpath([parent(run) for run in runs])) / SWEEP_FOLDER


def run_watch_sweep(paths: Sequence[str], every_seconds: float = 60.0, once: bool = False,
                    out_dir: str | None = None, total_steps: float | None = None,
                    reward_range: Sequence[float] | None = None,
                    component_ranges: Mapping[str, Sequence[float]] | None = None,
                    stop_threshold: float = 0.05, max_rounds: int | None = None,
                    **watch: Any) -> list[WatchOutcome]:
    """Watch every run of ``paths`` (see the module docstring) until each has ended as a single watch ends
    (``once``: one round); ``out_dir``: the sweep's folder (``sweep.json``, ``sweep.png``), each run's
    ``live.json`` in ``out_dir/<run>/`` (default: beside its log, as ``pgrpo watch PATH`` writes it);
    ``watch``: :class:`pgrpo.stages.live.RunWatch`'s other arguments, for every run. Returns the runs' outcomes
    in the order of ``paths``."""
    from pgrpo.figures.forecasts import run_label
    from pgrpo.stages.forecast_compare import run_forecast_compare

    if not 0 < stop_threshold < 1:
        raise InputError(f"pgrpo watch: --stop-threshold must be a probability in (0, 1), got {stop_threshold}")
    runs = sweep_runs(paths)
    if len(runs) < 2:
        raise InputError(f"pgrpo watch: a sweep needs two runs or more, got {len(runs)}")
    labels = [run_label(run) for run in runs]
    if len(set(labels)) != len(labels):  # two runs of one name (sweep/a/log.csv, other/a/log.csv): their paths
        labels = [str(run) for run in runs]
    folder = sweep_folder(runs, out_dir)
    width = max(len(label) for label in labels)
    watches = {run: RunWatch(run, every_seconds=every_seconds, once=once, total_steps=total_steps,
                             reward_range=reward_range, component_ranges=component_ranges,
                             out_dir=str(folder / label.replace("/", "_")) if out_dir else None,
                             prefix=f"[{label:<{width}}] ", **watch)
               for run, label in zip(runs, labels)}
    ended: dict[str, WatchOutcome] = {}
    rounds = 0
    while True:
        grew = False
        for run, w in watches.items():
            if run in ended:
                continue
            before = len(w.reads)
            outcome = w.poll()
            grew = grew or len(w.reads) > before
            if outcome is not None:
                ended[run] = outcome
        if grew:
            rank_sweep(runs, folder, total_steps, reward_range, component_ranges, stop_threshold,
                       run_forecast_compare)
        rounds += 1
        if len(ended) == len(watches) or (max_rounds is not None and rounds >= max_rounds):
            return [ended.get(run) or WatchOutcome(watches[run].reads, None, "max_rounds") for run in runs]
        time.sleep(float(every_seconds))


def rank_sweep(runs: Sequence[str], folder: Path, total_steps: float | None,
               reward_range: Sequence[float] | None, component_ranges: Mapping[str, Sequence[float]] | None,
               stop_threshold: float, compare: Any) -> dict[str, Any] | None:
    """The runs ranked now (``compare``: :func:`pgrpo.stages.forecast_compare.run_forecast_compare`), each to
    ``total_steps`` or else its own planned length as ``--compare`` reads it, written to ``folder/sweep.json`` and
    ``sweep.png``, and one line printed; a log that cannot be ranked yet prints a warning and the next round tries
    again (None)."""
    try:
        payload = compare(list(runs), out_json=str(folder / "sweep.json"), total_steps=total_steps,
                          reward_range=reward_range, component_ranges=component_ranges, threshold=stop_threshold,
                          out_png=str(folder / "sweep.png"))
    except InputError as error:
        print(f"pgrpo watch: warning: the sweep cannot be ranked yet: {error}", file=sys.stderr, flush=True)
        return None
    print(sweep_line(payload, folder), flush=True)
    return payload


def sweep_line(payload: Mapping[str, Any], folder: Path) -> str:
    """The ranking in one line: the leader with P(ends highest) beside a blind pick's, the runs the stop rule would
    stop now, where the ranking is."""
    from pgrpo.figures.forecasts import run_label

    ranked = payload.get("runs") or []
    leader = ranked[0] if ranked else {}
    behind = [run_label(r["log"]) for r in ranked if r.get("stop_now")]
    p_top = leader.get("p_highest")
    return (f"sweep: leader {run_label(str(leader.get('log')))} (P(ends highest) "
            f"{p_top if p_top is None else f'{p_top:.2f}'}; a blind pick {1 / max(len(ranked), 1):.2f}); "
            + (f"the stop rule would stop {', '.join(behind)}" if behind else "the stop rule stops none")
            + f" (P(beat the best so far) < {payload.get('stop_threshold')}); {folder / 'sweep.json'}")
