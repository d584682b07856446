"""The held-out evaluation of Section 4.2 (``eval_accuracy`` every ``eval_steps``, Figure 1's held-out curve) as jobs
of its own: ``training.eval_mode: checkpoints``.

Inline (``eval_mode: inline``), TRL evaluates inside the training job, on the training's engine, whose concurrency is
capped by the training batch, while the GPUs of the job wait. With ``checkpoints`` the training job only saves the
LoRA adapter at every evaluation step (``eval_adapters/step-N``: the steps of :func:`evaluation_steps`, the ones
transformers would evaluate: every ``eval_steps``, the last step, and step 0 with ``eval_on_start``) and writes its
rows as ``train_log.csv``; one job per (run, step) loads the base model with that adapter and runs the same
evaluation (TRL's ``GRPOTrainer.evaluate``, same config, the same seeded generator,
:func:`pgrpo.grpo.training_config.evaluation_seed`) at a batch of its own (``eval_job_batch_size``); a last job joins
its rows into ``log.csv`` (:func:`join_evaluations`), which then reads exactly as an inline run's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

EVAL_MODES: tuple[str, ...] = ("inline", "checkpoints")
ADAPTERS_DIRNAME = "eval_adapters"
TRAIN_LOG_NAME = "train_log.csv"
EVAL_COLUMNS: tuple[str, ...] = ("eval_reward", "eval_accuracy", "eval_completion_length")


def evaluates_in_jobs(training: Mapping[str, Any], has_eval: bool) -> bool:
    """Whether this run's evaluation runs as jobs of its own: ``eval_mode: checkpoints`` with an eval set and
    ``eval_steps``; otherwise (no evaluation, or inline) the training job writes ``log.csv`` itself."""
    return training.get("eval_mode", "inline") == "checkpoints" and has_eval and bool(training.get("eval_steps"))


def evaluation_steps(eval_steps: int | None, total_steps: int, eval_on_start: bool) -> list[int]:
    """The optimizer steps transformers evaluates at with ``eval_strategy="steps"``: every ``eval_steps``, the last
    step (the end of a step-based schedule), and 0 with ``eval_on_start``."""
    if not eval_steps or total_steps <= 0:
        return []
    steps = set(range(int(eval_steps), int(total_steps) + 1, int(eval_steps))) | {int(total_steps)}
    if eval_on_start:
        steps.add(0)
    return sorted(steps)


def adapter_dir(run_dir: str | os.PathLike, step: int) -> Path:
    return Path(run_dir) / ADAPTERS_DIRNAME / f"step-{int(step)}"


def adapter_saver_callback_class():
    """A ``TrainerCallback`` class that saves the adapter at each of the run's :func:`evaluation_steps` (its
    ``trainer`` set after construction): ``trainer.save_model`` (collective: ZeRO-gathered), into a temporary folder
    renamed into place."""
    from transformers import TrainerCallback

    class AdapterAtEvaluationSteps(TrainerCallback):
        def __init__(self, run_dir: Path, eval_steps: int, eval_on_start: bool):
            self.run_dir = Path(run_dir)
            self.eval_steps, self.eval_on_start = int(eval_steps), bool(eval_on_start)
            self.steps: set[int] = set()
            self.trainer = None

        def _save(self, step: int) -> None:
            target = adapter_dir(self.run_dir, step)
            if target.is_dir():  # saved before a resume: the same weights
                return
            tmp = target.with_name(f".{target.name}.tmp")
            self.trainer.save_model(str(tmp))
            self.trainer.accelerator.wait_for_everyone()
            if self.trainer.accelerator.is_main_process:
                shutil.rmtree(target, ignore_errors=True)
                os.replace(tmp, target)
            self.trainer.accelerator.wait_for_everyone()

        def on_train_begin(self, args, state, control, **kwargs):
            self.steps = set(evaluation_steps(self.eval_steps, state.max_steps, self.eval_on_start))
            if state.global_step == 0 and 0 in self.steps:
                self._save(0)
            return control

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in self.steps:
                self._save(state.global_step)
            return control

    return AdapterAtEvaluationSteps


def reset_adapters(run_dir: str | os.PathLike) -> None:
    """A run that starts from step 0 keeps no adapter of an earlier one."""
    shutil.rmtree(Path(run_dir) / ADAPTERS_DIRNAME, ignore_errors=True)
    (Path(run_dir) / ADAPTERS_DIRNAME).mkdir(parents=True, exist_ok=True)


def join_evaluations(train_log, eval_rows: Sequence[Mapping[str, Any]], expected_steps: Sequence[int]):
    """``log.csv`` of a run evaluated in jobs: the training rows with each evaluation's columns at its step (a step-0
    evaluation as a row of its own), as :func:`pgrpo.grpo.checkpoints.assemble_log` joins an inline run's."""
    from pgrpo.errors import InputError
    from pgrpo.grpo.checkpoints import assemble_log

    got = sorted(int(row["step"]) for row in eval_rows)
    if got != sorted(int(s) for s in expected_steps):
        raise InputError(f"evaluations of steps {got} do not match the run's evaluation steps {list(expected_steps)}")
    frame = train_log[train_log["step"] > 0]
    rows = [{"kind": "train", **{k: v for k, v in record.items() if k in ("step",) or not k.startswith("eval_")}}
            for record in frame.to_dict("records")]
    rows += [{"kind": "eval", **dict(row)} for row in eval_rows]
    last_step = int(frame["step"].max()) if len(frame) else 0
    return assemble_log(rows, last_step)
