"""GRPO training (pgrpo.train, Section 4.2 / Table 2) on a random-init tiny Qwen2 built here.

Real TRL GRPOTrainer + peft LoRA runs, no mocks. Numbers are checked against closed forms: the Bessel-corrected std
of binary rewards, the maximum entropy ln|V|, K_ref from the micro-step arithmetic, exact on-policy ratio 1, and
the unmerged adapter's own logits for the merge.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("datasets")
pytest.importorskip("trl")


from pgrpo.errors import InputError  # noqa: E402
from pgrpo.grpo.checkpoints import (  # noqa: E402
    LOG_COLUMNS,
    PARTIAL_LOG_NAME,
    assemble_log,
    last_complete_checkpoint,
    prepare_checkpoint_dir,
    read_partial_log,
    run_spec_fingerprint,
)
from pgrpo.grpo.trainer import train_grpo  # noqa: E402
from pgrpo.grpo.training_config import (  # noqa: E402
    build_grpo_config,
    BOOKKEEPING_KEYS,
    build_lora_config,
    dropout_disabled,
    is_on_policy,
    launch_command,
    refresh_interval,
    resolve_training,
    validate_training,
)
from pgrpo.stages.train import run_train  # noqa: E402

FIXTURE_CHARS = list(string.digits + string.ascii_letters + " +-*/=?.,#:\n")
SPECIALS = ["<pad>", "<eos>"]


# ---------------------------------------------------------------------------------------------------------------
# fixtures: a random tiny Qwen2 with a character-level byte-level tokenizer, inline data and reward
# ---------------------------------------------------------------------------------------------------------------


def build_fixture_model(directory: Path, seed: int = 0) -> Path:
    """Save a random-init 2-layer Qwen2ForCausalLM (~25k params) and its character tokenizer to ``directory``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    byte_char = {" ": "\u0120", "\n": "\u010a"}  # GPT-2 byte-level alphabet, so Qwen2Tokenizer round-trips
    vocab = {token: i for i, token in enumerate(SPECIALS + [byte_char.get(c, c) for c in FIXTURE_CHARS])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>")
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        eos_token_id=1,
        pad_token_id=0,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = 1
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def problems(n: int, seed: int) -> "datasets.Dataset":
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"prompt": f"{a}+{b}=", "answer": f"{a}+{b}\n#### {a + b}"})
    return datasets.Dataset.from_list(rows)


def lower_or_digit_reward(completions, answer, **kwargs):
    """Binary reward with a spread on a random model: 1 if the completion starts with a digit or lower-case letter."""
    assert len(answer) == len(completions)  # TRL forwards the dataset's answer column
    return [1.0 if c[:1] and (c[0].isdigit() or c[0].islower()) else 0.0 for c in completions]


SMALL_LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj", "up_proj"]}


def small_training(**overrides) -> dict:
    settings = {
        "max_steps": 6,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "max_completion_length": 6,
        "max_prompt_length": 16,
        "eval_steps": 3,
        "num_generations_eval": 2,
        "checkpoint_steps": 2,
        "learning_rate": 5e-3,
        "lora": SMALL_LORA,
    }
    settings.update(overrides)
    return settings


def run_fixture(model_dir: Path, out_dir: Path, training: dict, G: int = 4, reward=lower_or_digit_reward, seed=42):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return train_grpo(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        tokenizer=AutoTokenizer.from_pretrained(model_dir),
        train_dataset=problems(64, 0),
        eval_dataset=problems(6, 1),
        reward_funcs=[reward],
        training=training,
        G=G,
        seed=seed,
        out_dir=str(out_dir),
        model_name="fixture",
        load_base_model=lambda: AutoModelForCausalLM.from_pretrained(model_dir),
    )


@pytest.fixture(scope="module")
def fixture_model(tmp_path_factory) -> Path:
    return build_fixture_model(tmp_path_factory.mktemp("fixture_model"))


