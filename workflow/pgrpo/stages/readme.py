"""Stage ``readme_numbers`` and the verbs ``pgrpo readme update|check``: the numbers the README's summary and the
results pages (``docs/results.md``, ``docs/benchmarks.md``) quote about a run of the embedded default, read from the
results that run wrote, never typed in.

:func:`collect_facts` reads each result file it is given (symbolic verification, Appendix A; the bandit's
calibration and verdicts, Section 5.6; the warm start; each GRPO run's log, Section 4.2; Table 1's cells, Section
5.7; the three-phase fits, Section 4.4 / Figure 1; the diagnostics, Figures 2-5; the finite-G bandit; the K_ref
sweep; the forecast and the diagnose benchmarks; the job times Snakemake measured; the figures) and returns plain
facts, with how far a rerun reproduces each section and the headline numbers with their spread
(:mod:`pgrpo.stages.results_pages`); :func:`run_readme_numbers` writes them as JSON, as the README's summary block
(:mod:`pgrpo.tables.readme`) and as the results pages with their figures (:mod:`pgrpo.tables.results_pages`);
:func:`run_readme_update` puts a run's block into the README and its pages, figures and facts into ``docs/``;
:func:`run_readme_check` says whether the README's block and the pages are the generator's text for the committed
facts (``docs/results/numbers.json``) and, given a run's summary, whether those facts are that run's.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any, Sequence

from pgrpo.atomic import read_json, write_json, write_text
from pgrpo.errors import InputError, one_line
from pgrpo.fit.benchmark import FAMILY_ORACLE, HINDSIGHT, ORACLE, PANEL, SEEDS_TRUTH, summarize
from pgrpo.stages.results_pages import (FACTS_NAME, figure_facts, headline_facts, pages_errors,
                                        reproducibility_facts, train_rise_facts, write_pages)
from pgrpo.fit.truth_targets import TARGET_FRACTION, truth_cell
from pgrpo.tables.forecast_benchmark import in_part_order
from pgrpo.tables.readme import block_errors, find_block, render_block, replace_block


def _num(x: Any) -> float | int | None:
    """A finite number as is (ints stay ints), anything else None: facts are plain JSON."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    return int(x) if isinstance(x, int) else value


def _read_json(path: str) -> dict:
    return read_json(path, "result file")


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


COUNTEREXAMPLE_VALUES = 6


def _counterexample(claim: dict) -> str:
    """A FAIL claim's counterexample in one line: its (first) case as ``key = value`` pairs, at most
    :data:`COUNTEREXAMPLE_VALUES` of them (the rest are in verification.json)."""
    example = claim.get("counterexample")
    if isinstance(example, dict):
        cases = example.get("cases")
        case = cases[0] if isinstance(cases, list) and cases and isinstance(cases[0], dict) else example
        pairs = [f"{k} = {_short(v)}" for k, v in case.items() if not isinstance(v, (list, dict))]
        text = ", ".join(pairs[:COUNTEREXAMPLE_VALUES])
        more = []
        if len(pairs) > COUNTEREXAMPLE_VALUES:
            more.append(f"{len(pairs) - COUNTEREXAMPLE_VALUES} more values")
        if isinstance(cases, list) and len(cases) > 1:
            more.append(f"{len(cases) - 1} more case{'s' if len(cases) > 2 else ''}")
        return text + (f" ({' and '.join(more)} in verification.json)" if more else "")
    return str(example or "")


def symbolic_facts(path: str) -> dict:
    d = _read_json(path)
    claims = d.get("claims") or []
    for key in ("n_claims", "n_pass", "n_fail"):
        if key not in d:
            raise InputError(f"{path}: no {key!r}")
    return {"n_claims": int(d["n_claims"]), "n_pass": int(d["n_pass"]), "n_fail": int(d["n_fail"]),
            "fails": [{"id": str(c.get("id")), "title": str(c.get("title")), "counterexample": _counterexample(c)}
                      for c in claims if str(c.get("verdict")).upper() == "FAIL"]}


def _unbold(text: str) -> str:
    return text[2:-2].strip() if len(text) > 4 and text.startswith("**") and text.endswith("**") else text


