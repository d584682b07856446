"""A plan before submission: optimizer steps, tokens and GPU-hours of every job of a grid, from its config alone.

Steps follow TRL's sampler and transformers' epoch arithmetic exactly (:func:`optimizer_steps`): one generation
batch holds ``GB = per_device_train_batch_size x processes x steps_per_generation`` completions, i.e.
``P = GB / G`` prompts; an epoch of ``N`` prompts is ``floor(N / P)`` generation batches (TRL's ``RepeatSampler``
drops the incomplete one), each served for ``steps_per_generation x num_iterations`` micro-steps; an optimizer step
is ``gradient_accumulation_steps`` micro-steps (the last one of an epoch may be shorter), and the run is
``ceil(epochs x steps_per_epoch)`` steps unless ``max_steps`` is set. Table 2 on GSM8K (7,473 prompts, batch 4 x
accumulation 4 = 16 completions a step): 14,946 steps at G=16 (one prompt a step), 3,736 at G=4.

Time is a roofline estimate per job (:func:`plan_training`, :func:`plan_evaluation`), from a throughput profile of
the GPU (:data:`PROFILES`; ``plan.throughput`` in the config adds or overrides profiles):

- a decode step of a batch of ``n`` sequences takes ``max(weights / (bandwidth x bandwidth_efficiency),
  2 x params x n / (peak x generate_mfu)) + decode_overhead[backend]``; a generation call of at most
  ``max_batch`` sequences runs ``max_completion_length`` decode steps (a small batch runs until its longest
  completion ends; vLLM's continuous batching keeps ``max_batch`` sequences busy in a large one);
- training costs ``2 x params`` FLOPs per token and pass at ``train_mfu`` of the peak: forward, backward through the
  frozen weights (LoRA), a recompute with gradient checkpointing, the reference model's forward when ``beta > 0``
  and the old policy's forward when the run is off-policy or vLLM's importance-sampling correction is on;
- the held-out evaluation during training generates ``n_eval x num_generations_eval`` completions every
  ``eval_steps`` steps, at the last step and (``eval_on_start``) before the first: with ``training.eval_mode:
  inline`` inside the training job, through TRL's colocated engine at most ``per_device_train_batch_size x
  vllm_tensor_parallel_size x steps_per_generation`` sequences at once (:func:`engine_concurrency`); with
  ``checkpoints`` in one separate job per round (:func:`plan_checkpoint_evaluations`) at vLLM's full batch, the
  training job only saving the adapter;
- each decode step also reads the live sequences' KV cache, an engine runs no more sequences than its KV cache holds,
  and a training job pays a weight sync per generation batch, its checkpoints and the final merge
  (:mod:`pgrpo.grpo.plan_models`);
- a training job longer than the partition limit resumes across submissions, each losing its start-up and the
  signal lead (``signal_lead_s``: SIGURG that long before the limit: one step, a checkpoint, the longest inline
  evaluation and ``plan.signal_margin_s``); it fits when it needs at most ``plan.max_submissions``; an evaluation
  cannot resume and fits only in one.

The hardware numbers (memory bandwidth, dense bf16 peak) are the vendors' published specifications; the
efficiencies and per-step overheads are assumptions, said so in each profile's ``source``, until a measured run
(``benchmarks/gpu_check.sh`` prints one) replaces them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pgrpo.errors import InputError
from pgrpo.grpo.plan_models import (
    PROFILE_EXTRA_DEFAULTS,
    VLLM_MAX_NUM_SEQS,
    ModelShape,
    adapter_save_seconds,
    checkpoint_seconds,
    kv_cache_bytes,
    kv_limited_seqs,
    merge_seconds,
    training_engine_max_seqs,
    training_share,
    weight_sync_seconds,
)

_ASSUMED = ("efficiencies and overheads assumed (not measured here): bandwidth 60%, generation 30% and "
            "training 30% of the bf16 peak, vLLM 4 ms and model.generate 30 ms per decode step (LoRA unmerged), "
            "disk 1 GB/s + 5 s a save, 0.2 ms a tensor at each weight sync, 10 min start-up of a training job and "
            "3 min of an evaluation job; replace with a measured run (benchmarks/gpu_check.sh)")


def _gpu(bandwidth_gbps: float, tflops: float, memory_gb: float, spec: str) -> dict:
    return {
        "memory_bandwidth_gbps": bandwidth_gbps, "bf16_tflops": tflops, "memory_gb": memory_gb, "bytes_per_param": 2,
        "bandwidth_efficiency": 0.6, "generate_mfu": 0.3, "train_mfu": 0.3,
        "decode_overhead_ms": {"vllm": 4.0, "transformers": 30.0}, "job_overhead_min": 10.0,
        "source": f"hardware: {spec} (published); {_ASSUMED}",
    }


#: Throughput profiles. GPUs: vendor datasheet bandwidth and dense bf16 Tensor Core peak (no sparsity).
PROFILES: dict[str, dict] = {
    "A100-80GB": _gpu(2039, 312, 80, "NVIDIA A100 80GB SXM datasheet, 2,039 GB/s, 312 TFLOP/s bf16"),
    "H100-80GB": _gpu(3350, 989, 80, "NVIDIA H100 SXM datasheet, 3.35 TB/s, 989 TFLOP/s bf16"),
    "H200": _gpu(4800, 989, 141, "NVIDIA H200 SXM datasheet, 4.8 TB/s, 989 TFLOP/s bf16"),
    "L40S": _gpu(864, 362, 48, "NVIDIA L40S datasheet, 864 GB/s, 362 TFLOP/s bf16"),
    "cpu": {
        "memory_bandwidth_gbps": 10.0, "bf16_tflops": 0.05, "memory_gb": 24, "bytes_per_param": 4,
        "bandwidth_efficiency": 0.5, "generate_mfu": 0.5, "train_mfu": 0.5,
        "decode_overhead_ms": {"vllm": 4.0, "transformers": 6.0}, "job_overhead_min": 0.3,
        "disk_gbps": 0.5, "io_fixed_s": 0.2, "sync_per_tensor_ms": 0.0, "eval_job_overhead_min": 0.3,
        "source": "one CPU thread, float32 (its 'bf16_tflops' is the thread's effective rate): calibrated so "
                  "that the embedded default (plan: prompt 40, completion 24 tokens) gives its measured make run "
                  "(README: 300 GRPO steps of the 0.85M-parameter tiny model in 4.5-5 min per run, one thread)",
    },
}


PROFILE_KEYS = ("memory_bandwidth_gbps", "bf16_tflops", "memory_gb", "bytes_per_param", "bandwidth_efficiency",
                "generate_mfu", "train_mfu", "decode_overhead_ms", "job_overhead_min", "source")
#: Keys a profile may set beyond :data:`PROFILE_KEYS` (defaults: :data:`pgrpo.grpo.plan_models.PROFILE_EXTRA_DEFAULTS`;
#: ``measured``: the cost terms calibrated on hardware, :data:`pgrpo.grpo.plan_models.COST_TERMS`).
PROFILE_OPTIONAL_KEYS = (*PROFILE_EXTRA_DEFAULTS, "measured")


def profiles(overrides: dict | None = None) -> dict[str, dict]:
    """:data:`PROFILES` with ``plan.throughput`` merged in (a known profile is updated key by key, a new one must
    name every key of :data:`PROFILE_KEYS`)."""
    out = {name: dict(p, decode_overhead_ms=dict(p["decode_overhead_ms"])) for name, p in PROFILES.items()}
    for name, values in (overrides or {}).items():
        base = out.get(name, {})
        merged = {**base, **values}
        if "decode_overhead_ms" in values:
            merged["decode_overhead_ms"] = {**base.get("decode_overhead_ms", {}), **values["decode_overhead_ms"]}
        missing = [k for k in PROFILE_KEYS if k not in merged]
        if missing:
            raise InputError(f"plan.throughput.{name}: a new profile needs {', '.join(missing)}")
        out[name] = merged
    for profile in out.values():
        for key, default in PROFILE_EXTRA_DEFAULTS.items():
            profile.setdefault(key, default)
        profile["measured"] = list(profile.get("measured") or [])
    return out


def optimizer_steps(n_prompts: int | None, *, G: int, per_device_batch: int, accumulation: int,
                    steps_per_generation: int | None, num_iterations: int, processes: int, epochs: float,
                    max_steps: int = 0) -> int:
    """Optimizer steps of a TRL GRPO run (see the module docstring); ``max_steps > 0`` wins over epochs."""
    if max_steps and max_steps > 0:
        return int(max_steps)
    if not n_prompts:
        raise InputError("data.train.num_rows: the number of training prompts is needed to count the steps of an "
                         "epoch-based run (set it, or point data.train.path at a local file)")
    spg = steps_per_generation or accumulation
    generation_batch = per_device_batch * processes * spg
    if generation_batch % G:
        raise InputError(f"group_sizes: G={G} does not divide the generation batch {generation_batch}")
    prompts_per_generation = generation_batch // G
    micro_steps = (n_prompts // prompts_per_generation) * spg * num_iterations  # per process, one epoch
    if micro_steps == 0:
        raise InputError(f"data.train: {n_prompts} prompts do not fill one generation batch of "
                         f"{prompts_per_generation} prompts")
    per_epoch = max(math.ceil(micro_steps / accumulation), 1)
    return math.ceil(epochs * per_epoch)


def decode_step_seconds(params_b: float, n_sequences: int, profile: dict, backend: str,
                        kv_bytes: float = 0.0) -> float:
    """Seconds of one decode step of ``n_sequences`` sequences: the weights and ``kv_bytes`` of KV cache read at
    the profile's bandwidth, or the step's FLOPs at its peak, whichever is longer, plus the backend's overhead."""
    params = params_b * 1e9
    memory = (params * profile["bytes_per_param"] + kv_bytes) / (profile["memory_bandwidth_gbps"] * 1e9
                                                                 * profile["bandwidth_efficiency"])
    compute = 2 * params * n_sequences / (profile["bf16_tflops"] * 1e12 * profile["generate_mfu"])
    return max(memory, compute) + profile["decode_overhead_ms"][backend] / 1000


