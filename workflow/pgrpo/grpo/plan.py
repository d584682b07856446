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
  ``eval_steps`` steps, at the last step and (``eval_on_start``) before the first.

The hardware numbers (memory bandwidth, dense bf16 peak) are the vendors' published specifications; the
efficiencies and per-step overheads are assumptions, said so in each profile's ``source``, until a measured run
(``benchmarks/gpu_check.sh`` prints one) replaces them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pgrpo.errors import InputError

_ASSUMED = ("efficiencies and overheads assumed (not measured here): bandwidth 60%, generation 30% and "
            "training 30% of the bf16 peak, vLLM 4 ms and model.generate 30 ms per decode step (LoRA unmerged); "
            "replace with a measured run (benchmarks/gpu_check.sh)")


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
        "source": "one CPU thread, float32 (its 'bf16_tflops' is the thread's effective rate): calibrated so "
                  "that the embedded default (plan: prompt 40, completion 24 tokens) gives its measured make run "
                  "(README: 300 GRPO steps of the 0.85M-parameter tiny model in 4.5-5 min per run, one thread)",
    },
}


PROFILE_KEYS = ("memory_bandwidth_gbps", "bf16_tflops", "memory_gb", "bytes_per_param", "bandwidth_efficiency",
                "generate_mfu", "train_mfu", "decode_overhead_ms", "job_overhead_min", "source")


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


def decode_step_seconds(params_b: float, n_sequences: int, profile: dict, backend: str) -> float:
    """Seconds of one decode step of ``n_sequences`` sequences (roofline plus the backend's per-step overhead)."""
    params = params_b * 1e9
    memory = params * profile["bytes_per_param"] / (profile["memory_bandwidth_gbps"] * 1e9
                                                    * profile["bandwidth_efficiency"])
    compute = 2 * params * n_sequences / (profile["bf16_tflops"] * 1e12 * profile["generate_mfu"])
    return max(memory, compute) + profile["decode_overhead_ms"][backend] / 1000


def generation_seconds(params_b: float, n_sequences: int, *, max_tokens: int, mean_tokens: float, max_batch: int,
                       profile: dict, backend: str, continuous: bool = False) -> float:
    """Seconds to sample ``n_sequences`` completions in batches of at most ``max_batch``: a static batch (one
    ``generate`` call; TRL's generation during training and its evaluation) runs ``max_tokens`` steps; with
    ``continuous`` batching (one vLLM ``LLM.generate`` over all prompts) ``n x mean_tokens / max_batch`` steps (at
    least ``max_tokens``) of full batches."""
    if n_sequences <= 0:
        return 0.0
    batch = min(n_sequences, max_batch)
    if continuous and n_sequences > max_batch:
        steps = max(max_tokens, n_sequences * mean_tokens / max_batch)
    else:
        steps = math.ceil(n_sequences / max_batch) * max_tokens
    return steps * decode_step_seconds(params_b, batch, profile, backend)


def forward_seconds(params_b: float, tokens: float, passes: float, profile: dict) -> float:
    """Seconds for ``passes`` forward-equivalent passes (2 x params FLOPs per token each) over ``tokens``."""
    return 2 * params_b * 1e9 * tokens * passes / (profile["bf16_tflops"] * 1e12 * profile["train_mfu"])


@dataclass
class JobPlan:
    """One job of the plan: its steps and tokens, its time and whether it fits the partition's limit."""

    job: str
    kind: str  # train | evaluate
    gpus: int
    steps: int | None
    completions: int
    tokens_generated: float
    tokens_trained: float
    hours: float  # wall-clock, start-up included
    gpu_hours: float
    runtime_min: int  # what the rule asks for: hours x margin, capped at the partition limit
    limit_min: int | None
    submissions: int  # > 1: longer than the limit; resumes from its checkpoints across retries
    notes: list[str] = field(default_factory=list)
    split: dict[str, float] = field(default_factory=dict)  # hours: generate, train, eval

    @property
    def over_limit(self) -> bool:
        return self.submissions > 1


def _runtime(hours: float, margin: float, limit_min: int | None) -> tuple[int, int]:
    wanted = max(1, math.ceil(hours * 60 * margin))
    if not limit_min:
        return wanted, 1
    return min(wanted, int(limit_min)), max(1, math.ceil(wanted / int(limit_min)))


