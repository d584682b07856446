"""The live callback (pgrpo.live, issue 20): stop rules on hand-made reads, Theorem 7's lines against the closed
forms, replay reading only what had been logged, replay and watch on every saved format, and real GRPOTrainer runs
of the tiny model (a zero reward stopped by ``stop_on=["degeneracy"]``, the real reward run to its end)."""

from __future__ import annotations

import json
import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pgrpo.diagnose.planted import SEED, planted_logs
from pgrpo.errors import InputError
from pgrpo.live.reads import (
    CONSECUTIVE_READS,
    LiveRead,
    LiveSettings,
    configuration_theory,
    curves_from_history,
    curves_up_to,
    measured_theory,
    read_curves,
)
from pgrpo.live.reads import GOLD_STAND_IN_SHARE, gold_still_early
from pgrpo.live.stop_rules import PLATEAU_RULE, AlertRules, StopRules
from pgrpo.stages.diagnose import read_log, run_diagnose
from pgrpo.stages.live import run_replay, run_watch

PLANTED = planted_logs(SEED)


def fake_read(step, flagged=None, severity="medium", hi80=None):
    modes = {"degeneracy": {"flagged": flagged, "onset_step": 3.0 if flagged else None,
                            "severity": severity if flagged else None, "verdict": "stuck"}}
    forecast = {"plateau": {"mean": hi80, "lo80": hi80, "hi80": hi80}} if hi80 is not None else {}
    return LiveRead(float(step), {"modes": modes}, forecast)


# ---- stop rules -------------------------------------------------------------------------------------------


def test_a_mode_stops_at_the_second_consecutive_read_of_at_least_medium_severity():
    rules = StopRules(LiveSettings(stop_on=("degeneracy",)))
    assert rules.update(fake_read(10, True)) is None
    decision = rules.update(fake_read(20, True, "high"))
    assert decision is not None and (decision.step, decision.mode, decision.onset_step) == (20.0, "degeneracy", 3.0)
    assert CONSECUTIVE_READS == 2


@pytest.mark.parametrize("sequence", [
    [(True, "low")] * 5,  # low severity never stops
    [(True, "high"), (False, None), (True, "high"), (False, None), (True, "medium")],  # never twice in a row
])
def test_low_severity_or_alternating_flags_never_stop(sequence):
    rules = StopRules(LiveSettings(stop_on=("degeneracy",)))
    assert all(rules.update(fake_read(10 * (i + 1), f, s)) is None for i, (f, s) in enumerate(sequence))


def test_a_failure_that_has_ended_stops_nothing_but_recurring_instability_does():
    """A flag whose last episode has ended by the read (``active`` False: "stuck for a phase that resolved") does
    not count toward a stop, and breaks a streak; a flag still on does (and a mode that reports no episodes,
    ``active`` absent, counts as before). Instability's episodes are bursts that recur, so its ended ones count."""
    def read(step, mode, active):
        verdict = {"flagged": True, "onset_step": 3.0, "severity": "high", "verdict": "x"}
        if active is not None:
            verdict["active"] = active
        return LiveRead(float(step), {"modes": {mode: verdict}}, {})

    rules = StopRules(LiveSettings(stop_on=("degeneracy", "instability")))
    assert rules.update(read(10, "degeneracy", False)) is None
    assert rules.update(read(20, "degeneracy", False)) is None  # resolved twice: the run recovered
    assert rules.update(read(30, "degeneracy", True)) is None  # on again: a streak of one
    assert rules.update(read(40, "degeneracy", True)).step == 40.0
    rules = StopRules(LiveSettings(stop_on=("degeneracy",)))
    assert rules.update(read(10, "degeneracy", True)) is None
    assert rules.update(read(20, "degeneracy", False)) is None  # ended between the reads: the streak is broken
    assert rules.update(read(30, "degeneracy", None)) is None
    assert rules.update(read(40, "degeneracy", None)).step == 40.0
    rules = StopRules(LiveSettings(stop_on=("instability",)))
    assert rules.update(read(10, "instability", False)) is None
    assert rules.update(read(20, "instability", False)).mode == "instability"


def test_a_mode_not_in_stop_on_never_stops():
    rules = StopRules(LiveSettings(stop_on=()))
    assert all(rules.update(fake_read(s, True, "high")) is None for s in (10, 20, 30))


