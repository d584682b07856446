"""Report-only alerts of the live monitor (issue 20: what a user expects of a monitor left running overnight): a mode
alerts once, at the read where ``stop_on=[mode]`` would have stopped the run, without stopping it; in the callback
(``on_alert``), ``pgrpo replay`` (``alerts``) and ``pgrpo watch`` (``--on-alert COMMAND``)."""

from __future__ import annotations

import json

import pytest

from pgrpo.diagnose.planted import SEED, planted_logs
from pgrpo.errors import InputError
from pgrpo.live.reads import LiveRead, LiveSettings
from pgrpo.live.stop_rules import AlertRules
from pgrpo.stages.live import run_replay, run_watch
from tests._live_helpers import _Args, _Control, _State, watch_cli, write_formats

PLANTED = planted_logs(SEED)


def read_with(step, **modes):
    """A read whose modes are ``mode=(flagged, severity)``."""
    return LiveRead(float(step), {"modes": {m: {"flagged": f, "onset_step": 5.0 if f else None,
                                                "severity": s if f else None, "verdict": "v"}
                                            for m, (f, s) in modes.items()}}, {})


def test_a_mode_alerts_once_at_its_second_consecutive_read_of_at_least_medium_severity():
    rules = AlertRules(LiveSettings())
    assert rules.update(read_with(10, degeneracy=(True, "medium"), no_learning=(True, "low"))) == []
    second = rules.update(read_with(20, degeneracy=(True, "high"), no_learning=(True, "low")))
    assert [(a.mode, a.step, a.onset_step) for a in second] == [("degeneracy", 20.0, 5.0)]
    # once: flagged again it does not alert again; a low severity never alerts
    assert rules.update(read_with(30, degeneracy=(True, "high"), no_learning=(True, "low"))) == []
    assert [a.mode for a in rules.alerted] == ["degeneracy"]


def test_alerts_never_touch_the_stop_rules_settings_and_alert_on_restricts_the_modes():
    settings = LiveSettings(stop_on=("degeneracy",), stop_if_plateau_below=0.5)
    rules = AlertRules(settings, ["instability"])
    for step in (10, 20, 30):
        assert rules.update(read_with(step, degeneracy=(True, "high"), instability=(False, None))) == []
    assert settings.stop_on == ("degeneracy",)


def test_an_unknown_alert_mode_is_named():
    with pytest.raises(InputError, match="alert_on: unknown mode.*hackign"):
        AlertRules(LiveSettings(), ["hackign"])


def test_replay_alerts_where_the_synchronous_stop_rule_would_stop_and_never_on_a_healthy_run(tmp_path):
    stuck = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"], tmp_path / "stuck")
    result = run_replay(str(stuck["trainer_state"]), every=10, quiet=True)
    assert result["stopped"] is None  # report only
    alerts = {a["mode"]: a for a in result["alerts"]}
    stop = run_replay(str(stuck["trainer_state"]), every=10, stop_on=["degeneracy"], quiet=True, lag_reads=0)
    assert alerts["degeneracy"]["read_step"] == stop["stopped"]["read_step"]
    # the planted run is stuck from step 1 of 300: the alert comes within the first fifth of the run
    assert alerts["degeneracy"]["read_step"] <= 60
    healthy = write_formats(PLANTED["planted_healthy"]["log_history"], tmp_path / "healthy")
    assert run_replay(str(healthy["trainer_state"]), every=10, quiet=True)["alerts"] == []


def test_watch_runs_on_alert_once_per_mode_and_goes_on(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    marker = tmp_path / "alerts.txt"
    done = watch_cli(paths["wandb_csv"], "--once", "--out", tmp_path / "w", "--alert-on", "degeneracy",
                     "--on-alert", f'echo "$PGRPO_ALERT_MODE $PGRPO_ALERT_READ_STEP $PGRPO_LIVE_JSON" >> {marker}')
    assert done.returncode == 0, done.stderr  # an alert stops nothing
    lines = marker.read_text().splitlines()
    assert len(lines) == 1
    mode, read_step, live_json = lines[0].split()
    assert mode == "degeneracy" and float(read_step) in {10.0 * i for i in range(1, 11)}
    assert json.loads(open(live_json).read())["modes"]["degeneracy"]["flagged"] is True
    assert f"pgrpo watch: alert at step {float(read_step):g}" in done.stdout


def test_watch_without_on_alert_or_alert_on_makes_no_scheduled_reads(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:60], tmp_path)
    outcome = run_watch(str(paths["bare"]), once=True, out_dir=str(tmp_path / "w"))
    assert len(outcome.reads) == 1 and outcome.stopped is None


def test_the_callback_calls_on_alert_and_an_alert_hook_that_raises_is_one_warning(tmp_path, capsys):
    """The callback's reads (synchronous) over a planted stuck run's history as it grows: ``on_alert`` gets the
    degeneracy alert once; a hook that raises is a warning line and the run goes on, unstopped."""
    pytest.importorskip("transformers")
    from pgrpo.live import DynamicsCallback

    history = [e for e in PLANTED["planted_stuck_at_zero"]["log_history"] if e["step"] <= 80]
    got, calls = [], []

    def broken(record):
        calls.append(record)
        raise RuntimeError("no network")

    for hook in (got.append, broken):
        callback = DynamicsCallback(every=10, output_dir=str(tmp_path), background=False, forecast_every=0,
                                    on_alert=hook, alert_on=["degeneracy"])
        args, control = _Args(), _Control()
        state = _State([], step=0, max_steps=300)
        callback.on_train_begin(args, state, control)
        for entry in history:
            state.log_history.append(dict(entry))
            state.global_step = int(entry["step"])
            callback.on_log(args, state, control, logs=dict(entry))
        assert not control.should_training_stop
        callback.close()
    assert [a["mode"] for a in got] == ["degeneracy"] and got[0]["read_step"] <= 60
    assert len(calls) == 1 and any("on_alert failed: RuntimeError: no network" in w for w in callback.warnings)
    assert "pgrpo live: alert at step" in capsys.readouterr().err