def plan_training(*, job: str, params_b: float, G: int, t: dict, n_train: int | None, n_eval: int,
                  prompt_tokens: float, completion_tokens: float, profile: dict, margin: float,
                  limit_min: int | None, eval_batch: int) -> JobPlan:
    """The plan of one training job from the resolved ``training`` section ``t`` (see the module docstring)."""
    processes = max(1, int(t["resources"]["gpus"] or 0))
    accumulation = t["gradient_accumulation_steps"]
    spg = t["steps_per_generation"] or accumulation
    steps = optimizer_steps(n_train, G=G, per_device_batch=t["per_device_train_batch_size"],
                            accumulation=accumulation, steps_per_generation=spg,
                            num_iterations=t["num_iterations"], processes=processes,
                            epochs=t["num_train_epochs"], max_steps=t["max_steps"])
    backend = "vllm" if t["use_vllm"] else "transformers"
    b = t["per_device_train_batch_size"]
    max_tokens = t["max_completion_length"]
    calls = steps * accumulation / (spg * t["num_iterations"])  # generation calls per process
    per_call = b * spg  # sequences each process generates per call
    gen_s = calls * generation_seconds(params_b, per_call, max_tokens=max_tokens, mean_tokens=completion_tokens,
                                       max_batch=per_call, profile=profile, backend=backend)
    sequence = prompt_tokens + completion_tokens
    off_policy = not (accumulation % (spg * t["num_iterations"]) == 0 and not t["use_vllm"])
    old_logps = off_policy or (t["use_vllm"] and t["vllm_importance_sampling_correction"])
    passes = 2 + bool(t["gradient_checkpointing"]) + (t["beta"] > 0) + old_logps
    train_tokens_per_process = steps * accumulation * b * sequence
    train_s = forward_seconds(params_b, train_tokens_per_process, passes, profile)
    eval_steps = t["eval_steps"] or 0
    n_evals = (math.ceil(steps / eval_steps) + bool(t["eval_on_start"])) if eval_steps and n_eval else 0
    g_eval = t["num_generations_eval"] or G
    eval_per_process = math.ceil(n_eval * g_eval / processes)
    eval_s = n_evals * (generation_seconds(params_b, eval_per_process, max_tokens=max_tokens,
                                           mean_tokens=completion_tokens, max_batch=eval_batch, profile=profile,
                                           backend=backend)
                        + forward_seconds(params_b, eval_per_process * sequence, 1 + (t["beta"] > 0), profile))
    hours = (gen_s + train_s + eval_s) / 3600 + profile["job_overhead_min"] / 60
    runtime_min, submissions = _runtime(hours, margin, limit_min)
    completions = steps * accumulation * b * processes // t["num_iterations"] + n_evals * n_eval * g_eval
    notes = [f"{backend} generation", f"{n_evals} evals x {n_eval * g_eval} completions"]
    return JobPlan(job=job, kind="train", gpus=processes, steps=steps, completions=int(completions),
                   tokens_generated=completions * completion_tokens,
                   tokens_trained=steps * accumulation * b * processes * sequence, hours=hours,
                   gpu_hours=hours * processes, runtime_min=runtime_min, limit_min=limit_min,
                   submissions=submissions, notes=notes,
                   split={"generate": gen_s / 3600, "train": train_s / 3600, "eval": eval_s / 3600})


def plan_evaluation(*, job: str, params_b: float, n_problems: int, evaluation: dict, backend: str,
                    prompt_tokens: float, completion_tokens: float, profile: dict, margin: float,
                    limit_min: int | None) -> JobPlan:
    """The plan of one evaluation job: ``n_problems x num_samples`` completions of ``max_new_tokens``."""
    gpus = max(1, int(evaluation["resources"]["gpus"] or 0))
    n = n_problems * evaluation["num_samples"]
    max_batch = 256 if backend == "vllm" else evaluation["batch_size"]  # vLLM's max_num_seqs default
    gen_s = generation_seconds(params_b, n, max_tokens=evaluation["max_new_tokens"], mean_tokens=completion_tokens,
                               max_batch=max_batch, profile=profile, backend=backend, continuous=backend == "vllm")
    gen_s += forward_seconds(params_b, n_problems * prompt_tokens, 1, profile)  # prefill, once per problem
    hours = gen_s / 3600 + profile["job_overhead_min"] / 60
    runtime_min, submissions = _runtime(hours, margin, limit_min)
    return JobPlan(job=job, kind="evaluate", gpus=gpus, steps=None, completions=n,
                   tokens_generated=n * completion_tokens, tokens_trained=0.0, hours=hours, gpu_hours=hours * gpus,
                   runtime_min=runtime_min, limit_min=limit_min, submissions=submissions,
                   notes=[f"{backend} generation"], split={"generate": gen_s / 3600})


#: Defaults of the ``plan:`` config section.
PLAN_DEFAULTS: dict[str, Any] = {
    "gpu": "H100-80GB",
    "partition_limit_min": None,  # the GPU partition's time limit; null: none
    "margin": 1.25,  # runtime asked = estimate x margin
    "prompt_tokens": None,  # mean prompt length; null: max_prompt_length (an upper bound)
    "completion_tokens": None,  # mean completion length; null: max_completion_length (an upper bound)
    "throughput": {},
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
