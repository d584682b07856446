"""The ``fitting:`` config section (Section 4.4): which laws and columns, smoothing, the forecast fraction; and the
fit of one column of a seed-averaged curve (Eq. 14-16 and rivals), its plateau bounded to the range the column's
values imply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.errors import InputError
from pgrpo.fit.laws import ALL_LAWS, FIT_COLUMNS, LAWS, THREE_PHASE
from pgrpo.fit.least_squares import fit_all_laws, r_squared
from pgrpo.fit.selection import compare_laws

#: The ``fitting`` config section's defaults.
DEFAULT_FITTING_CONFIG: dict[str, Any] = {
    "forecast_fraction": 0.25,
    "forecast_law": THREE_PHASE,
    "laws": list(ALL_LAWS),
    "columns": list(FIT_COLUMNS),
    "smoothing": None,
}


@dataclass(frozen=True)
class FittingConfig:
    """The ``fitting`` config section (see :data:`DEFAULT_FITTING_CONFIG`)."""

    forecast_fraction: float
    forecast_law: str
    laws: tuple[str, ...]
    columns: tuple[str, ...]
    smoothing: int | None


def fitting_config(section: Mapping[str, Any] | None) -> FittingConfig:
    """Validate the ``fitting`` section, filling defaults; raise InputError naming the key. The three-phase law is
    always fitted (Figure 1 draws it), so it is added to ``laws`` if missing."""
    section = dict(section or {})
    unknown = sorted(set(section) - set(DEFAULT_FITTING_CONFIG))
    if unknown:
        raise InputError(f"config key 'fitting.{unknown[0]}' is not a known key "
                         f"(allowed: {', '.join(DEFAULT_FITTING_CONFIG)})")
    merged = {**DEFAULT_FITTING_CONFIG, **section}
    fraction = merged["forecast_fraction"]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise InputError(f"config key 'fitting.forecast_fraction' must be a number in (0, 1], got {fraction!r}")
    laws = merged["laws"]
    if isinstance(laws, str) or not isinstance(laws, Sequence) or not laws:
        raise InputError(f"config key 'fitting.laws' must be a non-empty list of laws ({', '.join(ALL_LAWS)})")
    for law in laws:
        if law not in LAWS:
            raise InputError(f"config key 'fitting.laws' has unknown law {law!r} (known: {', '.join(ALL_LAWS)})")
    if merged["forecast_law"] not in LAWS:
        raise InputError(f"config key 'fitting.forecast_law' must be one of {', '.join(ALL_LAWS)}, "
                         f"got {merged['forecast_law']!r}")
    columns = merged["columns"]
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns or not all(
        isinstance(c, str) and c for c in columns
    ):
        raise InputError("config key 'fitting.columns' must be a non-empty list of log column names")
    smoothing = merged["smoothing"]
    if smoothing is not None and (isinstance(smoothing, bool) or not isinstance(smoothing, int) or smoothing < 1):
        raise InputError(f"config key 'fitting.smoothing' must be null or a window of >= 1 points, got {smoothing!r}")
    law_list = tuple(dict.fromkeys([THREE_PHASE, *laws])) if THREE_PHASE not in laws else tuple(laws)
    return FittingConfig(float(fraction), merged["forecast_law"], law_list, tuple(columns), smoothing)


def smooth(y: np.ndarray, window: int | None) -> np.ndarray:
    """Centred moving average over ``window`` points (ends use the points available); identity for None/1."""
    y = np.asarray(y, dtype=float)
    if not window or window <= 1 or y.size == 0:
        return y
    import pandas as pd

    return pd.Series(y).rolling(window, center=True, min_periods=1).mean().to_numpy()


def implied_range(values: np.ndarray) -> tuple[float, float] | None:
    """The range a column's plateau must stay in: [0, 1] when every value is in it (a binary reward's mean, an
    accuracy), else none."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size and values.min() >= 0.0 and values.max() <= 1.0:
        return (0.0, 1.0)
    return None


def fit_column(
    steps: np.ndarray, values: np.ndarray, config: FittingConfig, column: str
) -> dict[str, Any]:
    """All configured laws fitted to one seed-averaged column; R^2 also on the raw seed mean when smoothing."""
    finite = np.isfinite(steps) & np.isfinite(values)
    t, raw = steps[finite], values[finite]
    if t.size == 0:
        empty = np.array([])
        fits = fit_all_laws(empty, empty, config.laws)
        for fit in fits.values():
            fit.message = f"no fit: no {column} data" + (" (no eval data)" if column.startswith("eval") else "")
        return {"fits": fits, "comparison": compare_laws(fits), "n_points": 0, "r2_seed_mean": {}}
    y = smooth(raw, config.smoothing)
    fits = fit_all_laws(t, y, config.laws, reward_range=implied_range(raw))
    r2_raw = {law: (r_squared(raw, fit.predict(t)) if fit.success else float("nan")) for law, fit in fits.items()}
    return {"fits": fits, "comparison": compare_laws(fits), "n_points": int(t.size), "r2_seed_mean": r2_raw}
