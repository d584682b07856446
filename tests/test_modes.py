"""The seven failure modes of ``pgrpo diagnose`` (pgrpo.diagnose.modes) and the toolkit's rule set.

Each mode fires on a log built to show it (the planted logs of pgrpo.diagnose.planted, simulated from GRPO's
mechanics with a fixed seed, and small hand-built logs) and stays silent on the others and on healthy logs; its
``onset_step`` lands within ``max(10% of the step span, 2 logging intervals)`` of the planted onset. The pairs a
practitioner confuses are told apart: degeneracy vs saturation, entropy collapse vs explosion vs benign sharpening,
no learning vs learning, regression vs a noisy plateau, recurring spikes vs an isolated one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pgrpo.cli import main
from pgrpo.diagnose.modes.record import MODES
from pgrpo.diagnose.planted import SEED, planted_logs
from pgrpo.diagnose.readouts.hacking import gold_column
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import RewardHackingConfig, diagnostics_config
from pgrpo.errors import InputError
from pgrpo.stages.diagnose import diagnose_log, run_diagnose, run_diagnostics



CASES = planted_logs(SEED)


def write_log(tmp_path: Path, name: str, history, **extra) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"log_history": history, **extra}))
    return path


def diagnose(path: Path, meta=None, **modes):
    config = diagnostics_config({"modes": modes} if modes else None)
    return diagnose_log(str(path), meta=meta, config=config)


@pytest.fixture(scope="module")
def planted_reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    return {name: diagnose(write_log(folder, name, case["log_history"]), case["meta"])
            for name, case in CASES.items()}


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


def _mostly_solved_kl(blowups: tuple[int, ...] = ()) -> pd.DataFrame:
    """A run whose prompts are mostly solved: four steps in five have every group tied (``frac_reward_zero_std`` 1)
    and a KL of ~1e-5 nats; every fifth step has spread and a KL of ~0.2; ``blowups``: steps with spread whose KL is
    5 nats (25x their like)."""
    rng = np.random.default_rng(5)
    steps = np.arange(1, 151)
    spread = steps % 5 == 0
    kl = np.where(spread, 0.2 + 0.02 * rng.standard_normal(steps.size), 1e-5 * (1 + rng.random(steps.size)))
    kl[np.isin(steps, blowups)] = 5.0
    return pd.DataFrame({"step": steps, "reward": 0.9 + 0.01 * rng.standard_normal(steps.size),
                         "frac_reward_zero_std": np.where(spread, 0.4, 1.0), "kl": kl})


@pytest.mark.parametrize("blowups, unstable", [((), False), ((40, 80, 120), True)])
def test_kl_spikes_are_read_against_the_steps_whose_groups_had_spread(blowups, unstable):
    """The tied steps' KL (~1e-5) is not the level of the steps still learning (~0.2): against it every fifth step
    would be a 'spike' (0.2 > 10 x 1e-5 and 0.1 nats above), recurring, so the run would read as unstable. Against the
    KL of the steps with spread, only the three 5-nat blow-ups (25x) are spikes, and they recur."""
    from pgrpo.diagnose.readouts.report import diagnose_curves

    curves = RunCurves("m", None, _mostly_solved_kl(blowups), "hand")
    verdict = diagnose_curves(curves, diagnostics_config(None)).verdicts.modes["instability"]
    assert verdict.flagged is unstable
    assert verdict.numbers["kl"]["n_spikes"] == len(blowups)
    if unstable:
        assert verdict.numbers["kl"]["spike_steps"] == [40.0, 80.0, 120.0]


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


def test_instability_recurring_spikes_vs_an_isolated_one(planted_reports):
    burst = planted_reports["planted_grad_spikes"].to_dict()["modes"]["instability"]
    isolated = planted_reports["planted_isolated_spike"].to_dict()["modes"]["instability"]
    crash = planted_reports["planted_kl_spike_crash"].to_dict()["modes"]["instability"]
    assert burst["flagged"] and "grad_norm spikes" in burst["verdict"]
    assert isolated["flagged"] is False and isolated["verdict"] == "approaching threshold"
    assert crash["flagged"] and "KL spikes" in crash["verdict"] and crash["onset_step"] == 200
    assert planted_reports["planted_kl_high_benign"].to_dict()["modes"]["instability"]["flagged"] is False


def _base(n=100, **columns):
    rows = []
    for s in range(1, n + 1):
        row = {"step": s, "reward": 0.3 + 0.4 * s / n, "reward_std": 0.4, "frac_reward_zero_std": 0.1,
               "grad_norm": 1.0}
        row.update({k: (v(s) if callable(v) else v) for k, v in columns.items()})
        rows.append(row)
    return rows


@pytest.mark.parametrize("spike_steps, expected", [
    ((60, 140, 230), True),  # three KL spikes 80-90 logged points apart: no burst of 3 within 20, yet they recur
    ((60, 230), False),  # two: isolated spikes without effect
    ((60, 66, 72), True),  # a burst
])
def test_kl_spikes_that_recur_over_the_run_are_unstable_however_far_apart(tmp_path, spike_steps, expected):
    """The label definition (spikes >= ~10x their typical level that recur): ``spikes_unstable`` (3) spikes over the
    run, however far apart, flag instability with the onset at the first; two do not. The reward keeps rising, so
    no spike has a crash after it."""
    history = _base(300, kl=lambda s: 500.0 if s in spike_steps else 0.02 + 0.0001 * (s % 7))
    verdict = diagnose(write_log(tmp_path, f"kl_{len(spike_steps)}_{spike_steps[1]}", history)).to_dict()[
        "modes"]["instability"]
    assert verdict["flagged"] is expected
    if expected:
        assert "KL spikes" in verdict["verdict"] and verdict["onset_step"] == spike_steps[0]
    else:
        assert verdict["verdict"] == "approaching threshold"


def test_instability_reads_the_is_ratio_on_both_sides_and_prop9(tmp_path):
    high = write_log(tmp_path, "is_high", _base(**{"sampling/importance_sampling_ratio/max": lambda s: 1.2 if s < 40
                                                   else 40.0}))
    low = write_log(tmp_path, "is_low", _base(**{"sampling/importance_sampling_ratio/mean": lambda s: 1.0 if s < 40
                                                 else 0.2}))
    fine = write_log(tmp_path, "is_fine", _base(**{"sampling/importance_sampling_ratio/max": 1.3,
                                                  "sampling/importance_sampling_ratio/mean": 1.0}))
    for path, expected, kind in ((high, True, "high side"), (low, True, "low side"), (fine, False, "")):
        verdict = diagnose(path).to_dict()["modes"]["instability"]
        assert verdict["flagged"] is expected and kind in verdict["verdict"]
    assert diagnose(high).to_dict()["modes"]["instability"]["onset_step"] == pytest.approx(40, abs=10)
    beyond = diagnose(fine, {"eta": 1.0, "mu": 0.9, "k_ref": 1.0, "K": 0.5}).to_dict()["modes"]["instability"]
    assert beyond["flagged"] and "Prop. 9" in beyond["verdict"]
    assert beyond["numbers"]["prop9"]["threshold_ratio"] == pytest.approx(5.0)


def test_vanishing_updates_and_nan_divergence(tmp_path):
    stuck = write_log(tmp_path, "stopped", _base(reward=0.0, reward_std=0.0, frac_reward_zero_std=1.0,
                                                 grad_norm=lambda s: 0.5 if s < 30 else 0.0))
    verdict = diagnose(stuck).to_dict()["modes"]["instability"]
    assert verdict["flagged"] and "vanishing" in verdict["verdict"]
    text = json.dumps({"log_history": _base(grad_norm=lambda s: float("nan") if s >= 60 else 1.0)})
    diverged = tmp_path / "diverged.json"
    diverged.write_text(text)
    with pytest.raises(InputError, match=r"'grad_norm' is NaN or infinite at step 60.*--allow-nan"):
        diagnose(diverged)
    report = run_diagnose(str(diverged), allow_non_finite=True)
    verdict = report.to_dict()["modes"]["instability"]
    assert verdict["flagged"] and verdict["onset_step"] == 60 and "divergence" in verdict["verdict"]


def test_hacking_needs_an_eval_curve(planted_reports):
    assert planted_reports["planted_healthy"].to_dict()["modes"]["hacking"]["flagged"] is None
    assert "held-out" in planted_reports["planted_healthy"].to_dict()["modes"]["hacking"]["reason"]
    assert planted_reports["planted_healthy_with_eval"].to_dict()["modes"]["hacking"]["flagged"] is False
    assert planted_reports["planted_hacking_eval_flat"].to_dict()["modes"]["hacking"]["flagged"] is True


def _staged_rows(n, fmt, correct, seed=0):
    """A reward of two TRL reward functions (``rewards/<fn>/mean``), each a batch mean of 32 Bernoulli draws of its
    mean curve, the reward their sum."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, n + 1):
        f = rng.binomial(32, fmt(s)) / 32
        c = rng.binomial(32, correct(s)) / 32
        rows.append({"step": s, "reward": f + c, "reward_std": 0.4, "frac_reward_zero_std": 0.1, "grad_norm": 1.0,
                     "rewards/strict_format_reward_func/mean": f, "rewards/correctness_reward_func/mean": c})
    return rows


