"""One live read as a unit of work, and the background worker that runs it off the trainer's thread: the reads of
:mod:`pgrpo.live.reads` (Section 5's failure modes, Figures 2-5, through ``pgrpo diagnose``'s ``diagnose_curves``;
Section 4.4's forecast through ``pgrpo forecast``'s ``forecast_run``; ``K`` from the early slope, Eq. 14 inverted)
on a snapshot of ``state.log_history``.

:func:`perform_read` is the one code path: the callback calls it in-process when synchronous, and the worker calls
the very same function on a :class:`ReadRequest` with the same log and the same previous read, so both compute the
same read. :class:`BackgroundReader` holds ONE worker process (a ``spawn`` ``ProcessPoolExecutor`` with
``max_workers=1``, started by :meth:`BackgroundReader.start` or on first use) and at most one pending read. The
worker imports this module and :mod:`pgrpo.live.reads` (numpy, pandas, scipy), never torch or transformers, and
never the user's training script: the ``__main__`` module is hidden while the process is spawned, so a script
without an ``if __name__ == "__main__"`` guard is not run again in the worker. Its BLAS is limited to one thread, so
that it competes with training for one core at most.

What the trainer's thread pays is kept small and independent of the log's length: a job (:class:`WorkerJob`)
carries only the log entries added since the last job (the worker keeps the log and the reads it made,
:class:`WorkerLog`), and the worker also writes the previous read's ``live.json``/``live.html``
(:func:`write_live_files`, the function the callback calls when it writes itself): those files are the one thing
here that touches the disk.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import sys
import time
import types
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from pgrpo.live.reads import KEY_PREFIX, MIN_POINTS_FOR_K, LiveRead, LiveSettings

#: the environment variables that bound the worker's BLAS/OpenMP threads (set to 1 where the parent did not set them)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class ReadRequest:
    """Everything a read needs, as plain data: the log so far (``history``: the entries of ``state.log_history``),
    the callback's settings and run metadata (``meta``: eta, mu, k_ref, G, the completion cap), the planned length
    and batch, the read's number (``index``: whether it forecasts), the previous read (whose forecast a read that
    does not forecast carries forward), whether ``K`` is still to be measured, and the trainer's step. Sent to the
    worker inside a :class:`WorkerJob`, ``history`` holds only the new entries and ``previous`` is left out (the
    worker has both)."""

    history: Sequence[Mapping[str, Any]]
    settings: LiveSettings
    meta: Mapping[str, Any]
    total_steps: float | None
    batch: float | None
    index: int
    previous: LiveRead | None
    measure_k: bool
    global_step: int
    #: the position in the log of ``history[0]`` (0: ``history`` is the whole log)
    history_start: int = 0


@dataclass
class ReadResult:
    """A read and what came with it: ``read`` (None when the log could not be read: ``error`` says why, as
    ``TypeName: message``), ``measured`` (Theorem 7 with ``K`` from the early slope, when it was measured at this
    read) or ``measured_error``, and the read's own cost (``cpu_seconds`` of the process that made it, ``seconds``
    of wall time, ``pid``)."""

    global_step: int
    read: LiveRead | None = None
    error: str | None = None
    measured: dict[str, Any] | None = None
    measured_error: str | None = None
    cpu_seconds: float = 0.0
    seconds: float = 0.0
    pid: int = 0
    #: why the worker could not write the previous read's files, if it could not
    page_error: str | None = None


def snapshot_history(history: Sequence[Any]) -> list[dict[str, Any] | None]:
    """Log entries as a read reads them, copied as plain dicts (numbers, strings; anything else as ``float`` or
    ``str``) without the keys earlier reads added (:data:`pgrpo.live.reads.KEY_PREFIX`, which a read drops anyway);
    an entry that is not a mapping (which a read skips) as None, so that positions stay those of the log."""
    return [{key: _plain_value(value) for key, value in entry.items() if not str(key).startswith(KEY_PREFIX)}
            if isinstance(entry, Mapping) else None for entry in history]


def _plain_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def perform_read(request: ReadRequest) -> ReadResult:
    """One read (:func:`pgrpo.live.reads.read_curves` on ``curves_from_history`` of the request's log) and, when
    asked and there are enough rewards, ``K`` from the early slope (:func:`pgrpo.live.reads.measured_theory`).
    Never raises: a log that cannot be read is ``error``."""
    from pgrpo.live.reads import curves_from_history, measured_theory, read_curves

    if request.history_start != 0:
        raise ValueError("perform_read needs the whole log (history_start 0)")
    started, cpu = time.perf_counter(), time.process_time()
    result = ReadResult(request.global_step, pid=os.getpid())
    try:
        curves = curves_from_history(request.history, "state.log_history", request.meta)
        forecast = request.settings.forecasts_at(request.index)
        result.read = read_curves(curves, request.settings, request.total_steps, request.batch, forecast,
                                  request.previous)
    except Exception as error:  # noqa: BLE001 - a log it cannot read: reported, never raised
        result.error = f"{type(error).__name__}: {error}"
    if result.read is not None and request.measure_k and request.meta.get("eta"):
        steps, values, _ = curves.series("reward")
        if steps.size >= MIN_POINTS_FOR_K:
            try:
                result.measured = measured_theory(steps, values, request.meta["eta"], request.meta["mu"],
                                                  request.meta["k_ref"])
            except Exception as error:  # noqa: BLE001
                result.measured_error = f"{type(error).__name__}: {error}"
    result.cpu_seconds, result.seconds = time.process_time() - cpu, time.perf_counter() - started
    return result


def write_live_files(folder: str | os.PathLike, read: LiveRead, settings: LiveSettings, reads: Sequence[LiveRead],
                     theory: Mapping[str, Any], stopped: Mapping[str, Any] | None, total_steps: float | None,
                     history: Sequence[Any], alerts: Sequence[Mapping[str, Any]] = ()) -> None:
    """``live.json`` and ``live.html`` of ``read`` (and ``stop.json`` when stopped) in ``folder``, atomically; the
    page's curve is the reward logged in ``history`` so far; ``alerts``: those told so far."""
    from pgrpo.live.page import live_payload

    rows = [(e["step"], e["reward"]) for e in history if isinstance(e, Mapping) and "reward" in e and "step" in e]
    curve = {"step": [r[0] for r in rows], "reward": [r[1] for r in rows]} if rows else None
    write_live_payload(folder, live_payload(read, settings, reads, theory, stopped, "state.log_history", total_steps,
                                            curve=curve, alerts=alerts), stopped)


def write_live_payload(folder: str | os.PathLike, payload: Mapping[str, Any],
                       stopped: Mapping[str, Any] | None) -> None:
    """``payload`` as ``live.json`` and ``live.html`` in ``folder``, and ``stopped`` as ``stop.json`` when a stop
    rule has fired, each atomically: the one writer of the callback's files and ``pgrpo watch``'s."""
    from pathlib import Path

    from pgrpo.atomic import write_json, write_text
    from pgrpo.live.page import live_html

    write_json(Path(folder) / "live.json", payload)
    write_text(Path(folder) / "live.html", live_html(payload))
    if stopped:
        write_json(Path(folder) / "stop.json", dict(stopped))


def read_live_json(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The ``live.json`` an earlier process wrote in ``folder`` (None: none, or unreadable: a resumed run starts
    its record afresh rather than fail)."""
    from pathlib import Path

    from pgrpo.atomic import read_json
    from pgrpo.errors import InputError

    try:
        return read_json(Path(folder) / "live.json", "live.json")
    except (InputError, OSError):
        return None


@dataclass
class PageJob:
    """The previous read's files, for the worker to write before it reads (``folder``: ``<output_dir>/pgrpo``; the
    read is the worker's latest; ``theory``, ``stopped``, ``alerts`` and the settings as the callback has them)."""

    folder: str
    settings: LiveSettings
    theory: Mapping[str, Any]
    stopped: Mapping[str, Any] | None
    total_steps: float | None
    alerts: Sequence[Mapping[str, Any]] = ()


@dataclass
class WorkerJob:
    """One job of the worker: the log entries from position ``request.history_start`` on (the entry before them
    sent again, so that keys added to it after the last job are seen), the page of the previous read, the read."""

    request: ReadRequest
    page: PageJob | None = None


@dataclass
class WorkerLog:
    """What the worker keeps between jobs: the log so far and the reads it made (those the callback applied)."""

    history: list[Any] = field(default_factory=list)
    reads: list[LiveRead] = field(default_factory=list)


#: the worker process's log and reads (only ever filled in the worker)
_WORKER_LOG = WorkerLog()


class OutOfStep(RuntimeError):
    """The worker's log or reads do not line up with the job (a new worker given a partial log)."""


def run_job(job: WorkerJob) -> ReadResult:
    """In the worker: splice the new entries into its log, write the previous read's page, make the read."""
    request, log = job.request, _WORKER_LOG
    started, cpu = time.perf_counter(), time.process_time()
    if request.history_start == 0:
        log.history = []
    if request.index == 0:
        log.reads = []
    if request.history_start > len(log.history) or request.index != len(log.reads):
        raise OutOfStep(f"the worker has {len(log.history)} log entries and {len(log.reads)} reads; the job starts "
                        f"at entry {request.history_start} for read {request.index}")
    log.history[request.history_start:] = list(request.history)
    page_error = None
    if job.page is not None and log.reads:
        try:
            write_live_files(job.page.folder, log.reads[-1], job.page.settings, log.reads, job.page.theory,
                             job.page.stopped, job.page.total_steps, log.history, job.page.alerts)
        except Exception as error:  # noqa: BLE001 - reported, never raised
            page_error = f"could not write live.json: {type(error).__name__}: {error}"
    full = ReadRequest(log.history, request.settings, request.meta, request.total_steps, request.batch,
                       request.index, log.reads[-1] if log.reads else None, request.measure_k, request.global_step)
    result = perform_read(full)
    result.page_error = page_error
    if result.read is not None:
        log.reads.append(result.read)
    # the job's whole cost (the page included), as the worker's share of the run
    result.cpu_seconds, result.seconds = time.process_time() - cpu, time.perf_counter() - started
    return result


def worker_pid() -> int:
    """The worker's process id: the first task a new worker runs, which imports what a read imports (the
    diagnosis, the forecaster, the K measurement), so that the first read does not pay for it."""
    import pgrpo.diagnose.readouts.report  # noqa: F401
    import pgrpo.fit.forecast  # noqa: F401
    import pgrpo.fit.kref_sweep  # noqa: F401
    import pgrpo.theory.closed_forms  # noqa: F401

    return os.getpid()


def _quiet_worker() -> None:
    """The worker ignores Ctrl-C (sent to the whole process group): the trainer handles it, and the worker is shut
    down by its owner or at exit, not with a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _spawn_environment() -> Iterator[None]:
    """While a worker is spawned: no ``__main__`` for it to re-import (the user's script is not run again; the
    worker is started like one from an interactive session) and one BLAS thread unless the parent set a number."""
    main = sys.modules.get("__main__")
    added = [name for name in THREAD_VARIABLES if name not in os.environ]
    for name in added:
        os.environ[name] = "1"
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main
        for name in added:
            os.environ.pop(name, None)


#: the pools still running, shut down at interpreter exit if their owner never did
_LIVE_POOLS: "weakref.WeakSet[ProcessPoolExecutor]" = weakref.WeakSet()


def _shutdown(pool: ProcessPoolExecutor) -> None:
    """Stop a pool and its process now: pending work cancelled, a read still running ended (the process
    terminated), the process joined by the pool's own manager thread (the one that reaps it)."""
    if getattr(pool, "_pending_work_items", None):  # a read still running: not waited for
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                process.terminate()
    with contextlib.suppress(Exception):  # shutting down never raises
        pool.shutdown(wait=True, cancel_futures=True)
    _LIVE_POOLS.discard(pool)


@atexit.register
def _shutdown_all() -> None:
    for pool in list(_LIVE_POOLS):
        _shutdown(pool)


class WorkerFailed(RuntimeError):
    """The worker process could not start, died, or could not take or return a read."""


@dataclass
class PendingRead:
    """A read submitted to the worker and not yet applied: the same read with the whole log (kept, so that a read
    the worker lost is made in-process instead: no read is dropped) and its future."""

    request: ReadRequest
    future: Future


class BackgroundReader:
    """ONE worker process and at most one pending read (:meth:`submit`, :meth:`collect`). Any failure of the
    worker (it cannot start, dies, a read cannot be sent or returned) raises :class:`WorkerFailed` and shuts the
    worker down; the caller then reads in-process (:func:`perform_read`). The process is shut down by
    :meth:`close`, when the reader is garbage-collected, and at interpreter exit."""

    def __init__(self):
        self._pool: ProcessPoolExecutor | None = None
        self._finalizer: weakref.finalize | None = None
        self.pending: PendingRead | None = None
        self.pid: int | None = None
        self._pid_future: Future | None = None

    @property
    def running(self) -> bool:
        return self._pool is not None

    def start(self) -> None:
        """Start the worker now (the callback does at train begin, so that its start-up overlaps the first
        steps); :class:`WorkerFailed` if it cannot start."""
        if self._pool is None:
            try:
                self._start()
            except Exception as error:  # noqa: BLE001
                self.close()
                raise WorkerFailed(f"{type(error).__name__}: {error}") from error

    def _start(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("spawn")
        with _spawn_environment():
            pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_quiet_worker)
            try:
                self._pid_future = pool.submit(worker_pid)  # the process is spawned here, __main__ hidden
            except BaseException:
                _shutdown(pool)
                raise
        _LIVE_POOLS.add(pool)
        self._pool = pool
        with contextlib.suppress(Exception):  # spawned synchronously by the submit above
            self.pid = next(iter(pool._processes))
        self._finalizer = weakref.finalize(self, _shutdown, pool)
        return pool

    def submit(self, job: WorkerJob, fallback: ReadRequest) -> None:
        """Send a job to the worker (started on first use) without waiting; one at most is pending. ``fallback``:
        the same read with the whole log, made in-process if the worker loses it."""
        if self.pending is not None:
            raise RuntimeError("a read is still pending: collect it first")
        try:
            pool = self._pool or self._start()
            self.pending = PendingRead(fallback, pool.submit(run_job, job))
        except Exception as error:  # noqa: BLE001
            self.close()
            raise WorkerFailed(f"{type(error).__name__}: {error}") from error

    def collect(self) -> tuple[ReadResult, float] | None:
        """The pending read's result and the seconds spent waiting for it (0 when it was done), or None when none
        is pending; :class:`WorkerFailed` (the request on ``error.request``) when the worker lost it."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        started = time.perf_counter()
        done = pending.future.done()
        try:
            result = pending.future.result()
        except Exception as error:  # noqa: BLE001 - the worker died or the read could not travel
            self.close()
            failure = WorkerFailed(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
            failure.request = pending.request  # type: ignore[attr-defined]
            raise failure from error
        return result, 0.0 if done else time.perf_counter() - started

    def close(self) -> None:
        """Shut the worker down (a pending read is dropped: collect it first to keep it)."""
        if self._finalizer is not None:
            self._finalizer()  # runs _shutdown once
        self._pool, self._finalizer, self.pending = None, None, None


def worker_modules() -> list[str]:
    """The modules imported in the process that runs this (the tests check the worker's: no torch, no
    transformers)."""
    return sorted(sys.modules)