@pytest.fixture(scope="module")
def on_policy_run(fixture_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("on_policy")
    result = run_fixture(fixture_model, out, small_training(beta=0.05))
    return out, result


# ---------------------------------------------------------------------------------------------------------------
# configuration: Table 2, K_ref arithmetic, validation
# ---------------------------------------------------------------------------------------------------------------


def test_defaults_are_table_2(tmp_path):
    t = resolve_training({})
    args = build_grpo_config(t, 4, 42, str(tmp_path), has_eval=True, cuda=False)
    assert (args.learning_rate, args.num_train_epochs) == (1e-5, 2)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 4)
    assert (args.temperature, args.max_completion_length) == (0.8, 786)
    assert (args.logging_steps, args.eval_steps) == (1, 100)
    assert (args.beta, args.epsilon) == (0.005, 0.2)
    assert t["max_prompt_length"] == 256
    lora = build_lora_config(t["lora"])
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (16, 64, 0.05)
    assert set(lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"}
    assert not args.bf16 and args.use_cpu  # no CUDA here


@pytest.mark.parametrize(
    "accumulation, steps_per_generation, iterations, k_ref, on_policy",
    [
        (4, None, 1, 1, True),  # TRL default: one generation per optimizer step
        (4, 2, 1, 1, True),  # two generations inside one optimizer step, same parameters
        (4, 8, 1, 2, False),  # one generation serves 8 micro-steps = 2 optimizer steps
        (4, 4, 3, 3, False),  # reused 3 times
        (2, 4, 2, 4, False),
        (4, 6, 1, 1.5, False),
    ],
)
def test_refresh_interval_in_optimizer_steps(accumulation, steps_per_generation, iterations, k_ref, on_policy):
    t = resolve_training(
        {
            "gradient_accumulation_steps": accumulation,
            "steps_per_generation": steps_per_generation,
            "num_iterations": iterations,
        }
    )
    assert refresh_interval(t) == k_ref
    assert is_on_policy(t) is on_policy


@pytest.mark.parametrize(
    "overrides, G, fragment",
    [
        ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 1}, 3, "multiple of G=3"),
        ({"lerning_rate": 1e-5}, 4, "training.lerning_rate: unknown key"),
        ({"lora": {"rank": 8}}, 4, "training.lora.rank: unknown key"),
        ({"logging_steps": 10}, 4, "training.logging_steps"),
        ({"use_vllm": True}, 4, "training.use_vllm"),
        ({"adam_beta1": 1.0}, 4, "training.adam_beta1"),
        ({"steps_per_generation": 8, "checkpoint_steps": 3}, 4, "training.checkpoint_steps"),
        ({}, 1, "group_sizes: G must be"),
        ({"max_steps": 0, "num_train_epochs": 0}, 4, "training.num_train_epochs"),
    ],
)
def test_bad_training_config_names_the_key(overrides, G, fragment):
    with pytest.raises(InputError) as caught:
        validate_training(resolve_training(overrides), G)
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "overrides, disabled",
    [
        ({}, False),  # transformers' generate: TRL takes no second pass for pi_old on-policy, dropout stays
        ({"use_vllm": True}, True),  # vLLM + IS correction (TRL's default): pi_old in a second train-mode pass
        ({"use_vllm": True, "vllm_importance_sampling_correction": False}, False),
        ({"disable_dropout": True}, True),
        ({"use_vllm": True, "disable_dropout": False, "lora": {"dropout": 0.0}}, False),
    ],
)
def test_dropout_is_off_exactly_where_vllm_is_correction_takes_a_second_pass(overrides, disabled):
    training = resolve_training(overrides)
    assert dropout_disabled(training) is disabled
    args = build_grpo_config(training, 4, 42, "/tmp/unused", has_eval=False, cuda=False)
    assert args.disable_dropout is disabled  # what TRL is handed (it zeroes every nn.Dropout, LoRA's included)


def test_dropout_with_vllm_is_correction_is_refused_naming_the_key():
    with pytest.raises(InputError, match=r"training.disable_dropout: .*lora.dropout = 0.05"):
        validate_training(resolve_training({"use_vllm": True, "disable_dropout": False}), 4)
    with pytest.raises(InputError, match="training.disable_dropout: must be true, false or auto"):
        validate_training(resolve_training({"disable_dropout": "yes"}), 4)


def test_the_paper_grid_trains_without_dropout(repo_root):
    """config/paper.yaml generates with vLLM and its IS correction on: the IS ratio must read staleness."""
    from pgrpo.config import load_config

    training = resolve_training(load_config(repo_root / "config" / "paper.yaml")["training"])
    assert training["use_vllm"] and training["vllm_importance_sampling_correction"] and training["lora"]["dropout"] > 0
    assert dropout_disabled(training) is True


