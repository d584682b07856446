"""Column names of a run log and their aliases (TRL ``train/`` keys, W&B exports, the workflow's ``log.csv``),
and the seed-aggregate frame in the per-run layout the diagnostics read.
"""

from __future__ import annotations

import pandas as pd

#: the logged quantities the diagnostics read (the workflow's names, Section 4.2)
KNOWN_COLUMNS: tuple[str, ...] = (
    "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm", "importance_sampling_ratio_max",
    "eval_reward", "eval_accuracy",
    # read by the failure modes (pgrpo.diagnose.modes) and the toolkit's rules
    "importance_sampling_ratio_min", "importance_sampling_ratio_mean", "completions/mean_length",
    "completions/clipped_ratio", "completions/max_length", "clip_ratio",
)


#: other spellings of those quantities, mapped after the ``train/`` / ``eval/`` prefixes are normalised
#: (``pgrpo.grpo.run_log.normalize_column``); used only when the workflow's name is absent
COLUMN_ALIASES: dict[str, str] = {
    "sampling/importance_sampling_ratio/max": "importance_sampling_ratio_max",
    "eval_sampling/importance_sampling_ratio/max": "eval_importance_sampling_ratio_max",
    "sampling/importance_sampling_ratio/min": "importance_sampling_ratio_min",
    "sampling/importance_sampling_ratio/mean": "importance_sampling_ratio_mean",
    "clip_ratio/region_mean": "clip_ratio",
    "rewards/accuracy_reward/mean": "reward",
    "eval_rewards/accuracy_reward/mean": "eval_accuracy",
}


def frame_from_aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    """``<col>_mean`` -> ``<col>``, ``<col>_sd`` kept, ``<col>_n`` dropped."""
    out = {"step": pd.to_numeric(frame["step"], errors="coerce")}
    for column in frame.columns:
        if column.endswith("_mean"):
            out[column[: -len("_mean")]] = pd.to_numeric(frame[column], errors="coerce")
        elif column.endswith("_sd"):
            out[column] = pd.to_numeric(frame[column], errors="coerce")
    return pd.DataFrame(out)


def apply_aliases(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """Map other spellings (:data:`COLUMN_ALIASES`) onto the workflow's names where those are absent; an aggregate
    CSV's ``<col>_mean`` becomes ``<col>``. Returns the frame and ``{name: source column}``."""
    sources = {c: c for c in frame.columns}
    if "reward" not in frame.columns and "reward_mean" in frame.columns:
        frame = frame_from_aggregate(frame)
        sources = {c: f"{c}_mean" for c in frame.columns}
    renames = {}
    for alias, name in COLUMN_ALIASES.items():
        if alias in frame.columns and name not in frame.columns and name not in renames.values():
            renames[alias] = name
            sources[name] = alias
    return frame.rename(columns=renames), sources
