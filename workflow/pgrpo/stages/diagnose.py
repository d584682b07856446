"""Stages ``diagnostics`` (the workflow's runs, Figures 2-5) and ``diagnose`` (any TRL log): read the logs,
metadata and fits, run :mod:`pgrpo.diagnose` (the four read-outs of Figures 2-5 and the failure modes of
:mod:`pgrpo.diagnose.modes`), write the verdicts, the one-page summary and the figures atomically.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pgrpo.atomic import read_json
from pgrpo.diagnose.columns import KNOWN_COLUMNS, apply_aliases, frame_from_aggregate
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.readouts.report import DiagnosisReport, DiagnosticsReport, diagnose_curves, diagnose_runs
from pgrpo.diagnose.settings import DiagnosticsConfig, diagnostics_config
from pgrpo.errors import InputError
from pgrpo.stages.logs import read_run_log, resolve_log_path, split_run


def read_aggregate(path: str, model: str | None = None, G: int | None = None,
                   meta: dict[str, Any] | None = None) -> RunCurves:
    """One ``results/aggregate/{model}/G{G}.csv`` as RunCurves (model and G from the path unless given)."""
    from pgrpo.stages.fit import parse_aggregate_path

    if model is None or G is None:
        parsed_model, parsed_G = parse_aggregate_path(path)
        model, G = model or parsed_model, G or parsed_G
    if not Path(path).is_file():
        raise InputError(f"aggregate file not found: {path}")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise InputError(f"aggregate file {path} is not a readable CSV: {str(error).splitlines()[0]}") from None
    if "step" not in frame.columns:
        raise InputError(f"aggregate file {path} has no 'step' column")
    return RunCurves(model, int(G), frame_from_aggregate(frame), str(path), meta)


def read_log(path: str, allow_non_finite: bool = False) -> RunCurves:
    """Any run's log as RunCurves: our ``log.csv``, a TRL/W&B CSV (``train/...``, ``eval/...``), an aggregate CSV,
    a TRL ``trainer_state.json`` (``log_history``), a bare log_history list, or a TRL output folder
    (:func:`pgrpo.stages.logs.read_run_log`). InputError for an unreadable file or no known column; NaN/infinite
    values raise too unless ``allow_non_finite`` (then :attr:`RunCurves.non_finite` lists their steps)."""
    file = resolve_log_path(path)
    try:
        frame = read_run_log(path, allow_non_finite=allow_non_finite)
    except InputError:
        raise
    except (UnicodeDecodeError, ValueError, OSError) as error:
        raise InputError(f"log {path} is not a readable CSV, trainer_state.json or console log: "
                         f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    non_finite = dict(frame.attrs.get("non_finite") or {})
    frame, sources = apply_aliases(frame)
    known = [c for c in KNOWN_COLUMNS if c in frame.columns and np.isfinite(frame[c].to_numpy(float)).any()]
    if not known:
        found = [c for c in frame.columns if c != "step"]
        shown = ", ".join(found[:25]) + (f", ... ({len(found)} in all)" if len(found) > 25 else "")
        raise InputError(f"log {path} has no recognisable column (looked for {', '.join(KNOWN_COLUMNS)} with or "
                         f"without a train/ or eval/ prefix; found: {shown or 'none'})")
    model = file.parent.name if file.name in ("trainer_state.json", "log.csv") else file.stem
    model = split_run(path)[1] or model  # a run of a W&B export goes by its run's name
    match = re.search(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed\d+/[^/]+$", file.resolve().as_posix())
    G = int(match["G"]) if match else None
    if match:
        model = match["model"]
    for name, source in sources.items():  # non-finite steps under the workflow's names
        if source != name and source in non_finite:
            non_finite[name] = non_finite.pop(source)
    return RunCurves(model, G, frame, str(path), None, {c: sources.get(c, c) for c in known}, non_finite)


def read_metas(meta_jsons: Sequence[str] | None) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (model, G): the first seed's ``meta.json`` (eta, mu, k_ref, ...); model/G from the file, else its path
    ``.../{model}/G{G}/seed{seed}/meta.json``."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for path in meta_jsons or []:
        meta = read_json(path, "run metadata")
        match = re.search(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed\d+/[^/]+$", Path(path).resolve().as_posix())
        model = meta.get("model") or (match["model"] if match else None)
        G = meta.get("G") or (int(match["G"]) if match else None)
        if model is None or G is None:
            raise InputError(f"run metadata {path} names no model/G and is not under <model>/G<G>/seed<seed>/")
        for key in ("eta", "mu", "k_ref"):
            if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], (int, float))):
                raise InputError(f"run metadata {path}: '{key}' must be a number, got {meta[key]!r}")
        out.setdefault((str(model), int(G)), meta)
        if match:
            out.setdefault((match["model"], int(match["G"])), meta)
    return out


def read_fits(fit_jsons: Sequence[str] | None) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (model, G): ``{column: FitResult}`` of the three-phase law from ``pgrpo.stages.fit.run_fit``'s JSON."""
    from pgrpo.fit.laws import THREE_PHASE
    from pgrpo.fit.least_squares import FitResult

    out: dict[tuple[str, int], dict[str, Any]] = {}
    for path in fit_jsons or []:
        payload = read_json(path, "fit JSON")
        if "model" not in payload or not isinstance(payload.get("groups"), dict):
            raise InputError(f"fit JSON {path} has no 'model'/'groups' (expected the output of pgrpo fit)")
        for G, group in payload["groups"].items():
            for column, record in (group.get("columns") or {}).items():
                data = (record.get("fits") or {}).get(THREE_PHASE)
                if data:
                    out.setdefault((str(payload["model"]), int(G)), {})[column] = FitResult.from_dict(data)
    return out


