"""Stages of the fit rule group (Section 4.4): ``fit_laws`` over the seed aggregates, ``forecast_run`` per run,
``forecast_summary``; each reads its inputs, calls :mod:`pgrpo.fit` and writes atomically.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from pgrpo.atomic import read_json
from pgrpo.errors import InputError
from pgrpo.figures.fits import figure1
from pgrpo.figures.style import save_pdf_png
from pgrpo.fit.forecast import forecast_curve
from pgrpo.fit.laws import THREE_PHASE, get_law
from pgrpo.fit.least_squares import finite_or_none, none_to_nan
from pgrpo.fit.selection import ModelComparison, binary_noise_ceiling
from pgrpo.fit.settings import FittingConfig, fit_column, fitting_config
from pgrpo.fit.theory_link import link_to_theory
from pgrpo.tables.fits import describe_forecast, fit_report_markdown, fit_table_latex, fmt, title, with_se
from pgrpo.tables.render import latex_table, markdown_table
from pgrpo.tables.table1 import latex_escape

_G_FILE = re.compile(r"^G(\d+)$")


def parse_aggregate_path(path: str | Path) -> tuple[str, int]:
    """``results/aggregate/{model}/G{G}.csv`` -> (model, G)."""
    path = Path(path)
    match = _G_FILE.match(path.stem)
    if not match:
        raise InputError(f"aggregate file {path} is not named G<group size>.csv (expected aggregate/<model>/G<G>.csv)")
    return path.parent.name, int(match.group(1))


def _group_meta(meta_jsons: Sequence[str] | None) -> dict[int, dict[str, Any]]:
    """Per G: the (eta, mu, k_ref) the seeds share, and a note if they disagree."""
    grouped: dict[int, list[dict[str, Any]]] = {}
    for path in meta_jsons or []:
        meta = read_json(path, "run metadata")
        for key in ("G", "eta", "mu", "k_ref"):
            if key not in meta:
                raise InputError(f"run metadata {path} has no key '{key}'")
        grouped.setdefault(int(meta["G"]), []).append({**meta, "_path": str(path)})
    out: dict[int, dict[str, Any]] = {}
    for G, metas in grouped.items():
        first = metas[0]
        differing = [k for k in ("eta", "mu", "k_ref") if any(m[k] != first[k] for m in metas)]
        out[G] = {
            "eta": float(first["eta"]), "mu": float(first["mu"]), "k_ref": float(first["k_ref"]),
            "model": first.get("model"), "seeds": sorted(m.get("seed") for m in metas if m.get("seed") is not None),
            "completions_per_step": _completions_per_step(first),
            "note": (f"seeds differ in {', '.join(differing)}; using {first['_path']}" if differing else ""),
        }
    return out


def _completions_per_step(meta: Mapping[str, Any]) -> int | None:
    """Completions scored per optimizer step: per-device batch x gradient accumulation x processes."""
    try:
        return int(meta["per_device_train_batch_size"]) * int(meta.get("gradient_accumulation_steps", 1)) * int(
            meta.get("num_processes", 1))
    except (KeyError, TypeError, ValueError):
        return None


def run_fit(
    aggregate_csvs: Sequence[str] | Mapping[Any, str],
    out_json: str,
    out_csv: str,
    out_md: str,
    out_tex: str | None = None,
    meta_jsons: Sequence[str] | None = None,
    cfg: Mapping[str, Any] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Fit every configured law to each configured column of one model's seed-averaged curves (one aggregate CSV per
    G), compare the laws, back out ``K`` through Eq. 9 from each G's metadata, and write JSON (everything), CSV
    (one row per G x column x law), Markdown (the table plus the preferred law in words) and LaTeX (the table).

    ``aggregate_csvs``: paths ``aggregate/<model>/G<G>.csv`` or a mapping ``G -> path``; ``meta_jsons``: the runs'
    ``meta.json`` (any seeds, all G), optional; ``cfg``: the ``fitting`` config section. Returns the JSON payload.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from pgrpo.atomic import write_csv, write_json, write_text

    config = fitting_config(cfg)
    if isinstance(aggregate_csvs, Mapping):
        by_G = {int(G): str(path) for G, path in aggregate_csvs.items()}
        model_name = model or Path(next(iter(by_G.values()))).parent.name
    else:
        by_G = {}
        names = set()
        for path in aggregate_csvs:
            name, G = parse_aggregate_path(path)
            if G in by_G:
                raise InputError(f"two aggregate files for G={G}: {by_G[G]} and {path}")
            by_G[G], _ = str(path), names.add(name)
        if len(names) > 1 and model is None:
            raise InputError(f"aggregate files of several models given to one fit: {sorted(names)}")
        model_name = model or (names.pop() if names else "model")
    if not by_G:
        raise InputError("no aggregate CSV given to fit")
    frames: dict[int, Any] = {}
    for G, path in sorted(by_G.items()):
        if not Path(path).is_file():
            raise InputError(f"aggregate file not found: {path}")
        frame = pd.read_csv(path)
        if "step" not in frame.columns:
            raise InputError(f"aggregate file {path} has no 'step' column")
        frames[G] = frame
    for column in config.columns:
        if column.startswith("eval"):
            continue  # eval may be switched off: its fits then say "no eval data"
        if not any(f"{column}_mean" in frame.columns for frame in frames.values()):
            raise InputError(f"column '{column}' (config key fitting.columns) is in none of the aggregate files "
                             f"{', '.join(by_G.values())} (expected '{column}_mean')")
    metas = _group_meta(meta_jsons)

    payload: dict[str, Any] = {
        "model": model_name,
        "config": dataclasses.asdict(config),
        "information_criteria": "AIC = n ln(RSS/n) + 2(k+1); AICc small-sample; BIC = n ln(RSS/n) + (k+1) ln n",
        "groups": {},
    }
    rows: list[dict[str, Any]] = []
    jobs = [(G, column) for G in sorted(frames) for column in config.columns]
    theory_column = "reward" if "reward" in config.columns else config.columns[0]
    for G, column in tqdm(jobs, desc=f"fit {model_name}", leave=False, disable=None):
        frame = frames[G]
        group = payload["groups"].setdefault(str(G), {"aggregate_csv": by_G[G], "columns": {}})
        if f"{column}_mean" in frame.columns:
            steps = frame["step"].to_numpy(float)
            values = frame[f"{column}_mean"].to_numpy(float)
        else:
            steps = values = np.array([])
        result = fit_column(steps, values, config, column)
        comparison: ModelComparison = result["comparison"]
        record = {
            "n_points": result["n_points"],
            "fits": {law: fit.to_dict() for law, fit in result["fits"].items()},
            "r2_seed_mean": finite_or_none(result["r2_seed_mean"]),
            "comparison": comparison.to_dict(),
            "summary": comparison.summary(f"the {column} curve at G={G}"),
        }
        if column == theory_column and G in metas:
            meta = metas[G]
            links = {
                law: link_to_theory(result["fits"][law], meta["eta"], meta["mu"], meta["k_ref"]).to_dict()
                for law in result["fits"]
            }
            group["theory"] = {"column": column, "eta": meta["eta"], "mu": meta["mu"], "k_ref": meta["k_ref"],
                               "note": meta["note"], "links": links}
            three_phase = result["fits"].get(THREE_PHASE)
            binary = values.size and np.nanmin(values) >= 0 and np.nanmax(values) <= 1
            if three_phase is not None and three_phase.success and meta["completions_per_step"] and binary:
                finite = np.isfinite(steps) & np.isfinite(values)
                n_column = f"{column}_n"
                n_seeds = float(np.nanmean(frame.loc[finite, n_column])) if n_column in frame.columns else 1.0
                record["noise_ceiling"] = binary_noise_ceiling(
                    three_phase.predict(steps[finite]), values[finite], meta["completions_per_step"], n_seeds)
        group["columns"][column] = record
        for law, fit in result["fits"].items():
            row = {
                "model": model_name, "G": G, "column": column, "law": law, "success": fit.success,
                "status": fit.status, "n": fit.n, "k": fit.k, "r2": fit.r2,
                "r2_seed_mean": result["r2_seed_mean"].get(law, float("nan")),
                "rss": fit.rss, "aic": fit.aic, "aicc": fit.aicc, "bic": fit.bic,
                "delta_aic": comparison.delta_aic.get(law, float("nan")),
                "delta_bic": comparison.delta_bic.get(law, float("nan")),
                "akaike_weight": comparison.akaike_weights.get(law, float("nan")),
                "preferred_aic": comparison.best_aic == law, "preferred_bic": comparison.best_bic == law,
            }
            for name in ("R0", "R_inf", "omega_n", "lambda", "zeta"):
                row[name] = fit.params.get(name, float("nan"))
                row[f"{name}_se"] = fit.stderr.get(name, float("nan"))
            row["t90"] = fit.derived.get("t90", float("nan"))
            row["message"] = fit.message
            rows.append(row)
    payload["g_invariance"] = _g_invariance(payload, config)

    table = pd.DataFrame(rows)
    write_json(out_json, payload)
    write_csv(out_csv, table)
    write_text(out_md, fit_report_markdown(payload, table))
    if out_tex:
        write_text(out_tex, fit_table_latex(table, model_name))
    return payload


def _g_invariance(payload: Mapping[str, Any], config: FittingConfig) -> list[dict[str, Any]]:
    """Prop. 10 / Section 4.4: the three-phase R_inf and omega_n compared between each pair of G (z-scores)."""
    out = []
    groups = sorted(payload["groups"], key=int)
    for column in config.columns:
        for i, Ga in enumerate(groups):
            for Gb in groups[i + 1:]:
                fa = payload["groups"][Ga]["columns"][column]["fits"][THREE_PHASE]
                fb = payload["groups"][Gb]["columns"][column]["fits"][THREE_PHASE]
                if not (fa["success"] and fb["success"]):
                    continue
                entry: dict[str, Any] = {"column": column, "G_a": int(Ga), "G_b": int(Gb)}
                for name in ("R_inf", "omega_n"):
                    a, b = fa["params"][name], fb["params"][name]
                    sa, sb = fa["stderr"][name], fb["stderr"][name]
                    se = math.sqrt(sa**2 + sb**2) if sa is not None and sb is not None else None
                    entry[f"{name}_difference"] = b - a
                    entry[f"{name}_z"] = (b - a) / se if se else None
                out.append(entry)
    return out


_RUN_PATH = re.compile(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed(?P<seed>\d+)/[^/]+$")


def _run_identity(log_path: str, meta: Mapping[str, Any] | None) -> dict[str, Any]:
    identity: dict[str, Any] = {"model": None, "G": None, "seed": None}
    match = _RUN_PATH.search(Path(log_path).as_posix())
    if match:
        identity = {"model": match["model"], "G": int(match["G"]), "seed": int(match["seed"])}
    for key in identity:
        if meta and meta.get(key) is not None:
            identity[key] = meta[key]
    return identity


def run_forecast(
    log_csv: str,
    out_json: str | None = None,
    fraction: float = 0.25,
    column: str = "reward",
    meta_json: str | None = None,
    out_png: str | None = None,
    law: str = THREE_PHASE,
    out_pdf: str | None = None,
    reward_range: Sequence[float] | None = None,
    batch: float | None = None,
    total_steps: float | None = None,
    settings: Any = None,
    target: float | None = None,
    component_ranges: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Forecast one run from its first ``fraction`` of steps with the forecaster (:func:`pgrpo.fit.forecast.forecast_run`):
    ``forecast`` at every step after the cut with 80%/95% intervals for the logged value, ``plateau`` and ``t90``
    with bands, the mixture of laws, its score against persistence on the part of the log it has seen and (where the
    log goes on) on the rest; the single ``law`` (Eq. 16 by default) fitted to the window and to the whole log is
    kept beside it (``three_phase``), with ``K`` backed out of both through Eq. 9 when ``meta_json`` is given.

    ``log_csv``: any saved log (:func:`pgrpo.stages.logs.read_run_log`: a workflow ``log.csv``, a TRL
    ``trainer_state.json``, a bare ``log_history`` list, a TRL output folder, a CSV of TRL or W&B names).
    ``reward_range``: the reward's declared range (a workflow run's meta.json implies [0, 1]); ``batch``: completions
    per step (from the meta.json if omitted); ``total_steps``: the run's planned length (meta's ``max_steps``, else
    a TRL ``trainer_state.json``'s, else the last logged step); ``target``: also P(plateau >= target) and the step it is reached at (key ``target``).
    A log with two or more reward functions (``rewards/<fn>/mean``) also gets each one forecast with its own range
    and their sum (key ``components``, :mod:`pgrpo.fit.staged`; ``component_ranges``: fn -> (lo, hi) declared).
    Writes ``out_json`` (without it, prints :func:`describe_forecast`) and the figure."""
    from pgrpo.atomic import write_json
    from pgrpo.fit.forecast import forecast_run
    from pgrpo.fit.forecaster import ForecasterSettings, RunContext
    from pgrpo.stages.aggregate import load_log

    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise InputError(f"forecast fraction must be a number in (0, 1], got {fraction!r}")
    get_law(law)
    meta = read_json(meta_json, "run metadata") if meta_json else None
    log = load_log(log_csv)
    if column not in log.columns:
        available = ", ".join(c for c in log.columns if c != "step")
        raise InputError(f"column '{column}' is not in {log_csv} (columns: {available})")
    if reward_range is not None:
        if len(reward_range) != 2 or not float(reward_range[0]) < float(reward_range[1]):
            raise InputError(f"reward range must be two numbers LO < HI, got {list(reward_range)}")
        reward_range = (float(reward_range[0]), float(reward_range[1]))
    elif meta is not None:
        reward_range = (0.0, 1.0)  # the workflow's rewards and accuracies are binary
    if batch is None and meta is not None and column == "reward":
        batch = _completions_per_step(meta)
    if total_steps is None:  # meta.json's max_steps, else the one a TRL trainer_state.json records
        from pgrpo.stages.logs import planned_steps

        total_steps = planned_steps(log_csv, meta)
    steps_all, values_all = log["step"].to_numpy(float), log[column].to_numpy(float)
    eval_series = None
    if column == "reward" and "eval_reward" in log.columns:
        eval_series = (steps_all, log["eval_reward"].to_numpy(float))
    cut_step = fraction * (float(total_steps) if total_steps is not None else float(np.nanmax(steps_all)))
    if eval_series is not None:
        keep = eval_series[0] <= cut_step
        eval_series = (eval_series[0][keep], eval_series[1][keep])
    context = RunContext(reward_range=reward_range, batch=batch,
                         mu=float(meta["mu"]) if meta and meta.get("mu") is not None else None,
                         k_ref=float(meta["k_ref"]) if meta and meta.get("k_ref") is not None else None,
                         eval_series=eval_series)
    result = forecast_run(steps_all, values_all, fraction, total_steps, context, settings or ForecasterSettings(),
                          column, target=target)
    legacy = forecast_curve(steps_all, values_all, fraction, law, total_steps, column)
    payload: dict[str, Any] = {"log": str(log_csv), **_run_identity(log_csv, meta), **result.to_dict(),
                               "method": "forecaster", "reward_range": list(reward_range) if reward_range else None,
                               "batch": batch, "single_law": legacy.to_dict()}
    payload.update(_summary_fields(result, legacy))
    if column == "reward":
        staged = _staged_forecast(log, fraction, total_steps, settings or ForecasterSettings(), component_ranges,
                                  reward_range, target)
        if staged is not None:
            payload["components"] = staged
    if meta is not None and all(k in meta for k in ("eta", "mu", "k_ref")):
        payload["theory_early"] = link_to_theory(legacy.early, float(meta["eta"]), float(meta["mu"]),
                                                 float(meta["k_ref"])).to_dict()
        payload["theory_full"] = link_to_theory(legacy.full, float(meta["eta"]), float(meta["mu"]),
                                                float(meta["k_ref"])).to_dict()
    if out_json:
        write_json(out_json, payload)
    else:
        print(describe_forecast(payload))
        if payload.get("target"):
            t = payload["target"]
            p = none_to_nan(t.get("p_plateau_at_least"))
            print(f"  target {t['target']:g}: P(plateau >= {t['target']:g}) = {p:.2f}; {t['message']}")
        if payload.get("components") and not payload["components"].get("plateau"):
            for note in payload["components"].get("notes", []):
                print(f"  reward functions: {note}")
        elif payload.get("components"):
            c = payload["components"]
            waiting = c.get("waiting") or []
            if waiting:  # the reward alone reads the run as staying where it is: the sum is the one to decide by
                print(f"  {', '.join(waiting)} {'waits' if len(waiting) == 1 else 'wait'} to rise: decide by the sum "
                      "below (pgrpo forecast --compare ranks and stops this run by it)")
            print(f"  reward functions summed ({', '.join(c['functions'])}): plateau {fmt(c['plateau']['mean'])} "
                  f"(80%: {fmt(c['plateau']['lo80'])} to {fmt(c['plateau']['hi80'])})"
                  + (f"; P(plateau >= {target:g}) = {c['p_plateau_at_least']:.2f}" if target is not None
                     and c.get("p_plateau_at_least") is not None else ""))
            for note in c.get("notes", []):
                print(f"  note: {note}")
    if out_png or out_pdf:
        from pgrpo.figures.forecasts import run_forecast_figure

        save_pdf_png(run_forecast_figure(steps_all, values_all, payload, title(payload)), out_pdf, out_png)
    return payload


