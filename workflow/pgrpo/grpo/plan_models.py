"""What a job's time rests on beyond the decode roofline of :mod:`pgrpo.grpo.plan`: each model's shape (KV-cache
bytes a token, LoRA parameters, weight tensors), how many sequences an engine runs at once, and the time of a
weight sync, a checkpoint, an adapter save and a merge.

- **Shapes** come from a model's ``config.json`` (its local ``path`` or the hub cache, read by
  :mod:`pgrpo.stages.plan`), else :data:`ARCHITECTURES` (the paper's three models, each with its source), else
  ``plan.architectures.<model>``; a model known only by its size gets :func:`pgrpo.grpo.doctor.kv_per_token_estimate`
  (an upper bound, no GQA) and is said so. KV bytes a token: ``2 x layers x kv_heads x head_dim x 2`` (bf16);
  DeepSeek-LLM-7B has no GQA: 30 x 2 x 32 x 128 x 2 = 491,520 B, about 0.49 MB.
- **Concurrency.** TRL 1.16's colocated vLLM engine is built with ``max_num_seqs = per_device_train_batch_size x
  vllm_tensor_parallel_size x steps_per_generation`` (``trl/trainer/grpo_trainer.py``, ``VLLMGeneration(...)``): the
  held-out evaluation inside training runs through the same engine, at most that many sequences at once whatever
  ``per_device_eval_batch_size`` says. A separate evaluation job's engine admits vLLM's ``max_num_seqs`` (256). Both
  are capped by the KV cache the engine's memory share leaves: ``(share x GPU memory - weights - workspace) /
  (KV bytes a token x (prompt + max completion))``.
- **Weight sync** (TRL ``VLLMGeneration.sync_weights``, once per generation batch with a new optimizer step):
  ``merge_adapter``, ``load_weights`` of every tensor into vLLM, ``unmerge_adapter`` - three read-and-write passes
  over the weights at the profile's bandwidth, plus a per-tensor call overhead.
- **Saves**: a checkpoint writes the adapter and Adam's moments (``CHECKPOINT_BYTES_PER_LORA_PARAM`` a LoRA
  parameter), an adapter save (``eval_mode: checkpoints``) the fp32 adapter, a merge reads the base and writes the
  merged bf16 model; each at the profile's ``disk_gbps`` plus ``io_fixed_s``.

The terms a profile has measured are listed in its ``measured`` (``benchmarks/gpu_check.sh`` prints them); every
other term is an assumption and the plan says so (:func:`assumed_terms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pgrpo.grpo import doctor

#: The cost terms of a job; a profile's ``measured`` names those calibrated on hardware (the rest are assumptions).
COST_TERMS = ("decode_step", "kv_read", "weight_sync", "merge", "adapter_save", "checkpoint", "train_mfu",
              "job_overhead")

#: vLLM's own ``max_num_seqs`` default (vLLM 0.31 ``SchedulerConfig``): a separate evaluation job's engine.
VLLM_MAX_NUM_SEQS = 256

#: Keys of a Hugging Face ``config.json`` the plan reads.
ARCH_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
             "head_dim")

#: The paper's models by hub id: their config.json values (the plan reads a local or cached config.json first).
ARCHITECTURES: dict[str, dict] = {
    "deepseek-ai/deepseek-llm-7b-chat": {
        "num_hidden_layers": 30, "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
        "num_key_value_heads": 32, "head_dim": 128,
        "source": "config.json of deepseek-ai/deepseek-llm-7b-chat (Llama architecture, no GQA: 32 KV heads)"},
    "nvidia/Nemotron-Mini-4B-Instruct": {
        "num_hidden_layers": 32, "hidden_size": 3072, "intermediate_size": 9216, "num_attention_heads": 24,
        "num_key_value_heads": 8, "head_dim": 128,
        "source": "config.json of nvidia/Nemotron-Mini-4B-Instruct (GQA: 8 KV heads, kv_channels 128)"},
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": {
        "num_hidden_layers": 28, "hidden_size": 1536, "intermediate_size": 8960, "num_attention_heads": 12,
        "num_key_value_heads": 2, "head_dim": 128,
        "source": "config.json of deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B (Qwen2.5-Math-1.5B: GQA, 2 KV heads)"},
}


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model beyond its size."""

    params_b: float
    kv_bytes_per_token: float  # bf16 K and V of every layer for one token
    lora_params: float
    tensors: int  # weight tensors a sync loads into vLLM
    source: str

    @property
    def weight_bytes(self) -> float:
        return doctor.weight_bytes(self.params_b)


