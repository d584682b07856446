"""Reading any run's log from disk, in every format a GRPO user saves (the input of ``aggregate``, ``forecast`` and
``diagnose``): the workflow's ``log.csv``; a TRL ``trainer_state.json``; a bare ``log_history`` list saved as JSON;
a TRL output folder (its ``trainer_state.json``, else the one of its latest ``checkpoint-N/``, else its newest console
log); a training job's console output (any other file: a SLURM ``slurm-<id>.out``, a ``train.log``), in TRL's or
verl's layout (:mod:`pgrpo.grpo.console_log`); a CSV of TRL or W&B names (``train/reward``, ``eval/reward``, a W&B
export's ``Step`` and ``<run> - <key>`` columns). A W&B export of a panel with several runs holds one ``<run> - <key>`` column per run: ``FILE::RUN`` reads run ``RUN`` of it
(:data:`RUN_SEPARATOR`), :func:`log_runs` lists them (how ``pgrpo forecast --compare FILE`` takes every run), and
the file alone is an error naming its runs, never a log whose columns come from different runs.

The rows are normalised by :func:`pgrpo.grpo.run_log.normalize_log`. A file that is not a log, an empty log, a row
without a step, steps that go backwards or a quantity logged twice at one step, and NaN or infinite values give one
:class:`~pgrpo.errors.InputError` line naming the file (the CLI exits with status 2). With ``allow_non_finite`` the
NaN/infinite values are read as missing and listed, per column, in ``frame.attrs["non_finite"]`` (the steps), which
is how ``pgrpo diagnose --allow-nan`` reads a diverged run.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pgrpo.errors import InputError
from pgrpo.grpo.console_log import ConsoleLog, parse_console_log
from pgrpo.grpo.run_log import frame_from_log_history, normalize_column, normalize_log, resume_note, wandb_runs

_NON_FINITE_TOKENS = frozenset({"nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"})

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

#: the files a folder's console logs are looked for in, when it has no trainer_state.json, log.csv or checkpoint
CONSOLE_PATTERNS: tuple[str, ...] = ("slurm-*.out", "*.out", "*.log")

#: the suffixes read as JSON and as CSV; a file with any other is read as a console log
JSON_SUFFIXES, CSV_SUFFIXES = (".json",), (".csv",)

#: ``FILE::RUN``: run ``RUN`` of a W&B export that holds several runs
RUN_SEPARATOR = "::"


def split_run(path: str | Path) -> tuple[str, str | None]:
    """``(file, run)`` of ``FILE::RUN``; ``(path, None)`` without a run."""
    text = str(path)
    if RUN_SEPARATOR in text:
        file, run = text.rsplit(RUN_SEPARATOR, 1)
        if file and run:
            return file, run
    return text, None


def resolve_log_path(path: str | Path) -> Path:
    """The file behind ``path``: the path itself, or for a folder its ``trainer_state.json`` / ``log.csv``, else the
    ``trainer_state.json`` of its latest ``checkpoint-N`` (TRL's output folder); a ``::RUN`` suffix (a run of a W&B
    export) is left out."""
    path = Path(split_run(path)[0])
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
    if checkpoints:
        return checkpoints[-1][1] / "trainer_state.json"
    for pattern in CONSOLE_PATTERNS:
        consoles = [child for child in path.glob(pattern) if child.is_file()]
        if consoles:
            return max(consoles, key=lambda child: (child.stat().st_mtime, child.name))
    raise InputError(f"log folder {path} has no trainer_state.json, log.csv, checkpoint-N/trainer_state.json or "
                     f"console log ({', '.join(CONSOLE_PATTERNS)})")


def _json_frame(path: Path) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    try:
        state = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"log {path} is not valid JSON: {str(error).splitlines()[0]}") from None
    history = None
    if isinstance(state, list):
        history = state
    elif isinstance(state, dict) and isinstance(state.get("log_history"), list):
        history = state["log_history"]
    if history is None:
        keys = ", ".join(list(state)[:8]) if isinstance(state, dict) else type(state).__name__
        raise InputError(f"log {path} is neither a TRL trainer_state.json (a 'log_history' list) nor a bare "
                         f"log_history list (found: {keys})")
    return frame_from_log_history(history, str(path)), _non_finite_in_history(history)


def _non_finite_in_history(history: list) -> dict[str, list[float]]:
    """Per column, the steps of a ``log_history``'s NaN or infinite values."""
    non_finite: dict[str, list[float]] = {}
    for entry in history:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if isinstance(value, float) and not math.isfinite(value) and key != "step":
                    non_finite.setdefault(normalize_column(key), []).append(entry.get("step"))
    return non_finite


