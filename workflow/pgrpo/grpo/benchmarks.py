"""Out-of-distribution evaluation: pass@1 and pass@5 per benchmark, base model included, and Table 1.

Paper: Section 4.3 ("Evaluation Protocol": zero-shot transfer of the GSM8K-trained policies to external math
benchmarks, reported as pass@k for k in {1, 5}, mean ± s.d. over seeds; 2000 examples subsampled from MetaMathQA
and OpenMath2; NuminaMath's one proof problem skipped as not objectively verifiable) and Section 5.7 / Table 1
(green = improvement over the untrained base, bold green = best configuration per model, red = regression).

An evaluation is keyed by (model, variant, benchmark); ``variant`` is ``base`` (the config's model spec) or
``G{G}_seed{seed}`` (the merged model ``results/train/{model}/G{G}/seed{seed}/merged/``).

- Benchmarks (config ``benchmarks:``) are loaded by hub ``id`` or local ``path``; the gold answer comes from
  ``answer_field`` by ``answer_format`` (:func:`gold_from_field`): ``gsm8k`` = the text after ``####``,
  ``number``/``latex`` = the field as is, ``boxed`` = the last ``\boxed{...}`` of the solution, ``metamath`` = the
  text after ``The answer is:``. Problems without an extractable gold answer are never scored (they are counted as
  excluded); with ``exclude_proofs`` also proof questions ("prove", "show that", ...) and proof-style golds
  (``\blacksquare``) are skipped (:func:`screen_problem`). Of the verifiable problems the ``max_examples`` with
  the smallest seeded hash of their row number are kept (:func:`select_rows`, one pass, so a large split can be
  streamed), so every variant of a model sees the same problems. The workflow does this once per benchmark (rule
  ``prepare_benchmark``, :mod:`pgrpo.stages.prepare`) and every evaluation job reads the prepared file.
- ``num_samples`` = n completions per problem at ``temperature`` (default 0.8, the training temperature of
  Table 2: the policy is scored under the distribution it was trained to sample; the same temperature for base
  and trained variants keeps Section 4.3's pass@1-vs-pass@5 argument meaningful) and ``top_p``; correctness is
  the training reward's :func:`pgrpo.grpo.rewards.is_correct`. pass@k is the unbiased estimator of Chen et al. (2021),
  ``1 - C(n-c, k) / C(n, k)`` averaged over problems (:func:`pass_at_k`).
- Generation backends: ``transformers`` (batched ``model.generate``, left padding, CPU or CUDA) and ``vllm``
  (``LLM.generate`` with ``SamplingParams(n=num_samples)``; chosen by ``backend: vllm`` or ``auto`` when vLLM is
  importable and CUDA is available; imported lazily).
- :func:`run_table1` assembles Table 1 from the per-(variant, benchmark) JSON files: CSV (long-format data),
  Markdown and LaTeX (the view).

"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from pgrpo.errors import InputError, one_line
from pgrpo.grpo.chat import check_prompt_settings
from pgrpo.grpo.rewards import gold_answer, last_boxed

ANSWER_FORMATS: tuple[str, ...] = ("gsm8k", "number", "integer", "latex", "boxed", "metamath")

METAMATH_MARKER = re.compile(r"The answer is\s*:?", re.IGNORECASE)

#: the answer kind (:data:`pgrpo.grpo.answer_check.KINDS`) a benchmark's golds and completions are checked as
ANSWER_KINDS: dict[str, str] = {"gsm8k": "number", "number": "number", "integer": "integer", "latex": "auto",
                                "boxed": "auto", "metamath": "auto"}


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
    "prompt_template": None,  # null: evaluation.prompt_template; must contain {question}
    "chat_template": None,  # null: evaluation.chat_template; true | false | auto
    "streaming": False,  # read the split as a stream (large hub splits: only its files are fetched)
    "num_rows": None,  # rows of the split, for `pgrpo plan` when the data is not local
}


REQUIRED_BENCHMARK_KEYS: tuple[str, ...] = ("question_field", "answer_field", "answer_format")


#: Question wording of problems that ask for a proof (no single final answer to check).
PROOF_QUESTION = re.compile(r"\b(prove|proof|show that|shows that|demonstrate that)\b", re.IGNORECASE)


#: Gold "answers" that mark the end of a proof rather than a value.
PROOF_GOLDS = {"\\blacksquare", "\\square", "\\qed", "qed", "q.e.d.", "\\box", "proof"}


#: Where MetaMathQA's responses state the final answer.
def gold_from_field(value: Any, answer_format: str) -> str | None:
    """The gold final answer written in a benchmark's answer field, by ``answer_format``; None if there is none.

    ``gsm8k``: the answer after ``####``; ``number``/``integer``: the field read as a number (``None``, ``N/A``
    and other non-answers give None: GSM-Plus's "critical thinking" items are not scored); ``latex``: the field
    itself; ``boxed``: the content of the last ``\\boxed{...}``; ``metamath``: the text after the last ``The answer
    is:`` (:func:`pgrpo.grpo.answer_check.gold_answer`, which keeps the commas of intervals, sets and tuples).
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
    if answer_format == "gsm8k" and "####" not in text:
        return None
    if answer_format == "boxed":
        text = last_boxed(text)
    elif answer_format == "metamath":
        marks = list(METAMATH_MARKER.finditer(text))
        text = text[marks[-1].end():] if marks else None
    gold = gold_answer(text, ANSWER_KINDS[answer_format]) if text else None
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
    if not isinstance(merged["streaming"], bool):
        raise InputError(f"{where}.streaming must be true or false, got {merged['streaming']!r}")
    check_prompt_settings(where, merged)
    n = merged["num_rows"]
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise InputError(f"{where}.num_rows must be a positive integer or null, got {n!r}")
    return merged


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


