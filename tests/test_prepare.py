"""Benchmarks prepared once (rule prepare_benchmark): the local ``path`` route, the hub route (``load_dataset`` on a
dataset folder laid out as on the hub, the real ``datasets`` code), streaming, the filters and the seeded sample."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

from pgrpo.errors import InputError  # noqa: E402
from pgrpo.grpo.benchmarks import select_rows  # noqa: E402
from pgrpo.stages.prepare import PREPARED_FIELDS, meta_path, read_prepared, run_prepare_benchmark  # noqa: E402

GSM_PLUS_LIKE = [
    {"question": "Ann has 3 pens and buys 4. How many pens?", "answer": "7", "perturbation_type": "numerical"},
    {"question": "Ben has some cups. How many cups?", "answer": "None", "perturbation_type": "critical thinking"},
    {"question": "Cara has 2 coins and finds 5. How many coins?", "answer": "7", "perturbation_type": "reversing"},
    {"question": "Dan has eggs. How many did he eat?", "answer": "None", "perturbation_type": "critical thinking"},
    {"question": "Eve has 10 toys and loses 2. How many toys?", "answer": "8", "perturbation_type": "distraction"},
]


def gsm_plus_spec(**overrides) -> dict:
    spec = {"question_field": "question", "answer_field": "answer", "answer_format": "number", "split": "test"}
    spec.update(overrides)
    return spec


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_local_path_is_validated_and_converted_with_the_none_golds_dropped(tmp_path):
    source = tmp_path / "gsm_plus.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in GSM_PLUS_LIKE))
    out = tmp_path / "prepared" / "gsm-plus.jsonl"
    record = run_prepare_benchmark("gsm-plus", gsm_plus_spec(path=str(source)), str(out), seed=0)
    rows = read_lines(out)
    assert [tuple(r) for r in rows] == [PREPARED_FIELDS] * 3
    assert [(r["index"], r["gold"]) for r in rows] == [(0, "7"), (2, "7"), (4, "8")]
    assert record["excluded"] == {"no_gold": 2} and record["n_source"] == 5 and record["n_problems"] == 3
    meta = json.loads(meta_path(out).read_text())
    assert meta["source"] == str(source) and meta["seed"] == 0
    problems = read_prepared(str(out), "gsm-plus")
    assert problems.golds == ("7", "7", "8") and problems.indices == (0, 2, 4) and problems.n_excluded == 2


def test_the_sample_is_the_k_smallest_seeded_keys_of_the_scorable_rows():
    """Checked against a brute-force sort of every scorable row by blake2b("seed:index")."""
    rows = [(i, f"Question {i}?", f"#### {i}" if i % 5 else "no final answer") for i in range(200)]
    kept, excluded, n_rows = select_rows(iter(rows), "gsm8k", False, 17, seed=3)
    scorable = [i for i in range(200) if i % 5]

    def key(i):
        return int.from_bytes(hashlib.blake2b(f"3:{i}".encode(), digest_size=8).digest(), "big")

    assert [i for i, _, _ in kept] == sorted(sorted(scorable, key=key)[:17])
    assert [g for _, _, g in kept] == [str(i) for i, _, _ in kept]
    assert excluded == {"no_gold": 40} and n_rows == 200
    other, _, _ = select_rows(iter(rows), "gsm8k", False, 17, seed=4)
    assert [i for i, _, _ in other] != [i for i, _, _ in kept]  # the seed matters
    everything, _, _ = select_rows(iter(rows), "gsm8k", False, None, seed=3)
    assert [i for i, _, _ in everything] == scorable  # no max_examples: every scorable row, source order


def write_hub_layout(root: Path, test_rows: list[dict], train_rows: int) -> Path:
    """A dataset folder as the hub lays one out (data/{split}-00000-of-00001.parquet); load_dataset(folder, ...)
    resolves it through the same builder code as a hub id."""
    (root / "data").mkdir(parents=True)
    datasets.Dataset.from_list(test_rows).to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    train = [{"question": f"Train question {i}?", "answer": str(i), "perturbation_type": "numerical"}
             for i in range(train_rows)]
    datasets.Dataset.from_list(train).to_parquet(str(root / "data" / "train-00000-of-00001.parquet"))
    return root


def arrow_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*.arrow"))


def test_hub_route_streams_only_its_split(tmp_path, monkeypatch):
    """``streaming: true`` reads the test split alone; without it ``load_dataset(id, split="test")`` prepares the
    train split too (what made OpenMathInstruct-2 cost 22M rows)."""
    hub = write_hub_layout(tmp_path / "qintongli--GSM-Plus", GSM_PLUS_LIKE, train_rows=500)
    cache = tmp_path / "hf_datasets_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    streamed = tmp_path / "streamed.jsonl"
    record = run_prepare_benchmark("gsm-plus", gsm_plus_spec(id=str(hub), streaming=True, max_examples=2),
                                   str(streamed), seed=5)
    assert arrow_files(cache) == []  # nothing prepared, not even the test split
    assert record["n_source"] == 5 and record["excluded"] == {"no_gold": 2} and record["n_problems"] == 2
    whole = tmp_path / "whole.jsonl"
    run_prepare_benchmark("gsm-plus", gsm_plus_spec(id=str(hub), streaming=False, max_examples=2), str(whole),
                          seed=5)
    assert any(name.endswith("-train.arrow") for name in arrow_files(cache))  # every split was prepared
    assert read_lines(streamed) == read_lines(whole)  # the same sample whether streamed or read whole


def test_saved_dataset_directory_and_parquet_give_the_same_problems(tmp_path):
    rows = [{"problem": f"Compute {i} + 1.", "solution": f"It is \\boxed{{{i + 1}}}."} for i in range(30)]
    rows[7] = {"problem": "Prove that there are infinitely many primes.", "solution": "Suppose not. \\boxed{}"}
    saved = tmp_path / "saved"
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(saved))
    parquet = tmp_path / "numina.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(parquet))
    spec = {"question_field": "problem", "answer_field": "solution", "answer_format": "boxed", "exclude_proofs": True,
            "split": "test", "max_examples": 10}
    a = run_prepare_benchmark("numinamath", dict(spec, path=str(saved)), str(tmp_path / "a.jsonl"), seed=1)
    b = run_prepare_benchmark("numinamath", dict(spec, path=str(parquet), streaming=True),
                              str(tmp_path / "b.jsonl"), seed=1)
    assert read_lines(tmp_path / "a.jsonl") == read_lines(tmp_path / "b.jsonl")
    assert a["excluded"] == b["excluded"] == {"no_gold": 1}  # the proof: its box is empty
    assert all(r["index"] != 7 for r in read_lines(tmp_path / "a.jsonl"))


def test_errors_name_the_key_or_the_file(tmp_path):
    source = tmp_path / "b.jsonl"
    source.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2"}) + "\n")
    with pytest.raises(InputError, match=r"benchmarks\.b\.question_field: column 'problem'"):
        run_prepare_benchmark("b", gsm_plus_spec(path=str(source), question_field="problem"),
                              str(tmp_path / "o.jsonl"))
    with pytest.raises(InputError, match=r"benchmarks\.b\.streaming"):
        run_prepare_benchmark("b", gsm_plus_spec(path=str(source), streaming="yes"), str(tmp_path / "o.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"index": 0, "question": "q"}) + "\n")
    with pytest.raises(InputError, match="no 'gold' field"):
        read_prepared(str(bad), "b")
    with pytest.raises(InputError, match="run rule prepare_benchmark"):
        read_prepared(str(tmp_path / "missing.jsonl"), "b")


def test_cli_prepares_a_benchmark_of_a_config(tmp_path):
    source = tmp_path / "gsm_plus.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in GSM_PLUS_LIKE))
    out = tmp_path / "x.jsonl"
    spec = json.dumps(gsm_plus_spec(path=str(source)))
    result = subprocess.run([sys.executable, "-m", "pgrpo", "prepare-benchmark", "--benchmark", "gsm-plus",
                             "--benchmark-json", spec, "--seed", "0", "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "3 problems of 5 rows" in result.stdout and "no_gold" in result.stdout
    assert len(read_lines(out)) == 3


def test_paper_grid_dry_run_prepares_each_benchmark_once_and_warns_of_no_raw_chat_prompt(repo_root):
    import shutil

    import yaml

    exe = shutil.which("snakemake") or str(repo_root / ".venv" / "bin" / "snakemake")
    result = subprocess.run([exe, "-n", "--forceall", "--nolock", "--cores", "2", "--configfile", "config/paper.yaml"],
                            cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    names = yaml.safe_load((repo_root / "config" / "paper.yaml").read_text())["benchmarks"]
    prepared = {line.split("=", 1)[1].strip() for line in result.stdout.splitlines()
                if line.strip().startswith("wildcards: benchmark=")}
    assert prepared == set(names)
    stats = dict(line.split()[:2] for line in result.stdout.splitlines()
                 if line.split()[:1] in (["prepare_benchmark"], ["evaluate"]) and len(line.split()) == 2)
    assert stats == {"prepare_benchmark": "8", "evaluate": "120"}
    assert "chat template" not in result.stderr  # every chat model is prompted through its template
