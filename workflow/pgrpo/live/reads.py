"""One live read of a run in progress: the failure modes of ``pgrpo diagnose`` (Section 5, Figures 2-5, through
:func:`pgrpo.diagnose.readouts.report.diagnose_curves`, the function the CLI calls) and the forecast of ``pgrpo
forecast`` (:func:`pgrpo.fit.forecast.forecast_run` with the run's planned length), on what has been logged so far
(the stop rules that read successive reads are in :mod:`pgrpo.live.stop_rules`); and Theorem 7 (Eq. 9-10) and
Prop. 9 (Eq. 11) for the run's configuration, with ``K`` measured from the early slope (Eq. 14 inverted, as Section
5.6's protocol does).

Pure: no file is read or written here (the callback in :mod:`pgrpo.live.callback` and the stage
:mod:`pgrpo.stages.live` do that), and nothing imports transformers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pgrpo.diagnose.columns import KNOWN_COLUMNS, apply_aliases
from pgrpo.diagnose.modes.record import MODES
from pgrpo.diagnose.records import RunCurves, plain
from pgrpo.diagnose.settings import DiagnosticsConfig, diagnostics_config
from pgrpo.errors import InputError, range_bounds
from pgrpo.grpo.run_log import frame_from_log_history, normalize_column, normalize_log

#: the prefix of the keys a read adds to the trainer's logs (stripped again before a read)
KEY_PREFIX = "pgrpo/"

#: severities that count toward a stop (the issue: "severity at least medium")
STOP_SEVERITIES = frozenset({"medium", "high"})

#: consecutive reads a stop rule must hold at before it stops the run
CONSECUTIVE_READS = 2


#: fewest reward points before K is measured from the early slope
MIN_POINTS_FOR_K = 10

#: modes whose failure is a claim about the level the reward will reach (no_learning: it will not rise beyond its
#: noise; regression: it will not return to its peak): live, their stop also asks the forecast (the same read's
#: plateau band, an independent estimate from the learning-curve laws) not to expect that rise: a stop waits while
#: the plateau's upper 80% bound lies beyond the mode's own threshold (:func:`forecast_allows_recovery`, read by
#: :mod:`pgrpo.live.stop_rules`)
FORECAST_GATED_MODES = frozenset({"no_learning", "regression"})

#: the share of the planned run (from its first logged step) before which a hacking flag read off a gold reward
#: function, standing in for an eval column, counts toward no stop (:func:`gold_still_early`, read by
#: :mod:`pgrpo.live.stop_rules`; session 25, chosen on the planted and dev logs with
#: ``benchmarks/live/stop_gates.py``): early in a run that learns its format before its correctness, the function that
#: scores the task has not started while the total rises, which is the hacking signature, and a stop there kills a
#: healthy run; an eval column is direct evidence and is not held
GOLD_STAND_IN_SHARE = 0.3

#: the forecast runs at every this many reads by default (measured by benchmarks/live/bench_read.py: a read that
#: diagnoses costs ~0.03 s, one that also forecasts ~0.1-0.15 s on one core, for logs of 100-1000 rows)
DEFAULT_FORECAST_EVERY = 3

#: reads by which the callback's stop lags the read that decided it by default: its reads run in a background
#: worker and read ``n`` is applied at read ``n + 1`` (0: ``background=False``, the stop at the deciding read)
DEFAULT_LAG_READS = 1


def check_modes(key: str, modes: Sequence[str]) -> None:
    """An :class:`InputError` naming ``live <key>`` and the modes of ``modes`` that are not failure modes."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise InputError(f"live {key}: unknown mode(s) {', '.join(map(str, unknown))} (known: {', '.join(MODES)})")


