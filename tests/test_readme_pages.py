"""The README's summary and the results pages (issue: the numbers come from the run, never typed in; each headline
with its spread and whether a rerun reproduces it).

A fabricated results folder with known numbers goes through the stage of rule readme_numbers: every fact and every
spread must be the number computed here by hand from what was written, and the summary block, the results page and
the benchmarks page must show them. ``pgrpo readme update`` commits the facts, the pages and the figures to docs/;
``pgrpo readme check`` fails on a hand-edited number in the README block or a page, on a figure that is not the
facts', and on committed facts that are not the run's. The repository's README and docs must hold exactly the
generator's text for the committed facts. The benchmarks' own facts: tests/test_readme_benchmark_facts.py.
"""

from __future__ import annotations

import json
import math
import re
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