def test_the_workflows_alert_command_gets_the_alert_in_its_environment(tmp_path):
    """``training.live.on_alert`` (:func:`pgrpo.live.hooks.command_on_alert`) on an alert record of the callback; a
    command that fails is an exit status, never an exception."""
    from pgrpo.live.hooks import command_on_alert

    marker = tmp_path / "alert.txt"
    hook = command_on_alert(f'echo "$PGRPO_ALERT_MODE|$PGRPO_ALERT_READ_STEP|$PGRPO_ALERT_ONSET_STEP|'
                            f'$PGRPO_ALERT_SEVERITY|$PGRPO_LIVE_JSON" > {marker}', tmp_path / "pgrpo" / "live.json")
    record = {"mode": "degeneracy", "read_step": 50.0, "step": 50.0, "onset_step": None, "severity": "medium",
              "reason": "degeneracy flagged (medium) at 2 consecutive read(s): stuck"}
    assert hook(record) == 0
    assert marker.read_text().strip() == f"degeneracy|50||medium|{tmp_path / 'pgrpo' / 'live.json'}"
    assert command_on_alert("exit 7", "live.json")(record) == 7


def _feed(callback, args, state, control, entries):
    for entry in entries:
        state.log_history.append(dict(entry))
        state.global_step = int(entry["step"])
        callback.on_log(args, state, control, logs=dict(entry))


def test_a_resumed_run_keeps_its_alerts_and_its_read_cadence(tmp_path):
    """A run requeued after a time limit: the trainer restores ``state.log_history`` before ``on_train_begin``. The
    new callback reads the alerts of the earlier process back from ``live.json`` (up to the resumed step) and does
    not tell them again; its reads keep the uninterrupted run's cadence (the 9th read after 90 logged rewards, not
    a first read 10 logs after the resume). Resumed from a checkpoint before the alert, the alert is told again."""
    pytest.importorskip("transformers")
    from pgrpo.live import DynamicsCallback

    history = [e for e in PLANTED["planted_stuck_at_zero"]["log_history"] if e["step"] <= 150]
    first_part = [e for e in history if e["step"] <= 80]
    got = []
    callback = DynamicsCallback(every=10, output_dir=str(tmp_path), background=False, forecast_every=0,
                                on_alert=got.append, alert_on=["degeneracy"])
    args, control = _Args(), _Control()
    state = _State([], step=0, max_steps=300)
    callback.on_train_begin(args, state, control)
    _feed(callback, args, state, control, first_part)
    callback.close()
    assert [a["mode"] for a in got] == ["degeneracy"]
    alert_step = got[0]["read_step"]
    live = json.loads((tmp_path / "pgrpo" / "live.json").read_text())
    assert [(a["mode"], a["read_step"]) for a in live["live"]["alerts"]] == [("degeneracy", alert_step)]

    for resumed_at, told_again in ((80, False), (int(alert_step) - 10, True)):
        again = []
        resumed = DynamicsCallback(every=10, output_dir=str(tmp_path), background=False, forecast_every=0,
                                   on_alert=again.append, alert_on=["degeneracy"])
        state = _State([dict(e) for e in history if e["step"] <= resumed_at], step=resumed_at, max_steps=300)
        resumed.on_train_begin(args, state, control)
        _feed(resumed, args, state, control, [e for e in history if e["step"] > resumed_at])
        resumed.close()
        assert bool(again) is told_again, resumed_at
        assert [a["mode"] for a in resumed.alerts] == ["degeneracy"]  # kept or told anew: once either way
        assert resumed.reads[0].step == float(resumed_at // 10 * 10 + 10)  # the cadence of the whole run
        # each resume starts again from the alert-free live.json of the earlier process
        (tmp_path / "pgrpo" / "live.json").write_text(json.dumps(live))


def test_a_restarted_watch_does_not_tell_an_alert_again(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    marker = tmp_path / "alerts.txt"
    for _ in range(2):
        done = watch_cli(paths["wandb_csv"], "--once", "--out", tmp_path / "w", "--alert-on", "degeneracy",
                         "--on-alert", f'echo "$PGRPO_ALERT_MODE" >> {marker}')
        assert done.returncode == 0, done.stderr
    assert marker.read_text().splitlines() == ["degeneracy"]
    live = json.loads((tmp_path / "w" / "live.json").read_text())
    assert [a["mode"] for a in live["live"]["alerts"]] == ["degeneracy"]
    assert "Alerts" in (tmp_path / "w" / "live.html").read_text()
    # a watch of another log writing to the same folder does not inherit them
    other = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path / "other")
    done = watch_cli(other["wandb_csv"], "--once", "--out", tmp_path / "w", "--alert-on", "degeneracy",
                     "--on-alert", f'echo "$PGRPO_ALERT_MODE" >> {marker}')
    assert marker.read_text().splitlines() == ["degeneracy", "degeneracy"]