@dataclass(frozen=True)
class LiveSettings:
    """What the callback, ``pgrpo replay`` and ``pgrpo watch`` share: the read cadence (``every`` logged training
    steps), the stop rules and what the user knows about the run (reward range, completion cap)."""

    every: int = 10
    stop_on: tuple[str, ...] = ()
    stop_if_plateau_below: float | None = None
    reward_range: tuple[float, float] | None = None
    max_completion_length: int | None = None
    #: forecast at every ``forecast_every``-th read (the 3rd, 6th, ...; 1: every read, 0: never); the reads between
    #: carry the latest forecast forward (its cost is ~4-5x the diagnosis': see benchmarks/live/bench_read.py)
    forecast_every: int = DEFAULT_FORECAST_EVERY
    #: the diagnose rule set (``ours``; ``toolkit``: the post-training toolkit's rules, for the live benchmark)
    rule_set: str = "ours"
    #: diagnose only the last ``window_rows`` logged rows (None: the whole history; the toolkit's callback: 200)
    window_rows: int | None = None
    #: consecutive reads a stop rule must hold at, and the severities that count (the toolkit: 1 read, "high")
    consecutive_reads: int = CONSECUTIVE_READS
    stop_severities: tuple[str, ...] = tuple(sorted(STOP_SEVERITIES))
    #: the reward function that scores the task (``diagnostics.reward_hacking.gold_reward``; None: by its name)
    gold_reward: str | None = None
    #: each reward function's declared range, fn -> (lo, hi) in its own units (``pgrpo forecast --component-range``):
    #: a function not yet rising keeps its headroom in the summed forecast's plateau band
    component_ranges: Mapping[str, tuple[float, float]] | None = None
    #: stop when the reward's smoothed level (simple exponential smoothing, the forecast's level at the cut) is at
    #: or above this at :data:`CONSECUTIVE_READS` reads in a row: the target met, the rest of the budget saved
    stop_if_reached: float | None = None

    def __post_init__(self):
        for name in ("every", "forecast_every", "consecutive_reads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "forecast_every"
                                                                                  else 1):
                raise InputError(f"live {name}: must be an integer >= {0 if name == 'forecast_every' else 1}, "
                                 f"got {value!r}")
        if self.window_rows is not None and (isinstance(self.window_rows, bool)
                                             or not isinstance(self.window_rows, int) or self.window_rows < 1):
            raise InputError(f"live window_rows: must be an integer >= 1, got {self.window_rows!r}")
        if self.rule_set not in ("ours", "toolkit"):
            raise InputError(f"live rule_set: must be 'ours' or 'toolkit', got {self.rule_set!r}")
        check_modes("stop_on", self.stop_on)
        for name in ("stop_if_plateau_below", "stop_if_reached"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise InputError(f"live {name}: must be a number, got {value!r}")
        if self.gold_reward is not None and not (isinstance(self.gold_reward, str) and self.gold_reward):
            raise InputError(f"live gold_reward: must be a reward function's name, got {self.gold_reward!r}")
        range_bounds(self.reward_range, "live reward_range", null_ok=True)
        if self.component_ranges:  # as the summed forecast takes them: fn -> (lo, hi) floats, whatever was given
            object.__setattr__(self, "component_ranges", {
                str(fn): range_bounds(bounds, f"live component_ranges {fn!r}")
                for fn, bounds in self.component_ranges.items()})
        else:
            object.__setattr__(self, "component_ranges", None)

    def config(self) -> DiagnosticsConfig:
        """The ``diagnostics`` config the CLI would build from ``--reward-range``, ``--max-completion-length`` and
        ``--gold-reward``."""
        modes: dict[str, Any] = {} if self.rule_set == "ours" else {"rule_set": self.rule_set}
        if self.reward_range is not None:
            modes["reward_range"] = [float(v) for v in self.reward_range]
        if self.max_completion_length is not None:
            modes["truncation"] = {"max_completion_length": int(self.max_completion_length)}
        section: dict[str, Any] = {"modes": modes} if modes else {}
        if self.gold_reward is not None:
            section["reward_hacking"] = {"gold_reward": self.gold_reward}
        return diagnostics_config(section)

    def forecasts_at(self, index: int) -> bool:
        """Whether the read numbered ``index`` (0-based) forecasts: the first and every ``forecast_every``-th."""
        return self.forecast_every > 0 and (index == 0 or (index + 1) % self.forecast_every == 0)

    def with_completion_cap(self, cap: int | None) -> "LiveSettings":
        """These settings with the completion cap (read from the trainer's args) set where it was not."""
        return self if self.max_completion_length is not None or not cap else replace(
            self, max_completion_length=int(cap))

    def with_component_ranges(self, component_ranges: Mapping[str, Sequence[float]] | None) -> "LiveSettings":
        """These settings with each reward function's declared range set where none was."""
        return self if self.component_ranges or not component_ranges else replace(
            self, component_ranges=component_ranges)

    def to_dict(self) -> dict[str, Any]:
        return plain({"every": self.every, "stop_on": list(self.stop_on),
                      "stop_if_plateau_below": self.stop_if_plateau_below,
                      "stop_if_reached": self.stop_if_reached, "reward_range": self.reward_range,
                      "component_ranges": dict(self.component_ranges) if self.component_ranges else None,
                      "max_completion_length": self.max_completion_length, "forecast_every": self.forecast_every,
                      "rule_set": self.rule_set, "window_rows": self.window_rows,
                      "consecutive_reads": self.consecutive_reads, "stop_severities": list(self.stop_severities)})


def curves_from_history(history: Sequence[Mapping[str, Any]], source: str = "log_history",
                        meta: Mapping[str, Any] | None = None) -> RunCurves:
    """A trainer's ``state.log_history`` as the RunCurves ``pgrpo diagnose`` reads from a ``trainer_state.json``
    (the same normalisation: :func:`frame_from_log_history`, :func:`normalize_log`, the column aliases); NaN and
    infinite values are read as missing and listed (``--allow-nan``), the keys a read added are left out."""
    rows, non_finite = [], {}
    for entry in history:
        if not isinstance(entry, Mapping):
            continue
        row = {k: v for k, v in entry.items() if not str(k).startswith(KEY_PREFIX)}
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value) and key != "step":
                non_finite.setdefault(normalize_column(key), []).append(float(entry.get("step", float("nan"))))
        rows.append(row)
    frame = frame_from_log_history(rows, source).replace([np.inf, -np.inf], np.nan)
    frame = normalize_log(frame, source)
    return _curves(frame, source, meta, non_finite)


