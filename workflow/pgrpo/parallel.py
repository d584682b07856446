"""An ordered map over independent work items in forked worker processes, for the corpus benchmarks (the forecast
benchmark's curves, :mod:`pgrpo.fit.benchmark`; the live benchmark's logs, :mod:`pgrpo.stages.live_benchmark`).
No equation of the paper: infrastructure.

Each item's result depends on that item alone (every forecast and every replay is seeded by itself), and the map
returns the results in the items' order, so the caller merges them as a serial loop would. The items are dealt
out in a fixed pattern, worker ``k`` of ``n`` taking items ``k, k + n, k + 2n, ...`` in order, so a rerun with the
same number of workers repeats every computation in the same process history: bitwise the same results. Another
number of workers can differ in a float's last bit, no more: numpy's vectorised sums round according to where an
array sits in memory, and that depends on what the process computed before. Workers are forked (Linux and macOS
with ``fork``), so the work function may be a closure over the corpus and the methods: only the item's index
goes in and its result comes back. ``workers`` is the job's Snakemake ``threads``.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import traceback
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: the work function of the map in progress (read by the forked workers)
_WORK: Callable[[int], Any] | None = None

#: seconds between checks that every worker is still alive while waiting for a result
_POLL_S = 1.0


class WorkerDied(RuntimeError):
    """A worker process ended without sending its results (killed: out of memory, a signal)."""


def usable_workers(requested: int | None, items: int) -> int:
    """At most ``requested`` (``None`` or < 1: one), at most one per item, and one where ``fork`` is missing."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(int(requested or 1), items))


def _deal(worker: int, workers: int, count: int, results: Any) -> None:
    """Worker ``worker``'s share, in order; an exception is sent back (itself where it pickles) and ends the share."""
    index = worker
    try:
        for index in range(worker, count, workers):
            results.put((index, True, _WORK(index)))  # type: ignore[misc]
    except BaseException as error:  # noqa: BLE001 - every failure is the caller's to raise
        error.add_note(f"in worker {worker} of {workers}, item {index}:\n{traceback.format_exc()}")
        try:
            results.put((index, False, error))
        except Exception:  # noqa: BLE001 - an exception that does not pickle goes back as its text
            results.put((index, False, RuntimeError(f"{type(error).__name__}: {error}")))


def ordered_map(work: Callable[[int], T], count: int, workers: int | None = 1,
                on_result: Callable[[int, T], None] | None = None) -> list[T]:
    """``[work(0), ..., work(count - 1)]``, computed on ``workers`` forked processes (in this process when one is
    usable). ``on_result(i, result)`` is called in this process in the items' order as the results arrive (progress
    lines, files written as they are ready). A worker's exception is raised here; a worker that dies raises
    :class:`WorkerDied`."""
    global _WORK
    n = usable_workers(workers, count)
    results: list[T] = []
    if n == 1:
        for index in range(count):
            results.append(work(index))
            if on_result:
                on_result(index, results[-1])
        return results
    _WORK = work
    context = multiprocessing.get_context("fork")
    channel = context.Queue()
    processes = [context.Process(target=_deal, args=(k, n, count, channel), daemon=True) for k in range(n)]
    try:
        for process in processes:
            process.start()
        waiting: dict[int, T] = {}
        while len(results) < count:
            try:
                index, ok, payload = channel.get(timeout=_POLL_S)
            except queue_module.Empty:
                dead = [p for p in processes if p.exitcode not in (None, 0)]
                if dead:
                    raise WorkerDied(f"a worker process ended with exit code {dead[0].exitcode} before sending its "
                                     f"results ({len(results)} of {count} items done)") from None
                continue
            if not ok:
                raise payload
            waiting[index] = payload
            while len(results) in waiting:
                results.append(waiting.pop(len(results)))
                if on_result:
                    on_result(len(results) - 1, results[-1])
        for process in processes:
            process.join()
    finally:
        _WORK = None
        for process in processes:
            if process.pid is None:
                continue  # never started
            if process.is_alive():
                process.terminate()
            process.join(timeout=10)  # reaped: no zombie left behind an error
    return results