def test_without_an_eval_column_the_gold_reward_function_is_the_held_out_curve(tmp_path):
    """Figure 2 with the correctness function as the eval curve: a rise carried by the format term while
    correctness stays at its floor is the hacking signature; a correctness term that rises with the format one
    is not (no deficit below the diagonal); a reward that never rose is not read as hacking."""
    rise = lambda s: 0.9 * (1 - np.exp(-s / 30))  # noqa: E731
    hacked = diagnose(write_log(tmp_path, "format_only", _staged_rows(200, rise, lambda s: 0.05))).to_dict()
    verdict = hacked["modes"]["hacking"]
    assert verdict["flagged"] is True
    assert verdict["numbers"]["eval_column"] == "rewards/correctness_reward_func/mean"
    assert "standing in for an eval column" in verdict["numbers"]["held_out"]
    learned = diagnose(write_log(tmp_path, "both_rise", _staged_rows(200, rise, lambda s: 0.05 + 0.6 * (
        1 - np.exp(-s / 30)), seed=1))).to_dict()["modes"]["hacking"]
    assert learned["flagged"] is not True and learned["numbers"]["deficit"] < 0.15
    flat = diagnose(write_log(tmp_path, "flat", _staged_rows(200, lambda s: 0.3, lambda s: 0.05, seed=2)))
    assert flat.to_dict()["modes"]["hacking"]["flagged"] is False
    assert "did not rise" in flat.to_dict()["modes"]["hacking"]["verdict"]