def markdown_rows(path: str, columns: Sequence[str]) -> list[dict]:
    """The rows of the first Markdown table in ``path`` whose header starts with ``columns`` (case aside), as
    ``{column: cell}`` (bold marks stripped); [] if it has none."""
    lines = Path(path).read_text().splitlines()
    wanted = [c.lower() for c in columns]
    for i, line in enumerate(lines):
        header = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and header[:len(wanted)] == wanted:
            out = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [_unbold(c.strip()) for c in row.strip().strip("|").split("|")]
                if len(cells) >= len(wanted):
                    out.append(dict(zip(columns, cells)))
            return out
    return []


def bandit_verdicts(path: str) -> list[dict]:
    """The (claim, reading, verdict) rows of the verdict table in ``verdict.md``; [] if it has none."""
    return markdown_rows(path, ("claim", "reading", "verdict"))


def bandit_facts(calibration: str, verdict_md: str | None, missing: list[str]) -> dict:
    d = _read_json(calibration)
    if "stiffness" not in d or "p_star" not in d:
        raise InputError(f"{calibration}: no 'stiffness' or 'p_star'")
    windows = [w.get("stiffness") for w in d.get("stiffness_by_window") or [] if isinstance(w, dict)]
    windows = [k for k in map(_num, windows) if k is not None]
    facts = {"rewards": [_num(r) for r in d.get("rewards") or []], "beta": _num(d.get("beta")),
             "p_star": _num(d["p_star"]), "K": _num(d["stiffness"]),
             "window": [_num(w) for w in (d.get("window") or [None, None])][:2],
             "K_windows": [min(windows), max(windows)] if windows else None, "verdicts": []}
    if verdict_md:
        if not Path(verdict_md).is_file():
            missing.append(f"bandit verdicts ({verdict_md}: no such file)")
        else:
            facts["verdicts"] = bandit_verdicts(verdict_md)
            if not facts["verdicts"]:
                missing.append(f"bandit verdicts (no 'claim | reading | verdict' table in {verdict_md})")
    return facts


def model_facts(model_dir: str) -> dict:
    d = _read_json(str(Path(model_dir) / "warmstart.json"))
    held = d.get("heldout") or {}
    return {"name": Path(model_dir).name, "parameters": _num(d.get("parameters")), "sampled": _num(held.get("sampled")),
            "greedy": _num(held.get("greedy")), "temperature": _num(held.get("temperature")), "n": _num(held.get("n"))}


_RUN_PATH = re.compile(r"([^/]+)/G(\d+)/seed(\d+)/[^/]+$")