def generation_seconds(params_b: float, n_sequences: int, *, max_tokens: int, mean_tokens: float, max_batch: int,
                       profile: dict, backend: str, continuous: bool = False, kv_bytes_per_token: float = 0.0,
                       prompt_tokens: float = 0.0) -> float:
    """Seconds to sample ``n_sequences`` completions, at most ``max_batch`` at once: a static batch (one
    ``generate`` call, or a vLLM call that admits every sequence at once) runs ``max_tokens`` steps; with
    ``continuous`` batching over more sequences than the engine admits, ``n x mean_tokens / max_batch`` steps (at
    least ``max_tokens``) of full batches.

    Each step also reads the KV cache of its live sequences: in a static batch a completion of ``L`` tokens reads
    ``prompt x L + L^2 / 2`` token-entries over the call's ``max_tokens`` steps; in a continuous one each of the
    ``max_batch`` slots holds on average ``prompt + L / 2`` tokens."""
    if n_sequences <= 0:
        return 0.0
    batch = min(n_sequences, max_batch)
    length = min(mean_tokens, max_tokens)
    if continuous and n_sequences > max_batch:
        steps = max(max_tokens, n_sequences * length / max_batch)
        kv = batch * kv_bytes_per_token * (prompt_tokens + length / 2)
    else:
        steps = math.ceil(n_sequences / max_batch) * max_tokens
        kv = batch * kv_bytes_per_token * (prompt_tokens * length + length**2 / 2) / max_tokens
    return steps * decode_step_seconds(params_b, batch, profile, backend, kv)


