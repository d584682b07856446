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
from pgrpo.cli import VERBS  # noqa: E402
from pgrpo.stages.code_version import code_digests  # noqa: E402
from pgrpo.grpo.training_config import (
    bookkeeping_section,
    live_replay_flags,
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


def code_version(verb):
    """The digest of the `pgrpo` code that `pgrpo VERB` runs (pgrpo.stages.code_version): param `code` of every CPU
    rule downstream of training, so that a change to that code re-runs the job (rerun-trigger params) and what reads
    it. Training, evaluation and what decides them (the tiny model, the data, the K_ref grid) take none: a refactor
    re-trains nothing. The modules' hashes are kept in .snakemake/ between runs (only changed files are parsed).
    """
    if not CODE_VERSIONS:
        CODE_VERSIONS.update(code_digests(VERBS, ".snakemake/pgrpo_code_digests.json"))
    return CODE_VERSIONS[verb]


CODE_VERSIONS = {}


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


# training.eval_mode: checkpoints (pgrpo.grpo.eval_checkpoints): the training job saves the adapter at each
# evaluation step and writes train_log.csv; rule evaluate_checkpoint scores each step; join_evaluations writes log.csv
def evaluation_in_jobs():
    from pgrpo.grpo.eval_checkpoints import evaluates_in_jobs

    return evaluates_in_jobs(
        config["training"], bool((config.get("data") or {}).get("eval"))
    )


EVAL_IN_JOBS = evaluation_in_jobs()


def train_log_output():
    """Rule train's log: log.csv, or train_log.csv when its evaluation runs in jobs of its own."""
    name = "train_log.csv" if EVAL_IN_JOBS else "log.csv"
    return f"results/train/{{model}}/G{{G}}/seed{{seed}}/{name}"


def run_evaluation_steps(wildcards):
    """The steps a run is evaluated at (transformers' schedule): from max_steps, or the plan's steps."""
    from pgrpo.grpo.eval_checkpoints import evaluation_steps

    training = config["training"]
    total = int(training.get("max_steps") or 0)
    if total <= 0:
        total = planned_job(train_job(wildcards)).steps
    return evaluation_steps(
        training.get("eval_steps"), total, bool(training.get("eval_on_start"))
    )


def run_evaluations(wildcards):
    directory = run_dir(wildcards.model, wildcards.G, wildcards.seed)
    return [f"{directory}/evals/step{s}.json" for s in run_evaluation_steps(wildcards)]


def eval_job_runtime(wildcards, attempt):
    """An evaluation job's minutes: the plan's (runtime_min auto) or the evaluation section's; grows per attempt."""
    name = f"train_eval/{wildcards.model}/G{wildcards.G}/seed{wildcards.seed}"
    value = config["training"]["resources"]["runtime_min"]
    base = planned_job(name).runtime_min if value == "auto" else int(value)
    return unresumable_runtime(base, attempt)


def train_signal_extra(wildcards):
    """`--signal=URG@<lead>` of a training job, the lead from the plan (a checkpoint, the longest evaluation the job
    can be in, a margin); the profile's slurm_extra for rule train, where set, replaces it.
    """
    lead = planned_job(train_job(wildcards)).signal_lead_s or 900
    # a runtime_min set by hand below the lead would be signalled at once: then half the job's time
    runtime_s = 60 * job_runtime("training", train_job(wildcards))
    return f"--signal=URG@{int(min(lead, runtime_s // 2))}"


def model_spec(name):
    """The model's spec with its name; a path set in the config overrides the hub id."""
    return {"name": name, **config["models"][name]}


def model_inputs(wildcards):
    """A model built by this workflow (build_tiny) or given by local path is an input; a hub id is not (on an offline
    cluster the prefetch manifest is: prefetch_inputs)."""
    spec = config["models"][wildcards.model]
    return ([spec["path"]] if spec.get("path") else []) + prefetch_inputs()


# Offline compute nodes (cluster.offline, workflow/rules/prefetch.smk): rule prefetch fetches every model and dataset
# into cluster.hf_home on the login node; every job that loads one takes its manifest as an input and runs with
# HF_HOME set and the hub offline (hub_env, in the shell commands a dry run prints).
PREFETCH_MANIFEST = "results/prefetch/manifest.json"


def cluster_settings():
    return {"offline": False, "hf_home": None, **(config.get("cluster") or {})}


def cluster_offline():
    return bool(cluster_settings()["offline"])


def hub_home():
    """cluster.hf_home as an absolute path (~ and $VARS expanded here, on the login node), or None."""
    import os

    value = cluster_settings()["hf_home"]
    if not value:
        if cluster_offline():
            sys.exit(
                "cluster.offline: true needs cluster.hf_home (the cache the login node fills and the jobs read)"
            )
        return None
    return str(Path(os.path.expandvars(os.path.expanduser(value))).absolute())


def hub_env(offline=None):
    """`HF_HOME=... HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ` of a job ("" without cluster settings); ``offline``
    False: the cache only (a job on the login node, which fetches)."""
    offline = cluster_offline() if offline is None else offline
    home = hub_home()
    env = f"HF_HOME={shlex.quote(home)} " if home else ""
    if offline:
        env += "HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 "
    elif home and cluster_offline():
        env += "HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 "
    return env


def prefetch_items():
    """Every model and data set of the config that prefetch fetches (pgrpo.stages.prefetch.prefetch_items)."""
    from pgrpo.stages.prefetch import prefetch_items as items_of

    return items_of(config)


def prefetch_inputs():
    """The prefetch manifest on an offline cluster, as ancient: a later prefetch (a model added) re-runs no job."""
    return [ancient(PREFETCH_MANIFEST)] if cluster_offline() else []


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


def all_targets(readme=True):
    """The main job's targets; readme=False: all but the README's summary (the cost table's inputs)."""
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
            *[f"results/live/{model}/G{G}/seed{seed}.png" for model, G, seed in runs()],
        ]
    if runs() and config["benchmarks"]:
        targets += ["results/tables/table1.html", "results/figures/passk.png"]
    if readme:
        targets.append("results/readme/summary.md")
    targets.append("results/forecast/benchmark.md")
    if Path(
        DIAGNOSE_BENCHMARK_LABELS
    ).is_file():  # a checkout with benchmarks/ (a copied workflow may lack it)
        targets.append("results/diagnose_benchmark/table.md")
        targets.append("results/live_benchmark/table.md")
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
    return ([spec["path"]] if spec.get("path") else []) + prefetch_inputs()