def train_facts(log_csv: str) -> dict:
    """One run's train reward: mean over the first and the last tenth of its optimizer steps (step >= 1)."""
    import pandas as pd

    m = _RUN_PATH.search(Path(log_csv).as_posix())
    if not m:
        raise InputError(f"{log_csv}: cannot tell model, G and seed "
                         "(expected .../{model}/G{G}/seed{seed}/log.csv)")
    if not Path(log_csv).is_file():
        raise InputError(f"{log_csv}: no such file")
    frame = pd.read_csv(log_csv)
    if "reward" not in frame.columns or "step" not in frame.columns:
        raise InputError(f"{log_csv}: no 'step' and 'reward' columns")
    trained = frame[(frame["step"] >= 1) & frame["reward"].notna()].sort_values("step")
    if trained.empty:
        raise InputError(f"{log_csv}: no optimizer step with a reward")
    reward = trained["reward"].to_numpy(float)
    tenth = max(1, len(reward) // 10)
    first, last = float(reward[:tenth].mean()), float(reward[-tenth:].mean())
    return {"model": m.group(1), "G": int(m.group(2)), "seed": int(m.group(3)), "steps": int(trained["step"].max()),
            "first": first, "last": last, "rise": last - first}


def table1_facts(summary_csv: str) -> list[dict]:
    import pandas as pd

    if not Path(summary_csv).is_file():
        raise InputError(f"{summary_csv}: no such file")
    frame = pd.read_csv(summary_csv)
    needed = ["benchmark", "n_problems", "metric", "model", "column", "mean", "sd", "n", "mark"]
    absent = [c for c in needed if c not in frame.columns]
    if absent:
        raise InputError(f"{summary_csv}: no column(s) {absent}")
    return [{"benchmark": str(r.benchmark), "n_problems": int(r.n_problems), "metric": str(r.metric),
             "model": str(r.model), "column": str(r.column), "mean": _num(r.mean), "sd": _num(r.sd), "n": int(r.n),
             "mark": str(r.mark)} for r in frame.itertuples(index=False)]


def fit_facts(fits_json: str, law: str = "three_phase") -> list[dict]:
    d = _read_json(fits_json)
    model = str(d.get("model") or Path(fits_json).parent.name)
    groups = d.get("groups") or {}
    columns = list(dict.fromkeys(c for g in groups.values() for c in (g.get("columns") or {})))
    out = []
    for column in columns:
        for G in sorted(groups, key=lambda g: -int(g)):
            record = (groups[G].get("columns") or {}).get(column)
            if record is None:
                continue
            ceiling = record.get("noise_ceiling")
            keys = ("r2_ceiling", "completions_per_step", "n_seeds", "noise_sd", "rise")
            out.append({
                "model": model, "G": int(G), "column": column, "n_points": int(record.get("n_points") or 0),
                "r2": _num((record.get("r2_seed_mean") or {}).get(law)), "summary": str(record.get("summary") or ""),
                "ceiling": {k: _num(ceiling.get(k)) for k in keys} if isinstance(ceiling, dict) else None,
            })
    return out


def diagnostics_facts(verdicts_json: str) -> list[dict]:
    d = _read_json(verdicts_json)
    out = []
    for name, records in (d.get("diagnostics") or {}).items():
        for r in records or []:
            out.append({"diagnostic": str(name), "model": str(r.get("model")),
                        "G": int(r["G"]) if r.get("G") is not None else None,
                        "verdict": str(r.get("verdict")), "reason": str(r.get("reason") or "")})
    return out


_EXPONENT = re.compile(r"\*\*Exponent of Var\(p\) about its own mean\*\*: (\S+) ± (\S+) \((\d+)% interval "
                       r"\[(\S+), (\S+)\].*?between the two largest G: (-?\d+(?:\.\d+)?|nan)")


def finite_g_facts(md: str) -> dict:
    """The finite-G bandit (``results/bandit/finite_g.md``, rule bandit_finite_g): the exponent of Var(p) about its
    own mean against G with its s.e. and interval, the slope between the two largest G, a verdict per claim."""
    if not Path(md).is_file():
        raise InputError(f"{md}: no such file")
    m = _EXPONENT.search(Path(md).read_text())
    verdicts = [{"claim": r["claim"], "verdict": r["verdict"]} for r in markdown_rows(md, ("claim", "verdict"))]
    if not m and not verdicts:
        raise InputError(f"{md}: neither the exponent line nor a 'claim | verdict' table")
    numbers = [_num(float(x)) for x in m.groups()] if m else [None] * 6
    return {"exponent": numbers[0], "exponent_se": numbers[1],
            "level": numbers[2] / 100 if numbers[2] is not None else None, "interval": numbers[3:5],
            "last_pair": numbers[5], "verdicts": verdicts}


def kref_sweep_facts(summary_json: str) -> dict:
    """The deep-network K_ref sweep (``results/kref_sweep/summary.json``, rule kref_sweep): K from the baseline, the
    runs that agree with Theorem 7, and each run's regime."""
    d = _read_json(summary_json)
    agreement = d.get("agreement") or {}
    keys = ("run", "eta", "k_ref", "label", "predicted", "agrees", "k_eta_k_ref", "zeta")

    def run_fact(r: dict) -> dict:
        return {k: (r.get(k) if k in ("run", "label", "predicted", "agrees") else _num(r.get(k))) for k in keys}

    runs = [run_fact(r) for r in d.get("runs") or []]
    arms = []
    for name, arm in (d.get("arms") or {}).items():  # per optimizer arm: its own K, fit and agreement
        stiffness, counted = arm.get("stiffness") or {}, arm.get("agreement") or {}
        arms.append({"arm": str(name), "optimizer": str(arm.get("optimizer", name)), "baseline": str(arm.get("baseline")),
                     "K": _num(stiffness.get("K")), "r2": _num(stiffness.get("r2")),
                     "relative_se": _num(stiffness.get("relative_se")), "measured": arm.get("measured"),
                     "agree": _num(counted.get("agree")), "judged": _num(counted.get("judged")),
                     "runs": [{**run_fact(r), "map_eta": _num(r.get("map_eta", r.get("eta")))}
                              for r in arm.get("runs") or []]})
    return {"K": _num((d.get("stiffness") or {}).get("K")), "baseline": str(d.get("baseline")), "mu": _num(d.get("mu")),
            "agree": _num(agreement.get("agree")), "judged": _num(agreement.get("judged")), "runs": runs,
            "arms": arms, "jobs": [str(j) for j in d.get("jobs") or []]}  # every job of the sweep (arm/run, baselines too)


def _job_seconds(tsv: Path) -> float | None:
    """The wall-clock seconds of one job from its Snakemake benchmark file (column ``s``)."""
    try:
        with open(tsv) as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        return _num(rows[-1]["s"]) if rows else None
    except (OSError, KeyError, ValueError):
        return None


def timing_facts(benchmarks_dir: str, model_dirs: Sequence[str], logs: Sequence[str],
                 eval_jsons: Sequence[str], kref_runs: Sequence[str] = ()) -> list[dict]:
    """Per stage: the number of jobs and their wall-clock seconds (min, max, sum) from ``results/benchmarks``; only
    the jobs of the given inputs (a stale file of another configuration is not counted)."""
    root = Path(benchmarks_dir)
    stages: dict[str, list[Path]] = {
        "symbolic": [root / "verify_symbolic.tsv"],
        "bandit": sorted(root.glob("bandit_*.tsv")),
        "tiny model": [root / "build_tiny_model" / f"{Path(d).name}.tsv" for d in model_dirs],
        "train": [root / "train" / f"{m.group(1)}/G{m.group(2)}/seed{m.group(3)}.tsv"
                  for m in (_RUN_PATH.search(Path(p).as_posix()) for p in logs) if m],
        "evaluate": [root / "evaluate" / Path(*Path(p).parts[-3:]).with_suffix(".tsv") for p in eval_jsons],
        "kref sweep": [root / "kref_sweep" / f"{name}.tsv" for name in kref_runs],
    }
    out = []
    for stage, files in stages.items():
        seconds = [s for s in (_job_seconds(f) for f in files if f.is_file()) if s is not None]
        if seconds:
            out.append({"stage": stage, "jobs": len(seconds), "min_s": min(seconds), "max_s": max(seconds),
                        "total_s": sum(seconds)})
    return out


def cost_facts(summary_json: str) -> dict:
    """The run's cost table's totals (``pgrpo job-costs --json``): jobs, job-seconds, critical path, cores, the
    least wall-clock on them, the run's elapsed wall-clock and the three costliest rules."""
    data = _read_json(summary_json)
    keys = ("jobs", "job_seconds", "critical_path_seconds", "critical_path_jobs", "cores",
            "wall_lower_bound_seconds", "elapsed_seconds")
    missing = [k for k in keys if k not in data]
    if missing:
        raise InputError(f"{summary_json}: no {', '.join(missing)}")
    return {**{k: data[k] for k in keys}, "jobs_run": data.get("jobs_run"),
            "rules": [{k: r[k] for k in ("rule", "jobs", "seconds", "share")} for r in data.get("rules", [])[:3]]}


#: the forecast benchmark's text columns (every other column is a number, empty when not scored)
_TEXT_COLUMNS = {"curve", "part", "split", "column", "method", "success", "mixture", "message",
                 "fell_back_to_persistence"}


def _cell_value(column: str, value: str) -> Any:
    if column in _TEXT_COLUMNS:
        return value
    try:
        return float(value) if value != "" else float("nan")
    except ValueError:
        return value


#: the forecaster's scores against the truth (the true mean or the denoised reference) a fact quotes per cell: the
#: median mean-curve and plateau error ratios to persistence over the curves whose truth moves after the cut, the
#: share of true plateaus inside the 80% interval, the share of curves whose truth moves, and the sweeps' decision
#: scores (pairs ordered right by the forecast and by the level at the cut, the Brier score of P(top), the stop
#: rule's share of steps saved and its largest loss over the reward range, and the most any stop rule deciding at
#: the cut could save, :func:`pgrpo.fit.decisions.steps_saved_ceiling`); None where the file has no such column
TRUTH_FACTS = ("moving_mean_rmse_ratio", "moving_plateau_error_ratio", "plateau_covered80", "truth_moves",
               "pairs_right", "pairs_right_at_cut", "brier", "steps_saved", "stop_loss_share", "pairs",
               "steps_saved_ceiling")


def forecast_facts(benchmark_csv: str, fraction: float = TARGET_FRACTION) -> list[dict]:
    """The forecaster at ``fraction`` per corpus part and split (``results/forecast/benchmark.csv``, rule
    forecast_benchmark): its median RMSE ratio to persistence, the noise floor, the best baseline and its ratio, the
    ratio to it, the 80% and 95% coverage, the tail-mean oracle's and the hindsight cubic's ratios, the CRPS ratio to
    persistence, and the plateau error (in the early window's noise s.d.) of the forecaster, persistence and the best
    baseline; its scores against the truth (:data:`TRUTH_FACTS`, the truth's kind, the number of sweeps) and the
    hindsight cubic's, and where the part's curves are generated, the true family's fitted to the early window (None
    elsewhere), and the best early-window forecast chosen per curve in hindsight (the bounds' ``hindsight_*``,
    ``family_*`` and ``panel_*`` keys of :func:`pgrpo.fit.truth_targets.truth_cell`). A generated family's own cell (``part: family``) is left
    out; the workflow's runs scored against their other seeds' mean (``workflow: other seeds' mean``) are in."""
    path = Path(benchmark_csv)
    if not path.is_file():
        raise InputError(f"forecast benchmark {benchmark_csv}: no such file")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("part", "split", "fraction", "method", "success", "rmse", "rmse_ratio")
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"forecast benchmark {benchmark_csv}: no column '{missing[0]}'")
        records = [{k: _cell_value(k, v) for k, v in row.items()} for row in reader]
    rows = [r for r in records if r["method"] != "all" and r["success"] == "True"
            and abs(float(r["fraction"]) - fraction) < 1e-9]
    if not rows:
        raise InputError(f"forecast benchmark {benchmark_csv}: no scored row at f = {fraction}")
    summary = summarize(rows)
    by_cell = {(r["part"], r["split"], r["method"]): r for r in summary}
    out = []
    for (part, split, method), r in by_cell.items():
        if method != "forecaster" or (": " in part and not part.endswith(f": {SEEDS_TRUTH}")):
            continue  # a generated family's own cell stays in benchmark.md; the other seeds' truth is quoted
        best = r.get("best_baseline")
        oracle = by_cell.get((part, split, ORACLE), {})
        hindsight = by_cell.get((part, split, HINDSIGHT), {})
        bounds = {k: v for k, v in truth_cell(by_cell, part, split, method, HINDSIGHT, FAMILY_ORACLE, PANEL).items()
                  if k.startswith(("hindsight_", "family_", "panel_"))}
        out.append({"part": part, "split": split, "curves": r["curves"], "rmse_ratio": _num(r["rmse_ratio"]),
                    "noise_floor_ratio": _num(r.get("noise_floor_ratio")), "best_baseline": best,
                    "best_baseline_ratio": _num(by_cell.get((part, split, best), {}).get("rmse_ratio")),
                    "ratio_to_best_baseline": _num(r["ratio_to_best_baseline"]),
                    "coverage80": _num(r["coverage80"]), "coverage95": _num(r["coverage95"]),
                    "oracle_ratio": _num(oracle.get("rmse_ratio")),
                    "hindsight_ratio": _num(hindsight.get("rmse_ratio")), "crps_ratio": _num(r.get("crps_ratio")),
                    "plateau_error": _num(r.get("plateau_abs_error_noise")),
                    "persistence_plateau_error": _num(
                        by_cell.get((part, split, "persistence"), {}).get("plateau_abs_error_noise")),
                    "best_baseline_plateau_error": _num(
                        by_cell.get((part, split, best), {}).get("plateau_abs_error_noise")),
                    **{key: _num(r.get(key)) for key in TRUTH_FACTS},
                    **_recalibration_facts(r),
                    "truth_kind": r.get("truth_kind") or None, "sweeps": _num(r.get("sweeps")),
                    **bounds,
                    "fraction": fraction})
    return in_part_order(out)


