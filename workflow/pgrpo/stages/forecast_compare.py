"""``pgrpo forecast --compare LOG LOG ...`` (beyond the paper; each run is forecast with the laws of Section 3.5,
Eq. 14-16, by :func:`pgrpo.fit.forecast.forecast_run`): the runs of a sweep ranked by where they will end, with
P(each ends highest) and the runs the stop rule of Domhan et al. would stop now (:mod:`pgrpo.fit.decisions`).

Every run is forecast to where it will end (``total_steps`` for all; default: its planned length, the ``max_steps``
of a ``meta.json`` beside its log or of its TRL ``trainer_state.json``, else the longest planned length of the
others, else the longest run's last logged step) from every point it has logged (or, with ``fraction``, from its first
``fraction`` of that horizon, to replay a decision on finished runs). A run that has reached the horizon ends at its
smoothed level (with that level's s.d. as its spread). A run whose log shows its reward functions, one of them yet
to rise (:attr:`pgrpo.fit.staged.StagedForecast.waiting`), is ranked and stopped by their forecasts summed, that
function's headroom in the band (issue 21, item 3: a correctness reward that has not paid yet is not read as flat).
With ``out_png``, one figure shows the decision (:func:`pgrpo.figures.forecasts.compare_figure`): every run's log and
the mean curve it is ranked by, with that curve's 80% band, and the plateaus side by side against the best level so
far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.errors import InputError
from pgrpo.fit.decisions import STOP_THRESHOLD, p_highest, stop_decisions, target_reach
from pgrpo.fit.least_squares import finite_or_none


def _meta_beside(log: str) -> dict[str, Any]:
    from pgrpo.stages.logs import resolve_log_path

    path = resolve_log_path(log).parent / "meta.json"
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            return {}
    return {}


def run_forecast_compare(logs: Sequence[str], out_json: str | None = None, fraction: float | None = None,
                         column: str = "reward", reward_range: Sequence[float] | None = None,
                         batch: float | None = None, total_steps: float | None = None,
                         threshold: float = STOP_THRESHOLD, target: float | None = None,
                         settings: Any = None,
                         component_ranges: Mapping[str, Sequence[float]] | None = None,
                         out_png: str | None = None) -> dict[str, Any]:
    """Rank ``logs`` by their forecast plateaus (see the module docstring); write ``out_json`` or print a table.
    Keys: ``horizon`` (and ``horizon_source``, where it comes from), ``best_so_far`` (the highest smoothed level at the cut, and whose), ``stop_threshold`` and
    ``runs`` (best first): ``log``, ``rank``, ``plateau`` (``mean, lo80, hi80``), ``level_at_cut``, ``cut_step``,
    ``p_highest``, ``p_beats_best_so_far``, ``stop_now``, and ``target`` where one is asked; ``notes`` for a run
    whose plateau band nothing bounds (:func:`pgrpo.fit.forecast.undeclared_range_note`); ``components`` for a run
    ranked by its reward functions' sum (``component_ranges``: fn -> (lo, hi), declared for every run's functions)."""
    from pgrpo.atomic import write_json
    from pgrpo.fit.forecast import forecast_run, undeclared_range_note
    from pgrpo.fit.forecaster import ForecasterSettings, RunContext
    from pgrpo.fit.level_guard import smoothed_level
    from pgrpo.stages.aggregate import load_log
    from pgrpo.tables.forecast_compare import compare_text

    if len(logs) < 2:
        raise InputError(f"--compare needs at least two logs, got {len(logs)}")
    if not 0 < threshold < 1:
        raise InputError(f"--stop-threshold must be a probability in (0, 1), got {threshold}")
    if fraction is not None and not 0 < fraction <= 1:
        raise InputError(f"forecast fraction must be a number in (0, 1], got {fraction!r}")
    if reward_range is not None:
        if len(reward_range) != 2 or not float(reward_range[0]) < float(reward_range[1]):
            raise InputError(f"reward range must be two numbers LO < HI, got {list(reward_range)}")
        reward_range = (float(reward_range[0]), float(reward_range[1]))
    settings = settings or ForecasterSettings()
    series, metas, frames = [], [], []
    for log in logs:
        frame = load_log(log)
        frames.append(frame)
        if column not in frame.columns:
            available = ", ".join(c for c in frame.columns if c != "step")
            raise InputError(f"column '{column}' is not in {log} (columns: {available})")
        t, y = frame["step"].to_numpy(float), frame[column].to_numpy(float)
        keep = np.isfinite(t) & np.isfinite(y)
        if keep.sum() < 3:
            raise InputError(f"log {log}: '{column}' has {int(keep.sum())} finite point(s), need at least 3")
        series.append((t[keep], y[keep]))
        metas.append(_meta_beside(log))
    if component_ranges:
        from pgrpo.grpo.run_log import reward_function_columns
        from pgrpo.stages.fit import check_component_ranges

        logged = sorted({fn for frame in frames for fn in reward_function_columns(frame.columns)})
        check_component_ranges(component_ranges, logged, "any log")
    from pgrpo.stages.logs import planned_steps

    planned = [total_steps if total_steps is not None else planned_steps(log, meta) for log, meta in zip(logs, metas)]
    known = [float(p) for p in planned if p]
    common = max(known) if known else max(float(t[-1]) for t, _ in series)  # a run whose plan is not known
    horizons = [float(p) if p else common for p in planned]
    rng = np.random.default_rng(0)
    runs = []
    curves: dict[str, dict[str, Any]] = {}  # what the figure draws, per run
    for log, (t, y), meta, frame, horizon in zip(logs, series, metas, frames, horizons):
        cut = fraction * horizon if fraction is not None else min(float(t[-1]), horizon)
        r_range = reward_range or ((0.0, 1.0) if meta else None)
        context = RunContext(reward_range=r_range, batch=batch)
        record: dict[str, Any] = {"log": str(log), "cut_step": cut, "horizon": horizon}
        result = None
        if cut < horizon:
            result = forecast_run(t, y, cut / horizon, horizon, context, settings, column, target=target)
        staged = (_waiting_sum(frame, cut, horizon, settings, r_range, component_ranges)
                  if result is not None and result.success and column == "reward" else None)
        if staged is not None:  # a reward function yet to rise: the sum, its headroom in the band
            draws = np.asarray(staged.plateau_draws, float)
            record.update(plateau={k: staged.plateau[k] for k in ("mean", "lo80", "hi80")},
                          level_at_cut=result.level_at_cut, message=result.message,
                          components={"waiting": staged.waiting, "notes": staged.notes})
            if target is not None:
                summed = staged.prediction
                record["target"] = target_reach(summed.steps, summed.mean, summed.mean_draws, draws, float(target),
                                                result.level_at_cut).to_dict()
            path = mean_curve_band(staged.prediction)
        elif result is not None and result.success:
            draws = np.asarray(result.plateau_draws, float)
            record.update(plateau=result.plateau, level_at_cut=result.level_at_cut, message=result.message)
            if result.target:
                record["target"] = result.target
            path = mean_curve_band(result.prediction)
        else:
            seen = y[t <= cut]
            level, level_sd, _ = smoothed_level(seen)
            level_sd = level_sd if np.isfinite(level_sd) else 0.0
            draws = level + level_sd * rng.standard_normal(settings.draws)
            record.update(plateau={"mean": level, "lo80": float(np.quantile(draws, 0.1)),
                                   "hi80": float(np.quantile(draws, 0.9))}, level_at_cut=level,
                          message=(result.message if result is not None else
                                   f"the run has reached the horizon (step {horizon:.0f}): it ends at its level"))
            path = None
        unbounded = undeclared_range_note(y[t <= cut], record["plateau"], r_range) if path is not None else None
        if unbounded:
            record["notes"] = [unbounded]
        curves[str(log)] = {"steps": t, "values": y, "cut": cut, "path": path}
        runs.append((record, draws))
    draws = [d for _, d in runs]
    levels = [r["level_at_cut"] for r, _ in runs]
    stop, p_beat, best_so_far = stop_decisions(draws, levels, threshold)
    p_top = p_highest(draws)
    for (record, _), s, pb, pt in zip(runs, stop, p_beat, p_top):
        record.update(p_highest=float(pt), p_beats_best_so_far=float(pb), stop_now=bool(s))
    order = sorted(range(len(runs)), key=lambda i: -runs[i][0]["plateau"]["mean"])
    ranked = []
    for rank, i in enumerate(order, start=1):
        runs[i][0]["rank"] = rank
        ranked.append(runs[i][0])
    payload = finite_or_none({
        "column": column, "horizon": max(horizons), "fraction": fraction, "stop_threshold": threshold,
        "horizon_source": ("--total-steps" if total_steps is not None else "the runs' planned lengths" if known
                           else "the longest run's last logged step: no run records a planned length (a meta.json "
                                "or trainer_state.json max_steps); give --total-steps for runs still going"),
        "best_so_far": {"level": best_so_far, "log": str(logs[int(np.argmax(levels))])},
        "runs": ranked})
    if out_json:
        write_json(out_json, payload)
    else:
        print(compare_text(payload))
    if out_png:
        from pgrpo.figures.forecasts import compare_figure
        from pgrpo.figures.style import save_pdf_png

        save_pdf_png(compare_figure(payload, curves), None, out_png)
    return payload


def mean_curve_band(prediction: Any, level: float = 0.8) -> dict[str, np.ndarray]:
    """A predictive's mean curve at the steps ahead with the central ``level`` band of its mean-curve draws (where
    the run is going, the logging noise left out: the band the plateau's interval is read from)."""
    draws = np.asarray(prediction.mean_draws, float)
    tail = (1.0 - level) / 2
    return {"step": np.asarray(prediction.steps, float), "mean": np.asarray(prediction.mean, float),
            "lo": np.quantile(draws, tail, axis=0), "hi": np.quantile(draws, 1.0 - tail, axis=0)}


