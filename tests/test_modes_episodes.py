"""Issue 22's modes: every mode's episodes (a failure that comes and goes), ``oscillation`` against Theorem 7
(period recovered within 10% of the exact delayed map's dominant-root period, Eq. 3 at zeta < 1), the length modes,
and a regression that needs a gain. Truths are planted parameters or hand-built curves, never earlier output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pgrpo.diagnose.benchmark import episode_overlap
from pgrpo.diagnose.planted import SEED, planted_logs, planted_period
from pgrpo.diagnose.settings import diagnostics_config
from pgrpo.stages.diagnose import diagnose_log

CASES = planted_logs(SEED)


def run(tmp_path, name, history, meta=None):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"log_history": history}))
    return diagnose_log(str(path), meta=meta, config=diagnostics_config(None)).to_dict()


def planted(tmp_path, name):
    case = CASES[name]
    return run(tmp_path, name, case["log_history"], case["meta"])


@pytest.mark.parametrize("name", ["planted_ringing_zeta012", "planted_ringing_zeta004", "planted_ringing_every5"])
def test_ringing_period_within_10_percent_of_the_exact_map(tmp_path, name):
    meta = CASES[name]["meta"]
    truth = planted_period(meta["eta"], meta["mu"], meta["K"], meta["k_ref"])
    modes = planted(tmp_path, name)["modes"]
    osc = modes["oscillation"]
    assert osc["flagged"] is True
    assert abs(osc["numbers"]["period"] / truth - 1) <= 0.10
    assert 0 < osc["numbers"]["damping_ratio"] < 1
    assert osc["numbers"]["theorem7"]["zeta"] < 1 and osc["numbers"]["agreement"] == "agrees with Theorem 7"
    assert modes["regression"]["flagged"] is False and modes["no_learning"]["flagged"] is False
    assert osc["episodes"] and osc["onset_step"] == osc["episodes"][0]["start"]


def test_a_sinusoid_of_known_period_in_noise(tmp_path):
    rng = np.random.default_rng(3)
    steps = np.arange(1, 241)
    reward = 0.5 + 0.15 * np.sin(2 * np.pi * steps / 30) + rng.normal(0, 0.05, steps.size)
    osc = run(tmp_path, "sine", [{"step": int(s), "reward": float(r)} for s, r in zip(steps, reward)])["modes"][
        "oscillation"]
    assert osc["flagged"] is True and abs(osc["numbers"]["period"] / 30 - 1) <= 0.10
    assert osc["active"] is True and osc["episodes"][-1]["end"] is None  # undamped: still on at the last step


def test_no_oscillation_in_a_wobble_within_the_noise_a_sawtooth_or_red_noise(tmp_path):
    for name in ("planted_plateau_wobble", "planted_healthy", "planted_regression_at_cap"):
        assert planted(tmp_path, name)["modes"]["oscillation"]["flagged"] is False, name
    saw = planted(tmp_path, "planted_refresh_sawtooth")["modes"]["oscillation"]
    assert saw["flagged"] is False
    rng = np.random.default_rng(5)
    x = np.zeros(300)
    for i in range(1, 300):  # AR(1) with phi 0.8: the null itself
        x[i] = 0.8 * x[i - 1] + rng.normal(0, 0.03)
    red = run(tmp_path, "red", [{"step": i + 1, "reward": float(0.5 + v)} for i, v in enumerate(x)])
    assert red["modes"]["oscillation"]["flagged"] is False


def test_length_collapse_and_length_hacking(tmp_path):
    collapse = planted(tmp_path, "planted_length_collapse")["modes"]["length_collapse"]
    assert collapse["flagged"] is True and abs(collapse["onset_step"] - 100) <= 30
    assert planted(tmp_path, "planted_concise_learning")["modes"]["length_collapse"]["flagged"] is False
    hack = planted(tmp_path, "planted_length_hacking")["modes"]["length_hacking"]
    assert hack["flagged"] is True and hack["numbers"]["partial_correlation"] >= 0.3
    assert hack["numbers"]["reward_per_token_late"] < hack["numbers"]["reward_per_token_early"]
    assert planted(tmp_path, "planted_truncation_only")["modes"]["length_hacking"]["flagged"] is False


def _stuck_then_learning(n=300, stuck_until=60):
    rng = np.random.default_rng(11)
    history = []
    for s in range(1, n + 1):
        p = 0.0 if s <= stuck_until else 0.6 * (1 - math.exp(-(s - stuck_until) / 30))
        reward = float(np.clip(p + rng.normal(0, 0.03), 0, 1)) if s > stuck_until else 0.0
        history.append({"step": s, "reward": reward, "reward_std": 0.0 if s <= stuck_until else 0.3,
                        "frac_reward_zero_std": 1.0 if s <= stuck_until else 0.2})
    return history


def test_a_stuck_phase_that_resolves_is_an_episode_that_ended(tmp_path):
    data = run(tmp_path, "stuck_then_learning", _stuck_then_learning())
    degen = data["modes"]["degeneracy"]
    assert degen["flagged"] is True and degen["active"] is False
    (episode,) = degen["episodes"]
    assert episode["start"] == 1 and abs(episode["end"] - 60) <= 15
    assert "degeneracy" in data["summary"]["resolved"] and "degeneracy" not in data["summary"]["ongoing"]


def test_a_regression_needs_a_gain(tmp_path):
    rng = np.random.default_rng(2)
    # a reward that never rose: flat at 0.3 with a small late sag; nothing gained, nothing lost
    values = 0.3 - 0.04 * (np.arange(200) > 140) + rng.normal(0, 0.02, 200)
    verdict = run(tmp_path, "sag", [{"step": i + 1, "reward": float(v)} for i, v in enumerate(values)])
    assert verdict["modes"]["regression"]["flagged"] is False


def test_episode_overlap_is_intersection_over_union():
    # labelled 10-29 (20 steps), found 20-39 (20 steps): 10 shared over 30
    assert episode_overlap([{"start": 10, "end": 29}], [{"start": 20, "end": 39}], 0, 100) == pytest.approx(1 / 3)
    assert episode_overlap([{"start": 50, "end": None}], [{"start": 50, "end": None}], 0, 100) == 1.0
    assert episode_overlap([{"start": 50, "end": 60}], [], 0, 100) == 0.0
