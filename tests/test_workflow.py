"""The whole workflow, end to end, on a shrunken embedded default: every rule really runs (slow)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest
import yaml

SMOKE_OVERRIDES = {
    "group_sizes": [4],
    "seeds": [1, 2],
    "synthetic": {"sizes": {"sft": 600, "val": 16, "train": 64, "test": 32, "ood": 16},
                  "suite": {name: {"size": 16} for name in ("distractors", "larger-numbers", "heldout-mix")}},
    "tiny": {
        "architecture": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                         "num_attention_heads": 2, "num_key_value_heads": 1},
        "warmstart": {"steps": 20, "batch_size": 16, "eval_every": 10, "val_examples": 8},
        "eval": {"examples": 8},
    },
    "training": {"max_steps": 8, "eval_steps": 4, "checkpoint_steps": 4, "per_device_train_batch_size": 8,
                 "gradient_accumulation_steps": 1, "max_completion_length": 12, "num_generations_eval": 4,
                 "per_device_eval_batch_size": 16},
    "evaluation": {"num_samples": 5, "max_new_tokens": 12},
    # three benchmarks of the default's graded suite, smaller: the training distribution, a set of the suite (all three
    # are made by one job) and the out-of-distribution one (each benchmark is 3 evaluation jobs, mostly start-up)
    "benchmarks": {name: {"max_examples": 16} for name in ("synthetic-test", "synthetic-ood", "synthetic-heldout-mix")},
    "bandit": {
        "calibration": {"steps": 3000},
        "sweep": {"k_refs": [1, 4, 8], "steps": 100, "settle_steps": 400, "dense_k_ref_max": 8},
        "regime_map": {"etas": {"min": 0.05, "max": 0.5, "n": 4}, "k_refs": {"min": 1, "max": 20, "n": 4},
                       "steps": 400},
        "readings": [{"refresh": "sliding", "gradient": "stale"}],
        "sensitivity": {"rewards": [[0, 0, 0, 1]], "etas_n": 3, "k_refs_n": 3, "steps": 300},
        "finite_g": {"group_sizes": [2, 4, 8], "replicas": 100, "steps": 300, "burn_in": 100},
    },
    "forecast_benchmark": {"bandit_settings": 1, "fractions": [0.25], "levers": False, "closed_form": False,
                           "bandit_sweep": False},
    # eight steps cannot measure K: each arm's baseline runs, the sweep says so and stops there
    "kref_sweep": {"training": {"max_steps": 8, "eval_steps": 0, "checkpoint_steps": 4,
                                "per_device_train_batch_size": 8},
                   "arms": {"sgd": {"baseline": {"training": {"max_steps": 8}}},
                            "adam": {"baseline": {"training": {"max_steps": 8}}}}},
}


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = _merge(base.get(key) or {}, value) if isinstance(value, dict) else value
    return out


@pytest.mark.slow
def test_whole_workflow_runs_on_a_shrunken_default(repo_root, tmp_path):
    for item in ("Snakefile", "workflow", "config", "envs", "profiles"):
        source = repo_root / item
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / item)
    with open(repo_root / "config" / "config.yaml") as handle:
        config = _merge(yaml.safe_load(handle), SMOKE_OVERRIDES)
    config["benchmarks"] = {name: spec for name, spec in config["benchmarks"].items()  # the default's order
                            if name in SMOKE_OVERRIDES["benchmarks"]}
    (tmp_path / "smoke.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    snakemake = shutil.which("snakemake") or str(repo_root / ".venv" / "bin" / "snakemake")
    result = subprocess.run([snakemake, "--cores", "2", "--configfile", "smoke.yaml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-4000:]

    results = tmp_path / "results"
    verification = json.loads((results / "symbolic" / "verification.json").read_text())
    assert verification["n_claims"] >= 14
    for seed in (1, 2):
        log = pd.read_csv(results / "train" / "tiny" / "G4" / f"seed{seed}" / "log.csv")
        assert list(log["step"]) == list(range(0, 9))  # step 0: the eval before the first update
        trained = log[log["step"] >= 1]
        assert (trained["importance_sampling_ratio_max"] == 1.0).all()  # on-policy: exactly 1
        assert log["eval_reward"].notna().sum() == 3  # steps 0, 4, 8
    aggregate = pd.read_csv(results / "aggregate" / "tiny" / "G4.csv")
    assert (aggregate.loc[aggregate["step"] >= 1, "reward_n"] == 2).all()
    assert aggregate.loc[aggregate["step"] == 0, "eval_reward_n"].item() == 2
    for path in ("figures/figure1.png", "fit/tiny/fits.md", "forecast/summary.md", "diagnostics/verdicts.md",
                 "diagnostics/figure5.png", "bandit/verdict.md", "bandit/figure6.png",
                 "bandit/figure7_sliding_stale.png", "tables/table1.md", "tables/table1.html",
                 "figures/passk.png", "readme/summary.md", "bandit/finite_g.md",
                 "kref_sweep/table.md", "kref_sweep/figure.png", "forecast/benchmark.md", "forecast/benchmark.png"):
        assert (results / path).stat().st_size > 0, path
    # Table 1 keeps the config's order of the benchmarks (increasing distance from the training data)
    summary = pd.read_csv(results / "tables" / "table1_summary.csv")
    assert list(dict.fromkeys(summary["benchmark"])) == list(config["benchmarks"])

    # a second run has nothing to do; a changed fitting parameter re-runs only what depends on it
    dry = subprocess.run([snakemake, "-n", "--cores", "2", "--configfile", "smoke.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    config["fitting"] = {"forecast_fraction": 0.5}
    (tmp_path / "smoke.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    dry = subprocess.run([snakemake, "-n", "--cores", "2", "--configfile", "smoke.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert "rule train" not in dry.stdout and "rule fit_laws" in dry.stdout