def forward_seconds(params_b: float, tokens: float, passes: float, profile: dict) -> float:
    """Seconds for ``passes`` forward-equivalent passes (2 x params FLOPs per token each) over ``tokens``."""
    return 2 * params_b * 1e9 * tokens * passes / (profile["bf16_tflops"] * 1e12 * profile["train_mfu"])


#: sbatch --signal=<sig>@<time>: the time is at most 65535 seconds (SLURM's sbatch manual)
SLURM_MAX_SIGNAL_LEAD_S = 65535


@dataclass
class JobPlan:
    """One job of the plan (or ``count`` alike jobs: a run's evaluation jobs): its steps and tokens, its time, the
    runtime it asks for and whether it fits the partition's limit times the submissions it may take."""

    job: str
    kind: str  # train | train_eval (a run's separate evaluation jobs, eval_mode: checkpoints) | evaluate
    gpus: int
    steps: int | None
    completions: int
    tokens_generated: float
    tokens_trained: float
    hours: float  # wall-clock of one job, start-up included
    gpu_hours: float  # hours x gpus x count
    runtime_min: int  # what the rule asks for: hours x margin (+ the signal lead), capped at the partition limit
    limit_min: int | None
    submissions: int  # > 1: longer than the limit; a training job resumes from its checkpoints across retries
    notes: list[str] = field(default_factory=list)
    split: dict[str, float] = field(default_factory=dict)  # hours: generate, train, eval, sync, saves
    count: int = 1
    signal_lead_s: int | None = None  # training: SIGURG this long before the limit (--signal=URG@<lead>)
    max_submissions: int | None = None  # plan.max_submissions: what the cluster allows; None: no cap
    concurrency: int | None = None  # sequences the generation engine runs at once
    feasible: bool = True  # False: no submission can make progress (the lead or start-up exceeds the limit)
    eval_mode: str | None = None

    @property
    def over_limit(self) -> bool:
        return self.submissions > 1

    @property
    def fits(self) -> bool:
        """The job finishes within ``limit x submissions``: an evaluation in one submission (it cannot resume), a
        training job in at most ``max_submissions``."""
        if not self.feasible:
            return False
        if self.kind != "train":
            return self.submissions == 1
        return self.max_submissions is None or self.submissions <= self.max_submissions


