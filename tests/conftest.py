"""Shared test setup: one torch thread, no hub access, the repository root; the order the test files are handed to
the pytest-xdist workers, and an optional timeline of the run."""

import json
import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


#: Seconds each test file took in a whole run (setup, call and teardown of its tests, summed), measured by
#: ``benchmarks/bench_test_schedule.py --write`` from a timeline of ``make test``: the order the files are handed to
#: the pytest-xdist workers. ``--dist loadfile`` gives each worker a whole file at a time, and xdist's default order
#: (files with more tests first) left the longest end-to-end files, one or two tests each, for last, one worker busy
#: with them while the other had nothing left to take. Longest first, they start at once and the many short files
#: fill the gaps. A file not listed keeps its collection place after the listed ones.
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")


#: Files that wait for what ``make test`` sets up beside the suite, and the place in the order they are moved to: the
#: vLLM tests wait for their venv (minutes of downloads), so they are handed out once both workers have started a
#: long file, not first, when a worker would sit idle until the venv is there.
STARTS_LATER = {"tests/test_vllm_suite.py": 2}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = json.loads(MODULE_SECONDS.read_text())["seconds"] if MODULE_SECONDS.exists() else {}
    rank = {module: index for index, module in
            enumerate(file_order(list(dict.fromkeys(_module(item) for item in items)), seconds))}
    items.sort(key=lambda item: rank[_module(item)])


def file_order(modules: list[str], seconds: dict[str, float]) -> list[str]:
    """``modules`` (in collection order) longest first by ``seconds``, unlisted ones after in their order, then each
    file of :data:`STARTS_LATER` moved to its place (also what benchmarks/bench_test_schedule.py replays)."""
    first_seen = {module: index for index, module in enumerate(modules)}
    order = sorted(modules, key=lambda module: (-seconds.get(module, 0.0), first_seen[module]))
    for module, place in STARTS_LATER.items():
        if module in order:
            order.remove(module)
            order.insert(min(place, len(order)), module)
    return order


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With ``PGRPO_TEST_TIMELINE=FILE``, one JSON line per test (worker, test, start, end): what
    ``benchmarks/bench_test_schedule.py`` reads to measure the files and the workers' idle time."""
    timeline = os.environ.get("PGRPO_TEST_TIMELINE")
    start = time.time()
    yield
    if timeline:
        record = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "test": item.nodeid,
                  "module": _module(item), "start": start, "end": time.time()}
        with open(timeline, "a") as handle:  # one short line per write: appends of the workers do not interleave
            handle.write(json.dumps(record) + "\n")
