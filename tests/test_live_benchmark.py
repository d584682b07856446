"""The live benchmark's scoring (issue 20, item 7) on hand-made reads with hand-computed latencies, stops, savings
and losses; the toolkit's live settings; the stage over a two-log corpus; the table's met/not-met marks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pgrpo.diagnose.modes.record import MODES
from pgrpo.live.benchmark import (
    default_lag_reads,
    first_stop,
    live_settings,
    reward_lost,
    run_rows,
    summary_records,
)
from pgrpo.live.reads import LiveRead, LiveSettings, curves_from_history, curves_tail
from pgrpo.tables.live_benchmark import record_cells


def read_at(step: float, flagged: dict[str, tuple[bool, str | None]] | None = None) -> LiveRead:
    """A read where each mode is clear except those in ``flagged`` (mode -> (flagged, severity))."""
    modes = {m: {"flagged": False, "onset_step": None, "severity": None, "verdict": "clear"} for m in MODES}
    for mode, (flag, severity) in (flagged or {}).items():
        modes[mode] = {"flagged": flag, "onset_step": step - 5 if flag else None, "severity": severity,
                       "verdict": "flagged" if flag else "clear"}
    return LiveRead(float(step), {"modes": modes}, {})


def labels_of(**given):
    out = {m: {"label": False, "onset_step": None} for m in MODES}
    for mode, onset in given.items():
        out[mode] = {"label": True, "onset_step": onset}
    return out


STEPS = np.arange(1.0, 101.0)  # a run logged at every step 1..100: span 99, reads every 10 steps


def test_latency_stop_and_saved_share_of_a_failed_run_are_the_hand_computed_ones():
    # degeneracy labelled from step 20; flagged (medium) at reads 30, 40, 50: latency 10 steps = 1 read, 10/99 of
    # the run; the stop rule (2 consecutive reads) decides at 40; synchronous (lag 0) it stops there, saving
    # (100 - 40) / 99 of the run; in the background (lag 1, ours by default) at the next read, 50: (100 - 50) / 99
    reads = [read_at(s, {"degeneracy": (s >= 30, "medium" if s >= 30 else None)}) for s in range(10, 101, 10)]
    rows = run_rows("r", "dev", labels_of(degeneracy=20), "ours", reads, LiveSettings(), 10, STEPS, STEPS / 100,
                    lag_reads=0)
    row = next(r for r in rows if r["mode"] == "degeneracy")
    assert row["first_flag"] == 30 and row["latency"] == 10 and row["latency_reads"] == 1.0
    assert row["latency_share"] == pytest.approx(10 / 99)
    assert row["allowance"] == 30  # max(9.9, 3 reads x 10 steps)
    assert row["latency_ok"] is True and row["stop_step"] == 40
    assert row["saved_share"] == pytest.approx(60 / 99)
    rows = run_rows("r", "dev", labels_of(degeneracy=20), "ours", reads, LiveSettings(), 10, STEPS, STEPS / 100)
    row = next(r for r in rows if r["mode"] == "degeneracy")
    assert row["lag_reads"] == 1 and row["first_flag"] == 30 and row["latency"] == 10  # detection is not delayed
    assert row["stop_step"] == 50 and row["saved_share"] == pytest.approx(50 / 99)
    healthy = next(r for r in rows if r["mode"] == "truncation")  # labelled no, never flagged
    assert healthy["first_flag"] is None and healthy["stop_step"] is None and healthy["reward_lost"] is None


def test_a_low_severity_flag_is_detected_but_never_stops_and_the_end_read_stops_nothing():
    reads = [read_at(s, {"regression": (True, "low")}) for s in range(10, 101, 10)]
    assert first_stop(reads, LiveSettings(), ["regression"], 10, lag_reads=0) is None
    high = [read_at(s, {"regression": (s >= 90, "high")}) for s in range(10, 101, 10)]
    assert first_stop(high, LiveSettings(), ["regression"], 9, 0) is None  # the read at 100 is the end-of-train read
    assert first_stop(high, LiveSettings(), ["regression"], 10, 0) == 100
    # background: decided at 100, the last stoppable read; applied at the end of training, it stops nothing
    assert first_stop(high, LiveSettings(), ["regression"], 10) is None
    earlier = [read_at(s, {"regression": (s >= 70, "high")}) for s in range(10, 101, 10)]
    assert first_stop(earlier, LiveSettings(), ["regression"], 10, 0) == 80
    assert first_stop(earlier, LiveSettings(), ["regression"], 10) == 90  # one read later


def test_the_toolkit_stops_on_one_critical_read_and_reads_a_200_row_window():
    settings = live_settings("toolkit")
    assert (settings.every, settings.window_rows, settings.consecutive_reads, settings.rule_set) == (10, 200, 1,
                                                                                                    "toolkit")
    assert settings.forecast_every == 0 and not settings.forecasts_at(0)
    reads = [read_at(10), read_at(20, {"instability": (True, "high")}), read_at(30)]
    assert default_lag_reads("toolkit") == 0 and default_lag_reads("ours") == 1  # the toolkit reads synchronously
    assert first_stop(reads, settings, ["instability"], 3, lag_reads=0) == 20
    rows = run_rows("t", "dev", labels_of(instability=15), "toolkit", reads, settings, 3, STEPS[:30], STEPS[:30])
    assert next(r for r in rows if r["mode"] == "instability")["stop_step"] == 20
    medium = [read_at(10), read_at(20, {"instability": (True, "medium")})] * 2
    assert first_stop(medium, settings, ["instability"], 4, lag_reads=0) is None  # not critical
    history = [{"step": s, "reward": 0.1 * s} for s in range(1, 301)]
    tail = curves_tail(curves_from_history(history), 200)
    assert len(tail.frame) == 200 and tail.frame["step"].iloc[0] == 101


def test_a_false_stop_loses_the_reward_the_run_went_on_to_gain():
    # reward rises linearly 0 -> 0.99 over 100 rows; a stop at step 50 forwent the last 10 rows' mean (0.945) minus
    # the 10 rows up to the stop (0.445), over the range 0.99
    rewards = (STEPS - 1) / 100
    assert reward_lost(STEPS, rewards, 50.0) == pytest.approx((0.945 - 0.445) / 0.99)
    assert reward_lost(STEPS, np.full(100, 0.3), 50.0) is None  # no range: nothing to compare
    reads = [read_at(s, {"no_learning": (True, "high")}) for s in range(10, 101, 10)]
    # flagged at every read: decided at 20; in the background (ours by default) stopped at 30, where the 10 rows up
    # to it (steps 21..30) average 0.245
    rows = run_rows("h", "holdout", labels_of(), "ours", reads, LiveSettings(), 10, STEPS, rewards)
    row = next(r for r in rows if r["mode"] == "no_learning")
    assert row["stop_step"] == 30 and row["reward_lost"] == pytest.approx((0.945 - 0.245) / 0.99)


def test_the_summary_counts_misses_as_infinite_latency_and_rates_false_stops():
    # three failed runs: latencies 0 and 40 steps (allowance 30: ratios 0 and 4/3), one missed: median ratio 4/3 > 1;
    # decided at 30 and 70, stopped one read later (ours: background), at 40 and 80
    rows = []
    for name, flag_at in (("a", 20), ("b", 60), ("c", None)):
        reads = [read_at(s, {"concentration": (flag_at is not None and s >= flag_at, "high")})
                 for s in range(10, 101, 10)]
        rows += run_rows(name, "holdout", labels_of(concentration=20), "ours", reads, LiveSettings(), 10, STEPS,
                         STEPS / 100)
    for name in range(10):  # ten healthy runs, one of them stopped by concentration at 20
        reads = [read_at(s, {"concentration": (name == 0, "high")}) for s in range(10, 101, 10)]
        rows += run_rows(f"h{name}", "holdout", labels_of(), "ours", reads, LiveSettings(), 10, STEPS, STEPS / 100)
    record = next(r for r in summary_records(rows) if r["mode"] == "concentration")
    assert (record["failed"], record["detected"], record["stopped"], record["timed"]) == (3, 2, 2, 3)
    assert record["median_latency"] == 20.0 and record["latency_met"] is False
    assert (record["healthy"], record["false_alarms"], record["false_stops"]) == (10, 1, 1)
    assert record["false_stops_per_run"] == 0.1 and record["false_stop_met"] is True  # at most 1 in 10
    assert record["saved_share"] == pytest.approx(((100 - 40) / 99 + (100 - 80) / 99 + 0) / 3)
    cells = record_cells(record)
    assert cells[2] == "2/3" and cells[4] == "**not met**" and cells[6] == "1/10" and cells[7] == "met"


def test_a_carried_forecast_neither_extends_nor_breaks_the_plateau_streak():
    from pgrpo.live.stop_rules import StopRules

    settings = LiveSettings(stop_if_plateau_below=0.5, forecast_every=2)
    assert [settings.forecasts_at(i) for i in range(5)] == [True, True, False, True, False]
    rules = StopRules(settings)
    fresh = LiveRead(10.0, {"modes": {}}, {"plateau": {"mean": 0.3, "lo80": 0.2, "hi80": 0.4}}, forecast_step=10.0)
    carried = LiveRead(20.0, {"modes": {}}, dict(fresh.forecast), forecast_step=10.0)
    assert rules.update(fresh) is None and rules.update(carried) is None
    assert not carried.log_keys() and "pgrpo/plateau" in fresh.log_keys()
    again = LiveRead(30.0, {"modes": {}}, dict(fresh.forecast), forecast_step=30.0)
    assert rules.update(again).step == 30.0


@pytest.mark.slow
def test_the_stage_replays_a_corpus_and_writes_its_tables(tmp_path, monkeypatch):
    """Two public logs of the corpus (one per split) and the planted set cut to two cases, replayed on two worker
    processes (each log's rows back in the logs' order)."""
    import shutil

    import pgrpo.stages.diagnose_benchmark as corpus
    from pgrpo.diagnose.planted import planted_logs
    from pgrpo.stages.live_benchmark import run_live_benchmark

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)  # the corpus' paths are relative to the repository
    source = root / corpus.DEFAULT_DATA_DIR
    labels = json.loads(open(f"{source}/labels.json").read())
    keep = {next(k for k, v in labels.items() if v["split"] == s): None for s in ("dev", "holdout")}
    data = tmp_path / "data"
    data.mkdir()
    for name in keep:
        shutil.copy(f"{source}/{name}", data / name)
    (data / "labels.json").write_text(json.dumps({k: labels[k] for k in keep}))
    first = next(iter(keep))  # one log's reward functions declared, as ranges.json states them
    (data / "ranges.json").write_text(json.dumps({first: {"reward_range": [0, 9], "reward_function_ranges": {
        "f": [0, 1]}, "reward_weights": None, "basis": "stated", "source_note": "a test's"}}))
    cases = planted_logs(corpus.SEED)
    monkeypatch.setattr(corpus, "planted_logs", lambda seed: {k: cases[k] for k in ("planted_healthy",
                                                                                     "planted_stuck_at_zero")})
    held = next(k for k in keep if labels[k]["split"] == "holdout")  # the blind batch: the holdout log alone
    (data / "batches.json").write_text(json.dumps({"blind": {"name": "a test's batch", "logs": [held]}}))
    result = run_live_benchmark(str(tmp_path / "out"), str(data), forecast_every=0, workers=2)  # forked replays
    assert result["logs_per_split"] == {"planted": 2, "dev": 1, "holdout": 1, "blind batch": 1}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    by_group = {g: [{k: v for k, v in r.items() if k != "split"} for r in summary["records"] if r["split"] == g]
                for g in ("holdout", "blind batch")}
    assert by_group["blind batch"] and by_group["blind batch"] == by_group["holdout"]  # the same one log
    assert summary["settings"]["blind_batch"] == "a test's batch"
    stuck = next(r for r in summary["records"] if r["split"] == "planted" and r["rule_set"] == "ours"
                 and r["mode"] == "degeneracy")
    assert stuck["failed"] == 1 and stuck["stopped"] == 1 and stuck["latency_met"] is True
    table = (tmp_path / "out" / "table.md").read_text()
    assert "## holdout (held out" in table and "| degeneracy | toolkit |" in table
    assert "## blind batch (the logs added after the rules last changed" in table
    assert "(1 of the dev and holdout logs the blind batch, a test's batch:" in table
    assert summary["settings"]["reads"]["ours"] >= 3 and summary["settings"]["reads"]["toolkit"] >= 3
    # ours is told the declared function ranges (for its summed forecast), not the summed range; the toolkit neither
    reads = json.loads((tmp_path / "out" / "reads" / f"{first[:-5]}.json").read_text())
    assert reads["ours"]["settings"]["component_ranges"] == {"f": [0.0, 1.0]}
    assert reads["ours"]["settings"]["reward_range"] is None
    assert reads["toolkit"]["settings"]["component_ranges"] is None


def test_the_false_stop_rate_s_exact_interval_is_clopper_pearson_s():
    """Clopper-Pearson by hand: 0 of n has the upper end 1 - 0.025^(1/n) (0.3085 for n = 10); 1 of 9 the lower end
    1 - 0.975^(1/9); n of n the lower end 0.025^(1/n). The targets table shows it beside the count."""
    from pgrpo.live.benchmark import rate_interval
    from pgrpo.tables.live_benchmark import _interval

    assert rate_interval(0, 10) == (0.0, pytest.approx(1 - 0.025 ** 0.1))
    lo, hi = rate_interval(1, 9)
    assert lo == pytest.approx(1 - 0.975 ** (1 / 9)) and 0.45 < hi < 0.5
    assert rate_interval(5, 5) == (pytest.approx(0.025 ** 0.2), 1.0)
    assert _interval(1, 9) == " (95%: 0.3-48%)" and _interval(0, 10) == " (95%: 0-31%)" and _interval(0, 0) == ""


def test_a_blind_batch_naming_an_unlabelled_log_is_an_input_error_that_names_it(tmp_path):
    """batches.json may only name labelled logs, and needs a name and a logs list; none at all: no blind batch."""
    from pgrpo.errors import InputError
    from pgrpo.stages.diagnose_benchmark import blind_batch

    assert blind_batch(tmp_path) == (None, frozenset())
    (tmp_path / "batches.json").write_text(json.dumps({"blind": {"name": "b", "logs": ["a.json", "ghost.json"]}}))
    assert blind_batch(tmp_path) == ("b", frozenset({"a.json", "ghost.json"}))
    with pytest.raises(InputError, match="'ghost.json', which labels.json does not"):
        blind_batch(tmp_path, {"a.json": {}})
    (tmp_path / "batches.json").write_text(json.dumps({"blind": {"logs": ["a.json"]}}))
    with pytest.raises(InputError, match="'blind' needs a 'name' and a 'logs' list"):
        blind_batch(tmp_path)
