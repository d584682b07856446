"""The README's summary and the results pages (issue: the numbers come from the run, never typed in; each headline
with its spread and whether a rerun reproduces it).

A fabricated results folder with known numbers goes through the stage of rule readme_numbers: every fact and every
spread must be the number computed here by hand from what was written, and the summary block, the results page and
the benchmarks page must show them. ``pgrpo readme update`` commits the facts, the pages and the figures to docs/;
``pgrpo readme check`` fails on a hand-edited number in the README block or a page, on a figure that is not the
facts', and on committed facts that are not the run's. The repository's README and docs must hold exactly the
generator's text for the committed facts.
"""

from __future__ import annotations

import json
import re
import math
from pathlib import Path

import pandas as pd
import pytest
from pgrpo.cli import main
from pgrpo.stages.readme import collect_facts, run_readme_check, run_readme_numbers, run_readme_update
from pgrpo.stages.results_pages import figure_name, page_texts
from pgrpo.tables.readme import BEGIN, END, block_errors, facts_digest, find_block, render_block
from pgrpo.tables.results_pages import render_benchmarks_page, render_results_page

VERDICT_MD = """# Section 5.6

## Verdicts

| claim | reading | verdict | numbers |
|---|---|---|---|
| cascade | sliding/stale | **not** | x = 1 |
| frontier | sliding/stale | **reproduced** | ratio 0.85 |
| cascade | periodic/stale | **partly** | y |

## How the verdicts are graded
"""

FINITE_G_MD = """# The finite-G bandit against the 1/G law (Prop. 10, Eq. 12)

The exact bandit ...

**Exponent of Var(p) about its own mean**: -0.754 ± 0.017 (95% interval [-0.795, -0.712], reduced chi² 186.2); \
between the two largest G: -0.891. Of <(p - p*)²>: -1.549 [-1.572, -1.526]. Prop. 10 predicts -1.

| G | Var(p) about its mean |
|---|---|
| 2 | 1.4e-03 |

## Verdicts

| claim | verdict | numbers | rule |
|---|---|---|---|
| Prop. 10: Var(p) scales as 1/G | **partly** | exponent -0.754 | reproduced if ... |
| Sec. 5.3: sigma_adv keeps a residual G-dependence | **reproduced** | ... | ... |
| Eq. 12 with the G-free K at p* | **not** | ... | ... |
"""

