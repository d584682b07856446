"""Problems for GRPO: GSM8K by hub id or local path, and the shipped synthetic GSM8K-style data.

Section 4.2 trains on the GSM8K training split (Cobbe et al., 2021) and Section 4.3 evaluates on held-out
problems; both use a binary reward on the parsed final answer (see :mod:`pgrpo.rewards`). This module

- loads a problem set by hub ``id`` (+ ``config``, ``split``) through ``datasets.load_dataset`` or by a local
  ``path`` (jsonl/json/parquet/csv file or a ``save_to_disk`` directory), the path overriding the id so that offline
  clusters can point at a local copy;
- turns each problem into the ONE prompt used by the warm start (:mod:`pgrpo.tiny`), GRPO and evaluation
  (:func:`format_prompt`), keeping the gold ``answer`` text as in the source (``... #### N``);
- generates the embedded default's synthetic GSM8K-style problems (:func:`generate_problems`,
  :func:`run_make_synthetic`): short arithmetic word problems whose gold answer is a worked solution ending in
  ``#### N``, with tunable difficulty (number of operations, operand ranges).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from pgrpo.atomic import atomic_dir, write_json
from pgrpo.errors import InputError, one_line

# ---------------------------------------------------------------------------------------------------------------
# The one prompt template
# ---------------------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------------------
# Loading by hub id or local path
# ---------------------------------------------------------------------------------------------------------------

LOCAL_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def _use_chat_template(spec: dict, role: str, tokenizer: Any) -> bool:
    setting = spec.get("chat_template", False)
    if setting in (False, None, "false"):
        return False
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting == "auto":
        return has_template
    if setting in (True, "true"):
        if not has_template:
            raise InputError(
                f"data.{role}.chat_template is true but the model's tokenizer has no chat template "
                "(set it to false or auto)"
            )
        return True
    raise InputError(f"data.{role}.chat_template must be true, false or auto, got {setting!r}")


def load_table(spec: dict, where: str, default_split: str = "train"):
    """The source table of a dataset spec as a ``datasets.Dataset`` and a description of its source (path
    overrides id), or an InputError in one line whose config key starts with ``where`` (``data.train``,
    ``benchmarks.math-500``)."""
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
            return datasets.load_dataset(fmt, data_files=str(p), split="train"), str(p)
        except InputError:
            raise
        except Exception as exc:  # unreadable / malformed file
            raise InputError(f"{where}.path: cannot read {path}: {one_line(exc)}") from None
    if not hub_id:
        raise InputError(f"{where}: set either 'path' (a local file) or 'id' (a Hugging Face dataset)")
    config = spec.get("config")
    try:
        loaded = datasets.load_dataset(hub_id, config, split=split)
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
    if "{question}" not in template:
        raise InputError(f"data.{role}.prompt_template must contain '{{question}}', got {template!r}")
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


# ---------------------------------------------------------------------------------------------------------------
# Synthetic GSM8K-style problems (the embedded default)
# ---------------------------------------------------------------------------------------------------------------

NAMES = [
    ("Ann", "she"), ("Ben", "he"), ("Cara", "she"), ("Dan", "he"), ("Eve", "she"), ("Finn", "he"),
    ("Gail", "she"), ("Hugo", "he"), ("Iris", "she"), ("Jack", "he"), ("Kim", "she"), ("Leo", "he"),
    ("Mia", "she"), ("Ned", "he"), ("Olga", "she"), ("Paul", "he"), ("Rosa", "she"), ("Sam", "he"),
    ("Tina", "she"), ("Victor", "he"),
]
ITEMS = ["apples", "books", "coins", "pens", "marbles", "stickers", "cards", "shells", "eggs", "cookies",
         "stamps", "toys", "beads", "plums", "rocks", "cups"]
PHRASES = {
    "add": ["{p} buys {k} more.", "{p} finds {k} more.", "{p} gets {k} more.", "{p} wins {k} more."],
    "sub": ["{p} gives away {k}.", "{p} loses {k}.", "{p} sells {k}.", "{p} eats {k}."],
    "mul": ["{p} then has {k} times as many.", "{p} makes the pile {k} times as big."],
}
SYMBOL = {"add": "+", "sub": "-", "mul": "*"}

DEFAULT_SYNTHETIC: dict[str, Any] = {
    "seed": 1234,
    "sizes": {"sft": 20000, "val": 200, "train": 4000, "test": 500, "ood": 300},
    "difficulty": {"min_ops": 1, "max_ops": 2, "start_max": 20, "operand_max": 10, "mul_max": 3,
                   "ops": ["add", "sub", "mul"]},
    # the out-of-distribution benchmark of the embedded default (Table 1's role): one more operation than
    # training ever shows; keys not given here are taken from `difficulty`
    "ood_difficulty": {"min_ops": 3, "max_ops": 3},
}


@dataclass(frozen=True)
class Problem:
    """One synthetic problem: the question text, the gold worked solution (``... #### N``) and its parts."""

    question: str
    answer: str
    start: int
    steps: tuple[tuple[str, int], ...]  # (operation, operand)
    result: int


def apply_op(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    raise InputError(f"synthetic.difficulty.ops: unknown operation {op!r} (use add, sub, mul)")


def _check_difficulty(d: dict) -> None:
    for key in ("min_ops", "max_ops", "start_max", "operand_max", "mul_max"):
        if not isinstance(d.get(key), int) or d[key] < 1:
            raise InputError(f"synthetic.difficulty.{key} must be a positive integer, got {d.get(key)!r}")
    if d["min_ops"] > d["max_ops"]:
        raise InputError(f"synthetic.difficulty.max_ops ({d['max_ops']}) is below min_ops ({d['min_ops']})")
    if d["mul_max"] < 2 and "mul" in d["ops"]:
        raise InputError("synthetic.difficulty.mul_max must be at least 2 when 'mul' is among the ops")
    if not d["ops"] or any(op not in SYMBOL for op in d["ops"]):
        raise InputError(f"synthetic.difficulty.ops must be a non-empty subset of {list(SYMBOL)}, got {d['ops']!r}")


def sample_problem(rng: random.Random, difficulty: dict) -> Problem:
    """Draw one problem. Quantities stay non-negative: a subtraction never takes more than there is."""
    name, pronoun = rng.choice(NAMES)
    items = rng.choice(ITEMS)
    start = rng.randint(1, difficulty["start_max"])
    n_ops = rng.randint(difficulty["min_ops"], difficulty["max_ops"])
    value, steps, sentences, lines = start, [], [], []
    for _ in range(n_ops):
        ops = [op for op in difficulty["ops"] if not (op == "sub" and value < 1)]
        op = rng.choice(ops)
        if op == "add":
            k = rng.randint(1, difficulty["operand_max"])
        elif op == "sub":
            k = rng.randint(1, min(value, difficulty["operand_max"]))
        else:
            k = rng.randint(2, difficulty["mul_max"])
        new = apply_op(op, value, k)
        sentences.append(rng.choice(PHRASES[op]).format(p=pronoun.capitalize(), k=k))
        lines.append(f"{value}{SYMBOL[op]}{k}={new}")
        steps.append((op, k))
        value = new
    question = f"{name} has {start} {items}. " + " ".join(sentences) + f" How many {items} does {name} have?"
    answer = "\n".join(lines) + f"\n#### {value}"
    return Problem(question=question, answer=answer, start=start, steps=tuple(steps), result=value)


def synthetic_settings(cfg: dict | None) -> dict:
    """The ``synthetic:`` config merged over :data:`DEFAULT_SYNTHETIC` (one level deep), validated."""
    cfg = cfg or {}
    merged = {
        "seed": cfg.get("seed", DEFAULT_SYNTHETIC["seed"]),
        "sizes": {**DEFAULT_SYNTHETIC["sizes"], **(cfg.get("sizes") or {})},
        "difficulty": {**DEFAULT_SYNTHETIC["difficulty"], **(cfg.get("difficulty") or {})},
    }
    merged["ood_difficulty"] = {**merged["difficulty"], **DEFAULT_SYNTHETIC["ood_difficulty"],
                                **(cfg.get("ood_difficulty") or {})}
    if not isinstance(merged["seed"], int):
        raise InputError(f"synthetic.seed must be an integer, got {merged['seed']!r}")
    unknown = set(cfg) - set(DEFAULT_SYNTHETIC)
    if unknown:
        raise InputError(f"synthetic: unknown key(s) {sorted(unknown)} (known: {sorted(DEFAULT_SYNTHETIC)})")
    for split, n in merged["sizes"].items():
        if split not in DEFAULT_SYNTHETIC["sizes"]:
            raise InputError(f"synthetic.sizes.{split}: unknown split (use {', '.join(DEFAULT_SYNTHETIC['sizes'])})")
        if not isinstance(n, int) or n < 0:
            raise InputError(f"synthetic.sizes.{split} must be a non-negative integer, got {n!r}")
    _check_difficulty(merged["difficulty"])
    _check_difficulty(merged["ood_difficulty"])
    return merged


def generate_problems(n: int, difficulty: dict, seed: int, exclude: Iterable[str] = ()) -> list[Problem]:
    """``n`` distinct problems (by question text), none of whose questions is in ``exclude``; deterministic in seed."""
    _check_difficulty(difficulty)
    rng = random.Random(seed)
    seen = set(exclude)
    out: list[Problem] = []
    misses, max_misses = 0, 5000  # consecutive duplicates before declaring the problem space exhausted
    while len(out) < n:
        if misses > max_misses:
            raise InputError(
                f"synthetic: only {len(out)} distinct problems of the {n} asked for at this difficulty; "
                "lower synthetic.sizes or widen synthetic.difficulty"
            )
        p = sample_problem(rng, difficulty)
        if p.question in seen:
            misses += 1
            continue
        misses = 0
        seen.add(p.question)
        out.append(p)
    return out


def make_splits(cfg: dict | None) -> dict[str, list[Problem]]:
    """Disjoint splits ``test``, ``val``, ``train``, ``sft`` (drawn in that order, each excluding the previous), and
    ``ood``: held-out problems of ``ood_difficulty`` (one more operation than training sees, by default)."""
    s = synthetic_settings(cfg)
    splits: dict[str, list[Problem]] = {}
    seen: set[str] = set()
    for offset, split in enumerate(("test", "val", "train", "sft", "ood")):
        difficulty = s["ood_difficulty"] if split == "ood" else s["difficulty"]
        probs = generate_problems(s["sizes"][split], difficulty, seed=s["seed"] * 1000 + offset, exclude=seen)
        seen.update(p.question for p in probs)
        splits[split] = probs
    return splits


def run_make_synthetic(out_dir: str, cfg: dict | None = None) -> dict[str, int]:
    """Write ``sft.jsonl`` (warm start), ``val.jsonl`` (warm-start check), ``train.jsonl`` (GRPO prompts),
    ``test.jsonl`` (held-out eval) and ``ood.jsonl`` (a harder out-of-distribution benchmark), pairwise disjoint
    by question, each row ``{"question", "answer"}`` with a
    GSM8K-style worked solution ending in ``#### N``, plus ``meta.json`` (settings and counts). The directory
    appears whole or not at all. Returns the row counts."""
    settings = synthetic_settings(cfg)
    splits = make_splits(settings)
    counts = {k: len(v) for k, v in splits.items()}
    with atomic_dir(out_dir) as tmp:
        for split, probs in splits.items():
            with open(tmp / f"{split}.jsonl", "w") as fh:
                for p in probs:
                    fh.write(json.dumps({"question": p.question, "answer": p.answer}) + "\n")
        write_json(tmp / "meta.json", {"settings": settings, "counts": counts, "prompt_template": PROMPT_TEMPLATE})
    return counts


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Rows of a JSON-lines file (used for the shipped synthetic data)."""
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]
