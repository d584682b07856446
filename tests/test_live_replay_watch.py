"""``pgrpo replay`` and ``pgrpo watch`` (pgrpo.stages.live, issue 20): a replay reads only what had been logged and
models the background's lag of one read; replay and watch read every saved format alike; a watch applies the
callback's stop rules as a synchronous replay decides, runs ``--on-stop``, and ends at the run's planned length or
its idle timeout; live.html shades each flagged episode on the reward curve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pgrpo.errors import InputError
from pgrpo.live.reads import LiveSettings, curves_from_history, curves_up_to
from pgrpo.stages.live import run_replay, run_watch
from tests._live_helpers import PLANTED, watch_cli, write_formats

# ---- replay ----------------------------------------------------------------------------------------------------


def test_replay_flags_a_planted_stuck_run_early_and_reads_only_what_was_logged(tmp_path):
    case = PLANTED["planted_stuck_at_zero"]
    paths = write_formats(case["log_history"], tmp_path)
    result = run_replay(str(paths["trainer_state"]), every=10, stop_on=["degeneracy"],
                        out_json=str(tmp_path / "replay.json"), quiet=True)
    assert json.loads((tmp_path / "replay.json").read_text())["every"] == 10
    last = case["log_history"][-1]["step"]
    assert result["stopped"]["mode"] == "degeneracy"
    # the stuck phase (from step 1) counts toward a stop once it has lasted 10% of the 300-step run (reads at 40 and
    # 50), and the background applies the decision one read later: step 60, a fifth of the run
    assert result["stopped"]["read_step"] == 50.0 and result["stopped"]["step"] == 60.0 <= 0.2 * last
    for read in result["reads"]:
        for verdict in read["modes"].values():
            assert verdict["onset_step"] is None or verdict["onset_step"] <= read["step"]
    assert [r["step"] for r in result["reads"]] == [10.0 * (i + 1) for i in range(len(result["reads"]))]


def test_replay_of_a_healthy_run_does_not_stop_and_reads_to_the_end(tmp_path):
    case = PLANTED["planted_healthy_every5_no_kl"]  # logged every 5 steps: reads every 10 logged rows = 50 steps
    paths = write_formats(case["log_history"], tmp_path)
    result = run_replay(str(paths["bare"]), every=10, stop_on=["degeneracy", "no_learning", "regression"], quiet=True)
    assert result["stopped"] is None
    steps = [e["step"] for e in case["log_history"] if "reward" in e]
    assert result["reads"][0]["step"] == steps[9]
    assert result["reads"][-1]["step"] == steps[-1]


@pytest.mark.parametrize("fmt", ["trainer_state", "bare", "output_folder", "wandb_csv", "trl_console", "verl_console"])
def test_replay_and_watch_read_every_saved_format_alike(fmt, tmp_path):
    history = PLANTED["planted_stuck_at_zero"]["log_history"][:120]
    paths = write_formats(history, tmp_path)
    reference = run_replay(str(paths["trainer_state"]), every=20, quiet=True)
    result = run_replay(str(paths[fmt]), every=20, quiet=True)
    assert result["first_flagged"] == reference["first_flagged"] and result["first_flagged"]
    reads = run_watch(str(paths[fmt]), once=True, out_dir=str(tmp_path / f"watch_{fmt}")).reads
    payload = json.loads((tmp_path / f"watch_{fmt}" / "live.json").read_text())
    assert payload["modes"]["degeneracy"]["flagged"] is True and reads[0].step == 120.0
    assert (tmp_path / f"watch_{fmt}" / "live.html").read_text().startswith("<!doctype html>")


def test_watch_reads_the_workflow_log_csv_with_its_meta(tmp_path):
    history = PLANTED["planted_stuck_at_zero"]["log_history"][:60]
    run = tmp_path / "fixture" / "G8" / "seed42"
    run.mkdir(parents=True)
    pd.DataFrame(history).to_csv(run / "log.csv", index=False)
    (run / "meta.json").write_text(json.dumps({"model": "fixture", "G": 8, "eta": 0.01, "mu": 0.9, "k_ref": 1,
                                               "max_steps": 300, "max_completion_length": 1024}))
    run_watch(str(run), once=True)
    payload = json.loads((run / "pgrpo" / "live.json").read_text())
    assert payload["theory"]["configuration"]["critical_K"] == pytest.approx(0.1 / 0.01)
    assert payload["live"]["total_steps"] == 300.0  # the planned length from meta.json, for the forecast


def test_watch_applies_the_callbacks_stop_rules_as_a_synchronous_replay_decides(tmp_path):
    """A watched run is stopped by the callback's rules at the read the callback (synchronous) would stop at: a read
    every 10 logged steps, the second consecutive flagged one; stop.json beside live.json, exit status 3."""
    history = PLANTED["planted_stuck_at_zero"]["log_history"][:120]
    paths = write_formats(history, tmp_path)
    replay = run_replay(str(paths["trainer_state"]), every=10, stop_on=["degeneracy"], quiet=True, lag_reads=0)
    out = tmp_path / "watched"
    outcome = run_watch(str(paths["output_folder"]), once=True, out_dir=str(out), stop_on=["degeneracy"])
    assert outcome.ended == "stopped" and outcome.exit_status == 3
    stop = json.loads((out / "stop.json").read_text())
    assert stop["mode"] == "degeneracy" and stop["read_step"] == replay["stopped"]["read_step"]
    logged = [e["step"] for e in history if "reward" in e]
    assert stop["read_step"] in logged[9::10]  # a read of the callback's schedule, not the poll's last step
    assert stop["step"] == logged[-1]  # acted on when the watcher saw it
    assert json.loads((out / "live.json").read_text())["live"]["stopped"]["mode"] == "degeneracy"


def test_watch_polled_as_the_log_grows_decides_as_one_pass_over_the_whole_log():
    """The schedule is caught up poll by poll: reads at 10, 20, ... logged steps whatever the polls saw."""
    from pgrpo.stages.live import ScheduledReads

    curves = curves_from_history(PLANTED["planted_stuck_at_zero"]["log_history"][:120])
    settings = LiveSettings(stop_on=("degeneracy",), forecast_every=0)
    polled = ScheduledReads(settings)
    stops = [polled.catch_up(curves_up_to(curves, float(seen)), None) for seen in (7, 13, 14, 38, 120)]
    whole = ScheduledReads(settings).catch_up(curves, None)
    first = next(stop for stop in stops if stop)
    assert first["read_step"] == whole["read_step"]
    assert [r.step for r in polled.reads] == [10.0 * (i + 1) for i in range(len(polled.reads))]


def test_watch_cli_runs_on_stop_with_the_stop_in_its_environment(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    marker = tmp_path / "on_stop.txt"
    done = watch_cli(paths["wandb_csv"], "--once", "--out", tmp_path / "w", "--stop-on", "degeneracy",
                     "--on-stop", f'echo "$PGRPO_STOP_MODE $PGRPO_STOP_READ_STEP $PGRPO_STOP_JSON" > {marker}')
    assert done.returncode == 3, done.stderr
    mode, read_step, stop_json = marker.read_text().split()
    assert mode == "degeneracy" and json.loads(Path(stop_json).read_text())["read_step"] == float(read_step)
    assert "pgrpo watch: stop at step 100" in done.stdout


def test_watch_of_a_healthy_run_stops_nothing_and_ends_at_its_planned_length(tmp_path):
    history = PLANTED["planted_healthy"]["log_history"]
    paths = write_formats(history, tmp_path)
    last = max(e["step"] for e in history if "reward" in e)
    outcome = run_watch(str(paths["bare"]), every_seconds=0.01, out_dir=str(tmp_path / "w"), total_steps=last,
                        stop_on=["degeneracy", "no_learning", "regression"])
    assert (outcome.ended, outcome.stopped, outcome.exit_status) == ("finished", None, 0)
    assert not (tmp_path / "w" / "stop.json").exists()


def test_watch_of_a_trl_output_folder_ends_at_the_max_steps_its_trainer_state_records(tmp_path):
    history = PLANTED["planted_healthy"]["log_history"][:60]
    last = max(e["step"] for e in history if "reward" in e)
    checkpoint = tmp_path / "out" / f"checkpoint-{int(last)}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"max_steps": int(last), "log_history": history}))
    outcome = run_watch(str(tmp_path / "out"), every_seconds=0.01, idle_timeout=30.0)
    assert outcome.ended == "finished"
    payload = json.loads((checkpoint / "pgrpo" / "live.json").read_text())
    assert payload["live"]["total_steps"] == float(last)


def test_watch_of_a_log_that_stops_growing_gives_up_after_its_idle_timeout(tmp_path):
    paths = write_formats(PLANTED["planted_healthy"]["log_history"][:40], tmp_path)
    outcome = run_watch(str(paths["bare"]), every_seconds=0.05, idle_timeout=0.2, out_dir=str(tmp_path / "w"))
    assert outcome.ended == "idle" and len(outcome.reads) == 1  # read once: the log never grew again
    with pytest.raises(InputError, match="--idle-timeout"):
        run_watch(str(paths["bare"]), idle_timeout=0)


def test_watch_of_an_unreadable_log_is_one_line(tmp_path):
    (tmp_path / "log.csv").write_text("not,a\nlog")
    with pytest.raises(InputError):
        run_watch(str(tmp_path), once=True)


def test_replay_cli_prints_one_line_and_writes_json(tmp_path):
    paths = write_formats(PLANTED["planted_stuck_at_zero"]["log_history"][:100], tmp_path)
    done = subprocess.run([sys.executable, "-m", "pgrpo", "replay", str(paths["wandb_csv"]), "--every", "10",
                           "--stop-on", "degeneracy", "--json", str(tmp_path / "r.json"), "--quiet"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # a 100-step log: the phase from step 1 counts from the read at 20 (10% of the run), the stop is decided at 30
    # and, the callback's default, applied one read later
    assert "stopped at step 40, decided by the read at step 30" in done.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result) >= {"every", "lag_reads", "reads", "first_flagged", "stopped"}
    done = subprocess.run([sys.executable, "-m", "pgrpo", "replay", str(paths["wandb_csv"]), "--every", "10",
                           "--stop-on", "degeneracy", "--json", str(tmp_path / "s.json"), "--quiet", "--synchronous"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "(synchronous)" in done.stdout and "stopped at step 30 (" in done.stdout
    synchronous = json.loads((tmp_path / "s.json").read_text())
    assert synchronous["lag_reads"] == 0 and synchronous["stopped"]["step"] == synchronous["stopped"]["read_step"]
    assert synchronous["stopped"]["read_step"] == result["stopped"]["read_step"] == 30.0


def test_replay_models_the_background_lag_a_stop_one_read_after_the_deciding_read(tmp_path):
    """The stuck run logged at every 3rd step (3, 6, ..., 300), read every 4 logged steps: reads at 12, 24, 36, ...
    Synchronous (lag 0), the stop is at the read that decides, 12 k; background (lag 1, the default), at the next
    read's step 12 (k + 1), with ``read_step`` 12 k and one more read, at the stop."""
    history = [e for e in PLANTED["planted_stuck_at_zero"]["log_history"] if e["step"] % 3 == 0]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    synchronous = run_replay(str(path), every=4, stop_on=["degeneracy"], quiet=True, lag_reads=0)
    background = run_replay(str(path), every=4, stop_on=["degeneracy"], quiet=True)
    decided = synchronous["stopped"]["step"]
    k = int(decided) // 12
    assert decided == 12 * k and synchronous["stopped"]["read_step"] == decided and synchronous["lag_reads"] == 0
    assert [r["step"] for r in synchronous["reads"]] == [12.0 * i for i in range(1, k + 1)]
    assert background["lag_reads"] == 1
    assert (background["stopped"]["read_step"], background["stopped"]["step"]) == (decided, 12.0 * (k + 1))
    assert [r["step"] for r in background["reads"]] == [12.0 * i for i in range(1, k + 2)]
    assert background["stopped"]["mode"] == synchronous["stopped"]["mode"] == "degeneracy"


