"""Retries that help (issue 19, item 8): memory and an evaluation's runtime grow with Snakemake's attempt, and a job
whose attempt exited 2 is not run again by a retry (a real bash run of the guard the GPU rules start with)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgrpo.grpo.doctor import attempt_mem_mb, attempt_runtime, input_error_guard

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("attempt, mem, capped", [(1, 64000, 64000), (2, 96000, 96000), (3, 144000, 128000)])
def test_memory_grows_1_5_per_attempt(attempt, mem, capped):
    assert attempt_mem_mb(64000, attempt) == mem
    assert attempt_mem_mb(64000, attempt, cap=128000) == capped


@pytest.mark.parametrize("attempt, minutes, capped", [(1, 14, 14), (2, 21, 21), (3, 32, 30)])
def test_evaluation_runtime_grows(attempt, minutes, capped):
    assert attempt_runtime(14, attempt) == minutes  # 14 x 1.5^2 = 31.5 -> 32
    assert attempt_runtime(14, attempt, cap=30) == capped


def test_rules_wire_the_attempt():
    common = (REPO / "workflow/rules/common.smk").read_text()
    assert "onstart:\n    clear_input_errors()" in common
    assert "runtime=evaluation_runtime" in (REPO / "workflow/rules/evaluate.smk").read_text()
    train = (REPO / "workflow/rules/train.smk").read_text()
    assert "mem_mb=attempt_mem(training_mem_mb())" in train and "job_runtime(\"training\"" in train


def _job(tmp_path: Path, guard: str, exit_code: int) -> subprocess.CompletedProcess:
    """One attempt, as Snakemake runs a rule's shell (bash, set -euo pipefail): the command counts its runs."""
    command = (f"{guard}echo ran >> {tmp_path}/runs; echo 'pgrpo train: error: data.train: missing' "
               f"> {tmp_path}/job.log; exit {exit_code}")
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {command}"], capture_output=True, text=True,
                          timeout=60)


def _runs(tmp_path):
    return len((tmp_path / "runs").read_text().splitlines())


def test_exit_2_leaves_a_marker_and_a_retry_stops_at_once(tmp_path):
    marker = tmp_path / "input_errors" / "train" / "tiny" / "G4" / "seed42"
    guard = input_error_guard(str(marker), [str(tmp_path / "job.log"), str(tmp_path / "job.log.doctor")],
                              "rule train")
    first = _job(tmp_path, guard, 2)
    assert first.returncode == 2 and marker.is_file()
    assert "pgrpo train: error: data.train: missing" in marker.read_text()
    retry = _job(tmp_path, guard, 2)  # attempt 2 of the same run: the command does not run
    assert retry.returncode == 2 and _runs(tmp_path) == 1
    assert "rule train: not retried" in retry.stderr and "data.train: missing" in retry.stderr
    shutil.rmtree(tmp_path / "input_errors")  # a fresh snakemake run (onstart: clear_input_errors)
    again = _job(tmp_path, guard, 0)
    assert again.returncode == 0 and _runs(tmp_path) == 2 and not marker.exists()


def test_other_failures_are_retried(tmp_path):
    marker = tmp_path / "m"
    guard = input_error_guard(str(marker), [str(tmp_path / "job.log")], "rule evaluate")
    assert _job(tmp_path, guard, 1).returncode == 1 and not marker.exists()  # e.g. an OOM: worth a retry
    assert _job(tmp_path, guard, 1).returncode == 1 and _runs(tmp_path) == 2


def test_snakemake_retries_stop_at_once_and_a_fresh_run_tries_again(tmp_path):
    """A real Snakemake run with `retries: 2` of a rule that exits 2: attempts 2 and 3 do not run the command; the
    next run (its onstart clears the markers, as common.smk's does) runs it again."""
    (tmp_path / "Snakefile").write_text(f'''
import shutil, sys
sys.path.insert(0, {str(REPO / "workflow")!r})
from pgrpo.grpo.doctor import input_error_guard

onstart:
    shutil.rmtree("errors", ignore_errors=True)

rule bad_input:
    output: "out.txt"
    log: "job.log"
    retries: 2
    params: guard=input_error_guard("errors/bad_input", ["job.log"], "rule bad_input")
    shell: "{{params.guard}}echo ran >> runs; echo 'pgrpo train: error: data.train: missing' > {{log}}; exit 2"
''')
    snakemake = [str(Path(sys.executable).parent / "snakemake"), "--cores", "1", "-d", str(tmp_path)]
    for expected_runs in (1, 2):
        done = subprocess.run(snakemake, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0
        assert _runs(tmp_path) == expected_runs, done.stderr[-2000:]
        assert "rule bad_input: not retried" in done.stderr


def test_a_pgrpo_command_that_exited_2_exits_2_at_once_when_run_again(tmp_path, monkeypatch, capsys):
    """CPU jobs too (every rule's shell exports PGRPO_INPUT_ERRORS): the same command exits 2 at once with the first
    message, without running its verb; other arguments run; without the variable nothing is recorded."""
    from pgrpo import cli, input_errors

    monkeypatch.chdir(tmp_path)
    calls = []
    bad = ["validate", str(tmp_path / "missing.yaml")]

    def failing(args):
        calls.append(args.verb)
        raise cli.InputError(f"config file not found: {args.config}")

    monkeypatch.setitem(cli.VERBS, "validate", failing)
    assert cli.main(bad) == 2 and calls == ["validate"]
    assert not (tmp_path / "markers").exists()  # not enabled: nothing recorded, a rerun runs again
    monkeypatch.setenv(input_errors.ENV, str(tmp_path / "markers"))
    assert cli.main(bad) == 2 and calls == ["validate"] * 2
    capsys.readouterr()
    assert cli.main(bad) == 2 and calls == ["validate"] * 2  # the retry: the verb did not run
    assert "not retried" in capsys.readouterr().err and "config file not found" in (
        next((tmp_path / "markers").iterdir()).read_text())
    assert cli.main(["validate", str(tmp_path / "other.yaml")]) == 2 and len(calls) == 3
    shutil.rmtree(tmp_path / "markers")  # a fresh snakemake run (onstart) clears them
    assert cli.main(bad) == 2 and len(calls) == 4
    with pytest.raises(SystemExit):  # bad arguments are a bad input too: argparse exits 2, the retry at once
        cli.main(["validate", "--no-such-option"])
    assert cli.main(["validate", "--no-such-option"]) == 2
    assert "not retried" in capsys.readouterr().err


def test_every_rule_shell_exports_the_marker_folder():
    text = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert 'shell.prefix(f"set -euo pipefail; export PGRPO_INPUT_ERRORS={INPUT_ERRORS}/commands; ")' in text