def test_launch_command_wraps_accelerate_only_with_several_gpus(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    assert launch_command({}, 1)[1:] == ["-m", "pgrpo"]
    command = launch_command({"accelerate_config": "config/accelerate/deepspeed_zero3.yaml"}, 4)
    assert command[:2] == ["accelerate", "launch"]
    assert command[command.index("--num_processes") + 1] == "4"
    assert command[-2:] == ["-m", "pgrpo"]
    with pytest.raises(InputError, match="training.accelerate_config"):
        launch_command({"accelerate_config": "nope.yaml"}, 2)


def test_shipped_accelerate_configs(repo_root):
    yaml = pytest.importorskip("yaml")
    configs = {p.stem: yaml.safe_load(p.read_text()) for p in (repo_root / "config" / "accelerate").glob("*.yaml")}
    assert set(configs) >= {"single_gpu", "deepspeed_zero2", "deepspeed_zero3"}
    assert configs["single_gpu"]["num_processes"] == 1
    assert configs["deepspeed_zero2"]["deepspeed_config"]["zero_stage"] == 2
    assert configs["deepspeed_zero3"]["deepspeed_config"]["zero_stage"] == 3
    assert configs["deepspeed_zero3"]["deepspeed_config"]["zero3_save_16bit_model"] is True


# ---------------------------------------------------------------------------------------------------------------
# the per-step log
# ---------------------------------------------------------------------------------------------------------------


def test_short_run_writes_every_column(on_policy_run):
    out, result = on_policy_run
    log = pd.read_csv(out / "log.csv")
    assert list(log["step"]) == list(range(1, 7))  # one row per optimizer step, each once
    for column in LOG_COLUMNS:
        assert column in log.columns
    n = 4 * 2  # completions per generation batch: per_device_train_batch_size x steps_per_generation
    for _, row in log.iterrows():
        p = row["reward"]
        assert round(p * n) == pytest.approx(p * n)  # a mean of n binary rewards
        assert row["reward_std"] == pytest.approx(math.sqrt(p * (1 - p) * n / (n - 1)), abs=1e-6)  # Bessel
        assert 0 <= row["frac_reward_zero_std"] <= 1
        assert 0 < row["entropy"] <= math.log(len(SPECIALS) + len(FIXTURE_CHARS)) + 1e-6
        assert row["kl"] >= 0
        assert math.isfinite(row["grad_norm"]) and row["grad_norm"] >= 0
        assert row["importance_sampling_ratio_max"] == 1.0  # on-policy: TRL's pi_old is pi_theta.detach()
    assert (log["kl"] > 0).any()  # the policy moved away from the reference
    evaluated = log.dropna(subset=["eval_reward"])
    assert list(evaluated["step"]) == [3, 6]
    assert (evaluated["eval_accuracy"] == evaluated["eval_reward"]).all()  # one binary reward
    assert log["eval_reward"].isna().sum() == 4
    meta = json.loads((out / "meta.json").read_text())
    assert meta["k_ref"] == 1 and meta["on_policy"] is True
    assert (meta["eta"], meta["mu"], meta["beta"], meta["G"], meta["seed"]) == (5e-3, 0.9, 0.05, 4, 42)
    assert meta["max_steps"] == 6 and meta["versions"]["trl"]
    assert result.steps == 6 and result.resumed_from == 0


def test_is_ratio_is_one_at_refresh_and_above_one_in_between(fixture_model, tmp_path):
    # steps_per_generation = 2 x accumulation: one generation serves two optimizer steps (K_ref = 2)
    run_fixture(fixture_model, tmp_path, small_training(steps_per_generation=4, max_steps=6, eval_steps=0, beta=0.0))
    log = pd.read_csv(tmp_path / "log.csv")
    assert log["kl"].isna().all()  # beta = 0: TRL computes no KL, so none is recorded
    fresh, stale = log[log["step"] % 2 == 1], log[log["step"] % 2 == 0]
    # first step after a generation: parameters equal pi_old (dropout 0), the ratio is 1 up to float error
    assert (fresh["importance_sampling_ratio_max"] - 1).abs().max() < 1e-4
    assert fresh["reward"].notna().all()
    # second step: one Adam step away from pi_old; TRL logs no reward there and neither do we
    assert (stale["importance_sampling_ratio_max"] > 1 + 1e-4).all()
    assert stale["reward"].isna().all() and stale["reward_std"].isna().all()
    assert (stale["importance_sampling_ratio_seq_max"] > 0).all()
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["k_ref"] == 2 and meta["on_policy"] is False


def test_assemble_log_rejects_gaps_and_duplicates():
    rows = [{"kind": "train", "step": s, "reward": 0.5} for s in (1, 2, 2)]
    with pytest.raises(RuntimeError, match="duplicated"):
        assemble_log(rows, 3)
    rows = [{"kind": "train", "step": 1}, {"kind": "train", "step": 2}, {"kind": "eval", "step": 2, "eval_reward": 1}]
    frame = assemble_log(rows, 2)
    assert list(frame["step"]) == [1, 2]
    assert frame["reward"].isna().all()  # absent = not measured
    assert math.isnan(frame.loc[0, "eval_reward"]) and frame.loc[1, "eval_reward"] == 1


def test_assemble_log_keeps_the_eval_before_the_first_update_as_step_0():
    rows = [{"kind": "eval", "step": 0, "eval_reward": 0.25, "eval_accuracy": 0.25},
            {"kind": "train", "step": 1, "reward": 0.5}, {"kind": "train", "step": 2, "reward": 0.75}]
    frame = assemble_log(rows, 2)
    assert list(frame["step"]) == [0, 1, 2]
    assert frame.loc[0, "eval_reward"] == 0.25 and math.isnan(frame.loc[0, "reward"])
    assert list(frame["reward"][1:]) == [0.5, 0.75]


# ---------------------------------------------------------------------------------------------------------------
# merge
# ---------------------------------------------------------------------------------------------------------------


def test_merged_model_reloads_with_the_adapter_logits(on_policy_run, fixture_model):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out, _ = on_policy_run
    merged = AutoModelForCausalLM.from_pretrained(out / "merged").eval()
    base = AutoModelForCausalLM.from_pretrained(fixture_model).eval()
    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(fixture_model), out / "checkpoints" / "adapter-final"
    ).eval()
    ids = torch.tensor([[5, 64, 70, 4, 12, 40, 3]])
    with torch.no_grad():
        merged_logits, adapted_logits, base_logits = (m(ids).logits for m in (merged, adapted, base))
    assert (merged_logits - base_logits).abs().max() > 1e-5  # training changed the model
    torch.testing.assert_close(merged_logits, adapted_logits, atol=1e-5, rtol=1e-5)
    assert (out / "merged" / "tokenizer.json").exists()


