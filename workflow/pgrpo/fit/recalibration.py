"""A bound on calibration (issue 21, item 2: 80% intervals covering 70-90% of the held-out logged values in every
family): the forecaster's own predictive read at one other central level for every curve of a split, chosen in
hindsight (beyond the paper; the scores of :mod:`pgrpo.fit.intervals`). The reading in words is
:mod:`pgrpo.tables.recalibration`'s.

A recalibration, however it is fitted (a conformal correction, a width factor learnt on dev), can only move the
level at which the forecaster's predictive is read; one level serves every curve, since a curve's family is not
known when it is forecast. :func:`coverage_at_levels` scores each curve's predictive at the levels of
:data:`LEVELS`; :func:`with_recalibration` then asks, per calibration cell (a part or a generated family of a
split): at which level is this cell within the target, and how many of the split's other cells leave it there? A
cell that cannot be brought in without another leaving is out of reach of any recalibration of this forecaster:
its families' early windows look alike and their futures differ, so only an interval of another shape (one that
knows the family) could cover both. A cell that can is in reach, and the level says how. (Cells already outside the
target at 80% do not count against another: each has its own reading.)
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

#: the central levels each curve's predictive is read at (0.8: the reported one)
LEVELS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99)

#: issue 21's calibration target for the 80% interval: the share of held-out logged values it covers
CALIBRATION_TARGET: tuple[float, float] = (0.70, 0.90)


def coverage_key(level: float) -> str:
    """The column of a curve's (and a cell's mean) coverage at ``level``: ``coverage_at_95``."""
    return f"coverage_at_{round(100 * level)}"


def coverage_at_levels(value_draws: np.ndarray, observed: np.ndarray,
                       levels: Sequence[float] = LEVELS) -> dict[str, float]:
    """The share of ``observed`` (the held-out logged values) inside the central ``level`` interval of the draws of
    the logged value at each step (``value_draws``: draws x steps), per level of ``levels``."""
    draws = np.asarray(value_draws, float)
    y = np.asarray(observed, float)
    out = {}
    for level in levels:
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
        ok = np.isfinite(y)
        out[coverage_key(level)] = float(np.mean((y[ok] >= lo[ok]) & (y[ok] <= hi[ok]))) if ok.any() else float(
            "nan")
    return out


def _within(value: Any, target: tuple[float, float]) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and target[0] <= value <= target[1]


def with_recalibration(summary: list[dict[str, Any]], method: str = "forecaster",
                       target: tuple[float, float] = CALIBRATION_TARGET,
                       excluded: Sequence[str] = ("overall",), levels: Sequence[float] = LEVELS,
                       skip_suffix: str | None = None, reported: float = 0.8) -> list[dict[str, Any]]:
    """The summary rows, each of ``method``'s rows of a calibration cell (every part and family of a split at a
    fraction, but ``excluded`` parts; parts ending in ``skip_suffix`` repeat another cell's forecasts and take its
    reading) given ``recalibrated_level`` (the level, among ``levels``, at which the cell is within ``target`` with
    the fewest of the split's other cells leaving it, the nearest to ``reported`` among equals; NaN where no level
    brings it in), ``recalibrated_coverage`` (its coverage there), ``recalibrated_out`` (the cells that leave: within
    the target at the ``reported`` level and outside it at that one, ``(part, coverage there)`` pairs) and
    ``recalibrated_reach`` (a level brings it in and none leaves). A part whose generated families are cells of their
    own is their union: it is not counted beside them, nor are its own families counted against it. A cell without
    coverage at the levels (results written before they were scored) gets no reading."""
    def is_cell(row: Mapping[str, Any]) -> bool:
        part = str(row.get("part", ""))
        return (row.get("method") == method and part not in excluded
                and not (skip_suffix and part.endswith(skip_suffix))
                and any(isinstance(row.get(coverage_key(level)), (int, float))
                        and math.isfinite(row.get(coverage_key(level))) for level in levels))

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in summary:
        if is_cell(row):
            groups.setdefault((row["split"], row["fraction"]), []).append(row)
    for rows in groups.values():
        parents = {str(r["part"]).split(": ")[0] for r in rows if ": " in str(r["part"])}
        for row in rows:
            part = str(row["part"])
            others = [o for o in rows if o is not row and str(o["part"]) not in parents
                      and not (part in parents and str(o["part"]).startswith(f"{part}: "))]
            was_in = [o for o in others if _within(o.get(coverage_key(reported)), target)]
            best = None
            for level in levels:
                own = row.get(coverage_key(level))
                if not _within(own, target):
                    continue
                leave = [(o["part"], o.get(coverage_key(level))) for o in was_in
                         if not _within(o.get(coverage_key(level)), target)]
                key = (len(leave), abs(level - reported), level)
                if best is None or key < best[0]:
                    best = (key, level, own, leave)
            if best is None:
                row.update({"recalibrated_level": float("nan"), "recalibrated_coverage": float("nan"),
                            "recalibrated_out": [], "recalibrated_reach": False})
                continue
            _, level, own, leave = best
            row.update({"recalibrated_level": level, "recalibrated_coverage": own,
                        "recalibrated_out": [(str(name), float(value)) for name, value in leave],
                        "recalibrated_reach": not leave})
    if skip_suffix:  # a cell that repeats another's forecasts reads as that one does
        for row in summary:
            part = str(row.get("part", ""))
            if row.get("method") == method and part.endswith(skip_suffix):
                base = next((other for other in groups.get((row["split"], row["fraction"]), [])
                             if other["part"] == part[:-len(skip_suffix)]), None)
                if base is not None and "recalibrated_level" in base:
                    row.update({k: base[k] for k in base if k.startswith("recalibrated_")})
    return summary
