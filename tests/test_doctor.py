"""`pgrpo doctor` (issue 19, item 6): the pure checks with hand-computed numbers, the probe-free run on given facts,
`vllm_gpu_memory_utilization: auto`, and the verb run for real on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgrpo.errors import InputError
from pgrpo.grpo import doctor as d
from pgrpo.grpo.training_config import resolve_training, validate_training, vllm_share
from pgrpo.stages.doctor import run_doctor

REPO = Path(__file__).resolve().parents[1]
# DeepSeek-LLM-7B's config.json (no GQA): 2 x 30 layers x 32 kv heads x 128 x 2 bytes = 491,520 B a token
DEEPSEEK_7B = {"hidden_size": 4096, "num_hidden_layers": 30, "num_attention_heads": 32, "num_key_value_heads": 32,
               "intermediate_size": 11008}
GPU_FACTS = {"cuda_available": True, "device_count": 1, "torch_cuda": "12.4", "driver": "550.54.14", "bf16": True,
             "gpu_memory": 80e9}


def test_driver_570_with_a_cuda_13_wheel_fails_naming_both():
    check = d.check_driver("570.133.20", "13.0")
    assert check.status == "FAIL"
    assert "570.133.20" in check.problem and "13.0" in check.problem and "580.65.6" in check.problem


@pytest.mark.parametrize("driver, cuda, status", [
    ("580.65.06", "13.0", "PASS"), ("535.104.05", "12.4", "PASS"), ("525.60.13", "12.8", "PASS"),
    ("520.61.05", "12.1", "FAIL"), (None, "12.4", "SKIP"), ("570.1", None, "SKIP"),
])
def test_driver_table(driver, cuda, status):
    assert d.check_driver(driver, cuda).status == status


def test_no_gpu_visible_names_the_section():
    check = d.check_gpu_visible({"training": 1, "evaluation": 0}, False, 0)
    assert check.problem == ("no CUDA GPU visible (torch.cuda.is_available() is False) but "
                             "training.resources.gpus = 1")
    assert d.check_gpu_visible({"training": 0, "evaluation": 0}, False, 0).status == "SKIP"
    assert d.check_gpu_visible({"training": 2}, True, 1).status == "FAIL"


def test_bf16():
    assert d.check_bf16(True, False).status == "FAIL"
    assert d.check_bf16(True, True).status == "PASS"
    assert d.check_bf16(False, False).status == "SKIP"


def test_7b_weights_do_not_fit_a_0_3_share_of_40_gb():
    weights = d.weight_bytes(6.91)  # 6.91e9 x 2 bytes = 13.82 GB
    assert weights == pytest.approx(13.82e9)
    check = d.check_memory("train 7b", weights=weights, gpu_memory=40e9, share=0.3, kv_budget=0.0,
                           colocate_trainer=True, share_key="training.vllm_gpu_memory_utilization")
    assert check.status == "FAIL"  # 0.3 x 40 GB = 12.0 GB < 13.8 GB
    assert "12.0 GB" in check.problem and "13.8 GB" in check.problem


def test_kv_cache_and_auto_share_by_hand():
    per_token = d.kv_bytes_per_token(DEEPSEEK_7B)
    assert per_token == 2 * 30 * 32 * 128 * 2 == 491_520
    kv = d.kv_budget_bytes(13.82e9, per_token, 16, 256 + 786)  # 4 x 4 sequences of 1,042 tokens
    assert kv == 491_520 * 16 * 1042
    # (13.82 + 8.195 + 2) GB / 80 GB = 0.3002 -> 0.31; / 40 GB = 0.6004 -> 0.61; on 20 GB capped at 0.9
    assert d.auto_vllm_share(13.82e9, kv, 80e9) == 0.31
    assert d.auto_vllm_share(13.82e9, kv, 40e9) == 0.61
    assert d.auto_vllm_share(13.82e9, kv, 20e9) == 0.9
    ok = d.check_memory("train 7b", weights=13.82e9, gpu_memory=40e9, share=0.61, kv_budget=kv,
                        colocate_trainer=True, share_key="s")
    assert ok.status == "PASS"  # vLLM 24.4 GB >= 22.0 GB; the trainer's 15.6 GB >= 13.8 GB


def test_auto_in_the_training_config():
    t = resolve_training({"vllm_gpu_memory_utilization": "auto", "per_device_train_batch_size": 4,
                          "gradient_accumulation_steps": 4, "max_prompt_length": 256, "max_completion_length": 786,
                          "use_vllm": False})
    validate_training(t, 4)
    # no config.json: per token 2 x 2 bytes x L x 128 L with L = (6.91e9 / (12 x 128^2))^(1/3) = 32.76 -> 549,357 B;
    # (13.82e9 + 549,357 x 16 x 1042 + 2e9) / 80e9 = 0.3122 -> 0.32
    assert d.kv_per_token_estimate(6.91e9) == pytest.approx(549_357, rel=1e-5)
    assert vllm_share(t, cuda=True, model_bytes=13.82e9, gpu_memory_bytes=80e9) == 0.32
    assert vllm_share(t, cuda=False) == 0.3  # vLLM's CPU build sizes its own cache
    assert vllm_share({**t, "vllm_gpu_memory_utilization": 0.45}, cuda=True) == 0.45
    with pytest.raises(InputError, match="vllm_gpu_memory_utilization"):
        validate_training({**t, "vllm_gpu_memory_utilization": 1.5}, 4)


def test_cache_and_disk():
    assert d.check_cache(True, [("model a", True), ("dataset b", False)]).problem.startswith(
        "HF_HUB_OFFLINE=1 and not in the cache: dataset b")
    assert d.check_cache(False, [("dataset b", False)]).status == "SKIP"
    lora = d.lora_params(DEEPSEEK_7B, 16, ["q_proj", "v_proj"], 6.91)
    assert lora == 30 * 2 * 16 * (4096 + 4096)
    assert d.run_disk_bytes(6.91, lora, 2, True) == pytest.approx(2 * lora * 12 + 13.82e9)
    assert d.check_disk("results", 10e9, 13.9e9).status == "FAIL"
    assert d.check_disk("results", 20e9, 13.9e9).status == "PASS"


def test_run_doctor_on_given_facts(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    import pgrpo.stages.doctor as doctor_stage

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # the disk is a fact of the host: given too (1 TB free), so the checks below do not hang on this machine's disk
    monkeypatch.setattr(doctor_stage.shutil, "disk_usage", lambda path: SimpleNamespace(total=2e12, used=1e12, free=1e12))
    model = {"name": "7b", "id": "deepseek-ai/deepseek-llm-7b-chat", "path": None, "params_b": 6.91}
    training = {"use_vllm": True, "vllm_gpu_memory_utilization": "auto", "bf16": True,
                "resources": {"gpus": 1}}
    checks = run_doctor(model=model, training=training, facts=GPU_FACTS)
    assert [c.status for c in checks][:3] == ["PASS", "PASS", "PASS"]
    assert "PASS  memory (train 7b)" in capsys.readouterr().out
    with pytest.raises(InputError, match="vllm_gpu_memory_utilization = 0.3 gives vLLM 12.0 GB"):
        run_doctor(model=model, training={**training, "vllm_gpu_memory_utilization": 0.3},
                   facts={**GPU_FACTS, "gpu_memory": 40e9})
    with pytest.raises(InputError, match="older than 580.65.6"):
        run_doctor(model=model, training=training, facts={**GPU_FACTS, "torch_cuda": "13.0", "driver": "570.86.10"})


def _doctor(config):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "workflow")}
    return subprocess.run([sys.executable, "-m", "pgrpo", "doctor", "--config", config], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_paper_config_without_a_gpu_exits_2_naming_the_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    done = _doctor("config/paper.yaml")
    assert done.returncode == 2, done.stderr
    assert "FAIL  gpu: no CUDA GPU visible" in done.stdout
    assert done.stderr.strip() == ("pgrpo doctor: error: no CUDA GPU visible (torch.cuda.is_available() is False) "
                                   "but training.resources.gpus = 1")


def test_cpu_default_passes_saying_what_it_skipped():
    done = _doctor("config/config.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SKIP  gpu: no section asks for a GPU")


def test_a_fake_gpu_for_the_cpu_test_skips_the_gpu_checks(monkeypatch):
    """The local SLURM test trains on the CPU behind a fake GPU gres (PGRPO_ALLOW_NO_CUDA=1): the doctor that starts
    every GPU job must let it through, and only then."""
    from pgrpo.stages.doctor import run_doctor

    facts = {"cuda_available": False, "device_count": 0, "torch_cuda": None, "bf16": None, "gpu_memory": None,
             "driver": None}
    model = {"name": "tiny", "path": "results/model/tiny", "params_b": 0.001}
    training = {"resources": {"gpus": 1}}
    monkeypatch.delenv("PGRPO_ALLOW_NO_CUDA", raising=False)
    with pytest.raises(InputError, match="no CUDA GPU visible"):
        run_doctor(model=model, training=training, facts=facts)
    monkeypatch.setenv("PGRPO_ALLOW_NO_CUDA", "1")
    (check,) = run_doctor(model=model, training=training, facts=facts)
    assert check.status == "SKIP" and "PGRPO_ALLOW_NO_CUDA=1" in check.detail
