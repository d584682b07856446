"""Problems for GRPO: GSM8K by hub id or local path, and the shipped synthetic GSM8K-style data.

Section 4.2 trains on the GSM8K training split (Cobbe et al., 2021) and Section 4.3 evaluates on held-out
problems; both use a binary reward on the parsed final answer (see :mod:`pgrpo.grpo.rewards`). This module

- loads a problem set by hub ``id`` (+ ``config``, ``split``) through ``datasets.load_dataset`` or by a local
  ``path`` (jsonl/json/parquet/csv file or a ``save_to_disk`` directory), the path overriding the id so that offline
  clusters can point at a local copy;
- turns each problem into the ONE prompt used by the warm start (:mod:`pgrpo.grpo.tiny_model`), GRPO and evaluation
  (:func:`format_prompt`), keeping the gold ``answer`` text as in the source (``... #### N``);
- generates the embedded default's synthetic GSM8K-style problems (:func:`generate_problems`,
  :func:`run_make_synthetic`): short arithmetic word problems whose gold answer is a worked solution ending in
  ``#### N``, with tunable difficulty (number of operations, operand ranges).

"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from pgrpo.errors import InputError, one_line
from pgrpo.grpo.chat import check_prompt_template, use_chat_template

#: Plain-text prompt shared by the warm start, GRPO and evaluation. The completion continues after ``Answer:``.
PROMPT_TEMPLATE = "Question: {question}\nAnswer:"


#: Suggested template for chat models (paper setting): asks for the GSM8K-style final line.
CHAT_PROMPT_TEMPLATE = (
    "{question}\nSolve the problem step by step. Give the final answer on the last line as '#### <number>'."
)


def format_prompt(question: str, template: str = PROMPT_TEMPLATE) -> str:
    """Fill the prompt template with a question (the template must contain ``{question}``)."""
    return template.replace("{question}", question.strip())


def make_prompt(question: str, template: str = PROMPT_TEMPLATE, chat: bool = False) -> str | list[dict[str, str]]:
    """The ``prompt`` value of one row: a string, or a one-message conversation when ``chat`` is set.

    A conversation is what TRL's GRPOTrainer renders with the tokenizer's chat template itself (no doubled BOS);
    :func:`prompt_text` renders either form to the exact text a generator should continue.
    """
    text = format_prompt(question, template)
    return [{"role": "user", "content": text}] if chat else text


def prompt_text(prompt: str | list[dict[str, str]], tokenizer: Any = None) -> str:
    """Render a ``prompt`` value (string or conversation) to text; conversations need a chat-template tokenizer.

    Tokenize the result with ``add_special_tokens=False`` when it came from a chat template (the template already
    contains any BOS), and with the tokenizer's defaults when it is a plain string.
    """
    if isinstance(prompt, str):
        return prompt
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise InputError("a conversational prompt needs a tokenizer with a chat template (set chat_template: false)")
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


LOCAL_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def _use_chat_template(spec: dict, role: str, tokenizer: Any) -> bool:
    return use_chat_template(spec.get("chat_template", False), tokenizer, f"data.{role}")


def load_table(spec: dict, where: str, default_split: str = "train", streaming: bool = False):
    """The source table of a dataset spec as a ``datasets.Dataset`` and a description of its source (path
    overrides id), or an InputError in one line whose config key starts with ``where`` (``data.train``,
    ``benchmarks.math-500``).

    ``streaming``: a ``datasets.IterableDataset`` instead, which reads only the requested split's files as it is
    iterated (``load_dataset(..., split=...)`` without it downloads and prepares every split of a hub dataset:
    OpenMathInstruct-2's 22M rows to sample 2,000 of ``train_1M``). A saved dataset directory is read as is.
    """
    import datasets

    path, hub_id = spec.get("path"), spec.get("id")
    split = spec.get("split") or default_split
    if path:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{where}.path: no such file or directory: {path}")
        try:
            if p.is_dir():
                loaded = datasets.load_from_disk(str(p))
                if isinstance(loaded, datasets.DatasetDict):
                    if split not in loaded:
                        raise InputError(
                            f"{where}.split: split {split!r} not in {path} (has {sorted(loaded.keys())})"
                        )
                    loaded = loaded[split]
                return loaded, str(p)
            fmt = LOCAL_FORMATS.get(p.suffix.lower())
            if fmt is None:
                raise InputError(
                    f"{where}.path: unsupported file type {p.suffix!r} in {path} "
                    f"(use {', '.join(LOCAL_FORMATS)} or a saved dataset directory)"
                )
            return datasets.load_dataset(fmt, data_files=str(p), split="train", streaming=streaming), str(p)
        except InputError:
            raise
        except Exception as exc:  # unreadable / malformed file
            raise InputError(f"{where}.path: cannot read {path}: {one_line(exc)}") from None
    if not hub_id:
        raise InputError(f"{where}: set either 'path' (a local file) or 'id' (a Hugging Face dataset)")
    config = spec.get("config")
    try:
        loaded = datasets.load_dataset(hub_id, config, split=split, streaming=streaming)
    except Exception as exc:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        hint = " (HF_HUB_OFFLINE is set and it is not cached)" if offline else ""
        raise InputError(
            f"{where}.id: cannot load dataset {hub_id!r} (config {config!r}, split {split!r}){hint}: "
            f"{one_line(exc)}; set {where}.path to a local copy"
        ) from None
    return loaded, f"{hub_id}[{config or ''}:{split}]"


def subsample_indices(n_rows: int, max_examples: int | None, seed: int = 0) -> list[int]:
    """Deterministic subsample: ``max_examples`` indices drawn without replacement with ``seed``, in source order."""
    if max_examples is None or max_examples >= n_rows:
        return list(range(n_rows))
    chosen = random.Random(seed).sample(range(n_rows), max_examples)
    return sorted(chosen)


def load_problems(spec: dict, role: str = "train", tokenizer: Any = None):
    """Load a problem set as a ``datasets.Dataset`` with columns ``prompt`` and ``answer``.

    ``spec`` keys (the ``data.<role>`` config section): ``path`` (local file/dir; overrides ``id``), ``id``,
    ``config``, ``split``, ``question_field`` (default ``question``), ``answer_field`` (default ``answer``),
    ``max_examples`` (deterministic subsample, seed ``subsample_seed`` default 0), ``prompt_template`` (default
    :data:`PROMPT_TEMPLATE`), ``chat_template`` (false | true | auto: make ``prompt`` a one-message conversation that
    the tokenizer's chat template renders). ``answer`` is the gold text as in the source (GSM8K: ``... #### N``).
    """
    if role not in ("train", "eval", "test", "sft", "val"):
        raise InputError(f"data: unknown role {role!r} (use train or eval)")
    qf = spec.get("question_field") or "question"
    af = spec.get("answer_field") or "answer"
    template = spec.get("prompt_template") or PROMPT_TEMPLATE
    check_prompt_template(f"data.{role}", template)
    max_examples = spec.get("max_examples")
    if max_examples is not None and (not isinstance(max_examples, int) or max_examples < 1):
        raise InputError(f"data.{role}.max_examples must be a positive integer or null, got {max_examples!r}")
    chat = _use_chat_template(spec, role, tokenizer)

    raw, source = load_table(spec, f"data.{role}")
    columns = list(raw.column_names)
    for key, field in (("question_field", qf), ("answer_field", af)):
        if field not in columns:
            raise InputError(
                f"data.{role}.{key}: column {field!r} not in {source} (available: {', '.join(columns)})"
            )
    if len(raw) == 0:
        raise InputError(f"data.{role}: {source} has no rows")
    keep = subsample_indices(len(raw), max_examples, int(spec.get("subsample_seed", 0)))
    if len(keep) < len(raw):
        raw = raw.select(keep)
    raw = raw.select_columns([qf, af])

    import datasets

    questions = [str(q) for q in raw[qf]]
    answers = [str(a) for a in raw[af]]
    return datasets.Dataset.from_dict(
        {"prompt": [make_prompt(q, template, chat) for q in questions], "answer": answers}
    )


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Rows of a JSON-lines file (used for the shipped synthetic data)."""
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]
