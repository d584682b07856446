"""Stage ``plan`` (``pgrpo plan --config FILE``): every training and evaluation job of a config's grid priced before
submission (:mod:`pgrpo.grpo.plan`), and the ``runtime`` each rule asks the scheduler for.

Dataset sizes come from ``num_rows`` in the config, or from the local file a ``path`` names (counted here, the only
place that reads it); model sizes from ``models.<name>.params_b``, or from a local model's safetensors header.
Nothing is downloaded.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from pgrpo.grpo.eval_checkpoints import EVAL_MODES
from pgrpo.stages.model_files import model_config_json as local_config_json
from pgrpo.errors import InputError
from pgrpo.grpo.benchmarks import resolve_benchmark
from pgrpo.grpo.generation import resolve_evaluation
from pgrpo.grpo.plan import (
    JobPlan,
    evaluation_rounds,
    plan_checkpoint_evaluations,
    plan_evaluation,
    plan_training,
    resolve_plan,
)
from pgrpo.grpo.plan_models import ARCHITECTURES, ModelShape, model_shape
from pgrpo.grpo.training_config import eval_batch_size, resolve_training


@dataclass
class GridPlan:
    """The jobs of a grid (the configured ``training.eval_mode``), the plan settings they were priced with, the
    training side of both eval modes (:func:`mode_totals` compares them) and the seconds measured by a run."""

    jobs: list[JobPlan]
    settings: dict
    eval_mode: str = "inline"
    modes: dict[str, list[JobPlan]] = field(default_factory=dict)  # mode -> train and train_eval rows
    measured: dict[str, float] = field(default_factory=dict)  # job -> seconds (results/benchmarks/**/*.tsv)

    @property
    def gpu_hours(self) -> float:
        return sum(j.gpu_hours for j in self.jobs)

    def job(self, name: str) -> JobPlan:
        for j in self.jobs:
            if j.job == name:
                return j
        raise KeyError(name)

    def signal_lead_s(self, name: str) -> int:
        """Seconds before its limit a training job gets SIGURG (``--signal=URG@<lead>``), from the plan."""
        return int(self.job(name).signal_lead_s or 0)

    def mode_totals(self) -> dict[str, dict]:
        """Per eval mode: GPU-hours of the grid (benchmark evaluations included), the share that is evaluation
        (inline evaluation inside training, the separate evaluation jobs, the benchmark evaluations), the jobs
        that do not fit and the most submissions a training job takes."""
        benchmark = [j for j in self.jobs if j.kind == "evaluate"]
        out = {}
        for mode, rows in self.modes.items():
            jobs = rows + benchmark
            total = sum(j.gpu_hours for j in jobs)
            in_training = sum(j.split.get("eval", 0.0) * j.gpus for j in rows if j.kind == "train")
            eval_jobs = sum(j.gpu_hours for j in rows if j.kind == "train_eval")
            bench = sum(j.gpu_hours for j in benchmark)
            train = [j for j in rows if j.kind == "train"]
            out[mode] = {
                "gpu_hours": total, "training_eval_gpu_hours": in_training + eval_jobs,
                "benchmark_gpu_hours": bench,
                "eval_share": (in_training + eval_jobs + bench) / total if total else 0.0,
                "training_eval_share": (in_training + eval_jobs) / total if total else 0.0,
                "not_fitting": [j.job for j in jobs if not j.fits],
                "max_submissions": max((j.submissions for j in train), default=1),
                "jobs": sum(j.count for j in jobs),
            }
        return out

    def calibration(self) -> dict | None:
        """Measured / planned seconds over the jobs a run measured (None when none was): the factor to divide the
        profile's rates by, so that the plan matches this machine."""
        pairs = [(self.measured[j.job], j.hours * 3600) for j in self.jobs if j.job in self.measured]
        if not pairs:
            return None
        measured, planned = sum(m for m, _ in pairs), sum(p for _, p in pairs)
        return {"jobs": len(pairs), "measured_s": measured, "planned_s": planned, "ratio": measured / planned}


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


def model_architecture(name: str, spec: dict, config: dict, settings: dict) -> tuple[dict | None, str]:
    """A model's ``config.json`` keys and where they come from: ``plan.architectures.<name>``, the tiny model's
    ``tiny.architecture``, a local or cached ``config.json`` (never downloaded), the paper's table by hub id."""
    if name in (settings.get("architectures") or {}):
        return dict(settings["architectures"][name]), f"plan.architectures.{name}"
    if spec.get("build_tiny") and (config.get("tiny") or {}).get("architecture"):
        return dict(config["tiny"]["architecture"]), "tiny.architecture (the workflow builds it)"
    found = local_config_json(spec)
    if found:
        return found, f"config.json of {spec.get('path') or spec.get('id')}"
    known = ARCHITECTURES.get(spec.get("id") or "")
    if known:
        return {k: v for k, v in known.items() if k != "source"}, known["source"]
    return None, f"models.{name}: no config.json and not in pgrpo.grpo.plan_models.ARCHITECTURES"


