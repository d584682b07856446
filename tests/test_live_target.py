"""The target stop rule (``stop_if_reached``): a run whose reward has reached the user's target is stopped, saving the
rest of its budget; by hand on reads, replayed on a planted rise whose crossing step is known, from the CLI, and in
the workflow's config."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pgrpo.cli import main
from pgrpo.errors import InputError
from pgrpo.live.reads import LiveRead, LiveSettings
from pgrpo.live.stop_rules import REACHED_RULE, StopRules
from pgrpo.stages.live import run_replay


def _read(step, level):
    return LiveRead(float(step), {"modes": {}}, {}, level={"mean": level, "sd": 0.01})


def test_the_target_stops_at_the_second_consecutive_read_at_or_above_it():
    rules = StopRules(LiveSettings(stop_if_reached=0.8))
    assert rules.update(_read(10, 0.5)) is None
    assert rules.update(_read(20, 0.82)) is None
    assert rules.update(_read(30, 0.79)) is None  # below again: the streak restarts
    assert rules.update(_read(40, 0.8)) is None  # at the target counts
    decision = rules.update(_read(50, 0.86))
    assert (decision.step, decision.mode) == (50.0, REACHED_RULE) and "reached the target 0.8" in decision.reason
    assert StopRules(LiveSettings()).update(_read(10, 0.99)) is None  # no target: no stop


@pytest.mark.parametrize("bad", ["x", float("nan"), True])
def test_a_bad_target_names_the_key(bad):
    with pytest.raises(InputError, match="live stop_if_reached"):
        LiveSettings(stop_if_reached=bad)


def _rise(path, r_inf=0.8, rate=0.02, steps=300, noise=0.02):
    """A reward rising as ``r_inf (1 - e^{-rate t})`` with small noise, logged every step: it crosses ``x`` at
    ``-ln(1 - x / r_inf) / rate``."""
    rng = np.random.default_rng(0)
    t = np.arange(1, steps + 1)
    y = r_inf * (1 - np.exp(-rate * t)) + rng.normal(0, noise, t.size)
    path.write_text(json.dumps([{"step": int(s), "reward": float(v), "reward_std": 0.3} for s, v in zip(t, y)]))
    return path


def test_replay_stops_a_rise_soon_after_it_crosses_the_target(tmp_path):
    log = _rise(tmp_path / "history.json")
    crossing = -np.log(1 - 0.6 / 0.8) / 0.02  # 69.3 steps
    result = run_replay(str(log), stop_if_reached=0.6, quiet=True)
    stopped = result["stopped"]
    assert stopped["mode"] == REACHED_RULE
    # reads every 10 steps; the smoothed level lags the curve a little; two reads in a row, then the background lag
    assert crossing <= stopped["read_step"] <= crossing + 40 and stopped["step"] == stopped["read_step"] + 10
    assert run_replay(str(log), stop_if_reached=0.95, quiet=True)["stopped"] is None  # never reached: runs to its end


def test_replay_and_watch_take_the_target_on_the_command_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    log = _rise(tmp_path / "run" / "history.json")
    assert main(["replay", str(log), "--stop-if-reached", "0.6", "--quiet"]) == 0
    assert "stopped at step" in capsys.readouterr().out
    assert main(["watch", str(log), "--once", "--stop-if-reached", "0.6", "--out", str(tmp_path / "w")]) == 3
    stop = json.loads((tmp_path / "w" / "stop.json").read_text())
    assert stop["mode"] == REACHED_RULE


def test_the_workflow_s_runs_take_the_target_from_the_config(repo_root):
    from pgrpo.config import load_config, validate_config
    from pgrpo.grpo.training_config import live_stops

    config = load_config(repo_root / "config" / "config.yaml")
    assert config["training"]["live"]["stop_if_reached"] is None  # the schema's default: report only
    config["training"]["live"]["stop_if_reached"] = 0.9
    assert validate_config(config)["training"]["live"]["stop_if_reached"] == 0.9
    config["training"]["live"]["stop_if_reached"] = "high"
    with pytest.raises(InputError, match="stop_if_reached"):
        validate_config(config)
    # a target shapes where the run ends: it is not bookkeeping (an edit re-trains)
    assert live_stops({"stop_on": [], "stop_if_plateau_below": None, "stop_if_reached": 0.9})
    assert not live_stops({"stop_on": [], "stop_if_plateau_below": None, "stop_if_reached": None})