def _recalibration_facts(row: Mapping[str, Any]) -> dict[str, Any]:
    """The calibration bound of a cell (:func:`pgrpo.fit.recalibration.with_recalibration`): the level one
    recalibration for the whole split would read the forecaster's predictive at to bring this cell within the target,
    its coverage there, the split's other cells then outside it (``[part, coverage]`` pairs), and whether none is;
    None where the cell has no such reading (the overall rows)."""
    if "recalibrated_level" not in row:
        return {"recalibrated_level": None, "recalibrated_coverage": None, "recalibrated_out": None,
                "recalibrated_reach": None}
    return {"recalibrated_level": _num(row.get("recalibrated_level")),
            "recalibrated_coverage": _num(row.get("recalibrated_coverage")),
            "recalibrated_out": [[str(name), _num(value)] for name, value in row.get("recalibrated_out") or []],
            "recalibrated_reach": bool(row.get("recalibrated_reach"))}


def diagnose_benchmark_facts(summary_csv: str) -> list[dict]:
    """The diagnose benchmark's counts per split, rule set and mode (``results/diagnose_benchmark/summary.csv``, rule
    diagnose_benchmark)."""
    path = Path(summary_csv)
    if not path.is_file():
        raise InputError(f"diagnose benchmark {summary_csv}: no such file")
    out = []
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = ("split", "rule_set", "mode", "covered", "logs", "tp", "fp", "fn", "tn", "onset_ok", "onset_n")
        missing = [c for c in fields if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"diagnose benchmark {summary_csv}: no column '{missing[0]}'")
        for row in reader:
            out.append({"split": row["split"], "rule_set": row["rule_set"], "mode": row["mode"],
                        "covered": row["covered"] == "True",
                        **{k: int(float(row[k])) for k in ("logs", "tp", "fp", "fn", "tn", "onset_ok", "onset_n")}})
    return out


