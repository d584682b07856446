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
    out["trl_console"] = folder / "slurm-1234.out"
    out["trl_console"].write_text(trl_console_text(history))
    out["verl_console"] = folder / "verl_train.log"
    out["verl_console"].write_text(verl_console_text(history))
    return out


def trl_console_text(history: list, total: int | None = None, buffered: bool = False) -> str:
    """``history`` as a TRL job prints it: a config dict, then per log the progress bar's count and the log dict
    without its step (the bar ahead of the dicts by 3 steps where ``buffered``, as when stdout is block-buffered),
    then the end-of-training summary."""
    total = total or int(max(entry["step"] for entry in history))
    lines = ["Updated tokens: {'bos_token_id': None, 'pad_token_id': 151643}",
             f"  0%|          | 0/{total} [00:00<?, ?it/s]"]
    for entry in history:
        step = int(entry["step"]) + (3 if buffered else 0)
        lines.append(f"\r {100 * min(step, total) // total:3d}%|##        | {min(step, total)}/{total} "
                     f"[00:{step % 60:02d}<01:00,  1.50s/it]")
        lines.append(str({k: v for k, v in entry.items() if k != "step"}))
    lines.append(str({"train_runtime": 12.5, "train_samples_per_second": 1.0, "train_loss": 0.01, "epoch": 1.0}))
    return "\n".join(lines) + "\n"


#: TRL's names -> verl's, for :func:`verl_console_text`
TRL_TO_VERL = {"reward": "critic/score/mean", "kl": "actor/kl_loss", "entropy": "actor/entropy",
               "grad_norm": "actor/grad_norm", "completions/mean_length": "response_length/mean",
               "completions/clipped_ratio": "response_length/clip_ratio", "eval_reward": "val-core/gsm8k/reward/mean@1"}


def verl_console_text(history: list) -> str:
    """``history`` as verl prints it: one ``step:N - key:value - ...`` line per step behind Ray's prefix, TRL's
    names under verl's (:data:`TRL_TO_VERL`), the other keys as they are."""
    lines = [f"(TaskRunner pid=4242) Total training steps: {int(max(entry['step'] for entry in history))}"]
    for entry in history:
        pairs = [f"{TRL_TO_VERL.get(k, k)}:{v}" for k, v in entry.items() if k != "step"]
        lines.append(f"\x1b[36m(TaskRunner pid=4242)\x1b[0m step:{int(entry['step'])} - " + " - ".join(pairs))
    return "\n".join(lines) + "\n"


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