def _waiting_sum(frame: Any, cut: float, horizon: float, settings: Any,
                 reward_range: tuple[float, float] | None,
                 component_ranges: Mapping[str, Sequence[float]] | None = None) -> Any:
    """The log's reward functions forecast from the cut and summed (:func:`pgrpo.fit.staged.
    forecast_logged_components`) where one of them waits to rise (:attr:`pgrpo.fit.staged.StagedForecast.waiting`):
    the forecast the run is ranked and stopped by then; else None (the reward's own forecast)."""
    from pgrpo.fit.staged import forecast_logged_components
    from pgrpo.grpo.run_log import reward_function_columns, reward_function_sds

    columns = {fn: frame[col].to_numpy(float) for fn, col in reward_function_columns(frame.columns).items()}
    if len(columns) < 2 or "reward" not in frame.columns:
        return None
    staged = forecast_logged_components(frame["step"].to_numpy(float), frame["reward"].to_numpy(float), columns,
                                        cut / horizon, horizon, settings, component_ranges or {}, reward_range,
                                        reward_function_sds(frame))
    if staged is None or staged.plateau_draws is None or not staged.plateau or not staged.waiting:
        return None
    return staged


def compare_paths(args_log: str | Sequence[str] | None, compare: Sequence[str]) -> list[str]:
    """The logs of ``pgrpo forecast [LOG ...] --compare LOG ...``: the positional ones first, if any; a W&B export of
    several runs gives each of its runs (``FILE::RUN``, :func:`pgrpo.stages.logs.log_runs`)."""
    from pgrpo.stages.logs import log_runs

    positional = [args_log] if isinstance(args_log, str) else list(args_log or [])
    given = [str(Path(p)) for p in positional] + [str(Path(p)) for p in compare]
    return [run for path in given for run in log_runs(path)]