def test_a_background_decision_at_the_last_read_before_the_end_stops_nothing(tmp_path):
    """The same log cut two rows after the synchronous stop (12 k + 6): the read at 12 k is the last every-4th one,
    so in the background its decision would be applied at the end of training: no stop, and the reads run to the
    end-of-training read at 12 k + 6."""
    history = [e for e in PLANTED["planted_stuck_at_zero"]["log_history"] if e["step"] % 3 == 0]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    decided = run_replay(str(path), every=4, stop_on=["degeneracy"], quiet=True, lag_reads=0)["stopped"]["step"]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps([e for e in history if e["step"] <= decided + 6]))
    # the run's planned length stays 300 (a stuck phase counts once it has lasted a tenth of it)
    assert run_replay(str(cut), every=4, stop_on=["degeneracy"], quiet=True, lag_reads=0,
                      total_steps=300)["stopped"]["step"] == decided
    background = run_replay(str(cut), every=4, stop_on=["degeneracy"], quiet=True, total_steps=300)
    assert background["stopped"] is None
    assert [r["step"] for r in background["reads"]][-2:] == [decided, decided + 6]


def test_replay_lag_reads_is_0_or_1():
    curves = curves_from_history(PLANTED["planted_stuck_at_zero"]["log_history"][:40])
    from pgrpo.stages.live import replay_curves

    with pytest.raises(InputError, match="lag_reads"):
        replay_curves(curves, LiveSettings(10), lag_reads=2)


