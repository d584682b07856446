"""The corpus benchmarks' ordered map (pgrpo.parallel): results in the items' order whatever the workers, items dealt
in a fixed pattern, a worker's error raised in the caller and a dead worker named, and the forecast benchmark's
rows the same on one process and on two."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from pgrpo.parallel import ordered_map, usable_workers


def test_results_and_callbacks_come_in_the_items_order_on_any_number_of_workers():
    for workers in (1, 2, 3):
        seen = []
        out = ordered_map(lambda i: (i * i, os.getpid()), 7, workers, lambda i, r: seen.append((i, r[0])))
        assert [r[0] for r in out] == [i * i for i in range(7)]
        assert seen == [(i, i * i) for i in range(7)]  # called here, in order
        pids = {r[1] for r in out}
        assert (pids == {os.getpid()}) == (workers == 1)  # more than one worker: the work is done in children


def test_a_closure_over_unpicklable_state_runs_in_the_forked_workers():
    local = {"offset": 10, "f": lambda x: x + 1}  # a lambda in a dict: never pickled, only inherited
    assert ordered_map(lambda i: local["f"](i) + local["offset"], 4, 2) == [11, 12, 13, 14]


def test_a_worker_s_error_is_raised_in_the_caller():
    def work(i):
        if i == 2:
            raise ValueError("item 2 is bad")
        return i

    with pytest.raises(ValueError, match="item 2 is bad") as raised:
        ordered_map(work, 4, 2)
    assert "in worker 0 of 2, item 2" in "\n".join(raised.value.__notes__)  # which item, and its traceback
    assert "raise ValueError" in "\n".join(raised.value.__notes__)


def test_items_are_dealt_in_a_fixed_pattern_so_a_rerun_repeats_each_worker_s_history():
    """Worker k of n computes items k, k + n, ... in order: the same process history on every rerun."""
    pids = ordered_map(lambda i: os.getpid(), 7, 3)
    assert [pids.index(pids[i]) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert len(set(pids)) == 3


def test_a_worker_that_dies_is_named_instead_of_waited_for():
    from pgrpo.parallel import WorkerDied

    def work(i):
        if i == 1:
            os._exit(3)  # killed, as by the out-of-memory killer: no exception, no result
        return i

    with pytest.raises(WorkerDied, match="exit code 3"):
        ordered_map(work, 4, 2)


def test_workers_are_at_most_one_per_item_and_at_least_one():
    assert usable_workers(8, 3) == 3
    assert usable_workers(None, 5) == 1 and usable_workers(0, 5) == 1
    assert usable_workers(4, 0) == 1


def test_the_forecast_protocol_scores_the_same_rows_on_two_processes_as_on_one():
    """Seeded forecasts per curve: the rows (sweep scores included) do not depend on how the curves are shared out."""
    from pgrpo.fit.benchmark import Curve, baseline_method, forecaster_method, run_protocol
    from pgrpo.fit.forecaster import ForecasterSettings

    rng = np.random.default_rng(3)
    steps = np.arange(1.0, 121.0)
    corpus = []
    for k, (level, rate) in enumerate([(0.8, 0.05), (0.6, 0.02), (0.9, 0.1), (0.4, 0.03)]):
        truth = level * (1 - np.exp(-rate * steps))
        corpus.append(Curve(f"c{k}", "closed-form", "dev", "reward", steps, truth + rng.normal(0, 0.05, steps.size),
                            truth=truth, sweep="s"))
    methods = {"persistence": baseline_method("persistence"), "exponential": baseline_method("exponential"),
               "forecaster": forecaster_method(ForecasterSettings())}
    one = pd.DataFrame(run_protocol(corpus, methods, (0.25, 0.5), workers=1))
    two = pd.DataFrame(run_protocol(corpus, methods, (0.25, 0.5), workers=2))
    assert len(one) > 4 * 2 * 3 and (one.get("kind") == "sweep").any()  # curves' rows and the sweep's
    assert one.to_csv() == two.to_csv()