#: the fields of a live-benchmark record the pages quote (rule live_benchmark, results/live_benchmark/summary.json)
LIVE_BENCHMARK_FIELDS = ("split", "rule_set", "mode", "covered", "logs", "failed", "detected", "stopped", "timed",
                         "median_latency", "median_latency_reads", "median_latency_share", "latency_met", "healthy",
                         "false_alarms", "false_stops", "false_stop_met", "saved_share", "reward_lost")


def live_benchmark_facts(summary_json: str) -> dict:
    """The live benchmark's records per split, rule set and mode and its replay settings
    (``results/live_benchmark/summary.json``, rule live_benchmark); the wall-clock cost per read is left out."""
    data = _read_json(summary_json)
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise InputError(f"live benchmark {summary_json}: no 'records' list")
    records = []
    for record in data["records"]:
        missing = [k for k in LIVE_BENCHMARK_FIELDS if k not in record]
        if missing:
            raise InputError(f"live benchmark {summary_json}: a record has no '{missing[0]}'")
        records.append({k: record[k] for k in LIVE_BENCHMARK_FIELDS})
    settings = data.get("settings") or {}
    return {"records": records, "logs_per_split": dict(data.get("logs_per_split") or {}),
            "every": settings.get("every"), "forecast_every": settings.get("forecast_every"),
            "blind_batch": settings.get("blind_batch")}