def _curves(frame: pd.DataFrame, source: str, meta: Mapping[str, Any] | None,
            non_finite: Mapping[str, list[float]]) -> RunCurves:
    frame, sources = apply_aliases(frame)
    known = [c for c in KNOWN_COLUMNS if c in frame.columns and np.isfinite(frame[c].to_numpy(float)).any()]
    if not known:
        raise InputError(f"log {source} has no recognisable column yet (looked for {', '.join(KNOWN_COLUMNS)})")
    meta = dict(meta or {})
    G = int(meta["G"]) if meta.get("G") else None
    return RunCurves(str(meta.get("model") or "run"), G, frame, source, meta or None,
                     {c: sources.get(c, c) for c in known},
                     {k: list(v) for k, v in non_finite.items()})


def curves_up_to(curves: RunCurves, step: float) -> RunCurves:
    """What had been logged by ``step``: the rows at or before it (``pgrpo replay``'s view of a live read)."""
    frame = curves.frame[curves.frame["step"].to_numpy(float) <= step].reset_index(drop=True)
    non_finite = {k: [s for s in v if s <= step] for k, v in curves.non_finite.items()}
    return RunCurves(curves.model, curves.G, frame, curves.source, curves.meta, dict(curves.column_sources),
                     {k: v for k, v in non_finite.items() if v})


