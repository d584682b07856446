"""What the schema allows but the cluster path cannot do, refused before any work in one line naming the key."""

from __future__ import annotations

import copy

import pytest

from pgrpo.config import DEFAULT_CONFIG_PATH, load_config, validate_config
from pgrpo.errors import InputError


@pytest.fixture()
def config():
    return copy.deepcopy(load_config(DEFAULT_CONFIG_PATH))


def test_vllm_server_mode_is_refused_by_validation(config):
    config["training"].update(use_vllm=True, vllm_mode="server")
    with pytest.raises(InputError, match="training.vllm_mode"):
        validate_config(config)


def test_several_gpus_need_an_existing_accelerate_config(config):
    config["training"]["resources"]["gpus"] = 2
    config["training"]["accelerate_config"] = "config/accelerate/none.yaml"
    config["training"]["per_device_train_batch_size"] = 32
    with pytest.raises(InputError, match="training.accelerate_config"):
        validate_config(config)


def test_an_evaluation_asking_for_a_gpu_without_cuda_stops(tmp_path, monkeypatch, config):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from pgrpo.grpo.training_config import ALLOW_NO_CUDA_ENV
    from pgrpo.stages.evaluate import run_evaluate

    monkeypatch.delenv(ALLOW_NO_CUDA_ENV, raising=False)
    problems = tmp_path / "bench.jsonl"
    problems.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    evaluation = copy.deepcopy(config["evaluation"])
    evaluation["resources"]["gpus"] = 1
    benchmark = {"path": str(problems), "split": "test", "question_field": "question", "answer_field": "answer",
                 "answer_format": "gsm8k"}
    with pytest.raises(InputError, match="evaluation.resources.gpus"):
        run_evaluate({"name": "tiny", "id": "x/y", "path": None}, None, "bench", benchmark, evaluation,
                     str(tmp_path / "out.json"))