def test_plateau_rule_stops_when_the_upper_bound_stays_below_the_target():
    rules = StopRules(LiveSettings(stop_if_plateau_below=0.5))
    assert rules.update(fake_read(10, hi80=0.4)) is None
    assert rules.update(fake_read(20, hi80=0.6)) is None  # above: the streak restarts
    assert rules.update(fake_read(30, hi80=0.3)) is None
    decision = rules.update(fake_read(40, hi80=0.45))
    assert decision is not None and decision.mode == PLATEAU_RULE and decision.step == 40.0


@pytest.mark.parametrize("bad", [dict(every=0), dict(stop_on=("nonsense",)), dict(stop_if_plateau_below="x"),
                                 dict(reward_range=(1.0, 0.0))])
def test_bad_settings_name_the_key(bad):
    with pytest.raises(InputError, match="live"):
        LiveSettings(**bad)


# ---- Theorem 7 ----------------------------------------------------------------------------------------------


def test_configuration_theory_is_prop_9s_critical_stiffness():
    theory = configuration_theory(eta=0.01, mu=0.9, k_ref=4)
    assert theory["critical_K"] == pytest.approx(0.1 / (0.01 * 4))


def test_K_from_the_early_slope_inverts_eq_14_on_a_planted_exponential():
    eta, mu, k_ref, lam = 0.02, 0.9, 2, 0.05
    t = np.arange(1, 41, dtype=float)
    reward = 0.8 - 0.6 * np.exp(-lam * (t - 1))
    theory = measured_theory(t, reward, eta, mu, k_ref)
    K = lam * (1 - mu) / (eta * (1 + lam * k_ref))  # Eq. 14 solved by hand
    assert theory["K"] == pytest.approx(K, rel=1e-3)
    assert theory["margin"] == pytest.approx((1 - mu) - K * eta * k_ref, rel=1e-3)
    m_eff, c_eff = (1 + mu) / (2 * eta) + K * k_ref**2 / 2, (1 - mu) / eta - K * k_ref
    assert theory["zeta"] == pytest.approx(c_eff / (2 * math.sqrt(K * m_eff)), rel=1e-3)
    assert theory["regime"] == ("oscillatory" if theory["zeta"] < 1 else "monotone")


# ---- one code path with the CLI ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["planted_stuck_at_zero", "planted_healthy", "planted_truncation_only"])
def test_a_read_of_the_whole_history_flags_what_pgrpo_diagnose_flags(name, tmp_path):
    case = PLANTED[name]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": case["log_history"]}))
    cli = run_diagnose(str(path), max_completion_length=case["meta"]["max_completion_length"]).to_dict()["modes"]
    settings = LiveSettings(max_completion_length=case["meta"]["max_completion_length"])
    live = read_curves(curves_from_history(case["log_history"]), settings).modes
    assert {m: v["flagged"] for m, v in live.items()} == {m: v["flagged"] for m, v in cli.items()}
    assert {m: v["onset_step"] for m, v in live.items()} == {m: v["onset_step"] for m, v in cli.items()}


def test_keys_a_read_added_are_not_read_back():
    history = [dict(e, **{"pgrpo/degeneracy": 1.0}) for e in PLANTED["planted_healthy"]["log_history"]]
    curves = curves_from_history(history)
    assert not [c for c in curves.frame.columns if c.startswith("pgrpo")]


# ---- replay ----------------------------------------------------------------------------------------------------


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


def test_replay_flags_a_planted_stuck_run_early_and_reads_only_what_was_logged(tmp_path):
    case = PLANTED["planted_stuck_at_zero"]
    paths = write_formats(case["log_history"], tmp_path)
    result = run_replay(str(paths["trainer_state"]), every=10, stop_on=["degeneracy"],
                        out_json=str(tmp_path / "replay.json"), quiet=True)
    assert json.loads((tmp_path / "replay.json").read_text())["every"] == 10
    last = case["log_history"][-1]["step"]
    assert result["stopped"]["mode"] == "degeneracy"
    # the stuck phase (from step 1) counts toward a stop once it has lasted 10% of the 300-step run (reads at 40 and
    # 50), and the background applies the decision one read later: step 60, a fifth of the run
    assert result["stopped"]["read_step"] == 50.0 and result["stopped"]["step"] == 60.0 <= 0.2 * last
    for read in result["reads"]:
        for verdict in read["modes"].values():
            assert verdict["onset_step"] is None or verdict["onset_step"] <= read["step"]
    assert [r["step"] for r in result["reads"]] == [10.0 * (i + 1) for i in range(len(result["reads"]))]


