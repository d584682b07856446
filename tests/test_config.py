"""Config validation (config/schema.yaml + pgrpo.config): each bad input stops the run naming the key."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys

import pytest
import yaml
from pgrpo.config import load_config, validate_config
from pgrpo.errors import InputError


@pytest.fixture()
def default_config(repo_root):
    with open(repo_root / "config" / "config.yaml") as handle:
        return yaml.safe_load(handle)


@pytest.fixture()
def paper_config(repo_root):
    with open(repo_root / "config" / "paper.yaml") as handle:
        return yaml.safe_load(handle)


def test_shipped_configs_are_valid(repo_root):
    for name in ("config.yaml", "paper.yaml"):
        config = load_config(repo_root / "config" / name)
        assert config["group_sizes"] == [4, 16]
        assert config["seeds"] == [42, 3407]


def test_paper_config_has_the_papers_grid(paper_config):
    config = validate_config(paper_config)
    assert set(m["id"] for m in config["models"].values()) == {
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        "deepseek-ai/deepseek-llm-7b-chat",
        "nvidia/Nemotron-Mini-4B-Instruct",
    }
    assert config["data"]["train"]["id"] == "openai/gsm8k" and config["data"]["train"]["config"] == "main"
    assert len(config["benchmarks"]) == 8
    training = config["training"]
    # Table 2
    assert training["learning_rate"] == pytest.approx(1e-5)
    assert training["num_train_epochs"] == 2
    assert training["per_device_train_batch_size"] == 4
    assert training["gradient_accumulation_steps"] == 4
    assert training["temperature"] == pytest.approx(0.8)
    assert training["max_prompt_length"] == 256
    assert training["max_completion_length"] == 786
    assert training["logging_steps"] == 1
    assert training["eval_steps"] == 100
    assert training["beta"] == pytest.approx(0.005)
    assert training["epsilon"] == pytest.approx(0.2)
    assert training["lora"]["r"] == 16 and training["lora"]["alpha"] == 64
    assert training["lora"]["dropout"] == pytest.approx(0.05)
    assert set(training["lora"]["target_modules"]) == {
        "q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"}
    assert training["merge_adapters"] is True


def _error(config) -> str:
    with pytest.raises(InputError) as info:
        validate_config(config)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_wrong_type_names_the_key(default_config):
    default_config["seeds"] = "42"
    assert "'seeds'" in _error(default_config)


def test_unknown_key_names_the_key(default_config):
    default_config["trainig"] = {}
    assert "'trainig'" in _error(default_config)


def test_unknown_nested_key_names_the_key(default_config):
    default_config["data"]["train"]["question_feld"] = "q"
    assert "data.train.question_feld" in _error(default_config)


def test_negative_group_size_names_the_key(default_config):
    default_config["group_sizes"] = [4, -16]
    message = _error(default_config)
    assert "group_sizes.1" in message and "-16" in message


def test_model_without_id_or_path_names_the_model(default_config):
    default_config["models"]["other"] = {"id": None, "path": None}
    message = _error(default_config)
    assert "models.other" in message and "id" in message and "path" in message


def test_benchmark_without_its_fields_names_the_field(paper_config):
    del paper_config["benchmarks"]["math-500"]["answer_field"]
    assert "benchmarks.math-500.answer_field" in _error(paper_config)


def test_benchmark_without_a_source_names_the_benchmark(paper_config):
    paper_config["benchmarks"]["math-500"]["id"] = None
    assert "benchmarks.math-500" in _error(paper_config)


def test_group_size_that_does_not_divide_the_batch(default_config):
    config = copy.deepcopy(default_config)
    config["group_sizes"] = [3]
    assert "G=3" in _error(config)


def test_missing_config_file_is_one_line(tmp_path):
    with pytest.raises(InputError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def _snakemake(repo_root, *args, timeout=120):
    exe = shutil.which("snakemake") or str(repo_root / ".venv" / "bin" / "snakemake")
    return subprocess.run([exe, *args], cwd=repo_root, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_dry_run_succeeds_on_both_configs(repo_root, name):
    result = _snakemake(repo_root, "-n", "--forceall", "--cores", "2", "--configfile", f"config/{name}")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "rule train:" in result.stdout and "rule verify_symbolic:" in result.stdout


def test_bad_config_stops_snakemake_before_any_job_with_one_line(repo_root, tmp_path, default_config):
    default_config["group_sizes"] = [4, -16]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(default_config))
    result = _snakemake(repo_root, "-n", "--cores", "1", "--configfile", str(bad))
    assert result.returncode != 0
    lines = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and not line.startswith("Using workflow specific profile")
    ]
    assert len(lines) == 1, lines
    assert "group_sizes.1" in lines[0]
    assert "Job stats" not in result.stdout


def test_cli_validate_reports_one_line(tmp_path, default_config):
    default_config["seeds"] = [-1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(default_config))
    result = subprocess.run([sys.executable, "-m", "pgrpo", "validate", str(bad)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "seeds.0" in result.stderr


def test_snakemake_lint_reports_nothing(repo_root):
    result = _snakemake(repo_root, "--lint")
    assert result.returncode == 0
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def test_snakefmt_leaves_the_rules_unchanged(repo_root):
    exe = shutil.which("snakefmt") or str(repo_root / ".venv" / "bin" / "snakefmt")
    files = ["Snakefile", *sorted(str(p.relative_to(repo_root)) for p in (repo_root / "workflow" / "rules").glob("*.smk"))]
    result = subprocess.run([exe, "--check", *files], cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_cli_verb_has_help():
    from pgrpo.cli import VERBS, build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "verb")
    assert set(VERBS) == set(subparsers.choices)
    for name in VERBS:
        result = subprocess.run([sys.executable, "-m", "pgrpo", name, "--help"], capture_output=True, text=True)
        assert result.returncode == 0 and "usage:" in result.stdout, name


@pytest.mark.parametrize("value, kwargs, expected", [
    ([0, 1], {}, (0.0, 1.0)),
    ((-2.5, 8.5), {}, (-2.5, 8.5)),
    (("0", "6"), {"text_ok": True}, (0.0, 6.0)),
    (None, {"null_ok": True}, None),
])
def test_a_declared_range_is_two_finite_numbers_lo_below_hi(value, kwargs, expected):
    from pgrpo.errors import range_bounds

    assert range_bounds(value, "k", **kwargs) == expected


@pytest.mark.parametrize("value, kwargs", [
    ([1, 0], {}), ([1, 1], {}), ([0, float("inf")], {}), ([0, float("nan")], {}), ([0], {}), ([0, 1, 2], {}),
    (None, {}), ("01", {}), ([True, 2], {}), (["0", "1"], {}), (["a", "1"], {"text_ok": True}), ({"lo": 0}, {}),
    ({"lo": 0, "hi": 1}, {}),
])
def test_anything_else_as_a_range_is_an_input_error_naming_where(value, kwargs):
    from pgrpo.errors import InputError, range_bounds

    with pytest.raises(InputError, match=r"^ranges\.json 'x': must be .*two finite numbers LO < HI, got "):
        range_bounds(value, "ranges.json 'x'", **kwargs)
