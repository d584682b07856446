"""`pgrpo forecast` on every saved log format, and the forecast benchmark's protocol end to end on a tiny corpus
(pgrpo.fit.forecast, pgrpo.fit.benchmark, pgrpo.stages.forecast_benchmark): every method scored and summarised,
workflow runs also scored against their other seeds' mean and the K_ref sweep on its decisions (issue 21), the
corpus readers with their splits and declared ranges, a baseline whose fit fails scored as persistence, and the
noise-floor and hindsight-cubic readings of a cell by hand."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from pgrpo.cli import main
from pgrpo.fit.baselines import BASELINES
from pgrpo.fit.benchmark import Curve, default_methods, run_protocol, summarize
from pgrpo.fit.forecaster import ForecasterSettings, RunContext
from tests._forecaster_helpers import T, three_phase

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


# --- a cell's readings: the noise floor and the cubic fitted in hindsight ----------------------------------


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
