"""Seed aggregation: per (model, G), the seeds' per-step logs aligned by step, with mean, s.d. and count.

Paper: Section 4.2 and 5.1 (curves are "seed-averaged means (± s.d. shaded band) over seeds {42, 3407}", Figure 1).

Every numeric logged quantity (train reward, eval reward and accuracy, and the diagnostics' inputs: reward_std,
frac_reward_zero_std, entropy, kl, grad_norm, importance_sampling_ratio_max, ...) becomes three columns
``<col>_mean``, ``<col>_sd`` (sample s.d. across seeds, ddof = 1; empty with fewer than two seeds) and ``<col>_n``
(how many seeds measured it at that step). Steps are the union over seeds; a step or a value missing in a seed is
left out of that step's statistics (and shows in ``_n``), never counted as zero. Eval columns are measured only on
eval steps, so their ``_n`` is 0 elsewhere and their mean empty.

Logs not written by this workflow are normalised here too (the files are read by :mod:`pgrpo.stages.logs`):
TRL's ``log_history`` (:func:`frame_from_log_history`), TRL/W&B-style CSVs (``train/reward``, ``train/global_step``,
``eval/reward``; a W&B export's ``Step`` and ``<run> - <key>`` columns), old TRL key names (``completion_length``,
``rewards/<fn>`` without ``/mean``) and several reward functions (``rewards/<fn>/mean``; their sum is the reward
where the log has no ``reward``). A run resumed from a checkpoint into the same log (its steps go back to a step after
the log's first) is read as resumed: the rows logged from that step on before the resume are replaced by those
logged after it (:func:`superseded_by_resumes`). A log whose steps go back to its first step or before (or go back
more often than a resumed run's do), or that logs one quantity twice at one step with two values, is refused with
one line naming the step: such a log is two runs glued together.

"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from pgrpo.errors import InputError

#: candidate names of the optimizer-step column, in order of preference
STEP_COLUMNS: tuple[str, ...] = ("step", "train/global_step", "global_step", "trainer/global_step", "Step", "_step")

#: old TRL key names (TRL < 0.17) -> current ones, applied where the current name is absent
OLD_TRL_KEYS: dict[str, str] = {
    "completion_length": "completions/mean_length",
    "eval_completion_length": "eval_completions/mean_length",
}

_OLD_REWARD_KEY = re.compile(r"^(eval_)?rewards/([^/]+)$")  # rewards/<fn> (old TRL) -> rewards/<fn>/mean
_WANDB_MINMAX = re.compile(r"__(MIN|MAX)$")


#: a reward function's mean column as TRL logs it, ``rewards/<fn>/mean`` (the group ``fn`` is the function's name)
REWARD_FUNCTION_MEAN = re.compile(r"^rewards/(?P<fn>[^/]+)/mean$")
RUN_DIR = re.compile(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed(?P<seed>\d+)/[^/]+$")



def reward_function_columns(columns: Sequence[str]) -> dict[str, str]:
    """Reward function name -> its mean column, for every ``rewards/<fn>/mean`` column, in column order."""
    out = {}
    for column in columns:
        match = REWARD_FUNCTION_MEAN.match(str(column))
        if match:
            out[match["fn"]] = str(column)
    return out


def reward_function_sds(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Reward function name -> its logged s.d. over each step's completions (``rewards/<fn>/std``), where logged."""
    return {fn: frame[f"rewards/{fn}/std"].to_numpy(float) for fn in reward_function_columns(frame.columns)
            if f"rewards/{fn}/std" in frame.columns}


def normalize_column(name: str) -> str:
    """The workflow's name for a logged quantity: ``train/reward`` -> ``reward``, ``eval/reward`` -> ``eval_reward``."""
    name = str(name).strip()
    if name.startswith("train/"):
        return name[len("train/"):]
    if name.startswith("eval/"):
        return "eval_" + name[len("eval/"):]
    return name


def frame_from_log_history(history: Sequence[object], source: str) -> pd.DataFrame:
    """TRL's ``log_history`` (a list of dicts with ``step``) as a data frame, one row per entry, in log order."""
    entries = [entry for entry in history if isinstance(entry, dict)]
    if not entries:
        raise InputError(f"log {source} is empty: its log_history has no entries")
    return pd.DataFrame(entries)


def _strip_wandb_names(frame: pd.DataFrame) -> pd.DataFrame:
    """A W&B export: ``<run> - train/reward`` -> ``train/reward``; its ``__MIN``/``__MAX`` band columns dropped."""
    columns = [c for c in frame.columns if not _WANDB_MINMAX.search(str(c))]
    frame = frame.loc[:, columns]
    renamed = {c: str(c).split(" - ", 1)[1] for c in columns if " - " in str(c)}
    return frame.rename(columns=renamed) if renamed else frame