def collect_facts(symbolic_json: str | None = None, calibration_json: str | None = None,
                  bandit_verdict_md: str | None = None, model_dirs: Sequence[str] = (), logs: Sequence[str] = (),
                  table1_summary_csv: str | None = None, fits_jsons: Sequence[str] = (),
                  diagnostics_json: str | None = None, eval_jsons: Sequence[str] = (),
                  benchmarks_dir: str | None = None, forecast_benchmark_csv: str | None = None,
                  diagnose_benchmark_csv: str | None = None, finite_g_md: str | None = None,
                  kref_sweep_json: str | None = None, figures: Sequence[str] = (),
                  live_benchmark_json: str | None = None, job_costs_json: str | None = None) -> dict[str, Any]:
    """The facts of the README's summary and the results pages from the given result files; a file that cannot be
    read is named under ``missing`` (its section is left out) rather than stopping the run. Then how far a rerun
    reproduces each section, the seed spread of the train reward's rise, and the headline numbers with their
    spread."""
    missing: list[str] = []
    facts: dict[str, Any] = {"symbolic": None, "bandit": None, "models": [], "train": [], "table1": [], "fits": [],
                             "diagnostics": [], "finite_g": None, "kref_sweep": None, "forecast": [],
                             "diagnose_benchmark": [], "live_benchmark": None, "timings": [], "costs": None,
                             "figures": [], "missing": missing}

    def attempt(what: str, func, *args):
        try:
            return func(*args)
        except (InputError, OSError, ValueError, KeyError, TypeError) as exc:
            missing.append(f"{what} ({one_line(exc)})")
            return None

    if symbolic_json:
        facts["symbolic"] = attempt("symbolic verification", symbolic_facts, symbolic_json)
    if calibration_json:
        facts["bandit"] = attempt("bandit calibration", bandit_facts, calibration_json, bandit_verdict_md, missing)
    facts["models"] = [f for d in model_dirs if (f := attempt(f"warm start of {d}", model_facts, d))]
    facts["train"] = [f for p in logs if (f := attempt(f"train log {p}", train_facts, p))]
    if table1_summary_csv:
        facts["table1"] = attempt("Table 1", table1_facts, table1_summary_csv) or []
    facts["fits"] = [row for p in fits_jsons for row in (attempt(f"fits {p}", fit_facts, p) or [])]
    if diagnostics_json:
        facts["diagnostics"] = attempt("diagnostics", diagnostics_facts, diagnostics_json) or []
    if forecast_benchmark_csv:
        facts["forecast"] = attempt("forecast benchmark", forecast_facts, forecast_benchmark_csv) or []
    if diagnose_benchmark_csv:
        facts["diagnose_benchmark"] = attempt("diagnose benchmark", diagnose_benchmark_facts,
                                              diagnose_benchmark_csv) or []
    if live_benchmark_json:
        facts["live_benchmark"] = attempt("live benchmark", live_benchmark_facts, live_benchmark_json)
    if finite_g_md:
        facts["finite_g"] = attempt("finite-G bandit", finite_g_facts, finite_g_md)
    if kref_sweep_json:
        facts["kref_sweep"] = attempt("K_ref sweep", kref_sweep_facts, kref_sweep_json)
    if benchmarks_dir:
        kref = facts["kref_sweep"] or {}
        kref_runs = kref.get("jobs") or [r["run"] for r in kref.get("runs") or []]
        facts["timings"] = timing_facts(benchmarks_dir, model_dirs, logs, eval_jsons, kref_runs)
    if job_costs_json:
        facts["costs"] = attempt("job costs", cost_facts, job_costs_json)
    facts["figures"] = attempt("figures", figure_facts, list(figures), missing) or []
    facts["train_rise"] = train_rise_facts(facts["train"])
    facts["reproducibility"] = reproducibility_facts(facts)
    facts["headlines"] = headline_facts(facts)
    return json.loads(json.dumps(facts, allow_nan=False))  # plain JSON, as the committed copy will read back


