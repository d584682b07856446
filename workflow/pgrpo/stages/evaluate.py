"""Stages ``evaluate`` per (model, variant, benchmark), ``table1`` and ``passk_curves``: pass@k of one variant on one
benchmark, Table 1 from all of them (Section 4.3, 5.7), and the pass@k curve (k = 1..n, the unbiased estimator)
of each from its per-problem correct counts.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Sequence

from pgrpo.atomic import atomic_path, read_json, write_csv, write_json, write_text
from pgrpo.errors import InputError, one_line
from pgrpo.grpo.benchmarks import ANSWER_KINDS, load_benchmark, resolve_benchmark
from pgrpo.grpo.chat import stop_token_ids, use_chat_template
from pgrpo.grpo.generation import (
    choose_backend,
    generate_transformers,
    generate_vllm,
    prompt_settings,
    resolve_evaluation,
    tokenize_prompts,
    torch_dtype,
    versions,
    vllm_available,
    vllm_cpu_build,
)
from pgrpo.grpo.pass_at_k import PASS_AT_K_KEY, benchmark_pass_at_k, pass_at_k_curve
from pgrpo.grpo.training_config import ALLOW_NO_CUDA_ENV
from pgrpo.tables.table1 import Table1, build_table1, table1_html, table1_latex, table1_markdown, table1_summary


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


def run_evaluate(model: dict, variant_path: str | None, benchmark_name: str, benchmark: dict, evaluation: dict,
                 out_json: str, out_samples_jsonl: str | None = None, seed: int = 0,
                 prepared: str | None = None) -> dict:
    """Evaluate one (model, variant, benchmark): pass@k for every k of ``evaluation.pass_at``.

    ``model`` = the config's model spec {name, id, path}; ``variant_path`` = a merged model directory
    (``results/train/{model}/G{G}/seed{seed}/merged``) or None for the base model; ``benchmark`` = the
    ``benchmarks.<benchmark_name>`` entry; ``evaluation`` = the ``evaluation:`` section; ``seed`` = the subsampling
    and sampling seed (the same for every variant, so all see the same problems; ``evaluation.seed`` is the usual
    value). Writes ``out_json`` = {model, variant, G, seed, benchmark, n_problems, n_excluded, excluded, n_source,
    num_samples, pass@1, pass@5, ..., correct_counts (per problem), stderr, temperature, top_p, max_new_tokens,
    backend, ...} and, if given,
    ``out_samples_jsonl`` (one line per problem: index, question, gold, completions, correct, n_correct).
    ``prepared``: the benchmark's file from rule ``prepare_benchmark`` (:mod:`pgrpo.stages.prepare`), read instead
    of the benchmark's source. Prompts use the benchmark's ``prompt_template``/``chat_template`` when set, else the
    evaluation section's; generation stops at the model's eos and, with a chat template, its end-of-turn token.
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
    if prepared:
        from pgrpo.stages.prepare import read_prepared

        problems = read_prepared(prepared, benchmark_name)
    else:
        problems = load_benchmark(benchmark_name, benchmark, seed=seed)
    template, chat_setting, chat_where = prompt_settings(dict(benchmark or {}, name=benchmark_name), settings)

    import torch

    torch.set_num_threads(int(settings["resources"]["threads"]))
    cuda = torch.cuda.is_available()
    gpus = int(settings["resources"]["gpus"])
    if gpus > 0 and not cuda and os.environ.get(ALLOW_NO_CUDA_ENV) != "1":
        raise InputError(f"evaluation.resources.gpus: the job asks for {gpus} GPU(s) but torch sees no CUDA device "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): it would "
                         f"generate on the CPU; {ALLOW_NO_CUDA_ENV}=1 allows that for a CPU test only")
    backend = choose_backend(settings["backend"], cuda, vllm_available(), cpu_vllm=vllm_cpu_build())
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
        prompt_ids = tokenize_prompts(problems.questions, tokenizer, template, chat_setting, chat_where)
        chat = use_chat_template(chat_setting, tokenizer, chat_where)
        stops = stop_token_ids(tokenizer, None, chat)
        dtype = "auto" if settings["dtype"] == "auto" else settings["dtype"]
        t_gen = time.perf_counter()
        samples = generate_vllm(str(source), prompt_ids, dtype=dtype, gpus=settings["resources"]["gpus"],
                                gpu_memory_utilization=settings["vllm_gpu_memory_utilization"], stop_ids=stops,
                                indices=problems.indices,
                                max_model_len=max(map(len, prompt_ids)) + settings["max_new_tokens"], **gen)
        device = "cuda" if cuda else "cpu"
    else:
        from pgrpo.grpo.models import load_model_and_tokenizer

        device = "cuda" if cuda else "cpu"
        policy, tokenizer = load_model_and_tokenizer(spec, dtype=torch_dtype(settings["dtype"], cuda))
        policy.to(device)
        prompt_ids = tokenize_prompts(problems.questions, tokenizer, template, chat_setting, chat_where)
        chat = use_chat_template(chat_setting, tokenizer, chat_where)
        stops = stop_token_ids(tokenizer, getattr(policy.generation_config, "eos_token_id", None), chat)
        t_gen = time.perf_counter()
        samples = generate_transformers(policy, tokenizer, prompt_ids, batch_size=settings["batch_size"],
                                        device=device, desc=desc, stop_ids=stops, **gen)
    t_score = time.perf_counter()

    from pgrpo.grpo.rewards import is_correct

    kind = ANSWER_KINDS[resolve_benchmark(benchmark_name, benchmark)["answer_format"]]
    correct = [[bool(is_correct(text, gold, kind)) for text in texts]
               for texts, gold in zip(samples.texts, problems.golds)]
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
    record["correct_counts"] = counts  # per problem, in the order of the samples file: pass@k for any k <= n
    record.update({
        "stderr": {f"pass@{k}": r.stderr for k, r in results.items()},
        "temperature": float(settings["temperature"]),
        "top_p": float(settings["top_p"]),
        "max_new_tokens": settings["max_new_tokens"],
        "backend": backend,
        "device": device,
        "eval_seed": seed,
        "prompt_template": template,
        "chat_template": chat_setting,
        "chat_template_used": chat,
        "stop_token_ids": stops,
        "mean_completion_tokens": sum(all_tokens) / max(1, len(all_tokens)),
        "truncated_fraction": sum(all_truncated) / max(1, len(all_truncated)),
        "source": problems.source,
        "model_source": str(source),
        "seconds": {"load": t_gen - t_load, "generate": t_score - t_gen, "score": time.perf_counter() - t_score,
                    "total": time.perf_counter() - t_start},
        "versions": versions(),
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


LONG_COLUMNS = ["model", "variant", "G", "seed", "benchmark", "metric", "value", "n_problems", "num_samples"]


def _read_eval_json(path: str) -> dict:
    record = read_json(path, "eval JSON")
    for key in ("model", "variant", "benchmark", "n_problems", "num_samples"):
        if key not in record:
            raise InputError(f"eval JSON {path}: missing key {key!r}")
    if not any(PASS_AT_K_KEY.match(k) for k in record):
        raise InputError(f"eval JSON {path}: no pass@k value")
    if record["variant"] != "base":
        m = re.fullmatch(r"G(\d+)_seed(\d+)", str(record["variant"]))
        if not m:
            raise InputError(f"eval JSON {path}: variant {record['variant']!r} is neither base nor G{{G}}_seed{{seed}}")
        record["G"], record["seed"] = int(m.group(1)), int(m.group(2))  # the variant name is the key
    else:
        record["G"], record["seed"] = None, None
    return record


def _read_eval_jsons(eval_jsons: Sequence[str], what: str) -> list[tuple[str, dict]]:
    """``(path, record)`` of every eval JSON (:func:`_read_eval_json`), refusing none at all (``what`` names the
    product) and the same model, variant and benchmark twice."""
    if not eval_jsons:
        raise InputError(f"{what}: no eval JSON files given")
    records, seen = [], {}
    for path in eval_jsons:
        r = _read_eval_json(path)
        key = (r["model"], r["variant"], r["benchmark"])
        if key in seen:
            raise InputError(f"eval JSON {path}: {'/'.join(map(str, key))} is also in {seen[key]}")
        seen[key] = path
        records.append((path, r))
    return records


def eval_records_frame(eval_jsons: Sequence[str]):
    """The long-format data of Table 1: one row per (eval JSON, pass@k), value as a fraction in [0, 1].

    Rejects duplicates (the same model, variant and benchmark twice) and evaluations of one (model, benchmark) that
    are not comparable (different problem counts, sample counts or temperatures across variants).
    """
    import pandas as pd

    rows, protocol = [], {}
    for path, r in _read_eval_jsons(eval_jsons, "table1"):
        proto = (int(r["n_problems"]), int(r["num_samples"]), r.get("temperature"))
        first = protocol.setdefault((r["model"], r["benchmark"]), (proto, path))
        if first[0] != proto:
            raise InputError(
                f"eval JSON {path}: (n_problems, num_samples, temperature) = {proto} differs from {first[0]} in {first[1]} "
                f"for {r['model']}/{r['benchmark']}"
            )
        for metric in sorted((k for k in r if PASS_AT_K_KEY.match(k)), key=lambda k: int(PASS_AT_K_KEY.match(k).group(1))):
            rows.append({"model": r["model"], "variant": r["variant"], "G": r["G"], "seed": r["seed"],
                         "benchmark": r["benchmark"], "metric": metric, "value": float(r[metric]),
                         "n_problems": int(r["n_problems"]), "num_samples": int(r["num_samples"])})
    frame = pd.DataFrame(rows, columns=LONG_COLUMNS)
    frame["G"] = frame["G"].astype("Int64")
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


def run_table1(eval_jsons: list[str], out_csv: str, out_md: str, out_tex: str, out_html: str | None = None,
               out_summary_csv: str | None = None) -> Table1:
    """Assemble Table 1 from per-(variant, benchmark) eval JSONs (written by :func:`run_evaluate`).

    Writes ``out_csv`` (long format: model, variant, G, seed, benchmark, metric, value as a fraction, n_problems,
    num_samples), ``out_md``, ``out_tex`` and ``out_html`` (rows benchmark x metric, benchmarks in the order of the
    JSONs, i.e. the config's; per model Base, then each G descending as mean ± s.d. over seeds in percent with 2
    decimals) and ``out_summary_csv`` (every cell: mean, s.d., n, base, delta, mark). Returns the table's numbers.
    """
    frame = eval_records_frame(eval_jsons)
    table = build_table1(frame)
    write_csv(out_csv, frame)
    write_text(out_md, table1_markdown(table))
    write_text(out_tex, table1_latex(table))
    if out_html:
        write_text(out_html, table1_html(table))
    if out_summary_csv:
        write_csv(out_summary_csv, table1_summary(table))
    return table


PASSK_COLUMNS = ["model", "variant", "column", "G", "seed", "benchmark", "k", "value", "n_problems", "num_samples"]


def _correct_counts(path: str, record: dict) -> list[int]:
    """A record's per-problem correct counts: its ``correct_counts``, else the ``n_correct`` of the samples file
    beside it (``{stem}.samples.jsonl``, as rule evaluate writes it)."""
    if "correct_counts" in record:
        return [int(c) for c in record["correct_counts"]]
    samples = Path(path).with_suffix(".samples.jsonl")
    if not samples.is_file():
        raise InputError(f"eval JSON {path}: no correct_counts and no samples file {samples}")
    try:
        return [int(json.loads(line)["n_correct"]) for line in samples.read_text().splitlines() if line.strip()]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"samples file {samples}: no n_correct per line ({one_line(exc)})") from None


def passk_curves_frame(eval_jsons: Sequence[str]):
    """The pass@k curve (k = 1..num_samples, unbiased estimator) of every (model, variant, benchmark), one row per k;
    ``column`` is Table 1's (Base, G=16, ...), value a fraction. Benchmarks keep the order of the JSONs."""
    import pandas as pd

    rows = []
    for path, r in _read_eval_jsons(eval_jsons, "pass@k curves"):
        counts, n = _correct_counts(path, r), int(r["num_samples"])
        if len(counts) != int(r["n_problems"]):
            raise InputError(f"eval JSON {path}: {len(counts)} correct counts for {r['n_problems']} problems")
        try:
            curve = pass_at_k_curve(counts, n)
        except ValueError as exc:
            raise InputError(f"eval JSON {path}: {exc}") from None
        column = "Base" if r["variant"] == "base" else f"G={r['G']}"
        rows += [{"model": r["model"], "variant": r["variant"], "column": column, "G": r["G"], "seed": r["seed"],
                  "benchmark": r["benchmark"], "k": k, "value": v, "n_problems": len(counts), "num_samples": n}
                 for k, v in enumerate(curve, start=1)]
    frame = pd.DataFrame(rows, columns=PASSK_COLUMNS)
    frame["G"] = frame["G"].astype("Int64")
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


def run_passk_curves(eval_jsons: Sequence[str], out_csv: str, out_pdf: str | None = None,
                     out_png: str | None = None):
    """The pass@k curves of Table 1's evaluations: ``out_csv`` (:func:`passk_curves_frame`) and the figure (one panel
    per benchmark, mean ± s.d. over seeds per Table 1 column). Returns the frame."""
    from pgrpo.figures.evaluation import passk_figure
    from pgrpo.figures.style import save_pdf_png

    frame = passk_curves_frame(eval_jsons)
    write_csv(out_csv, frame)
    if out_pdf or out_png:
        save_pdf_png(passk_figure(frame), out_pdf, out_png)
    return frame
