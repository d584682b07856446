"""Stages ``evaluate-checkpoint`` and ``join-evaluations`` (``training.eval_mode: checkpoints``,
:mod:`pgrpo.grpo.eval_checkpoints`): the held-out evaluation of Section 4.2 of one run at one step from its saved
adapter, as a job of its own, and the run's ``log.csv`` joined from its training rows and those evaluations.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from pgrpo.atomic import read_json, write_csv, write_json
from pgrpo.errors import InputError
from pgrpo.grpo.eval_checkpoints import EVAL_COLUMNS, TRAIN_LOG_NAME, adapter_dir, evaluation_steps, join_evaluations
from pgrpo.grpo.training_config import resolve_training


def run_evaluate_checkpoint(*, model: dict, data: dict, training: dict, G: int, seed: int, run_dir: str, step: int,
                            out_json: str) -> dict:
    """Evaluate run ``run_dir`` at ``step`` from ``eval_adapters/step-<step>``; writes the eval row to ``out_json``."""
    import tempfile

    import torch

    from pgrpo.grpo import data as data_module
    from pgrpo.grpo import rewards
    from pgrpo.grpo.chat import add_stop_tokens
    from pgrpo.grpo.eval_job import evaluate_adapter
    from pgrpo.grpo.models import load_model_and_tokenizer
    from pgrpo.grpo.training_config import validate_training
    from pgrpo.stages.train import check_model_spec

    adapter = adapter_dir(run_dir, step)
    if not (adapter / "adapter_config.json").is_file():
        raise InputError(f"no saved adapter for step {step}: {adapter} (is training.eval_mode checkpoints, and is "
                         f"{step} one of the run's evaluation steps?)")
    if not (data or {}).get("eval"):
        raise InputError("data.eval: missing (the held-out set the evaluation scores)")
    cuda = torch.cuda.is_available()
    resolved = validate_training(resolve_training(training), G, cuda=cuda,
                                 bf16_supported=bool(cuda and torch.cuda.is_bf16_supported()))
    torch.set_num_threads(resolved["resources"]["threads"])
    check_model_spec(model)
    dtype = torch.bfloat16 if (cuda and resolved["bf16"]) else torch.float32
    base, tokenizer = load_model_and_tokenizer(model, dtype=dtype)
    eval_set = data_module.load_problems(data["eval"], "eval", tokenizer)
    stops = add_stop_tokens(base, tokenizer, isinstance(eval_set[0]["prompt"], list))
    with tempfile.TemporaryDirectory(prefix="pgrpo-eval-") as work:
        row = evaluate_adapter(base_model=base, tokenizer=tokenizer, adapter=adapter, eval_dataset=eval_set,
                               reward_funcs=[rewards.accuracy_reward], training=resolved, G=G, seed=seed, step=step,
                               work_dir=work, stop_token_ids=stops, batch_size=resolved["eval_job_batch_size"])
    record = {**row, "run_dir": str(run_dir), "adapter": str(adapter), "device": "cuda" if cuda else "cpu"}
    write_json(out_json, record)
    return record


def run_join_evaluations(*, train_log: str, eval_jsons: list[str], training: dict, out_csv: str) -> pd.DataFrame:
    """``log.csv`` from ``train_log.csv`` and one evaluation JSON per evaluation step (each named in the error if
    missing a column), with the columns and rows of an inline run's."""
    if not Path(train_log).is_file():
        raise InputError(f"training log not found: {train_log}")
    frame = pd.read_csv(train_log)
    rows = []
    for path in eval_jsons:
        record = read_json(path, "evaluation")
        if "step" not in record:
            raise InputError(f"evaluation {path} has no 'step'")
        rows.append({"step": int(record["step"]), **{c: record[c] for c in EVAL_COLUMNS if c in record}})
    settings = resolve_training(training)
    last_step = int(frame["step"].max()) if len(frame) else 0
    expected = evaluation_steps(settings["eval_steps"], last_step, bool(settings["eval_on_start"]))
    joined = join_evaluations(frame, rows, expected)
    write_csv(out_csv, joined)
    return joined


def train_log_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / TRAIN_LOG_NAME
