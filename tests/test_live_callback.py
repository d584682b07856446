"""The live callback in a trainer (pgrpo.live.DynamicsCallback, issue 20): a log it cannot read warns and training
goes on; real GRPOTrainer runs of the tiny model (slow: a zero reward stopped by ``stop_on=["degeneracy"]``, a run
resumed from its checkpoint, the real reward run to its end); its place ahead of the trackers; ``training.live`` in
the workflow's config and runs; and what a read costs (benchmarks/live/bench_read.py)."""

from __future__ import annotations

import json

import pytest

from pgrpo.errors import InputError
from tests import _live_helpers
from tests._live_helpers import _Args, _Control, _State, plain_trl_run, zero_reward

tiny_model = _live_helpers.tiny_model  # the module-scoped fixture model (a fixture is found by its name here)


# ---- the callback without a trainer: a read never raises ---------------------------------------------------------


@pytest.mark.parametrize("background", [False, True])
def test_a_log_the_callback_cannot_read_warns_and_training_goes_on(tmp_path, capsys, background):
    """Synchronous: the warning at the read; background: at the next read's log event, where the read is applied."""
    pytest.importorskip("transformers")
    from pgrpo.live import DynamicsCallback

    callback = DynamicsCallback(every=1, stop_on=["degeneracy"], output_dir=str(tmp_path), background=background)
    args, control = _Args(), _Control()
    state = _State([{"reward": "garbage", "step": "x"}])
    try:
        callback.on_train_begin(args, state, control)
        assert callback.on_log(args, state, control, logs={"reward": 0.0}) is control
        if background:
            assert not callback.warnings  # still in the worker
            state.global_step = 11
            assert callback.on_log(args, state, control, logs={"reward": 0.0}) is control
        assert not control.should_training_stop
        assert [w for w in callback.warnings if "read at step 10 skipped" in w] == callback.warnings[:1]
        assert len(callback.warnings) == 1
        assert "pgrpo live: warning" in capsys.readouterr().err
    finally:
        callback.close()


# ---- real GRPOTrainer runs of the tiny model ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_zero_reward_run_stops_well_before_max_steps_with_stop_json(tiny_model, tmp_path):
    from pgrpo.live import DynamicsCallback

    callback = DynamicsCallback(every=4, stop_on=["degeneracy"], background=False)
    trainer = plain_trl_run(tiny_model, tmp_path, zero_reward, callback, max_steps=40)
    assert trainer.state.global_step <= 20  # well before 40
    stop = json.loads((tmp_path / "pgrpo" / "stop.json").read_text())
    assert stop["mode"] == "degeneracy" and stop["step"] == trainer.state.global_step
    assert stop["read_step"] == stop["step"] and stop["lag_reads"] == 0  # synchronous: stopped at the deciding read
    assert {"onset_step", "severity", "reason", "forecast"} <= set(stop)
    assert (tmp_path / f"checkpoint-{trainer.state.global_step}").is_dir()  # saved before the stop
    assert json.loads((tmp_path / "pgrpo" / "live.json").read_text())["live"]["stopped"]["mode"] == "degeneracy"