def curves_tail(curves: RunCurves, rows: int | None) -> RunCurves:
    """The last ``rows`` logged rows (the post-training toolkit's callback reads a 200-row window); None: all."""
    if rows is None or len(curves.frame) <= rows:
        return curves
    frame = curves.frame.iloc[-rows:].reset_index(drop=True)
    first = float(frame["step"].iloc[0])
    non_finite = {k: [s for s in v if s >= first] for k, v in curves.non_finite.items()}
    return RunCurves(curves.model, curves.G, frame, curves.source, curves.meta, dict(curves.column_sources),
                     {k: v for k, v in non_finite.items() if v})


def training_steps(curves: RunCurves) -> np.ndarray:
    """The steps with a logged training reward (the rows a read counts), in order."""
    if "reward" not in curves.frame.columns:
        return np.array([])
    steps = curves.frame["step"].to_numpy(float)
    values = curves.frame["reward"].to_numpy(float)
    return np.sort(steps[np.isfinite(values) & np.isfinite(steps)])


@dataclass
class LiveRead:
    """One read at ``step``: the diagnosis (``diagnosis``: ``pgrpo diagnose --json``'s schema), the forecast
    (``forecast``: ``pgrpo forecast``'s record of the forecaster, ``plateau``/``t90`` with 80% bands), how long it
    took (``seconds``) and why a part could not run (``errors``)."""

    step: float
    diagnosis: dict[str, Any] = field(default_factory=dict)
    forecast: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    #: the step the forecast was made at: this read's step, an earlier read's (carried forward), or None (none yet)
    forecast_step: float | None = None
    #: the run's planned length in steps (the forecast's horizon; None: not known) and its first logged step
    total_steps: float | None = None
    first_step: float | None = None
    #: the training reward's smoothed level at this read and its s.d. (``mean``, ``sd``), read for the target rule
    #: (``stop_if_reached``; None: not set, or no reward yet)
    level: dict[str, float] | None = None

    @property
    def fresh_forecast(self) -> bool:
        """Whether this read forecast (rather than carrying an earlier read's forecast forward)."""
        return self.forecast_step is not None and self.forecast_step == self.step

    @property
    def modes(self) -> dict[str, dict[str, Any]]:
        """Per mode, generically: ``flagged``, ``onset_step``, ``severity`` (and ``episodes``/``active`` where the
        mode reports them)."""
        out = {}
        for mode, verdict in (self.diagnosis.get("modes") or {}).items():
            out[mode] = {k: verdict.get(k) for k in ("flagged", "onset_step", "severity", "verdict")}
            for extra in ("episodes", "active"):
                if extra in verdict:
                    out[mode][extra] = verdict[extra]
        return out

    @property
    def plateau(self) -> dict[str, float | None]:
        band = self.forecast.get("plateau") or {}
        return {k: band.get(k) for k in ("mean", "lo80", "hi80")}

    @property
    def t90(self) -> dict[str, float | None]:
        band = self.forecast.get("t90") or {}
        return {k: band.get(k) for k in ("mean", "lo80", "hi80")}

    @property
    def summed_plateau(self) -> dict[str, float] | None:
        """The plateau of the reward functions forecast one by one and summed, each one's headroom in its band
        (``pgrpo forecast``'s ``components``, :func:`pgrpo.fit.staged.forecast_components`), where the read made
        it; else None."""
        band = (self.forecast.get("components") or {}).get("plateau") or {}
        values = {k: band.get(k) for k in ("mean", "lo80", "hi80")}
        ok = all(isinstance(v, (int, float)) and math.isfinite(v) for v in values.values())
        return values if ok else None

    @property
    def waiting(self) -> list[str]:
        """The reward functions that wait to rise at this read (:attr:`pgrpo.fit.staged.StagedForecast.waiting`)."""
        return list((self.forecast.get("components") or {}).get("waiting") or [])

    @property
    def sum_decides(self) -> bool:
        """Whether the plateau stop rule reads the reward functions' sum: where the read made it and one of them
        waits to rise (its headroom in the band, so a run whose correctness reward has not paid yet is not stopped
        as if it never would): the choice ``pgrpo forecast --compare`` and the forecast benchmark make."""
        return bool(self.waiting) and self.summed_plateau is not None

    @property
    def decision_plateau(self) -> dict[str, float | None]:
        """The plateau the plateau stop rule reads: the reward functions' sum where it decides
        (:attr:`sum_decides`), else the reward's own."""
        return self.summed_plateau if self.sum_decides else self.plateau

    def log_keys(self) -> dict[str, float]:
        """The ``pgrpo/*`` keys added to the trainer's logs: ``pgrpo/<mode>`` (0/1, modes that could run) and the
        forecast's plateau with its 80% band and ``t90`` (when the forecast ran)."""
        keys: dict[str, float] = {}
        for mode, verdict in self.modes.items():
            if verdict.get("flagged") is not None:
                keys[f"{KEY_PREFIX}{mode}"] = 1.0 if verdict["flagged"] else 0.0
        if not self.fresh_forecast:
            return keys
        summed = self.summed_plateau or {}
        for name, value in (("plateau", self.plateau["mean"]), ("plateau_lo80", self.plateau["lo80"]),
                            ("plateau_hi80", self.plateau["hi80"]), ("t90", self.t90["mean"]),
                            ("plateau_summed", summed.get("mean")), ("plateau_summed_lo80", summed.get("lo80")),
                            ("plateau_summed_hi80", summed.get("hi80"))):
            if isinstance(value, (int, float)) and math.isfinite(value):
                keys[f"{KEY_PREFIX}{name}"] = float(value)
        return keys

    @property
    def held_by_forecast(self) -> list[str]:
        """The :data:`FORECAST_GATED_MODES` flagged at this read whose forecast still expects the rise (or the
        return to the peak) the flag rules out: no stop counts them here (:func:`forecast_allows_recovery`)."""
        return [mode for mode in sorted(FORECAST_GATED_MODES)
                if (self.modes.get(mode) or {}).get("flagged") and forecast_allows_recovery(self, mode)]

    @property
    def held_early(self) -> list[str]:
        """The modes flagged at this read that no stop counts yet because the run is early: hacking read off a gold
        reward function before :data:`GOLD_STAND_IN_SHARE` of the planned run (:func:`gold_still_early`)."""
        flagged = (self.modes.get("hacking") or {}).get("flagged")
        return ["hacking"] if flagged and gold_still_early(self, "hacking") else []

    def verdict_line(self) -> str:
        """One line a user reads: the step, the flagged modes, where the run is headed (and which flags the
        forecast holds back from a stop)."""
        summary = (self.diagnosis.get("summary") or {}).get("line") or "no diagnosis"
        plateau = self.plateau
        if isinstance(plateau["mean"], (int, float)):
            head = (f"plateau {plateau['mean']:.3g} [{plateau['lo80']:.3g}, {plateau['hi80']:.3g}] (80%)"
                    if isinstance(plateau["lo80"], (int, float)) and isinstance(plateau["hi80"], (int, float))
                    else f"plateau {plateau['mean']:.3g}")
            t90 = self.t90["mean"]
            head += f", t90 ~ step {t90:.0f}" if isinstance(t90, (int, float)) else ""
            summed = self.summed_plateau
            if summed is not None:
                head += (f"; reward functions summed: plateau {summed['mean']:.3g} [{summed['lo80']:.3g}, "
                         f"{summed['hi80']:.3g}] (80%)")
                if self.waiting:
                    head += f" ({', '.join(self.waiting)} waits to rise: the sum decides)"
            head += (f" (forecast at step {self.forecast_step:g})"
                     if not self.fresh_forecast and self.forecast_step is not None else "")
        else:
            head = "no forecast yet" + (f" ({self.forecast.get('message')})" if self.forecast.get("message") else "")
        held = self.held_by_forecast
        if held:
            head += (f"; {' and '.join(held)} held from a stop: the forecast's band still reaches past "
                     f"{'its threshold' if len(held) == 1 else 'their thresholds'}")
        if self.held_early:
            head += (f"; hacking held from a stop until {GOLD_STAND_IN_SHARE:.0%} of the run: its gold reward "
                     "function may not have started yet")
        return f"step {self.step:g}: {summary}; {head}"

    def to_dict(self) -> dict[str, Any]:
        held, early = self.held_by_forecast, self.held_early
        return plain({"step": self.step, "modes": self.modes, "plateau": self.plateau, "t90": self.t90,
                      "forecast_step": self.forecast_step, "seconds": self.seconds, "errors": self.errors,
                      **({"held_by_forecast": held} if held else {}),
                      **({"held_early": early} if early else {}),
                      **({"level": self.level} if self.level is not None else {})})


