"""Stage ``doctor`` (``pgrpo doctor``): probe this node (torch, ``nvidia-smi``, the disk, the Hugging Face cache)
and run the checks of :mod:`pgrpo.grpo.doctor` for a config's GPU jobs, before any GPU-hour is spent.

``--config FILE`` checks every GPU job of the grid; the rules pass one job's sections (``--model-json``,
``--training-json`` or ``--evaluation-json``) instead. The first failing check raises :class:`InputError` (exit 2:
a retry cannot fix it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from pgrpo.stages.model_files import model_config_json
from pgrpo.errors import InputError
from pgrpo.grpo import doctor as d
from pgrpo.grpo.generation import resolve_evaluation
from pgrpo.grpo.training_config import ALLOW_NO_CUDA_ENV, resolve_training
from pgrpo.stages.plan import model_params_b


def probe_gpu() -> dict:
    """What torch and nvidia-smi say about this node's GPUs (torch imported here only)."""
    facts = {"cuda_available": False, "device_count": 0, "torch_cuda": None, "bf16": None, "gpu_memory": None,
             "driver": None}
    try:
        import torch
    except ImportError:
        return facts
    facts["torch_cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        facts.update(cuda_available=True, device_count=torch.cuda.device_count(),
                     bf16=bool(torch.cuda.is_bf16_supported()),
                     gpu_memory=float(torch.cuda.get_device_properties(0).total_memory))
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.split()
            facts["driver"] = out[0] if out else None
        except (OSError, subprocess.SubprocessError):
            pass
    return facts


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")


def _hub_dir(repo_id: str, kind: str) -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / f"{kind}s--{repo_id.replace('/', '--')}" / "snapshots"


def model_present(spec: dict) -> bool:
    if spec.get("path"):
        return Path(spec["path"]).exists()
    return model_config_json(spec) is not None