@pytest.mark.parametrize("gold_end, flagged_by_share", [(0.05, True), (0.25, False)])
def test_a_rise_the_gold_term_carries_under_a_tenth_of_is_hacking(tmp_path, gold_end, flagged_by_share):
    """The reward is the sum of its terms (TRL), so the gold term's share of the reward's rise is the ratio of the
    two linear trends: a format term rising 0 -> 1 over 100 steps beside a gold term rising 0 -> ``gold_end``
    (each with a +-0.01 wobble, the same on both, so that the noise is not 0) gives ``gold_end / (1 + gold_end)``:
    0.048 is under ``gold_share_min`` = 0.1, hacking; 0.2 is not."""
    rows = []
    for s in range(100):
        wobble = 0.01 * (-1) ** s
        f, c = s / 99 + wobble, gold_end * s / 99 + wobble
        rows.append({"step": s + 1, "reward": f + c, "rewards/format_reward/mean": f,
                     "rewards/correctness_reward_func/mean": c})
    verdict = diagnose(write_log(tmp_path, f"share_{gold_end}", rows)).to_dict()["modes"]["hacking"]
    share = verdict["numbers"]["gold_share"]["share"]
    assert share == pytest.approx(gold_end / (1 + gold_end), abs=2e-3)
    by_share = verdict["flagged"] is True and "carries" in verdict["reason"]
    assert by_share is flagged_by_share
    if flagged_by_share:
        assert verdict["severity"] == "medium"  # 0.1 / 0.048 = 2.1 x the threshold


