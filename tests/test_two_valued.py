"""A reward function's two values read off its logged mean and s.d. (:mod:`pgrpo.fit.two_valued`): exact on two-valued
draws, silent on anything else, inside the range the public logs' sources state, and the headroom of a function that
waits to rise where no range is declared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pgrpo.fit.staged import forecast_logged_components
from pgrpo.fit.two_valued import two_values

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "forecast" / "data"


def _steps(values, probabilities, n, seed=0, rounding=6):
    """Per step, the mean and sample s.d. (TRL's) of ``n`` completions drawn from ``values`` with ``probabilities``."""
    rng = np.random.default_rng(seed)
    means, sds = [], []
    for p in probabilities:
        x = rng.choice(values, size=n, p=p)
        means.append(round(float(x.mean()), rounding))
        sds.append(round(float(x.std(ddof=1)), rounding))
    return np.array(means), np.array(sds)


def test_two_valued_draws_give_their_two_values_and_the_completions_per_step():
    shares = np.linspace(0.05, 0.9, 40)
    means, sds = _steps([0.0, 2.0], [[1 - s, s] for s in shares], n=8)
    found = two_values(means, sds)
    assert found.low == pytest.approx(0.0, abs=1e-4) and found.high == pytest.approx(2.0, abs=1e-4)
    assert found.completions == pytest.approx(8, abs=0.01)  # k = (n - 1)/n recovered
    means, sds = _steps([-2.0, 0.5], [[1 - s, s] for s in shares], n=4, seed=1)
    found = two_values(means, sds)
    assert (found.low, found.high) == pytest.approx((-2.0, 0.5), abs=1e-4) and found.completions == pytest.approx(4, abs=0.01)


def test_anything_but_two_values_is_not_read_as_two():
    shares = np.linspace(0.05, 0.9, 40)
    three = _steps([0.0, 1.0, 2.0], [[1 - s, s / 2, s / 2] for s in shares], n=8)
    assert two_values(*three) is None
    # TRL's mean of several generation batches' means and s.d.s per logged step: no longer exact
    a, b = _steps([0.0, 2.0], [[1 - s, s] for s in shares], n=8, seed=2), _steps([0.0, 2.0], [[1 - s, s] for s in
                                                                                        shares[::-1]], n=8, seed=3)
    assert two_values((a[0] + b[0]) / 2, (a[1] + b[1]) / 2) is None
    means, sds = _steps([0.0, 2.0], [[1 - s, s] for s in shares], n=8)
    assert two_values(means[:4], sds[:4]) is None  # too few steps to tell
    assert two_values(np.zeros(20), np.zeros(20)) is None  # a silent function: every completion alike


def test_on_the_public_logs_every_exact_fit_is_inside_the_range_their_code_states():
    from pgrpo.grpo.run_log import reward_function_columns, reward_function_sds
    from pgrpo.stages.aggregate import load_log

    declared = json.loads((DATA / "ranges.json").read_text())
    fits = inside = equal = 0
    for path in sorted(DATA.glob("*.json")):
        if path.name in ("labels.json", "ranges.json", "batches.json"):
            continue
        frame = load_log(path)
        columns = reward_function_columns(frame.columns)
        for fn, sd in reward_function_sds(frame).items():
            found = two_values(frame[columns[fn]].to_numpy(float), sd)
            stated = ((declared.get(path.name) or {}).get("reward_function_ranges") or {}).get(fn)
            if found is None or stated is None:
                continue
            fits += 1
            tolerance = 1e-3 * (found.high - found.low)  # the logs round to ~6 digits
            inside += stated[0] - tolerance <= found.low and found.high <= stated[1] + tolerance
            equal += abs(found.low - stated[0]) <= tolerance and abs(found.high - stated[1]) <= tolerance
    # read from the reward code blind to the logs (SOURCES.md); the fits see only the logged numbers. Every fit lies
    # inside the stated range; most equal it, the rest are functions of more than two values that showed two by the
    # end (e.g. a format term at -0.8 or -0.2 of a stated [-0.8, 1.0])
    assert fits >= 30 and inside == fits and equal >= 0.8 * fits


def test_a_waiting_function_with_no_declared_range_takes_its_higher_value_as_headroom():
    steps = np.arange(1.0, 201.0)
    rng = np.random.default_rng(0)
    share = np.where(steps <= 60, 0.05 + 0.1 * rng.uniform(size=steps.size), 0.6)  # correctness rises after 60
    correct, correct_sd = _steps([0.0, 2.0], [[1 - s, s] for s in share], n=8, seed=4)
    fmt = np.clip(0.5 * (1 - np.exp(-steps / 10)) + rng.normal(0, 0.01, steps.size), 0, 0.5)
    columns = {"format": fmt, "correct": correct}
    reward = fmt + correct
    plain = forecast_logged_components(steps, reward, columns, 0.25, 200.0)
    read = forecast_logged_components(steps, reward, columns, 0.25, 200.0, sds={"correct": correct_sd})
    waiting = read.per_function["correct"]
    assert not waiting.started and waiting.range_source == "two-valued in the log"
    assert waiting.headroom == pytest.approx(2.0 - waiting.level_at_cut, abs=1e-3)
    assert any("took two values up to the cut, 0 and 2" in note for note in read.notes)
    # the point forecast is the functions' best fits either way; the headroom widens the band above it
    assert read.plateau["mean"] == pytest.approx(plain.plateau["mean"])
    assert read.plateau["hi80"] > plain.plateau["hi80"] + 0.5
