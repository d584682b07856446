"""The objective recorded: every TRL setting that changes it is set explicitly and written to meta.json; trackers
pass through to TRL; the colocated vLLM engine is seeded per training seed. One real GRPO run (TRL + LoRA) of a tiny
Qwen2 built here also checks the plan's step count against TRL's own."""

from __future__ import annotations

import json
import random
import types

import pytest

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")
pytest.importorskip("trl")

from pgrpo.errors import InputError  # noqa: E402
from pgrpo.grpo.plan import optimizer_steps  # noqa: E402
from pgrpo.grpo.training_config import (  # noqa: E402
    TRACKERS,
    build_grpo_config,
    resolve_training,
    validate_training,
    vllm_engine_seed,
)


def test_objective_settings_are_explicit_and_the_papers_reading(tmp_path):
    args = build_grpo_config(resolve_training({}), 4, 42, str(tmp_path), has_eval=False, cuda=False)
    assert args.loss_type == "dapo" and args.scale_rewards == "group" and args.importance_sampling_level == "token"
    assert args.use_bias_correction_kl is False  # TRL 1.16's default is True
    assert args.vllm_importance_sampling_correction is True
    assert args.vllm_importance_sampling_mode == "token_truncate"  # TRL 1.16's default is sequence_mask
    assert args.vllm_importance_sampling_clip_max == 2.0 and args.vllm_importance_sampling_clip_min is None
    assert args.epsilon_high == args.epsilon == 0.2 and args.delta is None
    assert (args.top_entropy_quantile, args.mask_truncated_completions, args.entropy_coef) == (1.0, False, 0.0)
    assert (args.top_p, args.top_k, args.repetition_penalty) == (1.0, 0, 1.0)
    assert args.report_to == []  # report_to: none


def test_vllm_generation_stops_at_end_of_turn_and_fits_its_context(tmp_path):
    t = resolve_training({"use_vllm": True, "max_prompt_length": 256, "max_completion_length": 786})
    args = build_grpo_config(t, 4, 42, str(tmp_path), has_eval=False, cuda=False, stop_token_ids=[2, 151645])
    assert args.generation_kwargs == {"stop_token_ids": [2, 151645]}
    assert args.vllm_max_model_length == 256 + 786
    plain = build_grpo_config(resolve_training({}), 4, 42, str(tmp_path), has_eval=False, cuda=False,
                              stop_token_ids=[2, 151645])
    assert plain.generation_kwargs is None  # model.generate reads them from the model's generation config


def test_report_to_passes_through_and_checks_the_package(tmp_path):
    import importlib.util

    for name, package in TRACKERS.items():
        if package is None:
            continue
        t = resolve_training({"report_to": name})
        if importlib.util.find_spec(package) is None:
            with pytest.raises(InputError, match=f"training.report_to: {name} is not installed"):
                validate_training(t, 4)
        else:
            args = build_grpo_config(validate_training(t, 4), 4, 42, str(tmp_path), has_eval=False, cuda=False,
                                     run_name="m-G4-seed42")
            assert args.report_to == [name] and args.run_name == "m-G4-seed42"
    with pytest.raises(InputError, match="training.report_to: unknown tracker 'mlflow'"):
        validate_training(resolve_training({"report_to": "mlflow"}), 4)


def test_colocated_vllm_engine_gets_a_seed_per_training_seed(monkeypatch):
    """TRL 1.16 builds LLM(seed=process_index // tp): the same for every training seed. Inside seeded_vllm_engine it
    gets training seed + that (vLLM is not installed here: a recording stand-in takes LLM's place)."""
    import trl.generation.vllm_generation as module
    from pgrpo.grpo.trainer import seeded_vllm_engine

    seen = []
    monkeypatch.setattr(module, "LLM", lambda **kw: seen.append(kw["seed"]), raising=False)
    original = module.LLM
    for train_seed in (42, 3407):
        args = types.SimpleNamespace(use_vllm=True, vllm_mode="colocate", seed=train_seed)
        with seeded_vllm_engine(args):
            module.LLM(model="m", seed=1)  # process 1
        assert module.LLM is original
    assert seen == [43, 3408] == [vllm_engine_seed(42, 1), vllm_engine_seed(3407, 1)]
    with seeded_vllm_engine(types.SimpleNamespace(use_vllm=True, vllm_mode="server", seed=42)):
        module.LLM(seed=0)
    assert seen[-1] == 0  # server mode: the server's seed, untouched


def tiny_model_and_tokenizer():
    from pgrpo.grpo.tiny_model import build_model, build_tokenizer

    corpus = [f"{a}+{b}={a + b}" for a in range(10) for b in range(10)]
    tokenizer = build_tokenizer(corpus, vocab_size=300)
    arch = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 1, "max_position_embeddings": 64}
    return build_model(tokenizer, arch, seed=0), tokenizer, arch


def digit_reward(completions, answer, **kwargs):
    return [1.0 if c[:1].isdigit() else 0.0 for c in completions]


def test_a_real_run_records_its_objective_and_takes_the_planned_steps(tmp_path):
    from pgrpo.grpo.tiny_model import build_model
    from pgrpo.grpo.trainer import train_grpo

    model, tokenizer, arch = tiny_model_and_tokenizer()
    rng = random.Random(0)
    rows = [{"prompt": f"{a}+{b}=", "answer": f"#### {a + b}"}
            for a, b in ((rng.randint(0, 9), rng.randint(0, 9)) for _ in range(11))]
    training = {"num_train_epochs": 1.5, "max_steps": 0, "per_device_train_batch_size": 4,
                "gradient_accumulation_steps": 2, "max_completion_length": 3, "max_prompt_length": 16,
                "eval_steps": 0, "checkpoint_steps": 4, "learning_rate": 1e-3, "beta": 0.05,
                "lora": {"r": 2, "alpha": 4, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]},
                "merge_adapters": False}
    result = train_grpo(model=model, tokenizer=tokenizer, train_dataset=datasets.Dataset.from_list(rows),
                        eval_dataset=None, reward_funcs=[digit_reward], training=training, G=4, seed=3407,
                        out_dir=str(tmp_path / "run"), model_name="tiny",
                        load_base_model=lambda: build_model(tokenizer, arch, seed=0), stop_token_ids=[1])
    # by hand: 8 completions a generation = 2 prompts; floor(11 / 2) = 5 generations x 2 micro-steps / 2 = 5 steps
    # an epoch; ceil(1.5 x 5) = 8. TRL's own count is the same.
    assert result.steps == 8 == optimizer_steps(11, G=4, per_device_batch=4, accumulation=2,
                                                 steps_per_generation=None, num_iterations=1, processes=1,
                                                 epochs=1.5)
    meta = json.loads(result.meta_path.read_text())
    objective = meta["objective"]
    assert objective["use_bias_correction_kl"] is False and objective["loss_type"] == "dapo"
    assert objective["scale_rewards"] == "group" and objective["num_generations"] == 4
    assert objective["vllm_importance_sampling_mode"] == "token_truncate"
    assert objective["vllm_importance_sampling_clip_max"] == 2.0
    assert objective["generation_seed"].startswith("torch 3407")
    assert set(objective["reading"]) >= {"loss_type", "use_bias_correction_kl", "vllm_importance_sampling"}
    assert meta["stop_token_ids"] == [1] and meta["report_to"] == []