def test_the_gold_reward_function_is_declared_or_named_once(tmp_path):
    rows = _staged_rows(120, lambda s: 0.9 * (1 - np.exp(-s / 30)), lambda s: 0.05)
    path = write_log(tmp_path, "gold", rows)
    missing = diagnose_log(str(path), config=diagnostics_config({"reward_hacking": {"gold_reward": "accuracy"}}))
    verdict = missing.to_dict()["modes"]["hacking"]
    assert verdict["flagged"] is None and "'accuracy' was not logged" in verdict["reason"]
    declared = diagnose_log(str(path), config=diagnostics_config(
        {"reward_hacking": {"gold_reward": "strict_format_reward_func"}})).to_dict()["modes"]["hacking"]
    assert declared["numbers"]["eval_column"] == "rewards/strict_format_reward_func/mean"
    for row in rows:
        row["rewards/exact_match/mean"] = row["rewards/correctness_reward_func/mean"]
        row["reward"] += row["rewards/exact_match/mean"]
    # gold_names in order of preference: "correct" comes before "exact", so correctness decides ...
    first = diagnose(write_log(tmp_path, "two_gold", rows)).to_dict()["modes"]["hacking"]
    assert first["numbers"]["eval_column"] == "rewards/correctness_reward_func/mean"
    # ... and two functions matched by the same first word are ambiguous
    several = diagnose_log(str(write_log(tmp_path, "two_gold_b", rows)), config=diagnostics_config(
        {"reward_hacking": {"gold_names": ["exact", "correct"], "not_gold_names": ["format"]}}))
    several = several.to_dict()["modes"]["hacking"]
    assert several["numbers"]["eval_column"] == "rewards/exact_match/mean"
    for row in rows:
        row["rewards/exactness/mean"] = row["rewards/exact_match/mean"]
    several = diagnose_log(str(write_log(tmp_path, "two_gold_c", rows)), config=diagnostics_config(
        {"reward_hacking": {"gold_names": ["exact", "correct"]}})).to_dict()["modes"]["hacking"]
    assert several["flagged"] is None and "several reward functions" in several["reason"]
    for row in rows:
        row["reward"] -= row.pop("rewards/exactness/mean")
    for row in rows:  # a penalty named "incorrect..." is no gold term: the one gold name is back to one function
        row["rewards/incorrect_answer_penalty/mean"] = row.pop("rewards/exact_match/mean")
    one = diagnose_log(str(write_log(tmp_path, "penalty", rows)), config=diagnostics_config(
        {"reward_hacking": {"gold_names": ["Correct"]}})).to_dict()["modes"]["hacking"]
    assert one["numbers"]["eval_column"] == "rewards/correctness_reward_func/mean"
    with pytest.raises(InputError, match="gold_reward"):
        diagnostics_config({"reward_hacking": {"gold_reward": 3}})
    with pytest.raises(InputError, match="gold_by_elimination must be true or false"):
        diagnostics_config({"reward_hacking": {"gold_by_elimination": "yes"}})
    for row in rows:  # Unsloth's Qwen3 / Gemma3 recipes score the answer with check_answer: "answer" names it,
        # and the penalty's "answer" does not count (a word beginning with "penal" rules a function out)
        row["rewards/check_answer/mean"] = row.pop("rewards/correctness_reward_func/mean")
    checked = diagnose(write_log(tmp_path, "check_answer", rows)).to_dict()["modes"]["hacking"]
    assert checked["numbers"]["eval_column"] == "rewards/check_answer/mean" and checked["flagged"] is True
    for row in rows:  # no gold name at all: the reason lists what to declare
        row["rewards/check_numbers/mean"] = row.pop("rewards/check_answer/mean")
    path = write_log(tmp_path, "unnamed", rows)
    unnamed = diagnose(path).to_dict()["modes"]["hacking"]
    assert unnamed["flagged"] is None and "--gold-reward FN, of: " in unnamed["reason"]
    assert "check_numbers" in unnamed["reason"] and "incorrect_answer_penalty" in unnamed["reason"]
    # opted in, a format term and a penalty ruled out leave one function: the gold term by elimination ...
    eliminate = diagnostics_config({"reward_hacking": {"gold_by_elimination": True}})
    left = diagnose_log(str(path), config=eliminate).to_dict()["modes"]["hacking"]
    assert left["numbers"]["eval_column"] == "rewards/check_numbers/mean" and left["flagged"] is True
    for row in rows:  # ... but not where two are left
        row["rewards/brevity/mean"] = 0.0
    two_left = diagnose_log(str(write_log(tmp_path, "two_left", rows)), config=eliminate)
    two_left = two_left.to_dict()["modes"]["hacking"]
    assert two_left["flagged"] is None and "--gold-reward FN, of: " in two_left["reason"]


@pytest.mark.parametrize("names, gold", [
    (("chess_reward_func", "format_reward_func"), "chess_reward_func"),  # a format term beside the task's score
    (("cleaning_env_reward", "cleaning_json_format_reward"), "cleaning_env_reward"),
    (("entity_leak_penalty_reward", "format_adherence_reward", "plausible_ignorance_reward"),
     "plausible_ignorance_reward"),
    (("match_format_exactly", "match_format_approximately"), None),  # every function ruled out
    (("tool_trace_reward_fn", "format_reward_fn", "tool_use_reward_fn"), None),  # two left: which one?
    (("sql_reward",), None),  # one function: nothing to compare the reward with
])
def test_the_gold_term_by_elimination(names, gold):
    """The one reward function that ``not_gold_names`` (format, penal) do not rule out, of two or more, stands in
    for the held-out curve where ``gold_by_elimination`` is opted into (the dev logs' function names that motivated
    it, docs/live-history.md's third round); by default no function is taken without a gold name."""
    frame = pd.DataFrame({"step": [1, 2, 3], "reward": [0.0, 0.5, 1.0],
                          **{f"rewards/{n}/mean": [0.0, 0.2, 0.4] for n in names}})
    assert gold_column(RunCurves("m", None, frame), RewardHackingConfig())[0] is None
    column, how = gold_column(RunCurves("m", None, frame), RewardHackingConfig(gold_by_elimination=True))
    assert column == (None if gold is None else f"rewards/{gold}/mean")
    if gold is not None:
        assert "not ruled out" in how


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


