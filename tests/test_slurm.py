"""The cluster path: `snakemake --profile slurm` on a real one-node SLURM cluster, dry runs of the paper's grid, and
what the training does under a scheduler (no CUDA where GPUs were asked for, launch fingerprint, time-limit signal).

The end-to-end test (marked ``slurm`` and ``slow``, so ``make test`` runs it and plain ``pytest`` does not) installs
Debian's ``slurmctld slurmd slurm-client munge`` when they are missing, starts munged, slurmctld and slurmd on
localhost (tests/slurm/local_cluster.py), runs a small target of the embedded default through the shipped profile
with tests/slurm/profile.yaml layered over it, reads every sbatch line and ``scontrol show job``, cancels the
training job mid-run, sends its second attempt the time-limit signal during start-up and its third in the middle of
an evaluation (each moment observed, not timed: the same run on a slow machine as on a fast one), and checks that
no step and no evaluation is lost. It skips only where SLURM cannot be had.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pgrpo.errors import InputError
from pgrpo.grpo.checkpoints import distributed_spec, last_complete_checkpoint, run_spec_fingerprint  # noqa: E402
from pgrpo.grpo.time_limit import CHECKPOINT_SIGNAL, EXIT_RESUMABLE, STOPS_NAME, read_stops  # noqa: E402
from pgrpo.grpo.trainer import train_grpo  # noqa: E402
from pgrpo.grpo.training_config import ALLOW_NO_CUDA_ENV, launch_command, resolve_training, validate_training  # noqa: E402

HERE = Path(__file__).resolve().parent
SLURM_TESTS = HERE / "slurm"


def _load_local_cluster():
    spec = importlib.util.spec_from_file_location("local_cluster", SLURM_TESTS / "local_cluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


local_cluster = _load_local_cluster()


def layered(base: dict, over: dict) -> dict:
    """``over`` on ``base``: mappings merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = layered(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def read_yaml(path: Path) -> dict:
    with open(path) as handle:
        return yaml.safe_load(handle)


def snakemake_bin(repo_root: Path) -> str:
    return shutil.which("snakemake") or str(repo_root / ".venv" / "bin" / "snakemake")


def copy_workflow(repo_root: Path, dest: Path) -> None:
    for item in ("Snakefile", "workflow", "config", "envs", "profiles"):
        source = repo_root / item
        (shutil.copytree if source.is_dir() else shutil.copy)(source, dest / item)


def write_profile(dest: Path, overlay: dict) -> Path:
    """The shipped slurm/ profile with ``overlay`` layered over it, as a profile directory."""
    profile = layered(read_yaml(HERE.parent / "slurm" / "config.yaml"), overlay)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return dest


# no conda on the test machine: env-modules without any `envmodules:` directive = the current environment
NO_CONDA = {"software-deployment-method": "env-modules"}


# ---------------------------------------------------------------------------------------------------------------
# dry runs: what each job of the paper's grid asks SLURM for (fast)
# ---------------------------------------------------------------------------------------------------------------


def parse_dry_run(text: str) -> list[dict]:
    """Jobs of a `snakemake -n -p` listing: rule, output, wildcards, resources (dict) and shell command."""
    jobs, job = [], None
    for line in text.splitlines():
        header = re.match(r"^(?:local)?rule (\w+):$", line)
        if header:
            job = {"rule": header.group(1), "resources": {}, "output": [], "shell": ""}
            jobs.append(job)
        elif job is not None and line.startswith("    output: "):
            job["output"] = line[len("    output: "):].split(", ")
        elif job is not None and line.startswith("    resources: "):
            for item in line[len("    resources: "):].split(", "):
                key, _, value = item.partition("=")
                job["resources"][key] = value
        elif job is not None and line.startswith("Shell command: "):
            job["shell"] = line[len("Shell command: "):]
    return jobs


def dry_run(repo_root: Path, tmp_path: Path, config: dict, *extra: str, overlay: dict | None = None):
    copy_workflow(repo_root, tmp_path)
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(config))
    profile = write_profile(tmp_path / "profile", {**NO_CONDA, **(overlay or {})})
    # --cores: a dry run caps threads at 1 unless told; on the cluster (no --cores) nothing caps them
    result = subprocess.run([snakemake_bin(repo_root), *extra, "-n", "-p", "--profile", str(profile), "--cores", "64",
                             "--configfile", "grid.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    return result


@pytest.fixture()
def paper_config(repo_root) -> dict:
    return read_yaml(repo_root / "config" / "paper.yaml")


def test_paper_grid_asks_slurm_for_what_each_job_needs(repo_root, tmp_path, paper_config):
    result = dry_run(repo_root, tmp_path, paper_config)
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "workflow specific profile" not in output  # no profiles/default: the local profile never joins in
    jobs = parse_dry_run(result.stdout)
    by_rule: dict[str, list[dict]] = {}
    for job in jobs:
        by_rule.setdefault(job["rule"], []).append(job)

    # 3 models x 2 G x 2 seeds; one evaluation per (model, variant, benchmark): base + 4 trained variants, 8 benchmarks
    assert len(by_rule["train"]) == 12
    models, benchmarks = list(paper_config["models"]), list(paper_config["benchmarks"])
    variants = ["base"] + [f"G{G}_seed{s}" for G in (4, 16) for s in (42, 3407)]
    expected = {f"results/evaluate/{m}/{v}/{b}.json" for m in models for v in variants for b in benchmarks}
    evaluated = [out for job in by_rule["evaluate"] for out in job["output"] if out.endswith(".json")]
    assert len(evaluated) == len(expected) == 120 and set(evaluated) == expected

    paper_training, paper_evaluation = paper_config["training"]["resources"], paper_config["evaluation"]["resources"]
    from pgrpo.config import load_config
    from pgrpo.stages.plan import build_plan

    grid = build_plan(load_config(repo_root / "config" / "paper.yaml"))
    planned, leads = {}, {}  # first output of each job -> the runtime and the signal lead the plan gives it
    for job in grid.jobs:
        kind, rest = job.job.split("/", 1)
        if kind == "train_eval":  # eval_mode: checkpoints: the run's evaluation jobs, one row for all
            continue
        first = (f"results/train/{rest}/train_log.csv" if kind == "train" else f"results/evaluate/{rest}.json")
        planned[first] = job.runtime_min
        leads[first] = job.signal_lead_s
    for rule, section in (("train", paper_training), ("evaluate", paper_evaluation)):
        for job in by_rule[rule]:
            resources = job["resources"]
            assert resources["slurm_partition"] == "gpu", (rule, resources)
            assert resources["gpu"] == str(section["gpus"])
            assert resources["cpus_per_task"] == str(section["threads"])
            assert f"OMP_NUM_THREADS={section['threads']} " in job["shell"]
            if section["runtime_min"] == "auto":  # the plan's estimate for this job (pgrpo plan)
                assert job["output"][0] in planned, job["output"][0]
                assert resources["runtime"] == str(planned[job["output"][0]]), (rule, resources["runtime"])
            else:
                assert resources["runtime"] == str(section["runtime_min"])
    # the corpus benchmarks (CPU jobs that cannot resume): benchmark_resources' processes and minutes, --workers
    defaults = read_yaml(repo_root / "config" / "schema.yaml")["properties"]["benchmark_resources"]["properties"]
    asked = {key: (paper_config.get("benchmark_resources") or {}).get(key, defaults[key]["default"])
             for key in ("threads", "runtime_min")}
    assert "forecast_benchmark" in by_rule  # live_benchmark too where the copy has benchmarks/ (this one has not)
    for rule in [r for r in ("forecast_benchmark", "live_benchmark") if r in by_rule]:
        (job,) = by_rule[rule]
        assert "slurm_partition" not in job["resources"] or job["resources"]["slurm_partition"] != "gpu", job
        assert job["resources"]["cpus_per_task"] == str(asked["threads"]), (rule, job["resources"])
        assert job["resources"]["runtime"] == str(asked["runtime_min"]), (rule, job["resources"])
        assert f"--workers {asked['threads']}" in job["shell"], job["shell"]
    for job in by_rule["train"]:
        assert job["resources"]["mem_mb"] == str(paper_training["mem_mb"])
        assert job["resources"]["slurm_extra"] == f"--signal=URG@{leads[job['output'][0]]}"  # the plan's lead
    # eval_mode: checkpoints: every run's evaluation steps as GPU jobs of their own, joined into log.csv on the CPU
    steps_per_run = {}
    for job in by_rule["evaluate_checkpoint"]:
        assert job["resources"]["slurm_partition"] == "gpu" and job["resources"]["gpu"] == "1", job["resources"]
        run = job["output"][0].rsplit("/evals/", 1)[0]
        steps_per_run[run] = steps_per_run.get(run, 0) + 1
    assert len(steps_per_run) == 12 and len(by_rule["join_evaluations"]) == 12
    for rule, rule_jobs in by_rule.items():
        if rule not in ("train", "evaluate", "evaluate_checkpoint"):
            for job in rule_jobs:
                assert job["resources"].get("slurm_partition") == "cpu", (rule, job["resources"])
                assert "gpu" not in job["resources"], rule


def test_several_gpus_launch_accelerate_on_a_free_port_with_memory_per_process(repo_root, tmp_path, paper_config):
    paper_config["training"]["resources"]["gpus"] = 4
    result = dry_run(repo_root, tmp_path, paper_config, "results/train/nemotron-mini-4b/G4/seed42/log.csv")
    assert result.returncode == 0, result.stderr[-3000:]
    (job,) = [j for j in parse_dry_run(result.stdout) if j["rule"] == "train"]
    assert job["resources"]["gpu"] == "4"
    assert job["resources"]["mem_mb"] == str(4 * paper_config["training"]["resources"]["mem_mb"])
    launch = re.search(r"accelerate launch .*? -m pgrpo", job["shell"]).group(0)
    assert "--config_file config/accelerate/deepspeed_zero2.yaml --num_processes 4 --main_process_port " in launch
    port = re.search(r'--main_process_port ("\$\(.*\)")', launch).group(1)
    printed = subprocess.run(["bash", "-c", f"echo {port}"], capture_output=True, text=True,
                             env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert printed.stdout.strip().isdigit() and int(printed.stdout) != 29500
    command = launch_command({}, 2)
    assert command[command.index("--main_process_port") + 1].isdigit()


def test_vllm_server_mode_is_rejected_before_any_job(repo_root, tmp_path, paper_config):
    paper_config["training"].update({"use_vllm": True, "vllm_mode": "server"})
    result = dry_run(repo_root, tmp_path, paper_config)
    assert result.returncode != 0
    message = [line for line in result.stderr.splitlines() if "training.vllm_mode" in line]
    assert message and "trl vllm-serve" in message[0] and "colocate" in message[0], result.stderr[-2000:]
    with pytest.raises(InputError, match=r"training\.vllm_mode: 'server' needs a `trl vllm-serve`"):
        validate_training(resolve_training({"use_vllm": True, "vllm_mode": "server"}), 4, cuda=True)


def test_bench_dryrun_script_builds_the_grids(repo_root):
    script = repo_root / "benchmarks" / "bench_dryrun.py"
    result = subprocess.run([sys.executable, str(script), "--repeats", "1", "--scale", "1"], cwd=repo_root,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train=12" in result.stdout and "evaluate=120" in result.stdout


# ---------------------------------------------------------------------------------------------------------------
# the training job under a scheduler
# ---------------------------------------------------------------------------------------------------------------


def test_gpus_asked_for_without_cuda_stop_the_run_in_one_line(monkeypatch):
    monkeypatch.delenv(ALLOW_NO_CUDA_ENV, raising=False)
    asks_for_gpu = resolve_training({"resources": {"gpus": 1}})
    with pytest.raises(InputError) as caught:
        validate_training(asks_for_gpu, 4, cuda=False)
    assert str(caught.value).startswith("training.resources.gpus: the job asks for 1 GPU(s) but torch sees no CUDA")
    assert "\n" not in str(caught.value)
    monkeypatch.setenv(ALLOW_NO_CUDA_ENV, "1")  # the CPU test on a fake GPU
    validate_training(asks_for_gpu, 4, cuda=False)
    with pytest.raises(InputError, match=r"training\.bf16: this GPU has no bf16 support"):
        validate_training(resolve_training({"bf16": True}), 4, cuda=True, bf16_supported=False)
    validate_training(resolve_training({"bf16": False}), 4, cuda=True, bf16_supported=False)


class _State:
    def __init__(self, processes, kind):
        from accelerate.utils import DistributedType

        self.num_processes, self.distributed_type = processes, DistributedType[kind]


def test_resume_fingerprint_holds_the_world_size_and_the_zero_stage(monkeypatch):
    t = resolve_training({})
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    launches = [_State(1, "NO"), _State(2, "MULTI_GPU"), _State(4, "MULTI_GPU"), _State(4, "DEEPSPEED")]
    specs = [distributed_spec(state) for state in launches]
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    specs.append(distributed_spec(_State(4, "DEEPSPEED")))
    assert specs[0] == {"world_size": 1, "distributed_type": "NO", "zero_stage": None}
    assert specs[3]["zero_stage"] == "2" and specs[4]["zero_stage"] == "3"
    digests = {run_spec_fingerprint("m", t, 4, 1, {"distributed": spec})["sha256"] for spec in specs}
    assert len(digests) == len(specs)  # a checkpoint of one launch is never resumed under another


@pytest.fixture(scope="module")
def fixture_model(tmp_path_factory):
    pytest.importorskip("trl")
    from tests.test_train import build_fixture_model

    return build_fixture_model(tmp_path_factory.mktemp("fixture-model"))


@pytest.mark.parametrize(
    "schedule, signal_at_call, stops_at",
    [
        # call 1 is the preflight, then one per generation batch (no eval here)
        ({}, 4, 3),  # on-policy (K_ref = 1): signalled in step 3, saved at the step in flight, 3
        ({"steps_per_generation": 4, "checkpoint_steps": 4}, 3, 4),  # K_ref = 2: in step 3, saved at the boundary 4
    ],
)
def test_checkpoint_signal_saves_exits_75_and_the_rerun_resumes(fixture_model, tmp_path, schedule, signal_at_call,
                                                                stops_at):
    from tests.test_train import lower_or_digit_reward, problems, small_training
    from transformers import AutoModelForCausalLM, AutoTokenizer

    calls = {"n": 0}

    def reward_that_signals(completions, answer, **kwargs):
        calls["n"] += 1
        if calls["n"] == signal_at_call:
            os.kill(os.getpid(), CHECKPOINT_SIGNAL)
        return lower_or_digit_reward(completions, answer)

    training = small_training(**{"max_steps": 8, "eval_steps": 0, "checkpoint_steps": 5, **schedule})
    out = tmp_path / "run"

    def run(reward):
        return train_grpo(
            model=AutoModelForCausalLM.from_pretrained(fixture_model),
            tokenizer=AutoTokenizer.from_pretrained(fixture_model), train_dataset=problems(64, 0),
            eval_dataset=None, reward_funcs=[reward], training=training, G=4, seed=5, out_dir=str(out),
            model_name="fixture", load_base_model=lambda: AutoModelForCausalLM.from_pretrained(fixture_model))

    reward_that_signals.__name__ = "accuracy"
    with pytest.raises(SystemExit) as stopped:
        run(reward_that_signals)
    assert stopped.value.code == EXIT_RESUMABLE == 75
    assert signal.getsignal(CHECKPOINT_SIGNAL) in (signal.SIG_DFL, None)  # handler gone with the run
    assert last_complete_checkpoint(out / "checkpoints")[1] == stops_at
    assert not (out / "log.csv").exists() and not (out / "meta.json").exists()
    recorded = read_stops(out / "checkpoints" / STOPS_NAME)  # the stop outlives the attempt's log
    assert [(stop["phase"], stop["checkpoint_step"], stop["evaluating"]) for stop in recorded] == [
        ("training", stops_at, None)], recorded

    result = run(lower_or_digit_reward)
    assert result.resumed_from == stops_at
    assert json.loads((out / "meta.json").read_text())["stops"] == recorded  # the finished run says it was stopped
    log = pd.read_csv(out / "log.csv")
    assert list(log["step"]) == list(range(1, 9))


# ---------------------------------------------------------------------------------------------------------------
# end to end on a one-node SLURM cluster
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    try:
        local_cluster.ensure_installed()
        cluster = local_cluster.LocalSlurm(tmp_path_factory.mktemp("slurm-state"))
        started = time.monotonic()
        cluster.start()
    except local_cluster.ClusterUnavailable as reason:
        pytest.skip(f"no SLURM cluster here: {reason}")
    cluster.startup_s = time.monotonic() - started
    yield cluster
    cluster.stop()


def scontrol_jobs() -> dict[str, dict]:
    """Every job slurmctld still knows (MinJobAge = 600 s keeps finished ones), as key=value fields."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, timeout=30).stdout
    jobs = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w[\w:/]*)=(\S*)", line))
        if "JobId" in fields:
            jobs[fields["JobId"]] = fields
    return jobs


def collect_log_lines(log: Path, messages: list[str], stop: threading.Event) -> None:
    """Every ``pgrpo`` line the rule's log ever held, in order, across the attempts that rewrite it."""
    while not stop.wait(0.05):
        try:
            text = log.read_text(errors="replace").replace("\r", "\n")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            if line.startswith(("pgrpo train:", "pgrpo:")) and line not in messages:
                messages.append(line)


def running_train_job() -> str | None:
    out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T"], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        jobid, comment, state = line.split("|")
        if comment.startswith("rule_train") and state == "RUNNING":
            return jobid
    return None


def trainer_holds_the_handler(jobid: str) -> bool:
    """Whether a process of the job is `python -m pgrpo train` with the time-limit signal's handler installed
    (/proc/PID/status SigCgt; `scontrol listpids` names the job's processes on this node)."""
    out = subprocess.run(["scontrol", "listpids", jobid], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines()[1:]:
        pid = line.split()[0]
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        caught = next((int(l.split()[1], 16) for l in status.splitlines() if l.startswith("SigCgt:")), 0)
        if "-m pgrpo train" in cmdline and caught >> (int(CHECKPOINT_SIGNAL) - 1) & 1:
            return True
    return False


def sbatch_lines(text: str) -> list[str]:
    return [line.split("sbatch call: ", 1)[1] for line in text.splitlines() if "sbatch call: " in line]


def option(line: str, name: str) -> str | None:
    found = re.search(rf"(?:^|\s){re.escape(name)}[= ](\S+)", line)
    return found.group(1).strip("'") if found else None


@pytest.mark.slurm
@pytest.mark.slow
def test_profile_slurm_runs_a_small_target_on_a_real_cluster(repo_root, tmp_path, slurm_cluster):
    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(repo_root, work)
    config = layered(read_yaml(repo_root / "config" / "config.yaml"), read_yaml(SLURM_TESTS / "config.yaml"))
    (work / "slurm-test.yaml").write_text(yaml.safe_dump(config))
    overlay = read_yaml(SLURM_TESTS / "profile.yaml")
    profile = write_profile(tmp_path / "profile", overlay)
    effective = read_yaml(profile / "config.yaml")
    targets = ["results/evaluate/tiny/G4_seed1/synthetic-test.json"]  # with the CPU jobs it needs first
    env = {**os.environ, ALLOW_NO_CUDA_ENV: "1",  # the fake GPU gres: train on the CPU, knowingly
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run_dir = work / "results" / "train" / "tiny" / "G4" / "seed1"
    train_log = work / "logs" / "train" / "tiny" / "G4" / "seed1.log"
    snakemake_out = tmp_path / "snakemake.out"
    command = ["timeout", "-k", "30", "1500", snakemake_bin(repo_root), *targets, "--profile", str(profile),
               "--verbose", "--configfile", "slurm-test.yaml"]

    started = time.monotonic()
    with open(snakemake_out, "w") as out:
        process = subprocess.Popen(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
        # attempt 1 is cancelled once it has a checkpoint; attempt 2 gets the time-limit signal during its start-up
        # (once its trainer process holds the handler, before it has loaded anything), attempt 3 in the middle of an
        # evaluation; attempt 4 finishes. Each moment is observed, not timed, so a slow machine sees the same run.
        seen, signalled_at = [], {}
        cancel_step = None
        # each attempt rewrites the rule's log: a reader of its own, never held up by squeue, keeps every attempt's
        # resume, evaluation and signal lines (the stops themselves are also in the run's checkpoints/stops.jsonl)
        messages, stop_reading = [], threading.Event()
        reader = threading.Thread(target=collect_log_lines, args=(train_log, messages, stop_reading), daemon=True)
        reader.start()
        while process.poll() is None:
            time.sleep(0.2)
            text = train_log.read_text(errors="replace").replace("\r", "\n") if train_log.exists() else ""
            jobid = running_train_job()
            if jobid is None:
                continue
            if jobid not in seen:
                seen.append(jobid)
            attempt = seen.index(jobid) + 1
            if attempt in signalled_at:
                continue
            if attempt == 1:
                found = last_complete_checkpoint(run_dir / "checkpoints")
                if found and found[1] >= 20:
                    subprocess.run(["scancel", jobid], check=True, timeout=30)
                    signalled_at[1], cancel_step = "cancel", found[1]
            elif attempt == 2 and trainer_holds_the_handler(jobid) and "resuming from" not in text:
                subprocess.run(["scancel", "--signal=URG", jobid], check=True, timeout=30)
                signalled_at[2] = "start-up"
            elif attempt == 3 and re.search(r"resuming from .*\n(.*\n)*.*evaluating at step \d+", text):
                subprocess.run(["scancel", "--signal=URG", jobid], check=True, timeout=30)
                signalled_at[3] = "evaluation"
            if time.monotonic() - started > 1500:
                process.kill()
        stop_reading.set()
        reader.join(timeout=10)
    elapsed = time.monotonic() - started
    text = snakemake_out.read_text(errors="replace")
    print(f"SLURM start-up {slurm_cluster.startup_s:.1f} s, snakemake --profile slurm {elapsed:.0f} s")
    assert process.returncode == 0, text[-6000:] + slurm_cluster.logs()
    assert signalled_at == {1: "cancel", 2: "start-up", 3: "evaluation"}, (signalled_at, messages)

    # every job went through sbatch with the partition, gres and CPUs the profile and the config say
    lines = sbatch_lines(text)
    by_rule: dict[str, list[str]] = {}
    for line in lines:
        by_rule.setdefault(option(line, "--comment").split("_wildcards_")[0][len("rule_"):], []).append(line)
    assert set(by_rule) == {"make_synthetic_data", "build_tiny_model", "prepare_benchmark", "train", "evaluate"}, lines
    threads = {"train": config["training"]["resources"]["threads"], "evaluate": config["evaluation"]["resources"]
               ["threads"]}
    for rule, rule_lines in by_rule.items():
        partition = effective["set-resources"].get(rule, {}).get("slurm_partition",
                                                                  effective["default-resources"]["slurm_partition"])
        for line in rule_lines:
            assert option(line, "-p") == partition, line
            assert option(line, "--cpus-per-task") == str(threads.get(rule, 1)), line
            assert option(line, "--gpus") == ("1" if rule in ("train", "evaluate") else None), line
            assert "--ntasks-per-gpu" not in line
    assert len(by_rule["train"]) == 4  # cancelled, signalled in start-up, signalled in an evaluation, finished
    from pgrpo.config import load_config
    from pgrpo.stages.plan import build_plan

    lead = build_plan(load_config(work / "slurm-test.yaml")).job("train/tiny/G4/seed1").signal_lead_s
    runtime = config["training"]["resources"]["runtime_min"]
    assert all(option(line, "-t") == str(runtime) for line in by_rule["train"])
    assert 0 < lead < 60 * runtime // 2
    assert all(option(line, "--signal") == f"URG@{lead}" for line in by_rule["train"])  # the plan's lead
    assert option(by_rule["train"][0], "--mem") == str(config["training"]["resources"]["mem_mb"])

    jobs = scontrol_jobs()
    train_ids = sorted((jid for jid, job in jobs.items() if job.get("Comment", "").startswith("rule_train")), key=int)
    assert train_ids == seen
    states = [jobs[jid]["JobState"] for jid in train_ids]
    assert states == ["CANCELLED", "FAILED", "FAILED", "COMPLETED"], states  # FAILED: exit 75, not TIMEOUT
    for job in jobs.values():
        rule = job.get("Comment", "").split("_wildcards_")[0][len("rule_"):]
        if rule in ("train", "evaluate"):
            assert job["Partition"] == "gpu" and job["TresPerJob"] == "gres:gpu:1", job
            assert job["NumCPUs"] == str(threads[rule])
    assert sorted(p.name for p in (work / ".snakemake" / "slurm_logs" / "rule_train" / "tiny_4_1").glob("*.log")) \
        == sorted(f"{jid}.log" for jid in train_ids)

    # attempt 2 exited during start-up with nothing to save; attempt 3 resumed from the checkpoint before the
    # cancel, was stopped in the evaluation of a step and saved that step; attempt 4 resumed there and evaluated it
    startup = [m for m in messages if "during start-up" in m]
    assert len(startup) == 1 and "exiting with 75 at once" in startup[0], messages
    resumes = [int(m) for line in messages for m in re.findall(r"resuming from .*\(step (\d+)\)", line)]
    # the run's own record of its resumable stops: the one of attempt 3 (attempt 2 stopped before it knew its folder)
    stops = json.loads((run_dir / "meta.json").read_text())["stops"]  # checkpoints/stops.jsonl, kept in meta.json
    assert [stop["slurm_job_id"] for stop in stops if stop["phase"] != "start-up"] == [train_ids[2]], stops
    stop = next(stop for stop in stops if stop["phase"] != "start-up")
    assert stop["signal"] == "SIGURG" and stop["exit"] == EXIT_RESUMABLE, stop
    # a signal that reaches the job only after the evaluation's last batch stops it at the next step instead
    in_eval = [(stop["evaluating"], stop["checkpoint_step"])] if stop["phase"] == "evaluation" else []
    after_eval = [stop["checkpoint_step"]] if stop["phase"] == "training" else []
    assert len(resumes) == 2 and len(in_eval) + len(after_eval) == 1, (stops, messages)
    said = [m for m in messages if "(time limit near)" in m and "start-up" not in m]
    assert all(f"checkpoint saved at step {stop['checkpoint_step']}" in m for m in said), (said, stops)
    saved_step = in_eval[0][1] if in_eval else after_eval[0]
    if in_eval:
        assert in_eval[0][0] == saved_step and saved_step % config["training"]["eval_steps"] == 0
    assert cancel_step <= resumes[0] < saved_step == resumes[1], messages
    log = pd.read_csv(run_dir / "log.csv")
    assert list(log["step"]) == list(range(1, config["training"]["max_steps"] + 1))  # every step once
    eval_steps = config["training"]["eval_steps"]
    assert list(log.dropna(subset=["eval_accuracy"])["step"]) == list(
        range(eval_steps, config["training"]["max_steps"] + 1, eval_steps))  # every evaluation once, none lost
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["resumed_from_step"] == saved_step and meta["device"] == "cpu"

    # and the outputs are right
    results = work / "results"
    evaluation = json.loads((results / "evaluate" / "tiny" / "G4_seed1" / "synthetic-test.json").read_text())
    assert evaluation["variant"] == "G4_seed1" and evaluation["model_source"].endswith("seed1/merged")
    assert evaluation["n_problems"] == config["benchmarks"]["synthetic-test"]["max_examples"]
    assert 0 <= evaluation["pass@1"] <= evaluation["pass@5"] <= 1
