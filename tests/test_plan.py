"""``pgrpo plan``: optimizer steps, tokens and GPU-hours per job, each checked against numbers worked out by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import yaml

from pgrpo.errors import InputError
from pgrpo.grpo.plan import (
    decode_step_seconds,
    generation_seconds,
    optimizer_steps,
    plan_training,
    profiles,
    resolve_plan,
)
from pgrpo.grpo.training_config import resolve_training
from pgrpo.stages.plan import build_plan, dataset_rows, params_from_safetensors

TABLE_2 = dict(per_device_batch=4, accumulation=4, steps_per_generation=None, num_iterations=1, processes=1,
               epochs=2)


def test_table_2_on_gsm8k_by_hand():
    # G=16: 16 completions a step are one prompt; 7,473 prompts x 2 epochs = 14,946 steps
    assert optimizer_steps(7473, G=16, **TABLE_2) == 14946
    # G=4: 4 prompts a step; floor(7473 / 4) = 1,868 steps an epoch (TRL drops the incomplete batch), x 2
    assert optimizer_steps(7473, G=4, **TABLE_2) == 3736


@pytest.mark.parametrize("n, G, b, A, spg, iters, procs, epochs, expected", [
    # one generation of 4 x 2 x 8 = 64 completions (8 prompts at G=8) serves 8 micro-steps = 2 optimizer steps;
    # floor(100 / 8) = 12 generations x 8 micro-steps = 96 micro-steps / accumulation 4 = 24 steps an epoch
    (100, 8, 4, 4, 8, 1, 2, 1, 24),
    # num_iterations 3: each generation batch is served 3 x 2 micro-steps; floor(50 / 2) = 25 x 6 / 2 = 75
    (50, 4, 4, 2, None, 3, 1, 1, 75),
    # epochs 1.5: ceil(1.5 x 5) = 8 (5 steps an epoch: floor(11 / 2) = 5 generations x 2 micro-steps / 2)
    (11, 4, 4, 2, None, 1, 1, 1.5, 8),
    # 7 micro-steps an epoch with accumulation 2: the last step is a short one, ceil(7 / 2) = 4
    (7, 4, 4, 2, 1, 1, 1, 1, 4),
])
def test_steps_by_hand(n, G, b, A, spg, iters, procs, epochs, expected):
    assert optimizer_steps(n, G=G, per_device_batch=b, accumulation=A, steps_per_generation=spg,
                           num_iterations=iters, processes=procs, epochs=epochs) == expected


def test_max_steps_wins_and_missing_sizes_name_the_key():
    assert optimizer_steps(None, G=4, max_steps=300, **TABLE_2) == 300
    with pytest.raises(InputError, match="data.train.num_rows"):
        optimizer_steps(None, G=4, **TABLE_2)
    with pytest.raises(InputError, match="G=3"):
        optimizer_steps(100, G=3, **TABLE_2)


#: A profile with round numbers: 100 GB/s at full efficiency, 1 TFLOP/s at full utilisation, 10 ms per decode step.
ROUND = {"memory_bandwidth_gbps": 100.0, "bf16_tflops": 1.0, "memory_gb": 80, "bytes_per_param": 2,
         "bandwidth_efficiency": 1.0, "generate_mfu": 1.0, "train_mfu": 1.0,
         "decode_overhead_ms": {"vllm": 10.0, "transformers": 10.0}, "job_overhead_min": 6.0, "source": "test"}


def test_decode_and_generation_time_by_hand():
    # 1B parameters x 2 bytes / 100 GB/s = 20 ms; 16 sequences x 2 GFLOP / 1 TFLOP/s = 32 ms: compute-bound, + 10 ms
    assert decode_step_seconds(1.0, 16, ROUND, "vllm") == pytest.approx(0.042)
    assert decode_step_seconds(1.0, 4, ROUND, "vllm") == pytest.approx(0.030)  # 8 ms compute < 20 ms memory
    # 40 sequences in static batches of 16: 3 batches x 100 steps; the last batches are timed at 16 sequences
    assert generation_seconds(1.0, 40, max_tokens=100, mean_tokens=50, max_batch=16, profile=ROUND,
                              backend="transformers") == pytest.approx(3 * 100 * 0.042)
    # continuous batching: 40 x 50 / 16 = 125 steps of full batches
    assert generation_seconds(1.0, 40, max_tokens=100, mean_tokens=50, max_batch=16, profile=ROUND,
                              backend="vllm", continuous=True) == pytest.approx(125 * 0.042)


def test_training_job_by_hand():
    t = resolve_training({"max_steps": 10, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 4,
                          "max_completion_length": 100, "beta": 0.0, "gradient_checkpointing": False,
                          "eval_steps": 5, "num_generations_eval": 2, "resources": {"gpus": 1}})
    job = plan_training(job="j", params_b=1.0, G=4, t=t, n_train=None, n_eval=8, prompt_tokens=20,
                        completion_tokens=80, profile=ROUND, margin=2.0, limit_min=10, eval_batch=4)
    assert job.steps == 10
    # generation: one call a step of 16 sequences x 100 steps x 42 ms
    generate = 10 * 100 * 0.042
    # training: 10 steps x 16 completions x 100 tokens x 2 passes (forward, backward; no KL, no recompute) x 2 GFLOP
    train = 10 * 16 * 100 * 2 * 2e9 / 1e12
    # eval at steps 5 and 10: 8 prompts x 2 = 16 sequences in batches of 4 (30 ms a step), then one forward pass
    evaluate = 2 * (4 * 100 * 0.030 + 16 * 100 * 2e9 / 1e12)
    hours = (generate + train + evaluate) / 3600 + 6.0 / 60
    assert job.hours == pytest.approx(hours)
    assert job.completions == 10 * 16 + 2 * 16 and job.tokens_generated == pytest.approx(job.completions * 80)
    assert job.tokens_trained == pytest.approx(10 * 16 * 100)
    # asks for hours x 2 (the margin), capped at the 10-minute limit; so many submissions resume from checkpoints
    wanted = math.ceil(hours * 60 * 2.0)
    assert job.runtime_min == min(wanted, 10) and job.submissions == math.ceil(wanted / 10) and job.over_limit


def test_paper_grid_plan(repo_root):
    from pgrpo.config import load_config

    config = load_config(repo_root / "config" / "paper.yaml")
    plan = build_plan(config)
    train = [j for j in plan.jobs if j.kind == "train"]
    assert len(train) == 12 and len([j for j in plan.jobs if j.kind == "evaluate"]) == 3 * 5 * 8
    assert {j.steps for j in train if "/G16/" in j.job} == {14946}
    assert {j.steps for j in train if "/G4/" in j.job} == {3736}
    g4 = plan.job("train/r1-distill-qwen-1.5b/G4/seed42")
    # 3,736 steps x 16 completions + evals at every 100th step and the last (38) x 500 prompts x 4 samples
    assert g4.completions == 3736 * 16 + 38 * 500 * 4
    assert g4.tokens_trained == pytest.approx(3736 * 16 * (160 + 786))
    assert all(j.runtime_min <= 2880 for j in plan.jobs)
    assert plan.gpu_hours == pytest.approx(sum(j.gpu_hours for j in plan.jobs))
    # evaluation: GSM-Plus 2,400 problems x 5 samples; AIME 30 x 5
    assert plan.job("evaluate/nemotron-mini-4b/base/gsm-plus").completions == 12000
    assert plan.job("evaluate/nemotron-mini-4b/G16_seed42/aime-2026").completions == 150


def test_cli_plan_prints_every_job_and_a_total(repo_root, tmp_path):
    md = tmp_path / "plan.md"
    result = subprocess.run([sys.executable, "-m", "pgrpo", "plan", "--config", "config/paper.yaml", "--md", str(md)],
                            cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("| train/") == 12 and out.count("| evaluate/") == 120
    assert "| 14,946 |" in out and "| 3,736 |" in out
    total = [line for line in out.splitlines() if line.startswith("Total:")]
    assert len(total) == 1 and "GPU-hours" in total[0]
    assert "published" in out and "assumed" in out  # each profile says where its numbers come from
    assert md.read_text() == out


def test_default_config_plans_on_the_cpu_profile(repo_root):
    from pgrpo.config import load_config

    plan = build_plan(load_config(repo_root / "config" / "config.yaml"))
    train = [j for j in plan.jobs if j.kind == "train"]
    assert {j.steps for j in train} == {300} and plan.settings["gpu"] == "cpu"


def test_plan_inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = tmp_path / "t.jsonl"
    rows.write_text('{"a": 1}\n{"a": 2}\n\n{"a": 3}\n')
    assert dataset_rows({"path": str(rows)}, "data.train") == 3
    assert dataset_rows({"path": str(rows), "max_examples": 2}, "data.train") == 2
    assert dataset_rows({"num_rows": 7473, "max_examples": 500}, "data.eval") == 500
    # a workflow-made synthetic file not written yet counts as its synthetic.sizes entry
    assert dataset_rows({"path": "results/data/synthetic/train.jsonl"}, "data.train", {"train": 4000}) == 4000
    with pytest.raises(InputError, match="plan.gpu"):
        resolve_plan({"gpu": "B200"})
    added = profiles({"B200": dict(ROUND, source="measured: gpu_check.sh")})
    assert added["B200"]["source"].startswith("measured")
    with pytest.raises(InputError, match="plan.throughput.X: a new profile needs"):
        profiles({"X": {"bf16_tflops": 1}})


def test_params_from_a_local_models_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5)}, str(tmp_path / "model.safetensors"))
    assert params_from_safetensors(str(tmp_path)) == pytest.approx(17 / 1e9)


def test_paper_config_asks_the_plan_for_runtimes(repo_root):
    paper = yaml.safe_load((repo_root / "config" / "paper.yaml").read_text())
    assert paper["training"]["resources"]["runtime_min"] == "auto"
    assert paper["evaluation"]["resources"]["runtime_min"] == "auto"
    assert paper["plan"]["partition_limit_min"] == 2880
