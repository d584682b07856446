"""Out-of-distribution evaluation: pass@1 and pass@5 per benchmark, base model included, and Table 1.

Paper: Section 4.3 ("Evaluation Protocol": zero-shot transfer of the GSM8K-trained policies to external math
benchmarks, reported as pass@k for k in {1, 5}, mean ± s.d. over seeds; 2000 examples subsampled from MetaMathQA
and OpenMath2; NuminaMath's one proof problem skipped as not objectively verifiable) and Section 5.7 / Table 1
(green = improvement over the untrained base, bold green = best configuration per model, red = regression).

An evaluation is keyed by (model, variant, benchmark); ``variant`` is ``base`` (the config's model spec) or
``G{G}_seed{seed}`` (the merged model ``results/train/{model}/G{G}/seed{seed}/merged/``).

- Benchmarks (config ``benchmarks:``) are loaded by hub ``id`` or local ``path``; the gold answer comes from
  ``answer_field`` by ``answer_format`` (:func:`gold_from_field`): ``gsm8k`` = the text after ``####``,
  ``number``/``latex`` = the field as is, ``boxed`` = the last ``\\boxed{...}`` of the solution, ``metamath`` = the
  text after ``The answer is:``. Problems without an extractable gold answer are never scored (they are counted as
  excluded); with ``exclude_proofs`` also proof questions ("prove", "show that", ...) and proof-style golds
  (``\\blacksquare``) are skipped (:func:`screen_problem`). A deterministic shuffle (``seed``) picks the first
  ``max_examples`` verifiable problems, so every variant of a model sees the same problems.
- ``num_samples`` = n completions per problem at ``temperature`` (default 0.8, the training temperature of
  Table 2: the policy is scored under the distribution it was trained to sample; the same temperature for base
  and trained variants keeps Section 4.3's pass@1-vs-pass@5 argument meaningful) and ``top_p``; correctness is
  the training reward's :func:`pgrpo.rewards.is_correct`. pass@k is the unbiased estimator of Chen et al. (2021),
  ``1 - C(n-c, k) / C(n, k)`` averaged over problems (:func:`pass_at_k`).
- Generation backends: ``transformers`` (batched ``model.generate``, left padding, CPU or CUDA) and ``vllm``
  (``LLM.generate`` with ``SamplingParams(n=num_samples)``; chosen by ``backend: vllm`` or ``auto`` when vLLM is
  importable and CUDA is available; imported lazily).
- :func:`run_table1` assembles Table 1 from the per-(variant, benchmark) JSON files: CSV (long-format data),
  Markdown and LaTeX (the view).
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pgrpo.atomic import atomic_path, write_csv, write_json, write_text
from pgrpo.errors import InputError, one_line
from pgrpo.rewards import extract_final_answer, last_boxed

ANSWER_FORMATS: tuple[str, ...] = ("gsm8k", "number", "latex", "boxed", "metamath")
BACKENDS: tuple[str, ...] = ("auto", "transformers", "vllm")
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")

#: Keys of one ``benchmarks.<name>`` entry (config/schema.yaml) and their defaults.
BENCHMARK_DEFAULTS: dict[str, Any] = {
    "id": None,
    "config": None,
    "split": "test",
    "path": None,
    "question_field": None,
    "answer_field": None,
    "answer_format": None,
    "max_examples": None,
    "exclude_proofs": False,
}
REQUIRED_BENCHMARK_KEYS: tuple[str, ...] = ("question_field", "answer_field", "answer_format")

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
    "prompt_template": None,   # null: pgrpo.data.PROMPT_TEMPLATE (the training prompt); must contain {question}
    "chat_template": False,    # false | true | auto: render the prompt with the tokenizer's chat template
    "vllm_gpu_memory_utilization": 0.85,
    "resources": {"gpus": 0, "runtime_min": 60, "mem_mb": 4000, "threads": 1},
}

#: Question wording of problems that ask for a proof (no single final answer to check).
PROOF_QUESTION = re.compile(r"\b(prove|proof|show that|shows that|demonstrate that)\b", re.IGNORECASE)
#: Gold "answers" that mark the end of a proof rather than a value.
PROOF_GOLDS = {"\\blacksquare", "\\square", "\\qed", "qed", "q.e.d.", "\\box", "proof"}
#: Where MetaMathQA's responses state the final answer.
METAMATH_MARKER = re.compile(r"The answer is\s*:?", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------------------------
# pass@k (Chen et al., 2021)
# ---------------------------------------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct among ``n`` samples: ``1 - C(n-c, k) / C(n, k)``.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` (Chen et al., 2021, Fig. 3), which is exact and avoids huge
    binomials; 1 when ``n - c < k`` (every k-subset holds a correct sample).
    """
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError("pass_at_k takes integers n, c, k")
    if k < 1 or n < k or c < 0 or c > n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