def test_replay_of_a_healthy_run_does_not_stop_and_reads_to_the_end(tmp_path):
    case = PLANTED["planted_healthy_every5_no_kl"]  # logged every 5 steps: reads every 10 logged rows = 50 steps
    paths = write_formats(case["log_history"], tmp_path)
    result = run_replay(str(paths["bare"]), every=10, stop_on=["degeneracy", "no_learning", "regression"], quiet=True)
    assert result["stopped"] is None
    steps = [e["step"] for e in case["log_history"] if "reward" in e]
    assert result["reads"][0]["step"] == steps[9]
    assert result["reads"][-1]["step"] == steps[-1]


@pytest.mark.parametrize("fmt", ["trainer_state", "bare", "output_folder", "wandb_csv"])
def test_replay_and_watch_read_every_saved_format_alike(fmt, tmp_path):
    history = PLANTED["planted_stuck_at_zero"]["log_history"][:120]
    paths = write_formats(history, tmp_path)
    reference = run_replay(str(paths["trainer_state"]), every=20, quiet=True)
    result = run_replay(str(paths[fmt]), every=20, quiet=True)
    assert result["first_flagged"] == reference["first_flagged"] and result["first_flagged"]
    reads = run_watch(str(paths[fmt]), once=True, out_dir=str(tmp_path / f"watch_{fmt}")).reads
    payload = json.loads((tmp_path / f"watch_{fmt}" / "live.json").read_text())
    assert payload["modes"]["degeneracy"]["flagged"] is True and reads[0].step == 120.0
    assert (tmp_path / f"watch_{fmt}" / "live.html").read_text().startswith("<!doctype html>")


def test_watch_reads_the_workflow_log_csv_with_its_meta(tmp_path):
    history = PLANTED["planted_stuck_at_zero"]["log_history"][:60]
    run = tmp_path / "fixture" / "G8" / "seed42"
    run.mkdir(parents=True)
    pd.DataFrame(history).to_csv(run / "log.csv", index=False)
    (run / "meta.json").write_text(json.dumps({"model": "fixture", "G": 8, "eta": 0.01, "mu": 0.9, "k_ref": 1,
                                               "max_steps": 300, "max_completion_length": 1024}))
    run_watch(str(run), once=True)
    payload = json.loads((run / "pgrpo" / "live.json").read_text())
    assert payload["theory"]["configuration"]["critical_K"] == pytest.approx(0.1 / 0.01)
    assert payload["live"]["total_steps"] == 300.0  # the planned length from meta.json, for the forecast


def test_watch_applies_the_callbacks_stop_rules_as_a_synchronous_replay_decides(tmp_path):
    """A watched run is stopped by the callback's rules at the read the callback (synchronous) would stop at: a read
    every 10 logged steps, the second consecutive flagged one; stop.json beside live.json, exit status 3."""
    history = PLANTED["planted_stuck_at_zero"]["log_history"][:120]
    paths = write_formats(history, tmp_path)
    replay = run_replay(str(paths["trainer_state"]), every=10, stop_on=["degeneracy"], quiet=True, lag_reads=0)
    out = tmp_path / "watched"
    outcome = run_watch(str(paths["output_folder"]), once=True, out_dir=str(out), stop_on=["degeneracy"])
    assert outcome.ended == "stopped" and outcome.exit_status == 3
    stop = json.loads((out / "stop.json").read_text())
    assert stop["mode"] == "degeneracy" and stop["read_step"] == replay["stopped"]["read_step"]
    logged = [e["step"] for e in history if "reward" in e]
    assert stop["read_step"] in logged[9::10]  # a read of the callback's schedule, not the poll's last step
    assert stop["step"] == logged[-1]  # acted on when the watcher saw it
    assert json.loads((out / "live.json").read_text())["live"]["stopped"]["mode"] == "degeneracy"


def test_watch_polled_as_the_log_grows_decides_as_one_pass_over_the_whole_log():
    """The schedule is caught up poll by poll: reads at 10, 20, ... logged steps whatever the polls saw."""
    from pgrpo.stages.live import ScheduledReads

    curves = curves_from_history(PLANTED["planted_stuck_at_zero"]["log_history"][:120])
    settings = LiveSettings(stop_on=("degeneracy",), forecast_every=0)
    polled = ScheduledReads(settings)
    stops = [polled.catch_up(curves_up_to(curves, float(seen)), None) for seen in (7, 13, 14, 38, 120)]
    whole = ScheduledReads(settings).catch_up(curves, None)
    first = next(stop for stop in stops if stop)
    assert first["read_step"] == whole["read_step"]
    assert [r.step for r in polled.reads] == [10.0 * (i + 1) for i in range(len(polled.reads))]


