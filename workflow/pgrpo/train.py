"""GRPO training per (model, G, seed) with TRL's ``GRPOTrainer`` and peft LoRA (Section 4.2, Table 2).

The run follows Eq. (3) of Section 3.1: Adam (momentum ``mu`` = ``adam_beta1``) with learning rate ``eta`` on the
clipped GRPO objective of Eq. (2) (``beta`` = KL weight, ``epsilon`` = clip), the sampling policy refreshed every
``K_ref`` optimizer steps. TRL counts the refresh in micro-steps: one generation batch serves
``steps_per_generation x num_iterations`` micro-steps and one optimizer step is ``gradient_accumulation_steps``
micro-steps, so ``K_ref = steps_per_generation * num_iterations / gradient_accumulation_steps``.

At every optimizer step it writes one row of ``log.csv`` with what Sections 4.2 and 5.3-5.5 read:

==============================  =============================================================================
column                          TRL 1.16 metric (``train/`` prefix dropped) or source
==============================  =============================================================================
reward, reward_std              ``reward``, ``reward_std`` (only on steps that generate; empty on steps that
                                reuse a stored generation batch, never copied)
frac_reward_zero_std            ``frac_reward_zero_std`` (same rule)
entropy                         ``entropy`` (mean per-token entropy of pi_theta over completion tokens)
kl                              ``kl`` (TRL logs it only when ``beta > 0``; empty otherwise)
grad_norm                       ``grad_norm`` (transformers, before clipping)
importance_sampling_ratio_max   computed here (TRL logs ``sampling/importance_sampling_ratio/max`` only with vLLM,
                                and there it is the vLLM-vs-trainer mismatch): the maximum over the optimizer
                                step's completion tokens (all micro-batches, all processes) of the ratio the
                                clipped loss uses, exp(log pi_theta - log pi_old) per token (per sequence as a
                                geometric mean when ``importance_sampling_level="sequence"``). When TRL runs
                                exactly on-policy it sets pi_old = pi_theta.detach(); the ratio is then 1 by
                                construction and recorded as 1.0. Off-policy, TRL stores pi_old at generation
                                time with the model in train mode, so LoRA dropout > 0 also moves the ratio.
importance_sampling_ratio_seq_max  extra: max over sequences of pi_theta(o|q)/pi_old(o|q) = exp(sum of token log
                                ratios), the literal sequence ratio of Eq. (2).
eval_reward, eval_accuracy      TRL evaluation on the held-out set every ``eval_steps`` and at the last step
                                (transformers adds it): ``eval_reward`` = mean total reward over
                                ``num_generations_eval`` samples per eval prompt at the training temperature;
                                ``eval_accuracy`` = mean of the binary accuracy reward alone
                                (``eval_rewards/<accuracy fn>/mean``), i.e. the fraction of sampled eval
                                completions whose parsed answer equals the gold number. With the single binary
                                reward the two coincide.
extras                          learning_rate, completion_length (``completions/mean_length``), epoch, loss,
                                clip_ratio (``clip_ratio/region_mean``), step_time,
                                vllm_importance_sampling_ratio_max (TRL's vLLM metric, vLLM only),
                                eval_completion_length.
==============================  =============================================================================

Faults: checkpoints every ``checkpoint_steps`` under ``out_dir/checkpoints``; rows are appended durably (fsync) to
``checkpoints/steps.partial.jsonl`` and a re-run resumes from the last complete checkpoint after dropping the rows
past it, so the final ``log.csv`` has every step exactly once. ``log.csv``, ``meta.json`` and ``merged/`` are
written atomically at the end; ``meta.json`` holds eta, mu, K_ref, beta, epsilon, G, seed, the batch settings and
library versions. TRL 1.16 has no ``max_prompt_length``; prompts longer than it (in tokens, after the chat template)
are dropped before training (counted in meta.json).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pgrpo.atomic import atomic_dir, atomic_path, write_csv, write_json
from pgrpo.errors import InputError

# Table 2 (Appendix B) plus the TRL/transformers settings the paper leaves at their defaults.
TRAINING_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-5,
    "num_train_epochs": 2,
    "max_steps": 0,  # > 0 overrides num_train_epochs
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 4,
    "steps_per_generation": None,  # None: = gradient_accumulation_steps (on-policy, K_ref = 1)
    "num_iterations": 1,
    "temperature": 0.8,
    "max_prompt_length": 256,
    "max_completion_length": 786,
    "logging_steps": 1,
    "eval_steps": 100,  # 0 or None: no evaluation
    "eval_on_start": False,  # True: also evaluate before the first update (a step-0 row of log.csv)
    "num_generations_eval": None,  # None: = G (TRL's default)
    "per_device_eval_batch_size": None,  # None: smallest multiple of num_generations_eval >= train batch
    "beta": 0.005,
    "epsilon": 0.2,
    "loss_type": "dapo",  # TRL's default GRPO loss aggregation; the paper does not state one
    "importance_sampling_level": "token",
    "scale_rewards": "group",  # Eq. (1): divide by the within-group std
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "lr_scheduler_type": "linear",
    "warmup_steps": 0,  # int: steps; float in [0, 1): fraction of the run
    "disable_dropout": False,
    "gradient_checkpointing": False,
    "checkpoint_steps": 50,
    "checkpoints_keep": 2,
    "keep_checkpoints": True,  # False: remove out_dir/checkpoints after a successful merge
    "lora": {
        "r": 16,
        "alpha": 64,
        "dropout": 0.05,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"],
    },
    "merge_adapters": True,
    "use_vllm": False,
    "vllm_mode": "colocate",  # or "server" (start `trl vllm-serve` beside the job)
    "vllm_server_base_url": None,
    "vllm_gpu_memory_utilization": 0.3,
    "bf16": True,  # used only when CUDA is present
    "accelerate_config": None,  # launcher config for >1 GPU, e.g. config/accelerate/deepspeed_zero2.yaml
    "resources": {"gpus": 0, "runtime_min": 60, "mem_mb": 4000, "threads": 1},
}

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
LOG_COLUMNS = [
    "step",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "entropy",
    "kl",
    "grad_norm",
    "importance_sampling_ratio_max",
    "eval_reward",
    "eval_accuracy",
    "importance_sampling_ratio_seq_max",
    "vllm_importance_sampling_ratio_max",
    "learning_rate",
    "completion_length",
    "epoch",
    "loss",
    "clip_ratio",
    "step_time",
    "eval_completion_length",
]
# TRL / transformers log key -> log.csv column, for the per-step (train) logs.
TRAIN_METRIC_COLUMNS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "entropy": "entropy",
    "kl": "kl",
    "grad_norm": "grad_norm",
    "importance_sampling_ratio_max": "importance_sampling_ratio_max",
    "importance_sampling_ratio_seq_max": "importance_sampling_ratio_seq_max",
    "sampling/importance_sampling_ratio/max": "vllm_importance_sampling_ratio_max",
    "learning_rate": "learning_rate",
    "completions/mean_length": "completion_length",
    "epoch": "epoch",
    "loss": "loss",
    "clip_ratio/region_mean": "clip_ratio",
    "step_time": "step_time",
}
CHECKPOINT_DIRNAME = "checkpoints"
PARTIAL_LOG_NAME = "steps.partial.jsonl"
RUN_SPEC_NAME = "run_spec.json"
# Keys that do not change the trajectory: a change in them does not invalidate checkpoints.
NON_TRAJECTORY_KEYS = ("resources", "accelerate_config", "merge_adapters", "keep_checkpoints", "checkpoints_keep")


# ----------------------------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------------------------


def resolve_training(training: dict | None) -> dict:
    """The ``training:`` section merged onto :data:`TRAINING_DEFAULTS`; unknown keys raise :class:`InputError`."""
    training = dict(training or {})
    resolved = copy.deepcopy(TRAINING_DEFAULTS)
    for key, value in training.items():
        if key not in resolved:
            raise InputError(f"training.{key}: unknown key (known: {', '.join(sorted(resolved))})")
        if key in ("lora", "resources"):
            if not isinstance(value, dict):
                raise InputError(f"training.{key}: expected a mapping, got {value!r}")
            for sub in value:
                if sub not in resolved[key]:
                    raise InputError(f"training.{key}.{sub}: unknown key (known: {', '.join(resolved[key])})")
            resolved[key].update(value)
        else:
            resolved[key] = value
    return resolved


def _require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise InputError(f"training.{key}: {message}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def generate_every_micro_steps(training: dict) -> int:
    """Micro-steps served by one generation batch: ``steps_per_generation * num_iterations`` (TRL's count)."""
    steps_per_generation = training["steps_per_generation"] or training["gradient_accumulation_steps"]
    return steps_per_generation * training["num_iterations"]


def refresh_interval(training: dict) -> float:
    """K_ref of Eq. (3) in optimizer steps: TRL's micro-step refresh period over the accumulation length.

    On-policy TRL (generation period <= accumulation, dividing it) gives K_ref = 1. The value is an int when the
    division is exact and a float otherwise.
    """
    ratio = generate_every_micro_steps(training) / training["gradient_accumulation_steps"]
    if ratio <= 1 and training["gradient_accumulation_steps"] % generate_every_micro_steps(training) == 0:
        return 1
    return int(ratio) if float(ratio).is_integer() else ratio


def is_on_policy(training: dict) -> bool:
    """TRL skips pi_old (sets it to pi_theta.detach()) exactly when the generation period divides the accumulation."""
    return (
        training["gradient_accumulation_steps"] % generate_every_micro_steps(training) == 0 and not training["use_vllm"]
    )


def validate_training(training: dict, G: int, *, num_processes: int = 1, cuda: bool = False) -> dict:
    """Check a resolved ``training`` section against TRL's rules for group size ``G``; return it unchanged.

    Raises :class:`InputError` naming the key before anything is loaded.
    """
    t = training
    if not (_is_int(G) and G >= 2):
        raise InputError(f"group_sizes: G must be an integer >= 2 (GRPO needs a within-group spread), got {G!r}")
    _require(_is_number(t["learning_rate"]) and t["learning_rate"] > 0, "learning_rate", "must be a number > 0")
    _require(_is_int(t["max_steps"]), "max_steps", "must be an integer (<= 0: use num_train_epochs)")
    if t["max_steps"] <= 0:
        _require(
            _is_number(t["num_train_epochs"]) and t["num_train_epochs"] > 0,
            "num_train_epochs",
            "must be > 0 when max_steps <= 0",
        )
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_iterations", "checkpoint_steps"):
        _require(_is_int(t[key]) and t[key] >= 1, key, f"must be an integer >= 1, got {t[key]!r}")
    _require(
        t["steps_per_generation"] is None or (_is_int(t["steps_per_generation"]) and t["steps_per_generation"] >= 1),
        "steps_per_generation",
        "must be null or an integer >= 1",
    )
    _require(_is_number(t["temperature"]) and t["temperature"] > 0, "temperature", "must be a number > 0")
    _require(
        t["max_prompt_length"] is None or (_is_int(t["max_prompt_length"]) and t["max_prompt_length"] >= 1),
        "max_prompt_length",
        "must be null or an integer >= 1",
    )
    _require(
        _is_int(t["max_completion_length"]) and t["max_completion_length"] >= 1,
        "max_completion_length",
        "must be an integer >= 1",
    )
    _require(
        t["logging_steps"] == 1,
        "logging_steps",
        f"must be 1: log.csv holds one row per optimizer step (Table 2), got {t['logging_steps']!r}",
    )
    _require(
        t["eval_steps"] is None or (_is_int(t["eval_steps"]) and t["eval_steps"] >= 0),
        "eval_steps",
        "must be null, 0 (no evaluation) or an integer >= 1",
    )
    _require(_is_number(t["beta"]) and t["beta"] >= 0, "beta", "must be a number >= 0")
    _require(_is_number(t["epsilon"]) and t["epsilon"] > 0, "epsilon", "must be a number > 0")
    _require(_is_number(t["adam_beta1"]) and 0 <= t["adam_beta1"] < 1, "adam_beta1", "mu must lie in [0, 1)")
    _require(_is_number(t["adam_beta2"]) and 0 <= t["adam_beta2"] < 1, "adam_beta2", "must lie in [0, 1)")
    _require(t["loss_type"] in LOSS_TYPES, "loss_type", f"must be one of {', '.join(LOSS_TYPES)}")
    _require(
        t["importance_sampling_level"] in ("token", "sequence"),
        "importance_sampling_level",
        "must be 'token' or 'sequence'",
    )
    _require(t["scale_rewards"] in ("group", "batch", "none"), "scale_rewards", "must be group, batch or none")
    _require(
        t["checkpoints_keep"] is None or (_is_int(t["checkpoints_keep"]) and t["checkpoints_keep"] >= 2),
        "checkpoints_keep",
        "must be null (keep all) or an integer >= 2 (one complete checkpoint survives a kill during a save)",
    )
    lora = t["lora"]
    _require(_is_int(lora["r"]) and lora["r"] >= 1, "lora.r", "must be an integer >= 1")
    _require(_is_number(lora["alpha"]) and lora["alpha"] > 0, "lora.alpha", "must be a number > 0")
    _require(_is_number(lora["dropout"]) and 0 <= lora["dropout"] < 1, "lora.dropout", "must lie in [0, 1)")
    _require(
        isinstance(lora["target_modules"], list)
        and lora["target_modules"]
        and all(isinstance(m, str) for m in lora["target_modules"]),
        "lora.target_modules",
        "must be a non-empty list of module names",
    )
    for key in ("merge_adapters", "keep_checkpoints", "use_vllm", "bf16", "disable_dropout", "gradient_checkpointing",
                "eval_on_start"):
        _require(isinstance(t[key], bool), key, f"must be true or false, got {t[key]!r}")
    _require(t["vllm_mode"] in ("colocate", "server"), "vllm_mode", "must be 'colocate' or 'server'")
    _require(
        not t["use_vllm"] or cuda,
        "use_vllm",
        "vLLM generation needs CUDA GPUs and none is visible; set use_vllm: false",
    )
    resources = t["resources"]
    for key, low in (("gpus", 0), ("runtime_min", 1), ("mem_mb", 1), ("threads", 1)):
        _require(_is_int(resources[key]) and resources[key] >= low, f"resources.{key}", f"must be an integer >= {low}")

    _require(
        t["per_device_eval_batch_size"] is None
        or (_is_int(t["per_device_eval_batch_size"]) and t["per_device_eval_batch_size"] >= 1),
        "per_device_eval_batch_size",
        "must be null or an integer >= 1",
    )
    num_generations_eval = t["num_generations_eval"] or G
    _require(_is_int(num_generations_eval) and num_generations_eval >= 1, "num_generations_eval", "must be >= 1")
    # TRL: the generation batch (completions) must hold whole groups of G.
    steps_per_generation = t["steps_per_generation"] or t["gradient_accumulation_steps"]
    generation_batch = t["per_device_train_batch_size"] * num_processes * steps_per_generation
    _require(
        generation_batch % G == 0,
        "per_device_train_batch_size",
        f"per_device_train_batch_size x processes x steps_per_generation = {t['per_device_train_batch_size']} x "
        f"{num_processes} x {steps_per_generation} = {generation_batch} completions per generation batch must be a "
        f"multiple of G={G}",
    )
    eval_batch = eval_batch_size(t, G)
    _require(
        (eval_batch * num_processes) % num_generations_eval == 0,
        "per_device_eval_batch_size",
        f"{eval_batch} x {num_processes} processes must be a multiple of num_generations_eval={num_generations_eval}",
    )
    # A resumed run regenerates at its first step; checkpoints on refresh boundaries make that the original schedule.
    generate_every = generate_every_micro_steps(t)
    _require(
        (t["checkpoint_steps"] * t["gradient_accumulation_steps"]) % generate_every == 0
        or t["gradient_accumulation_steps"] % generate_every == 0,
        "checkpoint_steps",
        f"must be a multiple of the refresh interval K_ref={refresh_interval(t)} optimizer steps "
        f"(steps_per_generation x num_iterations / gradient_accumulation_steps) so a resumed run refreshes on the "
        "same steps",
    )
    return t


def eval_batch_size(training: dict, G: int) -> int:
    """Per-device eval batch (completions): the configured one, or the smallest multiple of the eval group size
    that is at least the training micro-batch."""
    if training["per_device_eval_batch_size"]:
        return int(training["per_device_eval_batch_size"])
    group = training["num_generations_eval"] or G
    return group * max(1, math.ceil(training["per_device_train_batch_size"] / group))


def run_spec_fingerprint(model_name: str, training: dict, G: int, seed: int, extra: dict | None = None) -> dict:
    """What determines the trajectory; checkpoints made under another spec are not resumed."""
    relevant = {k: v for k, v in training.items() if k not in NON_TRAJECTORY_KEYS}
    spec = {"model": model_name, "G": G, "seed": seed, "training": relevant, **(extra or {})}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    return {"sha256": digest, "spec": spec}


def dataset_digest(dataset) -> str:
    """sha256 of a dataset's rows (prompt, answer, ...), so changed data is never resumed from old checkpoints."""
    digest = hashlib.sha256()
    for row in dataset:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def model_stamp(model: dict) -> dict:
    """Identity of the base weights: hub id, or the local files' names, sizes and modification times."""
    path = model.get("path")
    if not path:
        return {"id": model.get("id"), "revision": model.get("revision")}
    files = sorted(p for p in Path(path).rglob("*") if p.is_file())
    return {
        "path": str(path),
        "files": [[str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
    }


def build_lora_config(lora: dict):
    """peft LoRA on the attention and MLP projections (Section 4.2: r=16, alpha=64, dropout 0.05)."""
    from peft import LoraConfig

    return LoraConfig(
        r=int(lora["r"]),
        lora_alpha=lora["alpha"],
        lora_dropout=float(lora["dropout"]),
        target_modules=list(lora["target_modules"]),
        bias="none",
        task_type="CAUSAL_LM",
    )


def build_grpo_config(training: dict, G: int, seed: int, output_dir: str, *, has_eval: bool, cuda: bool):
    """TRL ``GRPOConfig`` for Table 2; bf16 only on CUDA, CPU otherwise."""
    from trl import GRPOConfig

    t = training
    eval_on = has_eval and bool(t["eval_steps"])
    kwargs: dict[str, Any] = dict(
        output_dir=output_dir,
        seed=seed,
        data_seed=seed,
        learning_rate=float(t["learning_rate"]),
        num_train_epochs=float(t["num_train_epochs"]),
        max_steps=int(t["max_steps"]) if t["max_steps"] > 0 else -1,
        per_device_train_batch_size=t["per_device_train_batch_size"],
        gradient_accumulation_steps=t["gradient_accumulation_steps"],
        steps_per_generation=t["steps_per_generation"],
        num_iterations=t["num_iterations"],
        num_generations=G,
        num_generations_eval=t["num_generations_eval"] or G,
        per_device_eval_batch_size=eval_batch_size(t, G),
        temperature=float(t["temperature"]),
        max_completion_length=t["max_completion_length"],
        beta=float(t["beta"]),
        epsilon=float(t["epsilon"]),
        loss_type=t["loss_type"],
        importance_sampling_level=t["importance_sampling_level"],
        scale_rewards=t["scale_rewards"],
        adam_beta1=float(t["adam_beta1"]),
        adam_beta2=float(t["adam_beta2"]),
        weight_decay=float(t["weight_decay"]),
        max_grad_norm=float(t["max_grad_norm"]),
        lr_scheduler_type=t["lr_scheduler_type"],
        warmup_steps=t["warmup_steps"],
        disable_dropout=t["disable_dropout"],
        logging_strategy="steps",
        logging_steps=1,
        eval_strategy="steps" if eval_on else "no",
        eval_steps=t["eval_steps"] if eval_on else None,
        eval_on_start=bool(eval_on and t["eval_on_start"]),
        save_strategy="steps",
        save_steps=t["checkpoint_steps"],
        save_total_limit=t["checkpoints_keep"],
        report_to="none",
        bf16=bool(t["bf16"] and cuda),
        fp16=False,
        use_cpu=not cuda,
        dataloader_num_workers=0,
        use_vllm=t["use_vllm"],
        vllm_mode=t["vllm_mode"],
        vllm_gpu_memory_utilization=float(t["vllm_gpu_memory_utilization"]),
        log_completions=False,
    )
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name still works)
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    kwargs[checkpointing] = t["gradient_checkpointing"]
    if t["vllm_server_base_url"]:
        kwargs["vllm_server_base_url"] = t["vllm_server_base_url"]
    return GRPOConfig(**kwargs)


# ----------------------------------------------------------------------------------------------------------------
# the trainer: TRL's GRPOTrainer plus the importance-sampling ratio of Section 5.5
# ----------------------------------------------------------------------------------------------------------------


def _trainer_class():
    import torch
    from trl import GRPOTrainer

    class LoggedGRPOTrainer(GRPOTrainer):
        """``GRPOTrainer`` that records max pi_theta/pi_old per optimizer step and resumes on the refresh schedule.

        The ratio is read where TRL forms it (``_compute_loss``): the policy log-probs of the micro-batch against
        ``old_per_token_logps`` stored at generation time. When TRL stores none (on-policy), its loss uses
        pi_old = pi_theta.detach(), a ratio of exactly 1.
        """

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._policy_logps = None
            self._ratio_window: list[float] = [-math.inf, -math.inf]

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if kwargs.get("compute_entropy"):  # the call inside _compute_loss, with gradients
                self._policy_logps = out[0]
            return out

        def training_step(self, model, inputs, num_items_in_batch):
            # TRL counts micro-steps from 0 in every process; after a resume put it back on the refresh schedule.
            if self._step == 0 and self.state.global_step > 0:
                self._step = self.state.global_step * self.args.gradient_accumulation_steps
            return super().training_step(model, inputs, num_items_in_batch)

        def _compute_loss(self, model, inputs):
            self._policy_logps = None
            loss = super()._compute_loss(model, inputs)
            if self.model.training and self._policy_logps is not None:
                self._record_importance_ratio(inputs)
            return loss

        @torch.no_grad()
        def _record_importance_ratio(self, inputs) -> None:
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            mask = mask.bool()
            old = inputs.get("old_per_token_logps")
            device = mask.device
            if not mask.any():
                local = torch.tensor([-math.inf, -math.inf], device=device)
            elif old is None:
                local = torch.tensor([1.0, 1.0], device=device)  # TRL: pi_old := pi_theta.detach()
            else:
                log_ratio = (self._policy_logps.detach() - old).double().masked_fill(~mask, 0.0)
                lengths = mask.sum(-1)
                rows = lengths > 0
                sequence_log_ratio = log_ratio.sum(-1)[rows]
                if self.importance_sampling_level == "sequence":
                    ratio_max = torch.exp((sequence_log_ratio / lengths[rows]).max())
                else:
                    ratio_max = torch.exp(log_ratio[mask].max())
                local = torch.stack([ratio_max, torch.exp(sequence_log_ratio.max())]).float()
            gathered = self.accelerator.gather(local.reshape(1, 2)).reshape(-1, 2).max(dim=0).values.tolist()
            self._ratio_window = [max(a, b) for a, b in zip(self._ratio_window, gathered)]
            if self.accelerator.sync_gradients:  # last micro-batch of the optimizer step
                token_max, sequence_max = (v if v > -math.inf else math.nan for v in self._ratio_window)
                self._metrics["train"]["importance_sampling_ratio_max"].append(token_max)
                self._metrics["train"]["importance_sampling_ratio_seq_max"].append(sequence_max)
                self._ratio_window = [-math.inf, -math.inf]

    return LoggedGRPOTrainer


# ----------------------------------------------------------------------------------------------------------------
# the per-step log
# ----------------------------------------------------------------------------------------------------------------


def _clean(value: Any) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def train_row(logs: dict, step: int) -> dict:
    """One optimizer step's row from a transformers/TRL train log (keys absent in ``logs`` stay absent)."""
    row: dict[str, Any] = {"kind": "train", "step": step}
    for key, column in TRAIN_METRIC_COLUMNS.items():
        if key in logs and _clean(logs[key]) is not None:
            row[column] = _clean(logs[key])
    return row


def eval_row(logs: dict, step: int, accuracy_reward_name: str) -> dict:
    row: dict[str, Any] = {"kind": "eval", "step": step}
    for key, column in (
        ("eval_reward", "eval_reward"),
        (f"eval_rewards/{accuracy_reward_name}/mean", "eval_accuracy"),
        ("eval_completions/mean_length", "eval_completion_length"),
    ):
        if _clean(logs.get(key)) is not None:
            row[column] = _clean(logs[key])
    return row


def _step_log_callback_class():
    from transformers import TrainerCallback

    class StepLogCallback(TrainerCallback):
        """Appends each optimizer step's train row and each eval row to a JSONL file, flushed and fsynced."""

        def __init__(self, path: Path, accuracy_reward_name: str):
            self.path = path
            self.accuracy_reward_name = accuracy_reward_name

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            if any(key.startswith("eval_") for key in logs):
                row = eval_row(logs, state.global_step, self.accuracy_reward_name)
            elif "loss" in logs and "train_runtime" not in logs:
                row = train_row(logs, state.global_step)
            else:
                return  # the end-of-training summary
            with open(self.path, "a") as handle:
                handle.write(json.dumps(row) + "\n")
                handle.flush()
                os.fsync(handle.fileno())

    return StepLogCallback


def _progress_callback_class():
    from transformers.trainer_callback import ProgressCallback

    class RewardProgressCallback(ProgressCallback):
        """transformers' tqdm bar (stderr), showing the latest reward instead of printing every log dict."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and self.training_bar is not None and logs:
                shown = {k: f"{logs[k]:.3f}" for k in ("reward", "eval_reward") if _clean(logs.get(k)) is not None}
                if shown:
                    self.training_bar.set_postfix(shown, refresh=False)

    return RewardProgressCallback


def read_partial_log(path: Path) -> list[dict]:
    """Rows of the partial JSONL; a torn last line (kill mid-write) is ignored."""
    rows: list[dict] = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "step" in row and "kind" in row:
            rows.append(row)
    return rows


def truncate_partial_log(path: Path, last_step: int) -> None:
    """Keep only rows with ``step <= last_step`` (the resumed checkpoint), rewritten atomically."""
    rows = [row for row in read_partial_log(path) if row["step"] <= last_step]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))


def assemble_log(rows: list[dict], last_step: int):
    """The final ``log.csv`` frame: train rows 1..last_step, each exactly once, with eval rows merged in; an eval
    before the first update (``eval_on_start``) is a row of its own at step 0, with no train columns."""
    import pandas as pd

    train = [r for r in rows if r["kind"] == "train"]
    steps = [r["step"] for r in train]
    if sorted(steps) != list(range(1, last_step + 1)):
        missing = sorted(set(range(1, last_step + 1)) - set(steps))
        duplicated = sorted({s for s in steps if steps.count(s) > 1})
        raise RuntimeError(
            f"per-step log is not steps 1..{last_step} once each (missing {missing[:5]}, duplicated {duplicated[:5]})"
        )
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "kind"} for r in train]).set_index("step")
    evals = {}
    for r in rows:
        if r["kind"] == "eval":
            evals[r["step"]] = {k: v for k, v in r.items() if k not in ("kind", "step")}  # last one wins
    if evals:
        frame = frame.join(pd.DataFrame.from_dict(evals, orient="index"), how="left")
        if 0 in evals:
            frame = pd.concat([pd.DataFrame([evals[0]], index=[0]), frame])
    frame = frame.reindex(columns=[c for c in LOG_COLUMNS if c != "step"])
    frame.index.name = "step"
    return frame.sort_index().reset_index()


# ----------------------------------------------------------------------------------------------------------------
# checkpoints and resume
# ----------------------------------------------------------------------------------------------------------------


def last_complete_checkpoint(checkpoint_dir: Path) -> tuple[Path, int] | None:
    """The newest ``checkpoint-N`` whose ``trainer_state.json`` (written last by transformers) parses."""
    if not checkpoint_dir.is_dir():
        return None
    found = []
    for child in checkpoint_dir.iterdir():
        if child.is_dir() and child.name.startswith("checkpoint-") and child.name[len("checkpoint-") :].isdigit():
            try:
                state = json.loads((child / "trainer_state.json").read_text())
                found.append((int(state["global_step"]), child))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    if not found:
        return None
    step, path = max(found)
    return path, step


def prepare_checkpoint_dir(checkpoint_dir: Path, fingerprint: dict) -> tuple[str | None, int]:
    """Resume point (path, step) for this run spec; stale or torn state is set aside, never silently reused."""
    spec_path = checkpoint_dir / RUN_SPEC_NAME
    if checkpoint_dir.exists():
        try:
            previous = json.loads(spec_path.read_text())["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            previous = None
        if previous != fingerprint["sha256"]:
            if any(checkpoint_dir.iterdir()):
                stale = checkpoint_dir.with_name(checkpoint_dir.name + ".stale")
                shutil.rmtree(stale, ignore_errors=True)
                os.replace(checkpoint_dir, stale)
                print(f"pgrpo train: checkpoints from another configuration moved to {stale}", file=sys.stderr)
            else:
                checkpoint_dir.rmdir()
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    write_json(spec_path, fingerprint)
    partial = checkpoint_dir / PARTIAL_LOG_NAME
    resume = last_complete_checkpoint(checkpoint_dir)
    if resume is None:
        partial.unlink(missing_ok=True)
        return None, 0
    path, step = resume
    for child in checkpoint_dir.iterdir():  # torn checkpoints newer than the resume point
        if child.is_dir() and child.name.startswith("checkpoint-") and child.name[11:].isdigit():
            if int(child.name[11:]) > step:
                shutil.rmtree(child)
    truncate_partial_log(partial, step)
    return str(path), step


# ----------------------------------------------------------------------------------------------------------------
# data, reward and model checks
# ----------------------------------------------------------------------------------------------------------------


def check_dataset(dataset, role: str) -> None:
    if dataset is None or len(dataset) == 0:
        raise InputError(f"data.{role}: the dataset is empty")
    missing = [c for c in ("prompt", "answer") if c not in dataset.column_names]
    if missing:
        raise InputError(
            f"data.{role}: dataset lacks column(s) {', '.join(missing)} (has {', '.join(dataset.column_names)})"
        )


def _prompt_length(tokenizer, prompt) -> int:
    if isinstance(prompt, list):  # conversational
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return len(ids)
    return len(tokenizer(prompt)["input_ids"])


def drop_long_prompts(dataset, tokenizer, max_prompt_length: int | None, role: str):
    """TRL 1.16 has no ``max_prompt_length``: prompts longer than it (in tokens) are dropped; returns (kept, n)."""
    if not max_prompt_length:
        return dataset, 0
    lengths = [_prompt_length(tokenizer, p) for p in dataset["prompt"]]
    keep = [i for i, n in enumerate(lengths) if n <= max_prompt_length]
    if not keep:
        raise InputError(
            f"training.max_prompt_length: every {role} prompt is longer than {max_prompt_length} tokens "
            f"(shortest {min(lengths)})"
        )
    dropped = len(lengths) - len(keep)
    return (dataset.select(keep) if dropped else dataset), dropped


class RewardFunctionError(InputError):
    """The reward function raised or returned the wrong shape."""


def guard_reward(func: Callable) -> Callable:
    """Wrap a TRL reward function so a failure surfaces as one line naming it (TRL reads ``__name__``)."""

    @functools.wraps(func)
    def guarded(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - re-raised as one line
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise RewardFunctionError(
                f"reward function {func.__name__} raised {type(error).__name__}: {first}"
            ) from error

    return guarded


def preflight_reward(func: Callable, dataset) -> None:
    """Call the reward on one example's gold answer as a completion, before any model is loaded."""
    example = dataset[0]
    completion = (
        [{"role": "assistant", "content": str(example["answer"])}]
        if isinstance(example["prompt"], list)
        else str(example["answer"])
    )
    kwargs = {k: [example[k]] for k in dataset.column_names if k != "prompt"}
    try:
        out = func(prompts=[example["prompt"]], completions=[completion], completion_ids=[[0]], **kwargs)
    except RewardFunctionError:
        raise
    except Exception as error:  # noqa: BLE001
        raise RewardFunctionError(f"reward function {func.__name__} raised {type(error).__name__}: {error}") from None
    if not isinstance(out, (list, tuple)) or len(out) != 1:
        raise RewardFunctionError(f"reward function {func.__name__} must return one reward per completion")
    if out[0] is not None and not _is_number(float(out[0])):
        raise RewardFunctionError(f"reward function {func.__name__} returned {out[0]!r}, not a number")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "predictable-grpo"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


# ----------------------------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainResult:
    """What a finished run produced."""

    log_path: Path
    meta_path: Path
    merged_path: Path | None
    steps: int
    resumed_from: int


def train_grpo(
    *,
    model,
    tokenizer,
    train_dataset,
    eval_dataset,
    reward_funcs: Sequence[Callable],
    training: dict,
    G: int,
    seed: int,
    out_dir: str,
    model_name: str,
    load_base_model: Callable[[], Any] | None = None,
    provenance: dict | None = None,
) -> TrainResult:
    """Run GRPO + LoRA on ``model`` and write ``out_dir/{log.csv, meta.json, merged/}``; resume if possible.

    ``reward_funcs[0]`` is the binary accuracy reward that defines ``eval_accuracy``. ``load_base_model`` returns
    a fresh copy of the base weights for the merge (the trained copy is adapter-wrapped and may be sharded).
    ``provenance`` (model and data specs, weight-file stamps) joins the run spec: checkpoints made under another
    spec are set aside, not resumed.
    """
    import torch

    cuda = torch.cuda.is_available()
    training = validate_training(
        resolve_training(training), G, num_processes=int(os.environ.get("WORLD_SIZE", "1")), cuda=cuda
    )
    torch.set_num_threads(training["resources"]["threads"])
    check_dataset(train_dataset, "train")
    if eval_dataset is not None:
        check_dataset(eval_dataset, "eval")
    reward_funcs = [guard_reward(f) for f in reward_funcs]
    preflight_reward(reward_funcs[0], train_dataset)
    train_dataset, dropped_train = drop_long_prompts(train_dataset, tokenizer, training["max_prompt_length"], "train")
    dropped_eval = 0
    if eval_dataset is not None:
        eval_dataset, dropped_eval = drop_long_prompts(eval_dataset, tokenizer, training["max_prompt_length"], "eval")

    out = Path(out_dir)
    checkpoint_dir = out / CHECKPOINT_DIRNAME
    fingerprint = run_spec_fingerprint(
        model_name,
        training,
        G,
        seed,
        {
            "train_data": dataset_digest(train_dataset),
            "eval_data": dataset_digest(eval_dataset) if eval_dataset is not None else None,
            "provenance": provenance or {},
        },
    )
    args = build_grpo_config(training, G, seed, str(checkpoint_dir), has_eval=eval_dataset is not None, cuda=cuda)
    from accelerate import PartialState

    state = PartialState()  # initialised by the GRPOConfig above (one process, or `accelerate launch`)
    if state.is_main_process:
        for stale_output in ("log.csv", "meta.json", "merged"):  # a previous run's outputs never pass for this one's
            target = out / stale_output
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        resume_path, resume_step = prepare_checkpoint_dir(checkpoint_dir, fingerprint)
    state.wait_for_everyone()
    if not state.is_main_process:  # the main process has decided and cleaned up
        found = last_complete_checkpoint(checkpoint_dir)
        resume_path, resume_step = (str(found[0]), found[1]) if found else (None, 0)
    if resume_path and state.is_main_process:
        print(f"pgrpo train: resuming from {resume_path} (step {resume_step})", file=sys.stderr)

    trainer = _trainer_class()(
        model=model,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset if args.eval_strategy != "no" else None,
        processing_class=tokenizer,
        peft_config=build_lora_config(training["lora"]),
        callbacks=[_step_log_callback_class()(checkpoint_dir / PARTIAL_LOG_NAME, reward_funcs[0].__name__)],
    )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for noisy in (ProgressCallback, PrinterCallback):
        trainer.remove_callback(noisy)
    trainer.add_callback(_progress_callback_class())
    try:
        trainer.train(resume_from_checkpoint=resume_path)
    except RewardFunctionError:
        raise
    except Exception as error:
        cause = error
        while cause is not None and not isinstance(cause, RewardFunctionError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise cause from None
        raise
    last_step = trainer.state.global_step

    adapter_dir = checkpoint_dir / "adapter-final"
    trainer.save_model(str(adapter_dir))
    trainer.accelerator.wait_for_everyone()
    if not trainer.accelerator.is_main_process:
        return TrainResult(out / "log.csv", out / "meta.json", None, last_step, resume_step)

    merged_path = None
    if training["merge_adapters"]:
        merged_path = out / "merged"
        try:  # the merge runs on the main process alone: load the base whole, not ZeRO-3 partitioned
            from transformers.integrations.deepspeed import unset_hf_deepspeed_config

            unset_hf_deepspeed_config()
        except ImportError:
            pass
        base = load_base_model() if load_base_model is not None else None
        if base is None:
            raise InputError("training.merge_adapters: no way to reload the base model for merging")
        merge_adapter(base, adapter_dir, tokenizer, merged_path)

    frame = assemble_log(read_partial_log(checkpoint_dir / PARTIAL_LOG_NAME), last_step)
    meta = {
        "model": model_name,
        "G": G,
        "seed": seed,
        "eta": float(training["learning_rate"]),
        "mu": float(training["adam_beta1"]),
        "k_ref": refresh_interval(training),
        "on_policy": is_on_policy(training),
        "beta": float(training["beta"]),
        "epsilon": float(training["epsilon"]),
        "num_iterations": training["num_iterations"],
        "steps_per_generation": args.steps_per_generation,
        "gradient_accumulation_steps": training["gradient_accumulation_steps"],
        "per_device_train_batch_size": training["per_device_train_batch_size"],
        "generation_batch_size": args.generation_batch_size,
        "num_processes": trainer.accelerator.num_processes,
        "max_steps": last_step,
        "num_train_epochs": training["num_train_epochs"],
        "temperature": training["temperature"],
        "max_prompt_length": training["max_prompt_length"],
        "max_completion_length": training["max_completion_length"],
        "eval_steps": training["eval_steps"],
        "num_generations_eval": args.num_generations_eval,
        "loss_type": training["loss_type"],
        "importance_sampling_level": training["importance_sampling_level"],
        "importance_sampling_ratio_max_definition": (
            "max over the optimizer step's completion tokens of exp(logp_theta - logp_old) as in TRL's clipped "
            "loss (sequence geometric mean if importance_sampling_level=sequence); 1 exactly when on-policy"
        ),
        "lora": training["lora"],
        "use_vllm": training["use_vllm"],
        "n_train_prompts": len(train_dataset),
        "n_eval_prompts": len(eval_dataset) if eval_dataset is not None else 0,
        "prompts_dropped_over_max_prompt_length": {"train": dropped_train, "eval": dropped_eval},
        "resumed_from_step": resume_step,
        "device": "cuda" if cuda else "cpu",
        "versions": library_versions(),
    }
    write_json(out / "meta.json", meta)
    write_csv(out / "log.csv", frame)
    if not training["keep_checkpoints"]:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return TrainResult(out / "log.csv", out / "meta.json", merged_path, last_step, resume_step)


def merge_adapter(base_model, adapter_dir: Path, tokenizer, merged_path: Path) -> None:
    """Fold the LoRA adapters into the base weights (``merge_and_unload``) and save model + tokenizer atomically."""
    from peft import PeftModel

    merged = PeftModel.from_pretrained(base_model, str(adapter_dir)).merge_and_unload()
    with atomic_dir(merged_path) as tmp:
        merged.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))


# ----------------------------------------------------------------------------------------------------------------
# public entry points
# ----------------------------------------------------------------------------------------------------------------


def check_model_spec(model: dict) -> None:
    """A model is named by a local ``path`` (must exist; overrides ``id``) or a hub ``id``."""
    name = model.get("name") or "?"
    if model.get("path"):
        if not Path(model["path"]).exists():
            raise InputError(f"models.{name}.path: no such model directory: {model['path']}")
    elif not model.get("id"):
        raise InputError(f"models.{name}: set either 'path' (a local model directory) or 'id' (a hub model id)")


def run_train(model: dict, data: dict, training: dict, G: int, seed: int, out_dir: str) -> None:
    """GRPO for one (model, G, seed): writes ``out_dir/log.csv``, ``meta.json``, ``merged/``; keeps checkpoints.

    ``model`` = {name, id, path, ...} (path overrides id), ``data`` = the ``data:`` section (train/eval specs),
    ``training`` = the ``training:`` section (:data:`TRAINING_DEFAULTS`). A re-run resumes from the last checkpoint.
    """
    import torch

    from pgrpo import data as data_module
    from pgrpo import rewards, tiny

    cuda = torch.cuda.is_available()
    resolved = validate_training(
        resolve_training(training), G, num_processes=int(os.environ.get("WORLD_SIZE", "1")), cuda=cuda
    )
    torch.set_num_threads(resolved["resources"]["threads"])
    name = model.get("name") or "model"
    check_model_spec(model)
    data = data or {}
    if not data.get("train"):
        raise InputError("data.train: missing (the GRPO training set)")
    want_eval = bool(data.get("eval")) and bool(resolved["eval_steps"])
    dtype = torch.bfloat16 if (cuda and resolved["bf16"]) else torch.float32

    def load_datasets(tokenizer):
        train_set = data_module.load_problems(data["train"], "train", tokenizer)
        eval_set = data_module.load_problems(data["eval"], "eval", tokenizer) if want_eval else None
        check_dataset(train_set, "train")
        if eval_set is not None:
            check_dataset(eval_set, "eval")
        preflight_reward(guard_reward(rewards.accuracy_reward), train_set)
        return train_set, eval_set

    uses_chat = any(
        (spec or {}).get("chat_template") not in (None, False, "false") for spec in (data["train"], data.get("eval"))
    )
    if not uses_chat:  # data and reward errors surface before the (possibly large) model is loaded
        train_set, eval_set = load_datasets(None)
    # Under `accelerate launch` with DeepSpeed ZeRO-3, the training arguments must exist before from_pretrained so
    # that the weights are loaded already partitioned (transformers' zero.Init hook); harmless otherwise.
    zero3_hook = build_grpo_config(
        resolved, G, seed, str(Path(out_dir) / CHECKPOINT_DIRNAME), has_eval=want_eval, cuda=cuda
    )
    policy, tokenizer = tiny.load_model_and_tokenizer(model, dtype=dtype)
    del zero3_hook
    if uses_chat:
        train_set, eval_set = load_datasets(tokenizer)
    train_grpo(
        model=policy,
        tokenizer=tokenizer,
        train_dataset=train_set,
        eval_dataset=eval_set,
        reward_funcs=[rewards.accuracy_reward],
        training=resolved,
        G=G,
        seed=seed,
        out_dir=out_dir,
        model_name=name,
        load_base_model=lambda: tiny.load_model_and_tokenizer(model, dtype=dtype)[0],
        provenance={"model": model_stamp(model), "data": data},
    )


def launch_command(training: dict, n_gpus: int) -> list[str]:
    """The command prefix for ``pgrpo`` (the verb and its options follow): plain Python on <= 1 GPU,
    ``accelerate launch`` with the configured (default ZeRO-2) accelerate file across several."""
    if n_gpus <= 1:
        return [sys.executable, "-m", "pgrpo"]
    config_file = resolve_training(training)["accelerate_config"] or "config/accelerate/deepspeed_zero2.yaml"
    if not Path(config_file).exists():
        raise InputError(f"training.accelerate_config: {config_file} does not exist")
    return ["accelerate", "launch", "--config_file", str(config_file), "--num_processes", str(n_gpus), "-m", "pgrpo"]


def main(argv: list[str] | None = None) -> int:
    """``python -m pgrpo.train`` with the options of ``pgrpo train``."""
    parser = argparse.ArgumentParser(prog="python -m pgrpo.train", description=run_train.__doc__)
    parser.add_argument("--model-json", required=True)
    parser.add_argument("--data-json", required=True)
    parser.add_argument("--training-json", required=True)
    parser.add_argument("--G", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out-dir", required=True)
    options = parser.parse_args(argv)
    try:
        run_train(
            model=json.loads(options.model_json),
            data=json.loads(options.data_json),
            training=json.loads(options.training_json),
            G=options.G,
            seed=options.seed,
            out_dir=options.out_dir,
        )
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