@dataclass(frozen=True)
class PassAtK:
    """pass@k over a benchmark: the mean over problems and its standard error (s.d. over problems / sqrt(P))."""

    k: int
    value: float
    stderr: float
    n_problems: int


def benchmark_pass_at_k(correct_counts: Sequence[int], n: int, k: int) -> PassAtK:
    """Mean of :func:`pass_at_k` over problems with ``correct_counts[p]`` correct among ``n`` samples each."""
    if not correct_counts:
        raise ValueError("no problems to score")
    per_problem = [pass_at_k(n, int(c), k) for c in correct_counts]
    p = len(per_problem)
    mean = sum(per_problem) / p
    var = sum((x - mean) ** 2 for x in per_problem) / (p - 1) if p > 1 else float("nan")
    return PassAtK(k=k, value=mean, stderr=math.sqrt(var / p) if p > 1 else float("nan"), n_problems=p)


# ---------------------------------------------------------------------------------------------------------------
# Gold answers and verifiability
# ---------------------------------------------------------------------------------------------------------------


def _strip_math(text: str) -> str:
    """Strip whitespace, enclosing ``$...$`` / ``\\(...\\)`` and a trailing period."""
    s = text.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
            s = s[len(left) : len(s) - len(right)].strip()
    return s.rstrip(".").strip()


def gold_from_field(value: Any, answer_format: str) -> str | None:
    """The gold final answer written in a benchmark's answer field, by ``answer_format``; None if there is none.

    ``gsm8k``: the answer after ``####`` (as :func:`pgrpo.rewards.extract_final_answer` reads it);
    ``number`` and ``latex``: the field itself (stripped; enclosing ``$`` removed); ``boxed``: the content of the last
    ``\\boxed{...}``; ``metamath``: the text after the last ``The answer is:``.
    """
    if answer_format not in ANSWER_FORMATS:
        raise InputError(f"answer_format must be one of {', '.join(ANSWER_FORMATS)}, got {answer_format!r}")
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    elif isinstance(value, str):
        text = value
    else:
        return None
    if answer_format == "gsm8k":
        if "####" not in text:
            return None
        gold = extract_final_answer(text[text.index("####") :])
    elif answer_format in ("number", "latex"):
        gold = _strip_math(text)
    elif answer_format == "boxed":
        gold = last_boxed(text)
    else:  # metamath
        marks = list(METAMATH_MARKER.finditer(text))
        gold = _strip_math(text[marks[-1].end() :]) if marks else None
    return gold if gold else None


def screen_problem(question: Any, answer_value: Any, answer_format: str,
                   exclude_proofs: bool) -> tuple[str | None, str | None]:
    """``(gold, None)`` for a scorable problem, ``(None, reason)`` for one that is skipped.

    Reasons: ``no_question`` (empty question), ``no_gold`` (``answer_format`` finds no final answer: such a problem
    cannot be scored, so it is skipped even without ``exclude_proofs``), and with ``exclude_proofs`` ``proof`` (the
    question asks for a proof, or the "answer" is an end-of-proof mark such as ``\\blacksquare``).
    """
    if not isinstance(question, str) or not question.strip():
        return None, "no_question"
    gold = gold_from_field(answer_value, answer_format)
    if gold is None:
        return None, "no_gold"
    if exclude_proofs and (PROOF_QUESTION.search(question) or gold.strip().lower() in PROOF_GOLDS):
        return None, "proof"
    return gold, None


# ---------------------------------------------------------------------------------------------------------------
# Benchmark loading
# ---------------------------------------------------------------------------------------------------------------


def resolve_benchmark(name: str, spec: Any) -> dict:
    """One ``benchmarks.<name>`` entry merged over :data:`BENCHMARK_DEFAULTS`, validated (InputError names the key)."""
    where = f"benchmarks.{name}"
    if not isinstance(spec, dict):
        raise InputError(f"{where} must be a mapping, got {spec!r}")
    unknown = sorted(set(spec) - set(BENCHMARK_DEFAULTS))
    if unknown:
        raise InputError(f"{where}: unknown key(s) {unknown} (known: {sorted(BENCHMARK_DEFAULTS)})")
    merged = {**BENCHMARK_DEFAULTS, **spec}
    for key in REQUIRED_BENCHMARK_KEYS:
        if not merged.get(key):
            raise InputError(f"{where}.{key}: missing (needed to read the benchmark)")
    if merged["answer_format"] not in ANSWER_FORMATS:
        raise InputError(
            f"{where}.answer_format must be one of {', '.join(ANSWER_FORMATS)}, got {merged['answer_format']!r}"
        )
    if not merged.get("path") and not merged.get("id"):
        raise InputError(f"{where}: set either 'path' (a local file) or 'id' (a Hugging Face dataset)")
    m = merged["max_examples"]
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
        raise InputError(f"{where}.max_examples must be a positive integer or null, got {m!r}")
    if not isinstance(merged["exclude_proofs"], bool):
        raise InputError(f"{where}.exclude_proofs must be true or false, got {merged['exclude_proofs']!r}")
    return merged


