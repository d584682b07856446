# Shared by all .smk files -- config validation, the run grid and input functions.
import json
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

# The package is importable here (config checks) and in every job: the rules call
# `PYTHONPATH=workflow python -m pgrpo VERB`, so a conda env per rule needs only the package's dependencies.
sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from pgrpo.config import (  # noqa: E402
    chat_template_warnings,
    check_config_semantics,
    one_line_validation_error,
)
from pgrpo.atomic import write_text  # noqa: E402
from pgrpo.grpo.training_config import (
    bookkeeping_section,
    trajectory_section,
)  # noqa: E402

# The oldest snakemake-executor-plugin-slurm this workflow submits with: 2.7.1 stopped adding --ntasks-per-gpu=1 to
# every GPU job (which `srun` inside the job then fights). pyproject.toml pins the tested release.
SLURM_PLUGIN_MIN = (2, 7, 1)


def accelerate_config_file():
    return (
        config["training"].get("accelerate_config")
        or "config/accelerate/deepspeed_zero2.yaml"
    )


try:
    validate(config, schema="../../config/schema.yaml")
    check_config_semantics(config)
except (WorkflowError, ValueError) as error:
    sys.exit(one_line_validation_error(error))
# a chat model fed raw prompts runs on past its answer
for _warning in chat_template_warnings(config):
    print(f"warning: {_warning}", file=sys.stderr)


onstart:
    check_executor_plugin()