def model_shape(params_b: float, architecture: dict | None, source: str, *, lora_r: int = 16,
                lora_targets: list[str] | tuple = ("q_proj", "k_proj", "v_proj", "o_proj")) -> ModelShape:
    """A model's shape from its architecture (``config.json`` keys), or from its size alone (an upper bound)."""
    per_token = doctor.kv_bytes_per_token(architecture)
    layers = (architecture or {}).get("num_hidden_layers")
    if per_token is None:
        per_token = doctor.kv_per_token_estimate(params_b * 1e9)
        layers = round((params_b * 1e9 / (12 * 128**2)) ** (1 / 3))
        source = f"architecture unknown: KV cache estimated from the size ({source})"
    lora = doctor.lora_params(architecture, lora_r, list(lora_targets), params_b)
    # each layer: q, k, v, o, gate, up, down and two norms; plus embeddings, final norm, head
    return ModelShape(params_b=params_b, kv_bytes_per_token=float(per_token), lora_params=lora,
                      tensors=9 * int(layers) + 3, source=source)


def training_engine_max_seqs(training: dict) -> int:
    """``max_num_seqs`` of TRL 1.16's colocated vLLM engine: ``per_device_train_batch_size x
    vllm_tensor_parallel_size x steps_per_generation``."""
    spg = training["steps_per_generation"] or training["gradient_accumulation_steps"]
    tensor_parallel = int(training.get("vllm_tensor_parallel_size") or 1)
    return training["per_device_train_batch_size"] * tensor_parallel * spg


def kv_cache_bytes(share: float, gpu_memory_gb: float, weight_bytes: float) -> float:
    """The KV cache a vLLM engine gets: its share of the GPU less the weights and vLLM's workspace."""
    return max(0.0, share * gpu_memory_gb * 1e9 - weight_bytes - doctor.VLLM_OVERHEAD_BYTES)


def kv_limited_seqs(max_seqs: int, cache_bytes: float, kv_bytes_per_token: float, context_tokens: float) -> int:
    """Sequences an engine runs at once: ``max_seqs``, fewer when the KV cache cannot hold them all at full
    context (at least 1: vLLM refuses to start when not even one fits, and ``pgrpo doctor`` says so)."""
    if kv_bytes_per_token <= 0 or context_tokens <= 0:
        return int(max_seqs)
    fit = math.floor(cache_bytes / (kv_bytes_per_token * context_tokens))
    return max(1, min(int(max_seqs), fit))


def training_share(training: dict, shape: ModelShape, gpu_memory_gb: float, context_tokens: float) -> float:
    """The colocated engine's ``vllm_gpu_memory_utilization``; ``auto`` as ``pgrpo doctor`` sizes it (weights +
    the KV cache of one generation batch + workspace)."""
    value = training["vllm_gpu_memory_utilization"]
    if value != "auto":
        return float(value)
    kv = doctor.kv_budget_bytes(shape.weight_bytes, shape.kv_bytes_per_token, training_engine_max_seqs(training),
                                int(context_tokens))
    return doctor.auto_vllm_share(shape.weight_bytes, kv, gpu_memory_gb * 1e9)


def _profile(profile: dict, key: str) -> float:
    return float(profile.get(key, PROFILE_EXTRA_DEFAULTS[key]))


def weight_sync_seconds(shape: ModelShape, profile: dict) -> float:
    """One TRL weight sync into a colocated vLLM engine: merge, load and unmerge (3 read+write passes over the
    weights) and a call per tensor."""
    bandwidth = profile["memory_bandwidth_gbps"] * 1e9 * profile["bandwidth_efficiency"]
    passes = 3 * 2 * shape.params_b * 1e9 * profile["bytes_per_param"] / bandwidth
    return passes + shape.tensors * _profile(profile, "sync_per_tensor_ms") / 1000


def _write_seconds(nbytes: float, profile: dict) -> float:
    return _profile(profile, "io_fixed_s") + nbytes / (_profile(profile, "disk_gbps") * 1e9)


def checkpoint_seconds(shape: ModelShape, profile: dict) -> float:
    """One checkpoint: the adapter and Adam's two moments (fp32), RNG and trainer state."""
    return _write_seconds(shape.lora_params * doctor.CHECKPOINT_BYTES_PER_LORA_PARAM, profile)


def adapter_save_seconds(shape: ModelShape, profile: dict) -> float:
    """One adapter save for a separate evaluation job (``eval_mode: checkpoints``): the fp32 adapter alone."""
    return _write_seconds(shape.lora_params * 4, profile)


def merge_seconds(shape: ModelShape, profile: dict) -> float:
    """The merge at the end of a run: read the base weights, fold the adapter in, write the merged model."""
    return _write_seconds(2 * shape.params_b * 1e9 * profile["bytes_per_param"], profile)


#: Profile keys the cost terms above read, with their defaults (assumptions until measured).
PROFILE_EXTRA_DEFAULTS: dict[str, float] = {
    "disk_gbps": 1.0,  # a node-local or parallel file system, write
    "io_fixed_s": 5.0,  # a save's fixed cost: serialisation, fsync, RNG and trainer state
    "sync_per_tensor_ms": 0.2,  # one load_weights call from Python
    "eval_job_overhead_min": 3.0,  # a separate evaluation job: base + adapter load, vLLM start-up, CUDA graphs
}


def assumed_terms(profile: dict) -> list[str]:
    """The cost terms a profile has not measured (its ``measured`` list names the others)."""
    measured = set(profile.get("measured") or [])
    return [term for term in COST_TERMS if term not in measured]