def _load_table(name: str, spec: dict):
    """The benchmark's rows as a ``datasets.Dataset`` and a description of the source; errors name
    ``benchmarks.<name>.*``."""
    from pgrpo.data import load_table

    return load_table(spec, f"benchmarks.{name}", default_split="test")


@dataclass(frozen=True)
class BenchmarkProblems:
    """The scored problems of one benchmark: questions, gold answers and their row numbers in the source."""

    name: str
    source: str
    questions: tuple[str, ...]
    golds: tuple[str, ...]
    indices: tuple[int, ...]
    n_source: int
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> count among the rows looked at

    @property
    def n_excluded(self) -> int:
        return sum(self.excluded.values())


def select_problems(questions: Sequence[Any], answers: Sequence[Any], answer_format: str, exclude_proofs: bool,
                    max_examples: int | None, seed: int) -> tuple[list[int], list[str], dict[str, int]]:
    """The rows to score: (indices in source order, their golds, exclusion counts by reason).

    Rows are visited in a ``seed``-shuffled order (source order without ``max_examples``) and the first
    ``max_examples`` scorable ones are kept; the exclusion counts cover the rows visited.
    """
    order = list(range(len(questions)))
    if max_examples is not None and max_examples < len(order):
        random.Random(seed).shuffle(order)
    kept: list[tuple[int, str]] = []
    excluded: dict[str, int] = {}
    for i in order:
        if max_examples is not None and len(kept) >= max_examples:
            break
        gold, reason = screen_problem(questions[i], answers[i], answer_format, exclude_proofs)
        if reason is not None:
            excluded[reason] = excluded.get(reason, 0) + 1
        else:
            kept.append((i, gold))
    kept.sort()
    return [i for i, _ in kept], [g for _, g in kept], excluded


def load_benchmark(name: str, spec: dict, seed: int = 0) -> BenchmarkProblems:
    """Load, screen and subsample one benchmark (see :func:`select_problems`); InputError names the key/column/file."""
    spec = resolve_benchmark(name, spec)
    raw, source = _load_table(name, spec)
    columns = list(raw.column_names)
    for key in ("question_field", "answer_field"):
        if spec[key] not in columns:
            raise InputError(
                f"benchmarks.{name}.{key}: column {spec[key]!r} not in {source} (available: {', '.join(columns)})"
            )
    if len(raw) == 0:
        raise InputError(f"benchmarks.{name}: {source} has no rows")
    questions = raw[spec["question_field"]]
    answers = raw[spec["answer_field"]]
    indices, golds, excluded = select_problems(questions, answers, spec["answer_format"], spec["exclude_proofs"],
                                               spec["max_examples"], seed)
    if not indices:
        raise InputError(
            f"benchmarks.{name}.answer_format: no row of {source} has a gold answer in the "
            f"{spec['answer_format']!r} format in column {spec['answer_field']!r} (excluded: {excluded})"
        )
    if excluded.get("no_gold") and not spec["exclude_proofs"]:
        print(f"evaluate: benchmarks.{name}: skipped {excluded['no_gold']} row(s) without a "
              f"{spec['answer_format']!r} gold answer", file=sys.stderr)
    return BenchmarkProblems(
        name=name, source=source, questions=tuple(str(questions[i]) for i in indices), golds=tuple(golds),
        indices=tuple(indices), n_source=len(raw), excluded=excluded,
    )