#: the layout of a run's folder (rule readme_numbers) and of the docs (``pgrpo readme update``)
RUN_FIGURES = "figures"
DOCS_PAGES = {"results": "results.md", "benchmarks": "benchmarks.md"}
DOCS_FIGURES = "results"


def run_readme_numbers(out_md: str, out_json: str, out_results_md: str | None = None,
                       out_benchmarks_md: str | None = None, figures_dir: str | None = None,
                       **inputs: Any) -> dict[str, Any]:
    """Write the facts (``out_json``), the README block made from them (``out_md``, markers included), the results
    pages and the figures they show (by default ``results.md``, ``benchmarks.md`` and ``figures/`` beside
    ``out_md``). Returns the facts. ``inputs``: the arguments of :func:`collect_facts`."""
    facts = collect_facts(**inputs)
    folder = Path(out_md).parent
    pages = {"results": out_results_md or str(folder / DOCS_PAGES["results"]),
             "benchmarks": out_benchmarks_md or str(folder / DOCS_PAGES["benchmarks"])}
    write_pages(facts, pages, figures_dir or str(folder / RUN_FIGURES))
    write_json(out_json, facts)
    write_text(out_md, render_block(facts))
    return facts


def _block_of(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} {path}: no such file")
    text = p.read_text()
    try:
        start, end = find_block(text)
    except ValueError as exc:
        raise InputError(f"{what} {path}: {exc}") from None
    return text[start:end]


