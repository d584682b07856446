"""The forecaster and its baselines (pgrpo.fit.forecaster, pgrpo.fit.baselines, pgrpo.fit.forecast.forecast_run):
intervals that cover at their nominal rate on curves with known parameters and noise, each baseline recovering its
own generating law, falling and flat curves forecast (not refused), the law constraints (reward range, sampling
interval), `pgrpo forecast` on every saved log format, and the benchmark protocol end to end on a tiny corpus."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pandas as pd
import pytest
from pgrpo.cli import main
from pgrpo.fit.baselines import BASELINES, FAMILIES, baseline_forecast, fit_family
from pgrpo.fit.benchmark import Curve, default_methods, run_protocol, summarize
from pgrpo.fit.deviation import fit_deviation
from pgrpo.fit.forecast import forecast_run
from pgrpo.fit.forecaster import ForecasterSettings, RunContext, forecast_early_window, plateau_and_t90
from pgrpo.fit.intervals import crps_from_samples, interval_score, robust_noise_sd
from pgrpo.fit.laws import EXPONENTIAL, LAWS, THREE_PHASE, UNDERDAMPED
from pgrpo.fit.least_squares import fit_law, resolvable_rate

T = np.arange(1, 401, dtype=float)
EARLY = T <= 100


def three_phase(t, r0=0.1, rinf=0.7, omega=0.02):
    return LAWS[THREE_PHASE].curve(t, {"R0": r0, "R_inf": rinf, "omega_n": omega})


# --- intervals: nominal coverage on curves with known parameters and noise -----------------------------------------


@pytest.mark.parametrize("sigma", [0.03, 0.08])
def test_intervals_cover_at_their_nominal_rate(sigma):
    """Over 40 noisy three-phase curves (random plateau and rate, the inflection inside the window) the 80% and 95%
    intervals of the held-out logged values cover 80% and 95% of them, within simulation error."""
    rng = np.random.default_rng(1)
    hits80, hits95, points = 0, 0, 0
    for _ in range(40):
        rinf, omega = rng.uniform(0.5, 0.9), rng.uniform(0.02, 0.05)
        y = three_phase(T, 0.1, rinf, omega) + rng.normal(0, sigma, T.size)
        p = forecast_early_window(T[EARLY], y[EARLY], T[~EARLY], settings=ForecasterSettings(draws=300))
        held = y[~EARLY]
        hits80 += int(np.sum((held >= p.intervals["lo80"]) & (held <= p.intervals["hi80"])))
        hits95 += int(np.sum((held >= p.intervals["lo95"]) & (held <= p.intervals["hi95"])))
        points += held.size
    # 40 curves: a curve's misses are correlated (a biased plateau misses a run of points), s.e. ~ 0.03
    assert hits80 / points == pytest.approx(0.80, abs=0.08)
    assert hits95 / points == pytest.approx(0.95, abs=0.04)


def test_the_point_forecast_tracks_the_generating_curve():
    rng = np.random.default_rng(2)
    truth = three_phase(T, 0.1, 0.7, 0.03)
    y = truth + rng.normal(0, 0.03, T.size)
    p = forecast_early_window(T[EARLY], y[EARLY], T[~EARLY], RunContext(reward_range=(0.0, 1.0)))
    assert np.sqrt(np.mean((p.mean - truth[~EARLY]) ** 2)) < 0.03
    naive = baseline_forecast("persistence", T[EARLY], y[EARLY], T[~EARLY])
    assert np.sqrt(np.mean((y[~EARLY] - p.mean) ** 2)) < np.sqrt(np.mean((y[~EARLY] - naive.mean) ** 2))


def test_scores_by_hand():
    y = np.array([0.0, 1.0, 2.0])
    lo, hi = np.array([0.5, 0.5, 0.5]), np.array([1.5, 1.5, 1.5])
    # widths 1; misses 0.5 below and 0.5 above, each penalised 2/alpha = 10 at level 0.8
    assert interval_score(y, lo, hi, 0.8) == pytest.approx((1 + 1 + 1 + 10 * 0.5 + 10 * 0.5) / 3)
    # CRPS of a point mass at 0 against y = 1 is 1; of a two-point {0, 2} against 1: E|X-y| - E|X-X'|/2 = 1 - 0.5
    assert crps_from_samples(np.zeros((4, 1)), np.array([1.0])) == pytest.approx(1.0)
    assert crps_from_samples(np.array([[0.0], [2.0]]), np.array([1.0])) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    assert robust_noise_sd(np.cumsum(np.full(2000, 0.01)) + rng.normal(0, 0.1, 2000)) == pytest.approx(0.1, rel=0.1)


def test_the_deviation_model_finds_white_noise_white_and_a_persistent_offset_persistent():
    rng = np.random.default_rng(3)
    t = np.arange(200, dtype=float)
    white = fit_deviation(t, rng.normal(0, 1, t.size))
    assert white.white_weight > 0.3
    ou = np.zeros(t.size)
    for i in range(1, t.size):
        ou[i] = 0.97 * ou[i - 1] + rng.normal(0, 0.25)
    ou += 2.0  # a run sitting above its mean trajectory at the cut
    dev = fit_deviation(t, ou + rng.normal(0, 0.1, t.size))
    mean, var, _ = dev.forecast(t[-1] + np.array([1.0, 1000.0]))
    assert dev.white_weight < 0.05
    assert dev.weights @ mean[:, 0] > 1.0  # the deviation persists one step on
    assert abs(dev.weights @ mean[:, 1]) < 0.2 * abs(dev.weights @ mean[:, 0])  # and has relaxed 1000 steps on


# --- baselines recover their own laws -----------------------------------------------------------------------------


FAMILY_TRUTH = {
    "exponential": (0.1, 0.8, 0.01),
    "sigmoid": (0.1, 0.8, 120.0, 3.0),
    "power_law": (0.1, 0.02, 0.6),
    "mmf": (0.8, 0.1, 0.01, 2.0),
    "pow3": (0.8, 2.0, 0.7),
    "janoschek": (0.8, 0.1, 1e-4, 1.8),
    "weibull": (0.8, 0.1, 0.008, 1.5),
}


@pytest.mark.parametrize("name", sorted(FAMILY_TRUTH))
def test_each_baseline_family_recovers_its_generating_law(name):
    rng = np.random.default_rng(4)
    truth = FAMILIES[name].curve(T, *FAMILY_TRUTH[name])
    fit = fit_family(name, T, truth + rng.normal(0, 0.01, T.size))
    assert fit.success
    assert np.sqrt(np.mean((fit.predict(T) - truth) ** 2)) < 0.004  # well under the noise (0.01)
    if name in ("exponential", "sigmoid", "power_law"):
        # in data units: the amplitudes directly, the rate through the time scale
        p = fit.params
        if name == "exponential":
            assert fit.y_mean + fit.y_scale * p[1] == pytest.approx(0.8, abs=0.01)
            assert p[2] / fit.t_scale == pytest.approx(0.01, rel=0.05)
        if name == "sigmoid":
            assert p[2] * fit.t_scale == pytest.approx(120.0, rel=0.05)
            assert p[3] == pytest.approx(3.0, rel=0.1)
        if name == "power_law":
            assert p[2] == pytest.approx(0.6, abs=0.05)


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_forecasts_with_ordered_intervals(name):
    rng = np.random.default_rng(5)
    y = three_phase(T) + rng.normal(0, 0.03, T.size)
    p = baseline_forecast(name, T[EARLY], y[EARLY], T[~EARLY])
    assert p.success and p.mean.shape == (int((~EARLY).sum()),)
    assert np.all(p.intervals["lo95"] <= p.intervals["lo80"]) and np.all(p.intervals["lo80"] <= p.mean + 1e-9)
    assert np.all(p.intervals["hi80"] <= p.intervals["hi95"])


def test_persistence_carries_the_last_tenth_of_the_window_forward():
    y = np.concatenate([np.zeros(90), np.ones(10)])
    p = baseline_forecast("persistence", T[:100], y, T[100:])
    assert np.all(p.mean == 1.0)


def test_domhan_ensemble_recovers_an_mmf_curve():
    rng = np.random.default_rng(6)
    truth = FAMILIES["mmf"].curve(T, *FAMILY_TRUTH["mmf"])
    p = baseline_forecast("domhan", T[:200], truth[:200] + rng.normal(0, 0.01, 200), T[200:])
    assert np.sqrt(np.mean((p.mean - truth[200:]) ** 2)) < 0.02
    assert set(p.details["families"]) <= {"mmf", "pow3", "janoschek", "weibull"}


# --- curves that fall or never rise get a forecast ----------------------------------------------------------------


def test_a_falling_curve_gets_a_falling_forecast():
    rng = np.random.default_rng(7)
    truth = 0.3 + 0.5 * np.exp(-T / 80.0)
    y = truth + rng.normal(0, 0.02, T.size)
    result = forecast_run(T, y, 0.25, context=RunContext(reward_range=(0.0, 1.0)))
    assert result.success
    mean = np.asarray(result.forecast["mean"])
    assert mean[-1] < y[EARLY][-10:].mean() - 0.05
    assert abs(result.plateau["mean"] - truth[-40:].mean()) < 0.1
    assert result.plateau["lo80"] <= result.plateau["mean"] <= result.plateau["hi80"]


def test_a_flat_curve_gets_a_flat_forecast_with_its_noise():
    rng = np.random.default_rng(8)
    y = 0.4 + rng.normal(0, 0.05, T.size)
    result = forecast_run(T, y, 0.25)
    assert result.success
    mean = np.asarray(result.forecast["mean"])
    assert np.all(np.abs(mean - 0.4) < 0.03)
    held = y[~EARLY]
    inside = (held >= np.asarray(result.forecast["lo80"])) & (held <= np.asarray(result.forecast["hi80"]))
    assert 0.65 <= inside.mean() <= 0.95
    assert set(result.mixture) >= {"flat", "exponential", "three_phase"}


# --- what the data can show: the reward's range and the sampling interval -------------------------------------------


def test_an_alias_of_the_sampling_grid_is_not_fitted():
    """Points 25 steps apart cannot show 0.49 rad/step (the issue's G=4 eval curve): the underdamped fit is held to
    at most pi / (2 * 25) rad/step."""
    t = np.arange(0, 301, 25, dtype=float)
    rng = np.random.default_rng(9)
    y = three_phase(t, 0.2, 0.5, 0.02) + 0.03 * np.cos(0.49 * t) + rng.normal(0, 0.01, t.size)
    fit = fit_law(t, y, UNDERDAMPED)
    assert resolvable_rate(t) == pytest.approx(math.pi / 50)
    assert fit.success and fit.params["omega_n"] <= math.pi / 50 + 1e-9
    assert fit.derived["omega_d"] <= math.pi / 50 + 1e-9


def test_the_plateau_stays_inside_the_reward_range():
    t = np.arange(1, 76, dtype=float)
    y = np.linspace(0.2, 0.8, t.size) + np.random.default_rng(10).normal(0, 0.01, t.size)  # no bend: any plateau
    free = fit_law(t, y, EXPONENTIAL)
    bounded = fit_law(t, y, EXPONENTIAL, reward_range=(0.0, 1.0))
    assert free.success and free.R_inf > 1.0
    assert "longer than the data's span" in free.message  # the time scale is not constrained, and it says so
    assert bounded.success and bounded.R_inf <= 1.0 + 1e-9 and "range bound" in bounded.message


def test_a_declared_range_bounds_the_mean_curve_draws_and_the_plateau_band():
    """The run's mean cannot leave a declared reward range: a noisy run near its ceiling, whose early residuals
    wander (the random walk carried forward widens the draws), keeps every mean-curve draw, and so the plateau's
    80% band, inside [0, 1]; the point forecast is the draws' mean before the bound, as without it."""
    rng = np.random.default_rng(4)
    t = np.arange(1, 41, dtype=float)
    y = np.clip(0.9 + 0.08 * np.sin(t / 3.0) + rng.normal(0, 0.06, t.size), 0.0, 1.0)
    steps = np.arange(41, 161, dtype=float)
    p = forecast_early_window(t, y, steps, RunContext(reward_range=(0.0, 1.0)), ForecasterSettings(guard="off"))
    assert p.mean_draws.min() >= 0.0 and p.mean_draws.max() <= 1.0
    free = forecast_early_window(t, y, steps, RunContext(), ForecasterSettings(guard="off", range_prior=False))
    assert free.mean_draws.max() > 1.0  # the same draws unbounded do leave it
    plateau = plateau_and_t90(p, t, y, 160, float(y[0]))["plateau"]
    assert plateau["hi80"] <= 1.0


# --- `pgrpo forecast` on every saved log format ---------------------------------------------------------------------


def _history(seed: int = 11) -> list[dict]:
    rng = np.random.default_rng(seed)
    y = three_phase(T, 0.1, 0.7, 0.03) + rng.normal(0, 0.03, T.size)
    history = [{"step": int(s), "reward": float(v), "loss": 0.0} for s, v in zip(T, y)]
    history += [{"step": int(s), "eval_reward": float(three_phase(np.array([s]))[0]), "eval_loss": 0.1}
                for s in T[::50]]
    return sorted(history, key=lambda e: e["step"])


def _write_formats(tmp_path):
    history = _history()
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 400, "log_history": history}))
    (tmp_path / "history.json").write_text(json.dumps(history))
    folder = tmp_path / "trl_output" / "checkpoint-400"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    rows = [e for e in history if "reward" in e]
    pd.DataFrame({"Step": [e["step"] for e in rows], "run-x - train/reward": [e["reward"] for e in rows]}).to_csv(
        tmp_path / "wandb.csv", index=False)
    pd.DataFrame({"step": [e["step"] for e in rows], "reward": [e["reward"] for e in rows]}).to_csv(
        tmp_path / "log.csv", index=False)
    return {"trainer_state": tmp_path / "trainer_state.json", "log_history": tmp_path / "history.json",
            "output_folder": tmp_path / "trl_output", "wandb_csv": tmp_path / "wandb.csv",
            "workflow_csv": tmp_path / "log.csv"}


