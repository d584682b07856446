"""The trainer's side of the time-limit signal (:mod:`pgrpo.grpo.time_limit`): a ``TrainerCallback`` that checkpoints
and stops at the next refresh boundary of Eq. 3, or stops an evaluation, once the signal has been recorded, agreed on
by every process of an `accelerate launch`. Kept apart from :mod:`pgrpo.grpo.time_limit`, which ``pgrpo.__main__``
imports on its first line and must import nothing heavy.
"""

from __future__ import annotations

from pgrpo.grpo.time_limit import EvaluationInterrupted, checkpoint_requested, enter_training, on_refresh_boundary


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
    and stop training (``stopped_at`` is that step); during an evaluation on a boundary, stop the evaluation
    (``EvaluationInterrupted``: the caller saves the step and exits)."""
    from transformers import TrainerCallback

    from pgrpo.grpo.refresh import generate_every_micro_steps

    class CheckpointOnSignal(TrainerCallback):
        def __init__(self, training: dict):
            self.generate_every = generate_every_micro_steps(training)
            self.accumulation = training["gradient_accumulation_steps"]
            self.stopped_at: int | None = None
            self.interrupted_evaluation: int | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            enter_training()
            return control

        def on_step_end(self, args, state, control, **kwargs):
            if not _any_process(checkpoint_requested()):  # every process, every step
                return control
            step = state.global_step
            if on_refresh_boundary(step, self.accumulation, self.generate_every) and step < state.max_steps:
                control.should_save = True
                control.should_training_stop = True
                control.should_evaluate = False  # saved first; the resumed run evaluates this step
                self.stopped_at = step
            return control

        def on_prediction_step(self, args, state, control, **kwargs):
            step = state.global_step
            if step > 0 and not on_refresh_boundary(step, self.accumulation, self.generate_every):
                return control  # not a step a checkpoint can be resumed from: finish, stop at the next boundary
            if _any_process(checkpoint_requested()):
                self.interrupted_evaluation = step
                raise EvaluationInterrupted(step)
            return control

    return CheckpointOnSignal
