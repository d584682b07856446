"""What the schema allows but the cluster path cannot do, refused before any work in one line naming the key."""

from __future__ import annotations

import copy

import pytest

from pgrpo.config import DEFAULT_CONFIG_PATH, load_config, validate_config
from pgrpo.errors import InputError


@pytest.fixture()
def config():
    return copy.deepcopy(load_config(DEFAULT_CONFIG_PATH))


def test_vllm_server_mode_is_refused_by_validation(config):
    config["training"].update(use_vllm=True, vllm_mode="server")
    with pytest.raises(InputError, match="training.vllm_mode"):
        validate_config(config)


def test_several_gpus_need_an_existing_accelerate_config(config):
    config["training"]["resources"]["gpus"] = 2
    config["training"]["accelerate_config"] = "config/accelerate/none.yaml"
    config["training"]["per_device_train_batch_size"] = 32
    with pytest.raises(InputError, match="training.accelerate_config"):
        validate_config(config)


def test_an_evaluation_asking_for_a_gpu_without_cuda_stops(tmp_path, monkeypatch, config):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from pgrpo.grpo.training_config import ALLOW_NO_CUDA_ENV
    from pgrpo.stages.evaluate import run_evaluate

    monkeypatch.delenv(ALLOW_NO_CUDA_ENV, raising=False)
    problems = tmp_path / "bench.jsonl"
    problems.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    evaluation = copy.deepcopy(config["evaluation"])
    evaluation["resources"]["gpus"] = 1
    benchmark = {"path": str(problems), "split": "test", "question_field": "question", "answer_field": "answer",
                 "answer_format": "gsm8k"}
    with pytest.raises(InputError, match="evaluation.resources.gpus"):
        run_evaluate({"name": "tiny", "id": "x/y", "path": None}, None, "bench", benchmark, evaluation,
                     str(tmp_path / "out.json"))


# ------------------------------------------------------------------ CUDA 12 envs, offline clusters, retries (issue 19)

import math  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from pgrpo.grpo import doctor as d  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: GPU rules whose shell does not start with common.smk's gpu_prelude yet (guard, doctor, the offline HF_HOME): each
#: listed rule is checked to lack it (strict, as tests/test_envs.py's PENDING_RULE_CHANGES): once its prelude is
#: added the entry must go.
PENDING_PRELUDE: dict[str, str] = {}  # GPU rules without the prelude yet: none


def test_a_570_driver_runs_the_cuda_12_envs_and_is_told_to_choose_them_under_13():
    # NVIDIA's minimum drivers (CUDA minor-version compatibility): 12.x >= 525.60.13, 13.x >= 580.65.06
    assert d.check_driver("570.133.20", "12.9", "12").status == "PASS"
    refused = d.check_driver("570.133.20", "13.0", "13")
    assert refused.status == "FAIL" and 'set software.cuda: "12"' in refused.problem and "580.65.6" in refused.problem
    assert d.check_driver("520.61.05", "12.9", "12").status == "FAIL"  # older than any CUDA 12 driver
    assert d.check_driver("520.61.05", "12.9", "12").problem.endswith("(update the driver)")
    # a CUDA 13 torch inside an env that software.cuda says is the CUDA 12 one: named, not a silent CPU run
    mixed = d.check_driver("570.133.20", "13.0", "12")
    assert mixed.status == "FAIL" and "envs/*-cu12.yaml" in mixed.problem
    assert d.check_driver("590.1", "13.0", 13).status == "PASS"