def _csv_frame(path: Path, run: str | None = None) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    try:
        frame = pd.read_csv(path)
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise InputError(f"log {path} is not a readable CSV: {str(error).splitlines()[0]}") from None
    runs = wandb_runs(frame.columns)
    if run is not None or len(runs) > 1:
        if run is None:
            raise InputError(f"log {path} is a W&B export of {len(runs)} runs ({', '.join(runs)}): name one as "
                             f"{path}{RUN_SEPARATOR}{runs[0]}, or give the file to `pgrpo forecast --compare` to "
                             "rank them all")
        if run not in runs:
            raise InputError(f"log {path} has no W&B run '{run}' (its runs: {', '.join(runs) or 'none'})")
        keep = [c for c in frame.columns if " - " not in str(c) or str(c).startswith(f"{run} - ")]
        frame, text = frame.loc[:, keep], text.loc[:, keep]
    non_finite: dict[str, list[float]] = {}
    step_column = next((c for c in text.columns if normalize_column(str(c).split(" - ")[-1]) in
                        ("step", "global_step", "Step", "_step")), None)
    for column in text.columns:
        hits = text[column].str.strip().str.lower().isin(_NON_FINITE_TOKENS).to_numpy()
        if hits.any() and column != step_column:
            steps = (pd.to_numeric(text[step_column], errors="coerce").to_numpy()[hits] if step_column
                     else np.flatnonzero(hits) + 1)
            non_finite[normalize_column(str(column).split(" - ")[-1])] = [float(s) for s in steps]
    return frame, non_finite


#: the last console log parsed, by (path, mtime_ns, size): a watch's poll reads the log and then its planned length
_LAST_CONSOLE: dict[tuple[str, int, int], ConsoleLog | None] = {}


def read_console_log(path: Path) -> ConsoleLog:
    """A console log's history (:func:`pgrpo.grpo.console_log.parse_console_log`), parsed once per version of the
    file; InputError where the file holds no log."""
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        if key not in _LAST_CONSOLE:
            parsed = parse_console_log(path.read_text(encoding="utf-8", errors="replace"))
            _LAST_CONSOLE.clear()
            _LAST_CONSOLE[key] = parsed
    except OSError as error:
        raise InputError(f"log {path} cannot be read: {error.strerror or error}") from None
    console = _LAST_CONSOLE[key]
    if console is None:
        raise InputError(f"log {path} is not a log this reader knows: no TRL log dict ({{'loss': ..., 'reward': ...}}) "
                         "and no verl step line (step:N - key:value - ...) in it; JSON logs end in .json, CSV logs in "
                         ".csv")
    return console


def _console_frame(path: Path) -> tuple[pd.DataFrame, dict[str, list[float]]]:
    console = read_console_log(path)
    for note in _not_told(str(path), console.notes):
        print(f"note: {path}: {note}", file=sys.stderr, flush=True)
    return frame_from_log_history(console.history, str(path)), _non_finite_in_history(console.history)


#: the notes told so far in this process, as (source, what): a watch re-reads its log every minute, each is told once
_TOLD: set[tuple[str, Any]] = set()


def _not_told(source: str, items: list) -> list:
    """The ``items`` (hashable) not told before for ``source`` in this process, now counted as told."""
    new = [item for item in items if (source, item) not in _TOLD]
    _TOLD.update((source, item) for item in new)
    return new


def _tell_resumes(source: str, resumes: list[dict[str, int]]) -> None:
    """One line on stderr for the resumes of ``source`` not told before in this process."""
    new_steps = set(_not_told(source, [("resume", r["step"]) for r in resumes]))
    new = [r for r in resumes if ("resume", r["step"]) in new_steps]
    if new:
        print(f"note: {resume_note(source, new)}", file=sys.stderr, flush=True)


