"""One evaluation job of ``training.eval_mode: checkpoints`` (:mod:`pgrpo.grpo.eval_checkpoints`): the held-out
evaluation of Section 4.2 of a run at one step, from its saved LoRA adapter, through the training's own
``GRPOTrainer.evaluate`` (:mod:`pgrpo.grpo.trainer`) so that its numbers are an inline run's.
"""

from __future__ import annotations

import os
from typing import Any

from pgrpo.grpo.trainer import _trainer_class, check_dataset, drop_long_prompts, eval_row, guard_reward
from pgrpo.grpo.training_config import build_grpo_config


def evaluate_adapter(*, base_model, tokenizer, adapter: str | os.PathLike, eval_dataset, reward_funcs, training: dict,
                     G: int, seed: int, step: int, work_dir: str, stop_token_ids: list[int] | None = None,
                     batch_size: int | None = None) -> dict[str, Any]:
    """The evaluation of the run at ``step`` from its saved adapter: TRL's ``evaluate`` under the run's config and
    seed, as the training job would have run it inline; returns the eval row (step and :data:`EVAL_COLUMNS`).
    ``batch_size`` (``eval_job_batch_size``) replaces ``per_device_eval_batch_size`` (and the engine's concurrency)."""
    import torch
    from peft import PeftModel

    check_dataset(eval_dataset, "eval")
    eval_dataset, _ = drop_long_prompts(eval_dataset, tokenizer, training["max_prompt_length"], "eval")
    settings = {**training, "eval_mode": "inline"}
    if batch_size:
        settings["per_device_eval_batch_size"] = int(batch_size)
        settings["per_device_train_batch_size"] = max(int(batch_size), int(settings["per_device_train_batch_size"]))
    args = build_grpo_config(settings, G, seed, str(work_dir), has_eval=True, cuda=torch.cuda.is_available(),
                             stop_token_ids=stop_token_ids)
    args.eval_on_start = False
    model = PeftModel.from_pretrained(base_model, str(adapter), is_trainable=True)
    funcs = [guard_reward(f) for f in reward_funcs]
    trainer = _trainer_class()(model=model, reward_funcs=funcs, args=args, train_dataset=eval_dataset,
                               eval_dataset=eval_dataset, processing_class=tokenizer)
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for noisy in (ProgressCallback, PrinterCallback):
        trainer.remove_callback(noisy)
    trainer.state.global_step = int(step)
    metrics = trainer.evaluate()
    return eval_row(metrics, int(step), funcs[0].__name__)