# ---------------------------------------------------------------------------------------------------------------
# The evaluation settings
# ---------------------------------------------------------------------------------------------------------------


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
    template = out["prompt_template"]
    if template is not None and (not isinstance(template, str) or "{question}" not in template):
        raise InputError(f"evaluation.prompt_template must contain '{{question}}', got {template!r}")
    if out["chat_template"] not in (True, False, "auto", None):
        raise InputError(f"evaluation.chat_template must be true, false or auto, got {out['chat_template']!r}")
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
    """Whether vLLM is importable (without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def choose_backend(setting: str, cuda: bool, has_vllm: bool) -> str:
    """``transformers`` or ``vllm``: vLLM only when asked (``vllm``) or allowed (``auto``) and usable here."""
    if setting == "transformers":
        return "transformers"
    if setting == "vllm":
        if not has_vllm:
            raise InputError("evaluation.backend: vllm is not installed here (use auto or transformers)")
        if not cuda:
            raise InputError("evaluation.backend: vllm needs a CUDA device and none is visible (use auto or transformers)")
        return "vllm"
    if setting == "auto":
        return "vllm" if (has_vllm and cuda) else "transformers"
    raise InputError(f"evaluation.backend must be one of {', '.join(BACKENDS)}, got {setting!r}")


def variant_of(variant_path: str | None) -> tuple[str, int | None, int | None]:
    """``("base", None, None)`` or ``("G{G}_seed{seed}", G, seed)`` of a merged model directory.

    G and seed come from the run's ``meta.json`` beside ``merged/`` when it exists, else from the path
    ``.../G{G}/seed{seed}/merged``.
    """
    if variant_path is None:
        return "base", None, None
    p = Path(variant_path)
    meta = p.parent / "meta.json"
    if meta.is_file():
        try:
            record = json.loads(meta.read_text())
            G, seed = int(record["G"]), int(record["seed"])
            return f"G{G}_seed{seed}", G, seed
        except (ValueError, KeyError, TypeError):
            pass
    m = re.search(r"G(\d+)/seed(\d+)(?:/[^/]+)?/?$", p.as_posix())
    if not m:
        raise InputError(f"variant path {variant_path}: cannot tell G and seed (expected .../G{{G}}/seed{{seed}}/merged)")
    return f"G{m.group(1)}_seed{m.group(2)}", int(m.group(1)), int(m.group(2))


# ---------------------------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Completions per problem: ``texts[p][j]`` is sample j of problem p; ``tokens`` its length; ``truncated`` when
    it hit ``max_new_tokens`` without an end-of-sequence token."""

    texts: list[list[str]]
    tokens: list[list[int]]
    truncated: list[list[bool]]


def _eos_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    ids = eos if isinstance(eos, (list, tuple)) else [eos]
    return [int(i) for i in ids if i is not None]


def generate_transformers(model, tokenizer, prompt_ids: Sequence[Sequence[int]], *, num_samples: int,
                          temperature: float, top_p: float, max_new_tokens: int, batch_size: int, seed: int,
                          device: str = "cpu", desc: str = "generate") -> Samples:
    """``num_samples`` sampled completions per tokenized prompt with batched ``model.generate`` (left padding).

    The (prompt, sample) pairs are sorted by prompt length so that a batch pads little; sampling uses the full
    distribution truncated only by ``top_p`` (top_k disabled). Deterministic for a given seed and batch size.
    A private generator rather than :func:`pgrpo.tiny.generate_completions`, which has no top_p, no samples per
    prompt, no device, no progress bar and tokenizes text itself.
    """
    import torch
    from tqdm.auto import tqdm

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos_ids = _eos_ids(model, tokenizer)
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


def generate_vllm(source: str, prompt_ids: Sequence[Sequence[int]], *, num_samples: int, temperature: float,
                  top_p: float, max_new_tokens: int, seed: int, dtype: str, gpus: int,
                  gpu_memory_utilization: float) -> Samples:
    """``num_samples`` completions per tokenized prompt with vLLM's offline ``LLM.generate`` (imported lazily).

    Prompts go in as token ids (``{"prompt_token_ids": ...}``) so that vLLM adds no second BOS to a chat-rendered
    prompt; ``SamplingParams(n=num_samples, temperature, top_p, max_tokens)``; ``LLM(seed=seed)``. Written to
    vLLM's documented API; not exercised by the tests (no CUDA there).
    """
    from vllm import LLM, SamplingParams

    llm = LLM(model=source, tokenizer=source, seed=seed, dtype=dtype, tensor_parallel_size=max(1, gpus),
              gpu_memory_utilization=gpu_memory_utilization)
    params = SamplingParams(n=num_samples, temperature=float(temperature), top_p=float(top_p),
                            max_tokens=max_new_tokens)
    outputs = llm.generate([{"prompt_token_ids": list(ids)} for ids in prompt_ids], params, use_tqdm=True)
    texts, tokens, truncated = [], [], []
    for request in outputs:
        completions = list(request.outputs)[:num_samples]
        texts.append([c.text for c in completions])
        tokens.append([len(c.token_ids) for c in completions])
        truncated.append([c.finish_reason == "length" for c in completions])
    return Samples(texts, tokens, truncated)


def _use_chat(setting: Any, tokenizer) -> bool:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting in (False, None):
        return False
    if setting == "auto":
        return has_template
    if not has_template:
        raise InputError("evaluation.chat_template is true but the model's tokenizer has no chat template")
    return True


