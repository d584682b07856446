"""The decisions a forecast serves: `pgrpo forecast --target`, `--compare` on every saved log format, the staged
sum of reward functions, and the decision scores (pairs, Brier, stop rule) against hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pgrpo.cli import main
from pgrpo.fit.decisions import brier, p_highest, pairs_ordered, stop_decisions, stop_rule_outcome, target_reach
from pgrpo.fit.headroom import has_started
from pgrpo.fit.staged import forecast_components, reward_components
from pgrpo.grpo.run_log import reward_function_columns

T = np.arange(1, 401, dtype=float)


def three_phase(t, r0=0.1, rinf=0.7, omega=0.03):
    return rinf - (rinf - r0) * (1 + omega * t) * np.exp(-omega * t)


# --- the decision scores by hand --------------------------------------------------------------------------------


def test_target_reach_by_hand():
    steps = np.arange(10, 101, 10, dtype=float)
    mean = np.linspace(0.1, 1.0, 10)  # 0.1 at step 10, ..., 1.0 at step 100: first >= 0.5 at step 50
    draws = np.vstack([mean + 0.1 * k for k in (-1, 0, 1)] * 10)  # reaches 0.5 at steps 60, 50, 40
    plateau_draws = np.array([0.4, 0.45, 0.6, 0.7])
    reach = target_reach(steps, mean, draws, plateau_draws, 0.5, level_at_cut=0.05)
    assert reach.step == 50 and reach.share_reached == 1.0 and not reach.already
    assert reach.lo80 == 40 and reach.hi80 == 60
    assert reach.p_plateau_at_least == 0.5
    never = target_reach(steps, mean, draws, plateau_draws, 1.5, level_at_cut=0.05)
    assert np.isnan(never.step) and "not within the horizon" in never.message and never.share_reached == 0
    assert target_reach(steps, mean, draws, plateau_draws, 0.01, level_at_cut=0.05).already  # a fall already made


def test_p_highest_pairs_brier_by_hand():
    a, b, c = np.full(100, 1.0), np.r_[np.full(50, 2.0), np.full(50, 0.0)], np.full(100, 0.5)
    p = p_highest([a, b, c])  # b tops half the joint draws, a the other half, c never
    assert p == pytest.approx([0.5, 0.5, 0.0])
    assert brier(p, [1.0, 2.0, 0.0]) == pytest.approx(0.25 + 0.25 + 0.0)  # b is truly highest
    assert pairs_ordered([1, 2, 3], [10, 20, 30]) == 1.0
    assert pairs_ordered([3, 2, 1], [10, 20, 30]) == 0.0
    assert pairs_ordered([1, 1, 3], [10, 20, 30]) == pytest.approx((0.5 + 1 + 1) / 3)  # a tie counts half
    assert pairs_ordered([1, 2, 3], [10, 10.01, 30], tolerance=0.1) == 1.0  # the near tie is not a pair


def test_a_pair_the_truth_does_not_settle_is_not_scored():
    """Ends estimated with s.e. 0.03 each: 1.00 and 1.05 differ by 0.05, under twice the s.e. of the difference
    (2 x 0.03 sqrt 2 = 0.085), so their order is unknown and only the two other pairs count; a score that swaps the
    unsettled pair is right on both settled ones. Known truths (no s.e.) count all three."""
    from pgrpo.fit.decisions import settled_pairs

    truth, se, score = [1.0, 1.05, 2.0], [0.03, 0.03, 0.03], [1.0, 0.9, 3.0]
    assert settled_pairs(truth, 0.0, se, 2.0) == [(0, 2), (1, 2)]
    assert pairs_ordered(score, truth, 0.0, se, 2.0) == 1.0
    assert pairs_ordered(score, truth) == pytest.approx(2 / 3)
    assert settled_pairs(truth, 0.0, [0.01, 0.01, 0.01], 2.0) == [(0, 1), (0, 2), (1, 2)]  # 0.05 > 0.028
    assert np.isnan(pairs_ordered(score, [1.0, 1.0, 1.0]))  # no pair at all


def test_the_s_e_of_the_reference_s_end_is_that_of_least_squares_for_a_wide_kernel():
    """With a kernel far wider than the span the local-linear smoother is the least-squares line, and the s.e. of the
    mean of its last k fitted values is sigma sqrt(1/n + (tbar_k - tbar)^2 / Sxx) (ordinary regression)."""
    from pgrpo.fit.truth import Reference, _local_linear_hat

    t = np.arange(0, 50, 1.0)
    hat = _local_linear_hat(t, 1e6)
    ref = Reference(np.zeros(t.size), np.zeros(t.size), 1e6, 0.1, hat)
    k = 5
    expected = 0.1 * np.sqrt(1 / t.size + (t[-k:].mean() - t.mean()) ** 2 / np.sum((t - t.mean()) ** 2))
    assert ref.se_of_mean(k) == pytest.approx(expected, rel=1e-6)
    assert np.isnan(Reference(np.zeros(3), np.zeros(3), 1.0).se_of_mean(2))  # no hat: unknown


def test_the_stop_rule_by_hand():
    draws = [np.full(100, 0.9), np.r_[np.full(97, 0.2), np.full(3, 0.95)], np.r_[np.full(90, 0.3), np.full(10, 1.0)]]
    stop, p, best = stop_decisions(draws, levels=[0.6, 0.4, 0.5])
    assert best == 0.6 and p == pytest.approx([1.0, 0.03, 0.10])
    assert stop.tolist() == [False, True, False]
    # the leader is never stopped, even when its own forecast falls below the best so far
    stop, _, _ = stop_decisions([np.full(10, 0.1), np.full(10, 0.9)], levels=[0.6, 0.4])
    assert stop.tolist() == [False, False]
    outcome = stop_rule_outcome([False, True, True], 0.25, [0.8, 0.9, 0.1], reward_span=1.0)
    assert outcome.steps_saved == pytest.approx(2 / 3 * 0.75) and outcome.loss == pytest.approx(0.1)
    assert outcome.loss_share == pytest.approx(0.1) and outcome.loss_of_best == pytest.approx(0.1 / 0.9)


# --- staged rises -------------------------------------------------------------------------------------------------


def _staged_series(seed=3):
    rng = np.random.default_rng(seed)
    fmt = 1.5 * (1 - np.exp(-T / 30)) + rng.normal(0, 0.05, T.size)
    corr = np.where(T > 200, 6 * (1 - np.exp(-(T - 200) / 20)), 0.0) + np.where(T > 200, rng.normal(0, 0.1, T.size), 0)
    return {"format": (T, fmt), "correct": (T, corr)}


def test_a_function_that_has_not_started_widens_the_plateau_by_its_headroom():
    series = _staged_series()
    assert has_started(series["format"][1][:100], 1.4) and not has_started(series["correct"][1][:100], 0.0)
    staged = forecast_components(series, 0.25, 400.0, ranges={"correct": (0.0, 6.0)})
    assert not staged.per_function["correct"].started and staged.per_function["correct"].headroom == pytest.approx(6)
    assert staged.per_function["format"].started and staged.per_function["format"].headroom == 0
    # the true plateau (1.5 + 6) is inside the summed band; the format function alone is near 1.5
    assert staged.plateau["lo80"] < 1.6 < staged.plateau["mean"] + 0.2 and staged.plateau["hi80"] > 5.0
    # undeclared, the headroom is the largest rise a started function shows by the cut (its mean curve's span over
    # the early window: 1.5 (exp(-1/30) - exp(-100/30)) = 1.397, not the noisy values' span), and the notes say so
    guessed = forecast_components(series, 0.25, 400.0)
    assert guessed.per_function["correct"].headroom == pytest.approx(1.5 * (np.exp(-1 / 30) - np.exp(-100 / 30)),
                                                                      abs=0.08)
    assert np.ptp(series["format"][1][T <= 100]) > 1.397 + 0.1
    assert any("--component-range correct" in note for note in guessed.notes)
    # a log where no function has risen yet adds no headroom (the noise of a flat function is no range)
    flat = {"a": (T, np.full(T.size, 0.2)), "b": (T, series["correct"][1])}
    assert all(c.headroom == 0 for c in forecast_components(flat, 0.25, 400.0).per_function.values())
    assert reward_function_columns(["rewards/a/mean", "rewards/a/std", "reward", "rewards/b/mean"]) == {
        "a": "rewards/a/mean", "b": "rewards/b/mean"}


def test_the_summed_forecast_widens_step_by_step_as_the_silent_functions_rise_may_have_begun():
    """At every step ahead the sum's draws are the functions' draws summed, the silent function (``correct``,
    headroom 6) risen in half of them at an onset uniform over the steps ahead: just after the cut almost no draw
    has risen (the band is the format function's, about 1.5 wide at most), at the horizon half have, so the upper
    80% bound is the format level plus the headroom; the mean curve is the two functions' means summed (no jump)."""
    staged = forecast_components(_staged_series(), 0.25, 400.0, ranges={"correct": (0.0, 6.0)})
    f = {k: np.asarray(v) for k, v in staged.forecast.items()}
    assert f["step"][0] == 101 and f["step"][-1] == 400
    assert f["hi80"][0] < 2.0 and f["hi80"][-1] > 1.4 + 6.0 - 0.5
    assert f["lo80"][-1] < 1.7  # the other half stays where it is
    format_only = forecast_components({"format": _staged_series()["format"]}, 0.25, 400.0)
    assert np.allclose(f["mean"], np.asarray(format_only.forecast["mean"]) + staged.per_function["correct"].level_at_cut,
                       atol=0.05)
    summed = staged.prediction
    share_risen = np.mean(summed.mean_draws[:, -1] > 4.0)
    assert 0.4 < share_risen < 0.6  # RISE_PROBABILITY of the draws, every onset before the last step


def test_silent_functions_rise_together_or_not_at_all():
    """Three functions at zero with declared headroom 1 each beside a risen one: one coin per draw, so at the
    horizon (every onset passed) a draw holds all three rises or none, half of the draws each, and the plateau's 80%
    band keeps the run staying where it is (independent coins would leave it in 1/8 of the draws only)."""
    rng = np.random.default_rng(0)
    series = {"format": (T, 1 - np.exp(-T / 20) + rng.normal(0, 0.02, T.size)),
              **{k: (T, np.zeros(T.size)) for k in ("c1", "c2", "c3")}}
    staged = forecast_components(series, 0.25, 400.0, ranges={k: (0.0, 1.0) for k in ("c1", "c2", "c3")})
    last = staged.prediction.mean_draws[:, -1]
    base = staged.per_function["format"].plateau["mean"]
    risen = np.abs(last - (base + 3)) < 0.3
    stayed = np.abs(last - base) < 0.3
    assert np.all(risen | stayed) and 0.4 < risen.mean() < 0.6
    assert staged.plateau["lo80"] < base + 0.1 < base + 2 < staged.plateau["hi80"]
    assert staged.plateau["mean_of_draws"] == pytest.approx(np.mean(staged.plateau_draws))


def test_the_reward_functions_that_make_up_the_reward():
    """``reward_components`` by hand: a plain sum; a total logged as a function left out; TRL's reward weights read
    off the log (reward = 2 a + b, a constant function keeping weight 1); functions that do not add up: none."""
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0, 1, 50), rng.uniform(0, 1, 50)
    zero = np.zeros(50)
    plain = reward_components(T[:50], a + b, {"a": a, "b": b, "z": zero})
    assert plain.weights == {"a": 1.0, "b": 1.0, "z": 1.0} and not plain.notes
    assert np.array_equal(plain.series["a"][1], a)
    total = reward_components(T[:50], a + b, {"a": a, "b": b, "total": a + b})
    assert set(total.series) == {"a", "b"} and "total is the reward itself" in total.notes[0]
    weighted = reward_components(T[:50], 2 * a + b, {"a": a, "b": b, "z": zero})
    assert weighted.weights["a"] == pytest.approx(2) and weighted.weights["b"] == pytest.approx(1)
    assert weighted.weights["z"] == 1.0 and np.allclose(weighted.series["a"][1], 2 * a)
    assert weighted.weighted_ranges({"a": (0, 1), "b": (0, 1)}) == {"a": (0.0, pytest.approx(2.0)), "b": (0.0, 1.0)}
    # the one varying function equal to the reward beside functions at zero is a term, not a total
    alone = reward_components(T[:50], a, {"a": a, "z": zero, "y": zero})
    assert set(alone.series) == {"a", "z", "y"}
    apart = reward_components(T[:50], a + b + rng.normal(0, 0.3, 50), {"a": a, "b": b})
    assert not apart.series and "do not add up" in apart.notes[0]
    assert reward_components(T[:50], None, {"a": a, "b": b}).weights == {"a": 1.0, "b": 1.0}  # no reward logged