def watch_cli(*args) -> subprocess.CompletedProcess:
    """``pgrpo watch ARGS`` in a subprocess, its output captured."""
    return subprocess.run([sys.executable, "-m", "pgrpo", "watch", *map(str, args)], capture_output=True, text=True)


def test_watch_cli_runs_on_stop_with_the_stop_in_its_environment(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    marker = tmp_path / "on_stop.txt"
    done = watch_cli(paths["wandb_csv"], "--once", "--out", tmp_path / "w", "--stop-on", "degeneracy",
                     "--on-stop", f'echo "$PGRPO_STOP_MODE $PGRPO_STOP_READ_STEP $PGRPO_STOP_JSON" > {marker}')
    assert done.returncode == 3, done.stderr
    mode, read_step, stop_json = marker.read_text().split()
    assert mode == "degeneracy" and json.loads(Path(stop_json).read_text())["read_step"] == float(read_step)
    assert "pgrpo watch: stop at step 100" in done.stdout


def test_watch_of_a_healthy_run_stops_nothing_and_ends_at_its_planned_length(tmp_path):
    history = PLANTED["planted_healthy"]["log_history"]
    paths = write_formats(history, tmp_path)
    last = max(e["step"] for e in history if "reward" in e)
    outcome = run_watch(str(paths["bare"]), every_seconds=0.01, out_dir=str(tmp_path / "w"), total_steps=last,
                        stop_on=["degeneracy", "no_learning", "regression"])
    assert (outcome.ended, outcome.stopped, outcome.exit_status) == ("finished", None, 0)
    assert not (tmp_path / "w" / "stop.json").exists()


def test_watch_of_a_trl_output_folder_ends_at_the_max_steps_its_trainer_state_records(tmp_path):
    history = PLANTED["planted_healthy"]["log_history"][:60]
    last = max(e["step"] for e in history if "reward" in e)
    checkpoint = tmp_path / "out" / f"checkpoint-{int(last)}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"max_steps": int(last), "log_history": history}))
    outcome = run_watch(str(tmp_path / "out"), every_seconds=0.01, idle_timeout=30.0)
    assert outcome.ended == "finished"
    payload = json.loads((checkpoint / "pgrpo" / "live.json").read_text())
    assert payload["live"]["total_steps"] == float(last)


def test_watch_of_a_log_that_stops_growing_gives_up_after_its_idle_timeout(tmp_path):
    paths = write_formats(PLANTED["planted_healthy"]["log_history"][:40], tmp_path)
    outcome = run_watch(str(paths["bare"]), every_seconds=0.05, idle_timeout=0.2, out_dir=str(tmp_path / "w"))
    assert outcome.ended == "idle" and len(outcome.reads) == 1  # read once: the log never grew again
    with pytest.raises(InputError, match="--idle-timeout"):
        run_watch(str(paths["bare"]), idle_timeout=0)


def test_watch_of_an_unreadable_log_is_one_line(tmp_path):
    (tmp_path / "log.csv").write_text("not,a\nlog")
    with pytest.raises(InputError):
        run_watch(str(tmp_path), once=True)


def test_replay_cli_prints_one_line_and_writes_json(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    done = subprocess.run([sys.executable, "-m", "pgrpo", "replay", str(paths["wandb_csv"]), "--every", "10",
                           "--stop-on", "degeneracy", "--json", str(tmp_path / "r.json"), "--quiet"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # a 100-step log: the phase from step 1 counts from the read at 20 (10% of the run), the stop is decided at 30
    # and, the callback's default, applied one read later
    assert "stopped at step 40, decided by the read at step 30" in done.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result) >= {"every", "lag_reads", "reads", "first_flagged", "stopped"}
    done = subprocess.run([sys.executable, "-m", "pgrpo", "replay", str(paths["wandb_csv"]), "--every", "10",
                           "--stop-on", "degeneracy", "--json", str(tmp_path / "s.json"), "--quiet", "--synchronous"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "(synchronous)" in done.stdout and "stopped at step 30 (" in done.stdout
    synchronous = json.loads((tmp_path / "s.json").read_text())
    assert synchronous["lag_reads"] == 0 and synchronous["stopped"]["step"] == synchronous["stopped"]["read_step"]
    assert synchronous["stopped"]["read_step"] == result["stopped"]["read_step"] == 30.0


def test_replay_models_the_background_lag_a_stop_one_read_after_the_deciding_read(tmp_path):
    """The stuck run logged at every 3rd step (3, 6, ..., 300), read every 4 logged steps: reads at 12, 24, 36, ...
    Synchronous (lag 0), the stop is at the read that decides, 12 k; background (lag 1, the default), at the next
    read's step 12 (k + 1), with ``read_step`` 12 k and one more read, at the stop."""
    history = [e for e in PLANTED["planted_stuck_at_zero"]["log_history"] if e["step"] % 3 == 0]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    synchronous = run_replay(str(path), every=4, stop_on=["degeneracy"], quiet=True, lag_reads=0)
    background = run_replay(str(path), every=4, stop_on=["degeneracy"], quiet=True)
    decided = synchronous["stopped"]["step"]
    k = int(decided) // 12
    assert decided == 12 * k and synchronous["stopped"]["read_step"] == decided and synchronous["lag_reads"] == 0
    assert [r["step"] for r in synchronous["reads"]] == [12.0 * i for i in range(1, k + 1)]
    assert background["lag_reads"] == 1
    assert (background["stopped"]["read_step"], background["stopped"]["step"]) == (decided, 12.0 * (k + 1))
    assert [r["step"] for r in background["reads"]] == [12.0 * i for i in range(1, k + 2)]
    assert background["stopped"]["mode"] == synchronous["stopped"]["mode"] == "degeneracy"


def test_a_background_decision_at_the_last_read_before_the_end_stops_nothing(tmp_path):
    """The same log cut two rows after the synchronous stop (12 k + 6): the read at 12 k is the last every-4th one,
    so in the background its decision would be applied at the end of training: no stop, and the reads run to the
    end-of-training read at 12 k + 6."""
    history = [e for e in PLANTED["planted_stuck_at_zero"]["log_history"] if e["step"] % 3 == 0]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    decided = run_replay(str(path), every=4, stop_on=["degeneracy"], quiet=True, lag_reads=0)["stopped"]["step"]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps([e for e in history if e["step"] <= decided + 6]))
    # the run's planned length stays 300 (a stuck phase counts once it has lasted a tenth of it)
    assert run_replay(str(cut), every=4, stop_on=["degeneracy"], quiet=True, lag_reads=0,
                      total_steps=300)["stopped"]["step"] == decided
    background = run_replay(str(cut), every=4, stop_on=["degeneracy"], quiet=True, total_steps=300)
    assert background["stopped"] is None
    assert [r["step"] for r in background["reads"]][-2:] == [decided, decided + 6]


def test_replay_lag_reads_is_0_or_1():
    curves = curves_from_history(PLANTED["planted_stuck_at_zero"]["log_history"][:40])
    from pgrpo.stages.live import replay_curves

    with pytest.raises(InputError, match="lag_reads"):
        replay_curves(curves, LiveSettings(10), lag_reads=2)


# ---- the callback without a trainer: a read never raises ---------------------------------------------------------


class _State:
    def __init__(self, history, step=10, max_steps=100):
        self.log_history, self.global_step, self.max_steps, self.is_world_process_zero = history, step, max_steps, True


class _Control:
    should_save = should_training_stop = False


class _Args:
    learning_rate, adam_beta1, num_iterations, steps_per_generation = 1e-5, 0.9, 1, None
    gradient_accumulation_steps, per_device_train_batch_size, num_generations, max_completion_length = 4, 4, 4, 64
    output_dir = None


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


def test_the_page_shades_each_flagged_episode_on_the_reward_curve():
    """live.html draws the logged reward with each flagged mode's episodes shaded; an episode still on runs to the
    last step. Steps 0..100 across 720 units: steps 20-40 are x 144 to 288, steps 80 to the end x 576 to 720."""
    import re

    from pgrpo.live.page import curve_svg, episode_spans, live_html, reward_curve

    curve = reward_curve({"step": list(range(0, 101)), "reward": [0.5 + 0.001 * s for s in range(0, 101)]})
    payload = {"modes": {"degeneracy": {"flagged": True, "episodes": [{"start": 20, "end": 40}, {"start": 80,
                                                                                                  "end": None}]},
                         "truncation": {"flagged": False, "episodes": [{"start": 5, "end": 9}]}},
               "live": {"curve": curve}}
    assert episode_spans(payload) == [("degeneracy", 20.0, 40.0), ("degeneracy", 80.0, 100.0)]
    svg = curve_svg(payload)
    rects = re.findall(r"<rect class='episode' data-mode='(\w+)' x='([\d.]+)' y='0' width='([\d.]+)'", svg)
    assert rects == [("degeneracy", "144.0", "144.0"), ("degeneracy", "576.0", "144.0")]
    assert "truncation" not in svg  # not flagged: no span
    assert svg in live_html(payload)
    assert curve_svg({"modes": {}, "live": {}}) == ""  # no curve, no plot


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


def _two_function_history(acc_rises: bool, steps: int = 60) -> list[dict]:
    """A run that logs two reward functions, ``fmt`` rising to 1 by step ~30 and ``acc`` either still at its floor
    (a correctness reward that has not paid yet: 16 completions at a 2% success rate) or rising too, with fmt
    rising only to 0.5 so that the sum levels off at 1 either way."""
    rng = np.random.default_rng(4)
    history = []
    for step in range(1, steps + 1):
        if acc_rises:
            fmt = 0.5 * (1 - math.exp(-step / 8)) + rng.normal(0, 0.02)
            acc = 0.5 * (1 - math.exp(-step / 10)) + rng.normal(0, 0.02)
        else:
            fmt = 1 - math.exp(-step / 8) + rng.normal(0, 0.03)
            acc = rng.binomial(16, 0.02) / 16
        history.append({"step": step, "reward": fmt + acc, "rewards/fmt/mean": fmt, "rewards/acc/mean": acc,
                        "loss": 0.0})
    return history


def test_the_plateau_rule_reads_the_reward_functions_sum_and_keeps_a_silent_ones_headroom():
    """stop_if_plateau_below=1.5 on a run whose total reward levels off at 1 by step 30 of 200: when one reward
    function has not started to rise, its headroom (undeclared: the rise the other shows by the cut, ~1) lifts the
    summed plateau's upper 80% bound to about 1 + 1 = 2 (half of the draws rise), so the run is not stopped; when
    both have risen, none waits, and the rule reads the reward's own plateau and stops at the second forecast,
    saying which plateau it read. Without the rule no per-function forecast is made (it costs one forecast per function)."""
    from pgrpo.live.reads import curves_from_history, read_curves
    from pgrpo.stages.live import replay_curves

    settings = LiveSettings(every=10, stop_if_plateau_below=1.5, forecast_every=1)
    silent = curves_from_history(_two_function_history(acc_rises=False))
    replay = replay_curves(silent, settings, total_steps=200, lag_reads=0)
    assert replay["stopped"] is None
    last = replay["_last"]
    assert last.plateau["hi80"] < 1.5  # the total reward's own band would have stopped it
    summed = last.summed_plateau
    assert summed["hi80"] > 1.9 and summed["lo80"] < 1.15
    assert last.log_keys()["pgrpo/plateau_summed_hi80"] == summed["hi80"] == replay["reads"][-1]["plateau_summed"]["hi80"]
    assert "reward functions summed" in last.verdict_line() and "acc waits to rise" in last.verdict_line()

    both = curves_from_history(_two_function_history(acc_rises=True))
    stopped = replay_curves(both, settings, total_steps=200, lag_reads=0)["stopped"]
    assert stopped is not None and stopped["mode"] == PLATEAU_RULE and stopped["step"] == 20.0
    # no function waits: the rule reads the reward's own plateau, as pgrpo forecast --compare decides
    assert stopped["reason"].startswith("forecast plateau")

    report_only = read_curves(silent, LiveSettings(every=10), total_steps=200)
    assert report_only.summed_plateau is None and "components" not in report_only.forecast


def test_a_declared_function_range_sets_the_headroom_of_a_function_that_waits_to_rise(tmp_path):
    """The same silent run, with acc's range declared [0, 3] (``component_ranges``, as ``--component-range acc 0 3``):
    its headroom is its declared top less its level (~3 - 0.02), not the ~1 the risen function shows, so the summed
    plateau's upper 80% bound is about 1 + 3 = 4; ``pgrpo replay --component-range`` passes it, and a function the
    log does not have is an input error."""
    from pgrpo.live.reads import curves_from_history
    from pgrpo.stages.live import replay_curves, run_replay

    history = _two_function_history(acc_rises=False)
    settings = LiveSettings(every=10, stop_if_plateau_below=1.5, forecast_every=1, component_ranges={"acc": (0.0, 3.0)})
    last = replay_curves(curves_from_history(history), settings, total_steps=200, lag_reads=0)["_last"]
    assert 3.6 < last.summed_plateau["hi80"] < 4.2 and last.summed_plateau["lo80"] < 1.15
    log = tmp_path / "trainer_state.json"
    log.write_text(json.dumps({"log_history": history}))
    replayed = run_replay(str(log), every=10, stop_if_plateau_below=1.5, forecast_every=1, total_steps=200,
                          quiet=True, component_ranges={"acc": [0, 3]})
    assert replayed["reads"][-1]["plateau_summed"]["hi80"] == pytest.approx(last.summed_plateau["hi80"])
    with pytest.raises(InputError, match="--component-range names 'correct', not a reward function of the log"):
        run_replay(str(log), quiet=True, component_ranges={"correct": [0, 1]})
    declared = LiveSettings().with_component_ranges({"acc": [0, 3]})
    assert declared.component_ranges == {"acc": (0.0, 3.0)} and declared.reward_range is None
    assert declared.with_component_ranges({"acc": [0, 9]}).component_ranges == {"acc": (0.0, 3.0)}  # kept
    from pgrpo.live import DynamicsCallback

    assert DynamicsCallback(component_ranges={"acc": [0, 3]}, background=False).settings.component_ranges == {
        "acc": (0.0, 3.0)}
    with pytest.raises(InputError, match="live component_ranges 'acc': must be two finite numbers LO < HI"):
        DynamicsCallback(component_ranges={"acc": [3, 0]}, background=False)


def test_a_slow_start_at_the_floor_is_not_stopped_as_a_stuck_run():
    """A phase mode stops only once its ongoing phase has lasted ``min_episode_fraction`` (10%) of the planned run:
    zero-spread groups at the reward's floor flagged at the reads of steps 10 and 20 of a 250-step run (a phase from
    step 1, 19 steps long at the second read, under the 24.9 steps of a tenth) stop nothing; the same flags at 30
    and 40 (a phase of 39 steps) stop at 40. Instability, whose bursts are events, is not held back."""
    def read(step, mode="degeneracy", onset=1.0):
        verdict = {"flagged": True, "severity": "medium", "active": True, "onset_step": onset,
                   "episodes": [{"start": onset, "end": None}]}
        return LiveRead(step, diagnosis={"modes": {mode: verdict}}, total_steps=250.0, first_step=1.0)

    rules = StopRules(LiveSettings(stop_on=("degeneracy",)))
    assert rules.update(read(10.0)) is None and rules.update(read(20.0)) is None
    assert rules.update(read(30.0)) is None
    stopped = rules.update(read(40.0))
    assert stopped is not None and stopped.step == 40.0 and stopped.mode == "degeneracy"
    burst = StopRules(LiveSettings(stop_on=("instability",)))
    assert burst.update(read(10.0, "instability")) is None
    assert burst.update(read(20.0, "instability")).mode == "instability"
    unknown = StopRules(LiveSettings(stop_on=("degeneracy",)))  # no planned length: no hold
    plain = LiveRead(10.0, diagnosis={"modes": {"degeneracy": {"flagged": True, "severity": "medium",
                                                               "onset_step": 1.0}}})
    assert unknown.update(plain) is None and unknown.update(dataclasses.replace(plain, step=20.0)) is not None


def test_no_learning_and_regression_stop_only_where_the_forecast_does_not_expect_the_rise():
    """The two modes that claim a level the reward will not reach ask the forecast too: no_learning's flag counts
    toward a stop only while the plateau's upper 80% bound is at most the early level plus the rise the flag rules
    out (0.45 + 0.15 here; the net rise's detection threshold, 0.4, does not enter since session 26), regression's
    only while it is at most the peak minus the drop's threshold (0.8 - 0.1); a read with no forecast plateau counts
    as before, and a phase or mechanism mode is never asked."""
    def read(step, mode, hi80, numbers):
        verdict = {"flagged": True, "severity": "medium", "onset_step": 1.0, "verdict": "x", "active": True,
                   "numbers": numbers}
        forecast = {"plateau": {"mean": hi80, "lo80": hi80, "hi80": hi80}} if hi80 is not None else {}
        return LiveRead(float(step), {"modes": {mode: verdict}}, forecast)

    flat = {"early": 0.45, "late": 0.5, "trend_upper": 0.15, "net_threshold": 0.4}
    held = read(10, "no_learning", 0.61, flat)
    assert held.held_by_forecast == ["no_learning"] and held.to_dict()["held_by_forecast"] == ["no_learning"]
    assert "no_learning held from a stop" in held.verdict_line()
    assert "held_by_forecast" not in read(10, "no_learning", 0.6, flat).to_dict()
    rules = StopRules(LiveSettings(stop_on=("no_learning",)))
    assert rules.update(read(10, "no_learning", 0.61, flat)) is None  # the forecast allows a rise: no count
    assert rules.update(read(20, "no_learning", 0.60, flat)) is None  # at the threshold: counts (1)
    decision = rules.update(read(30, "no_learning", 0.55, flat))
    assert decision is not None and decision.step == 30.0 and "the forecast agrees" in decision.reason
    rules = StopRules(LiveSettings(stop_on=("no_learning",)))
    assert rules.update(read(10, "no_learning", None, flat)) is None
    assert rules.update(read(20, "no_learning", None, flat)) is not None  # no forecast: the flag stands
    fell = {"peak": 0.8, "drop_threshold": 0.1}
    rules = StopRules(LiveSettings(stop_on=("regression",)))
    assert rules.update(read(10, "regression", 0.71, fell)) is None
    assert rules.update(read(20, "regression", 0.75, fell)) is None  # a return to the peak not excluded
    assert rules.update(read(30, "regression", 0.69, fell)) is None
    assert rules.update(read(40, "regression", 0.70, fell)).mode == "regression"
    rules = StopRules(LiveSettings(stop_on=("degeneracy",)))
    assert rules.update(read(10, "degeneracy", 0.99, flat)) is None
    assert rules.update(read(20, "degeneracy", 0.99, flat)) is not None


def test_a_hacking_flag_read_off_the_gold_function_stops_nothing_before_three_tenths_of_the_run():
    """The hacking read-out with no eval column reads the gold reward function instead (``held_out`` in its
    numbers); early in a run that learns its format first that function has not started, so its flag counts toward
    no stop before 30% of the planned run: on a run planned from step 1 to 201 (200 steps, 60 of them the gate),
    flags at steps 20-60 stop nothing, those at 70 and 80 stop at 80 (the two reads at or after step 61). A flag
    read off a logged eval column, or with no planned length, stops at the second read as before."""
    def read(step, held_out=True, total=201.0):
        numbers = {"eval_column": "rewards/correctness/mean"} if held_out else {"eval_column": "eval_reward"}
        if held_out:
            numbers["held_out"] = "rewards/correctness/mean: the gold function, standing in for an eval column"
        verdict = {"flagged": True, "severity": "medium", "onset_step": 5.0, "verdict": "x", "active": True,
                   "numbers": numbers}
        return LiveRead(float(step), {"modes": {"hacking": verdict}}, {}, total_steps=total, first_step=1.0)

    assert GOLD_STAND_IN_SHARE == 0.3
    assert gold_still_early(read(60), "hacking") and not gold_still_early(read(61), "hacking")
    assert not gold_still_early(read(20, held_out=False), "hacking")
    assert not gold_still_early(read(20), "degeneracy")
    assert read(20).held_early == ["hacking"] and read(20).to_dict()["held_early"] == ["hacking"]
    assert "hacking held from a stop until 30% of the run" in read(20).verdict_line()
    assert read(61).held_early == [] and "held_early" not in read(61).to_dict()
    assert read(20, held_out=False).held_early == []
    rules = StopRules(LiveSettings(stop_on=("hacking",)))
    assert all(rules.update(read(step)) is None for step in (20, 30, 40, 50, 60, 70))
    decision = rules.update(read(80))
    assert decision is not None and (decision.step, decision.mode) == (80.0, "hacking")
    rules = StopRules(LiveSettings(stop_on=("hacking",)))
    assert rules.update(read(10, held_out=False)) is None
    assert rules.update(read(20, held_out=False)).mode == "hacking"  # an eval column: not held
    rules = StopRules(LiveSettings(stop_on=("hacking",)))
    assert rules.update(read(10, total=None)) is None
    assert rules.update(read(20, total=None)).mode == "hacking"  # no planned length: not held
    alerts = AlertRules(LiveSettings(), ["hacking"])  # an alert is the stop rule without the stop: held alike
    assert alerts.update(read(20)) == [] and alerts.update(read(30)) == []


def test_replay_json_names_the_flags_the_forecast_holds_back(tmp_path, repo_root):
    """A public GSM8K run whose correctness sits near 90% from the start and whose rise comes later
    (``dshah02_*``, dev, labelled healthy): ``no_learning`` is flagged at medium severity from step 80 while the
    forecast's band still reaches past the rise threshold, so ``stop_on=["no_learning"]`` does not stop it, and the
    replay's JSON names the held flag at each such read (every one of them flagged at that read)."""
    log = repo_root / "benchmarks" / "forecast" / "data" / "dshah02_qwen25_7b_gsm8k_skill_mi.json"
    result = run_replay(str(log), stop_on=("no_learning",), quiet=True)
    held = [r for r in result["reads"] if r.get("held_by_forecast")]
    assert held and result["stopped"] is None
    assert all(r["modes"]["no_learning"]["flagged"] for r in held)
    assert any(r["modes"]["no_learning"]["severity"] in ("medium", "high") for r in held)