def kref_sweep_arms():
    """The sweep's optimizer arms (sgd, the primary, first); none when the sweep is disabled."""
    sweep = config["kref_sweep"]
    if not sweep.get("enabled"):
        return []
    return sorted(sweep.get("arms") or {}, key=lambda arm: arm != "sgd")


def kref_arm_sweep_json(wildcards):
    """The kref_sweep section one run of the arm trains with (pgrpo.stages.kref_sweep.arm_sweep_section)."""
    from pgrpo.stages.kref_sweep import arm_sweep_section

    section = arm_sweep_section(
        config["kref_sweep"], wildcards.arm, baseline=wildcards.run == "baseline"
    )
    return json.dumps(section, sort_keys=True)


def kref_run_args(wildcards):
    """`--eta LR --k-ref K` of a run: the arm's baseline learning rate at K_ref = 1, or the grid cell's."""
    if wildcards.run == "baseline":
        lr = config["kref_sweep"]["arms"][wildcards.arm]["baseline"]["learning_rate"]
        return f"--eta {lr!r} --k-ref 1"
    lr, k_ref = wildcards.run[2:].split("_kref")
    return f"--eta {lr} --k-ref {k_ref}"


def kref_grid_logs(wildcards):
    """Every arm's grid runs (log.csv, meta.json), as its checkpoint kref_grid chose them from the measured K."""
    paths = []
    for arm in kref_sweep_arms():
        grid = checkpoints.kref_grid.get(arm=arm).output[0]
        with open(grid) as handle:
            cells = json.load(handle)["cells"]
        for cell in cells:
            paths += [
                f"results/kref_sweep/{arm}/{cell['run']}/{name}"
                for name in ("log.csv", "meta.json")
            ]
    return paths


def kref_sweep_logs(wildcards):
    """The K_ref sweep's grid runs' log.csv files (none when the sweep is off), for the forecast benchmark's sweeps."""
    if not config["kref_sweep"].get("enabled"):
        return []
    return [path for path in kref_grid_logs(wildcards) if Path(path).name == "log.csv"]


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
        inputs["live_benchmark"] = "results/live_benchmark/summary.json"
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
    # the cost table (job_costs): what every other target cost
    inputs["job_costs"] = "results/costs/summary.json"
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
# their own (envs/*-vllm.yaml, tests/test_envs.py resolves every env). software.cuda: "12" takes the CUDA 12 variant
# of each GPU env (envs/*-cu12.yaml: torch and vLLM built for CUDA 12.9) for nodes whose driver is older than 580.
def software_cuda():
    """The CUDA major version the GPU envs are built for (software.cuda, "13" by default)."""
    return str((config.get("software") or {}).get("cuda", "13"))