def check_executor_plugin():
    """Under `--executor slurm` (the slurm/ profile): a plugin release that submits GPU jobs as the rules ask."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    from importlib.metadata import version

    found = version("snakemake-executor-plugin-slurm")
    if (
        tuple(int(part) for part in found.split(".")[:3] if part.isdigit())
        < SLURM_PLUGIN_MIN
    ):
        raise WorkflowError(
            f"snakemake-executor-plugin-slurm {found} is older than "
            f"{'.'.join(map(str, SLURM_PLUGIN_MIN))} (it adds --ntasks-per-gpu=1 to GPU jobs): "
            "pip install -e '.[workflow]' installs the pinned release"
        )


def as_json(section):
    """A config section as a JSON string: the rules pass it as a param so a changed value re-runs the rule.

    Given as a function of the wildcards, so that braces in the JSON (a prompt template's ``{question}``) are not
    read as wildcards.
    """
    text = json.dumps(config[section], sort_keys=True)
    return lambda wildcards: text


def trajectory_json(wildcards):
    """The ``training`` keys that shape the trajectory, as JSON: rule train's param (its rerun trigger)."""
    return json.dumps(trajectory_section(config["training"]), sort_keys=True)


def training_bookkeeping_file():
    """The bookkeeping keys of ``training`` (trackers, checkpoint cadence and retention, merge, resources) as a JSON
    file written when the workflow is read (atomically, only when they changed): rule train's param is its path,
    which never changes, so editing one of these keys re-runs no training job."""
    path = Path("results/config/training_bookkeeping.json")
    text = json.dumps(bookkeeping_section(config["training"]), sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:
        write_text(path, text)
    return str(path)


TRAINING_BOOKKEEPING_FILE = training_bookkeeping_file()


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


def suite_outputs():
    """The graded synthetic benchmarks of synthetic.suite (rule make_synthetic_suite)."""
    return expand(
        "results/data/suite/{name}.jsonl",
        name=list((config.get("synthetic") or {}).get("suite") or {}),
    )


def synthetic_splits_section():
    """The synthetic section without the suite: a changed graded set leaves the splits (and training) untouched.
    A function of the wildcards, as as_json."""
    section = {k: v for k, v in (config.get("synthetic") or {}).items() if k != "suite"}
    text = json.dumps(section, sort_keys=True)
    return lambda wildcards: text


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
        "results/bandit/finite_g.md",
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
        targets += ["results/tables/table1.html", "results/figures/passk.png"]
    targets.append("results/readme/summary.md")
    targets.append("results/forecast/benchmark.md")
    if Path(
        DIAGNOSE_BENCHMARK_LABELS
    ).is_file():  # a checkout with benchmarks/ (a copied workflow may lack it)
        targets.append("results/diagnose_benchmark/table.md")
    if config["kref_sweep"].get("enabled"):
        targets.append("results/kref_sweep/table.md")
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
    """`python -m pgrpo` on one device or none; `accelerate launch` across several GPUs (config/accelerate/*.yaml),
    on a port free on the node when the job starts (two jobs on one node must not share the default 29500).
    """
    n_gpus = int(n_gpus or 0)
    if n_gpus <= 1:
        return "python -m pgrpo"
    return (
        f"accelerate launch --config_file {accelerate_config_file()} --num_processes {n_gpus}"
        f' --main_process_port "$({FREE_PORT})" -m pgrpo'
    )


# The deep-network K_ref sweep (workflow/rules/kref_sweep.smk)
def kref_sweep_model():
    return config["kref_sweep"].get("model") or next(iter(config["models"]))


def kref_sweep_model_inputs():
    """The sweep's model as an input when the workflow builds it or it is a local path (as model_inputs)."""
    spec = config["models"][kref_sweep_model()]
    return [spec["path"]] if spec.get("path") else []


def kref_sweep_runs():
    """(learning rate as written in paths, K_ref) of every sweep run; none when the sweep is disabled."""
    sweep = config["kref_sweep"]
    if not sweep.get("enabled"):
        return []
    return [(f"{lr:g}", k) for lr in sweep["learning_rates"] for k in sweep["k_refs"]]


def kref_run_dir(lr, k_ref):
    return f"results/kref_sweep/runs/lr{lr}_kref{k_ref}"


# The plan (pgrpo plan): the runtime a job asks for when its resources say runtime_min: auto
_PLAN = {}


def grid_plan():
    """The plan of every job (pgrpo.stages.plan.build_plan over this config), built once."""
    if "grid" not in _PLAN:
        from pgrpo.stages.plan import build_plan

        try:
            _PLAN["grid"] = build_plan(config)
        except ValueError as error:  # InputError: one line naming the key
            sys.exit(f"pgrpo plan: {error}")
        over = [j for j in _PLAN["grid"].jobs if j.over_limit]
        # said before submission: these resume from their checkpoints across retries
        if over:
            longest = max(over, key=lambda j: j.submissions)
            print(
                f"warning: {len(over)} job(s) are longer than plan.partition_limit_min "
                f"({longest.limit_min} min) and resume from their checkpoints across retries "
                f"(longest: {longest.job}, {longest.hours:.0f} h, {longest.submissions} submissions; "
                "see pgrpo plan)",
                file=sys.stderr,
            )
    return _PLAN["grid"]


def planned_job(job):
    return grid_plan().job(job)


def job_runtime(section, job):
    """Minutes a job asks for: ``{section}.resources.runtime_min``, or with ``auto`` the plan's estimate."""
    value = config[section]["resources"]["runtime_min"]
    return planned_job(job).runtime_min if value == "auto" else int(value)


def section_runtime(section):
    """Minutes for a job of a section that the plan does not price (e.g. the K_ref sweep's runs): the section's
    runtime_min, or with auto the longest planned job of the section's kind."""
    value = config[section]["resources"]["runtime_min"]
    if value != "auto":
        return int(value)
    kind = {"training": "train", "evaluation": "evaluate"}[section]
    return max(j.runtime_min for j in grid_plan().jobs if j.kind == kind)


def job_retries(section, kind):
    """With runtime auto: enough retries for the longest job of ``kind`` to finish across submissions (each resumes
    from its last checkpoint) plus one for a preemption; otherwise the profile's own setting (None).
    """
    if config[section]["resources"]["runtime_min"] != "auto":
        return None
    grid = grid_plan()
    submissions = [j.submissions for j in grid.jobs if j.kind == kind]
    return max(submissions, default=1)


def train_job(wildcards):
    return f"train/{wildcards.model}/G{wildcards.G}/seed{wildcards.seed}"


def prepared_benchmark(name):
    """The benchmark's prepared problems (rule prepare_benchmark), read by every evaluation job."""
    return f"results/data/benchmarks/{name}.jsonl"


# the labelled public logs of the forecast and the diagnose benchmarks
DIAGNOSE_BENCHMARK_LABELS = "benchmarks/forecast/data/labels.json"


def readme_inputs(wildcards):
    """Every result file the README's summary and the results pages quote, and the figures they show, for the runs
    and benchmarks of this config."""
    refresh, gradient = bandit_readings()[0]
    inputs = {
        "symbolic": "results/symbolic/verification.json",
        "calibration": "results/bandit/calibration.json",
        "bandit_verdict": "results/bandit/verdict.md",
        "finite_g": "results/bandit/finite_g.md",
        "models": [
            spec["path"] for spec in config["models"].values() if spec.get("build_tiny")
        ],
        "logs": [f"{run_dir(m, G, s)}/log.csv" for m, G, s in runs()],
        "forecast_benchmark": "results/forecast/benchmark.csv",
        "figures": [
            "results/bandit/figure6.png",
            f"results/bandit/figure7_{refresh}_{gradient}.png",
            "results/bandit/finite_g.png",
            "results/forecast/benchmark.png",
        ],
    }
    if Path(DIAGNOSE_BENCHMARK_LABELS).is_file():
        inputs["diagnose_benchmark"] = "results/diagnose_benchmark/summary.csv"
    if runs():
        inputs["fits"] = [f"results/fit/{m}/fits.json" for m in config["models"]]
        inputs["diagnostics"] = "results/diagnostics/verdicts.json"
        inputs["figures"] += ["results/figures/figure1.png"] + [
            f"results/diagnostics/figure{i}.png" for i in (2, 3, 4, 5)
        ]
        if config["benchmarks"]:
            inputs["evals"] = evaluation_jsons()
            inputs["table1_summary"] = "results/tables/table1_summary.csv"
            inputs["figures"].append("results/figures/passk.png")
    if config["kref_sweep"].get("enabled"):
        inputs["kref_sweep"] = "results/kref_sweep/summary.json"
        inputs["figures"].append("results/kref_sweep/figure.png")
    return inputs


def readme_flags(wildcards):
    """The inputs as `pgrpo readme numbers` flags (--symbolic FILE, --logs FILE ...)."""
    flags = []
    for key, value in readme_inputs(wildcards).items():
        values = value if isinstance(value, list) else [value]
        if values:
            flags.append(f"--{key.replace('_', '-')} " + " ".join(values))
    return " ".join(flags)


# prints a TCP port that is free on the node now (run inside the job, by the job's python)
FREE_PORT = "python -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])'"


def training_mem_mb():
    """training.resources.mem_mb is per training process: one per GPU under `accelerate launch`."""
    resources = config["training"]["resources"]
    return resources["mem_mb"] * max(1, int(resources["gpus"]))


# Conda envs: vLLM 0.31 needs transformers < 5.18 and numpy < 2.4, so the rules that generate with vLLM take envs of
# their own (envs/*-vllm.yaml, tests/test_envs.py resolves every env)
def train_env(section="training"):
    use_vllm = config["training"].get("use_vllm", False)
    if section == "kref_sweep":
        use_vllm = (config["kref_sweep"].get("training") or {}).get(
            "use_vllm", use_vllm
        )
    return "../../envs/train-vllm.yaml" if use_vllm else "../../envs/train.yaml"


def evaluate_env():
    evaluation = config["evaluation"]
    backend = evaluation.get("backend", "auto")
    gpus = int((evaluation.get("resources") or {}).get("gpus") or 0)
    uses_vllm = backend == "vllm" or (backend == "auto" and gpus > 0)
    return "../../envs/evaluate-vllm.yaml" if uses_vllm else "../../envs/evaluate.yaml"


# Before any GPU-hour (issue 19): every GPU job starts with `pgrpo doctor` on its own sections, and a job whose
# attempt exited 2 (a bad input, a failed doctor) is not retried: the guard (pgrpo.grpo.doctor.input_error_guard)
# leaves a marker under INPUT_ERRORS on exit 2 and a retry finding it exits 2 at once; a fresh `snakemake` run
# clears the markers (onstart). CPU jobs (the embedded default) run their commands unchanged.
from pgrpo.grpo.doctor import (  # noqa: E402
    attempt_mem_mb,
    attempt_runtime,
    input_error_guard,
)

INPUT_ERRORS = "results/.input_errors"


onstart:
    clear_input_errors()


def clear_input_errors():
    """A fresh run (the user fixed the input) tries every job again."""
    import shutil

    shutil.rmtree(INPUT_ERRORS, ignore_errors=True)


def retry_settings():
    return {
        "mem_factor": 1.5,
        "max_mem_mb": None,
        "eval_runtime_factor": 1.5,
        **(config.get("retries") or {}),
    }


def attempt_mem(base):
    """mem_mb of a job's attempt: ``base x retries.mem_factor^(attempt - 1)``, at most retries.max_mem_mb."""
    settings = retry_settings()
    return lambda wildcards, attempt: attempt_mem_mb(
        base, attempt, settings["mem_factor"], settings["max_mem_mb"]
    )


def evaluation_runtime(wildcards, attempt):
    """An evaluation cannot resume: its runtime grows with the attempt (at most plan.partition_limit_min)."""
    base = job_runtime(
        "evaluation",
        f"evaluate/{wildcards.model}/{wildcards.variant}/{wildcards.benchmark}",
    )
    return attempt_runtime(
        base,
        attempt,
        retry_settings()["eval_runtime_factor"],
        (config.get("plan") or {}).get("partition_limit_min"),
    )


def model_bytes_env(spec):
    """`PGRPO_MODEL_BYTES=N ` (bf16 weights) for vllm_gpu_memory_utilization: auto; "" when the size is unknown."""
    from pgrpo.stages.plan import model_params_b

    try:
        return f"PGRPO_MODEL_BYTES={int(model_params_b(spec['name'], spec) * 2e9)} "
    except ValueError:
        return ""


def gpu_prelude(section, rule_name, log, doctor_args, env=""):
    """The shell prefix of a GPU job: the exit-2 guard, `pgrpo doctor` on the job's sections (its report in
    LOG.doctor) and ``env``; "" when ``section`` asks for no GPU."""
    if not int(config[section]["resources"]["gpus"] or 0):
        return ""
    marker = f"{INPUT_ERRORS}/{Path(log).relative_to('logs').with_suffix('')}"
    guard = input_error_guard(marker, [log, f"{log}.doctor"], f"rule {rule_name}")
    args = " ".join(shlex.quote(a) for a in doctor_args)
    return f"{guard}PYTHONPATH=workflow python -m pgrpo doctor {args} > {log}.doctor 2>&1 && {env}"


def train_prelude(wildcards):
    spec = model_spec(wildcards.model)
    log = f"logs/train/{wildcards.model}/G{wildcards.G}/seed{wildcards.seed}.log"
    return train_doctor(spec, "train", log)


def train_doctor(spec, rule_name, log):
    return gpu_prelude(
        "training",
        rule_name,
        log,
        [
            "--model-json",
            json.dumps(spec, sort_keys=True),
            "--training-json",
            trajectory_json(None),
            "--bookkeeping-file",
            TRAINING_BOOKKEEPING_FILE,
            "--data-json",
            json.dumps(config["data"], sort_keys=True),
        ],
        env=model_bytes_env(spec),
    )


def kref_train_prelude(wildcards):
    log = f"logs/kref_sweep/lr{wildcards.lr}_kref{wildcards.kref}.log"
    return train_doctor(model_spec(kref_sweep_model()), "kref_train", log)


def evaluate_prelude(wildcards):
    spec = model_spec(wildcards.model)
    # a trained variant's merged model is an input, on disk: no hub id to find in the cache
    if wildcards.variant != "base":
        spec = {**spec, "path": f"{variant_run_dir(wildcards)}/merged"}
    w = wildcards
    log = f"logs/evaluate/{w.model}/{w.variant}/{w.benchmark}.log"
    return gpu_prelude(
        "evaluation",
        "evaluate",
        log,
        [
            "--model-json",
            json.dumps(spec, sort_keys=True),
            "--evaluation-json",
            json.dumps(config["evaluation"], sort_keys=True),
        ],
    )
