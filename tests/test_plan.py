"""``pgrpo plan``: optimizer steps, tokens and GPU-hours per job, each checked against numbers worked out by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import yaml

from pgrpo.errors import InputError
from pgrpo.grpo.plan import (
    JobPlan,
    decode_step_seconds,
    generation_seconds,
    optimizer_steps,
    plan_checkpoint_evaluations,
    plan_training,
    profiles,
    resolve_plan,
    submissions_needed,
)
from pgrpo.grpo.plan_models import (
    ARCHITECTURES,
    ModelShape,
    assumed_terms,
    kv_cache_bytes,
    kv_limited_seqs,
    model_shape,
    training_engine_max_seqs,
)
from pgrpo.grpo.training_config import resolve_training
from pgrpo.stages.plan import build_plan, dataset_rows, measured_seconds, params_from_safetensors

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
         "decode_overhead_ms": {"vllm": 10.0, "transformers": 10.0}, "job_overhead_min": 6.0, "source": "test",
         "disk_gbps": 1.0, "io_fixed_s": 2.0, "sync_per_tensor_ms": 1.0, "eval_job_overhead_min": 3.0}


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
                          "eval_steps": 5, "num_generations_eval": 2, "checkpoint_steps": 5, "merge_adapters": True,
                          "resources": {"gpus": 1}})
    job = plan_training(job="j", params_b=1.0, G=4, t=t, n_train=None, n_eval=8, prompt_tokens=20,
                        completion_tokens=80, profile=ROUND, margin=2.0, limit_min=100, eval_batch=4,
                        signal_margin_s=60)
    assert job.steps == 10
    # generation (model.generate, no KV priced for a size-only model): one call a step of 16 sequences x 100 steps
    # x 42 ms
    generate = 10 * 100 * 0.042
    # training: 10 steps x 16 completions x 100 tokens x 2 passes (forward, backward; no KL, no recompute) x 2 GFLOP
    train = 10 * 16 * 100 * 2 * 2e9 / 1e12
    # eval at steps 5 and 10: 8 prompts x 2 = 16 sequences in batches of 4 (30 ms a step), then one forward pass
    one_eval = 4 * 100 * 0.030 + 16 * 100 * 2e9 / 1e12
    # 2 checkpoints (steps 5 and 10) of a size-only model: 2 s each; the merge reads and writes 2 GB at 1 GB/s + 2 s
    saves = 2 * 2.0 + (2.0 + 4.0)
    hours = (generate + train + 2 * one_eval + saves) / 3600 + 6.0 / 60
    assert job.hours == pytest.approx(hours)
    assert job.completions == 10 * 16 + 2 * 16 and job.tokens_generated == pytest.approx(job.completions * 80)
    assert job.tokens_trained == pytest.approx(10 * 16 * 100)
    # the signal lead: one step, one checkpoint, the longest (inline) evaluation and the margin
    lead = math.ceil((generate + train) / 10 + 2.0 + one_eval + 60)
    assert job.signal_lead_s == lead
    # asks for hours x 2 + the lead, within the 100-minute limit: one submission
    assert job.runtime_min == math.ceil(hours * 60 * 2.0 + lead / 60) and job.submissions == 1 and job.fits


def test_checkpoints_mode_moves_the_evaluation_into_its_own_jobs():
    t = resolve_training({"max_steps": 10, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 4,
                          "max_completion_length": 100, "beta": 0.0, "eval_steps": 5, "num_generations_eval": 2,
                          "checkpoint_steps": 50, "merge_adapters": False, "resources": {"gpus": 1}})
    shape = ModelShape(params_b=1.0, kv_bytes_per_token=0.0, lora_params=1e6, tensors=0, source="test")
    args = dict(job="j", params_b=1.0, G=4, t=t, n_train=None, n_eval=8, prompt_tokens=20, completion_tokens=80,
                profile=ROUND, margin=1.0, limit_min=None, eval_batch=4, shape=shape, signal_margin_s=0)
    inline = plan_training(eval_mode="inline", **args)
    saved = plan_training(eval_mode="checkpoints", **args)
    # the train job drops both evaluations and saves the adapter twice: 1e6 fp32 parameters at 1 GB/s + 2 s each
    one_eval = 4 * 100 * 0.030 + 16 * 100 * 2e9 / 1e12
    assert inline.hours - saved.hours == pytest.approx((2 * one_eval - 2 * (2.0 + 4e6 / 1e9)) / 3600)
    assert saved.completions == 10 * 16 and saved.split["eval"] == 0
    jobs = plan_checkpoint_evaluations(job="e", params_b=1.0, G=4, t=t, steps=10, n_eval=8, prompt_tokens=20,
                                       completion_tokens=80, profile=ROUND, margin=1.0, limit_min=None, share=0.9,
                                       backend="transformers", batch_size=64, shape=shape)
    # 2 jobs, each: 16 sequences in one batch (100 steps at 16 x 2 GFLOP / 1 TFLOP/s = 32 ms + 10 ms), one forward
    # pass over 16 x 100 tokens, 3 minutes of start-up
    each = (100 * 0.042 + 16 * 100 * 2e9 / 1e12) / 3600 + 3.0 / 60
    assert jobs.count == 2 and jobs.hours == pytest.approx(each) and jobs.gpu_hours == pytest.approx(2 * each)


def test_kv_bytes_per_token_from_each_models_config():
    shapes = {name: model_shape(1.0, arch, arch["source"]) for name, arch in ARCHITECTURES.items()}
    # layers x 2 (K and V) x kv_heads x head_dim x 2 bytes (bf16)
    assert shapes["deepseek-ai/deepseek-llm-7b-chat"].kv_bytes_per_token == 30 * 2 * 32 * 128 * 2 == 491520
    assert shapes["nvidia/Nemotron-Mini-4B-Instruct"].kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert shapes["deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"].kv_bytes_per_token == 28 * 2 * 2 * 128 * 2
    # LoRA r=16 on q, k, v, o of the 7B (no GQA: every projection 4096 x 4096): 30 x 4 x 16 x (4096 + 4096)
    assert shapes["deepseek-ai/deepseek-llm-7b-chat"].lora_params == 30 * 4 * 16 * 8192
    unknown = model_shape(6.91, None, "nothing")
    assert "unknown" in unknown.source and unknown.kv_bytes_per_token > 0


def test_engine_concurrency_by_hand():
    t = resolve_training({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 4})
    assert training_engine_max_seqs(t) == 4 * 1 * 4  # TRL: batch x tensor parallel x steps_per_generation
    assert training_engine_max_seqs(dict(t, steps_per_generation=8, vllm_tensor_parallel_size=2)) == 4 * 2 * 8
    # 10 GB of cache at 0.5 MB a token and 1,000 tokens a sequence: 20 sequences, capped by max_num_seqs
    assert kv_limited_seqs(256, 10e9, 0.5e6, 1000) == 20 and kv_limited_seqs(16, 10e9, 0.5e6, 1000) == 16
    assert kv_limited_seqs(256, 0.0, 0.5e6, 1000) == 1  # vLLM needs one; pgrpo doctor refuses the config
    # the 7B's evaluation engine on 80 GB at 0.85: 68 GB - 13.82 GB weights - 2 GB workspace
    assert kv_cache_bytes(0.85, 80, 13.82e9) == pytest.approx(68e9 - 13.82e9 - 2e9)


def test_kv_reads_in_a_decode_step_by_hand():
    # a static call of 4 sequences of 100 tokens after 20-token prompts, 1 MB a token of KV: over 100 steps each
    # sequence reads 20 x 100 + 100^2 / 2 = 7,000 token-entries, 70 a step: 4 x 70 MB = 280 MB a step on top of 2 GB
    step = max((2e9 + 4 * 70 * 1e6) / 100e9, 4 * 2e9 / 1e12) + 0.010
    assert generation_seconds(1.0, 4, max_tokens=100, mean_tokens=100, max_batch=4, profile=ROUND,
                              backend="vllm", continuous=True, kv_bytes_per_token=1e6,
                              prompt_tokens=20) == pytest.approx(100 * step)
    # continuous over 40 sequences, 8 at once: 40 x 100 / 8 = 500 steps, each slot holding 20 + 50 tokens
    step = max((2e9 + 8 * 70 * 1e6) / 100e9, 8 * 2e9 / 1e12) + 0.010
    assert generation_seconds(1.0, 40, max_tokens=100, mean_tokens=100, max_batch=8, profile=ROUND,
                              backend="vllm", continuous=True, kv_bytes_per_token=1e6,
                              prompt_tokens=20) == pytest.approx(500 * step)


def test_fits_its_limit_times_its_submissions():
    # 10 h (6 min start-up), limit 120 min, lead 600 s: each submission makes 120 - 6 - 10 = 104 min of progress on
    # 594 min of work: 6 submissions
    assert submissions_needed(10.0, overhead_min=6, lead_s=600, margin=1.0, limit_min=120) == (120, 6, True)
    assert submissions_needed(1.0, overhead_min=6, lead_s=600, margin=1.0, limit_min=120) == (70, 1, True)
    # a lead and start-up longer than the limit leave no progress
    assert submissions_needed(10.0, overhead_min=6, lead_s=7200, margin=1.0, limit_min=120)[2] is False
    base = dict(job="j", gpus=1, steps=1, completions=1, tokens_generated=1, tokens_trained=1, hours=10,
                gpu_hours=10, runtime_min=120, limit_min=120, submissions=6)
    assert JobPlan(kind="train", max_submissions=6, **base).fits
    assert not JobPlan(kind="train", max_submissions=5, **base).fits
    assert JobPlan(kind="train", **base).fits  # no cap
    assert not JobPlan(kind="evaluate", **dict(base, submissions=2)).fits  # an evaluation cannot resume


def test_paper_grid_plan(repo_root):
    from pgrpo.config import load_config

    config = load_config(repo_root / "config" / "paper.yaml")
    plan = build_plan(config)
    train = [j for j in plan.jobs if j.kind == "train"]
    assert len(train) == 12 and len([j for j in plan.jobs if j.kind == "evaluate"]) == 3 * 5 * 8
    assert {j.steps for j in train if "/G16/" in j.job} == {14946}
    assert {j.steps for j in train if "/G4/" in j.job} == {3736}
    inline = {j.job: j for j in plan.modes["inline"]}
    g4 = inline["train/r1-distill-qwen-1.5b/G4/seed42"]
    # 3,736 steps x 16 completions + evals at every 100th step and the last (38) x 500 prompts x 4 samples
    assert g4.completions == 3736 * 16 + 38 * 500 * 4
    assert g4.tokens_trained == pytest.approx(3736 * 16 * (160 + 786))
    # TRL's colocated engine: 4 x 1 x 4 = 16 sequences at once, whatever per_device_eval_batch_size (32) says
    assert {j.concurrency for j in plan.modes["inline"]} == {16}
    checkpoints = {j.job: j for j in plan.modes["checkpoints"]}
    evals = checkpoints["train_eval/deepseek-llm-7b-chat/G16/seed42"]
    # 150 rounds (14,946 / 100 rounded up); the 7B's KV cache at 0.85 of 80 GB holds
    # (68 - 13.82 - 2) GB / (491,520 B x (160 + 786)) = 112 sequences, not vLLM's 256
    assert evals.count == 150 and evals.concurrency == 112
    assert checkpoints["train/deepseek-llm-7b-chat/G16/seed42"].completions == 14946 * 16
    totals = plan.mode_totals()
    assert set(totals) == {"inline", "checkpoints"} and 0 < totals["checkpoints"]["eval_share"] < 1
    assert all(j.runtime_min <= 2880 for j in plan.jobs)
    assert plan.gpu_hours == pytest.approx(sum(j.gpu_hours for j in plan.jobs))
    # the signal lead covers the longest inline evaluation (one of the job's 150) and a checkpoint
    g16 = inline["train/deepseek-llm-7b-chat/G16/seed42"]
    assert g16.signal_lead_s >= g16.split["eval"] * 3600 / 150 + 300
    assert plan.signal_lead_s("train/deepseek-llm-7b-chat/G16/seed42") == plan.job(g16.job).signal_lead_s
    # evaluation: GSM-Plus 2,400 problems x 5 samples; AIME 30 x 5
    assert plan.job("evaluate/nemotron-mini-4b/base/gsm-plus").completions == 12000
    assert plan.job("evaluate/nemotron-mini-4b/G16_seed42/aime-2026").completions == 150


def test_max_submissions_marks_the_jobs_that_do_not_fit(repo_root):
    from pgrpo.config import load_config

    config = load_config(repo_root / "config" / "paper.yaml")
    config["plan"] = dict(config["plan"], max_submissions=1)
    plan = build_plan(config)
    over = [j for j in plan.modes["inline"] if j.kind == "train" and not j.fits]
    assert over and all(j.submissions > 1 for j in over)
    assert {j.job for j in over} <= set(plan.mode_totals()["inline"]["not_fitting"])


def test_measured_seconds_calibrate_the_plan(repo_root, tmp_path):
    from pgrpo.config import load_config

    bench = tmp_path / "train" / "tiny" / "G4"
    bench.mkdir(parents=True)
    (bench / "seed42.tsv").write_text("s\th:m:s\tmax_rss\n600.0\t0:10:00\t1\n800.0\t0:13:20\t1\n")
    assert measured_seconds(tmp_path) == {"train/tiny/G4/seed42": 700.0}  # the mean of the repeats
    plan = build_plan(load_config(repo_root / "config" / "config.yaml"), benchmarks_dir=tmp_path)
    c = plan.calibration()
    assert c["jobs"] == 1 and c["ratio"] == pytest.approx(700.0 / (plan.job("train/tiny/G4/seed42").hours * 3600))


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
    assert "still assumptions: decode_step, kv_read, weight_sync" in out
    assert "`eval_mode: inline`" in out and "`eval_mode: checkpoints`" in out  # both modes side by side
    assert md.read_text() == out


def test_default_config_plans_on_the_cpu_profile(repo_root):
    from pgrpo.config import load_config

    plan = build_plan(load_config(repo_root / "config" / "config.yaml"))
    train = [j for j in plan.jobs if j.kind == "train"]
    assert {j.steps for j in train} == {300} and plan.settings["gpu"] == "cpu"
    # priced like the GPU grid: both eval modes, every job's concurrency (model.generate: the whole batch of 32)
    assert set(plan.mode_totals()) == {"inline", "checkpoints"}
    assert {j.concurrency for j in train} == {32}


def test_a_measured_term_is_no_longer_an_assumption():
    p = profiles({"H100-80GB": {"measured": ["decode_step", "weight_sync"]}})["H100-80GB"]
    assert "decode_step" not in assumed_terms(p) and "kv_read" in assumed_terms(p)


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
