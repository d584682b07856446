"""Seed aggregation: per (model, G), the seeds' per-step logs aligned by step, with mean, s.d. and count.

Paper: Section 4.2 and 5.1 (curves are "seed-averaged means (± s.d. shaded band) over seeds {42, 3407}", Figure 1).

Every numeric logged quantity (train reward, eval reward and accuracy, and the diagnostics' inputs: reward_std,
frac_reward_zero_std, entropy, kl, grad_norm, importance_sampling_ratio_max, ...) becomes three columns
``<col>_mean``, ``<col>_sd`` (sample s.d. across seeds, ddof = 1; empty with fewer than two seeds) and ``<col>_n``
(how many seeds measured it at that step). Steps are the union over seeds; a step or a value missing in a seed is
left out of that step's statistics (and shows in ``_n``), never counted as zero. Eval columns are measured only on
eval steps, so their ``_n`` is 0 elsewhere and their mean empty.

:func:`load_log` also reads logs not written by this workflow: TRL/W&B-style CSVs (``train/reward``,
``train/global_step``, ``eval/reward``) and TRL's ``trainer_state.json`` (``log_history``).

"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import pandas as pd

from pgrpo.errors import InputError

#: candidate names of the optimizer-step column, in order of preference
STEP_COLUMNS: tuple[str, ...] = ("step", "train/global_step", "global_step", "trainer/global_step")


_RUN_DIR = re.compile(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed(?P<seed>\d+)/[^/]+$")


def normalize_column(name: str) -> str:
    """The workflow's name for a logged quantity: ``train/reward`` -> ``reward``, ``eval/reward`` -> ``eval_reward``."""
    name = str(name).strip()
    if name.startswith("train/"):
        return name[len("train/"):]
    if name.startswith("eval/"):
        return "eval_" + name[len("eval/"):]
    return name


def normalize_log(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """One row per integer step, sorted, with numeric columns under the workflow's names.

    Rows that share a step (TRL logs eval metrics in rows of their own) are merged: per column the last measured
    value wins; empty cells stay empty. Columns that hold no number at all (text) are dropped.
    """
    step_column = next((c for c in STEP_COLUMNS if c in frame.columns), None)
    if step_column is None:
        raise InputError(f"log {source} has no step column (looked for {', '.join(STEP_COLUMNS)})")
    frame = frame.rename(columns={step_column: "step"})
    frame = frame.loc[:, [c for c in frame.columns if c == "step" or c not in STEP_COLUMNS]]
    frame.columns = ["step" if c == "step" else normalize_column(c) for c in frame.columns]
    frame = frame.loc[:, ~pd.Index(frame.columns).duplicated(keep="first")]
    step = pd.to_numeric(frame["step"], errors="coerce")
    frame = frame.loc[step.notna()].copy()
    frame["step"] = step[step.notna()].astype(np.int64)
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
    return frame.sort_values("step").reset_index(drop=True)


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