@pytest.mark.parametrize("fmt", ["trainer_state", "log_history", "output_folder", "wandb_csv", "workflow_csv"])
def test_pgrpo_forecast_writes_the_json_for_every_log_format(tmp_path, fmt):
    path = _write_formats(tmp_path)[fmt]
    out, fig = tmp_path / "f.json", tmp_path / "f.png"
    assert main(["forecast", str(path), "--fraction", "0.25", "--json", str(out), "--png", str(fig)]) == 0
    data = json.loads(out.read_text())
    assert data["success"] and data["method"] == "forecaster" and data["law"]
    forecast = data["forecast"]
    assert set(forecast) == {"step", "mean", "lo80", "hi80", "lo95", "hi95"}
    assert forecast["step"] == [float(s) for s in T if s > 100]  # every logged step after the cut
    for key in ("lo95", "lo80", "mean", "hi80", "hi95"):
        assert len(forecast[key]) == 300
    assert np.all(np.asarray(forecast["lo80"]) <= np.asarray(forecast["hi80"]))
    assert set(data["plateau"]) >= {"mean", "lo80", "hi80"} and set(data["t90"]) >= {"mean", "lo80", "hi80"}
    assert abs(data["plateau"]["mean"] - 0.7) < 0.05
    assert data["seen"]["persistence_rmse"] > 0 and data["held_out"]["ratio"] < 1
    assert sum(data["mixture"].values()) == pytest.approx(1.0)
    assert fig.stat().st_size > 0