# ---- the page: live.html -------------------------------------------------------------------------------


def test_the_page_shades_each_flagged_episode_on_the_reward_curve():
    """live.html draws the logged reward with each flagged mode's episodes shaded; an episode still on runs to the
    last step. Steps 0..100 across 720 units: steps 20-40 are x 144 to 288, steps 80 to the end x 576 to 720."""
    import re

    from pgrpo.live.page import curve_svg, episode_spans, live_html, reward_curve

    curve = reward_curve({"step": list(range(0, 101)), "reward": [0.5 + 0.001 * s for s in range(0, 101)]})
    payload = {"modes": {"degeneracy": {"flagged": True, "episodes": [{"start": 20, "end": 40}, {"start": 80,
                                                                                                  "end": None}]},
                         "truncation": {"flagged": False, "episodes": [{"start": 5, "end": 9}]}},
               "live": {"curve": curve}}
    assert episode_spans(payload) == [("degeneracy", 20.0, 40.0), ("degeneracy", 80.0, 100.0)]
    svg = curve_svg(payload)
    rects = re.findall(r"<rect class='episode' data-mode='(\w+)' x='([\d.]+)' y='0' width='([\d.]+)'", svg)
    assert rects == [("degeneracy", "144.0", "144.0"), ("degeneracy", "576.0", "144.0")]
    assert "truncation" not in svg  # not flagged: no span
    assert svg in live_html(payload)
    assert curve_svg({"modes": {}, "live": {}}) == ""  # no curve, no plot