def _docs(readme: str, docs: str | None) -> tuple[Path, dict[str, str], str]:
    """The docs folder (default: ``docs/`` beside the README), its pages and its figures' folder."""
    root = Path(docs) if docs else Path(readme).parent / "docs"
    return root, {name: str(root / page) for name, page in DOCS_PAGES.items()}, str(root / DOCS_FIGURES)


def _run_facts(summary_md: str) -> dict[str, Any]:
    """A run's facts: the ``numbers.json`` beside its summary, whose block must be the generator's for them."""
    path = Path(summary_md).parent / FACTS_NAME
    facts = read_json(path, "the run's facts")
    errors = block_errors(_block_of(summary_md, "summary"), facts)
    if errors:
        raise InputError(f"summary {summary_md}: {errors[0]}")
    return facts


def run_readme_update(readme: str, summary_md: str | None = None, docs: str | None = None) -> None:
    """From a run (``summary_md``: rule readme_numbers' ``results/readme/summary.md``, with ``numbers.json`` and
    ``figures/`` beside it) write its facts to ``docs/results/numbers.json``, its pages to ``docs/results.md`` and
    ``docs/benchmarks.md``, its figures to ``docs/results/`` and its block into ``readme``. Without a summary,
    re-render the block and the pages from the committed facts (after a change of the generator's wording)."""
    root, pages, figures = _docs(readme, docs)
    if summary_md:
        facts = _run_facts(summary_md)
        run_figures = Path(summary_md).parent / RUN_FIGURES
        sources = {f["name"]: str(run_figures / f["name"]) for f in facts.get("figures") or []}
    else:
        facts = read_json(Path(figures) / FACTS_NAME, "the committed facts")
        sources = {f["name"]: str(Path(figures) / f["name"]) for f in facts.get("figures") or []}
    text = Path(readme).read_text() if Path(readme).is_file() else ""
    try:
        new_readme = replace_block(text, render_block(facts))
    except ValueError as exc:
        raise InputError(f"README {readme}: {exc}") from None
    write_pages(facts, pages, figures, sources, with_facts=True)
    write_text(readme, new_readme)


def _differing(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    return [key for key in sorted(set(ours) | set(theirs)) if (ours.get(key) or None) != (theirs.get(key) or None)]


def run_readme_check(readme: str, summary_md: str | None = None, docs: str | None = None) -> list[str]:
    """What is wrong with the README's results block and the docs' results pages: not exactly the generator's text
    for the committed facts (``docs/results/numbers.json``), a figure that is not the facts', or (given a run's
    summary) committed facts other than that run's. Empty: the README and the docs quote the results."""
    _, pages, figures = _docs(readme, docs)
    try:
        facts = read_json(Path(figures) / FACTS_NAME, "the committed facts")
    except InputError as exc:
        return [f"{exc}; run `pgrpo readme update {readme} results/readme/summary.md`"]
    if not Path(readme).is_file():
        return [f"{readme}: no such file"]
    errors = [f"README {readme}: {e}" for e in block_errors(Path(readme).read_text(), facts)]
    errors += pages_errors(facts, pages, figures)
    if summary_md:
        try:
            theirs = _run_facts(summary_md)
        except InputError as exc:
            return errors + [str(exc)]
        if theirs != facts:
            errors.append(f"the committed facts ({Path(figures) / FACTS_NAME}) are not those of {summary_md} "
                          f"(differs in: {', '.join(_differing(facts, theirs))}); run `pgrpo readme update {readme} "
                          f"{summary_md}`")
    return errors
