"""Time limits on a cluster: checkpoint and exit before the limit, resume on the retry (the run of Section 4.2 is
longer than one SLURM time limit; ``pgrpo plan`` says by how much).

SIGURG is what the SLURM profile asks for before a training job's limit (``--signal=URG@<seconds>``, sent to every
process of the job step). Its default action is to ignore it, so the Snakemake job step and the shell around the
trainer carry on (SIGUSR1 would kill the Snakemake process of the step, ``B:USR1`` the batch shell of the plugin's
``--wrap``); the trainer finishes the step in flight (up to the next refresh boundary, so the resumed run keeps the
refresh schedule of Eq. 3), saves a checkpoint there and exits with :data:`EXIT_RESUMABLE` (EX_TEMPFAIL) without
writing outputs; the retry resumes from that checkpoint.
"""

from __future__ import annotations

import signal
from typing import Any

CHECKPOINT_SIGNAL = signal.SIGURG
EXIT_RESUMABLE = 75

_checkpoint_request: dict[str, Any] = {"signal": None, "previous": None}


def _request_checkpoint(signum, frame) -> None:
    _checkpoint_request["signal"] = signum


def install_checkpoint_signal() -> None:
    """From now on CHECKPOINT_SIGNAL asks the run to checkpoint and exit (main thread only; idempotent)."""
    if signal.getsignal(CHECKPOINT_SIGNAL) is _request_checkpoint:
        return
    try:
        _checkpoint_request["previous"] = signal.signal(CHECKPOINT_SIGNAL, _request_checkpoint)
    except ValueError:  # not the main thread: no handler, the signal keeps its default (ignored)
        return
    _checkpoint_request["signal"] = None


def uninstall_checkpoint_signal() -> None:
    if signal.getsignal(CHECKPOINT_SIGNAL) is _request_checkpoint:
        signal.signal(CHECKPOINT_SIGNAL, _checkpoint_request["previous"] or signal.SIG_DFL)
    _checkpoint_request["signal"] = None


def checkpoint_requested() -> bool:
    return _checkpoint_request["signal"] is not None


def _any_process(flag: bool) -> bool:
    """``flag`` on one process; under `accelerate launch` True on every process when it is True on any."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    from accelerate import PartialState

    value = torch.tensor([1.0 if flag else 0.0], device=PartialState().device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def checkpoint_on_signal_callback_class():
    """A ``TrainerCallback`` class: after CHECKPOINT_SIGNAL, save at the next optimizer step on a refresh boundary
    and stop training (``stopped_at`` is that step)."""
    from transformers import TrainerCallback

    from pgrpo.grpo.training_config import generate_every_micro_steps

    class CheckpointOnSignal(TrainerCallback):
        def __init__(self, training: dict):
            self.generate_every = generate_every_micro_steps(training)
            self.accumulation = training["gradient_accumulation_steps"]
            self.stopped_at: int | None = None

        def on_step_end(self, args, state, control, **kwargs):
            if not _any_process(checkpoint_requested()):  # every process, every step
                return control
            step = state.global_step
            on_boundary = (step * self.accumulation) % self.generate_every == 0 or (
                self.accumulation % self.generate_every == 0
            )
            if on_boundary and step < state.max_steps:
                control.should_save = True
                control.should_training_stop = True
                self.stopped_at = step
            return control

    return CheckpointOnSignal
