"""Offline clusters (issue 19, item 7): ``pgrpo prefetch`` fills the Hugging Face cache on the login node and writes a
manifest; ``pgrpo doctor`` names what an offline job would miss. No network: local paths, fetchers that stand in for
the hub, and a hub cache laid out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgrpo.config import load_config
from pgrpo.errors import InputError
from pgrpo.stages import doctor
from pgrpo.stages.prefetch import prefetch_items, run_prefetch

REPO = Path(__file__).resolve().parents[1]


def test_the_paper_grid_prefetches_its_three_models_and_gsm8k():
    items = prefetch_items(load_config(REPO / "config" / "paper.yaml"))
    models = [i["id"] for i in items if i["kind"] == "model"]
    assert models == ["nvidia/Nemotron-Mini-4B-Instruct", "deepseek-ai/deepseek-llm-7b-chat",
                      "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"]
    datasets = {i["key"]: (i["id"], i["config"], i["split"]) for i in items if i["kind"] == "dataset"}
    assert datasets == {"data.train": ("openai/gsm8k", "main", "train"), "data.eval": ("openai/gsm8k", "main", "test")}


def test_the_manifest_lists_local_and_fetched_items(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    data_file = tmp_path / "train.jsonl"
    data_file.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    fetched = []

    def fake_model(item):
        fetched.append(item["id"])
        return {"snapshot": str(tmp_path / "hf" / "hub" / "snap"), "files": 3, "bytes": 1234}

    def fake_dataset(item):
        fetched.append(item["id"])
        return {"loaded_from": f"{item['id']}[{item['config']}:{item['split']}]", "rows": 7, "cache_files": []}

    items = [
        {"kind": "model", "key": "models.tiny", "id": None, "path": str(model_dir)},
        {"kind": "model", "key": "models.later", "id": None, "path": str(tmp_path / "built-later")},
        {"kind": "model", "key": "models.hub", "id": "org/model", "path": None, "revision": "abc"},
        {"kind": "dataset", "key": "data.train", "id": None, "path": str(data_file), "split": "train"},
        {"kind": "dataset", "key": "data.eval", "id": "org/data", "path": None, "config": "main", "split": "test"},
    ]
    manifest = tmp_path / "results" / "prefetch" / "manifest.json"
    result = run_prefetch(items, str(manifest), fetch_model=fake_model, fetch_dataset=fake_dataset)
    assert fetched == ["org/model", "org/data"]  # local paths are never fetched
    written = json.loads(manifest.read_text())
    assert written == result and written["hf_home"] == str((tmp_path / "hf").resolve())
    by_key = {r["key"]: r for r in written["items"]}
    assert by_key["models.tiny"]["source"] == "path" and by_key["models.tiny"]["present"] is True
    assert by_key["models.later"]["present"] is False  # a model the workflow builds after the prefetch
    assert by_key["models.hub"] == {"kind": "model", "key": "models.hub", "id": "org/model", "revision": "abc",
                                    "source": "hub", "present": True, "snapshot": str(tmp_path / "hf" / "hub" / "snap"),
                                    "files": 3, "bytes": 1234}
    assert by_key["data.train"]["source"] == "path"
    assert by_key["data.eval"]["rows"] == 7 and by_key["data.eval"]["loaded_from"] == "org/data[main:test]"
    assert by_key["data.eval"]["source"] == "hub"


def test_every_item_that_cannot_be_fetched_is_named_and_no_manifest_is_written(tmp_path):
    def offline(item):
        raise OSError(f"cannot reach the hub for {item['id']}\nmore lines")

    items = [{"kind": "model", "key": "models.a", "id": "org/a"}, {"kind": "dataset", "key": "data.train",
                                                                   "id": "org/d", "split": "train"}]
    manifest = tmp_path / "manifest.json"
    with pytest.raises(InputError) as error:
        run_prefetch(items, str(manifest), fetch_model=offline, fetch_dataset=offline)
    assert "models.a.id 'org/a': cannot reach the hub for org/a;" in str(error.value)
    assert "data.train.id 'org/d'" in str(error.value) and "more lines" not in str(error.value)
    assert not manifest.exists()


def test_the_real_dataset_fetch_loads_the_table_as_the_training_job_does(tmp_path):
    """fetch_dataset goes through pgrpo.grpo.data.load_table, the job's own call (here on a local file; a hub id
    goes through the same load_dataset)."""
    pytest.importorskip("datasets")
    from pgrpo.stages.prefetch import fetch_dataset

    data_file = tmp_path / "train.jsonl"
    data_file.write_text("".join(json.dumps({"question": f"{i}+1?", "answer": f"#### {i + 1}"}) + "\n"
                                 for i in range(5)))
    record = fetch_dataset({"key": "data.train", "path": str(data_file), "split": "train"})
    assert record["rows"] == 5 and record["loaded_from"] == str(data_file)


def _cache_model(hub_cache: Path, repo_id: str) -> None:
    """A hub-cache snapshot of ``repo_id`` as huggingface_hub lays it out (refs/main -> snapshots/<commit>)."""
    root = hub_cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    (root / "snapshots" / commit).mkdir(parents=True)
    (root / "snapshots" / commit / "config.json").write_text(json.dumps(
        {"hidden_size": 2048, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 2}))


def test_doctor_names_the_model_missing_from_the_offline_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    hub_cache = tmp_path / "hf" / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    _cache_model(hub_cache, "org/cached")
    facts = {"cuda_available": True, "device_count": 1, "torch_cuda": "12.9", "driver": "570.133.20", "bf16": True,
             "gpu_memory": 80e9}
    evaluation = load_config(REPO / "config" / "paper.yaml")["evaluation"]
    models = {"cached": {"name": "cached", "id": "org/cached", "params_b": 1.78},
              "missing": {"name": "missing", "id": "org/not-fetched", "params_b": 1.78}}
    checks = doctor.job_checks(facts, models, training=None, evaluation=evaluation, data=None, runs_per_model=1,
                               results_dir=str(tmp_path), cuda="12")
    cache = next(c for c in checks if c.name == "cache")
    assert cache.status == "FAIL"
    assert "model org/not-fetched" in cache.problem and "org/cached" not in cache.problem
    _cache_model(hub_cache, "org/not-fetched")  # prefetched: the same check passes
    checks = doctor.job_checks(facts, models, training=None, evaluation=evaluation, data=None, runs_per_model=1,
                               results_dir=str(tmp_path), cuda="12")
    assert next(c for c in checks if c.name == "cache").status == "PASS"


def test_doctor_finds_a_dataset_prepared_in_the_datasets_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    assert not doctor.dataset_present({"id": "openai/gsm8k"})
    prepared = tmp_path / "hf" / "datasets" / "openai___gsm8k" / "main"  # what load_dataset leaves
    prepared.mkdir(parents=True)
    assert doctor.dataset_present({"id": "openai/gsm8k"})