def train_env(section="training"):
    use_vllm = config["training"].get("use_vllm", False)
    if section == "kref_sweep":
        use_vllm = (config["kref_sweep"].get("training") or {}).get(
            "use_vllm", use_vllm
        )
    return {
        ("13", False): "../../envs/train.yaml",
        ("13", True): "../../envs/train-vllm.yaml",
        ("12", False): "../../envs/train-cu12.yaml",
        ("12", True): "../../envs/train-vllm-cu12.yaml",
    }[(software_cuda(), bool(use_vllm))]


def evaluate_env():
    evaluation = config["evaluation"]
    backend = evaluation.get("backend", "auto")
    gpus = int((evaluation.get("resources") or {}).get("gpus") or 0)
    uses_vllm = backend == "vllm" or (backend == "auto" and gpus > 0)
    return {
        ("13", False): "../../envs/evaluate.yaml",
        ("13", True): "../../envs/evaluate-vllm.yaml",
        ("12", False): "../../envs/evaluate-cu12.yaml",
        ("12", True): "../../envs/evaluate-vllm-cu12.yaml",
    }[(software_cuda(), bool(uses_vllm))]


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

# Every rule's shell, CPU jobs too: a `pgrpo` command that exited 2 (a bad input) and is run again by a retry of the
# same job exits 2 at once with the first message (pgrpo.input_errors); `set -euo pipefail` is Snakemake's own prefix.
shell.prefix(f"set -euo pipefail; export PGRPO_INPUT_ERRORS={INPUT_ERRORS}/commands; ")


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


def unresumable_runtime(base, attempt):
    """The runtime of a job that cannot resume: ``base`` x retries.eval_runtime_factor^(attempt - 1), at most
    plan.partition_limit_min (a retry with the same limit would time out the same way).
    """
    return attempt_runtime(
        base,
        attempt,
        retry_settings()["eval_runtime_factor"],
        (config.get("plan") or {}).get("partition_limit_min"),
    )


def evaluation_runtime(wildcards, attempt):
    """An evaluation cannot resume: its runtime grows with the attempt."""
    base = job_runtime(
        "evaluation",
        f"evaluate/{wildcards.model}/{wildcards.variant}/{wildcards.benchmark}",
    )
    return unresumable_runtime(base, attempt)


def benchmark_runtime(wildcards, attempt):
    """A corpus benchmark cannot resume: benchmark_resources.runtime_min grows with the attempt."""
    return unresumable_runtime(config["benchmark_resources"]["runtime_min"], attempt)


def model_bytes_env(spec):
    """`PGRPO_MODEL_BYTES=N ` (bf16 weights) for vllm_gpu_memory_utilization: auto; "" when the size is unknown."""
    from pgrpo.stages.plan import model_params_b

    try:
        return f"PGRPO_MODEL_BYTES={int(model_params_b(spec['name'], spec) * 2e9)} "
    except ValueError:
        return ""


def gpu_prelude(section, rule_name, log, doctor_args, env=""):
    """The shell prefix of a GPU job: the exit-2 guard, `pgrpo doctor` on the job's sections (its report in
    LOG.doctor; the driver against software.cuda) and ``env``, with the offline cluster's HF_HOME (hub_env); only
    hub_env when ``section`` asks for no GPU."""
    if not int(config[section]["resources"]["gpus"] or 0):
        return hub_env()
    marker = f"{INPUT_ERRORS}/{Path(log).relative_to('logs').with_suffix('')}"
    guard = input_error_guard(marker, [log, f"{log}.doctor"], f"rule {rule_name}")
    args = " ".join(shlex.quote(a) for a in [*doctor_args, "--cuda", software_cuda()])
    # the doctor checks the cache the job reads, offline as the job is
    return f"{guard}{hub_env()}PYTHONPATH=workflow python -m pgrpo doctor {args} > {log}.doctor 2>&1 && {hub_env()}{env}"


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


def evaluate_checkpoint_prelude(wildcards):
    w = wildcards
    log = f"logs/train/{w.model}/G{w.G}/seed{w.seed}/evals/step{w.step}.log"
    return train_doctor(model_spec(w.model), "evaluate_checkpoint", log)


def kref_train_prelude(wildcards):
    log = f"logs/kref_sweep/{wildcards.arm}/{wildcards.run}.log"
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
