"""Issue 21's targets, cell by cell, read against the bounds that can put a missed one out of reach (items 2 and 5:
"the forecaster meets item 2's targets or the table shows, per cell, the bound that puts it out of reach").

A cell is the forecaster's summary row of one corpus part and split at the target fraction (f = 0.25) with the
scores of the benchmark's bounds beside it (:func:`truth_cell`): the cubic fitted in hindsight to the held-out values
(``hindsight_*``), the generating family fitted to the early window (``family_*``: the closed-form curves' true
form, the bandit's true dynamics), the best of the benchmark's forecasts chosen per curve in hindsight (``panel_*``),
two arithmetic bounds on the decisions (:func:`pgrpo.fit.decisions.steps_saved_ceiling`, the margin a cut order over
90% leaves) and one recalibration of the forecaster's predictive per split (:mod:`pgrpo.fit.recalibration`).

:func:`target_readings` returns one :class:`TargetReading` per target (mean curve, plateau, pairs, stop rule,
coverage), each with its :class:`Bound` records, and a status:

- ``met``;
- ``out of reach``: a bound that holds for any forecast misses it too (the hindsight cubic, the arithmetic bounds) or
  one that sees only the early window but knows the curve's form (the true family or dynamics);
- ``beyond every forecast here``: only the best of the benchmark's forecasts, chosen per curve in hindsight, misses
  it (no forecast the benchmark runs reaches it, but another forecaster might);
- ``beyond any recalibration``: a coverage no single level of this forecaster's predictive brings within 70-90%
  without taking another cell of its split out (another forecaster might);
- ``open``: every bound leaves it in reach.

:func:`standing` counts the cells by their worst status: what is met, what is shown out of reach, and what is open.
Pure: mappings in, records out; :mod:`pgrpo.tables.forecast_truth` renders them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pgrpo.fit.recalibration import CALIBRATION_TARGET

#: issue 21's targets at f = 0.25: mean-curve and plateau error against persistence's (where the truth moves after
#: the cut), pairs ordered right (and the margin over the order at the cut), the stop rule's saving and loss
TARGET_FRACTION = 0.25
TARGET_MEAN_CURVE, TARGET_PLATEAU, TARGET_PAIRS, TARGET_PAIRS_MARGIN = 0.6, 0.5, 0.8, 0.10
TARGET_STOP_SAVED, TARGET_STOP_LOSS = 0.40, 0.02
TARGET_COVERAGE = CALIBRATION_TARGET

#: the scores of each bound a cell carries (``<prefix>_<key>``)
HINDSIGHT_KEYS = ("moving_mean_rmse_ratio", "moving_plateau_error_ratio", "pairs_right", "steps_saved",
                  "stop_loss_share")
FAMILY_KEYS = ("moving_mean_rmse_ratio", "moving_plateau_error_ratio")
PANEL_KEYS = ("moving_mean_rmse_ratio", "moving_plateau_error_ratio", "pairs_right")

#: bound kinds, what each is told and how far its verdict reaches
CUBIC, CUBIC_LOGGED, FAMILY, DYNAMICS, PANEL_BOUND, PAIRS_MARGIN, STOP_CEILING, RECALIBRATION = (
    "hindsight cubic", "hindsight cubic (logged RMSE)", "true family", "true dynamics", "panel", "pairs margin",
    "stop ceiling", "recalibration")
#: a bound of these kinds that misses a target puts it out of reach
REACHING = (CUBIC, CUBIC_LOGGED, FAMILY, DYNAMICS, PAIRS_MARGIN, STOP_CEILING)

MET, OUT_OF_REACH, BEYOND_HERE, BEYOND_RECALIBRATION, OPEN = (
    "met", "out of reach", "beyond every forecast here", "beyond any recalibration", "open")
#: the statuses from best to worst: a cell's status is its worst target's
STATUS_ORDER = (MET, OUT_OF_REACH, BEYOND_HERE, BEYOND_RECALIBRATION, OPEN)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Bound:
    """One bound on one target: its ``kind``, its score (``value``; the stop rule's: ``(saved, loss)``; the
    recalibration's: the level, or None where none brings the cell in) and whether it meets the target."""

    kind: str
    value: Any
    in_reach: bool


@dataclass(frozen=True)
class TargetReading:
    """One of issue 21's targets in one cell: the forecaster's ``value`` (the stop rule's: ``(saved, loss)``; the
    pairs': ``(right, right at the cut)``), whether it is ``met``, and the ``bounds`` read beside it."""

    target: str
    value: Any
    met: bool
    bounds: tuple[Bound, ...] = field(default=())

    @property
    def status(self) -> str:
        if self.met:
            return MET
        missed = {b.kind for b in self.bounds if not b.in_reach}
        if missed & set(REACHING):
            return OUT_OF_REACH
        if PANEL_BOUND in missed:
            return BEYOND_HERE
        if RECALIBRATION in missed:
            return BEYOND_RECALIBRATION
        return OPEN


def truth_cell(by_cell: Mapping[tuple[str, str, str], Mapping[str, Any]], part: str, split: str,
               method: str = "forecaster", hindsight: str = "", family: str = "", panel: str = "") -> dict[str, Any]:
    """The ``method``'s summary row of ``(part, split)`` with its bounds' scores beside it, ``hindsight_<key>``,
    ``family_<key>`` (none for ``overall``) and ``panel_<key>``, from the summary rows keyed by
    ``(part, split, method)``; ``hindsight``, ``family``, ``panel``: the bound methods' names."""
    row = dict(by_cell.get((part, split, method), {}))
    sources = ((hindsight, "hindsight", HINDSIGHT_KEYS), (family if part != "overall" else "", "family", FAMILY_KEYS),
               (panel, "panel", PANEL_KEYS))
    for name, prefix, keys in sources:
        scores = by_cell.get((part, split, name), {}) if name else {}
        for key in keys:
            value = scores.get(key)
            row[f"{prefix}_{key}"] = value if _number(value) else None
    return row


def pairs_in_reach(value: Any, at_cut: Any) -> bool:
    """Whether a share of pairs ordered right meets the pairs target: at least :data:`TARGET_PAIRS`, and
    :data:`TARGET_PAIRS_MARGIN` above the order at the cut where that is known."""
    return _number(value) and value >= TARGET_PAIRS and (
        not _number(at_cut) or value - at_cut >= TARGET_PAIRS_MARGIN)


def margin_out_of_reach(at_cut: Any) -> bool:
    """Whether the order at the cut is right on more than ``1 - TARGET_PAIRS_MARGIN`` of the pairs: the margin
    target then asks for more than every pair (an arithmetic bound)."""
    return _number(at_cut) and at_cut > 1.0 - TARGET_PAIRS_MARGIN + 1e-12


def _ratio_bounds(cell: Mapping[str, Any], key: str, target: float, logged_fallback: bool) -> tuple[Bound, ...]:
    bounds = []
    cubic = cell.get(f"hindsight_{key}")
    if _number(cubic):
        bounds.append(Bound(CUBIC, cubic, cubic <= target))
    elif logged_fallback and _number(cell.get("hindsight_ratio")):
        bounds.append(Bound(CUBIC_LOGGED, cell["hindsight_ratio"], cell["hindsight_ratio"] <= target))
    else:
        bounds.append(Bound(CUBIC, None, True))
    family = cell.get(f"family_{key}")
    if _number(family):
        kind = DYNAMICS if str(cell.get("part", "")).startswith("bandit") else FAMILY
        bounds.append(Bound(kind, family, family <= target))
    panel = cell.get(f"panel_{key}")
    if _number(panel):
        bounds.append(Bound(PANEL_BOUND, panel, panel <= target))
    return tuple(bounds)


def target_readings(cell: Mapping[str, Any]) -> list[TargetReading]:
    """Issue 21's targets in one cell (:func:`truth_cell` or a fact of the same keys): the mean curve and the
    plateau (where the truth moves after the cut), the pairs and the stop rule (where the cell has sweeps), and the
    80% coverage of the held-out logged values (every cell)."""
    readings = []
    moving = cell.get("moving_mean_rmse_ratio")
    moves = _number(moving)
    if moves:
        readings.append(TargetReading("mean curve", moving, moving <= TARGET_MEAN_CURVE,
                                      _ratio_bounds(cell, "moving_mean_rmse_ratio", TARGET_MEAN_CURVE, True)))
        plateau = cell.get("moving_plateau_error_ratio")
        if _number(plateau):
            readings.append(TargetReading("plateau", plateau, plateau <= TARGET_PLATEAU,
                                          _ratio_bounds(cell, "moving_plateau_error_ratio", TARGET_PLATEAU, False)))
    pairs, at_cut = cell.get("pairs_right"), cell.get("pairs_right_at_cut")
    if moves and _number(pairs):
        bounds = []
        if margin_out_of_reach(at_cut):
            bounds.append(Bound(PAIRS_MARGIN, at_cut, False))
        cubic = cell.get("hindsight_pairs_right")
        bounds.append(Bound(CUBIC, cubic if _number(cubic) else None,
                            pairs_in_reach(cubic, at_cut) if _number(cubic) else True))
        panel = cell.get("panel_pairs_right")
        if _number(panel):
            bounds.append(Bound(PANEL_BOUND, panel, pairs_in_reach(panel, at_cut)))
        readings.append(TargetReading("pairs", (pairs, at_cut), pairs_in_reach(pairs, at_cut) and _number(at_cut),
                                      tuple(bounds)))
    saved, loss = cell.get("steps_saved"), cell.get("stop_loss_share")
    if moves and _number(saved):
        bounds = []
        ceiling = cell.get("steps_saved_ceiling")
        if _number(ceiling) and ceiling < TARGET_STOP_SAVED:
            bounds.append(Bound(STOP_CEILING, ceiling, False))
        c_saved, c_loss = cell.get("hindsight_steps_saved"), cell.get("hindsight_stop_loss_share")
        known = _number(c_saved) and _number(c_loss)
        bounds.append(Bound(CUBIC, (c_saved, c_loss) if known else None,
                            (c_saved >= TARGET_STOP_SAVED and c_loss <= TARGET_STOP_LOSS) if known else True))
        readings.append(TargetReading("stop rule", (saved, loss), _number(loss) and saved >= TARGET_STOP_SAVED
                                      and loss <= TARGET_STOP_LOSS, tuple(bounds)))
    cover = cell.get("coverage80")
    if _number(cover):
        lo, hi = TARGET_COVERAGE
        bounds = ()
        if cell.get("recalibrated_out") is not None:
            level = cell.get("recalibrated_level")
            bounds = (Bound(RECALIBRATION, level if _number(level) else None,
                            bool(cell.get("recalibrated_reach")) and _number(level)),)
        readings.append(TargetReading("coverage", cover, lo <= cover <= hi, bounds))
    return readings


def cell_status(readings: Sequence[TargetReading]) -> str:
    """A cell's status: its worst target's (:data:`STATUS_ORDER`); ``met`` for a cell with no target read."""
    return max((r.status for r in readings), key=STATUS_ORDER.index, default=MET)


@dataclass(frozen=True)
class Standing:
    """Where the targets stand over the cells: per status the cells (``(part, split)``) whose worst target has it,
    and per open cell the targets that are open."""

    cells: dict[str, list[tuple[str, str]]]
    open_targets: dict[tuple[str, str], list[str]]

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.cells.values())


def standing(cells: Sequence[Mapping[str, Any]]) -> Standing:
    """The cells counted by status (:func:`cell_status`); ``overall`` cells are left out (they pool the others)."""
    by_status: dict[str, list[tuple[str, str]]] = {status: [] for status in STATUS_ORDER}
    open_targets: dict[tuple[str, str], list[str]] = {}
    for cell in cells:
        if cell.get("part") == "overall":
            continue
        readings = target_readings(cell)
        key = (str(cell["part"]), str(cell["split"]))
        by_status[cell_status(readings)].append(key)
        missing = [r.target for r in readings if r.status == OPEN]
        if missing:
            open_targets[key] = missing
    return Standing(by_status, open_targets)