# ---------------------------------------------------------------------------------------------------------------
# faults: bad inputs, a raising reward, kill and resume
# ---------------------------------------------------------------------------------------------------------------


def test_dataset_without_answer_column_is_one_line(fixture_model, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    bad = problems(8, 0).remove_columns("answer")
    with pytest.raises(InputError, match=r"data\.train: dataset lacks column\(s\) answer"):
        train_grpo(
            model=AutoModelForCausalLM.from_pretrained(fixture_model),
            tokenizer=AutoTokenizer.from_pretrained(fixture_model),
            train_dataset=bad,
            eval_dataset=None,
            reward_funcs=[lower_or_digit_reward],
            training=small_training(),
            G=4,
            seed=0,
            out_dir=str(tmp_path),
            model_name="fixture",
        )
    assert not any(tmp_path.iterdir())


def test_missing_model_path_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"models\.ghost\.path"):
        run_train(
            model={"name": "ghost", "id": None, "path": str(tmp_path / "absent")},
            data={"train": {"path": str(tmp_path / "train.jsonl")}},
            training=small_training(),
            G=4,
            seed=0,
            out_dir=str(tmp_path / "run"),
        )
    assert not (tmp_path / "run").exists()


def exploding_reward(completions, answer, **kwargs):
    raise ValueError("cannot parse")


def test_raising_reward_fails_before_training(fixture_model, tmp_path):
    with pytest.raises(InputError) as caught:
        run_fixture(fixture_model, tmp_path, small_training(), reward=exploding_reward)
    assert str(caught.value) == "reward function exploding_reward raised ValueError: cannot parse"
    assert not (tmp_path / "log.csv").exists() and not (tmp_path / "checkpoints").exists()


def test_reward_raising_mid_run_leaves_nothing_complete(fixture_model, tmp_path):
    calls = {"n": 0}

    def flaky_reward(completions, answer, **kwargs):
        calls["n"] += 1
        if calls["n"] > 4:  # the preflight call and three training steps succeed
            raise KeyError("gold")
        return lower_or_digit_reward(completions, answer)

    with pytest.raises(InputError, match="reward function flaky_reward raised KeyError"):
        run_fixture(fixture_model, tmp_path, small_training(max_steps=8, eval_steps=0), reward=flaky_reward)
    for name in ("log.csv", "meta.json", "merged"):
        assert not (tmp_path / name).exists()
    assert (tmp_path / "checkpoints" / "checkpoint-2").is_dir()  # kept for a resume


