"""The live callback's reads and stop rules (pgrpo.live, issue 20): stop rules on hand-made reads (a mode stops at
its second consecutive read of at least medium severity; a phase is held until it has lasted a tenth of the run, a
hacking flag read off the gold function until three tenths, no_learning and regression while the forecast expects
the rise; the plateau rule on the reward functions' sum), Theorem 7's lines against the closed forms, and a read of
the whole history flagging what ``pgrpo diagnose`` flags."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from pgrpo.errors import InputError
from pgrpo.live.reads import (
    CONSECUTIVE_READS,
    GOLD_STAND_IN_SHARE,
    LiveRead,
    LiveSettings,
    configuration_theory,
    curves_from_history,
    gold_still_early,
    measured_theory,
    read_curves,
)
from pgrpo.live.stop_rules import PLATEAU_RULE, AlertRules, StopRules
from pgrpo.stages.diagnose import run_diagnose
from pgrpo.stages.live import run_replay
from tests._live_helpers import PLANTED


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


# ---- the plateau rule on the reward functions' sum --------------------------------------------------


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