def tokenize_prompts(questions: Sequence[str], tokenizer, template: str | None, chat_setting: Any) -> list[list[int]]:
    """Token ids of each question's prompt, rendered as in training (:func:`pgrpo.data.make_prompt`)."""
    from pgrpo.data import PROMPT_TEMPLATE, make_prompt, prompt_text

    chat = _use_chat(chat_setting, tokenizer)
    out = []
    for q in questions:
        text = prompt_text(make_prompt(q, template or PROMPT_TEMPLATE, chat), tokenizer)
        # a chat-rendered prompt already holds any BOS; a plain one is encoded as GRPOTrainer encodes it
        out.append(list(tokenizer(text, add_special_tokens=not chat)["input_ids"]))
    return out


def _torch_dtype(setting: str, cuda: bool):
    import torch

    if setting == "float32" or (setting == "auto" and not cuda):
        return torch.float32
    if setting == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return getattr(torch, setting)


def _versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "transformers", "vllm", "math_verify"):
        if importlib.util.find_spec(name) is None:
            continue
        try:
            out[name] = str(getattr(__import__(name), "__version__", "?"))
        except Exception:  # noqa: BLE001 - a version stamp must never fail the run
            out[name] = "?"
    return out


# ---------------------------------------------------------------------------------------------------------------
# The stage
# ---------------------------------------------------------------------------------------------------------------


def run_evaluate(model: dict, variant_path: str | None, benchmark_name: str, benchmark: dict, evaluation: dict,
                 out_json: str, out_samples_jsonl: str | None = None, seed: int = 0) -> dict:
    """Evaluate one (model, variant, benchmark): pass@k for every k of ``evaluation.pass_at``.

    ``model`` = the config's model spec {name, id, path}; ``variant_path`` = a merged model directory
    (``results/train/{model}/G{G}/seed{seed}/merged``) or None for the base model; ``benchmark`` = the
    ``benchmarks.<benchmark_name>`` entry; ``evaluation`` = the ``evaluation:`` section; ``seed`` = the subsampling
    and sampling seed (the same for every variant, so all see the same problems; ``evaluation.seed`` is the usual
    value). Writes ``out_json`` = {model, variant, G, seed, benchmark, n_problems, n_excluded, excluded, n_source,
    num_samples, pass@1, pass@5, ..., stderr, temperature, top_p, max_new_tokens, backend, ...} and, if given,
    ``out_samples_jsonl`` (one line per problem: index, question, gold, completions, correct, n_correct).
    Returns the JSON record. Config and data errors raise InputError before the model is loaded.
    """
    t_start = time.perf_counter()
    settings = resolve_evaluation(evaluation)
    name = (model or {}).get("name") or "model"
    if not isinstance(model, dict) or not (model.get("path") or model.get("id")):
        raise InputError(f"models.{name}: set either 'path' (a local model directory) or 'id' (a hub model id)")
    variant, G, train_seed = variant_of(variant_path)
    if variant_path is not None and not (Path(variant_path) / "config.json").is_file():
        raise InputError(f"variant {variant} of {name}: no merged model at {variant_path} (no config.json)")
    problems = load_benchmark(benchmark_name, benchmark, seed=seed)

    import torch

    torch.set_num_threads(int(settings["resources"]["threads"]))
    cuda = torch.cuda.is_available()
    backend = choose_backend(settings["backend"], cuda, vllm_available())
    spec = {"name": name, "id": None, "path": variant_path} if variant_path else dict(model, name=name)
    source = spec.get("path") or spec.get("id")
    desc = f"{name}/{variant}/{benchmark_name}"
    gen = dict(num_samples=settings["num_samples"], temperature=settings["temperature"], top_p=settings["top_p"],
               max_new_tokens=settings["max_new_tokens"], seed=seed)

    t_load = time.perf_counter()
    if backend == "vllm":
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(source))
        except Exception as exc:
            key = "path" if spec.get("path") else "id"
            raise InputError(f"models.{name}.{key}: cannot load the tokenizer of {source!r}: {one_line(exc)}") from None
        prompt_ids = tokenize_prompts(problems.questions, tokenizer, settings["prompt_template"],
                                      settings["chat_template"])
        dtype = "auto" if settings["dtype"] == "auto" else settings["dtype"]
        t_gen = time.perf_counter()
        samples = generate_vllm(str(source), prompt_ids, dtype=dtype, gpus=settings["resources"]["gpus"],
                                gpu_memory_utilization=settings["vllm_gpu_memory_utilization"], **gen)
        device = "cuda"
    else:
        from pgrpo.tiny import load_model_and_tokenizer

        device = "cuda" if cuda else "cpu"
        policy, tokenizer = load_model_and_tokenizer(spec, dtype=_torch_dtype(settings["dtype"], cuda))
        policy.to(device)
        prompt_ids = tokenize_prompts(problems.questions, tokenizer, settings["prompt_template"],
                                      settings["chat_template"])
        t_gen = time.perf_counter()
        samples = generate_transformers(policy, tokenizer, prompt_ids, batch_size=settings["batch_size"],
                                        device=device, desc=desc, **gen)
    t_score = time.perf_counter()

    from pgrpo.rewards import is_correct

    correct = [[bool(is_correct(text, gold)) for text in texts] for texts, gold in zip(samples.texts, problems.golds)]
    counts = [sum(row) for row in correct]
    n = settings["num_samples"]
    results = {k: benchmark_pass_at_k(counts, n, k) for k in settings["pass_at"]}
    all_tokens = [t for row in samples.tokens for t in row]
    all_truncated = [t for row in samples.truncated for t in row]
    record: dict[str, Any] = {
        "model": name,
        "variant": variant,
        "G": G,
        "seed": train_seed,
        "benchmark": benchmark_name,
        "n_problems": len(problems.questions),
        "n_excluded": problems.n_excluded,
        "excluded": problems.excluded,
        "n_source": problems.n_source,
        "num_samples": n,
    }
    record.update({f"pass@{k}": r.value for k, r in results.items()})
    record.update({
        "stderr": {f"pass@{k}": r.stderr for k, r in results.items()},
        "temperature": float(settings["temperature"]),
        "top_p": float(settings["top_p"]),
        "max_new_tokens": settings["max_new_tokens"],
        "backend": backend,
        "device": device,
        "eval_seed": seed,
        "prompt_template": settings["prompt_template"],
        "chat_template": settings["chat_template"],
        "mean_completion_tokens": sum(all_tokens) / max(1, len(all_tokens)),
        "truncated_fraction": sum(all_truncated) / max(1, len(all_truncated)),
        "source": problems.source,
        "model_source": str(source),
        "seconds": {"load": t_gen - t_load, "generate": t_score - t_gen, "score": time.perf_counter() - t_score,
                    "total": time.perf_counter() - t_start},
        "versions": _versions(),
    })
    if out_samples_jsonl:
        with atomic_path(out_samples_jsonl) as tmp, open(tmp, "w") as fh:
            for p, idx in enumerate(problems.indices):
                fh.write(json.dumps({
                    "index": idx, "question": problems.questions[p], "gold": problems.golds[p],
                    "completions": samples.texts[p], "correct": correct[p], "n_correct": counts[p],
                }) + "\n")
    write_json(out_json, record)
    return record


