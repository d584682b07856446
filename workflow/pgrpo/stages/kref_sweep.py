"""Stages of the deep-network K_ref sweep (Section 5.6 "Scope"), per optimizer arm (heavy-ball SGD, the map (3) of
Theorem 7; Adam against its measured effective step):

- ``kref_grid`` (a Snakemake checkpoint): K measured on the arm's baseline run (Eq. 14, :mod:`pgrpo.fit.kref_sweep`)
  and, when it counts as measured, the (learning rate, K_ref) grid that brackets Theorem 7's predictions; else the
  grid is empty and says why (the arm's sweep stops there).
- ``kref_sweep``: every arm's runs classified against Theorem 7 with its K; per arm a table (CSV, Markdown), a JSON
  summary and the figure (:mod:`pgrpo.figures.kref_sweep`) beside its grid, and the verdict of both arms with the
  sweep's job-seconds (Snakemake benchmark files) in the top-level table.

The runs themselves are ordinary ``pgrpo train`` runs of the sweep's model with the sweep's and the arm's training
overrides: :func:`sweep_training` builds their ``training`` section from the config.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pgrpo.atomic import read_json, write_csv, write_json, write_text
from pgrpo.errors import InputError
from pgrpo.figures.kref_sweep import kref_sweep_figure
from pgrpo.figures.style import save_pdf_png
from pgrpo.fit.kref_sweep import (
    COLLAPSED,
    GRID_ROWS,
    StiffnessEstimate,
    SweepRun,
    agreement,
    beyond_threshold,
    bracketing_grid,
    classify_run,
    eta_frontiers,
    measure_stiffness,
    stiffness_problem,
)
from pgrpo.stages.logs import read_run_log
from pgrpo.tables.render import markdown_table

#: how TRL realises a refresh interval of ``K_ref`` optimizer steps (with gradient_accumulation_steps = 1)
REFRESH_KNOBS: tuple[str, ...] = ("num_iterations", "steps_per_generation")


def sweep_training(training: Mapping[str, Any], sweep: Mapping[str, Any], learning_rate: float,
                   k_ref: int) -> dict[str, Any]:
    """The ``training`` section of one sweep run: the workflow's, the sweep's overrides, its eta and K_ref.

    K_ref is set through ``sweep.refresh`` (``num_iterations``: one generation batch is reused K_ref times;
    ``steps_per_generation``: one generation serves K_ref optimizer steps), with gradient_accumulation_steps = 1 so
    that K_ref = steps_per_generation x num_iterations / gradient_accumulation_steps (Eq. 3's refresh interval).
    ``checkpoint_steps`` is rounded up to a multiple of K_ref (training requires it, so that a resumed run refreshes
    on the same steps). ``sweep.min_generations``: a run logs its reward only on the steps that generate (one in
    K_ref), so ``max_steps`` is raised to at least ``min_generations x K_ref`` for the curve to have that many points.
    """
    knob = sweep.get("refresh", "num_iterations")
    if knob not in REFRESH_KNOBS:
        raise InputError(f"kref_sweep.refresh must be one of {', '.join(REFRESH_KNOBS)}, got {knob!r}")
    out = copy.deepcopy(dict(training))
    for key, value in (sweep.get("training") or {}).items():
        out[key] = copy.deepcopy(value)
    out["learning_rate"] = float(learning_rate)
    out["gradient_accumulation_steps"] = 1
    out["num_iterations"] = int(k_ref) if knob == "num_iterations" else 1
    out["steps_per_generation"] = int(k_ref) if knob == "steps_per_generation" else 1
    out["merge_adapters"] = False
    generations = sweep.get("min_generations")
    if generations:
        out["max_steps"] = max(int(out.get("max_steps") or 0), int(generations) * int(k_ref))
    every = int(out.get("checkpoint_steps") or 50)  # a resumed run must refresh on the same steps: a multiple of K_ref
    out["checkpoint_steps"] = -(-every // int(k_ref)) * int(k_ref)
    return out


ARMS: tuple[str, ...] = ("sgd", "adam")


def arm_sweep_section(sweep: Mapping[str, Any], arm: str, baseline: bool = False) -> dict[str, Any]:
    """The ``kref_sweep`` section one run of ``arm`` trains with: its ``training`` overrides are the sweep's, then the
    arm's (``optimizer`` = the arm), then, for the baseline, the arm's ``baseline.training``; a grid run also carries
    ``min_generations`` (:func:`sweep_training`)."""
    arms = sweep.get("arms") or {}
    if arm not in arms:
        raise InputError(f"kref_sweep.arms: no arm {arm!r} (has {', '.join(arms) or 'none'})")
    spec = arms[arm] or {}
    training = {**(sweep.get("training") or {}), **(spec.get("training") or {}), "optimizer": arm}
    if baseline:
        training.update((spec.get("baseline") or {}).get("training") or {})
    section = {"refresh": sweep.get("refresh", "num_iterations"), "training": training}
    if sweep.get("min_generations") and not baseline:  # the baseline (K_ref = 1) keeps its own max_steps
        section["min_generations"] = int(sweep["min_generations"])
    return section


def _load_run(log_path: str, meta_path: str) -> SweepRun:
    meta = read_json(meta_path, "sweep run meta.json")
    for key in ("eta", "mu", "k_ref"):
        if not isinstance(meta.get(key), (int, float)):
            raise InputError(f"sweep run {meta_path}: meta.json lacks a number '{key}'")
    frame = read_run_log(log_path, allow_non_finite=True)  # a ratio that overflowed reads as missing
    if "reward" not in frame.columns:
        raise InputError(f"sweep run {log_path}: no 'reward' column")
    trained = frame[frame["step"] >= 1]

    def column(name):
        return trained[name].to_numpy(float) if name in trained.columns else None

    name = f"{Path(log_path).parent.parent.name}/{Path(log_path).parent.name}"
    return SweepRun(name, float(meta["eta"]), float(meta["k_ref"]), float(meta["mu"]),
                    trained["step"].to_numpy(np.int64), trained["reward"].to_numpy(float),
                    column("importance_sampling_ratio_max"), column("effective_learning_rate"),
                    str(meta.get("optimizer", "adam")))


def _number(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def _percent(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{100 * value:.0f}%" if abs(value) >= 0.1 else f"{100 * value:.2g}%"


def _stiffness_record(estimate: StiffnessEstimate) -> dict[str, Any]:
    record = dict(estimate.__dict__, relative_se=estimate.relative_se)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}


def run_kref_grid(arm: str, log_csv: str, meta_json: str, out_json: str, sweep: Mapping[str, Any]) -> dict[str, Any]:
    """K from the arm's baseline and the grid that brackets Theorem 7 (or none, and why); writes ``out_json``."""
    run = _load_run(log_csv, meta_json)
    quality = sweep.get("baseline_fit") or {}
    grid_spec = sweep.get("grid") or {}
    smoothing = int(sweep.get("smoothing", 9))
    estimate = measure_stiffness(run, smoothing=smoothing)
    problem = stiffness_problem(estimate, float(quality.get("min_r2", 0.8)),
                                float(quality.get("max_relative_se", 0.25)))
    out: dict[str, Any] = {"arm": arm, "optimizer": run.optimizer, "baseline": run.name, "mu": run.mu,
                           "stiffness": _stiffness_record(estimate), "measured": not problem, "message": problem,
                           "eta_per_learning_rate": run.map_eta / run.eta, "cells": []}
    if not problem:
        span = tuple(float(v) for v in grid_spec.get("span", (0.1, 10.0)))
        rows = [row for row in GRID_ROWS if row in grid_spec.get("rows", ("zeta1", "threshold", "top"))]
        grid = bracketing_grid(estimate.K, run.mu, grid_spec.get("k_refs", (1, 3, 9)), span, rows,
                               run.map_eta / run.eta, baseline_learning_rate=run.eta,
                               baseline_k_ref=int(run.k_ref))
        out.update(rows=rows, learning_rates=list(grid.learning_rates), etas=list(grid.etas), k_refs=list(grid.k_refs),
                   span=list(grid.span), threshold_k_refs=list(grid.threshold_k_refs),
                   zeta1_k_refs=list(grid.zeta1_k_refs),
                   cells=[{"learning_rate": lr, "k_ref": k, "run": f"lr{lr:g}_kref{k}"} for lr, k in grid.cells])
    write_json(out_json, out)
    return out


def _job_seconds(benchmarks: Path | None, arm: str, run: str) -> float | None:
    """Wall-clock seconds of one job from its Snakemake benchmark file (column ``s``), None when absent."""
    path = benchmarks / arm / f"{run}.tsv" if benchmarks else None
    if path is None or not path.is_file():
        return None
    frame = pd.read_csv(path, sep="\t")
    return float(frame["s"].iloc[-1]) if "s" in frame.columns and len(frame) else None


def _arm_report(grid: Mapping[str, Any], grid_json: str, smoothing: int, noise_multiple: float,
                benchmarks: Path | None) -> dict[str, Any]:
    """One arm: its runs classified, its table, summary and figure written beside its grid.json."""
    folder = Path(grid_json).parent
    arm, K = str(grid["arm"]), float((grid["stiffness"] or {}).get("K") or "nan")
    K = K if grid.get("measured") else float("nan")
    runs = [_load_run(str(folder / c["run"] / "log.csv"), str(folder / c["run"] / "meta.json"))
            for c in grid.get("cells") or []]
    regimes = sorted((classify_run(r, K, smoothing=smoothing, noise_multiple=noise_multiple) for r in runs),
                     key=lambda r: (r.eta, r.k_ref))
    mu = float(grid["mu"])
    agree, judged = agreement(regimes)
    frontiers = eta_frontiers(regimes, K, mu)
    collapsed_past, past = beyond_threshold(regimes)
    seconds = {name: _job_seconds(benchmarks, arm, name)
               for name in ["baseline"] + [c["run"] for c in grid.get("cells") or []]}
    summary = {"arm": arm, "optimizer": grid.get("optimizer"), "baseline": grid["baseline"], "mu": mu,
               "stiffness": grid["stiffness"], "measured": grid.get("measured"), "message": grid.get("message"),
               "span": grid.get("span"), "rows": grid.get("rows"), "agreement": {"agree": agree, "judged": judged},
               "frontiers": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                              for k, v in f.__dict__.items()} for f in frontiers],
               "beyond_threshold": {"collapsed": collapsed_past, "cells": past},
               "job_seconds": {"jobs": seconds, "total": sum(v for v in seconds.values() if v is not None)},
               "runs": [r.as_dict() for r in regimes]}
    write_json(folder / "summary.json", summary)
    write_csv(folder / "table.csv", pd.DataFrame([r.as_dict() for r in regimes]))
    lines = _arm_lines(summary, regimes, frontiers, smoothing, noise_multiple)
    write_text(folder / "table.md", "\n".join(lines) + "\n")
    if runs:
        save_pdf_png(kref_sweep_figure(runs, regimes, K, mu, smoothing), str(folder / "figure.pdf"),
                     str(folder / "figure.png"))
    summary["lines"] = lines
    summary["figure_runs"] = (runs, regimes, K)
    return summary


