# Shared by all .smk files -- config validation, the run grid and input functions.
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

# The package is importable here (config checks) and in every job: the rules call
# `PYTHONPATH=workflow python -m pgrpo VERB`, so a conda env per rule needs only the package's dependencies.
sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from pgrpo.config import one_line_validation_error, check_config_semantics  # noqa: E402

try:
    validate(config, schema="../../config/schema.yaml")
    check_config_semantics(config)
except (WorkflowError, ValueError) as error:
    sys.exit(one_line_validation_error(error))


def as_json(section):
    """A config section as a JSON string: the rules pass it as a param so a changed value re-runs the rule."""
    return json.dumps(config[section], sort_keys=True)


def runs():
    """Every (model, G, seed) of the grid."""
    return [
        (model, G, seed)
        for model in config["models"]
        for G in config["group_sizes"]
        for seed in config["seeds"]
    ]


def run_dir(model, G, seed):
    return f"results/train/{model}/G{G}/seed{seed}"


def model_spec(name):
    """The model's spec with its name; a path set in the config overrides the hub id."""
    return {"name": name, **config["models"][name]}


def model_inputs(wildcards):
    """A model built by this workflow (build_tiny) or given by local path is an input; a hub id is not."""
    spec = config["models"][wildcards.model]
    return [spec["path"]] if spec.get("path") else []


def data_inputs(wildcards=None):
    """Local data files of the train and eval sets (workflow-made or user-given); hub datasets are not files."""
    return [spec["path"] for spec in config["data"].values() if spec.get("path")]


def synthetic_outputs():
    return expand(
        "results/data/synthetic/{part}.jsonl",
        part=["sft", "val", "train", "test", "ood"],
    )


def uses_synthetic_data():
    return any(
        str(spec.get("path") or "").startswith("results/data/synthetic/")
        for spec in config["data"].values()
    )


def bandit_readings():
    return [(r["refresh"], r["gradient"]) for r in config["bandit"]["readings"]]


def regime_map_csvs():
    return [
        f"results/bandit/regime_map_{refresh}_{gradient}.csv"
        for refresh, gradient in bandit_readings()
    ]


def all_targets():
    targets = [
        "results/symbolic/verification.json",
        "results/symbolic/verification.md",
        "results/bandit/verdict.md",
        "results/bandit/figure6.pdf",
        *[f"results/bandit/figure7_{r}_{g}.pdf" for r, g in bandit_readings()],
    ]
    if runs():
        targets += [
            "results/figures/figure1.pdf",
            *[f"results/fit/{model}/fits.md" for model in config["models"]],
            "results/forecast/summary.md",
            "results/diagnostics/verdicts.md",
        ]
    if runs() and config["benchmarks"]:
        targets.append("results/tables/table1.md")
    return targets


def variant_run_dir(wildcards):
    """The training run of an eval variant `G{G}_seed{seed}`."""
    G, seed = wildcards.variant[1:].split("_seed")
    return run_dir(wildcards.model, G, seed)


def benchmark_inputs(name):
    path = config["benchmarks"][name].get("path")
    return [path] if path else []


def evaluation_jsons():
    """Every (model, variant, benchmark): the base model and each trained (G, seed)."""
    variants = ["base"] + [
        f"G{G}_seed{seed}" for G in config["group_sizes"] for seed in config["seeds"]
    ]
    return [
        f"results/evaluate/{model}/{variant}/{benchmark}.json"
        for model in config["models"]
        for variant in variants
        for benchmark in config["benchmarks"]
    ]


def train_launcher(n_gpus):
    """`python -m pgrpo` on one device or none; `accelerate launch` across several GPUs (config/accelerate/*.yaml)."""
    n_gpus = int(n_gpus or 0)
    if n_gpus <= 1:
        return "python -m pgrpo"
    accelerate_config = (
        config["training"].get("accelerate_config")
        or "config/accelerate/deepspeed_zero2.yaml"
    )
    return f"accelerate launch --config_file {accelerate_config} --num_processes {n_gpus} -m pgrpo"
