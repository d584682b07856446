"""Issue 21's targets per cell in words (the readings of :mod:`pgrpo.fit.truth_targets`): one rendering of each
target and each bound, shared by the forecast benchmark's ``benchmark.md`` (a verdict line per cell) and the docs'
Benchmarks page (a table row per cell), and the standing of the cells (met, out of reach, open) under both.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pgrpo.fit.truth_targets import (BEYOND_HERE, BEYOND_RECALIBRATION, CUBIC, CUBIC_LOGGED, DYNAMICS, FAMILY, MET,
                                     OPEN, OUT_OF_REACH, PAIRS_MARGIN, PANEL_BOUND, RECALIBRATION, STOP_CEILING,
                                     TARGET_COVERAGE, TARGET_MEAN_CURVE, TARGET_PAIRS, TARGET_PAIRS_MARGIN,
                                     TARGET_PLATEAU, TARGET_STOP_LOSS, TARGET_STOP_SAVED, Bound, TargetReading,
                                     cell_status, standing, target_readings)
from pgrpo.tables.readme import fmt
from pgrpo.tables.recalibration import coverage_percent, recalibration_reading
from pgrpo.tables.render import finite_number

#: how the pages name the best of the benchmark's forecasts chosen per curve in hindsight (``pgrpo.fit.benchmark.PANEL``)
PANEL_NAME = "the best of the benchmark's forecasts, chosen per curve in hindsight"
#: the same bound on the pairs, a sweep's score (``pgrpo.fit.benchmark.panel_sweep_rows``)
PANEL_SWEEP_NAME = "the best of the benchmark's forecasts, chosen per sweep in hindsight"
DYNAMICS_NAME = ("the true dynamics (the exact map fitted to the early window, a finite-G run continued from its state "
                 "at the cut)")
FAMILY_NAME = "the true family fitted to the early window"

#: what each target asks, in words
TARGET_WORDS = {"mean curve": f"mean-curve RMSE <= {TARGET_MEAN_CURVE} x persistence's",
                "plateau": f"plateau error <= {TARGET_PLATEAU} x persistence's",
                "pairs": f"pairs ordered right >= {TARGET_PAIRS:.0%} and >= +{TARGET_PAIRS_MARGIN * 100:.0f} points on "
                         "the order at the cut",
                "stop rule": f"stop rule saving >= {TARGET_STOP_SAVED:.0%} of the steps for <= {TARGET_STOP_LOSS:.0%}",
                "coverage": f"80% interval covering {TARGET_COVERAGE[0]:.0%}-{TARGET_COVERAGE[1]:.0%}"}


def _pct0(x: Any) -> str:
    return f"{100 * x:.0f}%" if finite_number(x) else "n/a"


def pairs_margin_reading(at_cut: float) -> str:
    """The arithmetic bound on the pairs' margin in words, where it binds
    (:func:`pgrpo.fit.truth_targets.margin_out_of_reach` decides)."""
    return (f"the order at the cut is already right on {at_cut:.0%}: +{TARGET_PAIRS_MARGIN * 100:.0f} points would "
            "need more than every pair: out of any forecast's reach")


def stop_ceiling_reading(ceiling: float) -> str:
    """Where stopping every run of each sweep but one at the cut saves less than the target
    (:func:`pgrpo.fit.decisions.steps_saved_ceiling`, the mean over the cell's sweeps; where it binds is decided in
    :func:`pgrpo.fit.truth_targets.target_readings`), in words."""
    return (f"stopping every run but one at the cut saves {100 * ceiling:.0f}%: out of any stop rule's reach at this "
            "cut")


def _saved_loss(saved: Any, loss: Any) -> str:
    """A stop rule's share of steps saved and its loss over the range: ``saved · loss%``."""
    return f"{_pct0(saved)} · " + (f"{100 * loss:.1f}%" if finite_number(loss) else "n/a")


def _value(value: Any, spec: str) -> str:
    if spec == "pairs":
        return _pct0(value)
    if spec == "stop":
        return _saved_loss(*value)
    return fmt(value, spec)


def bound_text(bound: Bound, spec: str, cell: Mapping[str, Any]) -> str:
    """One bound in words: what it is, its score (``spec``: a format, ``pairs`` or ``stop``) and what it says of the
    target."""
    if bound.kind == PAIRS_MARGIN:
        return pairs_margin_reading(bound.value)
    if bound.kind == STOP_CEILING:
        return stop_ceiling_reading(bound.value)
    if bound.kind == RECALIBRATION:
        return recalibration_reading(cell)
    if bound.kind in (CUBIC, CUBIC_LOGGED):
        if bound.value is None:
            return "no hindsight cubic in the results"
        return f"{bound.kind} {_value(bound.value, spec)}: " + (
            "in reach" if bound.in_reach else "out of any forecast's reach")
    if bound.kind in (FAMILY, DYNAMICS):
        return f"{FAMILY_NAME if bound.kind == FAMILY else DYNAMICS_NAME} {_value(bound.value, spec)}: " + (
            "in reach" if bound.in_reach else "out of the early window's reach")
    if bound.kind == PANEL_BOUND:
        return f"{PANEL_SWEEP_NAME if spec == 'pairs' else PANEL_NAME} {_value(bound.value, spec)}: " + (
            "in reach" if bound.in_reach else "out of the reach of every forecast here")
    raise ValueError(f"unknown bound kind {bound.kind!r}")