def run_diagnostics(
    aggregate_csvs: Sequence[str],
    out_json: str,
    out_md: str,
    out_dir_figures: str | None = None,
    meta_jsons: Sequence[str] | None = None,
    fit_jsons: Sequence[str] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
) -> DiagnosticsReport:
    """Figures 2-5 for every model: ``aggregate_csvs`` are ``results/aggregate/{model}/G{G}.csv`` (any models, any
    G); ``meta_jsons`` the runs' ``meta.json`` (for Prop. 9); ``fit_jsons`` the fitting stage's JSONs (their
    three-phase fits are reused; anything missing is fitted here); ``diagnostics`` the config section.

    Writes ``out_json`` (every number, verdict and plotted series), ``out_md`` (one section per diagnostic, one line
    per (model, G)), and, if ``out_dir_figures`` is given, ``figure2..figure5`` as ``.pdf`` and ``.png`` there.
    """
    from pgrpo.atomic import write_json, write_text

    config = diagnostics_config(diagnostics)
    if not aggregate_csvs:
        raise InputError("no aggregate CSV given to diagnose")
    if len(set(map(str, aggregate_csvs))) != len(aggregate_csvs):
        raise InputError("an aggregate CSV is listed twice")
    metas = read_metas(meta_jsons)
    fits = read_fits(fit_jsons)
    runs: list[RunCurves] = []
    for path in aggregate_csvs:
        curves = read_aggregate(str(path))
        twin = next((r for r in runs if (r.model, r.G) == (curves.model, curves.G)), None)
        if twin is not None:
            raise InputError(f"two aggregate files for {curves.model} G={curves.G}: {twin.source} and {path}")
        curves.meta = metas.get((curves.model, curves.G))
        runs.append(curves)
    report = diagnose_runs(runs, config, fits)
    report.inputs = {"aggregates": [str(p) for p in aggregate_csvs], "meta": [str(p) for p in meta_jsons or []],
                     "fits": [str(p) for p in fit_jsons or []]}
    if out_dir_figures:
        from pgrpo.figures.diagnostics import write_figures

        write_figures(report, runs, out_dir_figures)
    from pgrpo.tables.diagnosis import modes_section

    data = report.to_dict()
    write_json(out_json, data)
    write_text(out_md, report.to_markdown(modes_section=modes_section(data["modes"])))
    return report


def log_curves(path: str, meta: Mapping[str, Any] | None, G: int | None,
               allow_non_finite: bool = False) -> RunCurves:
    """One run's log (:func:`read_log`) with what ``meta`` (a ``meta.json``) and ``G`` add: the curves the
    diagnostics read."""
    curves = read_log(path, allow_non_finite)
    if meta:
        curves.meta = dict(meta)
        if meta.get("G") and curves.G is None:
            curves.G = int(meta["G"])
        if meta.get("model"):
            curves.model = str(meta["model"])
    if G is not None:
        curves.G = int(G)
    eta = logged_learning_rate(curves.frame)
    if eta is not None and not (curves.meta or {}).get("eta"):  # TRL logs the learning rate at every step
        curves.meta = {**(curves.meta or {}), "eta": eta, "eta_source": "the log's learning_rate (median)"}
    return curves


def logged_learning_rate(frame: pd.DataFrame) -> float | None:
    """The run's eta as its log says it (TRL and transformers log ``learning_rate`` at every step): the median of
    its positive values, None where the log has none. A warm-up or a decaying schedule makes this the typical step,
    which is what Theorem 7's constant-eta reading can use."""
    if "learning_rate" not in frame:
        return None
    values = pd.to_numeric(frame["learning_rate"], errors="coerce").to_numpy(float)
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.median(values)) if len(values) else None


def diagnose_log(path: str, meta: Mapping[str, Any] | None = None, config: DiagnosticsConfig | None = None,
                 G: int | None = None) -> DiagnosisReport:
    """The four diagnostics for one run's log (any of the formats :func:`read_log` reads). ``meta``: the run's
    ``meta.json`` content (model, G, eta, mu, k_ref) if known; ``G`` overrides. The across-G part of mode collapse
    needs several runs and is not part of a single log's diagnosis."""
    return diagnose_curves(log_curves(path, meta, G), config or DiagnosticsConfig())


