"""Timing for the benchmark scripts: the best wall-clock time of a few repeats, and a summary of per-step times
(speed is measured here, never asserted in a test)."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence


def best_of(repeats: int, func: Callable[[], object],
            clock: Callable[[], float] = time.perf_counter) -> tuple[float, object]:
    """The shortest of ``repeats`` timed calls of ``func`` (seconds of ``clock``: wall-clock by default,
    ``time.process_time`` for the process's CPU seconds) and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = clock()
        out = func()
        best = min(best, clock() - start)
    return best, out


@dataclass(frozen=True)
class StepTimes:
    """Per-step seconds after ``warmup`` steps: ``mean`` (what a long run pays, periodic work included), ``median``
    (the typical step, periodic work hidden), ``best``, and the number of steps they cover."""

    mean: float
    median: float
    best: float
    steps: int
    total: float


def steady_state(intervals: Sequence[float], warmup: int) -> StepTimes:
    """:class:`StepTimes` of ``intervals`` (seconds per step, in order) without the first ``warmup`` steps."""
    kept = list(intervals)[warmup:]
    if not kept:
        raise ValueError(f"no steps left after {warmup} warm-up steps of {len(intervals)}")
    return StepTimes(statistics.fmean(kept), statistics.median(kept), min(kept), len(kept), sum(kept))