# ---------------------------------------------------------------------------------------------- CLI and outputs


def test_cli_out_dir_writes_verdicts_summary_and_figures(tmp_path, capsys):
    case = CASES["planted_regression_at_cap"]
    log = write_log(tmp_path, "regression", case["log_history"])
    out = tmp_path / "out"
    status = main(["diagnose", str(log), "--out", str(out), "--max-completion-length", "512", "--fail-on-flag"])
    assert status == 1  # regression and truncation flagged
    printed = capsys.readouterr().out
    assert printed.startswith("# Diagnosis of") and "| regression | **yes** |" in printed
    data = json.loads((out / "verdicts.json").read_text())
    assert data["summary"]["healthy"] is False and set(data["summary"]["flagged"]) == {"regression", "truncation"}
    assert data["modes"]["truncation"]["thresholds"]["max_completion_length"] == 512
    for name in ("summary.md", "summary.html", "modes.png", "modes.pdf", "figure2.png", "figure5.pdf"):
        assert (out / name).stat().st_size > 200, name
    html = (out / "summary.html").read_text()
    assert "<table" in html and 'src="modes.png"' in html
    assert main(["diagnose", str(log), "--json", str(tmp_path / "d.json"), "--md", str(tmp_path / "d.md"),
                 "--rules", "toolkit"]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["rule_set"] == "toolkit"
    assert "| truncation | n/a |" in (tmp_path / "d.md").read_text()


@pytest.mark.parametrize("content, needle", [
    ('{"best_metric": null}', "neither a TRL trainer_state.json"),
    ('{"log_history": []}', "empty"),
    ('[{"step": 1, "reward": NaN}, {"step": 2, "reward": 0.2}]', "NaN or infinite"),
    ('[{"step": 1, "reward": 0.1}, {"step": 1, "reward": 0.1}]', "step 1 is logged twice"),
    ('[{"step": 2, "reward": 0.1}, {"step": 1, "reward": 0.2}]', "steps go backwards"),
    ("not json at all", "not valid JSON"),
])
def test_cli_bad_logs_exit_2_with_one_line(tmp_path, capsys, content, needle):
    path = tmp_path / "log.json"
    path.write_text(content)
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and err.startswith("pgrpo diagnose: error:")


# ------------------------------------------------------------------------------------- every saved format, alike


def _formats(tmp_path: Path) -> dict[str, Path]:
    """One run saved in every format a practitioner has (``CASES['planted_healthy_with_eval']``)."""
    history = CASES["planted_healthy_with_eval"]["log_history"]
    paths = {"trainer_state": tmp_path / "run" / "trainer_state.json"}
    paths["trainer_state"].parent.mkdir()
    paths["trainer_state"].write_text(json.dumps({"global_step": 300, "log_history": history}))
    paths["bare_list"] = tmp_path / "history.json"
    paths["bare_list"].write_text(json.dumps(history))
    folder = tmp_path / "output"
    for n in (100, 300):
        (folder / f"checkpoint-{n}").mkdir(parents=True)
        kept = [e for e in history if e["step"] <= n]
        (folder / f"checkpoint-{n}" / "trainer_state.json").write_text(json.dumps({"log_history": kept}))
    paths["output_folder"] = folder
    frame = pd.DataFrame(history).groupby("step").first().reset_index()
    wandb = frame.rename(columns={c: (f"run - eval/{c[5:]}" if c.startswith("eval_") else f"run - train/{c}")
                                  for c in frame.columns if c != "step"}).rename(columns={"step": "Step"})
    paths["wandb_csv"] = tmp_path / "wandb.csv"
    wandb.to_csv(paths["wandb_csv"], index=False)
    old = [{("completion_length" if k == "completions/mean_length" else
             "rewards/correct" if k == "rewards/correct/mean" else k): v for k, v in e.items()
            if k not in ("reward", "rewards/correct/std")} for e in history]
    paths["old_trl_names"] = tmp_path / "old.json"
    paths["old_trl_names"].write_text(json.dumps({"log_history": old}))
    return paths


def test_every_saved_format_gives_the_same_verdicts(tmp_path):
    verdicts = {}
    for name, path in _formats(tmp_path).items():
        data = diagnose(path, {"max_completion_length": 1024}).to_dict()
        verdicts[name] = {m: v["flagged"] for m, v in data["modes"].items()}
        assert data["n_steps"] == 300, name
    reference = verdicts["trainer_state"]
    assert reference == {m: False for m in MODES}
    for name, got in verdicts.items():
        assert got == reference, name


def test_logs_every_k_steps_and_without_kl_or_entropy(planted_reports, tmp_path):
    every5 = planted_reports["planted_healthy_every5_no_kl"].to_dict()
    assert every5["n_steps"] == 80 and every5["summary"]["healthy"]
    history = [{k: v for k, v in e.items() if k not in ("entropy", "kl")} for e in CASES["planted_healthy"]["log_history"]]
    data = diagnose(write_log(tmp_path, "bare", history)).to_dict()
    assert data["modes"]["concentration"]["flagged"] is None and "entropy" in data["modes"]["concentration"]["reason"]
    assert data["modes"]["instability"]["flagged"] is False  # grad_norm alone
    assert data["summary"]["healthy"] is True and "concentration" in data["summary"]["not_checked"]


def test_workflow_diagnostics_gain_the_modes(tmp_path):
    case = CASES["planted_healthy"]
    frame = pd.DataFrame(case["log_history"])
    out = {"step": frame["step"]}
    for column in frame.columns:
        if column != "step":
            out[f"{column}_mean"], out[f"{column}_sd"], out[f"{column}_n"] = frame[column], 0.01, 2
    path = tmp_path / "aggregate" / "tiny" / "G8.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(out).to_csv(path, index=False)
    report = run_diagnostics([str(path)], str(tmp_path / "v.json"), str(tmp_path / "v.md"))
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["modes"][0]["model"] == "tiny" and data["modes"][0]["G"] == 8
    assert set(data["modes"][0]["modes"]) == set(MODES)
    assert report.verdicts[0].summary()["healthy"] is True
    markdown = (tmp_path / "v.md").read_text()
    assert "**Failure modes**" in markdown and markdown.count("## ") == 5


def test_run_curves_of_a_hand_frame_can_be_diagnosed_directly():
    from pgrpo.diagnose.readouts.report import diagnose_curves

    steps = np.arange(1, 61)
    frame = pd.DataFrame({"step": steps, "reward": 0.5 + 0 * steps})
    report = diagnose_curves(RunCurves("m", None, frame, "hand"), diagnostics_config(None))
    assert report.verdicts.modes["no_learning"].flagged is True


# --- the diagnose benchmark (pgrpo diagnose-benchmark, rule diagnose_benchmark) ------------------------------------


def test_benchmark_scoring_by_hand():
    """Two logs, one mode each way: a found failure with its onset 12 steps off (tolerance max(10% of 100, 2 x 1) =
    10: not ok), a false flag, a miss and a correct negative; an unknown label is not scored."""
    from pgrpo.diagnose.benchmark import counts, onset_tolerance, rows_for

    report = {"first_step": 0, "last_step": 100, "n_steps": 101}
    assert onset_tolerance(report) == pytest.approx(10.0)

    def reports(flags):
        modes = {m: {"flagged": flags.get(m, False), "onset_step": 42 if flags.get(m) else None,
                     "verdict": "flagged" if flags.get(m) else "not flagged"} for m in MODES}
        return {"ours": {**report, "modes": modes}, "toolkit": {**report, "modes": modes}}

    def labels(yes, unknown=()):
        return {m: {"label": None if m in unknown else m in yes, "onset_step": 30 if m in yes else None,
                    "reason": ""} for m in MODES}

    rows = (rows_for("a", "dev", labels({"hacking", "regression"}, unknown={"truncation"}),
                     reports({"hacking": True, "degeneracy": True, "truncation": True}))
            + rows_for("b", "dev", labels(set()), reports({})))
    c = counts(rows, "ours")
    n_known = 2 * len(MODES) - 1
    assert (c["tp"], c["fp"], c["fn"]) == (1, 1, 1) and c["tn"] == n_known - 3
    assert (c["onset_ok"], c["onset_n"]) == (0, 1)  # |42 - 30| = 12 > 10


def test_benchmark_counts_the_blind_batch_apart_across_splits():
    """The blind batch's records count its logs whatever their split: here one dev log and one holdout log of
    three, so its counts are the sum of those two logs' and its logs 2 (by hand: the flags below)."""
    from pgrpo.diagnose.benchmark import BLIND, rows_for, summary_records

    report = {"first_step": 0, "last_step": 100, "n_steps": 101}

    def reports(flagged):
        modes = {m: {"flagged": m == flagged, "onset_step": 40 if m == flagged else None,
                     "verdict": "flagged" if m == flagged else "not flagged"} for m in MODES}
        return {"ours": {**report, "modes": modes}, "toolkit": {**report, "modes": modes}}

    def labels(yes):
        return {m: {"label": m == yes, "onset_step": 40 if m == yes else None, "reason": ""} for m in MODES}

    rows = (rows_for("a", "dev", labels("hacking"), reports("hacking"), blind=True)  # found
            + rows_for("b", "dev", labels("hacking"), reports(None))  # missed, not blind
            + rows_for("c", "holdout", labels(None), reports("degeneracy"), blind=True))  # a false flag
    by = {(r["split"], r["rule_set"], r["mode"]): r for r in summary_records(rows)}
    blind = by[(BLIND, "ours", "all")]
    assert blind["logs"] == 2 and (blind["tp"], blind["fn"], blind["fp"]) == (1, 0, 1)
    assert (by[("dev", "ours", "all")]["tp"], by[("dev", "ours", "all")]["fn"]) == (1, 1)
    assert by[("holdout", "ours", "all")]["logs"] == 1


def test_benchmark_refuses_a_label_file_naming_a_missing_log(tmp_path):
    from pgrpo.stages.diagnose_benchmark import run_diagnose_benchmark

    (tmp_path / "labels.json").write_text(json.dumps({"absent.json": {"split": "dev"}}))
    with pytest.raises(InputError, match="absent.json"):
        run_diagnose_benchmark(str(tmp_path / "out"), str(tmp_path))
    assert not (tmp_path / "out").exists()  # nothing written before the input is checked


def test_spikes_are_points_over_factor_times_the_median_of_the_previous_usable_window():
    """pgrpo.diagnose.modes.signals.spikes against its definition written as a plain loop: for each point, the median
    of the last ``window`` earlier values that are finite, positive and marked as reference (at least 2 of them);
    a spike exceeds ``factor`` x that median and the median by ``min_excess``. Random logs with zeros, NaN and inf."""
    from pgrpo.diagnose.modes.signals import spikes

    def by_definition(values, factor, window, min_excess, reference):
        usable = np.isfinite(values) & (values > 0) & (True if reference is None else reference)
        out = []
        for i in range(values.size):
            previous = values[:i][usable[:i]][-window:]
            if previous.size >= 2:
                level = float(np.median(previous))
                if values[i] > factor * level and values[i] - level >= min_excess:
                    out.append(i)
        return out

    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(0, 60))
        values = rng.lognormal(0, 1.5, n)
        values[rng.uniform(size=n) < 0.1] = 0.0
        values[rng.uniform(size=n) < 0.05] = np.nan
        if n and rng.uniform() < 0.3:
            values[rng.integers(0, n)] = np.inf
        reference = rng.uniform(size=n) < 0.8 if rng.uniform() < 0.5 else None
        window, factor, excess = int(rng.integers(1, 25)), float(rng.uniform(1, 10)), float(rng.uniform(0, 1))
        got = spikes(np.arange(n), values, factor, window, excess, reference)
        assert got.tolist() == by_definition(values, factor, window, excess, reference)
    # a hand case: 1, 1, 1, 10 with factor 5: the median of the three ones is 1, 10 > 5
    assert spikes(np.arange(4), np.array([1.0, 1.0, 1.0, 10.0]), 5.0, 10).tolist() == [3]


