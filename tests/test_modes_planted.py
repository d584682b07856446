"""The seven failure modes of ``pgrpo diagnose`` (pgrpo.diagnose.modes) on the planted logs, the look-alikes told
apart, and the toolkit's rule set.

Each mode fires on a log built to show it (the planted logs of pgrpo.diagnose.planted, simulated from GRPO's
mechanics with a fixed seed, and small hand-built logs) and stays silent on the others and on healthy logs; its
``onset_step`` lands within ``max(10% of the step span, 2 logging intervals)`` of the planted onset. The pairs a
practitioner confuses are told apart: degeneracy vs saturation, entropy collapse vs explosion vs benign sharpening,
no learning vs learning, regression vs a noisy plateau; a capped or pinned length, a short length collapse and a
silent reward function are read too. Instability (recurring spikes vs an isolated one) and hacking have their own
files, tests/test_modes_instability.py and tests/test_modes_hacking.py; the CLI and the outputs
tests/test_modes_outputs.py.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pgrpo.diagnose.modes.record import MODES
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import diagnostics_config
from tests import _modes_helpers
from tests._modes_helpers import CASES, diagnose, write_log

planted_reports = _modes_helpers.planted_reports  # the module-scoped fixture (a fixture is found by its name here)


def tolerance(report) -> float:
    data = report.to_dict()
    span = data["last_step"] - data["first_step"]
    return max(0.1 * span, 2 * span / max(data["n_steps"] - 1, 1))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_planted_mode_is_flagged_exactly_where_planted(planted_reports, name):
    report = planted_reports[name]
    modes = report.to_dict()["modes"]
    for mode in MODES:
        truth = CASES[name]["labels"][mode]
        if truth["label"] is None:
            continue
        got = modes[mode]
        assert bool(got["flagged"]) == truth["label"], (mode, got["verdict"], got["reason"])
        if truth["label"] and truth["onset_step"] is not None:
            assert abs(got["onset_step"] - truth["onset_step"]) <= tolerance(report), (mode, got["onset_step"])
    summary = report.to_dict()["summary"]
    planted = [m for m in MODES if CASES[name]["labels"][m]["label"]]
    assert summary["healthy"] == (not planted)
    assert set(summary["flagged"]) == set(planted)


def test_modes_record_is_machine_readable(planted_reports):
    data = planted_reports["planted_regression_at_cap"].to_dict()
    assert list(data["modes"]) == list(MODES)
    for mode in data["modes"].values():
        assert set(mode) >= {"flagged", "onset_step", "severity", "verdict", "reason", "numbers", "thresholds"}
        assert mode["flagged"] in (True, False, None)
        assert (mode["severity"] in ("low", "medium", "high")) == bool(mode["flagged"])
    regression = data["modes"]["regression"]
    assert regression["numbers"]["peak_step"] == pytest.approx(150, abs=30)
    assert regression["thresholds"]["min_drop_fraction"] == 0.3
    assert data["summary"]["first_step_to_look_at"] == min(data["modes"][m]["onset_step"]
                                                           for m in data["summary"]["flagged"])
    json.dumps(data)  # plain data throughout


# ---------------------------------------------------------------------------------------------- the look-alikes


def test_degeneracy_is_told_from_saturation(planted_reports):
    solved = planted_reports["planted_healthy_saturated_g2"].to_dict()["modes"]["degeneracy"]
    stuck = planted_reports["planted_stuck_at_zero"].to_dict()["modes"]["degeneracy"]
    assert solved["numbers"]["late_share"] > 0.6 and stuck["numbers"]["late_share"] > 0.9
    assert solved["flagged"] is False and solved["verdict"].startswith("saturation")
    assert stuck["flagged"] is True and stuck["verdict"].startswith("stuck")


def test_reward_range_decides_when_the_reward_never_moved(tmp_path):
    rng = np.random.default_rng(0)
    history = [{"step": s, "reward": 1.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0 - 0.02 * rng.random()}
               for s in range(1, 101)]
    path = write_log(tmp_path, "flat_at_one", history)
    assert diagnose(path).to_dict()["modes"]["degeneracy"]["flagged"] is True  # no range: nothing to learn from
    solved = diagnose(path, reward_range=[0.0, 1.0]).to_dict()["modes"]["degeneracy"]
    assert solved["flagged"] is False and solved["verdict"].startswith("saturation")


def test_a_reward_function_that_scores_every_completion_alike_is_named_silent(tmp_path):
    """Four reward functions over 120 steps: ``regex`` is 0 with s.d. 0 at every step (silent: it cancels in every
    group's advantage); ``half`` averages exactly 0.5 at every step but with s.d. 0.5 (half the completions pay: not
    silent); ``task`` rises; ``judge`` is constant 1 but logged only at 5 steps (too few points to say). The run is
    not flagged for it, and the page names ``regex`` alone."""
    rng = np.random.default_rng(3)
    history = []
    for s in range(1, 121):
        task = min(1.0, s / 60) * 0.8 + rng.normal(0, 0.03)
        row = {"step": s, "reward": task + 0.5, "reward_std": 0.3, "frac_reward_zero_std": 0.1,
               "rewards/regex/mean": 0.0, "rewards/regex/std": 0.0, "rewards/half/mean": 0.5,
               "rewards/half/std": 0.5, "rewards/task/mean": task}
        if s % 24 == 0:
            row["rewards/judge/mean"] = 1.0
        history.append(row)
    report = diagnose(write_log(tmp_path, "silent", history)).to_dict()
    verdict = report["modes"]["degeneracy"]
    assert verdict["flagged"] is False
    assert verdict["numbers"]["silent_functions"] == [
        {"function": "regex", "value": 0.0, "points": 120, "first_step": 1.0, "last_step": 120.0}]
    assert "silent reward functions (every completion scored alike at every logged step): regex" in verdict["reason"]
    from pgrpo.tables.diagnosis import summary_markdown

    page = summary_markdown(report)
    assert "- silent reward function: regex (0 at all 120 logged steps)" in page and "half (" not in page
    from pgrpo.live.page import live_html

    assert "<p>silent reward function: regex (0 at all 120 logged steps)" in live_html(report)


def test_concentration_both_ways_and_benign_sharpening(planted_reports):
    collapse = planted_reports["planted_entropy_collapse_early"].to_dict()["modes"]["concentration"]
    explosion = planted_reports["planted_entropy_explosion"].to_dict()["modes"]["concentration"]
    benign = planted_reports["planted_entropy_drop_after_saturation"].to_dict()["modes"]["concentration"]
    assert collapse["flagged"] and collapse["numbers"]["direction"] == "collapse"
    assert explosion["flagged"] and explosion["numbers"]["direction"] == "explosion"
    assert explosion["numbers"]["entropy_ratio"] > 10
    assert benign["flagged"] is False and "after saturation" in benign["verdict"]
    assert benign["numbers"]["entropy_ratio"] < 0.5  # it did fall by more than half


def test_no_learning_says_how_the_noise_is_estimated(planted_reports):
    flat = planted_reports["planted_no_learning_400"].to_dict()["modes"]["no_learning"]
    assert flat["flagged"] and "first differences" in flat["reason"] and "forecast plateau" in flat["reason"]
    numbers = flat["numbers"]
    assert abs(numbers["net_rise"]) < numbers["net_threshold"]
    # the batch mean of 16 prompts x 8 binary completions: its s.d. is estimated, not assumed
    assert 0.02 < numbers["noise_sd"] < 0.2
    learning = planted_reports["planted_healthy"].to_dict()["modes"]["no_learning"]
    assert learning["flagged"] is False and learning["numbers"]["net_rise"] > learning["numbers"]["net_threshold"]


@pytest.mark.parametrize("n, expected_power", [(10, 0.6135), (40, 1.1380), (120, 1.9384), (600, 4.3057)])
def test_no_learning_severity_is_bounded_by_the_rise_the_run_has_ruled_out(n, expected_power):
    """A flat reward logged every step with noise mirrored about the middle (x_i = x_(n+1-i)), so the least-squares
    line is exactly flat. The line's rise over the span then has s.e. sd (n - 1) / sqrt(n (n^2 - 1) / 12), and the
    one-sided 95% upper bound on it is 1.645 times that: the power margin (one point's noise s.d. over that bound)
    is 1 / (1.645 sqrt(12 (n - 1) / (n (n + 1)))) (0.61, 1.14, 1.94, 4.31 at n = 10, 40, 120, 600), whatever the
    noise's scale. The flag's severity is at most what that margin allows (cuts 1.5 and 3): at 10 points, low,
    however clear the evidence."""
    from pgrpo.diagnose.modes.record import severity_of
    from pgrpo.diagnose.readouts.report import diagnose_curves

    half = np.random.default_rng(7).normal(0, 0.05, n // 2)
    steps = np.arange(1, n + 1)
    frame = pd.DataFrame({"step": steps, "reward": 0.4 + np.concatenate([half, half[::-1]])})
    verdict = diagnose_curves(RunCurves("m", None, frame, "hand"), diagnostics_config(None)).verdicts.modes[
        "no_learning"]
    numbers = verdict.numbers
    assert verdict.flagged is True and numbers["trend_rise"] == pytest.approx(0.0, abs=1e-12)
    assert numbers["trend_upper"] == pytest.approx(1.645 * numbers["se_trend"], rel=1e-9)
    assert numbers["power_margin"] == pytest.approx(expected_power, abs=1e-4)
    assert numbers["margin"] == pytest.approx(min(expected_power, numbers["evidence_margin"]), abs=1e-4)
    assert verdict.severity == severity_of(min(expected_power, numbers["evidence_margin"]))
    if n == 10:
        assert verdict.severity == "low" and numbers["evidence_margin"] > 1.5  # clear evidence, too little data
    assert "excluded" in verdict.reason


def test_a_reward_that_starts_at_the_top_of_its_declared_range_is_saturated_not_stuck():
    """A run solved from its first step (every completion right, the reward at 2.0 of a declared [-2, 2], a little
    noise): it cannot rise, so no_learning does not flag it once the range is declared (its headroom, 2.0 - 1.995,
    is under the net rise's threshold), and degeneracy reads its tied groups as saturation. Undeclared, the top is
    not known and the same log reads as not learning."""
    from pgrpo.diagnose.readouts.report import diagnose_curves

    n = 120
    wobble = 0.01 * (np.arange(n) % 2)
    frame = pd.DataFrame({"step": np.arange(1, n + 1), "reward": 2.0 - wobble, "reward_std": wobble,
                          "frac_reward_zero_std": np.where(wobble > 0, 0.9, 1.0)})
    curves = RunCurves("m", None, frame, "hand")
    declared = diagnose_curves(curves, diagnostics_config({"modes": {"reward_range": [-2, 2]}})).verdicts.modes
    assert declared["no_learning"].flagged is False and "no headroom" in declared["no_learning"].verdict
    assert declared["no_learning"].numbers["headroom"] == pytest.approx(2.0 - np.mean(frame["reward"][:12]),
                                                                       abs=0.006)
    assert declared["degeneracy"].flagged is False
    undeclared = diagnose_curves(curves, diagnostics_config(None)).verdicts.modes
    assert undeclared["no_learning"].flagged is True
    # degeneracy, undeclared, cannot place a reward that never moved, and says how to tell
    assert undeclared["degeneracy"].flagged is True and "--reward-range" in undeclared["degeneracy"].reason


def test_regression_is_told_from_a_noisy_plateau(tmp_path):
    rng = np.random.default_rng(1)
    steps = np.arange(1, 301)
    plateau = 0.8 - 0.6 * np.exp(-steps / 30) + rng.normal(0, 0.05, steps.size)
    fall = np.where(steps < 200, plateau, 0.8 - 0.5 * (1 - np.exp(-(steps - 200) / 10)) + rng.normal(0, 0.05,
                                                                                                        steps.size))
    for name, reward, expected in (("plateau", plateau, False), ("fall", fall, True)):
        path = write_log(tmp_path, name, [{"step": int(s), "reward": float(r)} for s, r in zip(steps, reward)])
        verdict = diagnose(path).to_dict()["modes"]["regression"]
        assert verdict["flagged"] is expected, verdict["reason"]
    assert verdict["onset_step"] == pytest.approx(200, abs=30)


def test_a_reward_function_that_regresses_is_named(tmp_path):
    rng = np.random.default_rng(2)
    history = []
    for s in range(1, 201):
        fmt = s / 200 + rng.normal(0, 0.02)  # keeps climbing: the total does not fall
        task = (0.6 if s < 120 else 0.3) * min(1.0, s / 60) + rng.normal(0, 0.03)
        history.append({"step": s, "rewards/format/mean": fmt, "rewards/task/mean": task})
    verdict = diagnose(write_log(tmp_path, "parts", history)).to_dict()["modes"]["regression"]
    assert verdict["flagged"] and verdict["numbers"]["regressed_column"] == "rewards/task/mean"


def test_truncation_from_the_clipped_ratio_the_cap_or_a_pinned_length(tmp_path, planted_reports):
    assert planted_reports["planted_truncation_only"].to_dict()["modes"]["truncation"]["numbers"]["source"] == \
        "completions/clipped_ratio"
    steps = range(1, 101)
    rng = np.random.default_rng(3)
    lengths = [{"step": s, "reward": 0.5, "completion_length": float(min(256, rng.normal(243, 8)))} for s in steps]
    path = write_log(tmp_path, "near_cap", lengths)
    assert diagnose(path).to_dict()["modes"]["truncation"]["flagged"] is None  # no cap known, not pinned
    assert diagnose(path, {"max_completion_length": 256}).to_dict()["modes"]["truncation"]["flagged"] is True
    assert diagnose(path, truncation={"max_completion_length": 1024}).to_dict()["modes"]["truncation"]["flagged"] is False
    pinned = write_log(tmp_path, "pinned", [{"step": s, "reward": 0.5,
                                             "completions/mean_length": 200.0 if s > 30 else 120.0 + s}
                                            for s in steps])
    verdict = diagnose(pinned).to_dict()["modes"]["truncation"]
    assert verdict["flagged"] and "pinned" in verdict["verdict"] and verdict["onset_step"] == pytest.approx(31, abs=10)


@pytest.mark.parametrize("tokens, expected", [(3.0, True), (0.0, True), (110.0, False)])
def test_a_short_length_collapse_counts_by_its_depth(tmp_path, tokens, expected):
    """A collapse that resolved, 3 of 40 logged points long (under ``min_episode_fraction`` = 10% of the points)
    with the reward falling: down to a few tokens it is flagged (each point weighted by its depth, up to 1 /
    length_drop = 2.5), just under the threshold (60% of 200 tokens) it is a transient."""
    rows = []
    for i, s in enumerate(range(5, 205, 5)):
        down = 4 <= i <= 6
        rows.append({"step": s, "reward": 0.2 if down else 0.8 + 0.002 * i, "reward_std": 0.3,
                     "frac_reward_zero_std": 0.1, "grad_norm": 1.0,
                     "completions/mean_length": tokens if down else 200.0 + (i % 3)})
    verdict = diagnose(write_log(tmp_path, f"short_collapse_{tokens:g}", rows)).to_dict()["modes"]["length_collapse"]
    assert verdict["flagged"] is expected
    if expected:
        assert verdict["onset_step"] == pytest.approx(25, abs=10)


# --------------------------------------------------------------------------------------------- the toolkit's rules


def test_toolkit_rules_fire_on_their_own_conditions(tmp_path):
    n = 80
    history = [{"step": s, "reward": 0.5, "reward_std": 0.005, "entropy": 1.0 if s <= 30 else 0.3,
                "kl": 0.5 if s == 50 else 0.01, "completions/mean_length": 100.0 if s <= 30 else 200.0,
                "clip_ratio/region_mean": 0.3, "grad_norm": 1.0 if s < n else 20.0} for s in range(1, n + 1)]
    data = diagnose(write_log(tmp_path, "toolkit", history), rule_set="toolkit").to_dict()
    assert data["rule_set"] == "toolkit"
    modes = data["modes"]
    assert modes["degeneracy"]["verdict"] == "grpo_reward_collapse"
    assert modes["concentration"]["verdict"] == "grpo_entropy_drop"
    assert modes["hacking"]["verdict"] == "grpo_length_drift"
    assert set(modes["instability"]["numbers"]["rules_fired"]) == {"grpo_kl_divergence", "grpo_clip_ratio_high",
                                                                   "gradient_explosion"}
    assert modes["instability"]["onset_step"] == 50
    for mode in ("no_learning", "regression", "truncation"):
        assert modes[mode]["flagged"] is None and "not covered" in modes[mode]["reason"]


def test_toolkit_takes_saturation_for_collapse_and_sharpening_for_failure(planted_reports, tmp_path):
    case = CASES["planted_entropy_drop_after_saturation"]
    data = diagnose(write_log(tmp_path, "benign", case["log_history"]), case["meta"], rule_set="toolkit").to_dict()
    assert data["modes"]["concentration"]["flagged"] is True  # ours: not flagged (after saturation)
    assert planted_reports["planted_entropy_drop_after_saturation"].to_dict()["modes"]["concentration"]["flagged"] \
        is False