def test_the_page_draws_each_reads_plateau_forecast_held_until_the_next():
    """Steps 0..100 across 720 units and rewards 0.5..0.6 across 220: reads at steps 20 (plateau 0.55, 80% 0.5 to
    0.6) and 60 (0.58, 0.56 to 0.6) draw the mean at y 110 from x 144 to 432, then at y 44 to the last step (x 720);
    a read's interval reaching far below the reward is drawn no lower than half the reward's span (0.45: y 220)."""
    import re

    from pgrpo.live.page import curve_svg, live_html, reward_curve

    curve = reward_curve({"step": list(range(0, 101)), "reward": [0.5 + 0.001 * s for s in range(0, 101)]})
    reads = [{"step": 20, "plateau": {"mean": 0.55, "lo80": 0.5, "hi80": 0.6}},
             {"step": 40, "plateau": None},  # a read between forecasts
             {"step": 60, "plateau": {"mean": 0.58, "lo80": 0.56, "hi80": 0.6}}]
    svg = curve_svg({"modes": {}, "live": {"curve": curve, "reads": reads}})
    mean = re.search(r"<polyline class='plateau' points='([^']+)'", svg).group(1)
    assert mean == "144.0,110.0 432.0,110.0 432.0,44.0 720.0,44.0"
    assert "<polygon class='plateau-band'" in svg and "the plateau forecast of each read" in svg
    wide = [{"step": 20, "plateau": {"mean": 0.55, "lo80": -10.0, "hi80": 0.6}}]
    svg = curve_svg({"modes": {}, "live": {"curve": curve, "reads": wide}})
    y = float(re.search(r"<polyline class='plateau' points='144.0,([\d.]+) ", svg).group(1))
    assert abs(y - (220 - (0.55 - 0.45) / (0.6 - 0.45) * 220)) < 0.06  # the scale 0.45..0.6, not -10..0.6
    page = live_html({"modes": {}, "forecast": {"plateau": {"mean": 0.55123, "lo80": 0.5, "hi80": 1234.56},
                                                "t90": {"mean": 135.6}}, "live": {"curve": curve, "reads": reads}})
    assert "plateau 0.551 (80%: 0.5 to 1235); t90 step 136;" in page