#: the figures of the fabricated run: (source under results/, the name of its copy)
FIGURES = [("figures/figure1.png", "figure1.png"), ("diagnostics/figure2.png", "figure2.png"),
           ("diagnostics/figure5.png", "figure5.png"), ("bandit/figure6.png", "figure6.png"),
           ("bandit/figure7_sliding_stale.png", "figure7_sliding_stale.png"), ("bandit/finite_g.png", "finite_g.png"),
           ("kref_sweep/figure.png", "kref_sweep_figure.png"), ("forecast/benchmark.png", "forecast_benchmark.png"),
           ("figures/passk.png", "passk.png")]


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
    files["finite_g_md"] = write(r / "bandit" / "finite_g.md", FINITE_G_MD)
    files["kref_sweep_json"] = write(r / "kref_sweep" / "summary.json", json.dumps({
        "baseline": "lr0.002_kref1", "stiffness": {"K": 0.5, "rate": float("nan")}, "mu": 0.9,
        "agreement": {"agree": 1, "judged": 2}, "runs": [
            {"run": "lr0.002_kref1", "eta": 0.002, "k_ref": 1, "label": "monotone", "predicted": "monotone",
             "agrees": True, "k_eta_k_ref": 0.001, "zeta": 3.2, "crossings": 0},
            {"run": "lr0.008_kref16", "eta": 0.008, "k_ref": 16, "label": "collapsed", "predicted": "overshoot",
             "agrees": False, "k_eta_k_ref": 0.064, "zeta": None, "crossings": 2}],
        "arms": {"adam": {"optimizer": "adam", "baseline": "adam/baseline", "measured": True,
                          "stiffness": {"K": 0.08, "r2": 0.9, "relative_se": 0.2}, "agreement": {"agree": 0, "judged": 1},
                          "runs": [{"run": "adam/lr0.0005_kref4", "eta": 0.0005, "map_eta": 0.066, "k_ref": 4,
                                    "label": "monotone", "predicted": "oscillatory", "agrees": False,
                                    "k_eta_k_ref": 0.02, "zeta": 0.9}]}}}).replace("NaN", "NaN"))
    model = r / "model" / "tiny"
    write(model / "warmstart.json", json.dumps({"parameters": 850_000, "heldout": {
        "sampled": 0.25, "greedy": 0.625, "n": 256, "temperature": 0.8}}))
    files["model_dirs"] = [str(model)]
    logs = []
    for G in (4, 16):
        for seed in (1, 2):
            # step 0: the eval before the first update (no train reward); steps 1..20: reward = offset + seed step/100
            offset = 0.1 * seed + (0.0 if G == 4 else 0.05)
            rows = [{"step": 0, "reward": float("nan"), "eval_reward": 0.2}]
            rows += [{"step": s, "reward": offset + seed * s / 100, "eval_reward": float("nan")} for s in range(1, 21)]
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
    write(r / "benchmarks" / "kref_sweep" / "lr0.002_kref1.tsv", "s\th:m:s\n50\t0:00:50\n")
    write(r / "benchmarks" / "kref_sweep" / "lr0.008_kref16.tsv", "s\th:m:s\n70\t0:01:10\n")
    write(r / "benchmarks" / "kref_sweep" / "lr9_kref9.tsv", "s\th:m:s\n999\t0:16:39\n")  # not a run of the sweep
    files["figures"] = [write(r / source, f"\x89PNG fake {source}") for source, _ in FIGURES]
    return tmp_path, files


