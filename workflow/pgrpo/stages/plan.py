"""Stage ``plan`` (``pgrpo plan --config FILE``): every training and evaluation job of a config's grid priced before
submission (:mod:`pgrpo.grpo.plan`), and the ``runtime`` each rule asks the scheduler for.

Dataset sizes come from ``num_rows`` in the config, or from the local file a ``path`` names (counted here, the only
place that reads it); model sizes from ``models.<name>.params_b``, or from a local model's safetensors header.
Nothing is downloaded.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from pgrpo.errors import InputError
from pgrpo.grpo.benchmarks import resolve_benchmark
from pgrpo.grpo.generation import resolve_evaluation
from pgrpo.grpo.plan import JobPlan, plan_evaluation, plan_training, resolve_plan
from pgrpo.grpo.training_config import eval_batch_size, resolve_training


@dataclass
class GridPlan:
    """The jobs of a grid, the plan settings they were priced with, and their totals."""

    jobs: list[JobPlan]
    settings: dict

    @property
    def gpu_hours(self) -> float:
        return sum(j.gpu_hours for j in self.jobs)

    def job(self, name: str) -> JobPlan:
        for j in self.jobs:
            if j.job == name:
                return j
        raise KeyError(name)


def count_rows(path: str) -> int | None:
    """Rows of a local table (jsonl/json lines, csv, parquet, saved dataset dir); None when it does not exist yet."""
    p = Path(path)
    if not p.exists():
        return None
    if p.is_dir():
        import datasets

        loaded = datasets.load_from_disk(str(p))
        return len(loaded) if not isinstance(loaded, datasets.DatasetDict) else None
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(str(p)).metadata.num_rows
    with open(p, "rb") as handle:
        lines = sum(1 for line in handle if line.strip())
    if suffix == ".csv":
        return max(0, lines - 1)
    if suffix == ".json" and p.read_bytes().lstrip().startswith(b"["):
        return len(json.loads(p.read_text()))
    return lines


def dataset_rows(spec: dict, where: str, synthetic_sizes: dict | None = None) -> int | None:
    """How many rows a dataset spec yields: ``num_rows`` or the local file's count, capped at ``max_examples``.

    A workflow-made synthetic file that does not exist yet counts as its ``synthetic.sizes`` entry.
    """
    n = spec.get("num_rows")
    if n is None and spec.get("path"):
        n = count_rows(spec["path"])
        name = Path(spec["path"]).stem
        if n is None and str(spec["path"]).startswith("results/data/synthetic/"):
            n = (synthetic_sizes or {}).get(name)
    cap = spec.get("max_examples")
    if n is None:
        return cap
    return min(n, cap) if cap else n


def params_from_safetensors(directory: str) -> float | None:
    """Billions of parameters of a saved model, read from its safetensors headers (no weights loaded)."""
    d = Path(directory)
    files = sorted(d.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with open(f, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        for key, entry in header.items():
            if key != "__metadata__":
                n = 1
                for dim in entry["shape"]:
                    n *= dim
                total += n
    return total / 1e9


def model_params_b(name: str, spec: dict) -> float:
    if spec.get("params_b"):
        return float(spec["params_b"])
    if spec.get("path"):
        found = params_from_safetensors(spec["path"])
        if found:
            return found
    raise InputError(f"models.{name}.params_b: the plan needs the model's size in billions of parameters")


def _mean_tokens(value, bound) -> float:
    return float(value) if value else float(bound)


def build_plan(config: dict) -> GridPlan:
    """Price every training job (model x G x seed) and evaluation job (model x variant x benchmark) of ``config``."""
    settings = resolve_plan(config.get("plan"))
    profile = settings["profile"]
    t = resolve_training(config.get("training"))
    evaluation = resolve_evaluation(config.get("evaluation"))
    sizes = (config.get("synthetic") or {}).get("sizes") or {}
    data = config.get("data") or {}
    n_train = dataset_rows(data.get("train") or {}, "data.train", sizes)
    n_eval = dataset_rows(data["eval"], "data.eval", sizes) if data.get("eval") else 0
    if t["eval_steps"] and data.get("eval") and n_eval is None:
        raise InputError("data.eval.num_rows: the plan needs the number of held-out prompts (or max_examples)")
    limit = settings["partition_limit_min"]
    prompt = _mean_tokens(settings["prompt_tokens"], t["max_prompt_length"] or 256)
    completion = _mean_tokens(settings["completion_tokens"], t["max_completion_length"])
    eval_completion = min(_mean_tokens(settings["completion_tokens"], evaluation["max_new_tokens"]),
                          evaluation["max_new_tokens"])
    backend = evaluation["backend"]
    if backend == "auto":
        backend = "transformers" if settings["gpu"] == "cpu" else "vllm"
    jobs: list[JobPlan] = []
    for model, spec in config["models"].items():
        params_b = model_params_b(model, spec)
        for G in config["group_sizes"]:
            for seed in config["seeds"]:
                jobs.append(plan_training(
                    job=f"train/{model}/G{G}/seed{seed}", params_b=params_b, G=G, t=t, n_train=n_train,
                    n_eval=n_eval or 0, prompt_tokens=prompt, completion_tokens=completion, profile=profile,
                    margin=settings["margin"], limit_min=limit, eval_batch=eval_batch_size(t, G)))
        variants = ["base"] + [f"G{G}_seed{seed}" for G in config["group_sizes"] for seed in config["seeds"]]
        for name, bench in (config.get("benchmarks") or {}).items():
            bench = resolve_benchmark(name, bench)
            n_problems = dataset_rows(bench, f"benchmarks.{name}", sizes)
            if n_problems is None:
                raise InputError(f"benchmarks.{name}.num_rows: the plan needs the benchmark's size "
                                 "(or max_examples)")
            for variant in variants:
                jobs.append(plan_evaluation(
                    job=f"evaluate/{model}/{variant}/{name}", params_b=params_b, n_problems=n_problems,
                    evaluation=evaluation, backend=backend, prompt_tokens=prompt, completion_tokens=eval_completion,
                    profile=profile, margin=settings["margin"], limit_min=limit))
    return GridPlan(jobs=jobs, settings={k: v for k, v in settings.items() if k != "throughput"})


def run_plan(config: dict, out_md: str | None = None) -> GridPlan:
    """Build the plan, print it (Markdown) and write it to ``out_md`` when given."""
    from pgrpo.atomic import write_text
    from pgrpo.tables.plan import plan_markdown

    plan = build_plan(config)
    text = plan_markdown(plan.jobs, plan.settings)
    print(text, end="")
    if out_md:
        write_text(out_md, text)
    return plan