def read_curves(curves: RunCurves, settings: LiveSettings, total_steps: float | None = None,
                batch: float | None = None, forecast: bool = True, previous: LiveRead | None = None) -> LiveRead:
    """One read: ``diagnose_curves`` (the CLI's function, the modes of :mod:`pgrpo.diagnose.modes`; on the last
    ``settings.window_rows`` rows where set) and, when ``forecast``, the forecaster cut at the last logged step,
    forecasting to ``total_steps`` (the planned length; default the last logged step, which leaves nothing to
    forecast); without it the ``previous`` read's forecast is carried forward. A part that fails is recorded in
    ``errors``, never raised."""
    from pgrpo.diagnose.readouts.report import diagnose_curves
    from pgrpo.fit.forecast import forecast_run
    from pgrpo.fit.forecaster import ForecasterSettings, RunContext

    started = time.perf_counter()
    step = float(curves.last_step)
    read = LiveRead(step, total_steps=float(total_steps) if total_steps else None,
                    first_step=float(curves.first_step) if math.isfinite(curves.first_step) else None)
    try:
        read.diagnosis = diagnose_curves(curves_tail(curves, settings.window_rows), settings.config()).to_dict()
    except Exception as error:  # noqa: BLE001 - a read never raises into the trainer
        read.errors.append(f"diagnose: {type(error).__name__}: {error}")
    if settings.stop_if_reached is not None:  # what the target rule reads (a pass over the log: only when set)
        read.level = reward_level(curves)
    if not forecast:
        if previous is not None:
            read.forecast, read.forecast_step = previous.forecast, previous.forecast_step
        read.seconds = time.perf_counter() - started
        return read
    read.forecast_step = step
    try:
        steps, values, _ = curves.series("reward")
        total = float(total_steps) if total_steps else float(step)
        if steps.size and total > 0:
            fraction = min(1.0, float(steps[-1]) / total)
            meta = curves.meta or {}
            eval_series = None
            if curves.has("eval_reward"):
                eval_steps, eval_values, _ = curves.series("eval_reward")
                eval_series = (eval_steps, eval_values)
            reward_range = settings.reward_range or ((0.0, 1.0) if meta.get("k_ref") is not None else None)
            context = RunContext(reward_range=tuple(map(float, reward_range)) if reward_range else None,
                                 batch=batch, mu=_number(meta.get("mu")), k_ref=_number(meta.get("k_ref")),
                                 eval_series=eval_series)
            result = forecast_run(steps, values, fraction, total, context, ForecasterSettings(), "reward")
            read.forecast = replace(result, forecast={}).to_dict()  # the per-step path: kept out of the read
            read.forecast.pop("forecast", None)
        else:
            read.forecast = {"success": False, "message": "no reward logged yet"}
    except Exception as error:  # noqa: BLE001
        read.errors.append(f"forecast: {type(error).__name__}: {error}")
        read.forecast = {"success": False, "message": str(error)}
    if settings.stop_if_plateau_below is not None and read.forecast.get("success"):
        try:  # the plateau rule reads the reward functions' sum: one forecast per function, made only for it
            summed = summed_forecast(curves, settings, float(read.forecast["fraction"]),
                                     float(read.forecast["total_steps"]))
            if summed is not None:
                read.forecast["components"] = summed
        except Exception as error:  # noqa: BLE001
            read.errors.append(f"forecast of the reward functions: {type(error).__name__}: {error}")
    read.seconds = time.perf_counter() - started
    return read


