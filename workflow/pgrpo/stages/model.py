"""Stages of the model rule group: ``make_synthetic_data`` (the default's data), ``make_synthetic_suite`` (the graded
benchmarks of Table 1's role on the default, Section 5.7) and ``build_tiny_model`` (the default's tokenizer and
model, warm-started), each written atomically.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from pgrpo.atomic import atomic_dir, write_json
from pgrpo.errors import InputError
from pgrpo.grpo.chat import check_prompt_template
from pgrpo.grpo.data import PROMPT_TEMPLATE, format_prompt, read_jsonl
from pgrpo.grpo.synthetic import (
    TRAINING_SPLITS,
    make_splits,
    make_suite,
    signature_of_answer,
    suite_seed,
    synthetic_settings,
)
from pgrpo.grpo.tiny_model import (
    build_model,
    build_tokenizer,
    completion_target,
    count_parameters,
    measure_accuracy,
    tiny_settings,
    warm_start,
)


def run_make_synthetic(out_dir: str, cfg: dict | None = None) -> dict[str, int]:
    """Write ``sft.jsonl`` (warm start), ``val.jsonl`` (warm-start check), ``train.jsonl`` (GRPO prompts),
    ``test.jsonl`` (held-out eval) and ``ood.jsonl`` (a harder out-of-distribution benchmark), pairwise disjoint
    by question, each row ``{"question", "answer"}`` with a
    GSM8K-style worked solution ending in ``#### N``, plus ``meta.json`` (settings and counts). The directory
    appears whole or not at all. Returns the row counts."""
    settings = synthetic_settings(cfg)
    settings.pop("suite")  # the graded sets are another stage's (run_make_suite): they never touch these files
    splits = make_splits(settings)
    counts = {k: len(v) for k, v in splits.items()}
    with atomic_dir(out_dir) as tmp:
        for split, probs in splits.items():
            _write_problems(tmp / f"{split}.jsonl", probs)
        write_json(tmp / "meta.json", {"settings": settings, "counts": counts, "prompt_template": PROMPT_TEMPLATE})
    return counts


def _write_problems(path: Path, problems) -> None:
    with open(path, "w") as fh:
        fh.writelines(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in problems)


SPLITS = ("test", "val", "train", "sft", "ood")


def run_make_suite(data_dir: str, out_dir: str, cfg: dict | None = None) -> dict[str, int]:
    """Write the graded sets of ``synthetic.suite`` as ``{name}.jsonl`` (rows ``{"question", "answer"}``) and
    ``meta.json`` (each set's settings, seed and count) into ``out_dir``, which appears whole or not at all.

    Reads the splits written by :func:`run_make_synthetic` from ``data_dir``: no graded question (without its
    distractor sentences) is one of theirs, and a ``held_out_mix`` set has no sequence of operations that the
    training splits (sft, val, train) contain. The splits themselves are not touched. Returns the row counts.
    """
    settings = synthetic_settings(cfg)
    data = Path(data_dir)
    paths = {split: data / f"{split}.jsonl" for split in SPLITS}
    rows = {split: _read_rows(path) if _require_file(path, "synthetic suite data_dir").stat().st_size else []
            for split, path in paths.items() if split in TRAINING_SPLITS or path.is_file()}
    exclude = {r["question"] for split_rows in rows.values() for r in split_rows}
    signatures = {signature_of_answer(r["answer"]) for split in TRAINING_SPLITS for r in rows[split]}
    suite = make_suite(settings, exclude=exclude, training_signatures=signatures)
    counts = {name: len(problems) for name, problems in suite.items()}
    with atomic_dir(out_dir) as tmp:
        for name, problems in suite.items():
            _write_problems(tmp / f"{name}.jsonl", problems)
        write_json(tmp / "meta.json", {
            "sets": {name: {**entry, "seed": suite_seed(settings["seed"], name)}
                     for name, entry in settings["suite"].items()},
            "counts": counts, "excluded_questions": len(exclude), "splits_read": sorted(rows),
            "training_signatures": sorted("-".join(sig) for sig in signatures), "prompt_template": PROMPT_TEMPLATE,
        })
    return counts


def _require_file(path: Path, key: str) -> Path:
    if not path.is_file():
        raise InputError(f"{key}: no such file: {path} (run the synthetic-data stage first)")
    return path


def _read_rows(path: Path) -> list[dict]:
    """Rows of a synthetic-data file, each checked for ``question`` and ``answer`` before any work starts."""
    try:
        rows = read_jsonl(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a JSON-lines file ({exc})") from None
    if not rows:
        raise InputError(f"{path}: no rows")
    for i, r in enumerate(rows):
        missing = [f for f in ("question", "answer") if not isinstance(r, dict) or f not in r]
        if missing:
            has = sorted(r) if isinstance(r, dict) else r
            raise InputError(f"{path}: row {i + 1} has no {missing[0]!r} field (has {has!r})")
    return rows


def run_build_tiny(data_dir: str, out_dir: str, cfg: dict | None = None, seed: int | None = None,
                   prompt_template: str = PROMPT_TEMPLATE) -> dict:
    """Build, warm-start and save the tiny model from the synthetic data in ``data_dir``.

    Reads ``sft.jsonl`` (warm start, tokenizer corpus), ``val.jsonl`` (warm-start checks; optional) and
    ``test.jsonl`` (held-out accuracy). Writes into ``out_dir``, which appears whole or not at all: the model
    (``config.json``, ``model.safetensors``, ``generation_config.json``) and tokenizer via ``save_pretrained``, and
    ``warmstart.json`` with the parameter count, the held-out accuracy under sampling at ``tiny.eval.temperature``
    and greedy, the warm-start history and timings. Returns the ``warmstart.json`` record.
    ``prompt_template`` must be the one GRPO and evaluation use (``data.prompt_template``); ``seed`` (initialisation,
    batch order, sampling) defaults to ``tiny.seed``.
    """
    settings = tiny_settings(cfg)
    seed = int(settings["seed"] if seed is None else seed)
    check_prompt_template("data", prompt_template)
    data = Path(data_dir)
    sft_path = _require_file(data / "sft.jsonl", "tiny data_dir")
    test_path = _require_file(data / "test.jsonl", "tiny data_dir")
    val_path = data / "val.jsonl"
    threads = int(settings["threads"])

    import torch

    torch.set_num_threads(threads)
    t_start = time.perf_counter()
    sft_rows = _read_rows(sft_path)
    test_rows = _read_rows(test_path)[: settings["eval"]["examples"]]
    val_rows = _read_rows(val_path)[: settings["warmstart"]["val_examples"]] if val_path.is_file() else []
    template = prompt_template

    corpus = [format_prompt(r["question"], template) + completion_target(r["answer"]) for r in sft_rows]
    tokenizer = build_tokenizer(corpus, settings["tokenizer"]["vocab_size"])
    t_tok = time.perf_counter() - t_start
    model = build_model(tokenizer, settings["architecture"], seed=seed)
    ws = warm_start(model, tokenizer, sft_rows, val_rows, settings, seed=seed, template=template)
    ev = settings["eval"]
    acc = measure_accuracy(model, tokenizer, test_rows, temperature=ev["temperature"],
                           max_new_tokens=ev["max_new_tokens"], template=template,
                           batch_size=ev["batch_size"], seed=seed + 10_000)
    record = {
        "parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
        "seed": seed,
        "heldout": asdict(acc),
        "warmstart": {"steps": ws["steps"], "seconds": ws["seconds"], "history": ws["history"]},
        "seconds": {"tokenizer": t_tok, "warmstart": ws["seconds"], "eval": acc.seconds,
                    "total": time.perf_counter() - t_start},
        "settings": settings,
        "prompt_template": template,
        "threads": threads,
    }
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_json(tmp / "warmstart.json", record)
    return record
