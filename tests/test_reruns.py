"""Partial re-runs, shown with real runs (slow): after a whole run of a shrunken embedded default, each change
re-runs exactly the jobs that depend on it and nothing else.

Every rule receives its config section as a parameter (rerun-trigger ``params``, one of the triggers the slurm/
profile names), so a changed value makes stale exactly the jobs that read it; rule train's holds only the keys
that shape the trajectory, so an edit of a bookkeeping key (``BOOKKEEPING_KEYS``) re-trains nothing. The analysis
rules also receive the digest of the package code their command runs (``code``), so a code change re-runs them.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from tests.test_slurm import copy_workflow, layered, parse_dry_run, read_yaml, snakemake_bin

SHRUNKEN = {
    "group_sizes": [4],
    "seeds": [1],
    "synthetic": {"sizes": {"sft": 400, "val": 16, "train": 64, "test": 16, "ood": 16}},
    "tiny": {
        "architecture": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                         "num_attention_heads": 2, "num_key_value_heads": 1},
        "warmstart": {"steps": 10, "batch_size": 16, "eval_every": 10, "val_examples": 8},
        "eval": {"examples": 8},
    },
    "training": {"max_steps": 4, "eval_steps": 2, "checkpoint_steps": 2, "per_device_train_batch_size": 8,
                 "gradient_accumulation_steps": 1, "max_completion_length": 8, "num_generations_eval": 4,
                 "per_device_eval_batch_size": 16},
    "data": {"eval": {"max_examples": 8}},
    "benchmarks": {"synthetic-test": {"max_examples": 8}, "synthetic-ood": {"max_examples": 8}},
    "evaluation": {"num_samples": 5, "max_new_tokens": 8},
    "bandit": {
        "calibration": {"steps": 2000},
        "sweep": {"k_refs": [1, 4], "steps": 100, "settle_steps": 300, "dense_k_ref_max": 4},
        "regime_map": {"etas": {"min": 0.05, "max": 0.5, "n": 3}, "k_refs": {"min": 1, "max": 10, "n": 3},
                       "steps": 300},
        "readings": [{"refresh": "sliding", "gradient": "stale"}],
        "sensitivity": {"rewards": [[0, 0, 0, 1]], "etas_n": 2, "k_refs_n": 2, "steps": 200},
        "finite_g": {"group_sizes": [2, 4, 8], "replicas": 50, "steps": 200, "burn_in": 50},
    },
    "forecast_benchmark": {"bandit_settings": 1, "fractions": [0.25], "levers": False, "closed_form": False,
                           "bandit_sweep": False},
    "kref_sweep": {"enabled": False},
}
#: the two benchmarks the test changes (the default's graded suite has more)
BENCHMARKS = ("synthetic-test", "synthetic-ood")


def executed(text: str) -> set[tuple[str, str]]:
    """(rule, first output) of every job a real run started; `all` left out."""
    return {(job["rule"], job["output"][0] if job["output"] else "") for job in parse_dry_run(text)
            if job["rule"] != "all"}


@pytest.mark.slow
def test_a_change_reruns_only_what_depends_on_it(repo_root, tmp_path):
    copy_workflow(repo_root, tmp_path)
    config = layered(read_yaml(repo_root / "config" / "config.yaml"), SHRUNKEN)
    config["benchmarks"] = {name: config["benchmarks"][name] for name in BENCHMARKS}

    def run(*targets: str) -> str:
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
        result = subprocess.run([snakemake_bin(repo_root), *targets, "--profile", "profiles/local", "--cores", "2",
                                 "--configfile", "c.yaml"], cwd=tmp_path, capture_output=True, text=True,
                                timeout=1200)
        assert result.returncode == 0, result.stderr[-4000:]
        return result.stdout + result.stderr

    first = executed(run())
    rules = {rule for rule, _ in first}
    assert {"verify_symbolic", "train", "evaluate", "table1", "fit_laws", "diagnostics"} <= rules
    evaluations = {out for rule, out in first if rule == "evaluate"}
    assert len(evaluations) == 4  # (base, G4_seed1) x (synthetic-test, synthetic-ood)

    # nothing changed: nothing runs
    text = run()
    assert executed(text) == set() and "Nothing to be done" in text

    # a benchmark setting: that benchmark's evaluations (base and trained) and Table 1, nothing else
    test_json = tmp_path / "results" / "evaluate" / "tiny" / "base" / "synthetic-test.json"
    untouched = test_json.stat().st_mtime_ns
    config["benchmarks"]["synthetic-ood"]["max_examples"] = 6
    changed = executed(run())
    assert changed == {  # the benchmark is prepared again, evaluated again, and every view of Table 1 redrawn
        ("prepare_benchmark", "results/data/benchmarks/synthetic-ood.jsonl"),
        ("evaluate", "results/evaluate/tiny/base/synthetic-ood.json"),
        ("evaluate", "results/evaluate/tiny/G4_seed1/synthetic-ood.json"),
        ("table1", "results/tables/table1.csv"),
        ("passk_curves", "results/tables/passk.csv"),
        ("readme_numbers", "results/readme/summary.md"),
        ("job_costs", "results/costs/job_costs.md"),  # the run's own cost table, after every target
    }
    assert test_json.stat().st_mtime_ns == untouched
    assert json.loads(test_json.with_name("synthetic-ood.json").read_text())["n_problems"] == 6

    # a fit setting: the fits, forecasts and what reads them; no training, no evaluation
    config["fitting"] = {"forecast_fraction": 0.5}
    rerun = {rule for rule, _ in executed(run())}
    assert {"fit_laws", "forecast_run", "forecast_summary", "figure1", "diagnostics", "readme_numbers",
            "job_costs"} == rerun

    # a bookkeeping key of training (the checkpoint cadence and retention, a tracker, the job's memory): nothing
    # runs, and a run resumed after the edit continues from its checkpoint with the same rows
    log_csv = tmp_path / "results" / "train" / "tiny" / "G4" / "seed1" / "log.csv"
    before = log_csv.read_text()
    edits = {"checkpoints_keep": 3, "report_to": [], "keep_checkpoints": True,
             "resources": {**config["training"].get("resources", {}), "mem_mb": 9000}}
    for key, value in edits.items():
        config["training"][key] = value
        assert executed(run()) == set(), f"editing training.{key} re-ran jobs"
    # a report-only live setting (the read interval): the run's live reads are drawn again, nothing is re-trained
    # (and, as after any job, the cost table and the README's numbers that quote it)
    config["training"]["live"] = {**config["training"].get("live", {}), "every": 2}
    assert {rule for rule, _ in executed(run())} == {"live_replay", "job_costs", "readme_numbers"}
    log_csv.unlink()  # as if the job had been killed after its last checkpoint (Snakemake remakes a missing
    resumed = executed(run(str(log_csv.relative_to(tmp_path))))  # intermediate file when it is asked for)
    assert ("train", "results/train/tiny/G4/seed1/log.csv") in resumed
    assert json.loads(log_csv.with_name("meta.json").read_text())["resumed_from_step"] == 4
    rows = pd.read_csv(log_csv).drop(columns=["step_time"])
    pd.testing.assert_frame_equal(rows, pd.read_csv(io.StringIO(before)).drop(columns=["step_time"]))

    # a training key: the model's runs and everything downstream of them; not the base model's evaluations, the
    # data, the tiny model, the bandit or the symbolic checks
    before = log_csv.read_text()
    config["training"]["learning_rate"] = 1e-3
    jobs = executed(run())
    assert {rule for rule, _ in jobs} == {"train", "aggregate_seeds", "fit_laws", "figure1", "forecast_run",
                                          "forecast_summary", "diagnostics", "evaluate", "table1", "passk_curves",
                                          "forecast_benchmark", "live_replay", "readme_numbers", "job_costs"}
    assert {out for rule, out in jobs if rule == "evaluate"} == {
        "results/evaluate/tiny/G4_seed1/synthetic-test.json", "results/evaluate/tiny/G4_seed1/synthetic-ood.json"}
    assert log_csv.read_text() != before
    shutil.rmtree(tmp_path / "results", ignore_errors=True)


@pytest.mark.slow
def test_a_code_change_reruns_the_jobs_that_run_that_code(repo_root, tmp_path):
    """A job re-runs when the package code its command runs changes (its ``code`` param, the digest of that code:
    pgrpo.stages.code_version), not when a docstring or a comment does, nor when code it does not run does."""
    copy_workflow(repo_root, tmp_path)
    target = "results/symbolic/verification.json"

    def run(*flags: str) -> str:
        result = subprocess.run([snakemake_bin(repo_root), target, "--profile", "profiles/local", "--cores", "1",
                                 *flags], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-4000:]
        return result.stdout + result.stderr

    def append(module: str, text: str) -> None:
        path = tmp_path / "workflow" / "pgrpo" / module
        path.write_text(path.read_text() + text)

    assert {rule for rule, _ in executed(run())} == {"verify_symbolic"}
    claims = tmp_path / "workflow" / "pgrpo" / "theory" / "symbolic_claims.py"
    source = claims.read_text()
    assert source.startswith('"""')
    claims.write_text('"""Edited: ' + source[3:])  # the module's docstring
    append("theory/symbolic_claims.py", "\n# a comment\n")
    append("grpo/trainer.py", "\n_PROBE = 1\n")  # training code, which the symbolic checks do not run
    assert "Nothing to be done" in run("-n")
    append("theory/symbolic_claims.py", "\n_PROBE = 1\n")  # code the symbolic checks run
    text = run("-n")
    assert {rule for rule, _ in executed(text)} == {"verify_symbolic"} and "Params have changed" in text