def wandb_runs(columns: Sequence[str]) -> list[str]:
    """The runs of a W&B export, in column order: the ``<run>`` of its ``<run> - <key>`` columns (the ``__MIN`` /
    ``__MAX`` band columns left out, as :func:`_strip_wandb_names` leaves them)."""
    runs: list[str] = []
    for column in map(str, columns):
        if " - " in column and not _WANDB_MINMAX.search(column):
            run = column.split(" - ", 1)[0]
            if run not in runs:
                runs.append(run)
    return runs


def _modern_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """Old TRL key names under the current ones; a ``reward`` from the reward functions where none is logged."""
    renames = {}
    for column in frame.columns:
        match = _OLD_REWARD_KEY.match(str(column))
        if match and f"{column}/mean" not in frame.columns and match[2] not in ("mean", "std"):
            renames[column] = f"{column}/mean"
        elif column in OLD_TRL_KEYS and OLD_TRL_KEYS[column] not in frame.columns:
            renames[column] = OLD_TRL_KEYS[column]
    frame = frame.rename(columns=renames)
    if "reward" not in frame.columns:
        parts = [c for c in frame.columns if REWARD_FUNCTION_MEAN.match(str(c))]
        if parts:
            values = frame[parts].apply(pd.to_numeric, errors="coerce")
            frame = frame.assign(reward=values.sum(axis=1, min_count=len(parts)))
    return frame


#: bookkeeping keys TRL repeats in the eval and summary rows of a step (never a measured quantity)
BOOKKEEPING: frozenset[str] = frozenset({"epoch", "total_flos", "num_input_tokens_seen", "num_tokens"})


#: the fewest logged rows per resume a resumed run has (a requeue every few rows is a log out of order instead)
ROWS_PER_RESUME = 10


def superseded_by_resumes(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[dict[str, int]]]:
    """A run resumed from a checkpoint into the same log (a SLURM requeue appending to one CSV, a W&B run resumed
    under its id): where the steps go back to a step after the log's first one, the run went on from its checkpoint
    and the rows it had logged from that step on, before the resume, were lost with the process that logged them
    (the checkpoint predates them). Those rows are dropped and the rows logged after the resume kept. A log whose steps
    go back to its first step or before, or that goes back more than once per :data:`ROWS_PER_RESUME` rows, is not
    read as resumed at all; :func:`_check_steps` refuses it (two runs in one file, or rows out of order).
    Returns the frame and one ``{"step", "superseded", "last_superseded"}`` per resume, in log order. Linear in the
    log's rows plus the rows before each resume."""
    steps = frame["step"].to_numpy(np.int64)
    if steps.size < 2 or not (np.diff(steps) < 0).any():
        return frame, []
    keep = np.ones(steps.size, bool)
    resumes: list[dict[str, int]] = []
    first, kept_max = steps[0], steps[0]  # the first row is kept by any resume (it goes back to a later step)
    for i in range(1, steps.size):
        if steps[i] >= kept_max:
            kept_max = steps[i]
            continue
        if steps[i] <= first:  # back to the start: two runs, not a resumed one
            return frame, []
        superseded = keep[:i] & (steps[:i] >= steps[i])
        keep[:i] &= ~superseded
        resumes.append({"step": int(steps[i]), "superseded": int(superseded.sum()),
                        "last_superseded": int(steps[:i][superseded].max())})
        if len(resumes) * ROWS_PER_RESUME > steps.size:  # out of order row by row, not a run resumed a few times
            return frame, []
        kept_max = steps[i]  # the rows kept before it are all below it
    return frame.loc[keep].reset_index(drop=True), resumes


def resume_note(source: str, resumes: Sequence[dict[str, int]]) -> str:
    """One line naming each resume :func:`superseded_by_resumes` read in ``source``."""
    parts = [f"at step {r['step']} ({r['superseded']} row(s) logged at steps {r['step']} to {r['last_superseded']} "
             "before it replaced by those logged after it)" for r in resumes]
    return f"log {source}: read as a run resumed from a checkpoint " + "; ".join(parts)


def _check_steps(frame: pd.DataFrame, source: str) -> None:
    """Steps never go backwards, and no quantity is logged twice at one step (TRL's eval and summary rows share the
    step of a train row but log other quantities; :data:`BOOKKEEPING` keys such as ``epoch`` may repeat)."""
    steps = frame["step"].to_numpy(np.int64)
    back = np.flatnonzero(np.diff(steps) < 0)
    if back.size:
        i = int(back[0])
        raise InputError(f"log {source}: steps go backwards (step {steps[i + 1]} after step {steps[i]}), not as a run "
                         "resumed from a checkpoint does (back to a step after the log's first, then on in order): "
                         "is it two runs in one file?")
    duplicated = frame["step"].duplicated(keep=False)
    if not duplicated.any():
        return
    for step, rows in frame.loc[duplicated].groupby("step", sort=True):
        for column in rows.columns:
            if column == "step" or column in BOOKKEEPING:
                continue
            values = pd.to_numeric(rows[column], errors="coerce").dropna()
            if values.nunique() > 1:
                raise InputError(f"log {source}: step {step} is logged twice with two values of '{column}' "
                                 f"({values.iloc[0]:g} and {values.iloc[1]:g}); is it two runs in one file?")
            if values.size > 1:
                raise InputError(f"log {source}: step {step} is logged twice ('{column}' = {values.iloc[0]:g} in two "
                                 f"rows); is the same log pasted twice, or two runs in one file?")