def diagnose_section(diagnostics: Mapping[str, Any] | None, rules: str | None = None,
                     max_completion_length: int | None = None,
                     reward_range: Sequence[float] | None = None, gold_reward: str | None = None) -> dict[str, Any]:
    """The ``diagnostics`` section with the command line's choices merged into ``modes`` and ``reward_hacking``
    (validated later)."""
    section = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (diagnostics or {}).items()}
    modes = dict(section.get("modes") or {})
    if rules is not None:
        modes["rule_set"] = rules
    if reward_range is not None:
        modes["reward_range"] = list(reward_range)
    if max_completion_length is not None:
        modes["truncation"] = dict(modes.get("truncation") or {}, max_completion_length=max_completion_length)
    if modes:
        section["modes"] = modes
    if gold_reward is not None:
        section["reward_hacking"] = dict(section.get("reward_hacking") or {}, gold_reward=gold_reward)
    return section


def run_diagnose(
    log_path: str,
    out_json: str | None = None,
    out_md: str | None = None,
    meta_json: str | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    G: int | None = None,
    out_dir_figures: str | None = None,
    out_dir: str | None = None,
    rules: str | None = None,
    max_completion_length: int | None = None,
    reward_range: Sequence[float] | None = None,
    allow_non_finite: bool = False,
    settings: Mapping[str, Any] | None = None,
    gold_reward: str | None = None,
) -> DiagnosisReport:
    """``pgrpo diagnose LOG``: :func:`diagnose_log` with the config section validated and ``meta_json`` read first.

    Writes, each only when given: ``out_json`` (the verdicts: ``summary``, ``modes``, the Figures 2-5 read-outs),
    ``out_md`` (the one-page summary in Markdown), ``figure2..5`` and ``modes`` (.pdf, .png) in ``out_dir_figures``;
    ``out_dir`` gets all of them: ``verdicts.json``, ``summary.md``, ``summary.html`` and the figures. ``rules``
    (``ours``/``toolkit``), ``max_completion_length`` and ``reward_range`` override ``diagnostics.modes``,
    ``gold_reward`` ``diagnostics.reward_hacking``;
    ``settings`` (``eta``, ``mu``, ``k_ref``: ``--lr --beta1 --k-ref``) override the meta's, for Theorem 7;
    ``allow_non_finite`` reads NaN/infinite values as a divergence instead of refusing the log. Returns the report
    (:func:`summary_text` is what to print)."""
    from pgrpo.atomic import write_json, write_text

    config = diagnostics_config(diagnose_section(diagnostics, rules, max_completion_length, reward_range,
                                                 gold_reward))
    if G is not None and (isinstance(G, bool) or not isinstance(G, int) or G < 1):
        raise InputError(f"G must be an integer >= 1, got {G!r}")
    meta = read_json(meta_json, "run metadata") if meta_json else None
    if settings:
        meta = {**(meta or {}), **dict(settings)}
    curves = log_curves(log_path, meta, G, allow_non_finite)
    report = diagnose_curves(curves, config)
    figures: list[str] = []
    for folder in dict.fromkeys(f for f in (out_dir_figures, out_dir) if f):
        from pgrpo.figures.diagnostics import write_figures
        from pgrpo.figures.modes import write_modes_figure

        Path(folder).mkdir(parents=True, exist_ok=True)
        figures = write_modes_figure(curves, report.to_dict(), str(Path(folder) / "modes"))
        figures += write_figures(DiagnosticsReport(report.results, [report.model],
                                                   {report.model: [report.G] if report.G else []}, report.config),
                                 [curves], folder)
    data = report.to_dict()
    if out_json:
        write_json(out_json, data)
    if out_md:
        write_text(out_md, summary_text(report, figures))
    if out_dir:
        from pgrpo.tables.diagnosis import summary_html

        write_json(Path(out_dir) / "verdicts.json", data)
        write_text(Path(out_dir) / "summary.md", summary_text(report, figures))
        write_text(Path(out_dir) / "summary.html", summary_html(data, figures, _body(report)))
    return report


def _body(report: DiagnosisReport) -> str:
    text = report.to_markdown()
    return text.split("\n", 1)[1].lstrip() if text.startswith("# ") else text


def summary_text(report: DiagnosisReport, figures: Sequence[str] = ()) -> str:
    """The one-page summary of a diagnosis in Markdown: verdict, modes table, figures, the Figures 2-5 read-outs."""
    from pgrpo.tables.diagnosis import summary_markdown

    return summary_markdown(report.to_dict(), figures, "## Figures 2-5 read-outs\n\n" + _body(report))