def test_pgrpo_forecast_extends_a_run_in_progress_to_its_planned_length(tmp_path):
    path = _write_formats(tmp_path)["trainer_state"]
    out = tmp_path / "f.json"
    assert main(["forecast", str(path), "--fraction", "0.5", "--total-steps", "800", "--reward-range", "0", "1",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["cutoff_step"] == 400 and data["forecast"]["step"][-1] == 800.0
    assert max(data["forecast"]["hi95"]) <= 1.0  # the logged value stays in the declared range


def test_pgrpo_forecast_refuses_a_bad_range_in_one_line(tmp_path, capsys):
    path = _write_formats(tmp_path)["workflow_csv"]
    assert main(["forecast", str(path), "--reward-range", "1", "0"]) == 2
    assert "reward range" in capsys.readouterr().err


# --- the benchmark protocol on a tiny corpus ------------------------------------------------------------------------


def test_benchmark_protocol_scores_every_method_and_summarises(tmp_path):
    from pgrpo.stages.forecast_benchmark import run_forecast_benchmark

    rng = np.random.default_rng(12)
    t = np.arange(0, 121, dtype=float)
    corpus = [Curve(f"c{i}", "bandit" if i < 2 else "real", "dev" if i % 2 == 0 else "holdout", "reward", t,
                    three_phase(t, 0.1, 0.6 + 0.1 * i, 0.04) + rng.normal(0, 0.03, t.size),
                    context=RunContext(reward_range=(0.0, 1.0)), provenance={"source": "synthetic"})
                for i in range(4)]
    rows = run_protocol(corpus, default_methods(), fractions=[0.25])
    assert {r["method"] for r in rows} >= set(BASELINES) | {"forecaster"}
    summary = summarize(rows)
    overall = [r for r in summary if r["part"] == "overall" and r["split"] == "all" and r["method"] == "forecaster"]
    assert overall and 0 <= overall[0]["coverage80"] <= 1
    result = run_forecast_benchmark(corpus, default_methods(), str(tmp_path / "b.csv"), str(tmp_path / "b.md"),
                                    str(tmp_path / "b.png"), fractions=[0.25])
    text = (tmp_path / "b.md").read_text()
    assert "## Verdict at f = 0.25" in text and "forecaster" in text and "## Corpus" in text
    assert (tmp_path / "b.png").stat().st_size > 0 and len(pd.read_csv(tmp_path / "b.csv")) == len(result["rows"])


def test_workflow_runs_are_also_scored_against_their_other_seeds_mean(tmp_path):
    """Issue 21, item 1: a workflow run with seeds is scored against the mean of its other seeds at the same model
    and G (not another G's), smoothed; with a known truth shared by the seeds and little logging noise, those
    scores are the scores against the truth itself, computed here by hand."""
    from pgrpo.fit.benchmark import SEEDS_TRUTH, run_protocol, summarize
    from pgrpo.stages.forecast_benchmark import workflow_corpus

    truth = three_phase(T, 0.1, 0.7, 0.02)
    logs = []
    for index, (G, seed) in enumerate([(4, 42), (4, 7), (16, 1)]):
        run = tmp_path / "tiny" / f"G{G}" / f"seed{seed}"
        run.mkdir(parents=True)
        noisy = truth + np.random.default_rng(index).normal(0, 0.005, T.size)
        pd.DataFrame({"step": T, "reward": noisy}).to_csv(run / "log.csv", index=False)
        logs.append(run / "log.csv")
    curves = {c.id: c for c in workflow_corpus(logs)}
    mine, other = curves["tiny/G4/seed42/reward"], curves["tiny/G4/seed7/reward"]
    steps, mean = mine.seed_reference
    assert np.array_equal(steps, other.steps) and np.array_equal(mean, other.values)  # the other seed, not G16's
    assert curves["tiny/G16/seed1/reward"].seed_reference is None  # no other seed at G16
    methods = default_methods(ForecasterSettings(draws=100))
    rows = run_protocol([mine], methods, fractions=(0.25,))
    by_method = {r["method"]: r for r in rows if r.get("success")}
    early = T <= 0.25 * T[-1]
    for method in ("forecaster", "persistence"):
        r = by_method[method]
        mean = methods[method](mine, T[early], mine.values[early], T[~early], mine.context).mean  # deterministic
        assert r["seeds_truth_kind"] == SEEDS_TRUTH
        assert r["seeds_mean_rmse"] == pytest.approx(float(np.sqrt(np.mean((truth[~early] - mean) ** 2))),
                                                     rel=0.1, abs=0.002)
        assert r["seeds_plateau_true"] == pytest.approx(float(np.mean(truth[-round(0.1 * T.size):])), abs=0.003)
    cell = [c for c in summarize(rows) if c["part"] == f"workflow: {SEEDS_TRUTH}" and c["method"] == "forecaster"]
    assert len(cell) == 1 and cell[0]["truth_kind"] == SEEDS_TRUTH


def test_the_kref_sweep_of_the_main_job_is_a_sweep_per_arm_scored_on_decisions(tmp_path):
    """Issue 21, item 1: the K_ref sweep's grid runs of one arm and length are a sweep (its baseline is not one of
    them), one split per arm; the protocol scores the sweep's decisions: the forecast's order of the runs by where
    they end against the truth's (three runs that cross: the slow one ends highest)."""
    from pgrpo.fit.benchmark import run_protocol
    from pgrpo.stages.forecast_benchmark import kref_sweep_corpus, split_of

    logs = []
    members = {"baseline": (0.1, 0.5, 0.05), "lr0.1_kref1": (0.1, 0.5, 0.05), "lr0.1_kref4": (0.1, 0.6, 0.03),
               "lr0.1_kref16": (0.1, 0.8, 0.012)}
    for arm in ("sgd", "adam"):
        for run, (r0, rinf, omega) in members.items():
            folder = tmp_path / "results" / "kref_sweep" / arm / run
            folder.mkdir(parents=True)
            noisy = three_phase(T[:200], r0, rinf, omega) + np.random.default_rng(len(logs)).normal(0, 0.01, 200)
            pd.DataFrame({"step": T[:200], "reward": noisy}).to_csv(folder / "log.csv", index=False)
            (folder / "meta.json").write_text(json.dumps({"mu": 0.9, "k_ref": 4, "per_device_train_batch_size": 96}))
            logs.append(folder / "log.csv")
    lonely = tmp_path / "results" / "kref_sweep" / "adam" / "lr1_kref64"
    lonely.mkdir(parents=True)
    pd.DataFrame({"step": T[:50], "reward": three_phase(T[:50])}).to_csv(lonely / "log.csv", index=False)
    curves = kref_sweep_corpus(logs + [lonely / "log.csv"])
    assert sorted(c.id for c in curves if c.sweep == "kref/sgd/reward@200") == [
        "kref/sgd/lr0.1_kref1/reward", "kref/sgd/lr0.1_kref16/reward", "kref/sgd/lr0.1_kref4/reward"]
    assert not any("baseline" in c.id for c in curves)
    assert [c.sweep for c in curves if "kref64" in c.id] == [None]  # alone at its length
    assert {c.split for c in curves if c.id.startswith("kref/adam")} == {split_of("kref_sweep/adam")}
    assert curves[0].part == "kref sweep" and curves[0].context.batch == 96 and curves[0].context.k_ref == 4
    rows = run_protocol([c for c in curves if c.id.startswith("kref/sgd")],
                        default_methods(ForecasterSettings(draws=100)), fractions=(0.5,))
    sweep = [r for r in rows if r.get("kind") == "sweep" and r["method"] == "forecaster"]
    assert len(sweep) == 1 and sweep[0]["pairs_right"] == 1.0  # three well-separated plateaus, ordered right


def test_corpus_readers_take_the_workflow_runs_and_the_public_logs_with_their_split(tmp_path):
    from pgrpo.stages.forecast_benchmark import real_corpus, split_of, workflow_corpus

    run = tmp_path / "train" / "tiny" / "G4" / "seed42"
    run.mkdir(parents=True)
    y = three_phase(T[:40])
    pd.DataFrame({"step": T[:40], "reward": y, "eval_reward": np.where(T[:40] % 5 == 0, y, np.nan)}).to_csv(
        run / "log.csv", index=False)
    (run / "meta.json").write_text(json.dumps({"eta": 1e-3, "mu": 0.9, "k_ref": 1, "per_device_train_batch_size": 32}))
    own = workflow_corpus([run / "log.csv"])
    assert [c.column for c in own] == ["reward"]  # eval_reward has 8 points, fewer than a curve needs
    assert own[0].context.reward_range == (0.0, 1.0) and own[0].context.batch == 32 and own[0].group == "tiny"
    assert own[0].split == split_of("tiny/G4/seed42") and own[0].eval_steps.size == 8
    twin = tmp_path / "train" / "tiny" / "G16" / "seed1"
    twin.mkdir(parents=True)
    every = np.where(T[:40] % 2 == 0, y, np.nan)  # 20 eval points: a curve of its own
    pd.DataFrame({"step": T[:40], "reward": y, "eval_reward": every, "eval_accuracy": every,
                  }).to_csv(twin / "log.csv", index=False)
    assert [c.column for c in workflow_corpus([twin / "log.csv"])] == ["reward", "eval_reward"]  # accuracy = reward
    data = tmp_path / "data"
    data.mkdir()
    history = [{"step": int(s), "reward": float(v)} for s, v in zip(T[:30], y[:30])]
    (data / "a.json").write_text(json.dumps({"source": {"repo": "x/y", "license": "MIT"}, "task": "GSM8K, binary "
                                             "correctness reward", "log_history": history}))
    (data / "labels.json").write_text(json.dumps({"a.json": {"split": "holdout"}}))
    assert real_corpus(data)[0].context.reward_range is None  # a range is declared in ranges.json, not guessed
    (data / "ranges.json").write_text(json.dumps({"a.json": {"reward_range": [0, 1], "reward_function_ranges": {}}}))
    real = real_corpus(data)
    assert len(real) == 1 and real[0].split == "holdout" and real[0].context.reward_range == (0.0, 1.0)
    assert real[0].provenance["source"]["license"] == "MIT"
    # a log labels.json does not name takes the rule's split of its file name: holdout iff sha1(name) % 3 == 0
    for name in ("b.json", "g.json"):
        (data / name).write_text((data / "a.json").read_text())
    rule = {name: "holdout" if int(hashlib.sha1(name.encode()).hexdigest(), 16) % 3 == 0 else "dev"
            for name in ("b.json", "g.json")}
    assert rule == {"b.json": "dev", "g.json": "holdout"}
    splits = {c.provenance["file"]: c.split for c in real_corpus(data)}
    assert splits == {"a.json": "holdout", **rule}
    assert real_corpus(tmp_path / "absent") == []


def test_declared_ranges_reach_the_reward_and_each_function_as_its_term_in_the_reward(tmp_path):
    """``ranges.json`` holds the source's ranges, each function's in its own units; TRL logs the reward as
    sum(w_i r_i), so a function of weight 2 declared [0, 1] is a term in [0, 2] of the reward (weight read off the
    log). A range that is not LO < HI names its file and key before any work."""
    from pgrpo.errors import InputError
    from pgrpo.stages.diagnose_benchmark import declared_ranges
    from pgrpo.stages.forecast_benchmark import real_corpus

    rng = np.random.default_rng(0)
    fmt, acc = rng.uniform(0, 1, 40), rng.uniform(0, 1, 40)
    history = [{"step": int(s), "reward": float(x + 2 * y), "rewards/fmt/mean": float(x), "rewards/acc/mean": float(y)}
               for s, x, y in zip(range(1, 41), fmt, acc)]
    (tmp_path / "r.json").write_text(json.dumps({"source": {}, "log_history": history}))
    (tmp_path / "labels.json").write_text(json.dumps({"r.json": {"split": "dev"}}))
    (tmp_path / "ranges.json").write_text(json.dumps({"r.json": {
        "reward_range": [0, 3], "reward_function_ranges": {"fmt": [0, 1], "acc": [0, 1], "gone": None}}}))
    curve = real_corpus(tmp_path)[0]
    assert curve.context.reward_range == (0.0, 3.0)
    assert curve.components["fmt"][2] == pytest.approx((0.0, 1.0))
    assert curve.components["acc"][2] == pytest.approx((0.0, 2.0))
    assert declared_ranges(tmp_path)["r.json"]["reward_function_ranges"] == {"fmt": (0.0, 1.0), "acc": (0.0, 1.0)}
    (tmp_path / "ranges.json").write_text(json.dumps({"r.json": {"reward_range": [3, 0]}}))
    with pytest.raises(InputError, match=r"ranges\.json: 'r\.json' reward_range: must be null or two finite"):
        real_corpus(tmp_path)


# --- the level guard: a handful of points, the smoothed end level, a failed baseline --------------------------------


def test_too_few_points_carry_the_end_level_forward_with_the_mixtures_spread():
    """Four eval points of a rise (0, 25, 50, 75; the workflow's eval column at f = 0.25): only the flat law fits, and
    its mean (0.3175) lags; the guard centres on the last point (persistence's last 10% of 4 points is 1 point)."""
    t = np.array([0.0, 25.0, 50.0, 75.0])
    y = np.array([0.24, 0.24, 0.36, 0.43])
    steps = np.arange(100.0, 301.0, 25.0)
    context = RunContext(reward_range=(0.0, 1.0))
    raw = forecast_early_window(t, y, steps, context, ForecasterSettings(guard="off", flat_level="mean", center="best"))
    guarded = forecast_early_window(t, y, steps, context)
    assert np.allclose(raw.mean, np.mean(y))  # the flat law's best fit alone: the window's mean
    assert np.allclose(guarded.mean, 0.43)
    assert guarded.details["guard"]["law_weight"] == 0.0 and "too few" in guarded.details["guard"]["reason"]
    # the spread is the mixture's (same settings, guard off), moved with the centre (no clip: far from 0 and 1)
    mixture = forecast_early_window(t, y, steps, context, ForecasterSettings(guard="off"))
    assert np.allclose(guarded.intervals["hi80"] - guarded.intervals["lo80"],
                       mixture.intervals["hi80"] - mixture.intervals["lo80"], atol=1e-9)


def test_the_smoothed_level_is_the_mean_of_flat_noise_and_the_new_level_after_a_step():
    from pgrpo.fit.level_guard import smoothed_level

    level, sd, alpha = smoothed_level(np.full(20, 0.5))  # no error for any alpha: the first (0.02), level exact
    assert level == pytest.approx(0.5) and sd == pytest.approx(0.0) and alpha == pytest.approx(0.02)
    rng = np.random.default_rng(21)
    noise = 0.4 + rng.normal(0, 0.05, 400)
    level, sd, alpha = smoothed_level(noise)
    assert alpha <= 0.1 and abs(level - 0.4) < 3 * 0.05 * math.sqrt(alpha / (2 - alpha)) + 0.01
    step = np.concatenate([np.full(30, 0.2), np.full(30, 0.8)]) + rng.normal(0, 0.01, 60)
    level, _, alpha = smoothed_level(step)
    assert abs(level - 0.8) < 0.02 and alpha > 0.5
    # the recursion by hand for y = (0, 1, 1): alpha = 1 makes errors (1, 0), the least SSE; level 1
    assert smoothed_level(np.array([0.0, 1.0, 1.0]))[0] == pytest.approx(1.0)


def test_a_baseline_whose_fit_fails_is_scored_as_persistence():
    from pgrpo.fit.baselines import Predictive
    from pgrpo.fit.benchmark import baseline_method

    def failing(curve, t, y, steps, context):
        nan = np.full(steps.size, np.nan)
        return Predictive("sigmoid", steps, nan, {}, nan[None, :], nan[None, :], nan, float("nan"), success=False)

    t = np.arange(0, 81, dtype=float)
    curve = Curve("c", "real", "dev", "reward", t, 0.3 + 0.01 * np.sin(t), context=RunContext())
    rows = run_protocol([curve], {"persistence": baseline_method("persistence"), "sigmoid": failing}, [0.25])
    by_method = {r["method"]: r for r in rows}
    assert by_method["sigmoid"]["fell_back_to_persistence"] is True
    assert by_method["sigmoid"]["rmse"] == pytest.approx(by_method["persistence"]["rmse"])


def test_the_noise_floor_reading_of_a_cell_by_hand():
    """Persistence at 1, floor at 0.6: a ratio of 0.8 closes (1 - 0.8) / (1 - 0.6) = 50% of the gap; a floor at or
    above the 0.85 target leaves it out of any method's reach."""
    from pgrpo.tables.forecast_benchmark import floor_reading

    assert "closes 50% of the gap" in floor_reading(0.8, 0.6)
    assert "closes -25% of the gap" in floor_reading(1.1, 0.6)  # worse than persistence
    assert "no method can meet it" in floor_reading(0.9, 0.918)
    assert floor_reading(0.9, float("nan")) == "no noise floor"
    # a cubic fitted in hindsight to the held-out values at 0.872 x persistence: the 0.85 target is under it
    assert "out of any forecast's reach" in floor_reading(0.9, 0.6, hindsight=0.872)
    assert "closes 50% of the gap" in floor_reading(0.8, 0.6, hindsight=0.70)  # under the target: the floor speaks
    # a floor of 1.046 over the target, a hindsight cubic at 0.777 under it: the floor estimate is loose here
    assert "the two bounds disagree" in floor_reading(0.98, 1.046, hindsight=0.777)
    assert "no method can meet it" in floor_reading(0.98, 1.046)  # the floor alone


def test_the_verdict_names_the_targets_a_hindsight_cubic_cannot_meet():
    """A cell whose hindsight cubic is at 0.872 x persistence and 0.914 x the best baseline: both RMSE targets are
    out of reach and the verdict says so with those numbers; a cell whose cubic is at 0.6 / 0.7 gets the floor's
    reading and no such clause."""
    from pgrpo.fit.benchmark import HINDSIGHT
    from pgrpo.tables.forecast_benchmark import verdict_lines

    def row(part, method, ratio, to_best):
        return {"part": part, "split": "dev", "fraction": 0.25, "method": method, "curves": 5, "rmse_ratio": ratio,
                "noise_floor_ratio": 0.6, "ratio_to_best_baseline": to_best, "best_baseline": "domhan",
                "coverage80": 0.8}

    summary = [row("real", "forecaster", 0.9, 0.95), row("real", HINDSIGHT, 0.872, 0.914),
               row("bandit", "forecaster", 0.8, 0.95), row("bandit", HINDSIGHT, 0.6, 0.7)]
    bandit, real = sorted(verdict_lines(summary), key=lambda line: line.startswith("- **real"))
    assert "reaches 0.872 x: the target is under the best smooth curve" in real
    assert "reaches 0.914 x it: out of any forecast's reach" in real
    assert "closes 50% of the gap" in bandit and "reaches" not in bandit
    # the share of the gap from persistence to the cubic closed: (1 - 0.9) / (1 - 0.872) = 78%, (1 - 0.8) / 0.4 = 50%
    assert "closes 78% of the gap from persistence to the hindsight cubic" in real
    assert "closes 50% of the gap from persistence to the hindsight cubic" in bandit


def test_the_hindsight_cubic_is_the_least_squares_cubic_through_the_held_out_values():
    """A tail that is a cubic in the step is matched exactly (RMSE 0); on a noisy tail the hindsight fit is
    numpy.polyfit's cubic in the raw step (an independent fit), and its RMSE is at most that of the generating curve
    and of the tail's own mean (least squares over a family holding both)."""
    from pgrpo.fit.benchmark import HINDSIGHT, ORACLE, hindsight_method, oracle_method

    t = np.arange(0.0, 201.0)
    held = t > 50
    cubic = 0.2 + 1e-3 * t - 4e-6 * t**2 + 1e-8 * t**3
    curve = Curve("c", "bandit", "dev", "reward", t, cubic)
    exact = hindsight_method()(curve, t[~held], cubic[~held], t[held], RunContext())
    assert exact.method == HINDSIGHT and np.sqrt(np.mean((exact.mean - cubic[held]) ** 2)) < 1e-9

    rng = np.random.default_rng(3)
    truth = 0.8 - 0.6 * np.exp(-t / 40.0)
    noisy = truth + 0.05 * rng.standard_normal(t.size)
    curve = Curve("n", "bandit", "dev", "reward", t, noisy)
    fit = hindsight_method()(curve, t[~held], noisy[~held], t[held], RunContext())
    reference = np.polyval(np.polyfit(t[held], noisy[held], 3), t[held])
    np.testing.assert_allclose(fit.mean, reference, atol=1e-9)

    def score(mean):
        return float(np.sqrt(np.mean((noisy[held] - mean) ** 2)))

    tail_mean = oracle_method()(curve, t[~held], noisy[~held], t[held], RunContext())
    assert tail_mean.method == ORACLE
    assert score(fit.mean) <= score(truth[held]) and score(fit.mean) <= score(tail_mean.mean)
    assert np.all(fit.intervals["lo80"] <= fit.mean) and np.all(fit.mean <= fit.intervals["hi80"])


def test_the_power_tail_deficit_by_hand_and_its_law_recovers_its_own_curve():
    """``(1 + r t)^(-alpha)`` at r = 1, t = 3: 1/4 for alpha = 1, 1/16 for alpha = 2. A curve with a 1/t approach
    (R0 = 0.2, R_inf = 0.9, r = 0.05, alpha = 1: the softmax-PG rate) plus noise: the power-tail law alone takes the
    mixture's weight against the exponential, finds alpha = 1, and forecasts the tail within the noise."""
    from pgrpo.fit.shape_grid import deficit_power_tail

    assert deficit_power_tail(np.array([0.0, 3.0]), 1.0, 1.0) == pytest.approx([1.0, 0.25])
    assert deficit_power_tail(np.array([3.0]), 1.0, 2.0) == pytest.approx([1.0 / 16])
    rng = np.random.default_rng(5)
    truth = 0.9 - 0.7 * deficit_power_tail(T, 0.05, 1.0)
    y = truth + rng.normal(0, 0.01, T.size)
    settings = ForecasterSettings(laws=("exponential", "power_tail"), guard="off")
    p = forecast_early_window(T[EARLY], y[EARLY], T[~EARLY], RunContext(reward_range=(0.0, 1.0)), settings)
    assert p.details["weights"]["power_tail"] > 0.9
    assert p.details["params"]["power_tail"]["alpha"] == 1.0
    assert np.sqrt(np.mean((p.mean - truth[~EARLY]) ** 2)) < 0.02


def test_t90_is_that_of_the_point_forecast_with_the_draws_mean_beside_it():
    """Early log flat at 0 (steps 0-9), the mean curve 0 until step 14 then 1 (plateau: the last 10% of 20 steps = 1,
    t90 = 15). Half the draws are that curve (t90 = 15), half rise at step 19 only (their plateau 0.5, reached at
    19): the draws' mean t90 is 17, a step neither mode has; t90's ``mean`` is the point forecast's 15."""
    from pgrpo.fit.baselines import Predictive
    from pgrpo.fit.forecaster import plateau_and_t90

    steps = np.arange(10.0, 20.0)
    mean = np.where(steps >= 15, 1.0, 0.0)
    late = np.where(steps >= 19, 1.0, 0.0)
    draws = np.vstack([mean] * 50 + [late] * 50)
    prediction = Predictive("forecaster", steps, mean, {}, draws, draws, np.zeros(10), 0.1)
    summary = plateau_and_t90(prediction, np.arange(10.0), np.zeros(10), 20, 0.0)
    assert summary["plateau"]["mean"] == pytest.approx(1.0)
    assert summary["t90"]["mean"] == 15.0 and summary["t90"]["mean_of_draws"] == pytest.approx(17.0)
    assert (summary["t90"]["lo80"], summary["t90"]["hi80"]) == (15.0, 19.0)


def test_the_slowest_rate_of_each_law_by_hand():
    """The time scale the window note compares with the window: each law's slowest approach."""
    from pgrpo.fit.shape_grid import slowest_rate

    assert slowest_rate("exponential", {"lambda": 0.1}) == 0.1
    assert slowest_rate("overdamped", {"omega_n": 0.2, "zeta": 1.25, "slow_pole": 0.1}) == 0.1
    assert slowest_rate("two_mode", {"slow": 0.01, "fast": 0.1, "w_slow": 0.5}) == 0.01
    assert slowest_rate("power_tail", {"rate": 0.05, "alpha": 1.0}) == 0.05
    assert slowest_rate("theory", {"K_eta": 0.1, "omega_n": 0.4, "zeta": 0.5}) == pytest.approx(0.2)
    assert slowest_rate("flat", {}) is None


# --- the mean-curve guard weight and the residual drift (issue 21): hand-computed cases ------------------------------


def test_the_excess_mse_weight_subtracts_the_noise_both_forecasts_share():
    """Backtest MSEs 0.05 (law) and 0.09 (level) on points of noise variance 0.04, 10 points scored: the floor is
    0.04 / 10 = 0.004, the excesses 0.01 + 0.004 = 0.014 and 0.05 + 0.004 = 0.054, so w_law = 0.054 / 0.068 = 0.7941
    (Bates-Granger on the raw MSEs: 0.09 / 0.14 = 0.6429); both below the noise: only the floors, 0.5."""
    from pgrpo.fit.level_guard import excess_mse_weight

    assert excess_mse_weight(0.05, 0.09, 0.04, 10) == pytest.approx(0.054 / 0.068)
    assert excess_mse_weight(0.05, 0.09, 0.0, 10) == pytest.approx(0.09 / 0.14)
    assert excess_mse_weight(0.03, 0.035, 0.04, 10) == pytest.approx(0.5)
    assert excess_mse_weight(0.0, 0.0, 0.0, 10) == pytest.approx(0.5)


def test_the_guard_excess_mode_reports_the_weight_of_its_backtest():
    """A straight rise 0.1 + 0.01 t on 20 points without noise: the law mixture fitted on the first 10 follows it,
    the level of the first half's end (0.19) misses the second half by 0.01 .. 0.10, so the law gets nearly all the
    weight (noise s.d. 0: the excesses are the MSEs themselves)."""
    from pgrpo.fit.level_guard import guard_weight

    t = np.arange(20.0)
    y = 0.1 + 0.01 * t

    def mixture(ta, ya, sa):
        return forecast_early_window(ta, ya, sa, RunContext(reward_range=(0.0, 1.0)), ForecasterSettings(guard="off",
                                                                                                        draws=60))

    weight = guard_weight(t, y, mixture, "excess", 8)
    level_mse = float(np.mean((y[10:] - 0.19) ** 2))  # the level: the mean of the last 10% of 10 points, y[9]
    assert weight.backtest_level_rmse == pytest.approx(math.sqrt(level_mse), rel=1e-6)
    assert weight.backtest_law_rmse < 0.2 * weight.backtest_level_rmse
    assert weight.law_weight > 0.95


def test_the_ses_drift_is_etss_level_variance():
    """ETS(A,N,N): h-step variance sigma^2 (1 + alpha^2 (h - 1)); the level's part for alpha 0.2, sigma 0.1:
    0.02 sqrt(h - 1): 0 at h = 0 and 1, 0.04 at h = 5, 0.2 at h = 101."""
    from pgrpo.fit.level_guard import ses_drift_sd

    assert np.allclose(ses_drift_sd(0.2, 0.1, np.array([0.0, 1.0, 5.0, 101.0])), [0.0, 0.0, 0.04, 0.2])


def test_the_residual_drift_is_zero_for_explained_windows_and_grows_for_a_step_the_laws_miss():
    """Residuals 0 everywhere: no drift. Residuals 0, 0, 0, 0, 1, 1, 1, 1 (a step the laws missed), steps 0..7: simple
    exponential smoothing's one-step SSE is least at alpha = 1 (one error of 1, at the step), sigma = sqrt(1/7); at
    steps 8, 10, 17 (h = 1, 3, 10 intervals ahead) the drift is sigma sqrt(h - 1) = 0, sqrt(2/7), 3 sqrt(1/7)."""
    from pgrpo.fit.forecaster import residual_drift_sd

    t = np.arange(8.0)
    steps = np.array([8.0, 10.0, 17.0])
    assert np.allclose(residual_drift_sd(t, np.zeros(8), steps), 0.0)
    drift = residual_drift_sd(t, np.array([0.0, 0, 0, 0, 1, 1, 1, 1]), steps)
    assert np.allclose(drift, [0.0, math.sqrt(2.0 / 7.0), 3.0 * math.sqrt(1.0 / 7.0)])


@pytest.mark.parametrize("law", ["exponential", "three_phase", "overdamped", "two_mode", "power_tail", "theory"])
def test_each_grid_row_of_deficits_is_its_law_at_that_point_alone(law):
    """The grid's deficits, computed for all points at once, are bitwise each point's own formula (laws.py and
    shape_grid.py, one point and a row of times), so the vectorised grid changes no forecast."""
    from pgrpo.fit.laws import deficit_exponential, deficit_overdamped, deficit_three_phase
    from pgrpo.fit.shape_grid import deficit_power_tail, shape_grid, theory_deficit

    def alone(shape: dict) -> np.ndarray:
        if law == "exponential":
            return deficit_exponential(t, shape["lambda"])
        if law == "three_phase":
            return deficit_three_phase(t, shape["omega_n"])
        if law == "overdamped":
            return deficit_overdamped(t, shape["omega_n"], shape["zeta"])
        if law == "two_mode":
            w = shape["w_slow"]
            return w * np.exp(-shape["slow"] * t) + (1.0 - w) * np.exp(-shape["fast"] * t)
        if law == "power_tail":
            return deficit_power_tail(t, shape["rate"], shape["alpha"])
        return theory_deficit(t, shape["omega_n"], shape["zeta"])

    t = np.concatenate([np.arange(0.0, 300.0, 1.0), [1e-9, 0.5, 1e4]])
    grid = shape_grid(law, 1e-3, 1.5, mu=0.9, k_ref=2.0)
    together = grid.deficits(t)
    assert together.shape == (len(grid.shapes), t.size)
    for row, shape in zip(together, grid.shapes):
        assert np.array_equal(row, alone(shape))
    assert np.array_equal(grid.deficits(t), together)  # the cached parameter columns give the same again


def test_an_amplitude_draw_is_numpys_multivariate_normal_from_the_same_generator():
    """``_amplitude_draw`` reuses one SVD factor per grid point; its draws are those of
    ``Generator.multivariate_normal(mean, scale * cov)`` from a generator in the same state, near-singular and
    slightly indefinite covariances included, and a point with a non-finite covariance keeps its best amplitudes."""
    from pgrpo.fit.forecaster import LawFit, _amplitude_draw
    from pgrpo.fit.shape_grid import shape_grid

    source = np.random.default_rng(3)
    covs = []
    for k in range(40):
        a = source.standard_normal((2, 2)) * 10 ** source.uniform(-6, 2)
        cov = a @ a.T
        if k % 5 == 0:
            cov[0, 1] = cov[1, 0] = math.sqrt(cov[0, 0] * cov[1, 1]) * (1 + 1e-7)
        covs.append(cov)
    covs.append(np.full((2, 2), np.nan))
    grid = shape_grid("exponential", 1e-3, 1.0)
    n = len(covs)
    fit = LawFit("exponential", grid, np.zeros(n), np.ones(n), np.zeros(n), np.zeros(n), 10, 3, np.array(covs))
    ours, numpys, factors = np.random.default_rng(11), np.random.default_rng(11), {}
    for repeat in range(3):
        for i in range(n):
            mean = (0.1 * i, 0.5 + 0.01 * i)
            got = _amplitude_draw(fit, i, *mean, 1.7, ours, factors)
            if i == n - 1:
                assert got == mean
                continue
            want = numpys.multivariate_normal(mean, fit.cov[i] * 1.7, check_valid="ignore")
            assert got == (float(want[0]), float(want[1]))