_ARM_TITLE = {"sgd": "heavy-ball SGD (torch.optim.SGD, momentum mu: the map (3) of Theorem 7)",
              "adam": "Adam (beta1 = mu), read against its measured effective step"}


_ROW_TEXT = {"baseline": "the baseline's own learning rate, stable at K_ref = 1; its own cell not trained again",
             "zeta1": "Eq. 10's zeta = 1 between the first two K_ref", "threshold": "Prop. 9's threshold between the "
             "last two K_ref", "top": "the span's top at the last K_ref"}


def _rows_text(rows) -> str:
    """The grid's learning-rate rows in words, and why a left-out ``top`` row costs no classifiable cell."""
    if not rows:
        return ""
    text = "Rows: " + "; ".join(f"{row} ({_ROW_TEXT.get(row, row)})" for row in rows) + "."
    if "top" not in rows:
        text += (" The top row is not trained (grid.rows): once span[1] exceeds the ladder's ratio every cell of it "
                 "lies past the threshold, so it would add no classifiable cell, only collapses.")
    return text


def _arm_lines(summary, regimes, frontiers, smoothing, noise_multiple) -> list[str]:
    st, arm, mu = summary["stiffness"], summary["arm"], summary["mu"]
    eta_word = "eta" if arm == "sgd" else "effective eta = (1 - beta1) lr / sqrt(v_hat), measured,"
    head = [f"## Arm `{arm}`: {_ARM_TITLE.get(arm, arm)}", ""]
    fit_line = (f"Baseline `{summary['baseline']}` (learning rate {_number(st.get('learning_rate'))}, {eta_word} "
                f"{_number(st.get('eta'))}, K_ref = 1): Eq. 14 gives lambda = {_number(st.get('rate'), 4)} ± "
                f"{_number(st.get('rate_se'), 2)} per step, R² = {_number(st.get('r2'))} against its "
                f"{smoothing}-step mean; K = {_number(st.get('K'), 4)} ± {_number(st.get('K_se'), 2)} (relative "
                f"s.e. {_number(100 * (st.get('relative_se') or math.nan), 2)}%), mu = {mu:g}.")
    if not summary["measured"]:
        return head + [fit_line, "", f"**K could not be measured**: {summary['message']}. The sweep of this arm "
                       "stopped at its baseline (no grid trained)."]
    span = summary.get("span") or [math.nan, math.nan]
    headers = ["learning rate", "eta (map 3)", "K_ref", "observed", "crossings", "K eta K_ref / (1-mu)",
               "zeta (Eq. 10)", "Theorem 7", "predicted overshoot / tolerance", "agrees",
               "IS ratio max (median / max)", "start -> end"]
    rows = [[f"{r.eta:g}", _number(r.map_eta), f"{r.k_ref:g}", r.label, str(r.crossings),
             _number(r.k_eta_k_ref / (1 - mu)), _number(r.zeta), r.predicted,
             f"{_percent(r.predicted_overshoot)} / {_percent(r.tolerance)}",
             {True: "yes", False: "**no**", None: "–"}[r.agrees],
             f"{_number(r.is_ratio_max_median, 4)} / {_number(r.is_ratio_max_max, 4)}",
             f"{_number(r.start)} -> {_number(r.target)}"] for r in regimes]
    f_rows = [[f"{f.learning_rate:g}", _number(f.eta), _number(f.zeta1_k_ref), _number(f.threshold_k_ref),
               _number(f.predicted_k_ref), _number(f.observed_k_ref), f.status,
               {True: "yes", False: "**no**", None: "–"}[f.agrees]] for f in frontiers]
    agree, judged = summary["agreement"]["agree"], summary["agreement"]["judged"]
    collapsed_past, past = summary["beyond_threshold"]["collapsed"], summary["beyond_threshold"]["cells"]
    rows_text = _rows_text(summary.get("rows"))
    lines = head + [fit_line, "", f"Grid: K eta K_ref from {_number(span[0], 2)} to {_number(span[1], 2)} times "
                    f"1 - mu = {1 - mu:g} (Prop. 9's threshold) as placed from the baseline's eta; each cell is read "
                    f"with its own. {rows_text + ' ' if rows_text else ''}A run's regime is read from its train "
                    f"reward ({smoothing}-step centred mean; ringing under {noise_multiple:g} standard errors "
                    "ignored).", "",
                    markdown_table(headers, rows).rstrip("\n"), "",
                    "First non-monotone K_ref per learning rate (as the bandit's verdict reads its rows):", "",
                    markdown_table(["learning rate", "eta", "zeta = 1 at K_ref", "Prop. 9 threshold K_ref",
                                    "predicted first", "observed first", "row", "agrees"], f_rows).rstrip("\n"), "",
                    f"**Agreement with Theorem 7 ({arm})**: {agree} of {judged} classifiable cells; rows whose first "
                    f"non-monotone K_ref matches: {sum(f.agrees is True for f in frontiers)} of "
                    f"{sum(f.agrees is not None for f in frontiers)}; past the threshold {collapsed_past} of {past} "
                    "cells collapsed."]
    lines += _reading_lines(regimes, frontiers, mu)
    base_eta = st.get("eta")
    drift = [r for r in regimes if math.isfinite(r.map_eta)]
    if arm != "sgd" and drift and base_eta:
        lo, hi = min(drift, key=lambda r: r.map_eta), max(drift, key=lambda r: r.map_eta)
        lines.append(f"- The measured effective eta per learning rate moved from the baseline's "
                     f"{base_eta / st['learning_rate']:.3g} to {lo.map_eta / lo.eta:.3g} (lr {lo.eta:g}, K_ref "
                     f"{lo.k_ref:g}) .. {hi.map_eta / hi.eta:.3g} (lr {hi.eta:g}, K_ref {hi.k_ref:g}): the cells "
                     "land at K eta K_ref other than where the grid placed them (the table reads each at its own).")
    seconds = summary["job_seconds"]
    lines.append("")
    lines.append(f"Cost: {len([v for v in seconds['jobs'].values() if v is not None])} jobs, "
                 f"{seconds['total']:.0f} job-seconds (baseline and grid).")
    return lines