def datasets_cache_dir() -> Path:
    """Where ``datasets`` keeps prepared tables: HF_DATASETS_CACHE, else HF_HOME/datasets (as datasets.config)."""
    from huggingface_hub import constants

    return Path(os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets")


def dataset_present(spec: dict) -> bool:
    """A local path exists, or the hub id has a snapshot in the hub cache or a prepared table in the datasets
    cache (what ``pgrpo prefetch`` leaves: ``load_dataset`` run online with the same HF_HOME)."""
    if spec.get("path"):
        return Path(spec["path"]).exists()
    snapshots = _hub_dir(spec["id"], "dataset")
    if snapshots.is_dir() and any(snapshots.iterdir()):
        return True
    prepared = datasets_cache_dir() / spec["id"].replace("/", "___")
    return prepared.is_dir() and any(prepared.iterdir())


def _params_b(spec: dict, config_json: dict | None) -> float:
    try:
        return model_params_b(spec.get("name", "model"), spec)
    except InputError:
        if config_json:  # a rough count from the architecture: embeddings + 12 h^2 per layer
            h, layers = config_json.get("hidden_size", 0), config_json.get("num_hidden_layers", 0)
            return (config_json.get("vocab_size", 0) * h + 12 * h * h * layers) / 1e9
        raise


def training_share(t: dict, weights: float, kv: float, gpu_memory: float | None) -> float | str:
    value = t["vllm_gpu_memory_utilization"]
    if value == "auto":
        return d.auto_vllm_share(weights, kv, gpu_memory) if gpu_memory else "auto"
    return float(value)


def job_checks(facts: dict, models: dict[str, dict], *, training: dict | None, evaluation: dict | None,
               data: dict | None, runs_per_model: int, results_dir: str, cuda: str | None = None) -> list[d.Check]:
    """The checks for the given sections' GPU jobs (a section None is not checked)."""
    t = resolve_training(training) if training is not None else None
    e = resolve_evaluation(evaluation) if evaluation is not None else None
    wanted = {}
    if t is not None:
        wanted["training"] = int(t["resources"]["gpus"] or 0)
    if e is not None:
        wanted["evaluation"] = int(e["resources"]["gpus"] or 0)
    if any(wanted.values()) and not facts["cuda_available"] and os.environ.get(ALLOW_NO_CUDA_ENV) == "1":
        return [d.Check("gpu", "SKIP", f"{ALLOW_NO_CUDA_ENV}=1: a fake GPU (the CPU test on a local cluster), "
                        "no GPU check made")]
    checks = [d.check_gpu_visible(wanted, facts["cuda_available"], facts["device_count"])]
    if not any(wanted.values()):
        return checks
    checks.append(d.check_driver(facts["driver"], facts["torch_cuda"], cuda))
    checks.append(d.check_bf16(bool(t and wanted.get("training") and t["bf16"]), facts["bf16"]))
    gpu_memory = facts["gpu_memory"]
    cache, disk = [], 0.0
    for name, spec in models.items():
        config_json = model_config_json(spec)
        params_b = _params_b(spec, config_json)
        weights = d.weight_bytes(params_b)
        per_token = d.kv_bytes_per_token(config_json)
        if t is not None and wanted.get("training"):
            spg = t["steps_per_generation"] or t["gradient_accumulation_steps"]
            context = (t["max_prompt_length"] or 256) + t["max_completion_length"]
            kv = d.kv_budget_bytes(weights, per_token, t["per_device_train_batch_size"] * spg, context)
            share = training_share(t, weights, kv, gpu_memory) if t["use_vllm"] else None
            checks.append(d.check_memory(f"train {name}", weights=weights, gpu_memory=gpu_memory,
                                         share=None if share == "auto" else share, kv_budget=kv,
                                         colocate_trainer=True, share_key="training.vllm_gpu_memory_utilization"))
            lora = d.lora_params(config_json, t["lora"]["r"], t["lora"]["target_modules"],
                                 params_b)
            disk += runs_per_model * d.run_disk_bytes(params_b, lora, t["checkpoints_keep"],
                                                      t["merge_adapters"])
        if e is not None and wanted.get("evaluation"):
            gpus = wanted["evaluation"]
            kv = d.kv_budget_bytes(weights, per_token, 1, e["max_new_tokens"]) / gpus
            checks.append(d.check_memory(f"evaluate {name}", weights=weights / gpus, gpu_memory=gpu_memory,
                                         share=float(e["vllm_gpu_memory_utilization"]), kv_budget=kv,
                                         colocate_trainer=False, share_key="evaluation.vllm_gpu_memory_utilization"))
        if spec.get("path") or spec.get("id"):
            cache.append((f"model {spec.get('path') or spec['id']}", model_present(spec)))
    for role, spec in (data or {}).items():
        if spec and (spec.get("path") or spec.get("id")) and t is not None:
            cache.append((f"dataset {spec.get('path') or spec['id']}", dataset_present(spec)))
    checks.append(d.check_cache(offline(), list(dict(cache).items())))  # one line per model/dataset
    if disk:
        where = Path(results_dir)
        probe = where if where.exists() else Path(".")
        checks.append(d.check_disk(str(where), float(shutil.disk_usage(probe).free), disk))
    return checks


def run_doctor(*, config: dict | None = None, model: dict | None = None, training: dict | None = None,
               evaluation: dict | None = None, data: dict | None = None, facts: dict | None = None,
               cuda: str | None = None) -> list[d.Check]:
    """Print one line per check; raise :class:`InputError` with the first failure's problem. ``cuda``: the
    ``software.cuda`` the job's env was built for (with ``config``, read from it)."""
    facts = facts or probe_gpu()
    if config is not None:
        models = {name: {"name": name, **spec} for name, spec in config["models"].items()}
        runs = len(config["group_sizes"]) * len(config["seeds"])
        checks = job_checks(facts, models, training=config["training"], evaluation=config["evaluation"],
                            data=config["data"], runs_per_model=runs, results_dir="results",
                            cuda=str((config.get("software") or {}).get("cuda", "13")))
    else:
        if not model:
            raise InputError("--model-json (with --training-json or --evaluation-json), or --config")
        checks = job_checks(facts, {model.get("name", "model"): model}, training=training, evaluation=evaluation,
                            data=data, runs_per_model=1, results_dir="results", cuda=cuda)
    for check in checks:
        print(check.line())
    failed = d.first_failure(checks)
    if failed:
        raise InputError(failed.problem)
    return checks