def test_a_checkpoint_is_complete_only_with_every_rank_s_rng_state_whole(tmp_path):
    """transformers writes each rank's rng_state_<rank>.pth, and the main process trainer_state.json with no wait for
    the others: a checkpoint whose other rank's RNG state is missing or cut short is not resumed."""
    import torch
    from pgrpo.grpo.checkpoints import rng_states_whole

    checkpoints = tmp_path / "checkpoints"
    fingerprint = run_spec_fingerprint("m", resolve_training({}), 4, 1,
                                       {"distributed": {"world_size": 2, "distributed_type": "DEEPSPEED"}})
    prepare_checkpoint_dir(checkpoints, fingerprint)
    for step, ranks in ((4, (0, 1)), (6, (0,)), (8, (0, 1))):
        folder = checkpoints / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        for rank in ranks:
            torch.save({"python": [1, 2, 3], "cpu": torch.zeros(8)}, folder / f"rng_state_{rank}.pth")
    whole = (checkpoints / "checkpoint-8" / "rng_state_1.pth").read_bytes()
    (checkpoints / "checkpoint-8" / "rng_state_1.pth").write_bytes(whole[: len(whole) // 2])  # killed mid-write
    assert last_complete_checkpoint(checkpoints) == (checkpoints / "checkpoint-4", 4)
    assert rng_states_whole(checkpoints / "checkpoint-8", None) is False  # without a spec: the files present
    assert rng_states_whole(checkpoints / "checkpoint-6", None) is True  # ... rank 1's absence unseen
    assert prepare_checkpoint_dir(checkpoints, fingerprint)[1] == 4
    assert not (checkpoints / "checkpoint-8").exists()  # the torn ones after the resume point are set aside


def test_resume_truncates_rows_past_the_checkpoint(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    fingerprint = run_spec_fingerprint("m", resolve_training({}), 4, 1)
    prepare_checkpoint_dir(checkpoints, fingerprint)
    for step in (2, 4):
        (checkpoints / f"checkpoint-{step}").mkdir()
        (checkpoints / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (checkpoints / "checkpoint-6").mkdir()
    (checkpoints / "checkpoint-6" / "trainer_state.json").write_text('{"global_st')  # killed while saving
    partial = checkpoints / PARTIAL_LOG_NAME
    partial.write_text("".join(json.dumps({"kind": "train", "step": s}) + "\n" for s in range(1, 6)) + '{"kind": "tr')
    path, step = prepare_checkpoint_dir(checkpoints, fingerprint)
    assert (Path(path).name, step) == ("checkpoint-4", 4)
    assert [r["step"] for r in read_partial_log(partial)] == [1, 2, 3, 4]
    assert not (checkpoints / "checkpoint-6").exists()
    # another configuration: its checkpoints are set aside, not resumed
    other = run_spec_fingerprint("m", resolve_training({"learning_rate": 1e-4}), 4, 1)
    assert prepare_checkpoint_dir(checkpoints, other) == (None, 0)
    assert (tmp_path / "checkpoints.stale" / "checkpoint-4").is_dir()


#: one edit per bookkeeping key of ``training`` (BOOKKEEPING_KEYS), away from small_training's value
BOOKKEEPING_EDITS = {
    "report_to": [],
    "checkpoint_steps": 3,
    "checkpoints_keep": 3,
    "keep_checkpoints": False,
    "merge_adapters": False,
    "accelerate_config": "config/accelerate/deepspeed_zero2.yaml",
    "resources": {"mem_mb": 64000, "gpus": 0, "threads": 1},
}


@pytest.fixture(scope="module")
def bookkeeping_baseline(fixture_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("bookkeeping_baseline")
    run_fixture(fixture_model, out, small_training(eval_steps=3))
    return trajectory_rows(out / "log.csv")


def trajectory_rows(log_csv: Path) -> pd.DataFrame:
    """log.csv without its wall-clock column (``step_time``): the rows a trajectory is."""
    return pd.read_csv(log_csv).drop(columns=["step_time"])


def test_every_bookkeeping_key_has_an_edit():
    assert set(BOOKKEEPING_EDITS) == set(BOOKKEEPING_KEYS)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(BOOKKEEPING_EDITS))
def test_a_bookkeeping_key_leaves_the_trajectory_and_the_fingerprint(key, fixture_model, bookkeeping_baseline,
                                                                     tmp_path):
    """Two real runs that differ in one bookkeeping key log the same rows, and their checkpoints share one
    fingerprint (so a run resumed after the edit continues from its checkpoint)."""
    training = small_training(eval_steps=3, **{key: BOOKKEEPING_EDITS[key]})
    run_fixture(fixture_model, tmp_path, training)
    pd.testing.assert_frame_equal(trajectory_rows(tmp_path / "log.csv"), bookkeeping_baseline, check_exact=True)
    same = run_spec_fingerprint("fixture", resolve_training(small_training(eval_steps=3)), 4, 42)
    assert run_spec_fingerprint("fixture", resolve_training(training), 4, 42)["sha256"] == same["sha256"]


@pytest.mark.slow
def test_the_evaluation_has_its_own_generator_so_its_cadence_leaves_training_alone(fixture_model,
                                                                                  bookkeeping_baseline, tmp_path):
    """The evaluation samples from its own seeded generator (``evaluation_seed``), never from the training's: another
    cadence (every 2 steps instead of 3) leaves every training column as it was, and the step both evaluate (6)
    reads the same. ``eval_steps`` stays out of BOOKKEEPING_KEYS all the same: the eval rows are the train job's
    output in ``eval_mode: inline``, and which adapters it saves in ``checkpoints`` mode."""
    run_fixture(fixture_model, tmp_path, small_training(eval_steps=2))
    log = trajectory_rows(tmp_path / "log.csv").set_index("step")
    baseline = bookkeeping_baseline.set_index("step")
    assert "eval_steps" not in BOOKKEEPING_KEYS
    train_columns = [c for c in baseline.columns if not c.startswith("eval_")]
    pd.testing.assert_frame_equal(log[train_columns], baseline[train_columns], check_exact=True)
    evaluated = lambda frame: frame.dropna(subset=["eval_accuracy"]).index.tolist()  # noqa: E731
    assert (evaluated(log), evaluated(baseline)) == ([2, 4, 6], [3, 6])
    eval_columns = [c for c in baseline.columns if c.startswith("eval_")]
    pd.testing.assert_series_equal(log.loc[6, eval_columns], baseline.loc[6, eval_columns], check_exact=True)


def test_resume_keeps_the_refresh_schedule(fixture_model, tmp_path):
    """A run resumed from a checkpoint regenerates on the same steps as an uninterrupted one (K_ref = 2)."""
    import shutil

    training = small_training(steps_per_generation=4, max_steps=8, checkpoint_steps=2, eval_steps=0)
    run_fixture(fixture_model, tmp_path, training)
    # as if killed right after step 7: drop the outputs, the last checkpoint and the rows past checkpoint 6
    for name in ("log.csv", "meta.json", "merged", "checkpoints/checkpoint-8", "checkpoints/adapter-final"):
        target = tmp_path / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    run_fixture(fixture_model, tmp_path, training)
    log = pd.read_csv(tmp_path / "log.csv").set_index("step")
    assert list(log.index) == list(range(1, 9))
    assert json.loads((tmp_path / "meta.json").read_text())["resumed_from_step"] == 6
    assert log.loc[7, "reward"] == log.loc[7, "reward"] and math.isnan(log.loc[8, "reward"])  # generate at 7 only
    assert abs(log.loc[7, "importance_sampling_ratio_max"] - 1) < 1e-4
    assert log.loc[8, "importance_sampling_ratio_max"] > 1 + 1e-4


def test_run_train_with_the_workflow_modules(fixture_model, tmp_path):
    """run_train end to end: data by path (pgrpo.grpo.data), GSM8K binary reward (pgrpo.grpo.rewards), loader (pgrpo.grpo.tiny_model)."""
    pytest.importorskip("pgrpo.grpo.data")
    pytest.importorskip("pgrpo.grpo.rewards")
    pytest.importorskip("pgrpo.grpo.tiny_model")
    for role, n in (("train", 32), ("eval", 4)):
        rows = [{"q": f"{a}+{b}=", "a": f"#### {a + b}"} for a, b in zip(range(n), reversed(range(n)))]
        (tmp_path / f"{role}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = {
        role: {"path": str(tmp_path / f"{role}.jsonl"), "question_field": "q", "answer_field": "a"}
        for role in ("train", "eval")
    }
    model = {"name": "fixture", "id": None, "path": str(fixture_model)}
    run_train(
        model=model,
        data=data,
        training=small_training(max_steps=3, max_prompt_length=64),
        G=4,
        seed=3,
        out_dir=str(tmp_path / "run"),
    )
    log = pd.read_csv(tmp_path / "run" / "log.csv")
    assert list(log["step"]) == [1, 2, 3]
    assert log["reward"].between(0, 1).all() and log["eval_accuracy"].notna().sum() == 1
    assert (tmp_path / "run" / "merged" / "config.json").exists()
    data["train"]["answer_field"] = "solution"
    with pytest.raises(InputError, match=r"data\.train\.answer_field"):
        run_train(model=model, data=data, training=small_training(), G=4, seed=3, out_dir=str(tmp_path / "x"))


RESUME_SCRIPT = textwrap.dedent("""
    import json, random, sys, time
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from pgrpo.grpo.trainer import train_grpo

    model_dir, out_dir, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])

    def problems(n, seed):
        rng = random.Random(seed)
        rows = [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(n)]
        return datasets.Dataset.from_list([{"prompt": f"{a}+{b}=", "answer": f"#### {a + b}"} for a, b in rows])

    def slow_reward(completions, answer, **kwargs):
        time.sleep(delay)
        return [1.0 if c[:1] and (c[0].isdigit() or c[0].islower()) else 0.0 for c in completions]

    training = json.loads(sys.argv[4])
    train_grpo(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        tokenizer=AutoTokenizer.from_pretrained(model_dir),
        train_dataset=problems(64, 0), eval_dataset=problems(6, 1), reward_funcs=[slow_reward],
        training=training, G=4, seed=7, out_dir=out_dir, model_name="fixture",
        load_base_model=lambda: AutoModelForCausalLM.from_pretrained(model_dir))
    """)


@pytest.mark.slow
def test_killed_run_resumes_with_every_step_once(fixture_model, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RESUME_SCRIPT)
    out = tmp_path / "run"
    training = json.dumps(small_training(max_steps=24, checkpoint_steps=4, eval_steps=5))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(script), str(fixture_model), str(out)]
    process = subprocess.Popen([*command, "0.25", training], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if (
            last_complete_checkpoint(out / "checkpoints")
            and last_complete_checkpoint(out / "checkpoints")[1] >= 8
        ):
            break
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before it could be killed"
    process.kill()
    process.wait()
    assert not (out / "log.csv").exists() and not (out / "meta.json").exists()
    partial = read_partial_log(out / "checkpoints" / PARTIAL_LOG_NAME)
    before = {r["step"]: r for r in partial if r["kind"] == "train"}
    killed_at = max(before)
    _, resumed_at = last_complete_checkpoint(out / "checkpoints")
    assert resumed_at >= 8 and killed_at < 24

    subprocess.run([*command, "0", training], env=env, check=True, stderr=subprocess.DEVNULL, timeout=300)
    log = pd.read_csv(out / "log.csv")
    assert list(log["step"]) == list(range(1, 25))
    kept = log[log["step"] <= resumed_at]
    for _, row in kept.iterrows():  # rows up to the checkpoint are the first run's, untouched
        assert row["grad_norm"] == pytest.approx(before[row["step"]]["grad_norm"])
    # every eval_steps, plus the last step (transformers evaluates at the end of a step-based schedule)
    assert list(log.dropna(subset=["eval_reward"])["step"]) == [5, 10, 15, 20, 24]
    assert json.loads((out / "meta.json").read_text())["resumed_from_step"] == resumed_at


@pytest.mark.parametrize("rank, leaves", [(None, False), ("0", False), ("1", True), ("3", True)])
def test_a_worker_rank_ends_at_once_after_its_part_and_the_main_one_returns(monkeypatch, rank, leaves):
    """A launcher's worker other than the main one (RANK > 0) ends with os._exit(0) once training is done, its
    interpreter teardown skipped (where a leftover thread can abort it while the main process merges)."""
    from pgrpo.grpo.trainer import leave_if_worker_rank

    class Left(Exception):
        pass

    def fake_exit(code):
        raise Left(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
    if leaves:
        with pytest.raises(Left) as left:
            leave_if_worker_rank()
        assert left.value.args == (0,)
    else:
        assert leave_if_worker_rank() is None
