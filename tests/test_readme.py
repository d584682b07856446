"""The README's results block (issue: the README's numbers come from the run, never typed in).

A fabricated results folder with known numbers goes through the stage of rule readme_numbers: every fact must be
the number computed here by hand from what was written. The block carries its facts, so a hand-edited number, a
hand-edited fact or a stale block each fail; and the README in the repository must hold exactly the block the
generator writes for its facts, with no measured number outside it in its section.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from pgrpo.cli import main
from pgrpo.stages.readme import collect_facts, run_readme_check, run_readme_numbers, run_readme_update
from pgrpo.tables.readme import BEGIN, END, block_errors, facts_of_block, find_block, render_block

VERDICT_MD = """# Section 5.6

## Verdicts

| claim | reading | verdict | numbers |
|---|---|---|---|
| cascade | sliding/stale | **not** | x = 1 |
| frontier | sliding/stale | **reproduced** | ratio 0.85 |
| cascade | periodic/stale | **partly** | y |

## How the verdicts are graded
"""


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


@pytest.fixture()
def results(tmp_path):
    """A results folder of one model, G in {4, 16} x seeds {1, 2}, with numbers chosen to be checked by hand."""
    r = tmp_path / "results"
    files = {}
    files["symbolic_json"] = write(r / "symbolic" / "verification.json", json.dumps({
        "n_claims": 3, "n_pass": 2, "n_fail": 1, "claims": [
            {"id": "a", "title": "A holds", "verdict": "PASS", "counterexample": None},
            {"id": "lemma_x", "title": "Lemma X's root", "verdict": "FAIL",
             "counterexample": {"cases": [{"mu": 0.0, "gap": 0.13670232}, {"mu": 0.5, "gap": 0.01}]}},
            {"id": "c", "title": "C holds", "verdict": "PASS", "counterexample": None}]}))
    files["calibration_json"] = write(r / "bandit" / "calibration.json", json.dumps({
        "rewards": [0, 0, 1.5], "beta": 1.0, "p_star": 1.2345, "stiffness": 0.2, "window": [0.0, 0.5],
        "stiffness_by_window": [{"window": [0, 0.1], "stiffness": 0.3}, {"window": [0, 0.5], "stiffness": 0.2},
                                {"window": [0.9, 0.99], "stiffness": 0.05}]}))
    files["bandit_verdict_md"] = write(r / "bandit" / "verdict.md", VERDICT_MD)
    model = r / "model" / "tiny"
    write(model / "warmstart.json", json.dumps({"parameters": 850_000, "heldout": {
        "sampled": 0.25, "greedy": 0.625, "n": 256, "temperature": 0.8}}))
    files["model_dirs"] = [str(model)]
    logs = []
    for G in (4, 16):
        for seed in (1, 2):
            # step 0: the eval before the first update (no train reward); steps 1..20: reward = offset + step / 100
            offset = 0.1 * seed + (0.0 if G == 4 else 0.05)
            rows = [{"step": 0, "reward": float("nan"), "eval_reward": 0.2}]
            rows += [{"step": s, "reward": offset + s / 100, "eval_reward": float("nan")} for s in range(1, 21)]
            path = r / "train" / "tiny" / f"G{G}" / f"seed{seed}" / "log.csv"
            path.parent.mkdir(parents=True)
            pd.DataFrame(rows).to_csv(path, index=False)
            logs.append(str(path))
            write(r / "benchmarks" / "train" / "tiny" / f"G{G}" / f"seed{seed}.tsv",
                  f"s\th:m:s\tmax_rss\n{100 + G + seed}.5\t0:01:40\t10\n")
    files["logs"] = logs
    files["table1_summary_csv"] = write(r / "tables" / "table1_summary.csv", pd.DataFrame([
        {"benchmark": "near", "n_problems": 200, "metric": "pass@1", "model": "tiny", "column": "Base", "mean": 20.0,
         "sd": float("nan"), "n": 1, "base": 20.0, "delta": 0.0, "mark": "base"},
        {"benchmark": "near", "n_problems": 200, "metric": "pass@1", "model": "tiny", "column": "G=16", "mean": 30.5,
         "sd": 1.25, "n": 2, "base": 20.0, "delta": 10.5, "mark": "better"},
        {"benchmark": "near", "n_problems": 200, "metric": "pass@1", "model": "tiny", "column": "G=4", "mean": 42.0,
         "sd": 2.0, "n": 2, "base": 20.0, "delta": 22.0, "mark": "best"},
        {"benchmark": "far", "n_problems": 100, "metric": "pass@1", "model": "tiny", "column": "Base", "mean": 3.0,
         "sd": float("nan"), "n": 1, "base": 3.0, "delta": 0.0, "mark": "base"},
        {"benchmark": "far", "n_problems": 100, "metric": "pass@1", "model": "tiny", "column": "G=16", "mean": 2.0,
         "sd": 0.5, "n": 2, "base": 3.0, "delta": -1.0, "mark": "worse"},
        {"benchmark": "far", "n_problems": 100, "metric": "pass@1", "model": "tiny", "column": "G=4", "mean": 3.5,
         "sd": 0.25, "n": 2, "base": 3.0, "delta": 0.5, "mark": "best"},
    ]).to_csv(index=False))
    files["fits_jsons"] = [write(r / "fit" / "tiny" / "fits.json", json.dumps({"model": "tiny", "groups": {
        "4": {"columns": {"eval_reward": {"n_points": 13, "r2_seed_mean": {"three_phase": 0.971, "exponential": 0.9},
                                          "summary": "AIC prefers the three-phase law."},
                          "reward": {"n_points": 300, "r2_seed_mean": {"three_phase": 0.31}, "summary": "",
                                     "noise_ceiling": {"r2_ceiling": 0.75, "completions_per_step": 32,
                                                       "n_seeds": 2.0, "noise_sd": 0.06, "rise": 0.24}}}},
        "16": {"columns": {"eval_reward": {"n_points": 13, "r2_seed_mean": {"three_phase": 0.82}, "summary": "Tied."}}},
    }}))]
    files["diagnostics_json"] = write(r / "diagnostics" / "verdicts.json", json.dumps({"diagnostics": {
        "stability": [{"model": "tiny", "G": 4, "verdict": "stable regime", "reason": "K eta K_ref = 0.001 --> far"}],
        "policy_concentration": [{"model": "tiny", "G": None, "verdict": "benign", "reason": ""}]}}))
    files["eval_jsons"] = []
    files["benchmarks_dir"] = str(r / "benchmarks")
    write(r / "benchmarks" / "verify_symbolic.tsv", "s\th:m:s\n7.25\t0:00:07\n")
    return tmp_path, files


def test_facts_are_the_numbers_of_the_results(results):
    _, files = results
    facts = collect_facts(**files)
    assert facts["missing"] == []
    s = facts["symbolic"]
    assert (s["n_claims"], s["n_pass"], s["n_fail"]) == (3, 2, 1)
    assert [f["id"] for f in s["fails"]] == ["lemma_x"]
    assert s["fails"][0]["counterexample"] == "mu = 0, gap = 0.137 (1 more case in verification.json)"
    b = facts["bandit"]
    assert (b["p_star"], b["K"], b["window"], b["K_windows"]) == (1.2345, 0.2, [0.0, 0.5], [0.05, 0.3])
    assert b["verdicts"] == [{"claim": "cascade", "reading": "sliding/stale", "verdict": "not"},
                             {"claim": "frontier", "reading": "sliding/stale", "verdict": "reproduced"},
                             {"claim": "cascade", "reading": "periodic/stale", "verdict": "partly"}]
    assert facts["models"] == [{"name": "tiny", "parameters": 850000, "sampled": 0.25, "greedy": 0.625,
                                "temperature": 0.8, "n": 256}]
    # 20 steps: the first tenth is steps 1-2, the last steps 19-20; reward = offset + step/100, so the rise is 0.18
    runs = {(t["G"], t["seed"]): t for t in facts["train"]}
    assert set(runs) == {(4, 1), (4, 2), (16, 1), (16, 2)}
    for (G, seed), t in runs.items():
        offset = 0.1 * seed + (0.0 if G == 4 else 0.05)
        assert t["first"] == pytest.approx(offset + 0.015) and t["last"] == pytest.approx(offset + 0.195)
        assert t["rise"] == pytest.approx(0.18) and t["steps"] == 20
    cells = {(c["benchmark"], c["column"]): c for c in facts["table1"]}
    assert cells[("near", "G=4")]["mean"] == 42.0 and cells[("near", "G=4")]["mark"] == "best"
    assert cells[("near", "Base")]["sd"] is None  # NaN in the CSV: no s.d. with one value
    assert [c["benchmark"] for c in facts["table1"]][::3] == ["near", "far"]  # the summary's (distance) order
    fits = [(f["column"], f["G"], f["r2"]) for f in facts["fits"]]
    assert fits == [("eval_reward", 16, 0.82), ("eval_reward", 4, 0.971), ("reward", 4, 0.31)]
    assert facts["fits"][2]["ceiling"]["r2_ceiling"] == 0.75
    assert [(d["diagnostic"], d["G"]) for d in facts["diagnostics"]] == [("stability", 4),
                                                                         ("policy_concentration", None)]
    timings = {t["stage"]: t for t in facts["timings"]}
    assert timings["train"]["jobs"] == 4 and timings["train"]["min_s"] == 105.5 and timings["train"]["max_s"] == 118.5
    assert timings["train"]["total_s"] == pytest.approx(105.5 + 106.5 + 117.5 + 118.5)
    assert timings["symbolic"]["total_s"] == 7.25 and "evaluate" not in timings


def test_the_block_shows_those_numbers(results):
    tmp_path, files = results
    out_md, out_json = tmp_path / "summary.md", tmp_path / "numbers.json"
    facts = run_readme_numbers(str(out_md), str(out_json), **files)
    block = out_md.read_text()
    assert json.loads(out_json.read_text()) == facts == facts_of_block(block)
    assert block.startswith(BEGIN) and block.rstrip().endswith(END)
    assert "3 claims, 2 PASS, 1 FAIL" in block
    assert "measured p\\* = 1.234 and K = 0.200 (window [0, 0.5] of the relaxation; K from 0.050 to 0.300" in block
    assert "| frontier | – | reproduced |" in block.replace("| reproduced | – |", "| – | reproduced |") or \
        "| frontier | reproduced | – |" in block
    assert "0.85M parameters; after the warm start 25.0% held-out accuracy sampled at T = 0.8, 62.5% greedy" in block
    assert "`tiny` G=4 (20 steps): seed 1 0.115 -> 0.295 (+0.180); seed 2 0.215 -> 0.395 (+0.180)" in block
    assert "| near (200) | pass@1 | 20.00 | 30.50 ± 1.25 | **42.00 ± 2.00** |" in block
    assert "| far (100) | pass@1 | 3.00 | 2.00 ± 0.50 | **3.50 ± 0.25** |" in block
    assert "`tiny` reward G=4: 300 points, three-phase R^2 = 0.31 (binomial noise alone caps R^2 at 0.75" in block
    assert "train 4 x 106-118 s (448 s in all)" in block  # .0f rounds half to even: 105.5 -> 106, 118.5 -> 118
    assert block_errors(block) == []
    # a reason holding "-->" cannot end the facts comment early
    facts_line = next(line for line in block.splitlines() if line.startswith("<!-- results:facts "))
    assert facts_line.count("-->") == 1 and facts_line.endswith(" -->") and "--\\u003e" not in facts_line
    assert "0.001 --\u003e far" not in facts_line and "0.001 -\\u002d\\u003e far" in facts_line


def test_a_hand_edit_of_the_block_or_of_its_facts_fails(results):
    tmp_path, files = results
    facts = collect_facts(**files)
    block = render_block(facts)
    edited = block.replace("25.0% held-out", "35.0% held-out")
    assert edited != block
    assert "is not what the generator writes" in block_errors(edited)[0]
    forged = block.replace('"sampled":0.25', '"sampled":0.35')
    assert forged != block and block_errors(forged)
    assert "exactly one" in block_errors(block + block)[0]
    assert "facts comment" in block_errors(BEGIN + "\n- 1 claim\n" + END + "\n")[0]


def test_update_then_check_against_this_and_another_run(results):
    tmp_path, files = results
    readme = Path(write(tmp_path / "README.md", f"# Title\n\nintro\n\n{BEGIN}\nold text\n{END}\n\n## Next\n"))
    summary = tmp_path / "summary.md"
    run_readme_numbers(str(summary), str(tmp_path / "numbers.json"), **files)
    assert run_readme_check(str(readme))  # the hand-written block is not the generator's
    run_readme_update(str(readme), str(summary))
    text = readme.read_text()
    assert text.startswith("# Title\n\nintro\n\n" + BEGIN) and text.endswith(END + "\n\n## Next\n")
    assert run_readme_check(str(readme)) == [] and run_readme_check(str(readme), str(summary)) == []
    assert main(["readme", "check", str(readme), str(summary)]) == 0
    # another run: one train log fewer -> the README is stale for it
    other = dict(files, logs=files["logs"][1:])
    run_readme_numbers(str(tmp_path / "other.md"), str(tmp_path / "other.json"), **other)
    errors = run_readme_check(str(readme), str(tmp_path / "other.md"))
    assert errors and "differs in: timings, train" in errors[0]
    assert main(["readme", "check", str(readme), str(tmp_path / "other.md")]) == 1
    # without a summary, update re-renders the block from the facts it carries: here, the same text
    before = readme.read_text()
    assert main(["readme", "update", str(readme)]) == 0 and readme.read_text() == before


def test_missing_results_are_named_not_fatal(tmp_path):
    facts = collect_facts(symbolic_json=str(tmp_path / "absent.json"), logs=[str(tmp_path / "x" / "log.csv")],
                          fits_jsons=[str(tmp_path / "fit" / "m" / "fits.json")])
    assert len(facts["missing"]) == 3 and "result file not found: " in facts["missing"][0] and "absent.json" in facts["missing"][0]
    block = render_block(facts)
    assert "Not in the results (left out above)" in block and block_errors(block) == []
    assert "No results yet" in render_block({})


def test_the_readme_holds_exactly_a_generated_block_and_no_number_outside_it(repo_root):
    text = (repo_root / "README.md").read_text()
    assert block_errors(text) == []
    start, end = find_block(text)
    section_start = text.index("## What the embedded default shows")
    section_end = text.index("\n## ", section_start + 1)
    assert section_start < start < end <= section_end + 1
    outside = text[section_start:start] + text[end:section_end]
    # measured quantities are decimals, percentages or durations: none may be typed into the section by hand
    # (the paper's section and equation numbers are not measurements)
    outside = re.sub(r"\b(Section|Sections|Eq\.|Table|Figure|Figures|Appendix) [\d.,-]+", "", outside)
    assert not re.search(r"\d\.\d|\d\s*%|\d+\s*(min|s)\b", outside), outside


def test_the_forecast_benchmark_facts_are_its_medians(tmp_path):
    """Three curves of one cell with hand-set ratios: the facts hold their medians (1 + 0.8 + 0.9 -> 0.9) and the
    mean coverage; the block shows them, the cell at or under 0.85 in bold."""
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
    block = render_block(facts)
    assert "Forecast benchmark" in block and "| bandit | dev | 3 | 0.900 | 0.700 |" in block
    assert "| 0.700 | 0.600 | 0.800 | 0.30 · 3.00 · 3.00 |" in block
    assert block_errors(block) == []
    pd.DataFrame([{k: v for k, v in r.items() if k != "rmse_ratio"} for r in rows]).to_csv(path, index=False)
    facts = collect_facts(forecast_benchmark_csv=str(path))
    assert facts["forecast"] == [] and "no column 'rmse_ratio'" in facts["missing"][0]


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
    block = render_block(facts)
    assert "on 10 dev logs" in block and block_errors(block) == []
    assert "| dev | ours | 3/4 · 1 FP |" in block and "0.75 (3/4) | 0.75 (3/4) | 2/3 |" in block
    assert "| dev | toolkit | 0/4 · n/a |" in block