def run(tmp_path: Path, files: dict, folder: str = "readme") -> tuple[dict, Path]:
    out = tmp_path / "results" / folder
    facts = run_readme_numbers(str(out / "summary.md"), str(out / "numbers.json"), **files)
    return facts, out


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
    # 20 steps: the first tenth is steps 1-2, the last steps 19-20; reward = offset + seed step/100
    runs = {(t["G"], t["seed"]): t for t in facts["train"]}
    assert set(runs) == {(4, 1), (4, 2), (16, 1), (16, 2)}
    for (G, seed), t in runs.items():
        offset = 0.1 * seed + (0.0 if G == 4 else 0.05)
        assert t["first"] == pytest.approx(offset + seed * 0.015) and t["last"] == pytest.approx(offset + seed * 0.195)
        assert t["rise"] == pytest.approx(seed * 0.18) and t["steps"] == 20
    # the rise across seeds: 0.18 and 0.36, mean 0.27, s.d. |0.36 - 0.18| / sqrt(2)
    assert [(r["G"], r["n"]) for r in facts["train_rise"]] == [(16, 2), (4, 2)]
    for r in facts["train_rise"]:
        assert r["mean"] == pytest.approx(0.27) and r["sd"] == pytest.approx(0.18 / math.sqrt(2))
    cells = {(c["benchmark"], c["column"]): c for c in facts["table1"]}
    assert cells[("near", "G=4")]["mean"] == 42.0 and cells[("near", "G=4")]["mark"] == "best"
    assert cells[("near", "Base")]["sd"] is None  # NaN in the CSV: no s.d. with one value
    assert [c["benchmark"] for c in facts["table1"]][::3] == ["near", "far"]  # the summary's (distance) order
    fits = [(f["column"], f["G"], f["r2"]) for f in facts["fits"]]
    assert fits == [("eval_reward", 16, 0.82), ("eval_reward", 4, 0.971), ("reward", 4, 0.31)]
    assert facts["fits"][2]["ceiling"]["r2_ceiling"] == 0.75
    assert [(d["diagnostic"], d["G"]) for d in facts["diagnostics"]] == [("stability", 4),
                                                                         ("policy_concentration", None)]
    g = facts["finite_g"]
    assert (g["exponent"], g["exponent_se"], g["level"], g["interval"], g["last_pair"]) == (
        -0.754, 0.017, 0.95, [-0.795, -0.712], -0.891)
    assert g["verdicts"] == [{"claim": "Prop. 10: Var(p) scales as 1/G", "verdict": "partly"},
                             {"claim": "Sec. 5.3: sigma_adv keeps a residual G-dependence", "verdict": "reproduced"},
                             {"claim": "Eq. 12 with the G-free K at p*", "verdict": "not"}]  # p*'s star kept
    k = facts["kref_sweep"]
    assert (k["K"], k["baseline"], k["agree"], k["judged"]) == (0.5, "lr0.002_kref1", 1, 2)
    assert [(a["arm"], a["K"], a["r2"], a["agree"], a["judged"], [r["map_eta"] for r in a["runs"]])
            for a in k["arms"]] == [("adam", 0.08, 0.9, 0, 1, [0.066])]
    assert [(r["eta"], r["k_ref"], r["label"], r["agrees"], r["zeta"]) for r in k["runs"]] == [
        (0.002, 1, "monotone", True, 3.2), (0.008, 16, "collapsed", False, None)]
    timings = {t["stage"]: t for t in facts["timings"]}
    assert timings["train"]["jobs"] == 4 and timings["train"]["min_s"] == 105.5 and timings["train"]["max_s"] == 118.5
    assert timings["train"]["total_s"] == pytest.approx(105.5 + 106.5 + 117.5 + 118.5)
    assert timings["symbolic"]["total_s"] == 7.25 and "evaluate" not in timings
    assert timings["kref sweep"]["jobs"] == 2 and timings["kref sweep"]["total_s"] == 120  # lr9_kref9 not counted
    # the figures: the name of each copy, its source and the SHA-256 of its bytes
    assert [f["name"] for f in facts["figures"]] == [name for _, name in FIGURES]
    import hashlib
    first = facts["figures"][0]
    assert first["sha256"] == hashlib.sha256("\x89PNG fake figures/figure1.png".encode()).hexdigest()


def test_each_section_says_how_far_a_rerun_reproduces_it(results):
    _, files = results
    kinds = {s: r["kind"] for s, r in collect_facts(**files)["reproducibility"].items()}
    assert kinds == {"symbolic": "deterministic", "bandit": "deterministic", "finite_g": "deterministic",
                     "models": "seeded torch", "train": "seeded torch", "table1": "seeded torch",
                     "fits": "seeded torch", "diagnostics": "seeded torch", "kref_sweep": "seeded torch",
                     "timings": "wall clock"}