def submissions_needed(hours: float, *, overhead_min: float, lead_s: float, margin: float,
                       limit_min: int | None) -> tuple[int, int, bool]:
    """``(runtime_min, submissions, feasible)`` of a resumable job: it asks for ``hours x margin`` plus the signal
    lead (so the signal comes after its expected end), capped at the limit; past the limit each submission makes
    ``limit - start-up - lead`` minutes of progress on the ``(hours - start-up) x margin`` of work."""
    wanted = max(1, math.ceil(hours * 60 * margin + lead_s / 60))
    if not limit_min:
        return wanted, 1, True
    limit = int(limit_min)
    if wanted <= limit:
        return wanted, 1, True
    usable = limit - overhead_min - lead_s / 60
    work = max(0.0, hours * 60 - overhead_min) * margin
    if usable <= 0:
        return limit, max(1, math.ceil(wanted / limit)), False
    return limit, max(1, math.ceil(work / usable)), True


def _runtime(hours: float, margin: float, limit_min: int | None) -> tuple[int, int]:
    """A job that cannot resume: ``(runtime_min, submissions)``; more than one submission never finishes."""
    wanted = max(1, math.ceil(hours * 60 * margin))
    if not limit_min:
        return wanted, 1
    return min(wanted, int(limit_min)), max(1, math.ceil(wanted / int(limit_min)))


def _size_only(params_b: float) -> ModelShape:
    return ModelShape(params_b=params_b, kv_bytes_per_token=0.0, lora_params=0.0, tensors=0,
                      source="size only: KV cache, LoRA and tensors not priced")


def engine_concurrency(t: dict, shape: ModelShape, profile: dict, context_tokens: float) -> int:
    """Sequences TRL's colocated vLLM engine runs at once in training and in its inline evaluation:
    :func:`training_engine_max_seqs`, fewer when its KV cache cannot hold them."""
    share = training_share(t, shape, profile["memory_gb"], context_tokens)
    cache = kv_cache_bytes(share, profile["memory_gb"], shape.weight_bytes)
    return kv_limited_seqs(training_engine_max_seqs(t), cache, shape.kv_bytes_per_token, context_tokens)


def evaluation_rounds(steps: int, t: dict, n_eval: int) -> int:
    """Held-out evaluations of a run: every ``eval_steps``, at the last step, and before the first with
    ``eval_on_start``."""
    eval_steps = t["eval_steps"] or 0
    return (math.ceil(steps / eval_steps) + bool(t["eval_on_start"])) if eval_steps and n_eval else 0