# ---------------------------------------------------------------------------------------------------------------
# Table 1
# ---------------------------------------------------------------------------------------------------------------

LONG_COLUMNS = ["model", "variant", "G", "seed", "benchmark", "metric", "value", "n_problems", "num_samples"]
_METRIC = re.compile(r"^pass@(\d+)$")
_GREEN, _RED = r"\textcolor{green!50!black}", r"\textcolor{red}"


def _read_eval_json(path: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"eval JSON {path}: no such file")
    try:
        record = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"eval JSON {path}: not valid JSON ({one_line(exc)})") from None
    for key in ("model", "variant", "benchmark", "n_problems", "num_samples"):
        if key not in record:
            raise InputError(f"eval JSON {path}: missing key {key!r}")
    if not any(_METRIC.match(k) for k in record):
        raise InputError(f"eval JSON {path}: no pass@k value")
    if record["variant"] != "base":
        m = re.fullmatch(r"G(\d+)_seed(\d+)", str(record["variant"]))
        if not m:
            raise InputError(f"eval JSON {path}: variant {record['variant']!r} is neither base nor G{{G}}_seed{{seed}}")
        record["G"], record["seed"] = int(m.group(1)), int(m.group(2))  # the variant name is the key
    else:
        record["G"], record["seed"] = None, None
    return record


