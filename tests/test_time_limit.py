"""No step lost to a time limit (issue 19, item 4): the time-limit signal (SIGURG) during start-up exits 75 at once,
during an evaluation it stops the evaluation, saves the step and exits 75, and the resumed run evaluates that step
again with the numbers of a run that was never interrupted (the evaluation's own seeded generator).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from pgrpo.grpo import time_limit
from pgrpo.grpo.time_limit import (
    CHECKPOINT_SIGNAL,
    EXIT_RESUMABLE,
    StartupInterrupted,
    enter_training,
    install_checkpoint_signal,
    on_refresh_boundary,
    signal_deferred,
    uninstall_checkpoint_signal,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def handler():
    install_checkpoint_signal()
    yield
    uninstall_checkpoint_signal()


def test_a_signal_during_start_up_exits_75_at_once(handler):
    assert time_limit.checkpoint_phase() == time_limit.STARTUP
    with pytest.raises(StartupInterrupted) as stopped:
        os.kill(os.getpid(), CHECKPOINT_SIGNAL)
        time.sleep(1)  # the handler runs at the next bytecode: never reached
    assert stopped.value.code == EXIT_RESUMABLE == 75


def test_a_deferred_block_finishes_before_the_exit(handler):
    finished = []
    with pytest.raises(StartupInterrupted):
        with signal_deferred():
            os.kill(os.getpid(), CHECKPOINT_SIGNAL)
            time.sleep(0.05)
            finished.append(True)  # not cut in two
    assert finished == [True]


def test_in_training_the_signal_is_recorded_not_acted_on(handler):
    enter_training()
    os.kill(os.getpid(), CHECKPOINT_SIGNAL)
    time.sleep(0.05)
    assert time_limit.checkpoint_requested() and time_limit.checkpoint_phase() == time_limit.TRAINING


def test_installing_again_keeps_the_phase_and_the_request(handler):
    enter_training()
    os.kill(os.getpid(), CHECKPOINT_SIGNAL)
    time.sleep(0.05)
    install_checkpoint_signal()  # stages.train and train_grpo install too
    assert time_limit.checkpoint_requested() and time_limit.checkpoint_phase() == time_limit.TRAINING


def test_each_stop_is_one_line_of_the_record_and_a_start_up_stop_is_recorded_once_the_folder_is_known(
        handler, tmp_path, monkeypatch):
    record = tmp_path / "checkpoints" / time_limit.STOPS_NAME
    record.parent.mkdir()
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    with pytest.raises(StartupInterrupted):  # before the run knows its folder: printed, not recorded
        os.kill(os.getpid(), CHECKPOINT_SIGNAL)
        time.sleep(1)
    assert time_limit.read_stops(record) == []
    uninstall_checkpoint_signal()
    install_checkpoint_signal()
    time_limit.record_stops_in(record)
    with pytest.raises(StartupInterrupted):
        os.kill(os.getpid(), CHECKPOINT_SIGNAL)
        time.sleep(1)
    time_limit.record_stop("evaluation", 100, 100, path=record)
    stops = time_limit.read_stops(record)
    assert [(s["phase"], s["checkpoint_step"], s["evaluating"], s["slurm_job_id"], s["exit"]) for s in stops] == [
        ("start-up", None, None, "4242", 75), ("evaluation", 100, 100, "4242", 75)]
    assert all(s["signal"] == "SIGURG" for s in stops)
    time_limit.record_stop("training", 5, path=tmp_path / "missing" / "stops.jsonl")  # unwritable: a warning only


@pytest.mark.parametrize("step, accumulation, generate_every, expected", [
    (3, 2, 2, True),    # on-policy: every optimizer step ends its generation batch
    (3, 1, 2, False),   # K_ref = 2 in optimizer steps: odd steps are inside a batch
    (4, 1, 2, True),
    (5, 4, 8, False),   # 5 x 4 = 20 micro-steps, batches of 8
    (6, 4, 8, True),
])
def test_refresh_boundaries_by_hand(step, accumulation, generate_every, expected):
    assert on_refresh_boundary(step, accumulation, generate_every) is expected


def _signal_caught(pid: int) -> bool:
    """Whether process ``pid`` has a handler for CHECKPOINT_SIGNAL (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (int(CHECKPOINT_SIGNAL) - 1) & 1)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the signal mask from /proc")
