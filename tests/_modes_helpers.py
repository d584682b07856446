"""What the failure-mode tests share (tests/test_modes_*.py; pgrpo.diagnose.modes): the planted logs of
pgrpo.diagnose.planted, a log written as a trainer_state.json, ``pgrpo diagnose``'s report of it, and the reports
of the planted logs (a module-scoped fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgrpo.diagnose.planted import SEED, planted_logs
from pgrpo.diagnose.settings import diagnostics_config
from pgrpo.stages.diagnose import diagnose_log

CASES = planted_logs(SEED)


def write_log(tmp_path: Path, name: str, history, **extra) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"log_history": history, **extra}))
    return path


def diagnose(path: Path, meta=None, **modes):
    config = diagnostics_config({"modes": modes} if modes else None)
    return diagnose_log(str(path), meta=meta, config=config)


@pytest.fixture(scope="module")
def planted_reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    return {name: diagnose(write_log(folder, name, case["log_history"]), case["meta"])
            for name, case in CASES.items()}