def test_the_headlines_and_their_spreads_are_computed_by_hand(results):
    _, files = results
    rows = {h["id"]: h for h in collect_facts(**files)["headlines"]}
    assert list(rows) == ["symbolic", "bandit", "warm_start", "table1", "fit", "diagnostics", "job_time"]
    assert [(v["label"], v["value"], v["of"]) for v in rows["symbolic"]["values"]] == [("PASS", 2, 3), ("FAIL", 1, 3)]
    assert rows["bandit"]["values"][0]["value"] == 0.2 and rows["bandit"]["kind"] == "deterministic"
    assert [(v["label"], v["value"], v["of"]) for v in rows["bandit"]["verdicts"]] == [
        ("reproduced", 1, 3), ("partly", 1, 3), ("not", 1, 3)]
    # the warm start: 25% sampled over 256 problems -> binomial s.e. 100 sqrt(0.25 0.75 / 256) = 2.706 points
    warm = rows["warm_start"]["values"][0]
    assert (warm["value"], warm["spread_kind"], warm["n"]) == (25.0, "binomial_se", 256)
    assert warm["spread"] == pytest.approx(2.7063294) and rows["warm_start"]["kind"] == "seeded torch"
    # Table 1's nearest benchmark: base is one evaluation over 200 problems (binomial s.e. 100 sqrt(0.2 0.8 / 200));
    # a trained column the s.d. across its 2 seeds, with one evaluation's binomial s.e. beside it
    t1 = {v["label"]: v for v in rows["table1"]["values"]}
    assert (rows["table1"]["benchmark"], rows["table1"]["metric"]) == ("near", "pass@1")
    assert (t1["Base"]["spread_kind"], t1["Base"]["n"]) == ("binomial_se", 200)
    assert t1["Base"]["spread"] == pytest.approx(2.8284271)
    assert (t1["G=16"]["value"], t1["G=16"]["spread"], t1["G=16"]["spread_kind"], t1["G=16"]["n"]) == (
        30.5, 1.25, "seed_sd", 2)
    assert t1["G=16"]["sampling_se"] == pytest.approx(100 * math.sqrt(0.305 * 0.695 / 200))  # 3.2556
    assert t1["G=4"]["spread"] == 2.0 and t1["G=4"]["sampling_se"] == pytest.approx(3.4899857)
    fit = rows["fit"]
    assert fit["column"] == "reward" and [(v["label"], v["value"], v["n"], v["ceiling"]) for v in fit["values"]] == [
        ("G=4", 0.31, 2, 0.75)]
    assert [(v["label"], v["value"], v["of"]) for v in rows["diagnostics"]["values"]] == [
        ("stable regime", 1, 2), ("benign", 1, 2)]
    job = rows["job_time"]
    assert job["values"][0]["value"] == pytest.approx(7.25 + 448 + 120) and job["values"][0]["of"] == 7
    assert job["longest"]["stage"] == "train" and job["kind"] == "wall clock"


