"""Reading any run's log from disk, in every format a GRPO user saves (the input of ``aggregate``, ``forecast`` and
``diagnose``): the workflow's ``log.csv``; a TRL ``trainer_state.json``; a bare ``log_history`` list saved as JSON;
a TRL output folder (its ``trainer_state.json``, else the one of its latest ``checkpoint-N/``); a CSV of TRL or
W&B names (``train/reward``, ``eval/reward``, a W&B export's ``Step`` and ``<run> - <key>`` columns).

The rows are normalised by :func:`pgrpo.grpo.run_log.normalize_log`. A file that is not a log, an empty log, or one
whose steps go backwards or repeat with other values gives one :class:`~pgrpo.errors.InputError` line naming the
file (the CLI exits with status 2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from pgrpo.errors import InputError
from pgrpo.grpo.run_log import frame_from_log_history, normalize_log

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def resolve_log_path(path: str | Path) -> Path:
    """The file behind ``path``: the path itself, or for a folder its ``trainer_state.json`` / ``log.csv``, else the
    ``trainer_state.json`` of its latest ``checkpoint-N`` (TRL's output folder)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        raise InputError(f"log not found: {path}")
    for name in ("trainer_state.json", "log.csv"):
        if (path / name).is_file():
            return path / name
    checkpoints = sorted(((int(m[1]), child) for child in path.iterdir()
                          if child.is_dir() and (m := _CHECKPOINT.match(child.name))
                          and (child / "trainer_state.json").is_file()), key=lambda pair: pair[0])
    if not checkpoints:
        raise InputError(f"log folder {path} has no trainer_state.json, log.csv or checkpoint-N/trainer_state.json")
    return checkpoints[-1][1] / "trainer_state.json"


def _json_frame(path: Path) -> pd.DataFrame:
    try:
        state = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"log {path} is not valid JSON: {str(error).splitlines()[0]}") from None
    if isinstance(state, list):
        return frame_from_log_history(state, str(path))
    if isinstance(state, dict) and isinstance(state.get("log_history"), list):
        return frame_from_log_history(state["log_history"], str(path))
    keys = ", ".join(list(state)[:8]) if isinstance(state, dict) else type(state).__name__
    raise InputError(f"log {path} is neither a TRL trainer_state.json (a 'log_history' list) nor a bare log_history "
                     f"list (found: {keys})")


def _csv_frame(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise InputError(f"log {path} is not a readable CSV: {str(error).splitlines()[0]}") from None


def read_run_log(path: str | Path) -> pd.DataFrame:
    """A run's per-step log, one row per step, under the workflow's column names (see the module docstring)."""
    file = resolve_log_path(path)
    if file.suffix == ".json":
        frame = _json_frame(file)
    else:
        frame = _csv_frame(file)
    return normalize_log(frame, str(file))