@pytest.mark.slow
def test_a_real_run_resumed_from_its_checkpoint_keeps_its_alert_and_its_cadence(tiny_model, tmp_path):
    """TRL restores ``state.log_history`` from the checkpoint before ``on_train_begin``: the resumed run's callback
    keeps the degeneracy alert of the first process (told once), and reads on the whole run's cadence."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from pgrpo.live import DynamicsCallback
    from tests.test_train import problems

    told = []

    def trainer_for(max_steps):
        args = GRPOConfig(output_dir=str(tmp_path), max_steps=max_steps, per_device_train_batch_size=4,
                          num_generations=4, max_completion_length=6, logging_steps=1, save_strategy="steps",
                          save_steps=8, report_to=[], learning_rate=5e-3, use_cpu=True, seed=0, disable_tqdm=True)
        callback = DynamicsCallback(every=3, background=False, forecast_every=0, on_alert=told.append,
                                    alert_on=["degeneracy"])
        return GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model), reward_funcs=[zero_reward],
                           args=args, train_dataset=problems(64, 0),
                           processing_class=AutoTokenizer.from_pretrained(tiny_model), callbacks=[callback]), callback

    first, _ = trainer_for(16)
    first.train()
    assert [a["mode"] for a in told] == ["degeneracy"] and told[0]["read_step"] <= 16
    second, callback = trainer_for(24)
    second.train(resume_from_checkpoint=str(tmp_path / "checkpoint-16"))
    assert second.state.global_step == 24
    assert len(told) == 1 and [a["mode"] for a in callback.alerts] == ["degeneracy"]
    assert callback.reads[0].step == 18.0  # the 6th read of the whole run, not a first read 3 logs after the resume
    live = json.loads((tmp_path / "pgrpo" / "live.json").read_text())
    assert live["live"]["step"] == 24 and [a["mode"] for a in live["live"]["alerts"]] == ["degeneracy"]


@pytest.mark.slow
def test_the_real_reward_runs_to_its_end_with_pgrpo_keys_in_the_log_history(tiny_model, tmp_path):
    from tests.test_train import lower_or_digit_reward
    from pgrpo.live import DynamicsCallback

    callback = DynamicsCallback(every=4, stop_on=["degeneracy"], background=False)
    trainer = plain_trl_run(tiny_model, tmp_path, lambda completions, answer, **kw: lower_or_digit_reward(
        completions, answer), callback, max_steps=16)
    assert trainer.state.global_step == 16
    assert not (tmp_path / "pgrpo" / "stop.json").exists()
    keyed = [e for e in trainer.state.log_history if "pgrpo/degeneracy" in e]
    assert [e["step"] for e in keyed] == [8, 12, 16]  # reads at 4 too, where degeneracy has too few points
    assert [e["pgrpo/read_step"] for e in keyed] == [8, 12, 16]  # synchronous: each read's keys at its own step
    assert any("pgrpo/plateau" in e for e in trainer.state.log_history)
    payload = json.loads((tmp_path / "pgrpo" / "live.json").read_text())
    assert payload["theory"]["configuration"]["k_ref"] == 1.0 and payload["live"]["step"] == 16
    assert payload["modes"]["truncation"]["thresholds"]  # the cap came from args.max_completion_length


class _Holder:
    """A stand-in for a Trainer in the two ordering tests: its callback_handler is transformers' real one."""

    def __init__(self, callbacks):
        from transformers.trainer_callback import CallbackHandler

        self.callback_handler = CallbackHandler(callbacks, None, None, None, None)


def _tracker_callbacks():
    from transformers.trainer_callback import DefaultFlowCallback, PrinterCallback

    return [DefaultFlowCallback(), PrinterCallback()]  # the places a trainer's own callbacks and trackers hold


def test_attach_puts_the_callback_first_once():
    from pgrpo.live import DynamicsCallback

    trackers = _tracker_callbacks()
    holder = _Holder(trackers)
    callback = DynamicsCallback(background=False)
    assert callback.attach(holder) is callback
    callback.attach(holder)  # twice: still one
    assert holder.callback_handler.callbacks == [callback, *trackers]
    with pytest.raises(TypeError, match="callback_handler"):
        callback.attach(object())


def test_a_callback_given_last_moves_ahead_of_the_trackers_when_training_begins(tmp_path):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from pgrpo.live import DynamicsCallback

    trackers = _tracker_callbacks()
    callback = DynamicsCallback(background=False, verbose=False)
    holder = _Holder([*trackers, callback])
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    holder.callback_handler.on_train_begin(args, TrainerState(), TrainerControl())
    assert holder.callback_handler.callbacks == [callback, *trackers]


# ---- the workflow's runs ----------------------------------------------------------------------------------------