def sample_key(seed: int, index: int) -> int:
    """A row's place in the seeded sampling order: 8 bytes of blake2b(``"seed:index"``). It depends on nothing but
    the seed and the row number, so a table read whole and the same table streamed give the same sample."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest(), "big")


def select_rows(rows: Iterable[tuple[int, Any, Any]], answer_format: str, exclude_proofs: bool,
                max_examples: int | None, seed: int) -> tuple[list[tuple[int, str, str]], dict[str, int], int]:
    """One pass over ``(index, question, answer)`` rows: ``(kept, excluded, n_rows)``.

    Every row is screened (:func:`screen_problem`); of the scorable ones the ``max_examples`` with the smallest
    :func:`sample_key` are kept (all of them without ``max_examples``): a uniform sample without replacement, drawn
    in one pass with memory for ``max_examples`` rows, so a split of millions of rows can be streamed. ``kept`` holds
    ``(index, question, gold)`` in source order; ``excluded`` counts the skipped rows by reason.
    """
    heap: list[tuple[int, int, str, str]] = []  # (-key, index, question, gold): the max_examples smallest keys
    kept_all: list[tuple[int, str, str]] = []
    excluded: dict[str, int] = {}
    n_rows = 0
    for index, question, answer in rows:
        n_rows += 1
        gold, reason = screen_problem(question, answer, answer_format, exclude_proofs)
        if reason is not None:
            excluded[reason] = excluded.get(reason, 0) + 1
        elif max_examples is None:
            kept_all.append((index, str(question), gold))
        else:
            item = (-sample_key(seed, index), index, str(question), gold)
            if len(heap) < max_examples:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                heapq.heapreplace(heap, item)
    kept = kept_all if max_examples is None else sorted((i, q, g) for _, i, q, g in heap)
    return kept, excluded, n_rows


def select_problems(questions: Sequence[Any], answers: Sequence[Any], answer_format: str, exclude_proofs: bool,
                    max_examples: int | None, seed: int) -> tuple[list[int], list[str], dict[str, int]]:
    """The rows to score: (indices in source order, their golds, exclusion counts by reason); see
    :func:`select_rows`."""
    kept, excluded, _ = select_rows(zip(range(len(questions)), questions, answers), answer_format, exclude_proofs,
                                    max_examples, seed)
    return [i for i, _, _ in kept], [g for _, _, g in kept], excluded


def benchmark_rows(name: str, spec: dict) -> tuple[Iterator[tuple[int, Any, Any]], str]:
    """The ``(index, question, answer)`` rows of a resolved benchmark spec, streamed when ``streaming`` is set, and
    a description of the source; a missing column or an unreadable source raises InputError naming the key."""
    from pgrpo.grpo.data import load_table

    where = f"benchmarks.{name}"
    raw, source = load_table(spec, where, default_split="test", streaming=bool(spec.get("streaming")))
    fields = {"question_field": spec["question_field"], "answer_field": spec["answer_field"]}
    columns = getattr(raw, "column_names", None)
    if columns is not None:
        for key, column in fields.items():
            if column not in columns:
                raise InputError(f"{where}.{key}: column {column!r} not in {source} (available: {', '.join(columns)})")
        raw = raw.select_columns(list(dict.fromkeys(fields.values())))

    def rows() -> Iterator[tuple[int, Any, Any]]:
        iterator = iter(raw)
        index = 0
        while True:
            try:
                row = next(iterator)
            except StopIteration:
                return
            except Exception as exc:  # noqa: BLE001 - a stream that breaks off, a bad shard
                key = "path" if spec.get("path") else "id"
                raise InputError(f"{where}.{key}: reading {source} failed at row {index}: {one_line(exc)}") from None
            for key, column in fields.items():
                if column not in row:
                    raise InputError(f"{where}.{key}: column {column!r} not in {source} "
                                     f"(available: {', '.join(row)})")
            yield index, row[fields["question_field"]], row[fields["answer_field"]]
            index += 1

    return rows(), source


def load_benchmark(name: str, spec: dict, seed: int = 0) -> BenchmarkProblems:
    """Load, screen and subsample one benchmark (see :func:`select_rows`); InputError names the key/column/file."""
    spec = resolve_benchmark(name, spec)
    rows, source = benchmark_rows(name, spec)
    kept, excluded, n_rows = select_rows(rows, spec["answer_format"], spec["exclude_proofs"], spec["max_examples"],
                                         seed)
    if n_rows == 0:
        raise InputError(f"benchmarks.{name}: {source} has no rows")
    if not kept:
        raise InputError(
            f"benchmarks.{name}.answer_format: no row of {source} has a gold answer in the "
            f"{spec['answer_format']!r} format in column {spec['answer_field']!r} (excluded: {excluded})"
        )
    if excluded.get("no_gold") and not spec["exclude_proofs"]:
        print(f"evaluate: benchmarks.{name}: skipped {excluded['no_gold']} row(s) without a "
              f"{spec['answer_format']!r} gold answer", file=sys.stderr)
    return BenchmarkProblems(
        name=name, source=source, questions=tuple(q for _, q, _ in kept), golds=tuple(g for _, _, g in kept),
        indices=tuple(i for i, _, _ in kept), n_source=n_rows, excluded=excluded,
    )