def test_gold_reward_from_the_command_line_and_the_live_settings(tmp_path, capsys):
    """``pgrpo diagnose --gold-reward`` and ``LiveSettings(gold_reward=...)`` (the callback's, ``pgrpo replay``'s
    and ``pgrpo watch``'s) reach ``diagnostics.reward_hacking.gold_reward``."""
    from pgrpo.live.reads import LiveSettings

    rows = _staged_rows(120, lambda s: 0.9 * (1 - np.exp(-s / 30)), lambda s: 0.05)
    path = write_log(tmp_path, "cli_gold", rows)
    out = tmp_path / "v.json"
    assert main(["diagnose", str(path), "--gold-reward", "accuracy", "--json", str(out)]) in (0, None)
    assert "'accuracy' was not logged" in json.loads(out.read_text())["modes"]["hacking"]["reason"]
    assert LiveSettings(gold_reward="correctness_reward_func").config().reward_hacking.gold_reward == \
        "correctness_reward_func"
    with pytest.raises(InputError, match="gold_reward"):
        LiveSettings(gold_reward="")


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


def test_climbs_are_runs_over_factor_times_the_lagged_median():
    """pgrpo.diagnose.modes.signals.climbs against its definition written as a plain loop: for each point from
    ``2 x lag`` on, the median of the finite, positive, reference values ``lag`` to ``3 x lag`` points before it (at
    least ``lag`` of them); a hit is at least ``factor`` x that median and the median plus ``min_excess``; a climb is
    a run of ``count`` or more hits in a row, reported at its first point with its median."""
    from pgrpo.diagnose.modes.signals import climbs

    def by_definition(values, factor, lag, count, min_excess, reference):
        usable = np.isfinite(values) & (values > 0) & (True if reference is None else reference)
        hits, levels = [], {}
        for i in range(values.size):
            window = [values[j] for j in range(max(0, i - 3 * lag), i - lag) if usable[j]] if i >= 2 * lag else []
            ok = False
            if len(window) >= lag:
                levels[i] = float(np.median(window))
                ok = bool(values[i] >= factor * levels[i] and values[i] - levels[i] >= min_excess)
            hits.append(ok)
        out, i = [], 0
        while i < len(hits):
            if hits[i]:
                j = i
                while j < len(hits) and hits[j]:
                    j += 1
                if j - i >= count:
                    out.append((i, levels[i]))
                i = j
            else:
                i += 1
        return out

    rng = np.random.default_rng(1)
    found = 0
    for _ in range(300):
        n = int(rng.integers(0, 80))
        values = rng.lognormal(0, 0.3, n) * np.where(rng.uniform(size=n) < 0.3, 6.0, 1.0)
        values[rng.uniform(size=n) < 0.05] = 0.0
        values[rng.uniform(size=n) < 0.03] = np.nan
        reference = rng.uniform(size=n) < 0.9 if rng.uniform() < 0.5 else None
        lag, count = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        excess = float(rng.choice([0.0, 0.5]))
        got = climbs(values, 3.0, lag, count, excess, reference)
        expected = by_definition(values, 3.0, lag, count, excess, reference)
        assert [i for i, _ in got] == [i for i, _ in expected]
        assert [level for _, level in got] == pytest.approx([level for _, level in expected])
        found += len(got)
    assert found > 20  # the random logs do hold climbs


