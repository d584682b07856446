"""``DynamicsCallback``: a ``transformers.TrainerCallback`` for TRL's ``GRPOTrainer`` (or any trainer whose log has
a reward) that diagnoses and forecasts the run it rides on (Section 5's failure modes, Section 4.4's forecast, the
reads of :mod:`pgrpo.live.reads`), adds ``pgrpo/*`` keys to the trainer's logs, writes ``<output_dir>/pgrpo/
live.json`` and ``live.html`` atomically, reads the configuration against Theorem 7 (Eq. 9-11) at the start and
stops a run that is failing or cannot reach its target (``stop.json``, a checkpoint saved first).

A read never raises into the trainer: whatever fails prints one warning line and training goes on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from transformers import TrainerCallback

from pgrpo.atomic import write_json, write_text
from pgrpo.live.page import live_html, live_payload
from pgrpo.live.reads import (
    DEFAULT_FORECAST_EVERY,
    MIN_POINTS_FOR_K,
    LiveRead,
    LiveSettings,
    StopRules,
    configuration_theory,
    curves_from_history,
    measured_theory,
    read_curves,
    refresh_of,
)

_REWARD_KEYS = ("reward", "train/reward", "rewards/mean")


class DynamicsCallback(TrainerCallback):
    """Every ``every`` logged training steps: the failure modes of ``pgrpo diagnose`` and the forecast of ``pgrpo
    forecast`` on ``state.log_history``; ``pgrpo/<mode>``, ``pgrpo/plateau``, ``pgrpo/plateau_lo80``,
    ``pgrpo/plateau_hi80``, ``pgrpo/t90`` into the logs (so W&B, trackio and TensorBoard record them: the callback
    moves itself ahead of the trackers at train begin); ``live.json``/``live.html`` under ``<output_dir>/pgrpo``
    (default: the trainer's ``output_dir``). ``stop_on``: modes that stop training when flagged (severity at least
    medium) at two consecutive reads; ``stop_if_plateau_below``: stop when the forecast plateau's upper 80% bound
    is below it at two consecutive reads. ``reward_range`` and ``max_completion_length`` (default: the trainer's
    ``args.max_completion_length``) are what ``pgrpo diagnose`` takes on its command line. ``forecast_every``: the
    forecast runs at every this many reads (default 3; 1: every read), the reads between diagnose only and carry the
    latest forecast forward, which keeps a read's cost under 1% of training (benchmarks/live/bench_overhead.py)."""

    def __init__(self, every: int = 10, stop_on: Sequence[str] = (), stop_if_plateau_below: float | None = None,
                 reward_range: Sequence[float] | None = None, max_completion_length: int | None = None,
                 output_dir: str | None = None, verbose: bool = True,
                 forecast_every: int = DEFAULT_FORECAST_EVERY):
        self.settings = LiveSettings(int(every), tuple(stop_on), stop_if_plateau_below,
                                     tuple(reward_range) if reward_range is not None else None,
                                     max_completion_length, int(forecast_every))
        self.output_dir = output_dir
        self.verbose = verbose
        self.reads: list[LiveRead] = []
        self.theory: dict[str, Any] = {}
        self.stopped: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.warnings: list[str] = []
        self._rules = StopRules(self.settings)
        self._logged = 0
        self._last_read_step: float | None = None
        self._total_steps: float | None = None
        self._batch: float | None = None

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

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not any(k in logs for k in _REWARD_KEYS) or self.stopped:
            return control
        self._logged += 1
        if self._logged % self.settings.every:
            return control
        read = self._read(args, state)
        if read is None:
            return control
        keys = read.log_keys()
        logs.update(keys)  # the trackers after this callback record them
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(keys)
        decision = self._rules.update(read)
        if decision is not None:
            self.stopped = decision.to_dict()
            control.should_save = True  # the checkpoint first, then the stop
            control.should_training_stop = True
            self._say(f"stopping: {decision.reason}", state)
        self._write(args, state, read)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._last_read_step is not None and self._last_read_step >= state.global_step:
            return control
        read = self._read(args, state)
        if read is not None:
            self._write(args, state, read)
        return control

    # ---- the work ---------------------------------------------------------------------------------------------

    def _read(self, args, state) -> LiveRead | None:
        try:
            curves = curves_from_history(state.log_history, "state.log_history", self.meta)
            forecast = self.settings.forecasts_at(len(self.reads))
            read = read_curves(curves, self.settings, self._total_steps, self._batch, forecast,
                               self.reads[-1] if self.reads else None)
        except Exception as error:  # noqa: BLE001 - a log it cannot read: one warning line, training goes on
            self._warn(f"read at step {state.global_step} skipped: {type(error).__name__}: {error}", state)
            return None
        self._last_read_step = read.step
        self.reads.append(read)
        for line in read.errors:
            self._warn(line, state)
        if "measured" not in self.theory and self.meta.get("eta"):
            steps, values, _ = curves.series("reward")
            if steps.size >= MIN_POINTS_FOR_K:
                try:
                    self.theory["measured"] = measured_theory(steps, values, self.meta["eta"], self.meta["mu"],
                                                              self.meta["k_ref"])
                    self._say(self.theory["measured"]["line"], state)
                except Exception as error:  # noqa: BLE001
                    self._warn(f"K from the early slope: {type(error).__name__}: {error}", state)
        self._say(read.verdict_line(), state)
        return read

    def _curve_frame(self, state):
        """The logged reward so far (train entries of ``state.log_history``), for the page's curve."""
        rows = [(e["step"], e["reward"]) for e in state.log_history
                if isinstance(e, dict) and "reward" in e and "step" in e]
        return {"step": [r[0] for r in rows], "reward": [r[1] for r in rows]} if rows else None

    def _folder(self, args) -> Path:
        return Path(self.output_dir or args.output_dir) / "pgrpo"

    def _write(self, args, state, read: LiveRead) -> None:
        if not state.is_world_process_zero:
            return
        try:
            folder = self._folder(args)
            payload = live_payload(read, self.settings, self.reads, self.theory, self.stopped, "state.log_history",
                                   self._total_steps, curve=self._curve_frame(state))
            write_json(folder / "live.json", payload)
            write_text(folder / "live.html", live_html(payload))
            if self.stopped:
                write_json(folder / "stop.json", self.stopped)
        except Exception as error:  # noqa: BLE001
            self._warn(f"could not write live.json: {type(error).__name__}: {error}", state)

    def _first_in_line(self) -> None:
        """Move this callback ahead of the trackers (W&B, trackio, TensorBoard run before user callbacks), so the
        keys it adds to a log reach them: the handler is the caller of this event."""
        try:
            frame = sys._getframe(2)  # on_train_begin <- CallbackHandler.call_event
            handler = frame.f_locals.get("self")
            callbacks = getattr(handler, "callbacks", None)
            if isinstance(callbacks, list) and self in callbacks and callbacks[0] is not self:
                callbacks.remove(self)
                callbacks.insert(0, self)
        except Exception:  # noqa: BLE001 - the keys still reach log_history and later callbacks
            pass

    def _say(self, line: str, state) -> None:
        if self.verbose and getattr(state, "is_world_process_zero", True):
            print(f"pgrpo live: {line}", file=sys.stderr, flush=True)

    def _warn(self, line: str, state) -> None:
        self.warnings.append(line)
        if getattr(state, "is_world_process_zero", True):
            print(f"pgrpo live: warning: {line}", file=sys.stderr, flush=True)