def reward_level(curves: RunCurves) -> dict[str, float] | None:
    """The training reward's level now: simple exponential smoothing of everything logged
    (:func:`pgrpo.fit.level_guard.smoothed_level`, the forecast's level at the cut), with its s.d."""
    from pgrpo.fit.level_guard import smoothed_level

    if not curves.has("reward"):
        return None
    values = curves.series("reward")[1]
    values = values[np.isfinite(values)]
    if values.size < 3:
        return None
    level, sd, _ = smoothed_level(values)
    return {"mean": float(level), "sd": float(sd)} if math.isfinite(level) else None


def summed_forecast(curves: RunCurves, settings: LiveSettings, fraction: float, total_steps: float
                    ) -> dict[str, Any] | None:
    """``pgrpo forecast``'s ``components`` record (:func:`pgrpo.fit.staged.forecast_components`: each
    ``rewards/<fn>/mean`` forecast in turn and summed, a function not yet rising keeping its headroom in the
    plateau's band) from what has been logged, without the per-step path; None for a log with fewer than two
    reward functions."""
    from pgrpo.fit.forecaster import ForecasterSettings
    from pgrpo.fit.staged import forecast_logged_components
    from pgrpo.grpo.run_log import reward_function_columns, reward_function_sds

    frame = curves.frame.sort_values("step", kind="stable")
    columns = {fn: frame[column].to_numpy(float) for fn, column in reward_function_columns(frame.columns).items()}
    reward = frame["reward"].to_numpy(float) if "reward" in frame.columns else None
    reward_range = tuple(map(float, settings.reward_range)) if settings.reward_range else None
    staged = forecast_logged_components(frame["step"].to_numpy(float), reward, columns, fraction, total_steps,
                                        ForecasterSettings(), dict(settings.component_ranges or {}), reward_range,
                                        reward_function_sds(frame))
    if staged is None:
        return None
    out = staged.to_dict()
    out.pop("forecast", None)
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def forecast_allows_recovery(read: "LiveRead", mode: str) -> bool:
    """Whether the read's forecast still expects what a :data:`FORECAST_GATED_MODES` flag says will not happen, by
    the mode's own numbers: for no_learning, the plateau's upper 80% bound above the early level plus the flag's
    one-sided upper bound on the rise (``trend_upper``: the rise the flag rules out; session 26, chosen on the planted
    and dev logs with ``benchmarks/live/no_learning_gates.py`` over the late level plus the net rise's detection
    threshold, a rise a noisy log may never show); for regression, above the peak minus the drop's threshold (a
    return to within noise of the peak). False where the read has no forecast plateau or the mode no such numbers
    (the flag stands as before)."""
    hi80 = read.plateau.get("hi80")
    numbers = ((read.diagnosis.get("modes") or {}).get(mode) or {}).get("numbers") or {}
    if mode == "no_learning":
        level, bound = numbers.get("early"), numbers.get("trend_upper")
        ceiling = level + max(bound, 0.0) if all(_finite(v) for v in (level, bound)) else None
    elif mode == "regression":
        peak, threshold = numbers.get("peak"), numbers.get("drop_threshold")
        ceiling = peak - threshold if all(_finite(v) for v in (peak, threshold)) else None
    else:
        return False
    return _finite(hi80) and ceiling is not None and hi80 > ceiling


