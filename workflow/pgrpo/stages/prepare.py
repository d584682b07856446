"""Stage ``prepare_benchmark``, once per benchmark: read it (hub id, streamed where the split is large, or a local
``path``), screen and subsample it with the evaluation seed, and write the problems every evaluation job reads.

Without this stage each of the (1 + |G| x |seeds|) x |models| evaluation jobs of a benchmark would load it from the
hub itself, all at once on one cache, and ``load_dataset(id, split=...)`` prepares every split of a dataset (about
22M rows of OpenMathInstruct-2 to sample 2,000 of ``train_1M``; NuminaMath's whole train split for its 100 test
rows). Here one job per benchmark reads only its split and writes

- ``{out}.jsonl``: one line per kept problem, the canonical fields ``index`` (row number in the source split),
  ``question`` and ``gold`` (the final answer read from ``answer_field`` by ``answer_format``);
- ``{out}.meta.json`` beside it: the source, rows read, rows kept, rows skipped by reason (``no_gold``: no final
  answer in the field, e.g. GSM-Plus's "critical thinking" items whose gold is ``None``; ``proof`` with
  ``exclude_proofs``), the seed and the benchmark spec.

With ``path:`` set (offline clusters) nothing is downloaded: the local file is validated and converted the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

from pgrpo.atomic import atomic_path, write_json
from pgrpo.errors import InputError
from pgrpo.grpo.benchmarks import BenchmarkProblems, load_benchmark, resolve_benchmark

#: The fields of one line of a prepared benchmark file.
PREPARED_FIELDS: tuple[str, ...] = ("index", "question", "gold")


def meta_path(prepared: str | Path) -> Path:
    """``results/data/benchmarks/x.jsonl`` -> ``results/data/benchmarks/x.meta.json``."""
    p = Path(prepared)
    return p.with_name(p.name[: -len(".jsonl")] + ".meta.json" if p.name.endswith(".jsonl") else p.name + ".meta.json")


def run_prepare_benchmark(name: str, benchmark: dict, out_jsonl: str, seed: int = 0) -> dict:
    """Prepare one benchmark (see the module docstring); returns the meta record. InputError names the key."""
    spec = resolve_benchmark(name, benchmark)
    problems = load_benchmark(name, spec, seed=seed)
    with atomic_path(out_jsonl) as tmp, open(tmp, "w") as handle:
        for index, question, gold in zip(problems.indices, problems.questions, problems.golds):
            handle.write(json.dumps({"index": index, "question": question, "gold": gold}) + "\n")
    record = {
        "benchmark": name,
        "source": problems.source,
        "n_source": problems.n_source,
        "n_problems": len(problems.questions),
        "excluded": problems.excluded,
        "seed": seed,
        "spec": spec,
        "fields": list(PREPARED_FIELDS),
    }
    write_json(meta_path(out_jsonl), record)
    return record


def read_prepared(path: str, name: str) -> BenchmarkProblems:
    """The problems of a prepared benchmark file (and its ``.meta.json`` when present); errors name the file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"benchmarks.{name}: no prepared file {path} (run rule prepare_benchmark first)")
    indices, questions, golds = [], [], []
    with open(p) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}: line {number} is not JSON ({error.msg})") from None
            missing = [f for f in PREPARED_FIELDS if not isinstance(row, dict) or f not in row]
            if missing:
                raise InputError(f"{path}: line {number} has no {missing[0]!r} field (a prepared benchmark has "
                                 f"{', '.join(PREPARED_FIELDS)})")
            indices.append(int(row["index"]))
            questions.append(str(row["question"]))
            golds.append(str(row["gold"]))
    if not questions:
        raise InputError(f"{path}: no problems")
    meta = {}
    if meta_path(p).is_file():
        meta = json.loads(meta_path(p).read_text())
    return BenchmarkProblems(
        name=name, source=str(meta.get("source", path)), questions=tuple(questions), golds=tuple(golds),
        indices=tuple(indices), n_source=int(meta.get("n_source", len(questions))),
        excluded=dict(meta.get("excluded", {})),
    )