def _cell(r, mu: float) -> str:
    return f"lr {r.eta:g} K_ref {r.k_ref:g} (x/x* = {r.k_eta_k_ref / (1 - mu):.2g}, zeta = {_number(r.zeta, 2)})"


def _reading_lines(regimes, frontiers, mu: float) -> list[str]:
    """Where the deep network follows the exact reduction and where it departs, per row and per cell, with numbers
    (x/x* = K eta K_ref / (1 - mu); a departure says whether Theorem 7's overshoot was resolvable in that run)."""
    lines = ["", "Reading (x/x* = K eta K_ref / (1 - mu); Prop. 9's threshold at x/x* = 1):", ""]
    for f in frontiers:
        verdict = {True: "follows Theorem 7", False: "**departs**", None: "not readable"}[f.agrees]
        if f.status == "censored" and f.agrees:
            read = [r.k_ref for r in regimes if r.eta == f.learning_rate and r.label in ("monotone", "overshoot",
                                                                                       "oscillatory", COLLAPSED)]
            verdict = (f"consistent, not tested: monotone up to K_ref {max(read):g}, the last readable cell, "
                       "before the predicted frontier")
        onset = ("has zeta < 1 at every K_ref" if f.zeta1_k_ref == 0
                 else f"puts zeta = 1 at K_ref {_number(f.zeta1_k_ref)}")
        lines.append(f"- Row lr {f.learning_rate:g} (median eta {_number(f.eta)}): Eq. 10 {onset} and Prop. 9 the "
                     f"threshold at K_ref {_number(f.threshold_k_ref)}; the "
                     f"first non-monotone K_ref of the ladder is predicted at {_number(f.predicted_k_ref)}, observed "
                     f"at {_number(f.observed_k_ref)} ({f.status}): {verdict}.")
    follows = [r for r in regimes if r.agrees is True]
    if follows:
        lines.append("- Follows (observed = predicted): " + "; ".join(
            f"{_cell(r, mu)} {r.label}" for r in follows) + ".")
    for r in (r for r in regimes if r.agrees is False):
        if r.label == "monotone":
            why = (f"Theorem 7's overshoot of {_percent(r.predicted_overshoot)} of the rise is "
                   + ("under" if r.overshoot_resolvable is False else "over")
                   + f" the run's tolerance of {_percent(r.tolerance)}"
                   + (": too small to be seen in this run" if r.overshoot_resolvable is False
                      else ": a departure the run could have shown"))
        else:
            why = f"it rings ({r.crossings} crossings, overshoot {_percent(r.overshoot)}) where Eq. 10 is overdamped"
        lines.append(f"- **Departs**: {_cell(r, mu)} is {r.label}, Theorem 7 says {r.predicted}; {why}.")
    collapsed = [r for r in regimes if r.label == COLLAPSED]
    past = [r for r in collapsed if r.margin < 0]
    below = [r for r in collapsed if not r.margin < 0]
    if past:
        lines.append("- Collapsed past the threshold (Prop. 9's divergence as the bounded network realises it, not "
                     "counted): " + "; ".join(_cell(r, mu) for r in past) + ".")
    if below:
        lines.append("- Collapsed below the threshold (a nonlinear failure the linear model does not describe, not "
                     "counted): " + "; ".join(_cell(r, mu) for r in below) + ".")
    other = [r for r in regimes if r.agrees is None and r.label != COLLAPSED]
    if other:
        lines.append("- Not classifiable: " + "; ".join(f"{_cell(r, mu)} {r.label}" for r in other) + ".")
    resolvable = [r for r in regimes if r.agrees is not None
                  and (r.predicted == "monotone" or r.overshoot_resolvable is True or r.label != "monotone")]
    lines.append(f"- Counting only cells where the prediction was resolvable (predicted monotone, or a predicted "
                 f"overshoot above the run's tolerance, or observed ringing): {sum(bool(r.agrees) for r in resolvable)} "
                 f"of {len(resolvable)} agree.")
    return lines


