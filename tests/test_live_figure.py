"""``pgrpo replay --png`` (pgrpo.figures.live, issue 20): the figure draws what the replay's record says, read
against records written here by hand, and the command writes it for a planted stuck run."""

from __future__ import annotations

import shlex
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pgrpo.figures.live import SEVERITY_COLOURS, flagged_reads, replay_figure
from pgrpo.live.page import plateau_segments
from tests._live_helpers import PLANTED, write_formats

#: a replay record by hand: three reads, the second carries no forecast (between forecasts), a stop at step 40
REPLAY = {
    "every": 10,
    "settings": {"stop_on": ["degeneracy"]},
    "reads": [
        {"step": 10.0, "modes": {"degeneracy": {"flagged": True, "severity": "low"}}, "plateau": {
            "mean": 0.2, "lo80": 0.1, "hi80": 0.5}},
        {"step": 20.0, "modes": {"degeneracy": {"flagged": True, "severity": "medium"},
                                 "no_learning": {"flagged": True, "severity": "high"},
                                 "truncation": {"flagged": False}}, "plateau": None,
         "held_by_forecast": ["no_learning"]},
        {"step": 30.0, "modes": {"degeneracy": {"flagged": True, "severity": "medium"}}, "plateau": {
            "mean": 0.25, "lo80": 0.2, "hi80": 0.3}},
    ],
    "stopped": {"step": 40.0, "read_step": 30.0, "mode": "degeneracy"},
}


def test_the_plateau_segments_keep_the_reads_that_forecast():
    segments = plateau_segments(REPLAY["reads"], 40.0)
    assert [(a, b) for a, b, _, _, _ in segments] == [(10.0, 30.0), (30.0, 40.0)]  # held to the next, the last to 40
    assert [m for _, _, m, _, _ in segments] == [0.2, 0.25]
    assert [lo for _, _, _, lo, _ in segments] == [0.1, 0.2] and [hi for *_, hi in segments] == [0.5, 0.3]
    assert plateau_segments(REPLAY["reads"], 20.0)[-1][:2] == (30.0, 30.0)  # never before its own read
    assert plateau_segments([{"step": 5.0, "plateau": None}], 9.0) == []


def test_flagged_reads_carry_severity_and_the_held_stop_in_first_flag_order():
    flags = flagged_reads(REPLAY["reads"])
    assert list(flags) == ["degeneracy", "no_learning"]  # truncation never flagged
    assert flags["degeneracy"] == [(10.0, "low", False), (20.0, "medium", False), (30.0, "medium", False)]
    assert flags["no_learning"] == [(20.0, "high", True)]


def test_the_figure_draws_the_band_the_stop_and_one_row_per_flagged_mode():
    steps = np.arange(1.0, 51.0)
    fig = replay_figure(steps, np.full(steps.size, 0.2), REPLAY, "hand")
    try:
        ax, strip = fig.axes
        # the band: each forecast held until the next read that forecasts, the last one to the stop (step 40)
        band = ax.collections[0].get_paths()[0].vertices
        assert band[:, 0].min() == 10.0 and band[:, 0].max() == 40.0
        assert np.isclose(band[:, 1].max(), 0.5) and np.isclose(band[:, 1].min(), 0.1)
        stops = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert [line.get_xdata()[0] for line in stops] == [40.0]
        labels = strip.get_yticklabels()
        assert [label.get_text() for label in labels] == ["degeneracy", "no_learning"]
        assert labels[0].get_fontweight() == "bold" and labels[1].get_fontweight() != "bold"  # only in stop_on
        marks = {(tuple(line.get_xdata()), line.get_marker(), line.get_color()) for line in strip.get_lines()
                 if line.get_linestyle() in ("None", "none")}
        assert marks == {((10.0,), "|", SEVERITY_COLOURS["low"]), ((20.0, 30.0), "|", SEVERITY_COLOURS["medium"]),
                         ((20.0,), "o", SEVERITY_COLOURS["high"])}
    finally:
        plt.close(fig)


def test_a_replay_without_flags_or_forecast_still_draws():
    fig = replay_figure(np.arange(5.0), np.zeros(5), {"every": 10, "reads": [{"step": 4.0, "modes": {}}]})
    try:
        assert "no mode flagged" in " ".join(t.get_text() for t in fig.axes[1].texts)
    finally:
        plt.close(fig)


def test_replay_png_on_the_command_line(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    out = tmp_path / "figs" / "replay.png"
    done = subprocess.run([sys.executable, "-m", "pgrpo", "replay", str(paths["trainer_state"]), "--stop-on",
                           "degeneracy", "--png", str(out), "--quiet"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"; figure: {out}" in done.stdout


# ---- the workflow's runs: rule live_replay models the callback rule train attaches -------------------------------


@pytest.mark.parametrize("live, expected", [
    ({}, "--every 10 --reward-range 0 1"),
    ({"every": 5, "stop_on": ["degeneracy", "no_learning"], "stop_if_plateau_below": 0.25,
      "on_alert": "mail me"}, "--every 5 --reward-range 0 1 --stop-on degeneracy no_learning "
                               "--stop-if-plateau-below 0.25"),
    ({"stop_if_reached": 0.9}, "--every 10 --reward-range 0 1 --stop-if-reached 0.9"),
])
def test_the_replay_of_a_workflow_run_takes_the_callbacks_settings(live, expected, tmp_path):
    """The flags written by hand from training.live, and parsed by pgrpo's own parser into the settings the callback
    of rule train (pgrpo.grpo.trainer._live_callback) is built with."""
    from pgrpo.cli import build_parser
    from pgrpo.grpo.trainer import _live_callback
    from pgrpo.grpo.training_config import TRAINING_DEFAULTS, live_replay_flags

    training = {**TRAINING_DEFAULTS, "live": {**TRAINING_DEFAULTS["live"], **live}}
    flags = live_replay_flags(training)
    assert flags == expected
    args = build_parser().parse_args(["replay", "log.csv", *shlex.split(flags)])
    settings = _live_callback(training, tmp_path).settings
    assert (args.every, tuple(args.stop_on or ()), args.stop_if_plateau_below, args.stop_if_reached,
            tuple(args.reward_range)) == (settings.every, settings.stop_on, settings.stop_if_plateau_below,
                                          settings.stop_if_reached, settings.reward_range)
