"""Stages ``pgrpo replay`` and ``pgrpo watch``: the live reads of :mod:`pgrpo.live.reads` (Section 5's failure
modes and Section 4.4's forecast, read as :class:`pgrpo.live.DynamicsCallback` reads them) over a saved log as if
live, and over a run started without the callback, re-reading its newest log; ``live.json``/``live.html`` and the
replay's JSON written atomically.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from pgrpo.atomic import read_json, write_json
from pgrpo.diagnose.records import RunCurves, plain
from pgrpo.errors import InputError
from pgrpo.live.hooks import alert_environment, run_command
from pgrpo.live.page import live_payload, previous_alerts
from pgrpo.live.reads import (
    DEFAULT_FORECAST_EVERY,
    DEFAULT_LAG_READS,
    MIN_POINTS_FOR_K,
    LiveRead,
    LiveSettings,
    configuration_theory,
    curves_up_to,
    measured_theory,
    read_curves,
    training_steps,
)
from pgrpo.live.stop_rules import AlertRules, StopRules
from pgrpo.live.worker import read_live_json, write_live_payload
from pgrpo.stages.diagnose import log_curves
from pgrpo.stages.logs import planned_steps, resolve_log_path, run_source, split_run


def _theory(meta: Mapping[str, Any] | None) -> tuple[dict[str, Any], tuple[float, float, float] | None]:
    if meta and all(isinstance(meta.get(k), (int, float)) for k in ("eta", "mu", "k_ref")):
        eta, mu, k_ref = float(meta["eta"]), float(meta["mu"]), float(meta["k_ref"])
        return {"configuration": configuration_theory(eta, mu, k_ref)}, (eta, mu, k_ref)
    return {}, None


def _total_steps(curves: RunCurves, total_steps: float | None) -> float:
    meta = curves.meta or {}
    if total_steps:
        return float(total_steps)
    if meta.get("max_steps"):
        return float(meta["max_steps"])
    return float(curves.last_step)


class ScheduledReads:
    """Reads on the callback's schedule and its stop rules: read number ``index`` (0-based) on what had been logged
    by its step, forecasting on the callback's schedule (``settings.forecasts_at``), the latest forecast carried
    between; :class:`StopRules` fed in order. ``pgrpo replay`` makes its reads with it; ``pgrpo watch`` catches up,
    at each poll of the log, the reads its new steps allow (:meth:`catch_up`), so a watcher polled every minute
    decides as the callback would have at the same steps (synchronously: the watcher trains nothing, so a decision
    is acted on at once)."""

    def __init__(self, settings: LiveSettings, alert_on: Sequence[str] | None = None, alerts: bool = False):
        self.settings = settings
        self.rules = StopRules(settings)
        self.reads: list[LiveRead] = []
        #: report-only alerts (:class:`AlertRules`) on the same reads, when asked for; ``new_alerts``: those the last
        #: :meth:`catch_up` completed
        self.alerts = AlertRules(settings, alert_on) if alerts else None
        self.new_alerts: list[dict[str, Any]] = []

    def read(self, view: RunCurves, index: int, total_steps: float | None) -> LiveRead:
        """Read number ``index`` on ``view`` (the log up to its step), recorded."""
        read = read_curves(view, self.settings, total_steps, None, self.settings.forecasts_at(index),
                           self.reads[-1] if self.reads else None)
        self.reads.append(read)
        return read

    def catch_up(self, curves: RunCurves, total_steps: float | None) -> dict[str, Any] | None:
        """The reads due in ``curves`` (one after every ``settings.every``-th logged training step) not made yet;
        the stop record of the first read that decides (None: none)."""
        every = self.settings.every
        points = training_steps(curves)[every - 1::every]
        self.new_alerts = []
        for index in range(len(self.reads), len(points)):
            step = float(points[index])
            read = self.read(curves_up_to(curves, step), index, total_steps)
            if self.alerts is not None:
                self.new_alerts += [a.record(curves.last_step, source=curves.source)
                                    for a in self.alerts.update(read)]
            decision = self.rules.update(read)
            if decision is not None:
                return decision.record(curves.last_step, lag_reads=0, source=curves.source)
        return None


def replay_curves(curves: RunCurves, settings: LiveSettings, total_steps: float | None = None,
                  progress: bool = False, lag_reads: int = DEFAULT_LAG_READS) -> dict[str, Any]:
    """The callback over a saved run: a read after every ``every``-th logged training step (and one at the last
    step, as the callback's read at train end), each on what had been logged by then, forecasting on the callback's
    schedule (``settings.forecast_every``); the stop rules applied as live (the first stop ends the replay).

    ``lag_reads``: 1 (the callback's default, background reads) applies read ``n`` at read ``n + 1``'s step, so a
    decision made at read ``n`` stops at read ``n + 1``'s step (``stopped.read_step`` is read ``n``'s), where the
    callback makes its last read; a decision whose next read would be the one at the end of training stops nothing.
    0 (``background=False``): the stop is at the read that decided. Returns ``{every, lag_reads, reads,
    first_flagged, stopped, ...}`` (and, for callers in Python, ``_reads``: the :class:`LiveRead` records,
    ``_last``: the last)."""
    if isinstance(lag_reads, bool) or lag_reads not in (0, 1):
        raise InputError(f"replay lag_reads: must be 0 (synchronous) or 1 (background), got {lag_reads!r}")
    total = _total_steps(curves, total_steps)
    steps = training_steps(curves)
    if steps.size == 0:
        raise InputError(f"log {curves.source} has no training reward to replay")
    points = list(steps[settings.every - 1::settings.every])
    final = float(steps[-1])
    schedule = ScheduledReads(settings, alerts=True)
    reads = schedule.reads
    first_flagged: dict[str, float] = {}
    alerts: list[dict[str, Any]] = []
    stopped = None
    decided = None  # (the decision, the index of the read that made it), waiting for its read to apply it
    theory, config = _theory(curves.meta)
    for index, step in enumerate(points + ([final] if not points or points[-1] != final else [])):
        view = curves_up_to(curves, float(step))
        read = schedule.read(view, index, total)
        if progress:
            print(read.verdict_line(), file=sys.stderr)
        for mode, verdict in read.modes.items():
            if verdict.get("flagged") and mode not in first_flagged:
                first_flagged[mode] = float(step)
        if config is not None and "measured" not in theory:
            s, v, _ = view.series("reward")
            if s.size >= MIN_POINTS_FOR_K:
                theory["measured"] = measured_theory(s, v, *config)
        if decided is not None:  # applied at this read's step: training stops here, this is its last read
            stopped = decided.record(step)
            break
        if index < len(points):  # the read at the end of training stops nothing
            alerts += [a.record(brief=True) for a in schedule.alerts.update(read)]
            decision = schedule.rules.update(read)
            if decision is not None and lag_reads == 0:
                stopped = decision.record()
                break
            if decision is not None and index + 1 < len(points):
                decided = decision
            # a decision at the last such read would be applied at the end of training: it stops nothing
    return plain({"every": settings.every, "lag_reads": int(lag_reads), "source": curves.source,
                  "total_steps": total, "last_step": float(curves.last_step), "settings": settings.to_dict(),
                  "reads": [{"step": r.step, "modes": {m: {"flagged": v.get("flagged"), "onset_step":
                                                            v.get("onset_step"), "severity": v.get("severity")}
                                                        for m, v in r.modes.items()},
                             "plateau": r.plateau, "t90": r.t90, "forecast_step": r.forecast_step,
                             "seconds": r.seconds, "errors": r.errors,
                             **({"plateau_summed": r.summed_plateau} if r.summed_plateau else {}),
                             **{key: held for key, held in (("held_by_forecast", r.held_by_forecast),
                                                            ("held_early", r.held_early)) if held}}
                            for r in reads],
                  "first_flagged": first_flagged, "alerts": alerts,
                  "stopped": ({k: stopped[k] for k in ("step", "read_step", "mode", "reason", "onset_step",
                                                       "severity")}
                              if stopped else None),
                  "theory": theory, "_last": reads[-1], "_reads": reads})


def _read_meta(meta_json: str | None) -> dict[str, Any] | None:
    return read_json(meta_json, "run metadata") if meta_json else None


def run_replay(log_path: str, every: int = 10, stop_on: Sequence[str] = (), stop_if_plateau_below: float | None = None,
               out_json: str | None = None, meta_json: str | None = None, reward_range: Sequence[float] | None = None,
               max_completion_length: int | None = None, total_steps: float | None = None,
               quiet: bool = False, forecast_every: int = DEFAULT_FORECAST_EVERY,
               lag_reads: int = DEFAULT_LAG_READS, gold_reward: str | None = None,
               component_ranges: Mapping[str, Sequence[float]] | None = None,
               stop_if_reached: float | None = None, out_png: str | None = None) -> dict[str, Any]:
    """``pgrpo replay LOG``: :func:`replay_curves` over any saved log (the formats ``pgrpo diagnose`` reads),
    printing one verdict line per read; ``out_json`` gets the replay's JSON, ``out_png`` its figure
    (:func:`pgrpo.figures.live.replay_figure`). ``lag_reads``: 1 models the
    callback's default (background reads: a stop one read after the read that decided), 0 ``background=False``
    (``pgrpo replay --synchronous``)."""
    meta = _read_meta(meta_json)
    if meta is None:
        beside = resolve_log_path(log_path).parent / "meta.json"
        meta = read_json(str(beside), "run metadata") if beside.is_file() else None
    settings = LiveSettings(int(every), tuple(stop_on), stop_if_plateau_below,
                            tuple(reward_range) if reward_range else None,
                            max_completion_length or (meta or {}).get("max_completion_length"), int(forecast_every),
                            gold_reward=gold_reward, component_ranges=component_ranges,
                            stop_if_reached=stop_if_reached)
    curves = log_curves(log_path, meta, None, allow_non_finite=True)
    if settings.component_ranges:
        from pgrpo.grpo.run_log import reward_function_columns
        from pgrpo.stages.fit import check_component_ranges

        check_component_ranges(settings.component_ranges, list(reward_function_columns(curves.frame.columns)),
                               f"the log {log_path}")
    result = replay_curves(curves, settings, total_steps, progress=not quiet, lag_reads=lag_reads)
    result.pop("_last"), result.pop("_reads")
    if out_json:
        write_json(out_json, result)
    if out_png:
        from pgrpo.figures.live import replay_figure, replay_title
        from pgrpo.figures.style import save_pdf_png

        steps, rewards, _ = curves.series("reward")
        save_pdf_png(replay_figure(steps, rewards, result, replay_title(log_path)), None, out_png)
    return result


def write_live(folder: str | Path, read: LiveRead, settings: LiveSettings, reads: Sequence[LiveRead],
               theory: Mapping[str, Any], source: str, total_steps: float | None,
               curve: Any = None, stopped: Mapping[str, Any] | None = None,
               alerts: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``live.json`` and ``live.html`` in ``folder`` (atomically), and ``stop.json`` when a stop rule has fired;
    ``curve``: the log's frame (its reward drawn); ``alerts``: those told so far."""
    payload = live_payload(read, settings, reads, theory, stopped, source, total_steps, curve=curve, alerts=alerts)
    write_live_payload(folder, payload, stopped)
    return payload


def _earlier_watch_alerts(folder: Path, watched: str, last_step: float) -> list[dict[str, Any]]:
    """The alerts a watch of the same ``watched`` PATH told before (the ``live.json`` in ``folder``, its source that
    PATH or a log under it, such as an earlier checkpoint's), read at or before ``last_step``: a restarted watch
    does not tell them, nor run ``--on-alert`` for them, again."""
    payload = read_live_json(folder)
    source = str(((payload or {}).get("live") or {}).get("source") or "")
    try:
        root, logged = Path(watched).resolve(), Path(source).resolve()
        same = bool(source) and (logged == root or root in logged.parents)
    except (OSError, ValueError):
        same = False
    return previous_alerts(payload, up_to_step=last_step) if same else []


#: ``pgrpo watch``'s exit status when a stop rule fired (0: the run ended, or ``--once`` read it, with no stop)
STOP_EXIT_STATUS = 3


def run_on_stop(command: str, stopped: Mapping[str, Any], stop_json: Path) -> int:
    """``--on-stop``: ``command`` through the shell with the stop in its environment (``PGRPO_STOP_MODE``,
    ``PGRPO_STOP_STEP``, ``PGRPO_STOP_READ_STEP``, ``PGRPO_STOP_REASON``, ``PGRPO_STOP_JSON``); its exit status."""
    return run_command("--on-stop", command, {
        "PGRPO_STOP_MODE": str(stopped["mode"]), "PGRPO_STOP_STEP": f"{stopped['step']:g}",
        "PGRPO_STOP_READ_STEP": f"{stopped['read_step']:g}", "PGRPO_STOP_REASON": str(stopped["reason"]),
        "PGRPO_STOP_JSON": str(stop_json)})


def run_on_alert(command: str, alert: Mapping[str, Any], live_json: Path) -> int:
    """``--on-alert``: ``command`` through the shell with the alert in its environment (``PGRPO_ALERT_MODE``,
    ``PGRPO_ALERT_READ_STEP``, ``PGRPO_ALERT_ONSET_STEP`` (empty when not known), ``PGRPO_ALERT_SEVERITY``,
    ``PGRPO_ALERT_REASON``, ``PGRPO_LIVE_JSON``: :func:`pgrpo.live.hooks.alert_environment`); its exit status."""
    return run_command("--on-alert", command, alert_environment(alert, live_json))


@dataclass
class WatchOutcome:
    """How a watch ended: its full-log reads, the stop record (None: no rule fired), why it ended (``once``,
    ``stopped``, ``finished``: the log reached the run's planned length, ``idle``: the log stopped growing for
    ``idle_timeout`` seconds, ``max_reads``) and the exit status for the CLI."""

    reads: list[LiveRead]
    stopped: dict[str, Any] | None
    ended: str

    @property
    def exit_status(self) -> int:
        return STOP_EXIT_STATUS if self.stopped else 0


def run_watch(path: str, every_seconds: float = 60.0, **options: Any) -> WatchOutcome:
    """``pgrpo watch PATH``: re-read the newest log under ``PATH`` (a TRL output folder's latest checkpoint, a
    ``log.csv``, a W&B CSV being rewritten) every ``every_seconds``, print one verdict line per read (only when the
    log grew) and write ``live.json``/``live.html`` to ``out_dir`` (default ``<the log's folder>/pgrpo``, and
    ``.../pgrpo/RUN`` for run ``RUN`` of a W&B export, ``FILE::RUN``). A log that
    cannot be read (yet, or mid-write) prints a warning and is read again next time; ``once``: one read.

    The stop rules of the callback (``stop_on``, ``stop_if_plateau_below``, ``stop_if_reached``) are applied to reads on its schedule,
    one every ``every_logged`` logged training steps (:class:`ScheduledReads`); when one fires, ``stop.json`` is
    written beside ``live.json``, ``on_stop`` is run (:func:`run_on_stop`: e.g. ``scancel $SLURM_JOB_ID``) and
    the watch ends. It also ends when the log reaches the run's planned length (``total_steps``, else the meta's
    ``max_steps``, else a TRL ``trainer_state.json``'s) or has not grown for ``idle_timeout`` seconds.

    ``on_alert``: report-only alerts on the same schedule (:class:`pgrpo.live.stop_rules.AlertRules`: a mode of
    ``alert_on``, default every mode, that the stop rule would stop on), each printed and run through
    :func:`run_on_alert` once, the watch going on. ``options``: :class:`RunWatch`'s (``once``, ``out_dir``,
    ``meta_json``, ``reward_range``, ``max_completion_length``, ``total_steps``, ``max_reads``, ``stop_on``,
    ``stop_if_plateau_below``, ``stop_if_reached``, ``every_logged``, ``on_stop``, ``idle_timeout``, ``gold_reward``, ``on_alert``,
    ``alert_on``, ``component_ranges``)."""
    watch = RunWatch(path, every_seconds=every_seconds, **options)
    while True:
        outcome = watch.poll()
        if outcome is not None:
            return outcome
        time.sleep(float(every_seconds))


class RunWatch:
    """One run watched (:func:`run_watch`'s arguments; ``prefix``: put before each line it prints, the run's name
    in a sweep): :meth:`poll` reads its newest log once, and returns how the watch ended, or None to go on."""

    def __init__(self, path: str, every_seconds: float = 60.0, once: bool = False, out_dir: str | None = None,
                 meta_json: str | None = None, reward_range: Sequence[float] | None = None,
                 max_completion_length: int | None = None, total_steps: float | None = None,
                 max_reads: int | None = None, stop_on: Sequence[str] = (),
                 stop_if_plateau_below: float | None = None, every_logged: int = 10, on_stop: str | None = None,
                 idle_timeout: float | None = None, gold_reward: str | None = None, on_alert: str | None = None,
                 alert_on: Sequence[str] | None = None,
                 component_ranges: Mapping[str, Sequence[float]] | None = None, prefix: str = "",
                 stop_if_reached: float | None = None):
        if every_seconds <= 0 or (idle_timeout is not None and idle_timeout <= 0):
            raise InputError("pgrpo watch: --every and --idle-timeout must be positive seconds")
        self.path, self.once, self.out_dir, self.meta_json = path, once, out_dir, meta_json
        self.max_completion_length, self.total_steps, self.max_reads = max_completion_length, total_steps, max_reads
        self.on_stop, self.on_alert, self.idle_timeout, self.prefix = on_stop, on_alert, idle_timeout, prefix
        self.rule_settings = LiveSettings(int(every_logged), tuple(stop_on), stop_if_plateau_below,
                                          tuple(reward_range) if reward_range else None, max_completion_length,
                                          gold_reward=gold_reward, component_ranges=component_ranges,
                                          stop_if_reached=stop_if_reached)
        alerting = bool(on_alert) or bool(alert_on)
        stops = bool(stop_on) or stop_if_plateau_below is not None or stop_if_reached is not None
        self.scheduled = ScheduledReads(self.rule_settings, alert_on, alerts=alerting) if stops or alerting else None
        self.reads: list[LiveRead] = []
        self.theory: dict[str, Any] = {}
        self.told: list[dict[str, Any]] | None = None  # the alerts told: an earlier watch's of this PATH, then ours
        self.last_seen: tuple[str, float] | None = None
        self.last_growth = time.monotonic()

    def _say(self, line: str, error: bool = False) -> None:
        print(f"{self.prefix}{line}", file=sys.stderr if error else sys.stdout, flush=True)

    def poll(self) -> WatchOutcome | None:
        """One read of the newest log, if it grew (see :func:`run_watch`); the outcome where the watch ends."""
        path, scheduled = self.path, self.scheduled
        try:
            file = resolve_log_path(path)
            meta = _read_meta(self.meta_json)
            if meta is None and (file.parent / "meta.json").is_file():
                meta = read_json(str(file.parent / "meta.json"), "run metadata")
            curves = log_curves(run_source(path), meta, None, allow_non_finite=True)
            seen = (run_source(path), float(curves.last_step))
            if seen != self.last_seen:
                self.last_seen, self.last_growth = seen, time.monotonic()
                cap = self.max_completion_length or (meta or {}).get("max_completion_length")
                settings = replace(self.rule_settings, max_completion_length=cap)
                planned = self.total_steps or planned_steps(file, meta)  # the file this read resolved
                total = _total_steps(curves, planned)
                read = read_curves(curves, settings, total, None)
                self.reads.append(read)
                if not self.theory:
                    self.theory, config = _theory(curves.meta)
                    s, v, _ = curves.series("reward")
                    if config is not None and s.size >= MIN_POINTS_FOR_K:
                        self.theory["measured"] = measured_theory(s[:max(MIN_POINTS_FOR_K, s.size // 4)],
                                                                  v[:max(MIN_POINTS_FOR_K, s.size // 4)], *config)
                self._say(read.verdict_line())
                stopped = None
                run = split_run(path)[1]  # a run of a W&B export: a folder of its own
                folder = Path(self.out_dir) if self.out_dir else file.parent / "pgrpo" / (run or "")
                if self.told is None:
                    self.told = _earlier_watch_alerts(folder, path, float(curves.last_step))
                    if scheduled is not None and scheduled.alerts is not None:
                        scheduled.alerts.restore([a["mode"] for a in self.told])
                if scheduled is not None:
                    scheduled.settings = scheduled.rules.settings = settings
                    stopped = scheduled.catch_up(curves, total)
                    self.told += scheduled.new_alerts
                write_live(folder, read, settings, self.reads, self.theory, str(file), total, curve=curves.frame,
                           stopped=stopped, alerts=self.told)
                for alert in scheduled.new_alerts if scheduled is not None else ():
                    self._say(f"pgrpo watch: alert at step {alert['read_step']:g}: {alert['reason']}")
                    if self.on_alert:
                        run_on_alert(self.on_alert, alert, folder / "live.json")
                if stopped is not None:
                    self._say(f"pgrpo watch: stop at step {stopped['step']:g} (decided by the read at step "
                              f"{stopped['read_step']:g}): {stopped['reason']}; {folder / 'stop.json'}")
                    if self.on_stop:
                        run_on_stop(self.on_stop, stopped, folder / "stop.json")
                    return WatchOutcome(self.reads, stopped, "stopped")
                if not self.once and planned and curves.last_step >= total:
                    self._say(f"pgrpo watch: the run reached its planned length ({total:g} steps); done")
                    return WatchOutcome(self.reads, None, "finished")
        except InputError as error:
            if self.once:
                raise
            self._say(f"pgrpo watch: warning: {error}", error=True)
        if self.once:
            return WatchOutcome(self.reads, None, "once")
        if self.max_reads is not None and len(self.reads) >= self.max_reads:
            return WatchOutcome(self.reads, None, "max_reads")
        if self.idle_timeout is not None and time.monotonic() - self.last_growth > self.idle_timeout:
            self._say(f"pgrpo watch: warning: the log has not grown for {self.idle_timeout:g} s; giving up",
                      error=True)
            return WatchOutcome(self.reads, None, "idle")
        return None