def test_the_benchmark_scores_the_function_users_run():
    """The forecast benchmark's per-reward-function method is ``forecast_components`` cut where the curve is: the
    same draws, intervals and mean at the held-out steps."""
    from pgrpo.fit.benchmark import STAGED, default_methods
    from pgrpo.fit.forecaster import RunContext
    from pgrpo.stages.forecast_benchmark import closed_form_corpus

    curve = next(c for c in closed_form_corpus() if c.components)
    cut = curve.steps[curve.steps.size // 4]
    early = curve.steps <= cut
    got = default_methods()[STAGED](curve, curve.steps[early], curve.values[early], curve.steps[~early],
                                    RunContext(reward_range=(0.0, 1.0)))
    series = {fn: (ct, cy) for fn, (ct, cy, _) in curve.components.items()}
    ranges = {fn: r for fn, (_, _, r) in curve.components.items()}
    want = forecast_components(series, float(cut) / float(curve.steps[-1]), float(curve.steps[-1]), ranges=ranges,
                               cutoff_step=float(cut)).prediction
    assert np.array_equal(got.steps, curve.steps[~early])
    for key in ("mean", "mean_draws", "value_draws"):
        assert np.array_equal(getattr(got, key), getattr(want, key))
    assert all(np.array_equal(got.intervals[k], want.intervals[k]) for k in want.intervals)


# --- the CLI on every saved log format ----------------------------------------------------------------------------


def _history(rinf, omega, seed):
    rng = np.random.default_rng(seed)
    y = three_phase(T, 0.1, rinf, omega) + rng.normal(0, 0.03, T.size)
    return [{"step": int(s), "reward": float(v), "loss": 0.0} for s, v in zip(T, y)]


def _write(fmt, folder, history):
    folder.mkdir(parents=True, exist_ok=True)
    rows = [e for e in history if "reward" in e]
    if fmt == "trainer_state":
        path = folder / "trainer_state.json"
        path.write_text(json.dumps({"global_step": 400, "log_history": history}))
    elif fmt == "log_history":
        path = folder / "history.json"
        path.write_text(json.dumps(history))
    elif fmt == "output_folder":
        (folder / "checkpoint-400").mkdir()
        (folder / "checkpoint-400" / "trainer_state.json").write_text(json.dumps({"log_history": history}))
        path = folder
    elif fmt == "wandb_csv":
        path = folder / "wandb.csv"
        pd.DataFrame({"Step": [e["step"] for e in rows],
                      "run-x - train/reward": [e["reward"] for e in rows]}).to_csv(path, index=False)
    else:
        path = folder / "log.csv"
        pd.DataFrame({"step": [e["step"] for e in rows], "reward": [e["reward"] for e in rows]}).to_csv(
            path, index=False)
    return path


FORMATS = ["trainer_state", "log_history", "output_folder", "wandb_csv", "workflow_csv"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_pgrpo_forecast_target_on_every_log_format(tmp_path, fmt):
    path = _write(fmt, tmp_path / "run", _history(0.7, 0.03, 11))
    out = tmp_path / "f.json"
    assert main(["forecast", str(path), "--fraction", "0.25", "--reward-range", "0", "1", "--target", "0.6",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"forecast", "plateau", "t90", "mixture", "seen", "held_out"} <= set(data)  # today's keys kept
    target = data["target"]
    # the curve 0.7 - 0.6 (1 + 0.03 t) e^{-0.03 t} crosses 0.6 at t = 111.9; the plateau is at 0.7
    assert target["p_plateau_at_least"] > 0.9 and abs(target["step"] - 112) < 15
    assert target["lo80"] <= target["step"] <= target["hi80"]
    assert main(["forecast", str(path), "--fraction", "0.25", "--reward-range", "0", "1", "--target", "0.95",
                 "--json", str(out)]) == 0
    far = json.loads(out.read_text())["target"]
    assert far["step"] is None and "not within the horizon" in far["message"] and far["p_plateau_at_least"] < 0.1


@pytest.mark.parametrize("fmt", FORMATS)
def test_pgrpo_forecast_compare_ranks_runs_on_every_log_format(tmp_path, fmt, capsys):
    plateaus = (0.8, 0.5, 0.3)
    paths = [str(_write(fmt, tmp_path / f"run{i}", _history(rinf, 0.03, 20 + i))) for i, rinf in enumerate(plateaus)]
    out = tmp_path / "c.json"
    assert main(["forecast", "--compare", *paths, "--fraction", "0.25", "--reward-range", "0", "1",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    ranked = [run["log"] for run in data["runs"]]
    assert ranked == paths  # best first: the order of the planted plateaus
    assert [run["rank"] for run in data["runs"]] == [1, 2, 3]
    assert data["runs"][0]["p_highest"] > 0.9 and sum(r["p_highest"] for r in data["runs"]) == pytest.approx(1)
    # the run planted at 0.3 is below the leader's level at the cut (0.59) with no chance to pass it: stopped
    assert data["runs"][2]["stop_now"] and not data["runs"][0]["stop_now"]
    assert main(["forecast", paths[0], "--compare", *paths[1:], "--fraction", "0.25"]) == 0
    two_positional = tmp_path / "two.json"  # LOG LOG --compare LOG: the three ranked alike
    assert main(["forecast", *paths[:2], "--compare", paths[2], "--fraction", "0.25", "--reward-range", "0", "1",
                 "--json", str(two_positional)]) == 0
    assert [r["log"] for r in json.loads(two_positional.read_text())["runs"]] == paths
    text = capsys.readouterr().out
    assert "rank" in text and "stop" in text and "keep" in text
    assert "note: horizon = the longest run's last logged step" not in text  # --fraction on finished runs
    assert main(["forecast", "--compare", *paths]) == 0
    assert "note: horizon = the longest run's last logged step: no run records a planned length" in (
        capsys.readouterr().out)
    assert f"leader {paths[0]}: ends highest with P = " in text and "(a blind pick among 3: 0.33)" in text


def test_compare_png_draws_every_run_of_the_ranking(tmp_path):
    paths = [str(_write("workflow_csv", tmp_path / f"run{i}", _history(rinf, 0.03, 20 + i)))
             for i, rinf in enumerate((0.8, 0.5, 0.3))]
    out, png = tmp_path / "c.json", tmp_path / "c.png"
    assert main(["forecast", "--compare", *paths, "--fraction", "0.25", "--reward-range", "0", "1",
                 "--json", str(out), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [run["log"] for run in json.loads(out.read_text())["runs"]] == paths  # the JSON as without --png


def test_compare_figure_shows_the_payload_s_plateaus_verdicts_and_paths():
    from pgrpo.figures.forecasts import compare_figure, run_label

    steps = np.arange(0.0, 11.0)
    payload = {"column": "reward", "horizon": 20.0, "stop_threshold": 0.05,
               "best_so_far": {"level": 0.5, "log": "sweep/a.json"},
               "runs": [{"log": "sweep/a.json", "rank": 1, "plateau": {"mean": 0.7, "lo80": 0.6, "hi80": 0.8},
                         "level_at_cut": 0.5, "p_highest": 0.9, "stop_now": False},
                        {"log": "sweep/b/trainer_state.json", "rank": 2,
                         "plateau": {"mean": 0.3, "lo80": 0.25, "hi80": 0.35}, "level_at_cut": 0.2,
                         "p_highest": 0.1, "stop_now": True}]}
    ahead = np.arange(11.0, 21.0)
    curves = {"sweep/a.json": {"steps": steps, "values": 0.05 * steps, "cut": 10.0,
                               "path": {"step": ahead, "mean": 0.5 + 0.01 * (ahead - 10), "lo": 0.4 + 0 * ahead,
                                        "hi": 0.9 + 0 * ahead}},
              "sweep/b/trainer_state.json": {"steps": steps, "values": 0.02 * steps, "cut": 10.0, "path": None}}
    fig = compare_figure(payload, curves)
    left, right = fig.axes
    # right: per run (best first, at y = 0, 1) its 80% interval, its point and its level now; the stopped one grey
    bars = [line for line in right.get_lines() if len(line.get_xdata()) == 2 and line.get_linestyle() == "-"]
    assert [tuple(b.get_xdata()) for b in bars] == [(0.6, 0.8), (0.25, 0.35)]
    assert [tuple(b.get_ydata()) for b in bars] == [(0, 0), (1, 1)]
    assert bars[1].get_color() == "0.6" and bars[0].get_color() != "0.6"
    texts = [t.get_text() for t in right.texts]
    assert texts == ["P(top) 0.90 · keep", "P(top) 0.10 · stop"]
    assert [t.get_text() for t in right.get_yticklabels()] == ["1. a", "2. b"]
    # left: one dashed mean curve, the run that has one, with its values; the best level so far dotted
    dashed = [line for line in left.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and np.allclose(dashed[0].get_ydata(), 0.5 + 0.01 * (ahead - 10))
    assert any(line.get_linestyle() == ":" and tuple(line.get_ydata()) == (0.5, 0.5) for line in left.get_lines())
    assert run_label("x/" + "a" * 30 + "_lr1e-6.json", width=20).endswith("_lr1e-6")
    assert run_label("panel.csv::lr3e-6") == "lr3e-6" and run_label("runs/lr0.001") == "lr0.001"
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_compare_takes_every_run_of_a_w_and_b_export(tmp_path):
    # a W&B panel export of two runs (one column per run): --compare FILE ranks both, each by its own column
    low, high = _history(0.3, 0.03, 5), _history(0.8, 0.03, 6)
    pd.DataFrame({"Step": [e["step"] for e in low], "run-low - train/reward": [e["reward"] for e in low],
                  "run-high - train/reward": [e["reward"] for e in high]}).to_csv(tmp_path / "panel.csv", index=False)
    out = tmp_path / "c.json"
    assert main(["forecast", "--compare", str(tmp_path / "panel.csv"), "--fraction", "0.25", "--reward-range", "0",
                 "1", "--json", str(out), "--png", str(tmp_path / "c.png")]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [run["log"] for run in runs] == [f"{tmp_path / 'panel.csv'}::run-high", f"{tmp_path / 'panel.csv'}::run-low"]
    assert runs[0]["plateau"]["mean"] > 0.7 and runs[1]["plateau"]["mean"] < 0.4


def test_compare_of_finished_runs_ends_each_at_its_level(tmp_path):
    paths = [str(_write("workflow_csv", tmp_path / f"r{i}", _history(rinf, 0.05, i))) for i, rinf in
             enumerate((0.4, 0.6))]
    out = tmp_path / "c.json"
    assert main(["forecast", "--compare", *paths, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["runs"][0]["log"] == paths[1] and abs(data["runs"][0]["plateau"]["mean"] - 0.6) < 0.03
    assert "reached the horizon" in data["runs"][0]["message"]


def test_compare_needs_two_logs_and_forecast_a_log(tmp_path, capsys):
    path = str(_write("workflow_csv", tmp_path / "r", _history(0.5, 0.03, 1)))
    assert main(["forecast", "--compare", path]) == 2
    assert "at least two logs" in capsys.readouterr().err
    assert main(["forecast"]) == 2
    assert main(["forecast", "--compare", path, path, "--stop-threshold", "1.5"]) == 2
    assert main(["forecast", "--compare", path, path, "--meta", str(tmp_path / "meta.json")]) == 2
    assert main(["forecast", "--compare", path, path, "--component-range", "fmt", "1", "0"]) == 2
    assert main(["forecast", path, "--component-range", "x", "1", "0"]) == 2
    capsys.readouterr()
    # several logs without --compare: told how to rank them, before any is read
    assert main(["forecast", path, str(tmp_path / "absent"), "--fraction", "0.25"]) == 2
    err = capsys.readouterr().err
    assert "one LOG at a time (2 given)" in err and "--compare LOG LOG" in err and "absent" not in err


def test_pgrpo_forecast_sums_the_reward_functions_of_a_staged_log(tmp_path, capsys):
    series = _staged_series()
    history = [{"step": int(s), "rewards/format/mean": float(a), "rewards/correct/mean": float(b)}
               for s, a, b in zip(T, series["format"][1], series["correct"][1])]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    out = tmp_path / "f.json"
    assert main(["forecast", str(path), "--fraction", "0.25", "--component-range", "correct", "0", "6",
                 "--target", "3", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    staged = data["components"]
    assert staged["functions"] == ["format", "correct"] and not staged["per_function"]["correct"]["started"]
    assert staged["waiting"] == ["correct"]  # not started, headroom 6 declared: the sum is the one to decide by
    assert data["plateau"]["hi80"] < 2.5 < staged["plateau"]["hi80"]  # the summed curve alone excludes the jump
    assert 0.2 < staged["p_plateau_at_least"] < 0.6
    assert main(["forecast", str(path), "--fraction", "0.25", "--component-range", "correct", "0", "6"]) == 0
    assert "correct waits to rise: decide by the sum below" in capsys.readouterr().out
    assert main(["forecast", str(path), "--component-range", "nope", "0", "1"]) == 2


def test_compare_ranks_a_run_whose_correctness_reward_has_not_paid_by_the_sum(tmp_path):
    """Two staged runs at the cut (step 100 of 400): A has learned its format reward (1.5) and its correctness reward
    is still at 0; B sits at 1.7 with both functions risen. A's reward alone reads flat at 1.5, below B's level: no
    chance to beat it, the stop rule would stop A. Its correctness function waits to rise (not started, and B-like
    headroom: the largest rise a started function shows, 1.397), so A is ranked by the sum: its band reaches
    1.5 + 1.4 in half of the draws, P(A beats the best so far) is near one half, and A is kept."""
    series = _staged_series()
    rng = np.random.default_rng(11)
    fmt_b = 1.0 * (1 - np.exp(-T / 30)) + rng.normal(0, 0.05, T.size)
    corr_b = 0.7 * (1 - np.exp(-T / 30)) + rng.normal(0, 0.05, T.size)
    paths = []
    for name, (a, b) in {"a": (series["format"][1], series["correct"][1]), "b": (fmt_b, corr_b)}.items():
        rows = [{"step": int(s), "reward": float(x + y), "rewards/format/mean": float(x),
                 "rewards/correct/mean": float(y)} for s, x, y in zip(T, a, b)]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"log_history": rows}))
        paths.append(str(path))
    out = tmp_path / "c.json"
    assert main(["forecast", "--compare", *paths, "--fraction", "0.25", "--target", "2.5", "--json", str(out)]) == 0
    runs = {Path(r["log"]).stem: r for r in json.loads(out.read_text())["runs"]}
    assert runs["a"]["components"]["waiting"] == ["correct"] and "components" not in runs["b"]
    assert runs["a"]["plateau"]["hi80"] > 2.6 and runs["a"]["plateau"]["lo80"] < 1.6
    assert 0.3 < runs["a"]["p_beats_best_so_far"] < 0.7 and not runs["a"]["stop_now"]
    assert 0.3 < runs["a"]["target"]["p_plateau_at_least"] < 0.6  # the sum's draws: reached in about half
    # declared, correct's headroom is its range's top (6, not the 1.4 a started function shows): the band reaches 7
    assert main(["forecast", "--compare", *paths, "--fraction", "0.25", "--component-range", "correct", "0", "6",
                 "--json", str(out)]) == 0
    declared = {Path(r["log"]).stem: r for r in json.loads(out.read_text())["runs"]}["a"]
    assert declared["plateau"]["hi80"] > 6.5 and declared["components"]["waiting"] == ["correct"]
    assert main(["forecast", "--compare", *paths, "--component-range", "nope", "0", "1"]) == 2


# --- the benchmark against the truth ------------------------------------------------------------------------------


def test_the_denoised_reference_recovers_a_line_and_follows_a_bend():
    from pgrpo.fit.truth import denoised_reference

    rng = np.random.default_rng(5)
    t = np.arange(0, 200, 2.0)
    line = 0.2 + 0.001 * t
    ref = denoised_reference(t, line + rng.normal(0, 0.05, t.size))
    assert np.sqrt(np.mean((ref.values - line) ** 2)) < 0.05 / 3  # far below the noise
    assert np.all(ref.se > 0) and np.all(ref.se < 0.05)
    bend = 0.5 + 0.3 * np.sin(t / 15)
    wiggly = denoised_reference(t, bend + rng.normal(0, 0.02, t.size))
    assert wiggly.bandwidth < 15 and np.sqrt(np.mean((wiggly.values - bend) ** 2)) < 0.02


def test_the_generated_families_are_their_closed_forms_logged_binomially():
    from pgrpo.fit.truth import FAMILY_BATCH, closed_form_families

    curves = {(g.family, g.member): g for g in closed_form_families()}
    fast = curves[("rise", "fast-low")]
    assert fast.truth[fast.steps == 24][0] == pytest.approx(0.1 + 0.4 * (1 - np.exp(-24 / 25)))
    assert np.allclose(fast.values * FAMILY_BATCH, np.round(fast.values * FAMILY_BATCH))  # k / B
    assert abs(np.mean(fast.values[-20:]) - np.mean(fast.truth[-20:])) < 0.05
    staged = curves[("two_stage", "onset190")]
    fmt, correct = staged.components["format"], staged.components["correct"]
    assert np.allclose(staged.truth, fmt[2] + correct[2]) and np.allclose(staged.values, fmt[1] + correct[1])
    assert correct[2][0] == pytest.approx(0.0) and correct[2][-1] > 0.55  # correctness starts at 0, rises late
    assert np.all(curves[("flat", "mid")].truth == 0.45)


def test_truth_scores_by_hand():
    from pgrpo.fit.truth import truth_scores

    t = np.arange(0, 100, 1.0)
    truth = 0.2 + 0.004 * t  # 0.2 .. 0.596
    early = t <= 24
    held = truth[~early]
    scores = truth_scores(t, truth, early, truth, 1.0, held.copy(), np.full(held.size, 0.296), 0.578, 91.0)
    assert scores["mean_rmse"] == 0 and scores["mean_rmse_ratio"] == 0
    assert scores["persistence_mean_rmse"] == pytest.approx(np.sqrt(np.mean((held - 0.296) ** 2)))
    assert scores["plateau_true"] == pytest.approx(np.mean(truth[-10:]))  # 0.578
    assert scores["plateau_error_range"] == pytest.approx(0.0, abs=1e-9)
    assert scores["persistence_plateau_error_range"] == pytest.approx(0.578 - 0.296)
    # t90: 90% of the change from the first 10% mean (0.218) to 0.578 is 0.542, first at t = 86
    assert scores["t90_true"] == 86 and scores["t90_true_error_share"] == pytest.approx(5 / 99)
    assert scores["truth_moves"] and scores["truth_kind"] == "true mean"


def test_a_sweep_of_flat_runs_is_ordered_and_stopped_without_loss(tmp_path):
    from pgrpo.fit.benchmark import Curve, default_methods, run_protocol, summarize
    from pgrpo.fit.forecaster import RunContext
    from pgrpo.stages.forecast_benchmark import run_forecast_benchmark

    rng = np.random.default_rng(8)
    t = np.arange(0, 200, 2.0)
    corpus = [Curve(f"s/{level}", "closed-form", "dev", "reward", t, rng.binomial(32, level, t.size) / 32,
                    context=RunContext(reward_range=(0.0, 1.0), batch=32), truth=np.full(t.size, level),
                    sweep="s", family="flat", provenance={"source": "test"}) for level in (0.2, 0.5, 0.8)]
    methods = {k: v for k, v in default_methods().items() if k in ("persistence", "forecaster")}
    rows = run_protocol(corpus, methods, fractions=[0.25])
    sweep = [r for r in rows if r.get("kind") == "sweep" and r["method"] == "forecaster"][0]
    assert sweep["pairs_right"] == 1.0 and sweep["pairs_right_at_cut"] == 1.0 and sweep["brier"] < 0.05
    assert sweep["stopped"] == 2 and sweep["steps_saved"] == pytest.approx(2 / 3 * 0.75)
    assert sweep["stop_loss_share"] == 0.0
    cell = [r for r in summarize(rows) if r["part"] == "closed-form: flat" and r["method"] == "forecaster"][0]
    assert cell["truth_kind"] == "true mean" and cell["truth_moves"] == 0 and cell["sweeps"] == 1
    run_forecast_benchmark(corpus, methods, str(tmp_path / "b.csv"), str(tmp_path / "b.md"), fractions=[0.25])
    text = (tmp_path / "b.md").read_text()
    assert "## Against the truth and in decisions" in text and "scored on the interval alone" in text
    from pgrpo.stages.readme import forecast_facts  # the README's facts read the CSV back, sweep rows included

    facts = forecast_facts(str(tmp_path / "b.csv"))
    assert {f["part"] for f in facts} == {"closed-form", "overall"}  # a family's own cell stays in the benchmark


def test_the_staged_method_keeps_a_late_rise_inside_the_plateau_band():
    import dataclasses

    from pgrpo.fit.benchmark import STAGED, Curve, default_methods, run_protocol
    from pgrpo.fit.forecaster import RunContext
    from pgrpo.fit.truth import closed_form_families

    g = [g for g in closed_form_families() if g.family == "two_stage" and g.member == "onset150"][0]
    curve = Curve("two", "closed-form", "dev", "reward", g.steps, g.values, truth=g.truth,
                  context=RunContext(reward_range=(0.0, 1.0)), family="two_stage",
                  components={fn: (c[0], c[1], c[3]) for fn, c in g.components.items()})
    methods = {k: v for k, v in default_methods().items() if k in ("persistence", "forecaster", STAGED)}
    rows = {r["method"]: r for r in run_protocol([curve], methods, fractions=[0.25])}
    assert rows[STAGED]["plateau_covered80"] and rows[STAGED]["plateau_hi80"] > 0.9
    # the correctness function waits to rise: the forecaster decides with the sum, the staged method's band
    assert rows["forecaster"]["plateau_covered80"]
    assert rows["forecaster"]["plateau_hi80"] == pytest.approx(rows[STAGED]["plateau_hi80"])
    # the summed curve alone (its functions not logged) reads the correctness as flat
    alone = {r["method"]: r for r in run_protocol([dataclasses.replace(curve, components=None)], methods,
                                                  fractions=[0.25])}
    assert not alone["forecaster"]["plateau_covered80"] and STAGED not in alone


def test_real_logs_of_one_study_are_a_sweep():
    from pgrpo.fit.benchmark import Curve
    from pgrpo.stages.forecast_benchmark import with_study_sweeps

    def curve(name, last, split="dev"):
        return Curve(f"{name}/reward", "real", split, "reward", np.arange(0, last + 1, 10.0), np.zeros(last // 10 + 1))

    curves = with_study_sweeps([curve("sun_a", 200), curve("sun_b", 200), curve("sun_c", 400), curve("ann_a", 200),
                                curve("sun_d", 200, "holdout"), curve("sun_e", 200, "holdout")])
    assert [c.sweep for c in curves] == ["real/sun/reward@200/dev"] * 2 + [None] * 2 + ["real/sun/reward@200/holdout"] * 2


def test_a_predictive_moves_onto_another_grid_by_linear_interpolation():
    """On its own steps a predictive is returned as it is; on a finer grid its mean and draws are interpolated
    (the midpoint of 1 and 3 is 2) and its intervals are quantiles of the interpolated value draws."""
    from pgrpo.fit.baselines import Predictive
    from pgrpo.fit.staged import predictive_on_grid

    draws = np.array([[1.0, 3.0], [3.0, 5.0]])
    p = Predictive("x", np.array([0.0, 2.0]), np.array([2.0, 4.0]), {}, draws, draws, np.array([]), 0.0)
    assert predictive_on_grid(p, np.array([0.0, 2.0])) is p
    q = predictive_on_grid(p, np.array([0.0, 1.0, 2.0]))
    assert q.mean.tolist() == [2.0, 3.0, 4.0] and q.mean_draws.tolist() == [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]
    assert q.intervals["lo80"].tolist() == pytest.approx([1.2, 2.2, 3.2])  # 10% between the two draws


def test_a_single_reward_not_yet_rising_keeps_its_headroom_when_the_lever_is_on():
    """The ``headroom`` lever (off by default): a reward flat at 0.2 of a declared [0, 1] keeps, in half of the
    draws, a rise of its whole headroom 0.8 at an onset uniform over the steps ahead, so the plateau's 80% band
    reaches the top while the mean curve (the point forecast) stays where it was; a reward already rising is left as
    it is."""
    from pgrpo.fit.forecaster import ForecasterSettings, RunContext, forecast_early_window

    rng = np.random.default_rng(3)
    t = np.arange(0, 60, 2.0)
    steps = np.arange(60, 240, 2.0)
    context = RunContext(reward_range=(0.0, 1.0), batch=32)
    flat = rng.binomial(32, 0.2, t.size) / 32
    off = forecast_early_window(t, flat, steps, context, ForecasterSettings())
    on = forecast_early_window(t, flat, steps, context, ForecasterSettings(headroom=True))
    np.testing.assert_allclose(on.mean, off.mean)
    assert "waiting" in on.details and on.details["waiting"]["headroom"] == pytest.approx(0.8, abs=0.05)
    last = np.mean(on.mean_draws[:, -9:], axis=1)
    risen = np.mean(last > 0.6)
    # a rise at an onset uniform over the horizon has happened by the last tenth in ~95% of the risen draws
    assert 0.35 < risen < 0.55
    assert np.quantile(last, 0.9) > 0.9 and np.quantile(np.mean(off.mean_draws[:, -9:], axis=1), 0.9) < 0.4
    assert on.mean_draws.max() <= 1.0
    rising = 0.1 + 0.6 * (1 - np.exp(-t / 20)) + rng.normal(0, 0.03, t.size)
    kept = forecast_early_window(t, rising, steps, context, ForecasterSettings(headroom=True))
    assert "waiting" not in (kept.details or {})


def test_the_summed_plateau_stays_inside_the_declared_range_and_its_own_band():
    """Two functions flat at 0.8 sum to 1.6, but the declared range of the logged reward tops at 1.0: the sum's curve,
    its draws and its plateau are all read inside [0, 1], and the band holds the point."""
    from pgrpo.fit.staged import forecast_components

    rng = np.random.default_rng(3)
    steps = np.arange(1.0, 201.0)
    series = {fn: (steps, np.clip(0.8 + rng.normal(0, 0.02, steps.size), 0, 1)) for fn in ("format", "answer")}
    staged = forecast_components(series, 0.25, 200.0, ranges={"format": (0.0, 1.0), "answer": (0.0, 1.0)},
                                 total_range=(0.0, 1.0))
    plateau = staged.plateau
    assert plateau["mean"] == 1.0 and plateau["lo80"] <= plateau["mean"] <= plateau["hi80"] <= 1.0
    assert max(staged.forecast["mean"]) <= 1.0 and max(staged.forecast["hi80"]) <= 1.0
    assert {fn: c.plateau["mean"] for fn, c in staged.per_function.items()} == pytest.approx(
        {"format": 0.8, "answer": 0.8}, abs=0.02)


def test_a_band_is_widened_to_hold_its_point_and_only_then():
    """band_holding: the 10% and 90% quantiles of 0..100 are 10 and 90; a point inside leaves them, a point below
    or above moves the nearer end to it, a NaN point or NaN draws are ignored."""
    from pgrpo.fit.intervals import band_holding

    draws = np.arange(0.0, 101.0)
    assert band_holding(draws, 50.0) == pytest.approx({"lo80": 10.0, "hi80": 90.0})
    assert band_holding(draws, 3.0) == pytest.approx({"lo80": 3.0, "hi80": 90.0})
    assert band_holding(draws, 97.0) == pytest.approx({"lo80": 10.0, "hi80": 97.0})
    assert band_holding(np.append(draws, np.nan), float("nan")) == pytest.approx({"lo80": 10.0, "hi80": 90.0})
    assert band_holding(draws, 120.0, level=0.5) == pytest.approx({"lo50": 25.0, "hi50": 120.0})


def test_plateau_and_t90_bands_hold_the_point_forecast():
    """A mean curve flat at 0 whose draws all sit at 1 (a flat law weighed over rising draws): the plateau's point is
    the curve's 0, and its band runs from 0 to 1 instead of excluding it."""
    from pgrpo.fit.baselines import Predictive
    from pgrpo.fit.forecaster import plateau_and_t90

    steps = np.arange(11.0, 101.0)
    draws = np.ones((50, steps.size))
    prediction = Predictive("x", steps, np.zeros(steps.size), {}, draws, draws, np.array([]), 0.0)
    out = plateau_and_t90(prediction, np.arange(1.0, 11.0), np.zeros(10), 100, 0.0)
    assert out["plateau"]["mean"] == 0.0
    assert out["plateau"]["lo80"] == 0.0 and out["plateau"]["hi80"] == pytest.approx(1.0)


def test_a_plateau_band_nothing_bounds_says_so():
    from pgrpo.fit.forecast import undeclared_range_note

    early = [0.2, 0.3, 0.4]  # logged up to the cut: [0.2, 0.4], spread 0.2
    note = undeclared_range_note(early, {"lo80": 0.1, "hi80": 0.65}, None)  # 0.65 > 0.4 + 0.2
    assert note and "[0.1, 0.65]" in note and "[0.2, 0.4]" in note and "--reward-range" in note
    assert undeclared_range_note(early, {"lo80": 0.05, "hi80": 0.55}, None) is None  # within a spread of them
    assert undeclared_range_note(early, {"lo80": -0.1, "hi80": 0.5}, None) is not None  # -0.1 < 0.2 - 0.2
    assert undeclared_range_note(early, {"lo80": -5.0, "hi80": 5.0}, (0.0, 1.0)) is None  # a declared range
    assert undeclared_range_note([0.3, 0.3], {"lo80": -5.0, "hi80": 5.0}, None) is None  # no spread to compare


def test_compare_forecasts_each_run_to_its_own_planned_length(tmp_path):
    # two TRL output folders mid-training (logged to step 100): their trainer_state.json plans 200 and 400 steps
    paths = []
    for name, rinf, planned in (("short", 0.8, 200), ("long", 0.6, 400)):
        folder = tmp_path / name / "checkpoint-100"
        folder.mkdir(parents=True)
        history = [e for e in _history(rinf, 0.03, planned) if e["step"] <= 100]
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": 100, "max_steps": planned,
                                                               "log_history": history}))
        paths.append(str(tmp_path / name))
    out = tmp_path / "c.json"
    assert main(["forecast", "--compare", *paths, "--reward-range", "0", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    horizons = {run["log"]: run["horizon"] for run in data["runs"]}
    assert horizons == {paths[0]: 200, paths[1]: 400} and data["horizon"] == 400
    assert all(run["cut_step"] == 100 for run in data["runs"])  # from everything logged
    assert data["horizon_source"] == "the runs' planned lengths"
    # the law at step 100 is 0.8 - 0.7 * 4 e^-3 = 0.66 and 0.6 - 0.5 * 4 e^-3 = 0.50: both still rise to their plans
    assert all(run["plateau"]["mean"] > run["level_at_cut"] for run in data["runs"])
    single = tmp_path / "f.json"
    assert main(["forecast", paths[1], "--fraction", "0.25", "--json", str(single)]) == 0
    assert json.loads(single.read_text())["total_steps"] == 400  # trainer_state's max_steps, not the last step
