"""The calibration bound in words (issue 21, item 2; the reading of :func:`pgrpo.fit.recalibration.with_recalibration`):
a coverage as a percent that does not read as a bound it misses, and what one level of the forecaster's predictive
for a whole split, chosen in hindsight, does to a cell that misses the 70-90% target.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from pgrpo.fit.recalibration import CALIBRATION_TARGET


def coverage_percent(value: Any, target: tuple[float, float] = CALIBRATION_TARGET) -> str:
    """A coverage as a whole percent, with one decimal where the whole percent would read as a bound of ``target``
    that the value misses, as many as it takes (0.904: "90.4%", 0.9004: "90.04%", not a "90%" marked not met)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        return "n/a"
    whole = round(100 * value)
    if whole in (round(100 * target[0]), round(100 * target[1])) and not target[0] <= value <= target[1]:
        for digits in (1, 2, 3):  # as many decimals as it takes not to read as the bound
            shown = f"{100 * value:.{digits}f}"
            if float(shown) not in (100 * target[0], 100 * target[1]):
                return f"{shown}%"
        return f"{100 * value:.3f}%"
    return f"{whole:.0f}%"


def leaving_cells(out: Sequence[Sequence[Any]] | None, target: tuple[float, float] = CALIBRATION_TARGET) -> str:
    """The cells that leave the target at the recalibrated level (``recalibrated_out``: ``(part, coverage)``
    pairs), as ``part (coverage)`` joined by ``; ``."""
    return "; ".join(f"{name} ({coverage_percent(value, target)})" for name, value in out or [])


def recalibration_reading(row: Mapping[str, Any], target: tuple[float, float] = CALIBRATION_TARGET) -> str:
    """In words, for a cell whose coverage misses ``target``: what one level for the whole split, chosen in
    hindsight, does (empty where the row has no such reading)."""
    if row.get("recalibrated_out") is None:  # a row without the reading (an overall row, older results)
        return ""
    level = row.get("recalibrated_level")
    lo, hi = target
    if not (isinstance(level, (int, float)) and math.isfinite(level)):
        return (f"no central level of the forecaster's predictive puts it within {lo:.0%}-{hi:.0%}: out of reach "
                "of any recalibration of this forecaster")
    head = (f"read at {100 * level:.0f}% instead, one level for every curve of the split chosen in hindsight, it "
            f"covers {coverage_percent(float(row['recalibrated_coverage']), target)}")
    if row.get("recalibrated_reach"):
        return (f"{head} and no other cell of the split within {lo:.0%}-{hi:.0%} at 80% leaves it: in reach of a "
                "recalibration")
    others = list(row["recalibrated_out"])
    verb = "fall" if len(others) > 1 else "falls"
    return (f"{head}, but then {leaving_cells(others, target)}, within {lo:.0%}-{hi:.0%} at 80%, {verb} outside it: "
            "out of reach of any recalibration of this forecaster")
