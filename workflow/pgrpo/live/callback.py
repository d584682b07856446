"""``DynamicsCallback``: a ``transformers.TrainerCallback`` for TRL's ``GRPOTrainer`` (or any trainer whose log has
a reward) that diagnoses and forecasts the run it rides on (Section 5's failure modes, Section 4.4's forecast, the
reads of :mod:`pgrpo.live.reads`), adds ``pgrpo/*`` keys to the trainer's logs, writes ``<output_dir>/pgrpo/
live.json`` and ``live.html`` atomically, reads the configuration against Theorem 7 (Eq. 9-11) at the start and
stops a run that is failing or cannot reach its target (``stop.json``, a checkpoint saved first).

By default a read runs in one background worker process (:mod:`pgrpo.live.worker`) and is applied one read later,
so the trainer waits for a read only if it took longer than ``every`` steps; ``background=False`` reads on the
trainer's thread.

A read never raises into the trainer: whatever fails prints one warning line and training goes on.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from transformers import TrainerCallback

from pgrpo.live.page import previous_alerts
from pgrpo.live.reads import (
    DEFAULT_FORECAST_EVERY,
    KEY_PREFIX,
    LiveRead,
    LiveSettings,
    configuration_theory,
    refresh_of,
)
from pgrpo.live.stop_rules import AlertRules, StopRules
from pgrpo.live.worker import (
    BackgroundReader,
    PageJob,
    ReadRequest,
    ReadResult,
    WorkerFailed,
    WorkerJob,
    perform_read,
    read_live_json,
    snapshot_history,
    write_live_files,
)

_REWARD_KEYS = ("reward", "train/reward", "rewards/mean")

#: the key naming the step a log's other ``pgrpo/*`` keys describe (one read earlier in background mode)
READ_STEP_KEY = f"{KEY_PREFIX}read_step"


@dataclass
class ReadCost:
    """What one read cost: ``on_log_seconds``, the time the trainer's thread spent in the callback at the log
    event that submitted it (background: the snapshot and the submission, plus applying the read before it;
    synchronous: the whole read and its writes), ``wait_seconds`` (background: blocked waiting for it at the next
    read, 0 when it was done), and the read itself: ``read_cpu_seconds`` and ``read_seconds`` in the process that
    made it (the worker in background mode)."""

    step: float
    background: bool
    on_log_seconds: float = 0.0
    wait_seconds: float = 0.0
    read_cpu_seconds: float = 0.0
    read_seconds: float = 0.0


class DynamicsCallback(TrainerCallback):
    """Every ``every`` logged training steps: the failure modes of ``pgrpo diagnose`` and the forecast of ``pgrpo
    forecast`` on ``state.log_history``; ``pgrpo/<mode>``, ``pgrpo/plateau``, ``pgrpo/plateau_lo80``,
    ``pgrpo/plateau_hi80``, ``pgrpo/t90`` and ``pgrpo/read_step`` (the step they describe) into the logs (so W&B,
    trackio and TensorBoard record them: the callback moves itself ahead of the trackers at train begin);
    ``live.json``/``live.html`` under ``<output_dir>/pgrpo`` (default: the trainer's ``output_dir``). ``stop_on``:
    modes that stop training when flagged (severity at least medium) at two consecutive reads;
    ``stop_if_plateau_below``: stop when the forecast plateau's upper 80% bound is below it at two consecutive
    reads (the reward functions' forecasts summed, where the log has two or more: a function not yet rising keeps its
    headroom in the band; :meth:`pgrpo.live.reads.LiveRead.decision_plateau`); ``stop_if_reached``: stop when the
    reward's smoothed level is at or above it at two consecutive reads (the target met, ``stop.json``'s mode
    ``target_reached``). ``reward_range`` and
    ``max_completion_length`` (default: the trainer's ``args.max_completion_length``) are what ``pgrpo diagnose``
    takes on its command line; ``component_ranges`` (fn -> (lo, hi), each reward function's own range, as ``pgrpo
    forecast --component-range``) gives a function that has not started to rise its headroom in the summed
    forecast. ``forecast_every``: the forecast runs at every this many
    reads (default 3; 1: every read), the reads between diagnose only and carry the latest forecast forward.

    ``background`` (default True): the read made at a read step runs in ONE worker process (started at train
    begin, so that its start-up overlaps the first steps; it never imports torch or transformers) on a snapshot of
    the log, while training goes on. Read ``n`` is applied (its keys into the log, the stop rules, the K line) at
    read ``n + 1``'s log event, which waits for it only if it is not done yet, and the worker writes its
    ``live.json``/``live.html`` as it starts read ``n + 1``; so the keys in a log describe the read one read
    earlier (``pgrpo/read_step``), and **a stop lands one read later than in synchronous mode**: ``stop.json``'s
    ``read_step`` is the step of the read that decided, ``step`` the step where training stopped. Under
    ``accelerate launch`` every rank has its own worker and applies read ``n`` at read ``n + 1``, so every rank
    stops at the same step. At train end the pending read is applied and the final read made; a decision that
    lands after training ended stops nothing. If the worker cannot start or fails, one warning line says so and
    the reads go on synchronously. ``on_alert``: called (on the main process) with a record (``mode``,
    ``read_step``, ``step``, ``onset_step``, ``severity``, ``reason``, ``forecast``) once for each mode of
    ``alert_on`` (default every mode) at the read where ``stop_on=[mode]`` would have stopped the run, without
    stopping it (:class:`pgrpo.live.stop_rules.AlertRules`); every alert is also printed and kept in ``alerts``.
    ``background=False``: each read runs on the trainer's thread at its own step
    and a stop lands at the read that decided (``pgrpo replay --synchronous`` models it; ``pgrpo replay`` models
    the default). The cost of each read is in ``costs`` (:class:`ReadCost`; benchmarks/live/bench_overhead.py)."""

    def __init__(self, every: int = 10, stop_on: Sequence[str] = (), stop_if_plateau_below: float | None = None,
                 reward_range: Sequence[float] | None = None, max_completion_length: int | None = None,
                 output_dir: str | None = None, verbose: bool = True,
                 forecast_every: int = DEFAULT_FORECAST_EVERY, background: bool = True,
                 gold_reward: str | None = None,
                 on_alert: Callable[[Mapping[str, Any]], Any] | None = None, alert_on: Sequence[str] | None = None,
                 component_ranges: Mapping[str, Sequence[float]] | None = None,
                 stop_if_reached: float | None = None):
        self.settings = LiveSettings(int(every), tuple(stop_on), stop_if_plateau_below,
                                     tuple(reward_range) if reward_range is not None else None,
                                     max_completion_length, int(forecast_every), gold_reward=gold_reward,
                                     component_ranges=component_ranges, stop_if_reached=stop_if_reached)
        self.output_dir = output_dir
        self.verbose = verbose
        self.background = bool(background)
        self.reads: list[LiveRead] = []
        self.theory: dict[str, Any] = {}
        self.stopped: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.costs: list[ReadCost] = []
        #: the worker's process id once started (None: synchronous, or not started yet)
        self.worker_pid: int | None = None
        self._rules = StopRules(self.settings)
        #: report-only alerts (:class:`pgrpo.live.stop_rules.AlertRules`): every mode the stop rule would stop on, once
        self._alert_rules = AlertRules(self.settings, alert_on)
        self.on_alert = on_alert
        self.alerts: list[dict[str, Any]] = []
        self._logged = 0
        self._last_read_step: float | None = None
        self._total_steps: float | None = None
        self._batch: float | None = None
        self._worker: BackgroundReader | None = None
        self._pending_cost: ReadCost | None = None
        self._sent, self._sent_last = 0, None  # the log entries the worker has, and the last of them

    def attach(self, trainer) -> "DynamicsCallback":
        """Add this callback to ``trainer`` (any ``transformers.Trainer``, TRL's ``GRPOTrainer`` included) as its
        first callback, ahead of the trackers the trainer added itself (W&B, trackio, TensorBoard), so that the
        ``pgrpo/*`` keys a read adds to a log reach them: ``DynamicsCallback(every=10).attach(trainer)``. Attaching
        twice keeps one. Returns the callback. A callback given in ``callbacks=[...]`` or through
        ``trainer.add_callback`` instead moves itself to the front when training begins."""
        handler = getattr(trainer, "callback_handler", None)
        callbacks = getattr(handler, "callbacks", None)
        if not isinstance(callbacks, list):
            raise TypeError(f"attach(trainer): {type(trainer).__name__} has no callback_handler.callbacks list "
                            "(a transformers.Trainer has one)")
        self._put_first(callbacks)
        return self

    def _put_first(self, callbacks: list) -> None:
        """This callback first in a handler's ``callbacks`` list, once (added if it was not there)."""
        callbacks[:] = [self] + [c for c in callbacks if c is not self]

    # ---- the trainer's events ------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self._first_in_line()
        try:
            self.settings = self.settings.with_completion_cap(getattr(args, "max_completion_length", None))
            eta, mu = float(args.learning_rate), float(getattr(args, "adam_beta1", 0.9))
            k_ref = refresh_of(getattr(args, "num_iterations", 1), getattr(args, "steps_per_generation", None),
                               getattr(args, "gradient_accumulation_steps", 1))
            self.meta = {"eta": eta, "mu": mu, "k_ref": k_ref, "max_completion_length":
                         self.settings.max_completion_length, "G": getattr(args, "num_generations", None)}
            self._total_steps = float(state.max_steps) if state.max_steps and state.max_steps > 0 else None
            self._batch = float(args.per_device_train_batch_size * args.gradient_accumulation_steps
                                * max(1, getattr(args, "world_size", 1)))
            self.theory["configuration"] = configuration_theory(eta, mu, k_ref)
            self._say(self.theory["configuration"]["line"], state)
        except Exception as error:  # noqa: BLE001 - never into the trainer
            self._warn(f"could not read the configuration against Theorem 7: {type(error).__name__}: {error}", state)
        if state.global_step and state.log_history:
            self._resume(args, state)
        if self.background:  # started now, so that its start-up (imports) overlaps the first steps, not a read
            self._worker = self._worker or BackgroundReader()
            try:
                self._worker.start()
                self.worker_pid = self._worker.pid
            except WorkerFailed as failure:
                self._worker_failed(failure, state, starting=True)

    def _resume(self, args, state) -> None:
        """A run resumed from a checkpoint (the trainer restored ``state.log_history`` before this event): the reads
        keep the uninterrupted run's cadence (every ``every``-th logged reward since step 0, the logs already in the
        history counted), and the alerts its earlier process told (``live.json``'s ``live.alerts`` up to the resumed
        step) are kept and not told again: an overnight run requeued after a time limit alerts once per mode."""
        try:
            self._logged = sum(1 for e in state.log_history
                               if isinstance(e, Mapping) and any(k in e for k in _REWARD_KEYS))
            earlier = previous_alerts(read_live_json(self._folder(args)), up_to_step=float(state.global_step))
            self.alerts = earlier + [a for a in self.alerts if a not in earlier]
            self._alert_rules.restore([a["mode"] for a in earlier])
            told = f"; alerts told before, kept: {', '.join(a['mode'] for a in earlier)}" if earlier else ""
            self._say(f"resumed at step {state.global_step}: {self._logged} logged rewards so far, a read after "
                      f"every {self.settings.every} as before{told}", state)
        except Exception as error:  # noqa: BLE001 - never into the trainer
            self._warn(f"could not read the run's earlier live.json: {type(error).__name__}: {error}", state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not any(k in logs for k in _REWARD_KEYS) or self.stopped:
            return control
        self._logged += 1
        if self._logged % self.settings.every:
            return control
        started = time.perf_counter()
        if self.background:
            self._background_read_step(args, state, control, logs)
        else:
            result = perform_read(self._request(state))
            cost = ReadCost(float(state.global_step), False)
            read = self._apply(args, state, control, result, cost, logs)
            if read is not None:
                self._write(args, state, read)
            cost.on_log_seconds = time.perf_counter() - started
        return control

    def on_train_end(self, args, state, control, **kwargs):
        try:
            if self._worker is not None and self._worker.pending is not None:
                read = self._collect_and_apply(args, state, control, None)
                if read is not None:
                    self._write(args, state, read)
            if self._last_read_step is not None and self._last_read_step >= state.global_step:
                return control
            cost = ReadCost(float(state.global_step), self.background)
            read = None
            if self.background and self._worker is not None and self._worker.running:
                job, request = self._job(state, None)
                try:
                    self._worker.submit(job, request)
                    self._pending_cost = cost
                    read = self._collect_and_apply(args, state, control, None)
                except WorkerFailed as failure:
                    self._worker_failed(failure, state)
                    read = self._apply(args, state, control, perform_read(request), cost, None)
            else:
                read = self._apply(args, state, control, perform_read(self._request(state)), cost, None)
            if read is not None:
                self._write(args, state, read)
        except Exception as error:  # noqa: BLE001 - never into the trainer
            self._warn(f"the read at train end failed: {type(error).__name__}: {error}", state)
        finally:
            self.close()
        return control

    def close(self) -> None:
        """Shut the background worker down (at train end; also when the callback is garbage-collected and at
        interpreter exit). A later read starts a new one."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._sent, self._sent_last = 0, None

    # ---- the work ---------------------------------------------------------------------------------------------

    def _request(self, state) -> ReadRequest:
        """What the next read needs, with the whole log (the previous read has been applied by now: its forecast
        is carried forward, and the number of reads so far decides whether this one forecasts)."""
        return ReadRequest(state.log_history, self.settings, dict(self.meta), self._total_steps, self._batch,
                           len(self.reads), self.reads[-1] if self.reads else None,
                           "measured" not in self.theory, int(state.global_step))

    def _job(self, state, page: PageJob | None) -> tuple[WorkerJob, ReadRequest]:
        """The worker's job for the next read: the log entries it does not have yet (and the last one it has,
        which a later callback may have added keys to), plain, or the whole log when it was changed otherwise
        than by appending (its last entry sent is no longer where it was); and the same read with the whole log
        (a shallow copy of the list), made in-process if the worker loses it."""
        log = state.log_history
        end = len(log)
        appended = 0 < self._sent <= end and log[self._sent - 1] is self._sent_last
        start = self._sent - 1 if appended else 0  # the whole log again if it was not only appended to
        request = self._request(state)
        request.history = log[:end]
        job = WorkerJob(replace(request, history=snapshot_history(log[start:end]), history_start=start,
                                previous=None), page)
        self._sent, self._sent_last = end, log[end - 1] if end else None
        return job, request

    def _page_job(self, args, state) -> PageJob | None:
        """The files of the read just applied, for the worker to write (rank 0 only)."""
        if not state.is_world_process_zero:
            return None
        return PageJob(str(self._folder(args)), self.settings, dict(self.theory), None, self._total_steps,
                       list(self.alerts))

    def _background_read_step(self, args, state, control, logs) -> None:
        """Read ``n + 1``'s log event: apply read ``n`` (waiting for it if it is not done) into this log, then send
        read ``n + 1`` to the worker with read ``n``'s files to write, unless read ``n`` stopped the run (its files
        are written here, and the final read at train end is at this step). If the worker cannot take it, read
        ``n + 1`` is made here and now, and so are the reads after it."""
        started = time.perf_counter()
        read = None
        if self._worker is not None and self._worker.pending is not None:
            read = self._collect_and_apply(args, state, control, logs)
        cost = ReadCost(float(state.global_step), self.background)
        if self.stopped or not self.background:  # stopped, or the worker failed just now
            if read is not None:
                self._write(args, state, read)
            if self.stopped:
                return
            request = self._request(state)
        else:
            starting = self._worker is None or not self._worker.running
            self._worker = self._worker or BackgroundReader()
            job, request = self._job(state, self._page_job(args, state) if read is not None else None)
            try:
                self._worker.submit(job, request)
                self.worker_pid = self._worker.pid or self.worker_pid
                self._pending_cost = cost
                cost.on_log_seconds = time.perf_counter() - started
                return
            except WorkerFailed as failure:
                self._worker_failed(failure, state, starting)
                cost.background = False
                if read is not None:  # the files the worker was to write
                    self._write(args, state, read)
        read = self._apply(args, state, control, perform_read(request), cost, logs)
        if read is not None:
            self._write(args, state, read)
        cost.on_log_seconds = time.perf_counter() - started

    def _collect_and_apply(self, args, state, control, logs) -> LiveRead | None:
        cost = self._pending_cost or ReadCost(float(state.global_step), True)
        self._pending_cost = None
        try:
            collected = self._worker.collect()
        except WorkerFailed as failure:  # lost in the worker: made here instead, no read dropped
            self._worker_failed(failure, state)
            request = getattr(failure, "request", None)
            return self._apply(args, state, control, perform_read(request), cost, logs, 1) if request else None
        if collected is None:
            return None
        result, cost.wait_seconds = collected
        if result.page_error:
            self._warn(result.page_error, state)
        return self._apply(args, state, control, result, cost, logs, 1)

    def _worker_failed(self, failure: WorkerFailed, state, starting: bool = False) -> None:
        what = "could not start" if starting else "failed"
        self._warn(f"the background worker {what} ({failure}): reads are synchronous from now on", state)
        self.close()
        self.background = False

    def _apply(self, args, state, control, result: ReadResult, cost: ReadCost, logs,
               lag_reads: int = 0) -> LiveRead | None:
        """A read's result into the callback: the reads, the K line, the keys into ``logs`` (the current log
        event's; None at train end: nothing is left to stop) and its ``log_history`` entry, the stop rules.
        ``lag_reads``: 1 when the read is applied at the next read's log event (background), 0 at its own."""
        cost.read_cpu_seconds, cost.read_seconds = result.cpu_seconds, result.seconds
        self.costs.append(cost)
        if result.read is None:
            self._warn(f"read at step {result.global_step} skipped: {result.error}", state)
            return None
        read = result.read
        self._last_read_step = read.step
        self.reads.append(read)
        for line in read.errors:
            self._warn(line, state)
        if result.measured is not None and "measured" not in self.theory:
            self.theory["measured"] = result.measured
            self._say(result.measured["line"], state)
        elif result.measured_error:
            self._warn(f"K from the early slope: {result.measured_error}", state)
        self._say(read.verdict_line(), state)
        if logs is None:  # train end: no log event left; the read is in live.json
            return read
        keys = read.log_keys()
        keys[READ_STEP_KEY] = float(read.step)
        logs.update(keys)  # the trackers after this callback record them
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(keys)
        for alert in self._alert_rules.update(read):
            record = alert.record(state.global_step)
            self.alerts.append(record)
            self._say(f"alert at step {alert.step:g}: {alert.reason}", state)
            if self.on_alert is not None and getattr(state, "is_world_process_zero", True):
                try:
                    self.on_alert(record)
                except Exception as error:  # noqa: BLE001 - an alert hook never stops training
                    self._warn(f"on_alert failed: {type(error).__name__}: {error}", state)
        decision = self._rules.update(read)
        if decision is not None:
            self.stopped = decision.record(state.global_step, lag_reads=int(lag_reads))
            control.should_save = True  # the checkpoint first, then the stop
            control.should_training_stop = True
            lag = f" (decided by the read at step {decision.step:g})" if lag_reads else ""
            self._say(f"stopping at step {state.global_step}{lag}: {decision.reason}", state)
        return read

    def _folder(self, args) -> Path:
        return Path(self.output_dir or args.output_dir) / "pgrpo"

    def _write(self, args, state, read: LiveRead) -> None:
        if not state.is_world_process_zero:
            return
        try:
            write_live_files(self._folder(args), read, self.settings, self.reads, self.theory, self.stopped,
                             self._total_steps, state.log_history, self.alerts)
        except Exception as error:  # noqa: BLE001
            self._warn(f"could not write live.json: {type(error).__name__}: {error}", state)

    def _first_in_line(self) -> None:
        """For a callback not attached with :meth:`attach`: move it ahead of the trackers (W&B, trackio, TensorBoard
        run before user callbacks), so the keys it adds to a log reach them. The handler is the caller of this
        event (``CallbackHandler.call_event``), found on the stack; where it is not, the keys still reach
        ``state.log_history`` and the callbacks after this one."""
        try:
            frame = sys._getframe(2)  # on_train_begin <- CallbackHandler.call_event
            handler = frame.f_locals.get("self")
            callbacks = getattr(handler, "callbacks", None)
            if isinstance(callbacks, list) and self in callbacks:
                self._put_first(callbacks)
        except Exception:  # noqa: BLE001 - the keys still reach log_history and later callbacks
            pass

    def _say(self, line: str, state) -> None:
        if self.verbose and getattr(state, "is_world_process_zero", True):
            print(f"pgrpo live: {line}", file=sys.stderr, flush=True)

    def _warn(self, line: str, state) -> None:
        self.warnings.append(line)
        if getattr(state, "is_world_process_zero", True):
            print(f"pgrpo live: warning: {line}", file=sys.stderr, flush=True)