def model_shapes(config: dict, settings: dict, t: dict) -> dict[str, ModelShape]:
    """Each model's :class:`ModelShape` (size, KV bytes a token, LoRA parameters under ``training.lora``)."""
    out = {}
    for name, spec in config["models"].items():
        architecture, source = model_architecture(name, spec, config, settings)
        out[name] = model_shape(model_params_b(name, spec), architecture, source, lora_r=t["lora"]["r"],
                                lora_targets=t["lora"]["target_modules"])
    return out


def measured_seconds(root: str | Path = "results/benchmarks") -> dict[str, float]:
    """Seconds a run measured per job (Snakemake ``benchmark:`` files, column ``s``, the mean of repeats):
    ``train/<model>/G<G>/seed<seed>.tsv`` and ``evaluate/<model>/<variant>/<benchmark>.tsv`` under ``root``."""
    import csv

    out: dict[str, float] = {}
    base = Path(root)
    for kind in ("train", "evaluate"):
        for path in sorted((base / kind).glob("*/*/*.tsv")) if (base / kind).is_dir() else []:
            with open(path, newline="") as handle:
                rows = [float(r["s"]) for r in csv.DictReader(handle, delimiter="\t") if r.get("s")]
            if rows:
                out[str(path.relative_to(base).with_suffix(""))] = sum(rows) / len(rows)
    return out


def build_plan(config: dict, benchmarks_dir: str | Path | None = "results/benchmarks") -> GridPlan:
    """Price every training job (model x G x seed) in both eval modes, the separate evaluation jobs of
    ``eval_mode: checkpoints`` and every benchmark evaluation job (model x variant x benchmark) of ``config``;
    ``jobs`` are those of the configured ``training.eval_mode`` (default inline)."""
    settings = resolve_plan(config.get("plan"))
    profile = settings["profile"]
    t = resolve_training(config.get("training"))
    eval_mode = (config.get("training") or {}).get("eval_mode") or t.get("eval_mode") or "inline"
    if eval_mode not in EVAL_MODES:
        raise InputError(f"training.eval_mode: {eval_mode!r} is not one of {', '.join(EVAL_MODES)}")
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
    training_backend = "vllm" if t["use_vllm"] else "transformers"
    shapes = model_shapes(config, settings, t)
    common = dict(prompt_tokens=prompt, completion_tokens=completion, profile=profile, margin=settings["margin"],
                  limit_min=limit)
    modes: dict[str, list[JobPlan]] = {mode: [] for mode in EVAL_MODES}
    benchmark_jobs: list[JobPlan] = []
    for model, spec in config["models"].items():
        shape = shapes[model]
        for G in config["group_sizes"]:
            for seed in config["seeds"]:
                run = f"{model}/G{G}/seed{seed}"
                for mode in EVAL_MODES:
                    train = plan_training(
                        job=f"train/{run}", params_b=shape.params_b, G=G, t=t, n_train=n_train, n_eval=n_eval or 0,
                        eval_batch=eval_batch_size(t, G), shape=shape, eval_mode=mode,
                        max_submissions=settings["max_submissions"], signal_margin_s=settings["signal_margin_s"],
                        **common)
                    modes[mode].append(train)
                    if mode == "checkpoints" and evaluation_rounds(train.steps, t, n_eval or 0):
                        modes[mode].append(plan_checkpoint_evaluations(
                            job=f"train_eval/{run}", params_b=shape.params_b, G=G, t=t, steps=train.steps,
                            n_eval=n_eval or 0, share=float(evaluation["vllm_gpu_memory_utilization"]),
                            backend=training_backend, batch_size=evaluation["batch_size"], shape=shape, **common))
        variants = ["base"] + [f"G{G}_seed{seed}" for G in config["group_sizes"] for seed in config["seeds"]]
        for name, bench in (config.get("benchmarks") or {}).items():
            bench = resolve_benchmark(name, bench)
            n_problems = dataset_rows(bench, f"benchmarks.{name}", sizes)
            if n_problems is None:
                raise InputError(f"benchmarks.{name}.num_rows: the plan needs the benchmark's size "
                                 "(or max_examples)")
            for variant in variants:
                benchmark_jobs.append(plan_evaluation(
                    job=f"evaluate/{model}/{variant}/{name}", params_b=shape.params_b, n_problems=n_problems,
                    evaluation=evaluation, backend=backend, prompt_tokens=prompt, completion_tokens=eval_completion,
                    profile=profile, margin=settings["margin"], limit_min=limit, shape=shape))
    settings = {k: v for k, v in settings.items() if k != "throughput"}
    settings["shapes"] = {name: shape.source for name, shape in shapes.items()}
    measured = measured_seconds(benchmarks_dir) if benchmarks_dir else {}
    return GridPlan(jobs=modes[eval_mode] + benchmark_jobs, settings=settings, eval_mode=eval_mode, modes=modes,
                    measured=measured)


def run_plan(config: dict, out_md: str | None = None) -> GridPlan:
    """Build the plan, print it (Markdown) and write it to ``out_md`` when given."""
    from pgrpo.atomic import write_text
    from pgrpo.tables.plan import plan_markdown

    plan = build_plan(config)
    text = plan_markdown(plan)
    print(text, end="")
    if out_md:
        write_text(out_md, text)
    return plan