def _dry_run(tmp_path, config, *extra):
    from tests.test_slurm import dry_run, parse_dry_run

    result = dry_run(REPO, tmp_path, config, *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    return parse_dry_run(result.stdout)


@pytest.fixture(scope="module")
def paper_jobs(tmp_path_factory):
    """The paper grid's dry run under --profile slurm, at attempt 1 and 2."""
    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    return {attempt: _dry_run(tmp_path_factory.mktemp(f"attempt{attempt}"), config, "--attempt", str(attempt))
            for attempt in (1, 2)}


@pytest.mark.slow
def test_the_paper_grid_prefetches_on_the_login_node_and_runs_every_gpu_job_offline(paper_jobs):
    jobs = paper_jobs[1]
    home = re.escape(str(Path("hf_home").name))
    (prefetch,) = [j for j in jobs if j["rule"] == "prefetch"]
    assert prefetch["output"] == ["results/prefetch/manifest.json"]
    assert re.match(rf"HF_HOME=/\S+/{home} HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 PYTHONPATH=workflow python -m "
                    "pgrpo prefetch ", prefetch["shell"]), prefetch["shell"][:200]
    gpu_jobs = [j for j in jobs if j["resources"].get("gpu", "0") not in ("0", "")]
    assert {j["rule"] for j in gpu_jobs} >= {"train", "evaluate"}
    hf_home = re.search(r"HF_HOME=(\S+) ", prefetch["shell"])[1]
    pending = [j for j in gpu_jobs if j["rule"] in PENDING_PRELUDE]
    assert all("HF_HUB_OFFLINE" not in j["shell"] for j in pending), "prelude added: remove it from PENDING_PRELUDE"
    for job in (j for j in gpu_jobs if j["rule"] not in PENDING_PRELUDE):
        # the doctor and the job itself read the cache the login node filled, offline
        assert job["shell"].count(f"HF_HOME={hf_home} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ") == 2, job["rule"]
        assert "--cuda 13" in job["shell"], job["rule"]
        # exit 2 (a bad input, a failed doctor) is never retried
        assert "not retried: an earlier attempt exited 2" in job["shell"], job["rule"]
    # what reads a model by id waits for the manifest
    train = [j for j in jobs if j["rule"] == "train"]
    assert len(train) == 12


def test_the_prefetch_and_small_rules_are_local_rules():
    """Under --profile slurm a local rule runs on the login node (a dry run prints no mark of it: the declaration is
    read). prepare_benchmark joins them on an offline cluster."""
    text = (REPO / "workflow" / "rules" / "prefetch.smk").read_text()
    blocks = re.findall(r"^( *)localrules:\n((?:\1 +\w+,\n)+)", text, re.M)
    always, offline = [re.findall(r"\w+", names) for _, names in blocks]
    assert "prefetch" in always and "aggregate_seeds" in always and "fit_laws" in always
    assert not {"train", "evaluate", "kref_train", "prepare_benchmark"} & set(always)
    assert offline == ["prepare_benchmark"] and "if cluster_offline():" in text
    rules = {m for p in (REPO / "workflow" / "rules").glob("*.smk")
             for m in re.findall(r"^rule (\w+):", p.read_text(), re.M)}
    assert set(always) <= rules


@pytest.mark.slow
def test_every_job_asks_for_more_memory_on_its_next_attempt(paper_jobs):
    """retries.mem_factor (1.5) on every rule's mem_mb, CPU rules included: attempt 2 asks ceil(1.5 x attempt 1)."""
    def memory(jobs):
        return {(j["rule"], tuple(j["output"])): int(j["resources"]["mem_mb"]) for j in jobs if "mem_mb" in
                j["resources"]}

    first, second = memory(paper_jobs[1]), memory(paper_jobs[2])
    assert first.keys() == second.keys() and len(first) > 100
    for key, mem in first.items():
        assert second[key] == math.ceil(mem * 1.5), key
    assert {rule for rule, _ in first} >= {"verify_symbolic", "aggregate_seeds", "prepare_benchmark", "prefetch",
                                            "train", "evaluate"}


def test_the_cpu_default_runs_online_with_no_prefetch(tmp_path):
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    jobs = _dry_run(tmp_path, config)
    assert jobs and "prefetch" not in {j["rule"] for j in jobs}
    assert not [j["rule"] for j in jobs if "HF_HUB_OFFLINE" in j["shell"] or "HF_HOME" in j["shell"]]


def test_offline_without_a_cache_is_refused_naming_the_key(tmp_path):
    from tests.test_slurm import dry_run

    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    config["cluster"] = {"offline": True, "hf_home": None}
    result = dry_run(REPO, tmp_path, config)
    assert result.returncode != 0 and "cluster.offline: true needs cluster.hf_home" in result.stderr