def test_report_only_live_is_bookkeeping_and_a_stop_rule_is_trajectory():
    from pgrpo.grpo.training_config import (BOOKKEEPING_KEYS, bookkeeping_section, resolve_training,
                                            trajectory_section)

    report_only = resolve_training({"live": {"every": 5}})
    assert report_only["live"] == {"every": 5, "stop_on": [], "stop_if_plateau_below": None,
                                   "stop_if_reached": None, "on_alert": None}  # merged onto defaults
    assert "live" not in trajectory_section(report_only) and "live" in bookkeeping_section(report_only)
    stopping = resolve_training({"live": {"stop_on": ["degeneracy"]}})
    assert "live" in trajectory_section(stopping) and bookkeeping_section(stopping) == {
        **{k: v for k, v in stopping.items() if k in BOOKKEEPING_KEYS}, "live": {"on_alert": None}}
    # the alert command never shapes the trajectory, stop rule or not
    alerting = resolve_training({"live": {"stop_on": ["degeneracy"], "on_alert": "mail -s alert me"}})
    assert trajectory_section(alerting) == trajectory_section(stopping)
    assert trajectory_section(resolve_training({"live": {"on_alert": "true"}})) == trajectory_section(report_only)
    # the two parts are the whole section, each key (and each live sub-key) in exactly one
    for training in (report_only, stopping, alerting):
        trajectory, bookkeeping = trajectory_section(training), bookkeeping_section(training)
        for key, value in training.items():
            if isinstance(value, dict) and key in trajectory and key in bookkeeping:
                assert {**trajectory[key], **bookkeeping[key]} == value
                assert not set(trajectory[key]) & set(bookkeeping[key])
            else:
                assert (key in trajectory) != (key in bookkeeping) and value == {**trajectory, **bookkeeping}[key]
    with pytest.raises(InputError, match="training.live.nonsense"):
        resolve_training({"live": {"nonsense": 1}})


def test_the_schema_takes_training_live(repo_root):
    from pgrpo.config import load_config

    config = load_config(repo_root / "config" / "config.yaml")
    assert config["training"]["live"] == {"every": 10, "stop_on": [], "stop_if_plateau_below": None,
                                          "stop_if_reached": None, "on_alert": None}


@pytest.mark.slow
def test_a_workflow_run_writes_live_json_beside_log_csv(tiny_model, tmp_path):
    from tests.test_train import run_fixture, small_training

    run_fixture(tiny_model, tmp_path, small_training(max_steps=6, eval_steps=0, live={"every": 2}))
    payload = json.loads((tmp_path / "pgrpo" / "live.json").read_text())
    assert (tmp_path / "log.csv").is_file() and payload["live"]["step"] == 6
    assert payload["live"]["settings"]["max_completion_length"] == 6
    assert [r["step"] for r in payload["live"]["reads"]] == [2.0, 4.0, 6.0]


# ---- what a read costs -----------------------------------------------------------------------------------


def test_bench_read_prints_one_row_per_log_length(capsys):
    """benchmarks/live/bench_read.py times real reads (no timing is asserted): one row per ``--rows``, the mean per
    read at the default cadence ((forecast_every - 1) x diagnose + forecast) / forecast_every, its share of
    ``every`` steps of ``--step-seconds``."""
    import importlib.util
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "live" / "bench_read.py"
    spec = importlib.util.spec_from_file_location("bench_read_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--rows", "30", "60", "--repeats", "1", "--total", "90", "--step-seconds", "2"])
    rows = re.findall(r"^\s+(\d+)\s+(\d+)ms\s+(\d+)ms\s+(\d+)ms\s+([\d.]+)%$", capsys.readouterr().out, re.M)
    assert [r[0] for r in rows] == ["30", "60"]
    for _, diagnose, both, mean, share in rows:
        assert abs(int(mean) - (2 * int(diagnose) + int(both)) / 3) <= 1.0  # rounded to whole ms
        assert float(share) == pytest.approx(int(mean) / (10 * 2000) * 100, abs=0.01 + 0.5 / 200)
