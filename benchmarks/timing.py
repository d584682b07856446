"""Timing for the benchmark scripts: the best wall-clock time of a few repeats (speed is measured here, never
asserted in a test)."""

from __future__ import annotations

import time
from typing import Callable


def best_of(repeats: int, func: Callable[[], object]) -> tuple[float, object]:
    """The shortest of ``repeats`` timed calls of ``func`` (seconds) and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
    return best, out
