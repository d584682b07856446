"""Time limits on a cluster: checkpoint and exit before the limit, resume on the retry (the run of Section 4.2 is
longer than one SLURM time limit; ``pgrpo plan`` says by how much, and how early the warning must come).

SIGURG is what the SLURM profile asks for before a training job's limit (``--signal=URG@<lead>``, sent to every
process of the job step; the lead is the plan's: a checkpoint plus the longest evaluation the job can be in, plus a
margin). Its default action is to ignore it, so the Snakemake job step and the shell around the trainer carry on
(SIGUSR1 would kill the Snakemake process of the step, ``B:USR1`` the batch shell of the plugin's ``--wrap``).
What the run does with it depends on where it is:

- **start-up** (from the first line of ``python -m pgrpo train`` or ``doctor``, :func:`install_checkpoint_signal`
  in ``pgrpo.__main__``, through loading the model, the data and the checkpoint): nothing has been trained since
  the last checkpoint, so the process exits with :data:`EXIT_RESUMABLE` at once (:class:`StartupInterrupted`), and
  the retry resumes from that checkpoint. A few steps that must not be cut in two (setting stale checkpoints
  aside) run under :func:`signal_deferred`, which exits at their end instead.
- **training** (:func:`enter_training`, on the trainer's ``on_train_begin``): the signal is recorded; the trainer
  finishes the step in flight (up to the next refresh boundary, so the resumed run keeps the refresh schedule of
  Eq. 3), saves a checkpoint there and exits with :data:`EXIT_RESUMABLE` without writing outputs.
- **an evaluation on a refresh boundary** (the held-out evaluation every ``eval_steps``, which transformers runs
  before it saves and which can last longer than the lead): the evaluation stops at its next batch
  (:class:`EvaluationInterrupted`), the step's checkpoint is saved, the process exits with :data:`EXIT_RESUMABLE`;
  the resumed run evaluates that step again first (the evaluation draws from its own seeded generator, so the
  numbers are the uninterrupted run's). An evaluation at step 0 (``eval_on_start``) just stops: nothing to save.

Each resumable stop is also appended to ``checkpoints/stops.jsonl`` (:func:`record_stop`: time, SLURM job id,
phase, the step saved and the step whose evaluation was cut), one line a stop: the rule's log is rewritten by the
retry, the record of the run's earlier attempts is not.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from typing import Any

CHECKPOINT_SIGNAL = signal.SIGURG
EXIT_RESUMABLE = 75

STARTUP = "start-up"
TRAINING = "training"
DEFERRED = "deferred"

STOPS_NAME = "stops.jsonl"

_checkpoint_request: dict[str, Any] = {"signal": None, "previous": None, "phase": None, "stops": None}


class StartupInterrupted(SystemExit):
    """CHECKPOINT_SIGNAL during start-up: exit with EXIT_RESUMABLE, nothing trained since the last checkpoint."""

    def __init__(self) -> None:
        super().__init__(EXIT_RESUMABLE)


class EvaluationInterrupted(Exception):
    """CHECKPOINT_SIGNAL during an evaluation: stop it, checkpoint the step it evaluates, exit EXIT_RESUMABLE."""

    def __init__(self, step: int):
        super().__init__(f"evaluation at step {step} interrupted by {signal.Signals(CHECKPOINT_SIGNAL).name}")
        self.step = step


def record_stops_in(path: os.PathLike | str | None) -> None:
    """Where :func:`record_stop` appends (the run's ``checkpoints/stops.jsonl``), once the run knows its folder."""
    _checkpoint_request["stops"] = None if path is None else str(path)


def record_stop(phase: str, checkpoint_step: int | None, evaluating: int | None = None,
                path: os.PathLike | str | None = None) -> None:
    """One line in the run's stop record (``path``, or the one :func:`record_stops_in` named): which attempt stopped
    (SLURM job id), when, in which phase, the step its checkpoint holds (None: nothing new to save) and the step
    whose evaluation it cut short (or None)."""
    path = path or _checkpoint_request["stops"]
    if path is None:
        return
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
             "signal": signal.Signals(CHECKPOINT_SIGNAL).name, "phase": phase, "checkpoint_step": checkpoint_step,
             "evaluating": evaluating, "exit": EXIT_RESUMABLE}
    try:  # one short append a stop, flushed to disk before the process exits
        with open(path, "a") as stream:
            stream.write(json.dumps(entry) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as error:  # the record is bookkeeping: never the reason a resumable stop fails
        print(f"pgrpo: could not record the stop in {path}: {error}", file=sys.stderr, flush=True)


def read_stops(path: os.PathLike | str) -> list[dict]:
    """The run's stop record, oldest first ([] where it has never stopped)."""
    try:
        text = open(path).read()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _startup_exit() -> None:
    name = signal.Signals(CHECKPOINT_SIGNAL).name
    record_stop(STARTUP, None)
    print(f"pgrpo: {name} (time limit near) during start-up: nothing trained since the last checkpoint; exiting "
          f"with {EXIT_RESUMABLE} at once, a re-run resumes from it", file=sys.stderr, flush=True)
    raise StartupInterrupted()


def _request_checkpoint(signum, frame) -> None:
    _checkpoint_request["signal"] = signum
    if _checkpoint_request["phase"] == STARTUP:
        _startup_exit()


def install_checkpoint_signal() -> None:
    """From now on CHECKPOINT_SIGNAL asks the run to stop resumably (main thread only; idempotent). A fresh install
    starts in the start-up phase; installing again keeps the phase and any signal already recorded."""
    if signal.getsignal(CHECKPOINT_SIGNAL) is _request_checkpoint:
        return
    try:
        _checkpoint_request["previous"] = signal.signal(CHECKPOINT_SIGNAL, _request_checkpoint)
    except ValueError:  # not the main thread: no handler, the signal keeps its default (ignored)
        return
    # restart system calls the signal interrupts (SA_RESTART): Python retries its own, but a C library in the middle
    # of a write (a checkpoint, a collective) would otherwise see EINTR and fail the job
    signal.siginterrupt(CHECKPOINT_SIGNAL, False)
    _checkpoint_request["signal"] = None
    _checkpoint_request["phase"] = STARTUP


def uninstall_checkpoint_signal() -> None:
    if signal.getsignal(CHECKPOINT_SIGNAL) is _request_checkpoint:
        signal.signal(CHECKPOINT_SIGNAL, _checkpoint_request["previous"] or signal.SIG_DFL)
    _checkpoint_request.update(signal=None, phase=None, stops=None)


def checkpoint_phase() -> str | None:
    return _checkpoint_request["phase"]


def enter_training() -> None:
    """The trainer has begun: from now on a signal is recorded and acted on at a step boundary or in an evaluation."""
    if _checkpoint_request["phase"] is not None:
        _checkpoint_request["phase"] = TRAINING


@contextmanager
def signal_deferred():
    """During start-up, a block that must not be cut in two: a signal in it exits at its end instead."""
    if _checkpoint_request["phase"] != STARTUP:
        yield
        return
    _checkpoint_request["phase"] = DEFERRED
    try:
        yield
    finally:
        _checkpoint_request["phase"] = STARTUP
    if _checkpoint_request["signal"] is not None:
        _startup_exit()


def checkpoint_requested() -> bool:
    return _checkpoint_request["signal"] is not None


def on_refresh_boundary(step: int, accumulation: int, generate_every: int) -> bool:
    """Whether optimizer step ``step`` ends a generation batch (its checkpoint resumes on the schedule of Eq. 3)."""
    return (step * accumulation) % generate_every == 0 or accumulation % generate_every == 0
