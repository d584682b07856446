"""Small numerical read-outs shared by the diagnostics: least-squares lines, early/late levels, smoothing, and the
three-phase fit (Prop. 14) of a curve with its saturation step.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pgrpo.diagnose.records import X_FRACTION_CACHE


def least_squares_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """(slope, intercept, R^2) of the ordinary least-squares line of ``y`` on ``x``; NaNs with < 2 distinct x."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2 or np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    xm, ym = x.mean(), y.mean()
    sxx = float(np.sum((x - xm) ** 2))
    slope = float(np.sum((x - xm) * (y - ym)) / sxx)
    intercept = float(ym - slope * xm)
    tss = float(np.sum((y - ym) ** 2))
    rss = float(np.sum((y - intercept - slope * x) ** 2))
    r2 = 1.0 - rss / tss if tss > 0 else float("nan")
    return slope, intercept, r2


def window_mask(steps: np.ndarray, fraction: float, late: bool) -> np.ndarray:
    """The first (``late=False``) or last ``fraction`` of the step range; never empty for non-empty ``steps``."""
    if steps.size == 0:
        return np.zeros(0, bool)
    lo, hi = float(steps.min()), float(steps.max())
    span = hi - lo
    mask = steps >= hi - fraction * span if late else steps <= lo + fraction * span
    if not mask.any():
        mask[-1 if late else 0] = True
    return mask


def early_late_levels(steps: np.ndarray, values: np.ndarray, early_fraction: float,
                      late_fraction: float) -> tuple[float, float]:
    """Mean of ``values`` over the first ``early_fraction`` and the last ``late_fraction`` of the step range."""
    if steps.size == 0:
        return float("nan"), float("nan")
    early = float(np.mean(values[window_mask(steps, early_fraction, late=False)]))
    late = float(np.mean(values[window_mask(steps, late_fraction, late=True)]))
    return early, late


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or values.size == 0:
        return np.asarray(values, float)
    return pd.Series(values).rolling(window, center=True, min_periods=1).mean().to_numpy()


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(value):
        return "n/a"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 10 ** -(digits)):
        return f"{value:.{digits - 1}e}"
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0"


def pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:+.0f}%"


def fit_three_phase_curve(steps: np.ndarray, values: np.ndarray) -> Any:
    """The three-phase fit of Eq. 16 (``pgrpo.fit.least_squares.fit_three_phase``): a FitResult with ``R0``, ``R_inf``,
    ``omega_n``, ``r2``, ``rss``, ``n``, ``success``, ``status``, ``message``."""
    from pgrpo.fit.least_squares import fit_three_phase

    return fit_three_phase(steps, values)


def fit_summary(fit: Any) -> dict[str, Any]:
    if fit is None:
        return {"success": False, "message": "no fit"}
    return {"R0": fit.R0, "R_inf": fit.R_inf, "omega_n": fit.omega_n, "r2": fit.r2, "success": bool(fit.success),
            "status": getattr(fit, "status", ""), "message": fit.message}


def fit_noise(fit: Any) -> float:
    """Residual s.d. of a fit, ``sqrt(RSS / n)``."""
    rss, n = getattr(fit, "rss", float("nan")), getattr(fit, "n", 0)
    return math.sqrt(rss / n) if n and math.isfinite(rss) and rss >= 0 else float("nan")


def saturation_step(fit: Any, fraction: float = 0.9) -> float:
    """Step at which the three-phase fit reaches ``fraction`` of its rise: ``(1 + w t) exp(-w t) = 1 - fraction``."""
    if fit is None or not fit.success or not (fit.omega_n > 0):
        return float("nan")
    if fraction not in X_FRACTION_CACHE:
        from scipy.optimize import brentq

        X_FRACTION_CACHE[fraction] = brentq(lambda x: (1 + x) * math.exp(-x) - (1 - fraction), 1e-12, 200.0)
    return X_FRACTION_CACHE[fraction] / fit.omega_n