def eval_records_frame(eval_jsons: Sequence[str]):
    """The long-format data of Table 1: one row per (eval JSON, pass@k), value as a fraction in [0, 1].

    Rejects duplicates (the same model, variant and benchmark twice) and evaluations of one (model, benchmark) that
    are not comparable (different problem counts, sample counts or temperatures across variants).
    """
    import pandas as pd

    if not eval_jsons:
        raise InputError("table1: no eval JSON files given")
    rows, seen, protocol = [], {}, {}
    for path in eval_jsons:
        r = _read_eval_json(path)
        key = (r["model"], r["variant"], r["benchmark"])
        if key in seen:
            raise InputError(f"eval JSON {path}: {'/'.join(map(str, key))} is also in {seen[key]}")
        seen[key] = path
        proto = (int(r["n_problems"]), int(r["num_samples"]), r.get("temperature"))
        first = protocol.setdefault((r["model"], r["benchmark"]), (proto, path))
        if first[0] != proto:
            raise InputError(
                f"eval JSON {path}: (n_problems, num_samples, temperature) = {proto} differs from {first[0]} in {first[1]} "
                f"for {r['model']}/{r['benchmark']}"
            )
        for metric in sorted((k for k in r if _METRIC.match(k)), key=lambda k: int(_METRIC.match(k).group(1))):
            rows.append({"model": r["model"], "variant": r["variant"], "G": r["G"], "seed": r["seed"],
                         "benchmark": r["benchmark"], "metric": metric, "value": float(r[metric]),
                         "n_problems": int(r["n_problems"]), "num_samples": int(r["num_samples"])})
    frame = pd.DataFrame(rows, columns=LONG_COLUMNS)
    frame["G"] = frame["G"].astype("Int64")
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


@dataclass(frozen=True)
class Cell:
    """One Table 1 entry in percent: mean and sample s.d. (ddof 1; NaN with one seed) over ``n`` values."""

    mean: float
    sd: float
    n: int


def summarize(values: Sequence[float]) -> Cell:
    """Mean and sample s.d. (ddof = 1) of fractions, in percent."""
    xs = [100.0 * float(v) for v in values]
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else float("nan")
    return Cell(mean, sd, n)


@dataclass(frozen=True)
class Table1:
    """Table 1 as numbers: ``cells[(benchmark, metric, model, column)]`` with column ``Base`` or ``G=<G>``."""

    benchmarks: list[str]
    sizes: dict[str, int]
    metrics: list[str]
    models: list[str]
    columns: dict[str, list[str]]
    cells: dict[tuple[str, str, str, str], Cell]

    def base(self, benchmark: str, metric: str, model: str) -> Cell | None:
        return self.cells.get((benchmark, metric, model, "Base"))

    def best_column(self, benchmark: str, metric: str, model: str) -> set[str]:
        """The trained columns with the highest mean, if that mean beats the base (Table 1's bold green)."""
        base = self.base(benchmark, metric, model)
        trained = {c: self.cells[(benchmark, metric, model, c)] for c in self.columns[model]
                   if c != "Base" and (benchmark, metric, model, c) in self.cells}
        if base is None or not trained:
            return set()
        top = max(cell.mean for cell in trained.values())
        if not top > base.mean + 1e-12:
            return set()
        return {c for c, cell in trained.items() if abs(cell.mean - top) <= 1e-9}


def build_table1(frame) -> Table1:
    """Group the long data into Table 1: benchmarks and models in order of first appearance, G descending."""
    benchmarks = list(dict.fromkeys(frame["benchmark"]))
    models = list(dict.fromkeys(frame["model"]))
    metrics = sorted(set(frame["metric"]), key=lambda m: int(_METRIC.match(m).group(1)))
    sizes = {b: int(frame.loc[frame["benchmark"] == b, "n_problems"].max()) for b in benchmarks}
    columns, cells = {}, {}
    for model in models:
        sub = frame[frame["model"] == model]
        Gs = sorted({int(g) for g in sub["G"].dropna()}, reverse=True)
        has_base = bool((sub["variant"] == "base").any())
        columns[model] = (["Base"] if has_base else []) + [f"G={g}" for g in Gs]
        for (benchmark, metric), group in sub.groupby(["benchmark", "metric"], sort=False):
            base = group[group["variant"] == "base"]
            if len(base):
                cells[(benchmark, metric, model, "Base")] = summarize(base["value"].tolist())
            for g in Gs:
                trained = group[group["G"] == g]
                if len(trained):
                    cells[(benchmark, metric, model, f"G={g}")] = summarize(trained["value"].tolist())
    return Table1(benchmarks, sizes, metrics, models, columns, cells)


def _number(cell: Cell, with_sd: bool) -> str:
    if not with_sd:
        return f"{cell.mean:.2f}"
    sd = "n/a" if math.isnan(cell.sd) else f"{cell.sd:.2f}"
    return f"{cell.mean:.2f} ± {sd}"


def _markdown_cell(table: Table1, benchmark: str, metric: str, model: str, column: str) -> str:
    cell = table.cells.get((benchmark, metric, model, column))
    if cell is None:
        return "–"
    if column == "Base":
        return _number(cell, with_sd=False)
    text = _number(cell, with_sd=True)
    base = table.base(benchmark, metric, model)
    if base is not None:
        delta = cell.mean - base.mean
        text += f" ({delta:+.2f})" if abs(delta) >= 0.005 else " (=)"
    if column in table.best_column(benchmark, metric, model):
        text = f"**{text}**"
    return text