def normalize_log(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """One row per integer step, sorted, with numeric columns under the workflow's names.

    Rows that share a step (TRL logs eval metrics in rows of their own) are merged: per column the measured value
    is kept; empty cells stay empty. Columns that hold no number at all (text) are dropped. InputError (one line)
    for a log without a step column, without rows, whose steps go backwards or repeat with different values.
    """
    if frame.empty:
        raise InputError(f"log {source} is empty: it has no rows")
    frame = _strip_wandb_names(frame)
    step_column = next((c for c in STEP_COLUMNS if c in frame.columns), None)
    if step_column is None:
        raise InputError(f"log {source} has no step column (looked for {', '.join(STEP_COLUMNS)})")
    frame = frame.rename(columns={step_column: "step"})
    frame = frame.loc[:, [c for c in frame.columns if c == "step" or c not in STEP_COLUMNS]]
    frame.columns = ["step" if c == "step" else normalize_column(c) for c in frame.columns]
    frame = frame.loc[:, ~pd.Index(frame.columns).duplicated(keep="first")]
    step = pd.to_numeric(frame["step"], errors="coerce")
    orphans = step.isna() & frame.drop(columns="step").apply(pd.to_numeric, errors="coerce").notna().any(axis=1)
    if orphans.any() and step.notna().any():
        row = int(np.flatnonzero(orphans.to_numpy())[0])
        raise InputError(f"log {source}: row {row + 1} has values but no step number ({frame['step'].iloc[row]!r})")
    frame = frame.loc[step.notna()].copy()
    if frame.empty:
        raise InputError(f"log {source} has no row with a step number")
    frame["step"] = step[step.notna()].astype(np.int64)
    frame = _modern_keys(frame)
    frame, resumes = superseded_by_resumes(frame)  # a resumed run's rows come back in step order
    _check_steps(frame, source)
    keep = ["step"]
    for column in frame.columns:
        if column == "step":
            continue
        values = frame[column]
        if values.dtype == bool:
            frame[column] = values.astype(float)
        elif not pd.api.types.is_numeric_dtype(values):
            converted = pd.to_numeric(values, errors="coerce")
            if converted.notna().sum() == 0 and values.notna().sum() > 0:
                continue  # a text column
            frame[column] = converted
        keep.append(column)
    frame = frame[keep]
    if frame["step"].duplicated().any():
        frame = frame.groupby("step", sort=True).last().reset_index()  # last non-null per column
    frame = frame.sort_values("step").reset_index(drop=True)
    frame.attrs["resumes"] = resumes
    return frame


def aggregate_seeds(logs: Sequence[pd.DataFrame], min_seeds: int = 1) -> pd.DataFrame:
    """Align logs by step and give ``<col>_mean``, ``<col>_sd``, ``<col>_n`` for every column any seed logged.

    A step's mean (and s.d.) uses only the seeds that measured the quantity there; with fewer than ``min_seeds``
    such seeds the mean and s.d. are left empty (the count is still given). s.d. is the sample s.d. (ddof = 1).
    """
    if not logs:
        raise InputError("no logs to aggregate")
    columns: list[str] = []
    for log in logs:
        columns += [c for c in log.columns if c != "step" and c not in columns]
    steps = np.unique(np.concatenate([log["step"].to_numpy(np.int64) for log in logs]))
    out: dict[str, np.ndarray] = {"step": steps}
    for column in columns:
        stack = np.full((len(logs), steps.size), np.nan)
        for i, log in enumerate(logs):
            if column in log.columns:
                index = np.searchsorted(steps, log["step"].to_numpy(np.int64))
                stack[i, index] = log[column].to_numpy(float)
        finite = np.isfinite(stack)
        count = finite.sum(axis=0)
        total = np.where(finite, stack, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
            squares = np.where(finite, (stack - mean) ** 2, 0.0).sum(axis=0)
            sd = np.where(count > 1, np.sqrt(squares / np.maximum(count - 1, 1)), np.nan)
        too_few = count < max(min_seeds, 1)
        mean[too_few] = np.nan
        sd[too_few] = np.nan
        out[f"{column}_mean"], out[f"{column}_sd"], out[f"{column}_n"] = mean, sd, count
    return pd.DataFrame(out)