def check_component_ranges(ranges: Mapping[str, Any], functions: Sequence[str], of: str) -> None:
    """An input error naming the first ``--component-range`` function that is none of ``functions`` (the reward
    functions of ``of``: the log, or any log of a ``--compare``)."""
    unknown = sorted(set(ranges) - set(functions))
    if unknown:
        raise InputError(f"--component-range names '{unknown[0]}', not a reward function of {of} "
                         f"(functions: {', '.join(functions) or 'none'})")


def _staged_forecast(log: pd.DataFrame, fraction: float, total_steps: float | None, settings: Any,
                     component_ranges: Mapping[str, Sequence[float]] | None,
                     reward_range: tuple[float, float] | None, target: float | None = None) -> dict[str, Any] | None:
    """The reward functions' forecasts summed (:func:`pgrpo.fit.staged.forecast_components`), where the log has two
    or more ``rewards/<fn>/mean`` columns (with ``target``: P(summed plateau >= target)); None otherwise."""
    from pgrpo.fit.staged import forecast_logged_components
    from pgrpo.grpo.run_log import reward_function_columns, reward_function_sds

    columns = {fn: log[col].to_numpy(float) for fn, col in reward_function_columns(log.columns).items()}
    ranges = {str(k): (float(v[0]), float(v[1])) for k, v in (component_ranges or {}).items()}
    if len(columns) >= 2:
        check_component_ranges(ranges, list(columns), "the log")
    reward = log["reward"].to_numpy(float) if "reward" in log.columns else None
    staged = forecast_logged_components(log["step"].to_numpy(float), reward, columns, fraction, total_steps,
                                        settings, ranges, reward_range, reward_function_sds(log))
    if staged is None:
        return None
    out = staged.to_dict()
    if target is not None and staged.plateau_draws is not None:
        out["p_plateau_at_least"] = float(np.mean(staged.plateau_draws >= target))
    return out


