"""What the live monitor's tests share (tests/test_live_*.py; pgrpo.live, issue 20): the planted logs, one log
written in every saved format, ``pgrpo watch`` in a subprocess, stand-ins for a trainer's state, control and args,
and a plain TRL run of the tiny model with its module-scoped fixture model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pgrpo.diagnose.planted import SEED, planted_logs

PLANTED = planted_logs(SEED)


def write_formats(history: list, folder: Path) -> dict[str, Path]:
    """The same log in every saved format: trainer_state.json, a bare list, a TRL output folder (latest checkpoint),
    a W&B-style CSV of train/ names, the workflow's log.csv."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {"trainer_state": folder / "trainer_state.json", "bare": folder / "history.json"}
    out["trainer_state"].write_text(json.dumps({"log_history": history}))
    out["bare"].write_text(json.dumps(history))
    checkpoint = folder / "trl_out" / "checkpoint-300"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (folder / "trl_out" / "checkpoint-100").mkdir()
    out["output_folder"] = folder / "trl_out"
    frame = pd.DataFrame(history)
    wandb = frame.rename(columns={c: f"train/{c}" for c in frame.columns if c != "step"}).rename(
        columns={"step": "train/global_step"})
    out["wandb_csv"] = folder / "wandb.csv"
    wandb.to_csv(out["wandb_csv"], index=False)
    return out


def watch_cli(*args) -> subprocess.CompletedProcess:
    """``pgrpo watch ARGS`` in a subprocess, its output captured."""
    return subprocess.run([sys.executable, "-m", "pgrpo", "watch", *map(str, args)], capture_output=True, text=True)


class _State:
    def __init__(self, history, step=10, max_steps=100):
        self.log_history, self.global_step, self.max_steps, self.is_world_process_zero = history, step, max_steps, True


class _Control:
    should_save = should_training_stop = False


class _Args:
    learning_rate, adam_beta1, num_iterations, steps_per_generation = 1e-5, 0.9, 1, None
    gradient_accumulation_steps, per_device_train_batch_size, num_generations, max_completion_length = 4, 4, 4, 64
    output_dir = None


def zero_reward(completions, **kwargs):
    return [0.0 for _ in completions]


def plain_trl_run(model_dir: Path, out: Path, reward, callback, max_steps: int):
    """A plain TRL script: GRPOConfig + GRPOTrainer + the callback, nothing of the workflow."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from tests.test_train import problems

    args = GRPOConfig(output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=6, logging_steps=1, save_strategy="no", report_to=[], learning_rate=5e-3,
                      use_cpu=True, seed=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), reward_funcs=[reward], args=args,
                          train_dataset=problems(64, 0), processing_class=AutoTokenizer.from_pretrained(model_dir),
                          callbacks=[callback])
    trainer.train()
    return trainer


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("trl")
    from tests.test_train import build_fixture_model

    return build_fixture_model(tmp_path_factory.mktemp("live_model"))
