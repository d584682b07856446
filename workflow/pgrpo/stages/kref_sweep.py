"""Stage ``kref_sweep`` (the deep-network K_ref sweep, Section 5.6 "Scope"): read every sweep run's ``log.csv`` and
``meta.json``, measure K on the baseline, classify each run (:mod:`pgrpo.fit.kref_sweep`), and write the table
(CSV, Markdown), a JSON summary and the figure (:mod:`pgrpo.figures.kref_sweep`).

The runs themselves are ordinary ``pgrpo train`` runs of the sweep's model with the sweep's training overrides:
:func:`sweep_training` builds their ``training`` section from the config.
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
from pgrpo.fit.kref_sweep import COLLAPSED, SweepRun, agreement, baseline_of, classify_run, measure_stiffness
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
    on the same steps).
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
    every = int(out.get("checkpoint_steps") or 50)  # a resumed run must refresh on the same steps: a multiple of K_ref
    out["checkpoint_steps"] = -(-every // int(k_ref)) * int(k_ref)
    return out


def _load_run(log_path: str, meta_path: str) -> SweepRun:
    meta = read_json(meta_path, "sweep run meta.json")
    for key in ("eta", "mu", "k_ref"):
        if not isinstance(meta.get(key), (int, float)):
            raise InputError(f"sweep run {meta_path}: meta.json lacks a number '{key}'")
    frame = read_run_log(log_path, allow_non_finite=True)  # a ratio that overflowed reads as missing
    if "reward" not in frame.columns:
        raise InputError(f"sweep run {log_path}: no 'reward' column")
    trained = frame[frame["step"] >= 1]
    ratio = (trained["importance_sampling_ratio_max"].to_numpy(float)
             if "importance_sampling_ratio_max" in trained.columns else None)
    name = Path(log_path).parent.name
    return SweepRun(name, float(meta["eta"]), float(meta["k_ref"]), float(meta["mu"]),
                    trained["step"].to_numpy(np.int64), trained["reward"].to_numpy(float), ratio)


def _number(value: float, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def run_kref_sweep(log_csvs: Sequence[str], meta_jsons: Sequence[str], out_csv: str, out_md: str, out_json: str,
                   out_png: str | None = None, out_pdf: str | None = None, smoothing: int = 9,
                   noise_multiple: float = 2.0) -> dict[str, Any]:
    """Classify every run of the sweep against Theorem 7 with K measured on the baseline; write the outputs."""
    if len(log_csvs) != len(meta_jsons) or not log_csvs:
        raise InputError("kref sweep: give one meta.json per log.csv (and at least one run)")
    runs = [_load_run(log, meta) for log, meta in zip(log_csvs, meta_jsons)]
    baseline = baseline_of(runs)
    stiffness = measure_stiffness(baseline, smoothing=smoothing)
    mu = baseline.mu
    regimes = [classify_run(run, stiffness.K, smoothing=smoothing, noise_multiple=noise_multiple) for run in runs]
    regimes.sort(key=lambda r: (r.eta, r.k_ref))
    frame = pd.DataFrame([r.as_dict() for r in regimes])
    write_csv(out_csv, frame)
    agree, judged = agreement(regimes)
    summary = {"baseline": baseline.name, "stiffness": stiffness.__dict__, "mu": mu, "smoothing": smoothing,
               "noise_multiple": noise_multiple, "agreement": {"agree": agree, "judged": judged},
               "runs": [r.as_dict() for r in regimes]}
    write_json(out_json, summary)
    headers = ["eta", "K_ref", "observed", "crossings", "K eta K_ref", "(1-mu) - K eta K_ref", "zeta (Eq. 10)",
               "Theorem 7", "agrees", "IS ratio max (median / max)", "start -> end"]
    rows = [[f"{r.eta:g}", f"{r.k_ref:g}", r.label, str(r.crossings), _number(r.k_eta_k_ref), _number(r.margin),
             _number(r.zeta), r.predicted, {True: "yes", False: "**no**", None: "–"}[r.agrees],
             f"{_number(r.is_ratio_max_median, 4)} / {_number(r.is_ratio_max_max, 4)}",
             f"{_number(r.start)} -> {_number(r.target)}"] for r in regimes]
    k_line = (f"K = {stiffness.K:.4g} from the baseline `{baseline.name}` (eta = {baseline.eta:g}, K_ref = "
              f"{baseline.k_ref:g}): Eq. 14 fitted to its train reward gives lambda = {_number(stiffness.rate, 4)} "
              f"± {_number(stiffness.rate_se, 2)} per step (R² = {_number(stiffness.r2)}), inverted with mu = {mu:g} "
              f"(Adam beta1)." if math.isfinite(stiffness.K) else f"K could not be measured: {stiffness.message}.")
    departures = [r for r in regimes if r.agrees is False]
    collapsed = [r for r in regimes if r.label == COLLAPSED]
    lines = ["# The deep-network K_ref sweep (Section 5.6, Scope)", "", k_line, "",
             f"Prop. 9's threshold K eta K_ref = 1 - mu = {1 - mu:g}. A run's regime is read from its train reward "
             f"({smoothing}-step centred mean; ringing smaller than {noise_multiple:g} standard errors of that mean is "
             "ignored), as the bandit stage reads Figure 7's cells.", "",
             markdown_table(headers, rows).rstrip("\n"), "",
             f"**Agreement with Theorem 7**: {agree} of {judged} classifiable runs."]
    if departures:
        lines.append("Where the deep network departs from the exact reduction: " + "; ".join(
            f"eta = {r.eta:g}, K_ref = {r.k_ref:g} is {r.label} where Theorem 7 says {r.predicted}"
            for r in departures) + ".")
    if collapsed:
        lines.append("Collapsed runs (the reward falls below its start, which the linear model of Theorem 7 does not "
                     "describe): " + "; ".join(f"eta = {r.eta:g}, K_ref = {r.k_ref:g} (K eta K_ref = "
                                               f"{r.k_eta_k_ref:.3g}, Prop. 9 margin {r.margin:.3g})"
                                               for r in collapsed) + ".")
        inside = [r for r in collapsed if r.margin > 0]
        if inside:
            lines.append(f"{len(inside)} of them collapsed where Prop. 9 calls the dynamics stable (margin > 0): "
                         "with Adam the step is not eta times the gradient (Section 3.1 reads mu as Adam's beta1 but "
                         "the map (3) is a heavy ball), so the threshold drawn with the learning rate does not bound "
                         "where a deep network fails.")
    write_text(out_md, "\n".join(lines) + "\n")
    if out_png or out_pdf:
        save_pdf_png(kref_sweep_figure(runs, regimes, stiffness.K, mu, smoothing), out_pdf, out_png)
    return summary