def _climb_log(n=200, crash=True, column="grad_norm", low=1.0, cap=8.0):
    """Steps 1..n; ``column`` at ``low`` (x1.00-1.04), from step 141 to 160 x1.25 per step up to ``cap`` x ``low``,
    then back; the reward rising with a +-0.05 zigzag, at 0.2 from step 145 when ``crash``."""
    def value(s):
        return low * min(1.25 ** (s - 140), cap) if 140 < s <= 160 else low * (1 + 0.01 * (s % 5))

    def reward(s):
        return 0.2 if crash and s >= 145 else 0.3 + 0.4 * s / n + 0.05 * (-1) ** s
    return _base(n, reward=reward, **{column: value})


@pytest.mark.parametrize("column, low, crash, expected", [
    ("grad_norm", 1.0, True, 147),  # 1.25^7 = 4.8 >= 4 x 1.02 first at step 147; the reward crashed from 145
    ("grad_norm", 1.0, False, None),  # the same climb while the reward rises: the method working, not flagged
    ("kl", 0.02, True, 149),  # a KL climb 0.02 -> 0.16 nats: x4 at 147, but 0.1 nats above its level at 149
    ("kl", 0.002, True, None),  # x8 but 0.014 nats: under kl_spike_min, not a blow-up
])
def test_a_climb_with_a_reward_crash_is_unstable(tmp_path, column, low, crash, expected):
    """Session 26's climb signal: a level that climbs to ``climb_factor`` (4) x its median 10-30 points before and
    stays there for ``climb_points`` (3) points, where the reward crashes from the climb's first point. The onset
    is computed by hand: the first k with 1.25^k >= 4 x 1.02 (the lagged median of 1, 1.01 ... 1.04) is 7; for the
    KL at 0.02 x 1.25^k, 0.1 nats above 0.0204 first at k = 9 (1.25^8 = 5.96 < 6.02)."""
    base = {} if column == "grad_norm" else {"grad_norm": 1.0}
    history = [dict(row, **base) if column != "grad_norm" else row
               for row in _climb_log(crash=crash, column=column, low=low)]
    verdict = diagnose(write_log(tmp_path, f"climb_{column}_{low}_{crash}", history)).to_dict()["modes"][
        "instability"]
    if expected is None:
        assert verdict["flagged"] is False
    else:
        name = "grad_norm" if column == "grad_norm" else "KL"
        assert verdict["flagged"] is True and f"{name} climb" in verdict["verdict"]
        assert verdict["onset_step"] == expected