def plan_training(*, job: str, params_b: float, G: int, t: dict, n_train: int | None, n_eval: int,
                  prompt_tokens: float, completion_tokens: float, profile: dict, margin: float,
                  limit_min: int | None, eval_batch: int, shape: ModelShape | None = None,
                  eval_mode: str = "inline", max_submissions: int | None = None,
                  signal_margin_s: float = 300.0) -> JobPlan:
    """The plan of one training job from the resolved ``training`` section ``t`` (see the module docstring).

    ``eval_mode`` inline: the held-out evaluation runs in the job through the training engine (TRL's); checkpoints:
    the job saves the adapter at each evaluation and :func:`plan_checkpoint_evaluations` prices the jobs that score
    them. ``signal_lead_s``: one step + one checkpoint (+ the longest inline evaluation, + an adapter save) +
    ``signal_margin_s``."""
    shape = shape or _size_only(params_b)
    processes = max(1, int(t["resources"]["gpus"] or 0))
    accumulation = t["gradient_accumulation_steps"]
    spg = t["steps_per_generation"] or accumulation
    steps = optimizer_steps(n_train, G=G, per_device_batch=t["per_device_train_batch_size"],
                            accumulation=accumulation, steps_per_generation=spg,
                            num_iterations=t["num_iterations"], processes=processes,
                            epochs=t["num_train_epochs"], max_steps=t["max_steps"])
    vllm = bool(t["use_vllm"])
    backend = "vllm" if vllm else "transformers"
    b = t["per_device_train_batch_size"]
    max_tokens = t["max_completion_length"]
    calls = steps * accumulation / (spg * t["num_iterations"])  # generation calls per process
    per_call = b * spg  # sequences each process generates per call
    context = prompt_tokens + max_tokens
    concurrency = engine_concurrency(t, shape, profile, context) if vllm else per_call
    kv = dict(kv_bytes_per_token=shape.kv_bytes_per_token, prompt_tokens=prompt_tokens)
    gen_s = calls * generation_seconds(params_b, per_call, max_tokens=max_tokens, mean_tokens=completion_tokens,
                                       max_batch=min(per_call, concurrency), profile=profile, backend=backend,
                                       continuous=vllm, **kv)
    sync_s = calls * weight_sync_seconds(shape, profile) if vllm else 0.0
    sequence = prompt_tokens + completion_tokens
    off_policy = not (accumulation % (spg * t["num_iterations"]) == 0 and not vllm)
    old_logps = off_policy or (vllm and t["vllm_importance_sampling_correction"])
    passes = 2 + bool(t["gradient_checkpointing"]) + (t["beta"] > 0) + old_logps
    train_tokens_per_process = steps * accumulation * b * sequence
    train_s = forward_seconds(params_b, train_tokens_per_process, passes, profile)
    n_evals = evaluation_rounds(steps, t, n_eval)
    g_eval = t["num_generations_eval"] or G
    eval_per_process = math.ceil(n_eval * g_eval / processes)
    one_eval_s = 0.0
    if eval_mode == "inline" and n_evals:
        full, rest = divmod(eval_per_process, eval_batch)
        engine = min(eval_batch, concurrency) if vllm else eval_batch
        call = lambda n: generation_seconds(params_b, n, max_tokens=max_tokens, mean_tokens=completion_tokens,  # noqa: E731
                                            max_batch=min(n, engine), profile=profile, backend=backend,
                                            continuous=vllm, **kv)
        one_eval_s = (full * call(eval_batch) + call(rest)
                      + forward_seconds(params_b, eval_per_process * sequence, 1 + (t["beta"] > 0), profile))
    eval_s = n_evals * one_eval_s
    checkpoint_s = checkpoint_seconds(shape, profile)
    saves_s = (steps // max(1, int(t["checkpoint_steps"] or steps))) * checkpoint_s
    adapter_s = adapter_save_seconds(shape, profile) if eval_mode == "checkpoints" else 0.0
    saves_s += n_evals * adapter_s + (merge_seconds(shape, profile) if t["merge_adapters"] else 0.0)
    overhead_min = profile["job_overhead_min"]
    hours = (gen_s + sync_s + train_s + eval_s + saves_s) / 3600 + overhead_min / 60
    step_s = (gen_s + sync_s + train_s) / max(1, steps)
    lead_s = min(SLURM_MAX_SIGNAL_LEAD_S, math.ceil(step_s + checkpoint_s + one_eval_s + adapter_s + signal_margin_s))
    runtime_min, submissions, feasible = submissions_needed(hours, overhead_min=overhead_min, lead_s=lead_s,
                                                            margin=margin, limit_min=limit_min)
    eval_completions = n_evals * n_eval * g_eval if eval_mode == "inline" else 0
    completions = steps * accumulation * b * processes // t["num_iterations"] + eval_completions
    notes = [f"{backend} generation, {concurrency} sequences at once",
             f"{n_evals} evals x {n_eval * g_eval} completions "
             + ("inline" if eval_mode == "inline" else "in separate jobs")]
    if not feasible:
        notes.append(f"start-up {overhead_min:g} min + signal lead {lead_s / 60:.0f} min leave no time in the "
                     f"{limit_min}-minute limit")
    return JobPlan(job=job, kind="train", gpus=processes, steps=steps, completions=int(completions),
                   tokens_generated=completions * completion_tokens,
                   tokens_trained=steps * accumulation * b * processes * sequence, hours=hours,
                   gpu_hours=hours * processes, runtime_min=runtime_min, limit_min=limit_min,
                   submissions=submissions, notes=notes,
                   split={"generate": gen_s / 3600, "train": train_s / 3600, "eval": eval_s / 3600,
                          "sync": sync_s / 3600, "saves": saves_s / 3600},
                   signal_lead_s=lead_s, max_submissions=max_submissions, concurrency=concurrency,
                   feasible=feasible, eval_mode=eval_mode)


def plan_checkpoint_evaluations(*, job: str, params_b: float, G: int, t: dict, steps: int, n_eval: int,
                                prompt_tokens: float, completion_tokens: float, profile: dict, margin: float,
                                limit_min: int | None, share: float, backend: str, batch_size: int,
                                shape: ModelShape | None = None) -> JobPlan:
    """The evaluation jobs of one run (``eval_mode: checkpoints``): one per evaluation round, each loading base +
    adapter and scoring ``n_eval x num_generations_eval`` completions at the engine's full batch (vLLM:
    :data:`VLLM_MAX_NUM_SEQS` unless the KV cache of ``share`` of the GPU holds fewer; transformers:
    ``batch_size``), with the inline evaluation's forward passes (policy, and the reference when ``beta > 0``)."""
    shape = shape or _size_only(params_b)
    n_evals = evaluation_rounds(steps, t, n_eval)
    g_eval = t["num_generations_eval"] or G
    n = n_eval * g_eval
    max_tokens = t["max_completion_length"]
    vllm = backend == "vllm"
    context = prompt_tokens + max_tokens
    if vllm:
        cache = kv_cache_bytes(share, profile["memory_gb"], shape.weight_bytes)
        concurrency = kv_limited_seqs(VLLM_MAX_NUM_SEQS, cache, shape.kv_bytes_per_token, context)
    else:
        concurrency = batch_size
    gen_s = generation_seconds(params_b, n, max_tokens=max_tokens, mean_tokens=completion_tokens,
                               max_batch=concurrency, profile=profile, backend=backend, continuous=vllm,
                               kv_bytes_per_token=shape.kv_bytes_per_token, prompt_tokens=prompt_tokens)
    score_s = forward_seconds(params_b, n * (prompt_tokens + completion_tokens), 1 + (t["beta"] > 0), profile)
    overhead_min = float(profile.get("eval_job_overhead_min", PROFILE_EXTRA_DEFAULTS["eval_job_overhead_min"]))
    hours = (gen_s + score_s) / 3600 + overhead_min / 60
    runtime_min, submissions = _runtime(hours, margin, limit_min)
    gpus = max(1, int(t["resources"]["gpus"] or 0))
    return JobPlan(job=job, kind="train_eval", gpus=gpus, steps=None, completions=n * n_evals,
                   tokens_generated=n * n_evals * completion_tokens, tokens_trained=0.0, hours=hours,
                   gpu_hours=hours * gpus * n_evals, runtime_min=runtime_min, limit_min=limit_min,
                   submissions=submissions, count=n_evals, concurrency=concurrency, eval_mode="checkpoints",
                   notes=[f"{n_evals} jobs x {n} completions, {backend} at {concurrency} sequences at once"],
                   split={"generate": gen_s / 3600, "eval": score_s / 3600})


def plan_evaluation(*, job: str, params_b: float, n_problems: int, evaluation: dict, backend: str,
                    prompt_tokens: float, completion_tokens: float, profile: dict, margin: float,
                    limit_min: int | None, shape: ModelShape | None = None) -> JobPlan:
    """The plan of one evaluation job: ``n_problems x num_samples`` completions of ``max_new_tokens``, vLLM at
    :data:`VLLM_MAX_NUM_SEQS` sequences at once unless its KV cache holds fewer."""
    shape = shape or _size_only(params_b)
    gpus = max(1, int(evaluation["resources"]["gpus"] or 0))
    n = n_problems * evaluation["num_samples"]
    max_tokens = evaluation["max_new_tokens"]
    if backend == "vllm":
        cache = kv_cache_bytes(float(evaluation["vllm_gpu_memory_utilization"]), profile["memory_gb"],
                               shape.weight_bytes)
        max_batch = kv_limited_seqs(VLLM_MAX_NUM_SEQS, cache, shape.kv_bytes_per_token, prompt_tokens + max_tokens)
    else:
        max_batch = evaluation["batch_size"]
    gen_s = generation_seconds(params_b, n, max_tokens=max_tokens, mean_tokens=completion_tokens,
                               max_batch=max_batch, profile=profile, backend=backend, continuous=backend == "vllm",
                               kv_bytes_per_token=shape.kv_bytes_per_token, prompt_tokens=prompt_tokens)
    gen_s += forward_seconds(params_b, n_problems * prompt_tokens, 1, profile)  # prefill, once per problem
    hours = gen_s / 3600 + profile["job_overhead_min"] / 60
    runtime_min, submissions = _runtime(hours, margin, limit_min)
    return JobPlan(job=job, kind="evaluate", gpus=gpus, steps=None, completions=n,
                   tokens_generated=n * completion_tokens, tokens_trained=0.0, hours=hours, gpu_hours=hours * gpus,
                   runtime_min=runtime_min, limit_min=limit_min, submissions=submissions, concurrency=max_batch,
                   notes=[f"{backend} generation, {max_batch} sequences at once"], split={"generate": gen_s / 3600})


#: Defaults of the ``plan:`` config section.
PLAN_DEFAULTS: dict[str, Any] = {
    "gpu": "H100-80GB",
    "partition_limit_min": None,  # the GPU partition's time limit; null: none
    "margin": 1.25,  # runtime asked = estimate x margin
    "prompt_tokens": None,  # mean prompt length; null: max_prompt_length (an upper bound)
    "completion_tokens": None,  # mean completion length; null: max_completion_length (an upper bound)
    "throughput": {},
    "max_submissions": None,  # submissions a training job may take (retries + 1) on this cluster; null: no cap
    "signal_margin_s": 300,  # the signal lead beyond one step + a checkpoint (+ the longest inline evaluation)
    "architectures": {},  # model name -> config.json keys, for a model whose config.json the plan cannot read
}


def resolve_plan(section: dict | None) -> dict:
    """The ``plan:`` section over :data:`PLAN_DEFAULTS`, its GPU profile checked (InputError names the key)."""
    section = dict(section or {})
    unknown = sorted(set(section) - set(PLAN_DEFAULTS))
    if unknown:
        raise InputError(f"plan: unknown key(s) {unknown} (known: {sorted(PLAN_DEFAULTS)})")
    out = {**PLAN_DEFAULTS, **section}
    table = profiles(out["throughput"])
    if out["gpu"] not in table:
        raise InputError(f"plan.gpu: no throughput profile {out['gpu']!r} (known: {', '.join(table)}; add one "
                         "under plan.throughput)")
    out["profile"] = table[out["gpu"]]
    return out