def read_run_log(path: str | Path, allow_non_finite: bool = False) -> pd.DataFrame:
    """A run's per-step log, one row per step, under the workflow's column names (see the module docstring).

    NaN or infinite values raise InputError naming the first one, unless ``allow_non_finite``: then they are read as
    missing and ``frame.attrs["non_finite"]`` maps each such column to the steps where it was non-finite."""
    file = resolve_log_path(path)
    run = split_run(path)[1]
    suffix = file.suffix.lower()
    if run is not None and suffix not in CSV_SUFFIXES:
        raise InputError(f"log {path}: '{RUN_SEPARATOR}{run}' names a run of a W&B export (a CSV); {file} is one "
                         "run's log")
    if suffix in JSON_SUFFIXES:
        frame, non_finite = _json_frame(file)
    elif suffix in CSV_SUFFIXES:
        frame, non_finite = _csv_frame(file, run)
    else:
        frame, non_finite = _console_frame(file)
    if non_finite and not allow_non_finite:
        column, steps = next(iter(non_finite.items()))
        total = sum(len(v) for v in non_finite.values())
        at = f"step {steps[0]:g}" if isinstance(steps[0], (int, float)) and math.isfinite(steps[0]) else "a row"
        raise InputError(f"log {file}: '{column}' is NaN or infinite at {at} ({total} non-finite value(s) in "
                         f"{len(non_finite)} column(s)); a diverged run? `pgrpo diagnose --allow-nan` reads them as "
                         "a divergence")
    frame = frame.replace([np.inf, -np.inf], np.nan)
    out = normalize_log(frame, str(file))
    _tell_resumes(str(file), out.attrs.get("resumes") or [])
    out.attrs["non_finite"] = {column: sorted(float(s) for s in steps if isinstance(s, (int, float)))
                               for column, steps in non_finite.items()}
    return out


def log_runs(path: str | Path) -> list[str]:
    """The runs ``path`` holds, each as a path the log readers take: a W&B export of several runs gives
    ``FILE::RUN`` for each; any other log (or a named run) is itself."""
    if split_run(path)[1] is not None:
        return [str(path)]
    try:
        file = resolve_log_path(path)
    except InputError:  # not there yet (a watch started before the job writes): the readers say so, and retry
        return [str(path)]
    if file.suffix.lower() != ".csv":
        return [str(path)]
    try:
        columns = pd.read_csv(file, nrows=0).columns
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError):
        return [str(path)]  # the reader says what is wrong with it
    runs = wandb_runs(columns)
    return [f"{file}{RUN_SEPARATOR}{run}" for run in runs] if len(runs) > 1 else [str(path)]


def run_source(path: str | Path) -> str:
    """The file behind ``path`` with its run, if one is named: what to read again when the file grows."""
    run = split_run(path)[1]
    file = str(resolve_log_path(path))
    return f"{file}{RUN_SEPARATOR}{run}" if run is not None else file


def trainer_state_max_steps(file: str | Path) -> float | None:
    """The planned length a TRL ``trainer_state.json`` records (its ``max_steps``), if ``file`` is one."""
    file = Path(file)
    if file.name != "trainer_state.json":
        return None
    try:
        value = json.loads(file.read_text()).get("max_steps")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def console_max_steps(file: str | Path) -> float | None:
    """The planned length a console log prints (TRL's progress bar total, verl's ``Total training steps``), if
    ``file`` is one that does."""
    file = Path(file)
    if file.suffix.lower() in JSON_SUFFIXES + CSV_SUFFIXES:
        return None
    try:
        total = read_console_log(file).max_steps
    except InputError:
        return None
    return float(total) if total else None


def planned_steps(path: str | Path, meta: Mapping[str, Any] | None) -> float | None:
    """A run's planned length: its ``meta``'s ``max_steps`` (a ``meta.json``), else the ``max_steps`` of the TRL
    ``trainer_state.json`` behind ``path``, else the total a console log's progress bar shows; None where none says
    (or ``path`` is not written yet)."""
    if meta and meta.get("max_steps"):
        return float(meta["max_steps"])
    try:
        file = resolve_log_path(path)
    except InputError:
        return None
    return trainer_state_max_steps(file) or console_max_steps(file)
