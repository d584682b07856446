"""Instability among the failure modes of ``pgrpo diagnose`` (pgrpo.diagnose.modes): recurring spikes vs an
isolated one (grad_norm and KL spikes, however far apart they recur), the KL read against the steps whose groups had
spread, the importance-sampling ratio on both sides and Prop. 9, vanishing updates and NaN divergence, a climb with a
reward crash; and the spike and climb signals (pgrpo.diagnose.modes.signals) against their definitions written as
plain loops. Truths are planted logs or hand-built curves."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import diagnostics_config
from pgrpo.errors import InputError
from pgrpo.stages.diagnose import run_diagnose
from tests import _modes_helpers
from tests._modes_helpers import diagnose, write_log

planted_reports = _modes_helpers.planted_reports  # the module-scoped fixture (a fixture is found by its name here)


def test_instability_recurring_spikes_vs_an_isolated_one(planted_reports):
    burst = planted_reports["planted_grad_spikes"].to_dict()["modes"]["instability"]
    isolated = planted_reports["planted_isolated_spike"].to_dict()["modes"]["instability"]
    crash = planted_reports["planted_kl_spike_crash"].to_dict()["modes"]["instability"]
    assert burst["flagged"] and "grad_norm spikes" in burst["verdict"]
    assert isolated["flagged"] is False and isolated["verdict"] == "approaching threshold"
    assert crash["flagged"] and "KL spikes" in crash["verdict"] and crash["onset_step"] == 200
    assert planted_reports["planted_kl_high_benign"].to_dict()["modes"]["instability"]["flagged"] is False


def _mostly_solved_kl(blowups: tuple[int, ...] = ()) -> pd.DataFrame:
    """A run whose prompts are mostly solved: four steps in five have every group tied (``frac_reward_zero_std`` 1)
    and a KL of ~1e-5 nats; every fifth step has spread and a KL of ~0.2; ``blowups``: steps with spread whose KL is
    5 nats (25x their like)."""
    rng = np.random.default_rng(5)
    steps = np.arange(1, 151)
    spread = steps % 5 == 0
    kl = np.where(spread, 0.2 + 0.02 * rng.standard_normal(steps.size), 1e-5 * (1 + rng.random(steps.size)))
    kl[np.isin(steps, blowups)] = 5.0
    return pd.DataFrame({"step": steps, "reward": 0.9 + 0.01 * rng.standard_normal(steps.size),
                         "frac_reward_zero_std": np.where(spread, 0.4, 1.0), "kl": kl})


@pytest.mark.parametrize("blowups, unstable", [((), False), ((40, 80, 120), True)])
def test_kl_spikes_are_read_against_the_steps_whose_groups_had_spread(blowups, unstable):
    """The tied steps' KL (~1e-5) is not the level of the steps still learning (~0.2): against it every fifth step
    would be a 'spike' (0.2 > 10 x 1e-5 and 0.1 nats above), recurring, so the run would read as unstable. Against the
    KL of the steps with spread, only the three 5-nat blow-ups (25x) are spikes, and they recur."""
    from pgrpo.diagnose.readouts.report import diagnose_curves

    curves = RunCurves("m", None, _mostly_solved_kl(blowups), "hand")
    verdict = diagnose_curves(curves, diagnostics_config(None)).verdicts.modes["instability"]
    assert verdict.flagged is unstable
    assert verdict.numbers["kl"]["n_spikes"] == len(blowups)
    if unstable:
        assert verdict.numbers["kl"]["spike_steps"] == [40.0, 80.0, 120.0]


def _base(n=100, **columns):
    rows = []
    for s in range(1, n + 1):
        row = {"step": s, "reward": 0.3 + 0.4 * s / n, "reward_std": 0.4, "frac_reward_zero_std": 0.1,
               "grad_norm": 1.0}
        row.update({k: (v(s) if callable(v) else v) for k, v in columns.items()})
        rows.append(row)
    return rows


@pytest.mark.parametrize("spike_steps, expected", [
    ((60, 140, 230), True),  # three KL spikes 80-90 logged points apart: no burst of 3 within 20, yet they recur
    ((60, 230), False),  # two: isolated spikes without effect
    ((60, 66, 72), True),  # a burst
])
def test_kl_spikes_that_recur_over_the_run_are_unstable_however_far_apart(tmp_path, spike_steps, expected):
    """The label definition (spikes >= ~10x their typical level that recur): ``spikes_unstable`` (3) spikes over the
    run, however far apart, flag instability with the onset at the first; two do not. The reward keeps rising, so
    no spike has a crash after it."""
    history = _base(300, kl=lambda s: 500.0 if s in spike_steps else 0.02 + 0.0001 * (s % 7))
    verdict = diagnose(write_log(tmp_path, f"kl_{len(spike_steps)}_{spike_steps[1]}", history)).to_dict()[
        "modes"]["instability"]
    assert verdict["flagged"] is expected
    if expected:
        assert "KL spikes" in verdict["verdict"] and verdict["onset_step"] == spike_steps[0]
    else:
        assert verdict["verdict"] == "approaching threshold"


def test_instability_reads_the_is_ratio_on_both_sides_and_prop9(tmp_path):
    high = write_log(tmp_path, "is_high", _base(**{"sampling/importance_sampling_ratio/max": lambda s: 1.2 if s < 40
                                                   else 40.0}))
    low = write_log(tmp_path, "is_low", _base(**{"sampling/importance_sampling_ratio/mean": lambda s: 1.0 if s < 40
                                                 else 0.2}))
    fine = write_log(tmp_path, "is_fine", _base(**{"sampling/importance_sampling_ratio/max": 1.3,
                                                  "sampling/importance_sampling_ratio/mean": 1.0}))
    for path, expected, kind in ((high, True, "high side"), (low, True, "low side"), (fine, False, "")):
        verdict = diagnose(path).to_dict()["modes"]["instability"]
        assert verdict["flagged"] is expected and kind in verdict["verdict"]
    assert diagnose(high).to_dict()["modes"]["instability"]["onset_step"] == pytest.approx(40, abs=10)
    beyond = diagnose(fine, {"eta": 1.0, "mu": 0.9, "k_ref": 1.0, "K": 0.5}).to_dict()["modes"]["instability"]
    assert beyond["flagged"] and "Prop. 9" in beyond["verdict"]
    assert beyond["numbers"]["prop9"]["threshold_ratio"] == pytest.approx(5.0)


def test_vanishing_updates_and_nan_divergence(tmp_path):
    stuck = write_log(tmp_path, "stopped", _base(reward=0.0, reward_std=0.0, frac_reward_zero_std=1.0,
                                                 grad_norm=lambda s: 0.5 if s < 30 else 0.0))
    verdict = diagnose(stuck).to_dict()["modes"]["instability"]
    assert verdict["flagged"] and "vanishing" in verdict["verdict"]
    text = json.dumps({"log_history": _base(grad_norm=lambda s: float("nan") if s >= 60 else 1.0)})
    diverged = tmp_path / "diverged.json"
    diverged.write_text(text)
    with pytest.raises(InputError, match=r"'grad_norm' is NaN or infinite at step 60.*--allow-nan"):
        diagnose(diverged)
    report = run_diagnose(str(diverged), allow_non_finite=True)
    verdict = report.to_dict()["modes"]["instability"]
    assert verdict["flagged"] and verdict["onset_step"] == 60 and "divergence" in verdict["verdict"]


def _climb_log(n=200, crash=True, column="grad_norm", low=1.0, cap=8.0):
    """Steps 1..n; ``column`` at ``low`` (x1.00-1.04), from step 141 to 160 x1.25 per step up to ``cap`` x ``low``,
    then back; the reward rising with a +-0.05 zigzag, at 0.2 from step 145 when ``crash``."""
    def value(s):
        return low * min(1.25 ** (s - 140), cap) if 140 < s <= 160 else low * (1 + 0.01 * (s % 5))

    def reward(s):
        return 0.2 if crash and s >= 145 else 0.3 + 0.4 * s / n + 0.05 * (-1) ** s
    return _base(n, reward=reward, **{column: value})


@pytest.mark.parametrize("column, low, crash, expected", [
    ("grad_norm", 1.0, True, 147),  # 1.25^7 = 4.8 >= 4 x 1.02 first at step 147; the reward crashed from 145
    ("grad_norm", 1.0, False, None),  # the same climb while the reward rises: the method working, not flagged
    ("kl", 0.02, True, 149),  # a KL climb 0.02 -> 0.16 nats: x4 at 147, but 0.1 nats above its level at 149
    ("kl", 0.002, True, None),  # x8 but 0.014 nats: under kl_spike_min, not a blow-up
])
def test_a_climb_with_a_reward_crash_is_unstable(tmp_path, column, low, crash, expected):
    """Session 26's climb signal: a level that climbs to ``climb_factor`` (4) x its median 10-30 points before and
    stays there for ``climb_points`` (3) points, where the reward crashes from the climb's first point. The onset
    is computed by hand: the first k with 1.25^k >= 4 x 1.02 (the lagged median of 1, 1.01 ... 1.04) is 7; for the
    KL at 0.02 x 1.25^k, 0.1 nats above 0.0204 first at k = 9 (1.25^8 = 5.96 < 6.02)."""
    base = {} if column == "grad_norm" else {"grad_norm": 1.0}
    history = [dict(row, **base) if column != "grad_norm" else row
               for row in _climb_log(crash=crash, column=column, low=low)]
    verdict = diagnose(write_log(tmp_path, f"climb_{column}_{low}_{crash}", history)).to_dict()["modes"][
        "instability"]
    if expected is None:
        assert verdict["flagged"] is False
    else:
        name = "grad_norm" if column == "grad_norm" else "KL"
        assert verdict["flagged"] is True and f"{name} climb" in verdict["verdict"]
        assert verdict["onset_step"] == expected


# --------------------------------------------------------------------- the signals against their definitions


def test_spikes_are_points_over_factor_times_the_median_of_the_previous_usable_window():
    """pgrpo.diagnose.modes.signals.spikes against its definition written as a plain loop: for each point, the median
    of the last ``window`` earlier values that are finite, positive and marked as reference (at least 2 of them);
    a spike exceeds ``factor`` x that median and the median by ``min_excess``. Random logs with zeros, NaN and inf."""
    from pgrpo.diagnose.modes.signals import spikes

    def by_definition(values, factor, window, min_excess, reference):
        usable = np.isfinite(values) & (values > 0) & (True if reference is None else reference)
        out = []
        for i in range(values.size):
            previous = values[:i][usable[:i]][-window:]
            if previous.size >= 2:
                level = float(np.median(previous))
                if values[i] > factor * level and values[i] - level >= min_excess:
                    out.append(i)
        return out

    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(0, 60))
        values = rng.lognormal(0, 1.5, n)
        values[rng.uniform(size=n) < 0.1] = 0.0
        values[rng.uniform(size=n) < 0.05] = np.nan
        if n and rng.uniform() < 0.3:
            values[rng.integers(0, n)] = np.inf
        reference = rng.uniform(size=n) < 0.8 if rng.uniform() < 0.5 else None
        window, factor, excess = int(rng.integers(1, 25)), float(rng.uniform(1, 10)), float(rng.uniform(0, 1))
        got = spikes(np.arange(n), values, factor, window, excess, reference)
        assert got.tolist() == by_definition(values, factor, window, excess, reference)
    # a hand case: 1, 1, 1, 10 with factor 5: the median of the three ones is 1, 10 > 5
    assert spikes(np.arange(4), np.array([1.0, 1.0, 1.0, 10.0]), 5.0, 10).tolist() == [3]


def test_climbs_are_runs_over_factor_times_the_lagged_median():
    """pgrpo.diagnose.modes.signals.climbs against its definition written as a plain loop: for each point from
    ``2 x lag`` on, the median of the finite, positive, reference values ``lag`` to ``3 x lag`` points before it (at
    least ``lag`` of them); a hit is at least ``factor`` x that median and the median plus ``min_excess``; a climb is
    a run of ``count`` or more hits in a row, reported at its first point with its median."""
    from pgrpo.diagnose.modes.signals import climbs

    def by_definition(values, factor, lag, count, min_excess, reference):
        usable = np.isfinite(values) & (values > 0) & (True if reference is None else reference)
        hits, levels = [], {}
        for i in range(values.size):
            window = [values[j] for j in range(max(0, i - 3 * lag), i - lag) if usable[j]] if i >= 2 * lag else []
            ok = False
            if len(window) >= lag:
                levels[i] = float(np.median(window))
                ok = bool(values[i] >= factor * levels[i] and values[i] - levels[i] >= min_excess)
            hits.append(ok)
        out, i = [], 0
        while i < len(hits):
            if hits[i]:
                j = i
                while j < len(hits) and hits[j]:
                    j += 1
                if j - i >= count:
                    out.append((i, levels[i]))
                i = j
            else:
                i += 1
        return out

    rng = np.random.default_rng(1)
    found = 0
    for _ in range(300):
        n = int(rng.integers(0, 80))
        values = rng.lognormal(0, 0.3, n) * np.where(rng.uniform(size=n) < 0.3, 6.0, 1.0)
        values[rng.uniform(size=n) < 0.05] = 0.0
        values[rng.uniform(size=n) < 0.03] = np.nan
        reference = rng.uniform(size=n) < 0.9 if rng.uniform() < 0.5 else None
        lag, count = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        excess = float(rng.choice([0.0, 0.5]))
        got = climbs(values, 3.0, lag, count, excess, reference)
        expected = by_definition(values, 3.0, lag, count, excess, reference)
        assert [i for i, _ in got] == [i for i, _ in expected]
        assert [level for _, level in got] == pytest.approx([level for _, level in expected])
        found += len(got)
    assert found > 20  # the random logs do hold climbs