def _summary_fields(result: Any, legacy: Any) -> dict[str, Any]:
    """The per-run numbers :func:`run_forecast_summary` collects, from the forecaster (plateau, t90, held-out
    RMSE) and the single law's full-run fit."""
    nan = float("nan")
    plateau = result.plateau.get("mean", nan) if result.success else nan
    band = (result.plateau.get("hi80", nan) - result.plateau.get("lo80", nan)) if result.success else nan
    observed = result.plateau_observed
    full = legacy.plateau_full_fit
    rise = observed - (legacy.full.R0 if legacy.full.success else nan)
    t90 = result.t90.get("mean", nan) if result.success else nan
    values = {
        "plateau_forecast": plateau, "plateau_forecast_se": band / (2 * 1.2816),
        "plateau_full_fit": full, "plateau_observed": observed,
        "plateau_error_vs_full_fit": plateau - full, "plateau_error_vs_observed": plateau - observed,
        "plateau_relative_error": (plateau - observed) / rise if rise else nan,
        "t90_forecast": t90, "t90_forecast_se": (result.t90.get("hi80", nan) - result.t90.get("lo80", nan))
        / (2 * 1.2816) if result.success else nan,
        "t90_full_fit": legacy.t90_full_fit, "t90_error": t90 - legacy.t90_full_fit,
        "holdout_rmse": result.held_out.get("rmse", nan), "persistence_rmse": result.held_out.get("persistence_rmse",
                                                                                                  nan),
        "holdout_r2": nan,
    }
    return finite_or_none(values)


