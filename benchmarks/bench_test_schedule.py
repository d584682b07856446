"""How the test suite's files are shared out between the pytest-xdist workers, measured and simulated.

``make test`` runs pytest on two workers with ``--dist loadfile``: a worker takes a whole file at a time, and takes
the next one as soon as it has at most two of its tests left (xdist's ``LoadScopeScheduling``). The order the files
are taken in decides how long the suite takes: a long file taken last runs alone while the other worker idles.

Run the suite with a timeline (``tests/conftest.py`` writes one JSON line per test when ``PGRPO_TEST_TIMELINE`` is
set), then read it::

    PGRPO_TEST_TIMELINE=/tmp/timeline.jsonl make test
    python benchmarks/bench_test_schedule.py /tmp/timeline.jsonl [--workers 2] [--write]

It prints the measured run (wall-clock, each worker's busy and idle seconds, the files that ran last) and the
makespan of the same tests replayed through xdist's scheduling rule in two orders: xdist's own (files with more
tests first) and the measured one (longest file first, the order ``tests/conftest.py`` gives). The replay takes each
test's measured duration as fixed, so it ignores that two workers slow each other down on two cores; it compares the
orders, it does not predict the suite's time. ``--write`` stores the files' seconds in ``tests/module_seconds.json``,
the order the next runs use.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import subprocess
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MODULE_SECONDS = REPO_ROOT / "tests" / "module_seconds.json"
#: xdist's LoadScopeScheduling asks for another file once a worker has at most this many of its tests left
PENDING_BEFORE_MORE = 2


def read_timeline(paths: list[Path]) -> list[dict]:
    records = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    if not records:
        raise SystemExit(f"no test in {', '.join(map(str, paths))}: run the suite with PGRPO_TEST_TIMELINE set")
    return records


def modules_in_order(records: list[dict]) -> dict[str, list[float]]:
    """Each file's test durations in the order they ran, files in collection (alphabetical) order."""
    tests: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for record in records:
        tests[record["module"]].append((record["start"], record["end"] - record["start"]))
    return {module: [duration for _, duration in sorted(tests[module])] for module in sorted(tests)}


def simulate(modules: dict[str, list[float]], order: list[str], workers: int) -> float:
    """The makespan of xdist's loadfile scheduling: each worker first takes one file (and a second if the first has
    at most PENDING_BEFORE_MORE tests); after each test a worker with at most that many tests left takes the next
    file of ``order``."""
    queue = list(order)
    pending: list[list[float]] = [[] for _ in range(workers)]
    clock = [0.0] * workers
    for worker in range(workers):
        if queue:
            pending[worker].extend(modules[queue.pop(0)])
    for worker in range(workers):  # xdist tops a worker up at once if its first file is that short
        if queue and len(pending[worker]) <= PENDING_BEFORE_MORE:
            pending[worker].extend(modules[queue.pop(0)])
    while any(pending):
        worker = min((w for w in range(workers) if pending[w]), key=lambda w: clock[w] + pending[w][0])
        clock[worker] += pending[worker].pop(0)
        if queue and len(pending[worker]) <= PENDING_BEFORE_MORE:
            pending[worker].extend(modules[queue.pop(0)])
    return max(clock)


def report(records: list[dict], workers: int) -> dict[str, float]:
    start = min(r["start"] for r in records)
    end = max(r["end"] for r in records)
    wall = end - start
    print(f"measured: {len(records)} tests, wall-clock {wall:.0f} s")
    by_worker: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        by_worker[record["worker"]].append(record)
    for worker, rows in sorted(by_worker.items()):
        busy = sum(r["end"] - r["start"] for r in rows)
        last = max(r["end"] for r in rows)
        print(f"  {worker}: busy {busy:.0f} s, idle {wall - busy:.0f} s (of which {end - last:.0f} s after its last "
              f"test)")
    modules = modules_in_order(records)
    seconds = {module: sum(durations) for module, durations in modules.items()}
    tail = sorted({r["module"]: r["end"] for r in records}.items(), key=lambda item: -item[1])[:4]
    print("  the files that ended last: " + ", ".join(f"{m} ({seconds[m]:.0f} s, ended {e - start:.0f} s in)"
                                                      for m, e in tail))
    total = sum(seconds.values())
    xdist_order = sorted(modules, key=lambda m: -len(modules[m]))  # stable: alphabetical within a count
    measured_order = conftest_file_order()(sorted(modules), seconds)
    print(f"replayed on {workers} workers ({total:.0f} s of tests, {total / workers:.0f} s each if evenly shared):")
    print(f"  xdist's order (files with more tests first): {simulate(modules, xdist_order, workers):.0f} s")
    print(f"  longest file first (tests/conftest.py):      {simulate(modules, measured_order, workers):.0f} s")
    return seconds


def conftest_file_order():
    """tests/conftest.py's ``file_order``: the order the suite hands its files out in (longest first, the files that
    wait for a setup moved later), loaded from the file so that the replay and the suite share one rule."""
    spec = importlib.util.spec_from_file_location("tests_conftest", REPO_ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.file_order


def write_seconds(seconds: dict[str, float]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                            text=True).stdout.strip()
    MODULE_SECONDS.write_text(json.dumps({
        "_about": "Seconds each test file took in a whole run of the suite (its tests' setup, call and teardown, "
                  "summed): the order tests/conftest.py hands the files to the pytest-xdist workers, longest first. "
                  "Written by benchmarks/bench_test_schedule.py --write from a timeline of make test.",
        "measured": f"{datetime.date.today().isoformat()} at {commit}",
        "seconds": {m: round(s, 1) for m, s in sorted(seconds.items(), key=lambda item: -item[1])},
    }, indent=1) + "\n")
    print(f"wrote {MODULE_SECONDS.relative_to(REPO_ROOT)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline", nargs="+", type=Path, help="JSON lines written with PGRPO_TEST_TIMELINE set")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers to replay (default 2)")
    parser.add_argument("--write", action="store_true", help=f"store the files' seconds in {MODULE_SECONDS.name}")
    args = parser.parse_args(argv)
    seconds = report(read_timeline(args.timeline), args.workers)
    if args.write:
        write_seconds(seconds)


if __name__ == "__main__":
    main()