def gold_still_early(read: "LiveRead", mode: str, share: float | None = None) -> bool:
    """Whether ``mode`` is hacking flagged off a gold reward function standing in for an eval column (the read-out's
    ``held_out`` number) before ``share`` (default :data:`GOLD_STAND_IN_SHARE`) of the planned run: such a read
    counts toward no stop. False where the planned length is not known (the flag stands as before)."""
    share = GOLD_STAND_IN_SHARE if share is None else share
    if mode != "hacking":
        return False
    numbers = ((read.diagnosis.get("modes") or {}).get(mode) or {}).get("numbers") or {}
    total, first = read.total_steps, read.first_step if read.first_step is not None else 0.0
    if not numbers.get("held_out") or not total or total <= first:
        return False
    return read.step - first < share * (float(total) - first)


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite number (:func:`_number`, and not NaN or infinite)."""
    number = _number(value)
    return number is not None and math.isfinite(number)


# ---- Theorem 7 at the start ----------------------------------------------------------------------------------


def refresh_of(num_iterations: int, steps_per_generation: int | None, gradient_accumulation_steps: int) -> float:
    """K_ref in optimizer steps from TRL's arguments (:func:`pgrpo.grpo.training_config.refresh_interval`)."""
    from pgrpo.grpo.refresh import refresh_interval

    return float(refresh_interval({"num_iterations": int(num_iterations or 1),
                                   "steps_per_generation": steps_per_generation,
                                   "gradient_accumulation_steps": int(gradient_accumulation_steps or 1)}))