_SPECS = {"mean curve": ".3f", "plateau": ".3f", "pairs": "pairs", "stop rule": "stop", "coverage": "coverage"}


def value_text(reading: TargetReading) -> str:
    """The forecaster's score on a target: a ratio, ``right · at the cut``, ``saved · loss`` or a coverage."""
    if reading.target == "coverage":
        return coverage_percent(reading.value)
    if reading.target == "pairs":
        right, at_cut = reading.value
        return f"{_pct0(right)} · {_pct0(at_cut)}"
    if reading.target == "stop rule":
        return _saved_loss(*reading.value)
    return fmt(reading.value, ".3f")


def bounds_text(reading: TargetReading, cell: Mapping[str, Any]) -> str:
    """The bounds of a missed target, joined by ``; `` (empty for a met one)."""
    if reading.met:
        return ""
    texts = [bound_text(b, _SPECS[reading.target], cell) for b in reading.bounds]
    if reading.target == "coverage" and not any(texts):
        texts = ["a calibration target: no bound"]
    return "; ".join(t for t in texts if t)


def target_text(reading: TargetReading, cell: Mapping[str, Any]) -> str:
    """A table cell: the score, met or **not met**, and the bounds of a missed target in brackets."""
    if reading.met:
        return f"{value_text(reading)} met"
    bounds = bounds_text(reading, cell)
    return f"{value_text(reading)} **not met**" + (f" ({bounds})" if bounds else "")


#: a cell's status in words, for its verdict line and the standing
STATUS_WORDS = {MET: "all met", OUT_OF_REACH: "every missed target out of reach (the bound named)",
                BEYOND_HERE: "a missed target out of the reach of every forecast here, none shown out of reach",
                BEYOND_RECALIBRATION: "a missed coverage out of reach of any recalibration of this forecaster",
                OPEN: "open: a missed target that every bound leaves in reach"}


def verdict_line(cell: Mapping[str, Any]) -> str:
    """The cell as one line of ``benchmark.md``: each target's score and verdict, the bounds of a missed one, and the
    cell's status."""
    readings = target_readings(cell)
    parts = []
    for r in readings:
        bounds = bounds_text(r, cell)
        detail = f"target: {TARGET_WORDS[r.target]}" + (f"; {bounds}" if bounds else "")
        if r.target == "coverage":
            head = f"80% interval covers {value_text(r)} of the held-out logged values"
        elif r.target == "mean curve":
            head = f"mean-curve RMSE {value_text(r)} x persistence's where the truth moves"
        elif r.target == "plateau":
            head = f"plateau error {value_text(r)} x persistence's"
        elif r.target == "pairs":
            right, at_cut = r.value
            margin = right - at_cut if finite_number(right) and finite_number(at_cut) else float("nan")
            head = f"{_pct0(right)} of pairs ordered right, {fmt(margin * 100, '+.0f')} points on the order at the cut"
        else:
            saved, loss = r.value
            head = (f"the stop rule saves {_pct0(saved)} of the steps for a loss of {fmt(100 * loss, '.1f')}% of the "
                    "range")
        parts.append(f"{head} ({detail}) {'met' if r.met else 'NOT met'}")
    if not any(r.target == "mean curve" for r in readings):
        parts.append("the truth does not move after the cut: scored on the interval alone")
    status = cell_status(readings)
    return (f"- **{cell['part']} / {cell['split']}** ({fmt(cell.get('curves'), '.0f')} curves, "
            f"{cell.get('truth_kind')}): " + "; ".join(parts) + f" -> {STATUS_WORDS[status]}")


def standing_lines(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where issue 21's targets stand over the cells (the ``overall`` rows left out): how many are all met, how many
    have every missed target shown out of reach, how many are beyond the benchmark's forecasts or a recalibration
    only, and which targets of which cells are open."""
    s = standing(cells)
    if not s.total:
        return []

    def names(keys: Sequence[tuple[str, str]]) -> str:
        return ", ".join(f"{part} / {split}" for part, split in keys) or "none"

    lines = [f"**Where issue 21's targets stand** over the {s.total} cells at f = 0.25 (the overall rows pool them and "
             "are left out): each cell counted by its worst target.", "",
             f"- all met: {len(s.cells[MET])} ({names(s.cells[MET])});",
             f"- every missed target out of reach, by a bound that holds for any forecast or for the early window: "
             f"{len(s.cells[OUT_OF_REACH])} ({names(s.cells[OUT_OF_REACH])});",
             f"- a missed target out of the reach of every forecast the benchmark runs, none that any bound leaves in "
             f"reach: {len(s.cells[BEYOND_HERE])} ({names(s.cells[BEYOND_HERE])});",
             f"- a missed 80% coverage that no single level of this forecaster's predictive brings in: "
             f"{len(s.cells[BEYOND_RECALIBRATION])} ({names(s.cells[BEYOND_RECALIBRATION])});",
             f"- open, a missed target that every bound leaves in reach: {len(s.cells[OPEN])}"
             + (": " + "; ".join(f"{part} / {split} ({', '.join(targets)})"
                                 for (part, split), targets in s.open_targets.items()) if s.open_targets else "")
             + "."]
    return lines