def test_python_m_pgrpo_train_takes_the_signal_from_its_first_line(tmp_path):
    """The handler is in place before torch is imported; the signal then ends the job with 75 and no checkpoint."""
    pytest.importorskip("trl")
    from tests.test_multiprocess import build_fixture, environment

    model, data = build_fixture(tmp_path)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "pgrpo", "train", "--model-json", json.dumps(model), "--data-json",
               json.dumps(data), "--training-json", json.dumps({"max_steps": 4, "eval_steps": 0}), "--G", "4",
               "--seed", "1", "--out-dir", str(out)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=environment(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _signal_caught(process.pid) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    imported = Path(f"/proc/{process.pid}/maps").read_text() if process.poll() is None else ""
    os.kill(process.pid, CHECKPOINT_SIGNAL)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_RESUMABLE, stderr
    assert "during start-up" in stderr and "exiting with 75 at once" in stderr
    assert "libtorch" not in imported  # caught before the heavy imports, so nothing can be lost to them
    assert not (out / "checkpoints").exists() or not any((out / "checkpoints").glob("checkpoint-*"))


@pytest.fixture(scope="module")
def fixture_model(tmp_path_factory):
    pytest.importorskip("trl")
    from tests.test_train import build_fixture_model

    return build_fixture_model(tmp_path_factory.mktemp("fixture-model"))


@pytest.mark.slow
@pytest.mark.parametrize("interrupt_at", [4, 0])
def test_a_signal_during_an_evaluation_saves_the_step_and_the_resumed_run_evaluates_it_again(
        fixture_model, tmp_path, interrupt_at):
    """Interrupted in the evaluation of step 4 (or of step 0, eval_on_start: nothing to save) and resumed, the run's
    log.csv, eval columns included, is the uninterrupted run's to the last digit."""
    from tests.test_train import lower_or_digit_reward, problems, small_training
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pgrpo.grpo.checkpoints import last_complete_checkpoint
    from pgrpo.grpo.trainer import train_grpo

    eval_prompts = set(problems(8, 99)["prompt"])
    state = {"armed": True}

    def reward_that_signals(completions, answer, prompts=None, trainer_state=None, **kwargs):
        in_evaluation = prompts is not None and prompts[0] in eval_prompts
        if state["armed"] and in_evaluation and trainer_state is not None \
                and trainer_state.global_step == interrupt_at:
            state["armed"] = False
            os.kill(os.getpid(), CHECKPOINT_SIGNAL)
        return lower_or_digit_reward(completions, answer)

    reward_that_signals.__name__ = "accuracy"
    training = small_training(max_steps=6, eval_steps=2, checkpoint_steps=3, eval_on_start=True,
                              per_device_eval_batch_size=4)

    def run(out, reward):
        return train_grpo(
            model=AutoModelForCausalLM.from_pretrained(fixture_model),
            tokenizer=AutoTokenizer.from_pretrained(fixture_model), train_dataset=problems(64, 0),
            eval_dataset=problems(8, 99), reward_funcs=[reward], training=training, G=4, seed=5,
            out_dir=str(out), model_name="fixture",
            load_base_model=lambda: AutoModelForCausalLM.from_pretrained(fixture_model))

    interrupted = tmp_path / "interrupted"
    with pytest.raises(SystemExit) as stopped:
        run(interrupted, reward_that_signals)
    assert stopped.value.code == EXIT_RESUMABLE
    assert signal.getsignal(CHECKPOINT_SIGNAL) in (signal.SIG_DFL, None)
    found = last_complete_checkpoint(interrupted / "checkpoints")
    assert (found[1] if found else 0) == interrupt_at  # the evaluated step saved (checkpoint_steps 3 would not)
    assert not (interrupted / "log.csv").exists()
    recorded = time_limit.read_stops(interrupted / "checkpoints" / time_limit.STOPS_NAME)
    assert [(stop["phase"], stop["checkpoint_step"], stop["evaluating"]) for stop in recorded] == [
        ("evaluation", interrupt_at or None, interrupt_at)], recorded

    result = run(interrupted, lower_or_digit_reward_named())
    assert result.resumed_from == interrupt_at
    whole = tmp_path / "whole"
    run(whole, lower_or_digit_reward_named())
    resumed, uninterrupted = pd.read_csv(interrupted / "log.csv"), pd.read_csv(whole / "log.csv")
    evaluated = uninterrupted.dropna(subset=["eval_accuracy"])["step"].tolist()
    assert evaluated == [0, 2, 4, 6]
    timing = [c for c in uninterrupted.columns if "time" in c]  # wall-clock, the one column a rerun cannot repeat
    assert timing == ["step_time"]
    pd.testing.assert_frame_equal(resumed.drop(columns=timing), uninterrupted.drop(columns=timing))


def lower_or_digit_reward_named():
    from tests.test_train import lower_or_digit_reward

    def accuracy(completions, answer, **kwargs):
        return lower_or_digit_reward(completions, answer)

    return accuracy
