"""The cluster path: `snakemake --profile slurm` on a real one-node SLURM cluster, dry runs of the paper's grid, and
what the training does under a scheduler (no CUDA where GPUs were asked for, launch fingerprint, time-limit signal).

The end-to-end test (marked ``slurm`` and ``slow``, so ``make test`` runs it and plain ``pytest`` does not) installs
Debian's ``slurmctld slurmd slurm-client munge`` when they are missing, starts munged, slurmctld and slurmd on
localhost (tests/slurm/local_cluster.py), runs a small target of the embedded default through the shipped profile
with tests/slurm/profile.yaml layered over it, reads every sbatch line and ``scontrol show job``, cancels the
training job mid-run and gives its second attempt a one-minute limit. It skips only where SLURM cannot be had.
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
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pgrpo.errors import InputError
from pgrpo.grpo.checkpoints import distributed_spec, last_complete_checkpoint, run_spec_fingerprint  # noqa: E402
from pgrpo.grpo.time_limit import CHECKPOINT_SIGNAL, EXIT_RESUMABLE  # noqa: E402
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
    planned = {}  # first output of each job -> the runtime the plan gives it
    for job in grid.jobs:
        kind, rest = job.job.split("/", 1)
        first = (f"results/train/{rest}/log.csv" if kind == "train" else f"results/evaluate/{rest}.json")
        planned[first] = job.runtime_min
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
    for job in by_rule["train"]:
        assert job["resources"]["mem_mb"] == str(paper_training["mem_mb"])
        assert job["resources"]["slurm_extra"].startswith("--signal=URG@")
    for rule, rule_jobs in by_rule.items():
        if rule not in ("train", "evaluate"):
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

    result = run(lower_or_digit_reward)
    assert result.resumed_from == stops_at
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


def running_train_job() -> str | None:
    out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T"], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        jobid, comment, state = line.split("|")
        if comment.startswith("rule_train") and state == "RUNNING":
            return jobid
    return None


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
    targets = ["results/symbolic/verification.json", "results/bandit/calibration.json",
               "results/evaluate/tiny/G4_seed1/synthetic-test.json"]
    env = {**os.environ, ALLOW_NO_CUDA_ENV: "1",  # the fake GPU gres: train on the CPU, knowingly
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run_dir = work / "results" / "train" / "tiny" / "G4" / "seed1"
    train_log = work / "logs" / "train" / "tiny" / "G4" / "seed1.log"
    snakemake_out = tmp_path / "snakemake.out"
    command = ["timeout", "-k", "30", "900", snakemake_bin(repo_root), *targets, "--profile", str(profile),
               "--verbose", "--configfile", "slurm-test.yaml"]

    started = time.monotonic()
    with open(snakemake_out, "w") as out:
        process = subprocess.Popen(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
        cancelled, cancel_step, messages = None, None, []
        while process.poll() is None:
            time.sleep(0.5)
            if train_log.exists():  # each attempt rewrites the rule's log: keep its resume and signal lines
                for line in train_log.read_text(errors="replace").replace("\r", "\n").splitlines():
                    if line.startswith("pgrpo train:") and line not in messages:
                        messages.append(line)
            if cancelled is None:
                found = last_complete_checkpoint(run_dir / "checkpoints")
                jobid = running_train_job()
                if found and found[1] >= 20 and jobid:
                    subprocess.run(["scancel", jobid], check=True, timeout=30)
                    cancelled, cancel_step = jobid, found[1]
            if time.monotonic() - started > 960:
                process.kill()
    elapsed = time.monotonic() - started
    text = snakemake_out.read_text(errors="replace")
    print(f"SLURM start-up {slurm_cluster.startup_s:.1f} s, snakemake --profile slurm {elapsed:.0f} s")
    assert process.returncode == 0, text[-6000:] + slurm_cluster.logs()
    assert cancelled, "the training job was never seen running with a checkpoint"

    # every job went through sbatch with the partition, gres and CPUs the profile and the config say
    lines = sbatch_lines(text)
    by_rule: dict[str, list[str]] = {}
    for line in lines:
        by_rule.setdefault(option(line, "--comment").split("_wildcards_")[0][len("rule_"):], []).append(line)
    assert set(by_rule) == {"verify_symbolic", "bandit_calibrate", "make_synthetic_data", "build_tiny_model",
                            "prepare_benchmark", "train", "evaluate"}, lines
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
    assert len(by_rule["train"]) == 3  # cancelled, stopped at the time limit, finished
    assert [option(line, "-t") for line in by_rule["train"]] == ["10", "1", "10"]
    assert all(option(line, "--signal") == "URG@40" for line in by_rule["train"])
    assert option(by_rule["train"][0], "--mem") == str(config["training"]["resources"]["mem_mb"])

    jobs = scontrol_jobs()
    train_ids = sorted((jid for jid, job in jobs.items() if job.get("Comment", "").startswith("rule_train")), key=int)
    assert len(train_ids) == 3 and train_ids[0] == cancelled
    states = [jobs[jid]["JobState"] for jid in train_ids]
    assert states == ["CANCELLED", "FAILED", "COMPLETED"], states  # FAILED: exit 75 after the signal, not TIMEOUT
    for job in jobs.values():
        rule = job.get("Comment", "").split("_wildcards_")[0][len("rule_"):]
        if rule in ("train", "evaluate"):
            assert job["Partition"] == "gpu" and job["TresPerJob"] == "gres:gpu:1", job
            assert job["NumCPUs"] == str(threads[rule])
    assert sorted(p.name for p in (work / ".snakemake" / "slurm_logs" / "rule_train" / "tiny_4_1").glob("*.log")) \
        == sorted(f"{jid}.log" for jid in train_ids)

    # the retries resumed: attempt 2 from the checkpoint before the cancel, attempt 3 from the signal's checkpoint
    resumes = [int(m) for line in messages for m in re.findall(r"resuming from .*\(step (\d+)\)", line)]
    signalled = [int(m) for line in messages for m in re.findall(r"SIGURG .*checkpoint saved at step (\d+)", line)]
    assert len(resumes) == 2 and len(signalled) == 1, messages
    assert 20 <= resumes[0] and resumes[0] >= cancel_step and resumes[1] == signalled[0] > resumes[0], messages
    log = pd.read_csv(run_dir / "log.csv")
    assert list(log["step"]) == list(range(1, config["training"]["max_steps"] + 1))  # every step once
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["resumed_from_step"] == signalled[0] and meta["device"] == "cpu"

    # and the outputs are right
    results = work / "results"
    verification = json.loads((results / "symbolic" / "verification.json").read_text())
    assert verification["n_claims"] >= 14
    calibration = json.loads((results / "bandit" / "calibration.json").read_text())
    assert calibration["stiffness"] > 0 and calibration["p_ref"] < calibration["p_star"] <= calibration["reward_max"]
    evaluation = json.loads((results / "evaluate" / "tiny" / "G4_seed1" / "synthetic-test.json").read_text())
    assert evaluation["variant"] == "G4_seed1" and evaluation["model_source"].endswith("seed1/merged")
    assert evaluation["n_problems"] == config["benchmarks"]["synthetic-test"]["max_examples"]
    assert 0 <= evaluation["pass@1"] <= evaluation["pass@5"] <= 1