_SUMMARY_FIELDS = ("plateau_forecast", "plateau_forecast_se", "plateau_full_fit", "plateau_observed",
                   "plateau_error_vs_full_fit", "plateau_error_vs_observed", "plateau_relative_error",
                   "t90_forecast", "t90_full_fit", "t90_error", "holdout_rmse", "persistence_rmse", "holdout_r2")


def run_forecast_summary(
    forecast_jsons: Sequence[str], out_csv: str, out_md: str, out_tex: str | None = None
) -> Any:
    """Collect forecasts (one per run) into a CSV with one row per run plus, per (model, G, column, fraction), the
    mean, s.d., min and max of each error across seeds; Markdown (and LaTeX) views. Returns the summary frame."""
    import pandas as pd

    from pgrpo.atomic import write_csv, write_text

    if not forecast_jsons:
        raise InputError("no forecast JSON given to summarise")
    records = []
    for path in forecast_jsons:
        data = read_json(path, "forecast")
        if "fraction" not in data or "column" not in data:
            raise InputError(f"forecast {path} is not a forecast JSON (no 'fraction'/'column')")
        row = {"kind": "run", "model": data.get("model"), "G": data.get("G"), "seed": data.get("seed"),
               "column": data["column"], "law": data.get("method") or data.get("law"), "fraction": data["fraction"],
               "success": data.get("success"), "message": data.get("message"), "source": str(path)}
        row.update({k: none_to_nan(data.get(k)) for k in _SUMMARY_FIELDS})
        records.append(row)
    runs = pd.DataFrame(records)
    keys = ["model", "G", "column", "law", "fraction"]
    summary_rows = []
    for key, group in runs.fillna({"model": "", "G": -1}).groupby(keys, dropna=False, sort=True):
        ok = group[group["success"] == True]  # noqa: E712 - pandas column of bools/None
        for stat in ("mean", "sd", "min", "max"):
            row = dict(zip(keys, key), kind=stat, seed=None, success=None, n_runs=len(group), n_forecasts=len(ok),
                       message="", source="")
            for field_name in _SUMMARY_FIELDS:
                values = ok[field_name].to_numpy(float)
                values = values[np.isfinite(values)]
                if values.size == 0:
                    row[field_name] = float("nan")
                elif stat == "mean":
                    row[field_name] = float(values.mean())
                elif stat == "sd":
                    row[field_name] = float(values.std(ddof=1)) if values.size > 1 else float("nan")
                else:
                    row[field_name] = float(getattr(values, stat)())
            summary_rows.append(row)
    summary = pd.concat([runs, pd.DataFrame(summary_rows)], ignore_index=True)
    summary.loc[summary["G"] == -1, "G"] = None
    write_csv(out_csv, summary)

    headers = ["model", "G", "column", "seed", "plateau forecast", "R_inf full fit", "observed plateau",
               "error vs observed", "t90 forecast", "t90 full fit", "holdout RMSE", "persistence RMSE"]
    view = []
    for rec in runs.to_dict("records"):
        view.append([str(rec["model"]), fmt(rec["G"]), rec["column"], fmt(rec["seed"]),
                     with_se(rec["plateau_forecast"], rec["plateau_forecast_se"]), fmt(rec["plateau_full_fit"]),
                     fmt(rec["plateau_observed"]), fmt(rec["plateau_error_vs_observed"]),
                     fmt(rec["t90_forecast"], 0), fmt(rec["t90_full_fit"], 0), fmt(rec["holdout_rmse"]),
                     fmt(rec["persistence_rmse"])])
    spread_lines = []
    stats = pd.DataFrame(summary_rows)
    for key, group in stats.groupby(keys, sort=True):
        mean = group[group["kind"] == "mean"].iloc[0]
        sd = group[group["kind"] == "sd"].iloc[0]
        model, G, column, law, frac = key
        who = f"{model or 'run'}{'' if G in (-1, None) else f' G={G}'}, {column}"
        if mean["n_forecasts"] == 0:
            spread_lines.append(f"- {who}: no forecast succeeded from the first {frac:.0%} of steps.")
            continue
        spread_lines.append(
            f"- {who} ({law}, first {frac:.0%} of steps, {int(mean['n_forecasts'])}/{int(mean['n_runs'])} runs): "
            f"plateau error vs the observed plateau {fmt(mean['plateau_error_vs_observed'])} ± "
            f"{fmt(sd['plateau_error_vs_observed'])} (mean ± s.d. across seeds), i.e. "
            f"{fmt(100 * mean['plateau_relative_error'], 2)}% of the rise; t90 error "
            f"{fmt(mean['t90_error'], 0)} ± {fmt(sd['t90_error'], 0)} steps; hold-out RMSE "
            f"{fmt(mean['holdout_rmse'])} vs {fmt(mean['persistence_rmse'])} for persistence."
        )
    md = ["# Forecasts from the first steps of each run", "",
          "Each run is forecast from its first steps only (the forecaster: the laws of Section 3.5 averaged by "
          "Akaike weights; plateau = the forecast mean over the run's last 10% of steps, ± the half-width of its 80% "
          "band / 1.28; t90 = first step with 90% of the change from the start to that plateau); errors are against "
          "the same run's full log (observed plateau: mean of the last 10% of points). R_inf and t90 of the full "
          "fit: the three-phase law (Eq. 16) fitted to the whole log. Persistence: the curve assumed flat at the "
          "end of the early window.", "", markdown_table(headers, view), "## Spread across seeds", "",
          *spread_lines, ""]
    write_text(out_md, "\n".join(md))
    if out_tex:
        rows = [[latex_escape(c).replace("±", r"$\pm$").replace("–", "--") for c in row] for row in view]
        write_text(out_tex, latex_table([latex_escape(h) for h in headers], rows,
                                        caption="Plateau and t90 forecast from the first steps of each run.",
                                        label="tab:forecast"))
    return summary