def configuration_theory(eta: float, mu: float, k_ref: float) -> dict[str, Any]:
    """Theorem 7 before any step: the configuration and Prop. 9's critical stiffness ``(1 - mu) / (eta K_ref)``
    (Eq. 11: unstable for a measured ``K`` above it)."""
    k_crit = (1.0 - mu) / (eta * k_ref) if eta > 0 and k_ref > 0 else float("inf")
    line = (f"Theorem 7: eta={eta:g}, mu={mu:g} (Adam beta1), K_ref={k_ref:g}; Prop. 9 stable while K < "
            f"(1-mu)/(eta K_ref) = {k_crit:.4g}; K is measured from the early slope at the first read with "
            f">= {MIN_POINTS_FOR_K} rewards")
    return plain({"eta": eta, "mu": mu, "k_ref": k_ref, "critical_K": k_crit, "line": line})


def measured_theory(steps: np.ndarray, rewards: np.ndarray, eta: float, mu: float, k_ref: float) -> dict[str, Any]:
    """K from the early slope (Eq. 14 inverted, :func:`pgrpo.fit.kref_sweep.measure_stiffness`), the Prop. 9 margin
    ``(1 - mu) - K eta K_ref``, zeta (Eq. 10) and the predicted regime (oscillation when zeta < 1)."""
    from pgrpo.fit.kref_sweep import SweepRun, measure_stiffness, predicted_regime
    from pgrpo.theory.closed_forms import damping_ratio

    estimate = measure_stiffness(SweepRun("live", eta, k_ref, mu, np.asarray(steps, float),
                                          np.asarray(rewards, float)))
    K = estimate.K
    if not (math.isfinite(K) and K > 0):
        return plain({"K": None, "margin": None, "zeta": None, "regime": "unknown", "step": float(steps[-1]),
                      "line": f"K not measured from the early slope ({estimate.message or 'no positive K'})"})
    margin = (1.0 - mu) - K * eta * k_ref
    zeta = float(damping_ratio(eta, mu, K, k_ref))
    regime = predicted_regime(zeta, margin)
    line = (f"K = {K:.4g} from the early slope (to step {steps[-1]:g}); Prop. 9 margin (1-mu) - K eta K_ref = "
            f"{margin:.4g}; zeta = {zeta:.3g}: predicted {regime}" +
            (" (an oscillation: zeta < 1)" if regime == "oscillatory" else ""))
    return plain({"K": K, "rate": estimate.rate, "margin": margin, "zeta": zeta, "regime": regime,
                  "step": float(steps[-1]), "line": line})