def run_kref_sweep(grid_jsons: Sequence[str], out_csv: str, out_md: str, out_json: str, out_png: str | None = None,
                   out_pdf: str | None = None, smoothing: int = 9, noise_multiple: float = 2.0,
                   benchmarks_dir: str | None = None) -> dict[str, Any]:
    """Every arm's runs (listed in its grid.json, beside it) classified against Theorem 7 with its K; the per-arm
    outputs beside each grid.json and the verdict of all arms in ``out_*``. The top-level ``baseline``,
    ``stiffness``, ``mu``, ``agreement`` are the first arm's (the primary, heavy-ball SGD); ``runs`` and ``jobs`` name
    every arm's (``arm/run``)."""
    if not grid_jsons:
        raise InputError("kref sweep: give at least one grid.json")
    benchmarks = Path(benchmarks_dir) if benchmarks_dir else None
    arms = [_arm_report(read_json(g, "kref sweep grid.json"), g, smoothing, noise_multiple, benchmarks)
            for g in grid_jsons]
    figures = [a.pop("figure_runs") for a in arms]
    sections = [a.pop("lines") for a in arms]
    primary = arms[0]
    frame = pd.concat([pd.DataFrame(a["runs"]).assign(arm=a["arm"]) for a in arms if a["runs"]] or [pd.DataFrame()])
    write_csv(out_csv, frame)
    total = sum(a["job_seconds"]["total"] for a in arms)
    summary = {"baseline": f"{primary['arm']}/{primary['baseline'].split('/')[-1]}", "stiffness": primary["stiffness"],
               "mu": primary["mu"], "agreement": primary["agreement"], "smoothing": smoothing,
               "noise_multiple": noise_multiple, "arms": {a["arm"]: a for a in arms},
               "runs": [dict(r, run=f"{a['arm']}/{r['run'].split('/')[-1]}", arm=a["arm"]) for a in arms
                        for r in a["runs"]],
               "jobs": [f"{a['arm']}/{name}" for a in arms for name in a["job_seconds"]["jobs"]],
               "job_seconds": total}
    write_json(out_json, summary)
    verdict = ["# The deep-network K_ref sweep (Section 5.6, Scope)", "",
               "Theorem 7 is about the heavy-ball map (3): the primary arm trains with heavy-ball SGD, the Adam arm "
               "beside it is read against its measured effective step. Per arm: K from a baseline whose reward rises "
               "clearly (Eq. 14), a grid chosen from that K to bracket Prop. 9's threshold and Eq. 10's zeta = 1, and "
               "each cell's regime against Theorem 7 (collapsed and flat cells apart, outside the linear model).", "",
               "| arm | K (baseline) | R² | classifiable cells agreeing | rows: first non-monotone K_ref matches | "
               "collapsed past the threshold | job-seconds |", "|---|---|---|---|---|---|---|"]
    for a in arms:
        st, fr = a["stiffness"], a["frontiers"]
        k_text = _number(st.get("K"), 4) if a["measured"] else f"not measured ({a['message']})"
        verdict.append(f"| {a['arm']} | {k_text} | {_number(st.get('r2'))} | {a['agreement']['agree']} of "
                       f"{a['agreement']['judged']} | {sum(f['agrees'] is True for f in fr)} of "
                       f"{sum(f['agrees'] is not None for f in fr)} | {a['beyond_threshold']['collapsed']} of "
                       f"{a['beyond_threshold']['cells']} | {a['job_seconds']['total']:.0f} |")
    verdict += ["", f"The sweep's cost: {total:.0f} job-seconds over {len(summary['jobs'])} jobs.", ""]
    for a, lines in zip(arms, sections):
        verdict += lines + ["", f"(`{Path(grid_jsons[arms.index(a)]).parent}/table.md`, `figure.png`)", ""]
    write_text(out_md, "\n".join(verdict))
    if out_png or out_pdf:
        from pgrpo.figures.kref_sweep import kref_sweep_arms_figure

        save_pdf_png(kref_sweep_arms_figure([(a["arm"], *f, a["mu"]) for a, f in zip(arms, figures)], smoothing),
                     out_pdf, out_png)
    return summary