def _fits_from_json(path: str) -> tuple[str, dict[int, dict[str, tuple[Any, float | None]]], list[str]]:
    from pgrpo.fit.laws import THREE_PHASE
    from pgrpo.fit.least_squares import FitResult

    payload = read_json(path, "fit JSON")
    if "model" not in payload or "groups" not in payload:
        raise InputError(f"fit JSON {path} has no 'model'/'groups' (expected the output of run_fit)")
    out: dict[int, dict[str, tuple[Any, float | None]]] = {}
    for G, group in payload["groups"].items():
        for column, record in group.get("columns", {}).items():
            data = record.get("fits", {}).get(THREE_PHASE)
            fit = FitResult.from_dict(data) if data else None
            out.setdefault(int(G), {})[column] = (fit, record.get("r2_seed_mean", {}).get(THREE_PHASE))
    return payload["model"], out, list(payload.get("config", {}).get("columns", []))


def run_figure1(
    aggregate_csvs: Sequence[str],
    fit_jsons: Sequence[str],
    out_pdf: str,
    out_png: str,
    columns: Sequence[str] | None = None,
) -> None:
    """Figure 1 for all models: ``aggregate_csvs`` are ``aggregate/<model>/G<G>.csv`` (model and G from the path),
    ``fit_jsons`` the outputs of :func:`pgrpo.stages.fit.run_fit` (one per model). ``columns`` default: the fitted
    columns (else train reward, eval reward, eval accuracy). A missing fit or column gives a panel that says so."""
    from pgrpo.fit.laws import FIT_COLUMNS
    from pgrpo.stages.fit import parse_aggregate_path

    if not aggregate_csvs:
        raise InputError("Figure 1 needs at least one aggregate CSV")
    aggregates: dict[str, dict[int, pd.DataFrame]] = {}
    for path in aggregate_csvs:
        model, G = parse_aggregate_path(path)
        if not Path(path).is_file():
            raise InputError(f"aggregate file not found: {path}")
        frame = pd.read_csv(path)
        if "step" not in frame.columns:
            raise InputError(f"aggregate file {path} has no 'step' column")
        aggregates.setdefault(model, {})[G] = frame
    fits: dict[str, dict[int, dict[str, tuple[Any, float | None]]]] = {}
    fitted_columns: list[str] = []
    for path in fit_jsons:
        model, per_G, fit_columns = _fits_from_json(path)
        fits[model] = per_G
        fitted_columns += [c for c in fit_columns if c not in fitted_columns]
    columns = list(columns or fitted_columns or FIT_COLUMNS)
    fig = figure1(aggregates, fits, columns)
    save_pdf_png(fig, out_pdf, out_png)
