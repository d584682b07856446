"""Seed aggregation (pgrpo.aggregate): hand-computed means and s.d., missing steps, foreign log formats, bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pgrpo.errors import InputError
from pgrpo.grpo.run_log import aggregate_seeds, normalize_column
from pgrpo.stages.aggregate import load_log, run_aggregate


def write_log(run_dir: Path, frame: pd.DataFrame, meta: dict | None = None) -> str:
    run_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "log.csv", index=False)
    if meta is not None:
        (run_dir / "meta.json").write_text(json.dumps(meta))
    return str(run_dir / "log.csv")


def two_seed_logs(root: Path) -> list[str]:
    # seed 42 logs steps 1-4, seed 3407 misses step 3; eval only on steps 2 and 4
    a = pd.DataFrame({"step": [1, 2, 3, 4], "reward": [0.1, 0.3, 0.5, 0.7], "kl": [0.0, 0.01, 0.02, 0.03],
                      "eval_reward": [np.nan, 0.2, np.nan, 0.6]})
    b = pd.DataFrame({"step": [1, 2, 4], "reward": [0.3, 0.5, 0.9], "kl": [0.0, 0.03, 0.05],
                      "eval_reward": [np.nan, 0.4, 0.8]})
    return [write_log(root / "tiny" / "G4" / "seed42", a), write_log(root / "tiny" / "G4" / "seed3407", b)]


def test_mean_sd_and_count_by_hand(tmp_path):
    logs = two_seed_logs(tmp_path / "train")
    out = tmp_path / "aggregate" / "tiny" / "G4.csv"
    run_aggregate(logs, str(out))
    agg = pd.read_csv(out).set_index("step")
    assert list(agg.index) == [1, 2, 3, 4]
    # step 2: rewards 0.3 and 0.5 -> mean 0.4, sample s.d. |0.3-0.5|/sqrt(2)
    assert agg.loc[2, "reward_mean"] == pytest.approx(0.4)
    assert agg.loc[2, "reward_sd"] == pytest.approx(0.2 / math.sqrt(2))
    assert agg.loc[2, "reward_n"] == 2
    # step 3 is missing in seed 3407: the mean is seed 42's value alone, not (0.5 + 0) / 2
    assert agg.loc[3, "reward_mean"] == pytest.approx(0.5)
    assert agg.loc[3, "reward_n"] == 1
    assert math.isnan(agg.loc[3, "reward_sd"])
    # eval only where measured
    assert agg.loc[4, "eval_reward_mean"] == pytest.approx(0.7)
    assert agg.loc[1, "eval_reward_n"] == 0 and math.isnan(agg.loc[1, "eval_reward_mean"])
    assert agg.loc[4, "kl_mean"] == pytest.approx(0.04)
    for column in ("reward", "kl", "eval_reward"):
        assert {f"{column}_mean", f"{column}_sd", f"{column}_n"} <= set(agg.columns)


def test_min_seeds_blanks_single_seed_steps(tmp_path):
    logs = [load_log(p) for p in two_seed_logs(tmp_path)]
    agg = aggregate_seeds(logs, min_seeds=2).set_index("step")
    assert math.isnan(agg.loc[3, "reward_mean"]) and agg.loc[3, "reward_n"] == 1
    assert agg.loc[4, "reward_mean"] == pytest.approx(0.8)


def test_three_seeds_sd_matches_numpy(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 20))
    logs = [pd.DataFrame({"step": np.arange(1, 21), "reward": v}) for v in values]
    agg = aggregate_seeds(logs)
    np.testing.assert_allclose(agg["reward_mean"], values.mean(axis=0))
    np.testing.assert_allclose(agg["reward_sd"], values.std(axis=0, ddof=1))


def test_trl_style_columns_and_duplicate_step_rows(tmp_path):
    # W&B/TRL export: train/ prefix, train/global_step, eval metrics on rows of their own, a text column
    frame = pd.DataFrame({
        "train/global_step": [1, 2, 2, 3],
        "train/reward": [0.1, 0.2, np.nan, 0.4],
        "eval/reward": [np.nan, np.nan, 0.5, np.nan],
        "note": ["a", "b", "c", "d"],
    })
    path = tmp_path / "export.csv"
    frame.to_csv(path, index=False)
    log = load_log(path)
    assert list(log["step"]) == [1, 2, 3]
    assert log.set_index("step").loc[2, "reward"] == pytest.approx(0.2)
    assert log.set_index("step").loc[2, "eval_reward"] == pytest.approx(0.5)
    assert "note" not in log.columns
    assert normalize_column("train/kl") == "kl" and normalize_column("eval/accuracy") == "eval_accuracy"


def test_trainer_state_json(tmp_path):
    state = {"log_history": [
        {"step": 1, "reward": 0.1, "loss": 0.0},
        {"step": 2, "reward": 0.3, "loss": 0.1},
        {"step": 2, "eval_reward": 0.25},
        {"step": 2, "train_runtime": 10.0},
    ]}
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state))
    log = load_log(path).set_index("step")
    assert log.loc[2, "reward"] == pytest.approx(0.3)
    assert log.loc[2, "eval_reward"] == pytest.approx(0.25)
    assert math.isnan(log.loc[1, "eval_reward"])


def test_bad_inputs_raise_one_line_input_errors(tmp_path):
    logs = two_seed_logs(tmp_path / "train")
    with pytest.raises(InputError, match="not found"):
        run_aggregate([str(tmp_path / "missing" / "log.csv")], str(tmp_path / "out.csv"))
    with pytest.raises(InputError, match="twice"):
        run_aggregate([logs[0], logs[0]], str(tmp_path / "out.csv"))
    no_step = tmp_path / "nostep.csv"
    pd.DataFrame({"reward": [0.1]}).to_csv(no_step, index=False)
    with pytest.raises(InputError, match="no step column"):
        run_aggregate([str(no_step)], str(tmp_path / "out.csv"))
    other = write_log(tmp_path / "train" / "tiny" / "G16" / "seed42", pd.DataFrame({"step": [1], "reward": [0.1]}))
    with pytest.raises(InputError, match="different runs"):
        run_aggregate([logs[0], other], str(tmp_path / "out.csv"))
    with pytest.raises(InputError, match="no log"):
        run_aggregate([], str(tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists()