def table1_markdown(table: Table1) -> str:
    """Markdown view: a ``(+x)``/``(-x)`` change of the mean vs base per trained cell, bold for the best G per model."""
    header = ["Benchmark", "Metric"] + [f"{m} {c}" for m in table.models for c in table.columns[m]]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", "---"] + ["---:"] * (len(header) - 2)) + "|"]
    for benchmark in table.benchmarks:
        for i, metric in enumerate(table.metrics):
            label = f"{benchmark} ({table.sizes[benchmark]})" if i == 0 else ""
            row = [label, metric] + [_markdown_cell(table, benchmark, metric, m, c)
                                     for m in table.models for c in table.columns[m]]
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "pass@k in %; trained columns: mean ± s.d. over seeds (sample s.d.; n/a with one seed). "
              "(+x)/(-x): change of the mean vs the model's base; bold: the best G of a model where it beats base."]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    out = []
    for ch in str(text):
        if ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "~":
            out.append(r"\textasciitilde{}")
        elif ch == "^":
            out.append(r"\textasciicircum{}")
        elif ch == "\\":
            out.append(r"\textbackslash{}")
        else:
            out.append(ch)
    return "".join(out)


def _latex_cell(table: Table1, benchmark: str, metric: str, model: str, column: str) -> str:
    cell = table.cells.get((benchmark, metric, model, column))
    if cell is None:
        return "--"
    if column == "Base":
        return f"{cell.mean:.2f}"
    sd = "n/a" if math.isnan(cell.sd) else f"{cell.sd:.2f}"
    text = f"{cell.mean:.2f}$\\pm${sd}"
    base = table.base(benchmark, metric, model)
    if base is None or abs(cell.mean - base.mean) < 0.005:
        return text
    if cell.mean > base.mean:
        if column in table.best_column(benchmark, metric, model):
            return f"{_GREEN}{{\\textbf{{{text}}}}}"
        return f"{_GREEN}{{{text}}}"
    return f"{_RED}{{{text}}}"


def table1_latex(table: Table1) -> str:
    """LaTeX view as in the paper: green = better than base, bold green = best per model, red = worse
    (needs ``\\usepackage{booktabs,xcolor}``)."""
    spec = "ll" + "".join("|" + "r" * len(table.columns[m]) for m in table.models)
    group = " & ".join(f"\\multicolumn{{{len(table.columns[m])}}}{{c}}{{{latex_escape(m)}}}" for m in table.models)
    rules, start = [], 3
    for m in table.models:
        end = start + len(table.columns[m]) - 1
        rules.append(f"\\cmidrule(lr){{{start}-{end}}}")
        start = end + 1
    header = " & ".join(["Benchmark", "Metric"] + [latex_escape(c) for m in table.models for c in table.columns[m]])
    lines = [
        "% Table 1 (Section 5.7); needs \\usepackage{booktabs,xcolor}",
        r"\begin{table}[t]", r"\centering", r"\scriptsize", f"\\begin{{tabular}}{{{spec}}}", r"\toprule",
        f" & & {group} \\\\", "".join(rules), f"{header} \\\\", r"\midrule",
    ]
    for b_i, benchmark in enumerate(table.benchmarks):
        for i, metric in enumerate(table.metrics):
            label = f"{latex_escape(benchmark)} ({table.sizes[benchmark]})" if i == 0 else ""
            cells = [_latex_cell(table, benchmark, metric, m, c) for m in table.models for c in table.columns[m]]
            lines.append(" & ".join([label, latex_escape(metric)] + cells) + r" \\")
        if b_i < len(table.benchmarks) - 1:
            lines.append(r"\midrule")
    lines += [
        r"\bottomrule", r"\end{tabular}",
        r"\caption{Out-of-distribution evaluation using pass@$k$ (\%): base model, and mean $\pm$ s.d. over seeds "
        r"for each group size $G$. Green: better than base; bold green: best configuration per model; red: worse "
        r"than base.}",
        r"\label{tab:ood}", r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def run_table1(eval_jsons: list[str], out_csv: str, out_md: str, out_tex: str) -> Table1:
    """Assemble Table 1 from per-(variant, benchmark) eval JSONs (written by :func:`run_evaluate`).

    Writes ``out_csv`` (long format: model, variant, G, seed, benchmark, metric, value as a fraction, n_problems,
    num_samples), ``out_md`` and ``out_tex`` (rows benchmark x metric; per model Base, then each G descending as
    mean ± s.d. over seeds in percent with 2 decimals). Returns the table's numbers.
    """
    frame = eval_records_frame(eval_jsons)
    table = build_table1(frame)
    write_csv(out_csv, frame)
    write_text(out_md, table1_markdown(table))
    write_text(out_tex, table1_latex(table))
    return table