def test_the_summary_block_is_a_short_table_with_the_spreads(results):
    tmp_path, files = results
    facts, out = run(tmp_path, files)
    block = (out / "summary.md").read_text()
    assert json.loads((out / "numbers.json").read_text()) == facts
    assert block.startswith(BEGIN) and block.rstrip().endswith(END)
    assert len(block) < 3000 and '"headlines"' not in block and "{" not in block  # no facts in the README
    assert f"<!-- results:facts sha256:{facts_digest(facts)} -->" in block
    lines = [line for line in block.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + 7  # the header and one row per headline
    assert ("| Symbolic verification (Appendix A): claims | 2 PASS · 1 FAIL (of 3) | bitwise (deterministic) |"
            in lines)
    assert ("| Exact softmax bandit (Section 5.6): measured K; verdicts per claim and reading | K = 0.200; verdicts: "
            "1 reproduced · 1 partly · 1 not (of 3) | bitwise (deterministic) |") in lines
    torch = "bitwise on this machine (same seeds and threads); elsewhere another draw"
    assert (f"| Warm start (`tiny`): held-out accuracy sampled at T = 0.8 | 25.0% ± 2.7% (binomial s.e., N = 256) | "
            f"{torch} |") in lines
    assert (f"| Table 1, near pass@1 (%): base and trained | Base 20.00 ± 2.83 (binomial s.e., N = 200) · G=16 30.50 "
            f"± 1.25 (s.d. across seeds, n = 2) · G=4 42.00 ± 2.00 (s.d. across seeds, n = 2) | {torch} |") in lines
    assert ("| Three-phase fit (Section 4.4): R² on the seed mean of `reward` | G=4 0.31 (one fit each on the mean "
            f"of 2 seeds: no rerun spread measured; binomial noise alone caps R² at 0.75) | {torch} |") in lines
    assert f"| Diagnostics (Figures 2-5): verdicts | 1 stable regime · 1 benign (of 2) | {torch} |" in lines
    # 7.25 + 448 + 120 = 575.25 s over 7 jobs; train 4 x 106-118 s (.0f rounds half to even: 105.5 -> 106)
    assert ("| Main job (`make run`): wall-clock time of its timed jobs, summed | 9.6 min (575 s) over 7 jobs; longest "
            "stage: train, 4 × 106-118 s | differs on every run |") in lines
    assert "[The paper, reproduced](docs/results.md)" in block and block_errors(block, facts) == []


def test_the_results_page_shows_each_stage_with_its_figure_and_verdict(results):
    tmp_path, files = results
    facts, out = run(tmp_path, files)
    page = (out / "results.md").read_text()
    assert page == render_results_page(facts, "figures")
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == ["## Headline numbers", "## Which numbers a rerun reproduces",
                        "## Symbolic verification (Appendix A)",
                        "## The exact softmax bandit (Section 5.6, Figures 6-7)",
                        "## GRPO training and the warm start (Section 4.2)", "## Table 1 (Section 5.7)",
                        "## The three-phase fit (Section 4.4, Figure 1)", "## The diagnostics (Figures 2-5)",
                        "## Beyond the paper: the finite-G 1/G law (Prop. 10)",
                        "## Beyond the paper: the deep-network K_ref sweep"]
    assert page.startswith("# The paper, reproduced\n")
    for name in ("figure1.png", "figure5.png", "figure6.png", "figure7_sliding_stale.png", "finite_g.png",
                 "kref_sweep_figure.png", "passk.png"):
        assert f"](figures/{name})" in page
    assert "](figures/figure2.png)" not in page  # no reward-hacking verdict: its figure is not shown
    expected = [
        "3 claims of the paper derived again with sympy", "**2 PASS, 1 FAIL**",
        "- FAIL *Lemma X's root* (`lemma_x`): mu = 0, gap = 0.137 (1 more case in verification.json)",
        "measured p\\* = 1.234 and **K = 0.200** (window [0, 0.5] of the relaxation; K from 0.050 to 0.300",
        "| claim | sliding/stale | periodic/stale |\n|---|---|---|\n| cascade | not | partly |\n"
        "| frontier | reproduced | – |",
        "after the warm start **25.0% ± 2.7% (binomial s.e., N = 256)** held-out accuracy sampled at T = 0.8, "
        "62.5% greedy",
        "| `tiny` | 4 | 2 | 20 | 0.230 | 0.590 | +0.360 |",
        "- `tiny` G=4: rise +0.270 ± 0.127 (s.d. across seeds, n = 2)",
        "| near (200) | pass@1 | 20.00 | 30.50 ± 1.25 | **42.00 ± 2.00** |",
        "G=16 30.50 ± 1.25 (s.d. across seeds, n = 2), against 3.26, the binomial s.e. of one evaluation",
        "`tiny` reward G=4: 300 points, three-phase R² = 0.31 (binomial noise alone caps R² at 0.75",
        "### Stability (Figure 5)", "- `tiny`, G=4: **stable regime**: K eta K_ref = 0.001 --> far",
        "- `tiny`, across G: **benign**",
        "**-0.754 ± 0.017** (95% interval [-0.795, -0.712]); between the two largest G -0.891",
        "- Prop. 10: Var(p) scales as 1/G: **partly**", "- Eq. 12 with the G-free K at p\\*: **not**",
        "- `adam`: K = 0.08 from the baseline `adam/baseline`, R² 0.900, relative s.e. 20%; **0 of 1** classifiable "
        "cells agree",  # per arm, with its own K
        "| adam | 0.066 | 4 | monotone | oscillatory | **no** | 0.2 | 0.9 |",  # eta: the map's; x = 0.02 / (1 - 0.9)
        "*A rerun*: sympy: deterministic: bitwise the same on a rerun",
        "*A rerun*: torch CPU warm start and sampling and torch CPU GRPO training: seeded: bitwise the same",
    ]
    assert [e for e in expected if e not in page] == []
    assert "sqrt(p (1 - p) / N)" in page and f"sha256 `{facts_digest(facts)}`" in page


def test_the_benchmarks_page_gives_each_command(results):
    tmp_path, files = results
    facts, out = run(tmp_path, files)
    page = (out / "benchmarks.md").read_text()
    assert page == render_benchmarks_page(facts, "figures") and page.startswith("# Benchmarks\n")
    assert "| train | 4 | 106-118 | 448 |" in page and "| kref sweep | 2 | 50-70 | 120 |" in page
    for command in ("`make run`", "`make bench`", "`make bench-dryrun`", "`make diagnose-benchmark`"):
        assert command in page
    scripts = page[page.index("## Benchmark scripts"):]
    assert "benchmarks/bench_bandit.py" in scripts and "benchmarks/bench_dryrun.py" in scripts
    assert not any(ch.isdigit() for ch in scripts.replace("--G 4 16", "").replace("bench_", "")
                   .replace("5.", "")), "no typed numbers for the scripts"


def test_the_figures_are_copied_beside_the_pages(results):
    tmp_path, files = results
    facts, out = run(tmp_path, files)
    copies = sorted(p.name for p in (out / "figures").iterdir())
    assert copies == sorted(name for _, name in FIGURES)
    for source, name in FIGURES:
        assert (out / "figures" / name).read_bytes() == (tmp_path / "results" / source).read_bytes()
    assert figure_name("results/kref_sweep/figure.png") == "kref_sweep_figure.png"
    assert figure_name("results/bandit/figure6.png") == "figure6.png"


def test_update_then_check_against_this_and_another_run(results):
    tmp_path, files = results
    readme = Path(write(tmp_path / "README.md", f"# Title\n\nintro\n\n{BEGIN}\nold text\n{END}\n\n## Next\n"))
    docs = tmp_path / "docs"
    facts, out = run(tmp_path, files)
    summary = out / "summary.md"
    assert run_readme_check(str(readme))  # no committed facts yet
    run_readme_update(str(readme), str(summary))
    text = readme.read_text()
    assert text.startswith("# Title\n\nintro\n\n" + BEGIN) and text.endswith(END + "\n\n## Next\n")
    assert json.loads((docs / "results" / "numbers.json").read_text()) == facts
    assert (docs / "results.md").read_text() == render_results_page(facts, "results")
    assert (docs / "benchmarks.md").read_text() == render_benchmarks_page(facts, "results")
    assert "](results/figure1.png)" in (docs / "results.md").read_text()
    for _, name in FIGURES:
        assert (docs / "results" / name).read_bytes() == (out / "figures" / name).read_bytes()
    assert run_readme_check(str(readme)) == [] and run_readme_check(str(readme), str(summary)) == []
    assert main(["readme", "check", str(readme), str(summary)]) == 0
    # a hand-edited number in the README block, in a page, or a figure swapped: each fails
    for path, old, new in ((readme, "25.0% ± 2.7%", "25.5% ± 2.7%"),
                           (docs / "results.md", "**2 PASS, 1 FAIL**", "**3 PASS, 0 FAIL**"),
                           (docs / "benchmarks.md", "| train | 4 | 106-118 | 448 |", "| train | 4 | 100-118 | 448 |")):
        before = path.read_text()
        assert old in before
        path.write_text(before.replace(old, new))
        errors = run_readme_check(str(readme))
        assert errors and "is not the generator's text" in errors[0], errors
        path.write_text(before)
    figure = docs / "results" / "figure1.png"
    original = figure.read_bytes()
    figure.write_bytes(b"another figure")
    assert "is not the figure of the facts" in run_readme_check(str(readme))[0]
    figure.write_bytes(original)
    # a hand-edited committed fact: the block names other facts
    committed = docs / "results" / "numbers.json"
    before = committed.read_text()
    committed.write_text(before.replace('"sampled": 0.25', '"sampled": 0.35'))
    assert "made from the facts sha256" in run_readme_check(str(readme))[0]
    committed.write_text(before)
    assert run_readme_check(str(readme)) == []
    # another run: one train log fewer -> the committed facts are stale for it
    other, other_out = run(tmp_path, dict(files, logs=files["logs"][1:]), folder="other")
    errors = run_readme_check(str(readme), str(other_out / "summary.md"))
    assert errors and "are not those of" in errors[0] and "train" in errors[0] and "headlines" in errors[0]
    assert main(["readme", "check", str(readme), str(other_out / "summary.md")]) == 1
    # without a summary, update re-renders the block and the pages from the committed facts: here, the same text
    pages = {p: p.read_text() for p in (readme, docs / "results.md", docs / "benchmarks.md")}
    assert main(["readme", "update", str(readme)]) == 0
    assert {p: p.read_text() for p in pages} == pages and run_readme_check(str(readme)) == []


def test_a_summary_whose_block_is_not_its_facts_is_refused(results):
    tmp_path, files = results
    readme = Path(write(tmp_path / "README.md", f"{BEGIN}\n{END}\n"))
    _, out = run(tmp_path, files)
    summary = out / "summary.md"
    summary.write_text(summary.read_text().replace("25.0%", "27.0%"))
    with pytest.raises(Exception, match="not the generator's text"):
        run_readme_update(str(readme), str(summary))


def test_missing_results_are_named_not_fatal(tmp_path):
    facts = collect_facts(symbolic_json=str(tmp_path / "absent.json"), logs=[str(tmp_path / "x" / "log.csv")],
                          fits_jsons=[str(tmp_path / "fit" / "m" / "fits.json")],
                          figures=[str(tmp_path / "figures" / "figure1.png")])
    assert len(facts["missing"]) == 4 and "result file not found: " in facts["missing"][0]
    assert "absent.json" in facts["missing"][0] and "figure1.png (no such file)" in facts["missing"][3]
    page = render_results_page(facts, "results")
    assert "## Not in the results" in page and "absent.json" in page
    assert "No results yet" in render_block(facts) and block_errors(render_block(facts), facts) == []
    assert "No results yet" in render_block({})


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


def _committed(repo_root: Path) -> dict:
    path = repo_root / "docs" / "results" / "numbers.json"
    assert path.is_file(), "docs/results/numbers.json (the committed facts) is missing: run `make readme`"
    return json.loads(path.read_text())


def test_the_docs_hold_exactly_the_generated_pages_for_the_committed_facts(repo_root):
    from pgrpo.stages.results_pages import pages_errors

    facts = _committed(repo_root)
    docs = repo_root / "docs"
    pages = {"results": str(docs / "results.md"), "benchmarks": str(docs / "benchmarks.md")}
    assert pages_errors(facts, pages, str(docs / "results")) == []
    assert set(page_texts(facts, pages, str(docs / "results"))) == set(pages.values())


def test_the_readme_holds_exactly_the_generated_block_for_the_committed_facts(repo_root):
    facts = _committed(repo_root)
    text = (repo_root / "README.md").read_text()
    assert block_errors(text, facts) == []
    start, end = find_block(text)
    assert end - start < 4000  # a summary, not the facts


def test_the_readme_is_a_screen_whose_links_and_images_resolve(repo_root):
    """The README is the front door: at most ~150 lines, and every relative link or image it names is a file of the
    repository (the site's generated pages are not files, so the README may not link to them)."""
    text = (repo_root / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    targets = re.findall(r"\]\(([^)#\s]+)[^)]*\)", text) + re.findall(r'<img src="([^"]+)"', text)
    relative = [t for t in targets if "://" not in t]
    assert "docs/results/figure1.png" in relative
    missing = [t for t in relative if not (repo_root / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


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
    assert "no whole run's elapsed time (the table's run executed 1 of the 3 jobs) · 16.0 min of job-seconds" in block
    assert "min elapsed" not in block
    page = render_benchmarks_page(facts, "figures")
    assert "- elapsed: no whole run measured: the run that wrote the table executed 1 of the 3 jobs" in page
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": 3}')
    assert any("job costs" in m and "job_seconds" in m for m in collect_facts(job_costs_json=str(bad))["missing"])
