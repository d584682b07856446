"""The benchmarks' facts in the README's summary and on the benchmarks page (issue: the numbers come from the run,
never typed in): the forecast benchmark's medians and truth scores, each truth target marked met or not with its
bound, which forecast parts are seeded torch, the diagnose benchmark's counts, the live benchmark's records (a
missing file named), and the main job's time quoted from its own cost table (issue 24). Each fact is computed here
by hand from a hand-made benchmark file that the stage of rule readme_numbers reads."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pgrpo.stages.readme import collect_facts
from pgrpo.tables.readme import render_block
from pgrpo.tables.results_pages import render_benchmarks_page, render_results_page


def test_the_forecast_benchmark_facts_are_its_medians(tmp_path):
    """Three curves of one cell with hand-set ratios: the facts hold their medians (1 + 0.8 + 0.9 -> 0.9) and the
    mean coverage; the benchmarks page shows them, the cell at or under 0.85 in bold; the bandit part is
    deterministic, the headline its cell."""
    rows = []
    for i, (ratio, floor, cov, plateau) in enumerate([(1.0, 0.9, 0.7, 0.1), (0.8, 0.6, 0.8, 0.5),
                                                       (0.9, 0.7, 0.9, 0.3)]):
        common = {"curve": f"c{i}", "part": "bandit", "split": "dev", "column": "reward", "fraction": 0.25,
                  "success": True, "persistence_rmse": 1.0, "noise_floor_ratio": floor}
        rows.append({**common, "method": "persistence", "rmse": 1.0, "rmse_ratio": 1.0, "coverage80": 0.5,
                     "coverage95": 0.6, "crps_ratio": 1.0, "plateau_abs_error_noise": 2.0 + i})
        rows.append({**common, "method": "forecaster", "rmse": ratio, "rmse_ratio": ratio, "coverage80": cov,
                     "coverage95": 0.95, "crps_ratio": ratio - 0.1, "plateau_abs_error_noise": plateau})
        rows.append({**common, "method": "oracle (tail mean)", "rmse": 0.7, "rmse_ratio": 0.7, "coverage80": 0.8,
                     "coverage95": 0.9})
        rows.append({**common, "method": "oracle (cubic in hindsight)", "rmse": 0.5 + 0.1 * i,
                     "rmse_ratio": 0.5 + 0.1 * i, "coverage80": 0.8, "coverage95": 0.9})
    rows.append({"curve": "c9", "part": "real", "split": "dev", "fraction": 0.25, "method": "all", "success": False})
    path = tmp_path / "benchmark.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    facts = collect_facts(forecast_benchmark_csv=str(path))
    cell = next(f for f in facts["forecast"] if f["part"] == "bandit")
    assert cell["curves"] == 3 and cell["rmse_ratio"] == pytest.approx(0.9)
    assert cell["noise_floor_ratio"] == pytest.approx(0.7) and cell["coverage80"] == pytest.approx(0.8)
    assert cell["best_baseline"] == "persistence" and cell["oracle_ratio"] == pytest.approx(0.7)
    assert cell["hindsight_ratio"] == pytest.approx(0.6)  # the median of 0.5, 0.6, 0.7
    assert cell["ratio_to_best_baseline"] == pytest.approx(0.9) and cell["crps_ratio"] == pytest.approx(0.8)
    # plateau errors: the forecaster's median of 0.1, 0.5, 0.3; persistence's (the best baseline here) of 2, 3, 4
    assert cell["plateau_error"] == pytest.approx(0.3) and cell["persistence_plateau_error"] == pytest.approx(3.0)
    assert cell["best_baseline_plateau_error"] == pytest.approx(3.0)
    assert facts["reproducibility"]["forecast"]["parts"] == {"bandit": "deterministic", "overall": "deterministic"}
    assert "forecast_workflow" not in facts["reproducibility"]
    headline = facts["headlines"][0]
    assert (headline["id"], headline["part"], headline["split"], headline["kind"], headline["values"][0]["n"]) == (
        "forecast", "overall", "all", "deterministic", 3)  # no workflow curve in "overall"
    page = render_benchmarks_page(facts, "results")
    assert "## Forecast benchmark" in page and "| bandit | dev | 3 | 0.900 | 0.700 |" in page
    assert "| 0.700 | 0.600 | 0.800 | 0.30 · 3.00 · 3.00 |" in page and "bandit: bitwise (deterministic)" in page
    assert "| bandit | dev | 3 | 0.900 | 0.600 | 80% |" in render_results_page(facts, "results")
    assert "0.900 (median over 3 curves)" in render_block(facts)
    # a file without the truth-based columns (older results): those facts are None, the page has no truth table
    assert all(cell[k] is None for k in ("moving_mean_rmse_ratio", "moving_plateau_error_ratio", "plateau_covered80",
                                         "pairs_right", "pairs_right_at_cut", "brier", "steps_saved",
                                         "stop_loss_share", "truth_kind", "hindsight_moving_mean_rmse_ratio"))
    assert "Scored against the truth" not in page
    pd.DataFrame([{k: v for k, v in r.items() if k != "rmse_ratio"} for r in rows]).to_csv(path, index=False)
    facts = collect_facts(forecast_benchmark_csv=str(path))
    assert facts["forecast"] == [] and "no column 'rmse_ratio'" in facts["missing"][0]


def _truth_benchmark_csv(path):
    """A benchmark CSV with the truth-based columns: bandit/dev, four curves (the fourth's truth does not move after
    the cut) and two sweeps; closed-form/dev, three curves of one generated family."""
    rows = []
    bandit = [  # forecaster: mean-curve, plateau ratio, plateau covered, 80% cover; hindsight: mean-curve, plateau
        (1.0, 0.7, 0.6, 1.0, 0.7, 0.65, 0.2), (1.0, 0.9, 0.8, 0.0, 0.8, 0.75, 0.4),
        (1.0, 0.8, 0.7, 1.0, 0.9, 0.7, 0.3), (0.0, 0.1, 0.0, 1.0, 0.8, 0.2, 0.9)]
    for i, (moves, mean, plateau, covered, cover, h_mean, h_plateau) in enumerate(bandit):
        common = {"curve": f"b{i}", "part": "bandit", "split": "dev", "column": "reward", "fraction": 0.25,
                  "success": True, "persistence_rmse": 1.0, "truth_kind": "true mean", "truth_moves": moves}
        rows.append({**common, "method": "forecaster", "rmse": 0.9, "rmse_ratio": 0.9, "coverage80": cover,
                     "mean_rmse_ratio": mean, "plateau_error_ratio": plateau, "plateau_covered80": covered})
        rows.append({**common, "method": "oracle (cubic in hindsight)", "rmse": 0.5, "rmse_ratio": 0.5,
                     "coverage80": 0.8, "mean_rmse_ratio": h_mean, "plateau_error_ratio": h_plateau,
                     "plateau_covered80": 1.0})
    for i, mean in enumerate((0.3, 0.4, 0.5)):
        common = {"curve": f"g{i}", "part": "closed-form", "split": "dev", "column": "reward", "fraction": 0.25,
                  "success": True, "persistence_rmse": 1.0, "truth_kind": "true mean", "truth_moves": 1.0,
                  "family": "sigmoid"}
        rows.append({**common, "method": "forecaster", "rmse": 0.8, "rmse_ratio": 0.8, "coverage80": 0.8,
                     "mean_rmse_ratio": mean, "plateau_error_ratio": 0.2, "plateau_covered80": 1.0})
    sweeps = [("s1", 0.25, "forecaster", 0.9, 0.7, 0.1, 0.5, 0.01),
              ("s2", 0.25, "forecaster", 0.8, 0.7, 0.3, 0.4, 0.03),
              ("s1", 0.25, "oracle (cubic in hindsight)", 1.0, 0.7, 0.0, 0.6, 0.0),
              ("s2", 0.25, "oracle (cubic in hindsight)", 1.0, 0.7, 0.0, 0.6, 0.01),
              ("s1", 0.5, "forecaster", 0.0, 0.0, 1.0, 0.0, 1.0)]  # another fraction: not in the facts
    for sweep, fraction, method, pairs, at_cut, brier, saved, loss in sweeps:
        rows.append({"kind": "sweep", "curve": sweep, "part": "bandit", "split": "dev", "fraction": fraction,
                     "method": method, "success": True, "pairs_right": pairs, "pairs_right_at_cut": at_cut,
                     "brier": brier, "steps_saved": saved, "stop_loss_share": loss})
    pd.DataFrame(rows).to_csv(path, index=False)


def test_the_forecast_benchmark_facts_hold_its_truth_scores(tmp_path):
    """Hand medians over the curves whose truth moves (0.7, 0.8, 0.9 -> 0.8; with the still one the median would be
    0.7), the plateau-covered and truth-moves shares (3 of 4), the sweeps' means (pairs 0.85, at the cut 0.7, Brier
    0.2, steps saved 0.45) and the largest stop loss (0.03), the hindsight cubic's the same way; a generated family's
    own cell is left out."""
    path = tmp_path / "benchmark.csv"
    _truth_benchmark_csv(path)
    facts = collect_facts(forecast_benchmark_csv=str(path))
    assert facts.get("missing", []) == []
    cells = {(f["part"], f["split"]): f for f in facts["forecast"]}
    assert not any(": " in part for part, _ in cells) and ("closed-form", "dev") in cells
    cell = cells[("bandit", "dev")]
    assert cell["moving_mean_rmse_ratio"] == pytest.approx(0.8)
    assert cell["moving_plateau_error_ratio"] == pytest.approx(0.7)
    assert cell["plateau_covered80"] == pytest.approx(0.75) and cell["truth_moves"] == pytest.approx(0.75)
    assert cell["truth_kind"] == "true mean" and cell["sweeps"] == 2
    assert cell["pairs_right"] == pytest.approx(0.85) and cell["pairs_right_at_cut"] == pytest.approx(0.7)
    assert cell["brier"] == pytest.approx(0.2) and cell["steps_saved"] == pytest.approx(0.45)
    assert cell["stop_loss_share"] == pytest.approx(0.03)
    assert cell["hindsight_moving_mean_rmse_ratio"] == pytest.approx(0.7)
    assert cell["hindsight_moving_plateau_error_ratio"] == pytest.approx(0.3)
    assert cell["hindsight_pairs_right"] == pytest.approx(1.0) and cell["hindsight_steps_saved"] == pytest.approx(0.6)
    assert cell["hindsight_stop_loss_share"] == pytest.approx(0.01)
    assert cell["rmse_ratio"] == pytest.approx(0.9) and cell["coverage80"] == pytest.approx(0.8)
    family = cells[("closed-form", "dev")]
    assert family["moving_mean_rmse_ratio"] == pytest.approx(0.4) and family["sweeps"] == 0
    assert family["pairs_right"] is None and family["hindsight_moving_mean_rmse_ratio"] is None


def test_the_benchmarks_page_marks_each_truth_target_met_or_not_with_its_bound(tmp_path):
    """bandit/dev by hand: mean-curve 0.8 > 0.6 not met, the hindsight cubic's 0.7 > 0.6 too (out of reach); plateau
    0.7 > 0.5 not met, the cubic's 0.3 in reach; pairs 85% >= 80% and +15 >= +10 points met; the stop rule saves
    45% >= 40% but loses 3.0% > 2% (not met; the cubic saves 60% for 1.0%: in reach); 80% covers 80% (met).
    closed-form/dev: mean-curve 0.4 met, no sweep."""
    path = tmp_path / "benchmark.csv"
    _truth_benchmark_csv(path)
    page = render_benchmarks_page(collect_facts(forecast_benchmark_csv=str(path)), "results")
    assert "### Scored against the truth" in page
    assert ("| bandit | dev | true mean | 75% | 0.800 **not met** (hindsight cubic 0.700: out of any forecast's "
            "reach) | 0.700 **not met** (hindsight cubic 0.300: in reach) | 75% | 2 | 85% · 70% met | 45% · 3.0% "
            "**not met** (hindsight cubic 60% · 1.0%: in reach) | 80% met |") in page
    assert "| closed-form | dev | true mean | 100% | 0.400 met | 0.200 met | 100% | 0 | n/a | n/a | 80% met |" in page
    assert "closed-form: sigmoid" not in page


def test_the_forecast_parts_of_this_runs_curves_are_seeded_torch():
    from pgrpo.stages.results_pages import reproducibility_facts

    cells = [{"part": p, "split": "dev"} for p in ("workflow", "bandit", "real", "overall")]
    kinds = reproducibility_facts({"forecast": cells})
    assert kinds["forecast"]["parts"] == {"workflow": "seeded torch", "bandit": "deterministic",
                                          "real": "deterministic", "overall": "seeded torch"}
    assert kinds["forecast_workflow"]["parts"] == ["workflow", "overall"]


def test_the_diagnose_benchmark_facts_are_its_counts(tmp_path):
    """Hand counts for one split: ours finds 3 of 4 with 1 false flag (recall 0.75, precision 0.75), the toolkit has
    no rule for the mode."""
    from pgrpo.diagnose.modes.record import MODES

    rows = []
    for rule_set, (tp, fp, fn, tn, covered) in (("ours", (3, 1, 1, 5, True)), ("toolkit", (0, 0, 4, 6, False))):
        for mode in MODES:
            first = mode == MODES[0]
            rows.append({"split": "dev", "rule_set": rule_set, "mode": mode, "covered": covered or not first,
                         "logs": 10, "tp": tp if first else 0, "fp": fp if first else 0, "fn": fn if first else 0,
                         "tn": tn if first else 10, "onset_ok": 2 if first and rule_set == "ours" else 0,
                         "onset_n": 3 if first and rule_set == "ours" else 0})
        rows.append({"split": "dev", "rule_set": rule_set, "mode": "all", "covered": True, "logs": 10, "tp": tp,
                     "fp": fp, "fn": fn, "tn": tn + 10 * (len(MODES) - 1), "onset_ok": 2 if rule_set == "ours" else 0,
                     "onset_n": 3 if rule_set == "ours" else 0})
    path = tmp_path / "summary.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    facts = collect_facts(diagnose_benchmark_csv=str(path))
    assert facts["missing"] == [] and len(facts["diagnose_benchmark"]) == 2 * (len(MODES) + 1)
    page = render_benchmarks_page(facts, "results")
    assert "on 10 dev logs" in page
    assert "| dev | ours | 3/4 · 1 FP |" in page and "0.75 (3/4) | 0.75 (3/4) | 2/3 |" in page
    assert "| dev | toolkit | 0/4 · n/a |" in page
    assert "ours 3 of 4 (1 false flags) · toolkit 0 of 4 (0 false flags)" in render_block(facts)


def _live_record(split, rule_set, mode, **values):
    record = {"split": split, "rule_set": rule_set, "mode": mode, "covered": True, "logs": 6, "failed": 0,
              "detected": 0, "stopped": 0, "timed": 0, "median_latency": None, "median_latency_reads": None,
              "median_latency_share": None, "latency_met": None, "healthy": 0, "false_alarms": 0, "false_stops": 0,
              "false_stop_met": None, "saved_share": None, "reward_lost": None}
    return {**record, **values}


def test_the_live_benchmark_facts_are_its_records_and_a_missing_file_is_named(tmp_path):
    """Hand-made records of one split: ours detects 3 of 4 degenerate runs (latency +20 steps, 0.8 reads, 5% of the
    run: target met) with 1 false stop in 5 healthy runs (0.2 > 0.1: not met); the toolkit has no rule for it."""
    from pgrpo.diagnose.modes.record import MODES

    records = []
    for rule_set in ("ours", "toolkit"):
        for mode in MODES:
            if mode == "degeneracy" and rule_set == "ours":
                records.append(_live_record("holdout", rule_set, mode, failed=4, detected=3, stopped=3, timed=4,
                                            median_latency=20.0, median_latency_reads=0.8,
                                            median_latency_share=0.05, latency_met=True, healthy=5,
                                            false_alarms=2, false_stops=1, false_stop_met=False, saved_share=0.5,
                                            reward_lost=0.12))
            else:
                records.append(_live_record("holdout", rule_set, mode, covered=rule_set == "ours"))
        records.append(_live_record("holdout", rule_set, "all", failed=4, detected=3, median_latency_share=0.05,
                                    healthy=2, false_stops=0, false_stop_met=True, saved_share=0.25))
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"settings": {"every": 10, "forecast_every": 3, "ms_per_read": {"ours": 200.0}},
                                "logs_per_split": {"holdout": 6}, "records": records}))
    facts = collect_facts(live_benchmark_json=str(path))
    assert facts["missing"] == [] and len(facts["live_benchmark"]["records"]) == 2 * (len(MODES) + 1)
    assert "ms_per_read" not in json.dumps(facts["live_benchmark"])  # the wall clock is not a fact
    page = render_benchmarks_page(facts, "results")
    assert "## Live benchmark" in page and "over 6 holdout logs" in page
    assert "| degeneracy | ours | 3/4 | +20 · +0.8 · +5% | met | 2/5 | 1/5 | **not met** | 50% | +0.12 |" in page
    assert "| degeneracy | toolkit | 0/0 · n/a | n/a |" in page
    # 0 false stops in 2 healthy runs: the exact 95% interval is 0 to 1 - 0.025^(1/2) = 84%
    assert "| holdout | ours | 1/1 | 0/1 | 3/4 | +5% | 0/2 (95%: 0-84%) | met | 25% |" in page

    absent = collect_facts(live_benchmark_json=str(tmp_path / "nope.json"))
    assert absent["live_benchmark"] is None and any("live benchmark" in m for m in absent["missing"])
    assert "## Live benchmark\n\nMade by" in render_benchmarks_page(absent, "results")


def test_the_main_jobs_time_is_quoted_from_its_own_cost_table(tmp_path):
    """Issue 24, item 5: the README's row and the benchmarks page take the main job's time from the run's cost
    table (``pgrpo job-costs --json``), never by hand."""
    from pgrpo.stages.job_costs import run_job_costs, write_job_graph

    bench = tmp_path / "benchmarks"
    for name, seconds in (("build_tiny_model/tiny", 300.0), ("train/tiny/G4/seed1", 600.0), ("bandit_a", 60.0)):
        (bench / name).parent.mkdir(parents=True, exist_ok=True)
        (bench / f"{name}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")
    graph = tmp_path / "graph.json"
    write_job_graph([
        {"rule": "build_tiny_model", "benchmark": str(bench / "build_tiny_model/tiny.tsv"), "inputs": [],
         "outputs": ["m"]},
        {"rule": "train", "benchmark": str(bench / "train/tiny/G4/seed1.tsv"), "inputs": ["m"], "outputs": ["log"]},
        {"rule": "bandit_a", "benchmark": str(bench / "bandit_a.tsv"), "inputs": [], "outputs": ["b"]},
    ], str(graph), cores=2, started_at=0.0)
    summary = tmp_path / "summary.json"
    run_job_costs(str(graph), str(bench), str(tmp_path / "c.md"), str(tmp_path / "c.csv"), out_json=str(summary),
                  now=1200.0)
    facts = collect_facts(job_costs_json=str(summary))
    row = next(h for h in facts["headlines"] if h["id"] == "main_job")
    # by hand: 960 job-seconds = 16.0 min; critical path 300 + 600 = 900 s = 15.0 min; elapsed 1200 s = 20.0 min
    assert [v["value"] for v in row["values"]] == [1200.0, 960.0, 900.0]
    block = render_block(facts)
    assert "20.0 min elapsed on 2 cores · 16.0 min of job-seconds over 3 jobs · critical path 15.0 min" in block
    assert "costliest rule: train, 62%" in block  # 600 / 960
    page = render_benchmarks_page(facts, "figures")
    assert "- elapsed: **20.0 min** of wall-clock on 2 cores" in page
    assert "on 2 cores no run takes less than 15.0 min" in page  # max(900, 960 / 2)
    # a resumed run (the others done before it) has no whole run's elapsed time to quote
    resumed = json.loads(summary.read_text())
    assert resumed["jobs_run"] == 3  # every job of the graph ran in the table's run above
    summary.write_text(json.dumps({**resumed, "jobs_run": 1, "elapsed_seconds": 2.0}))
    facts = collect_facts(job_costs_json=str(summary))
    block = render_block(facts)
    # what a whole run still cannot beat, by hand: max(critical path 900 s, 960 job-seconds / 2 cores) = 15.0 min
    assert ("no whole run's elapsed time (the table's run executed 1 of the 3 jobs) · a whole run on 2 cores takes at "
            "least 15.0 min · 16.0 min of job-seconds") in block
    assert "min elapsed" not in block
    page = render_benchmarks_page(facts, "figures")
    assert "- elapsed: no whole run measured: the run that wrote the table executed 1 of the 3 jobs" in page
    # on one core the table's bound is the work itself, by hand max(900 s, 960 s / 1) = 960 s
    summary.write_text(json.dumps({**resumed, "jobs_run": 1, "elapsed_seconds": 2.0, "cores": 1,
                                   "wall_lower_bound_seconds": 960.0}))
    block = render_block(collect_facts(job_costs_json=str(summary)))
    assert "a whole run on 1 core takes at least 16.0 min" in block
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": 3}')
    assert any("job costs" in m and "job_seconds" in m for m in collect_facts(job_costs_json=str(bad))["missing"])
