"""Stages of the bandit rule group (Section 5.6): calibrate, sweep (Figure 6), regime map (Figure 7), verdict and
sensitivity; each reads its inputs, calls :mod:`pgrpo.bandit` and writes its outputs atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from pgrpo import bandit
from pgrpo.atomic import save_figure, write_csv, write_json, write_text
from pgrpo.bandit.experiments import (
    MAP_COLUMNS,
    SENSITIVITY_COLUMNS,
    SWEEP_COLUMNS,
    calibrate,
    regime_map_frame,
    sensitivity_frame,
    sweep_frames,
)
from pgrpo.bandit.settings import DEFAULTS, Reading, bandit_settings, choice, merged
from pgrpo.bandit.verdict import ClaimVerdict, frontier_table, judge, view_table
from pgrpo.errors import InputError
from pgrpo.figures.bandit import figure6, figure7, finite_g_figure
from pgrpo.figures.style import close_figure
from pgrpo.tables.bandit import finite_g_markdown, frame_latex, frame_markdown, sensitivity_markdown, verdict_markdown


# Calibration
def _require_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} file '{path}' does not exist (run the step that writes it first)")
    return p


def load_calibration(path: str) -> dict:
    """Read a calibration JSON written by :func:`run_calibrate`; InputError names the file or the missing key."""
    data = json.loads(_require_file(path, "bandit calibration").read_text())
    for key in ("stiffness", "p_star", "p_ref", "rewards", "beta"):
        if key not in data:
            raise InputError(f"bandit calibration file '{path}' lacks key '{key}'")
    return data


def run_calibrate(bandit_cfg: Mapping | None, out_json: str) -> dict:
    """Measure ``K`` and ``p*`` as Section 5.6 says; write them (and the exact fixed points) to ``out_json``."""
    settings = bandit_settings(bandit_cfg)
    result = calibrate(settings, progress=True)
    write_json(out_json, result)
    return result


def run_sweep(bandit_cfg: Mapping | None, calibration_json: str, out_csv: str, out_regimes_csv: str, out_pdf: str,
              out_png: str) -> None:
    """Figure 6: write the curves (``out_csv``), the regime per ``K_ref`` (``out_regimes_csv``), PDF and PNG."""
    settings = bandit_settings(bandit_cfg)
    calibration = load_calibration(calibration_json)
    curves, regimes = sweep_frames(settings, calibration, progress=True)
    write_csv(out_csv, curves)
    write_csv(out_regimes_csv, regimes)
    fig = figure6(curves, regimes, settings, calibration)
    save_figure(fig, out_pdf)
    save_figure(fig, out_png, dpi=150)
    close_figure(fig)


def run_regime_map(bandit_cfg: Mapping | None, calibration_json: str, refresh: str, gradient: str, out_csv: str,
                   out_pdf: str, out_png: str) -> None:
    """Figure 7 for one reading: the classified ``(eta, K_ref)`` grid (``out_csv``) and the map (PDF, PNG)."""
    settings = bandit_settings(bandit_cfg)
    reading = Reading(choice(refresh, "refresh", bandit.REFRESHES), choice(gradient, "gradient", bandit.GRADIENTS))
    calibration = load_calibration(calibration_json)
    frame = regime_map_frame(settings, calibration, reading, progress=True)
    write_csv(out_csv, frame)
    fig = figure7(frame, settings, calibration, reading)
    save_figure(fig, out_pdf)
    save_figure(fig, out_png, dpi=150)
    close_figure(fig)


def _read_csv(path: str, columns: Sequence[str], what: str) -> pd.DataFrame:
    frame = pd.read_csv(_require_file(path, what))
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what} file '{path}' lacks column '{missing[0]}'")
    return frame


def run_verdict(bandit_cfg: Mapping | None, calibration_json: str, sweep_regimes_csv: str,
                map_csvs: Sequence[str] | Mapping[Any, str], out_md: str, out_table_csv: str, out_table_md: str,
                out_table_tex: str, sensitivity_csv: str | None = None) -> list[ClaimVerdict]:
    """The threshold table (CSV, Markdown, LaTeX) and ``verdict.md``: one verdict per claim and reading.

    ``map_csvs``: the regime-map CSVs of :func:`run_regime_map` (a list, or a mapping whose values are paths);
    each names its reading in its ``refresh``/``gradient`` columns. ``sensitivity_csv`` (optional): the output of
    :func:`run_sensitivity`, summarised in a final section.
    """
    settings = bandit_settings(bandit_cfg)
    calibration = load_calibration(calibration_json)
    paths = list(map_csvs.values()) if isinstance(map_csvs, Mapping) else list(map_csvs)
    if not paths:
        raise InputError("run_verdict needs at least one regime-map CSV (map_csvs is empty)")
    sensitivity = (_read_csv(sensitivity_csv, SENSITIVITY_COLUMNS, "bandit sensitivity")
                   if sensitivity_csv else None)
    sweep = _read_csv(sweep_regimes_csv, SWEEP_COLUMNS, "bandit sweep regimes")
    maps: dict[Reading, pd.DataFrame] = {}
    for path in paths:
        frame = _read_csv(path, MAP_COLUMNS, "bandit regime map")
        for (refresh, gradient), part in frame.groupby(["refresh", "gradient"], sort=False):
            maps[Reading(str(refresh), str(gradient))] = part.reset_index(drop=True)
    stiffness = float(calibration["stiffness"])
    mu = float(next(iter(maps.values()))["mu"].iloc[0])
    table = frontier_table(maps, stiffness, mu)
    verdicts = []
    for reading, frame in maps.items():
        verdicts += judge(reading, frame, sweep, table, stiffness, mu)
    write_csv(out_table_csv, table)
    view = view_table(table, list(maps))
    caption = (f"First K_ref leaving the monotone regime per eta (mu={mu}, beta={settings.beta}) against the "
               f"Proposition 9 threshold (1-mu)/(K eta) with the measured K={stiffness:.4f}")
    write_text(out_table_md, f"{caption}\n\n" + frame_markdown(view))
    write_text(out_table_tex, frame_latex(view, caption))
    text = verdict_markdown(settings, calibration, sweep, table, view, verdicts, mu)
    if sensitivity is not None:
        text += "\n" + sensitivity_markdown(sensitivity)
    write_text(out_md, text)
    return verdicts


def run_sensitivity(bandit_cfg: Mapping | None, out_csv: str, out_md: str) -> pd.DataFrame:
    """The verdicts for each reward shape of ``bandit.sensitivity.rewards`` (and the config rewards): CSV + MD."""
    settings = bandit_settings(bandit_cfg)
    frame = sensitivity_frame(settings, progress=True)
    write_csv(out_csv, frame)
    write_text(out_md, sensitivity_markdown(frame))
    return frame


def run_finite_g(bandit_cfg: Mapping | None, calibration_json: str, out_md: str, out_csv: str, out_png: str,
                 out_pdf: str) -> Any:
    """The finite-G study (Prop. 10): the grid of ``bandit.finite_g``, K from ``calibration.json``; ``finite_g.md``,
    the per-G numbers as CSV, and the figure."""
    from pgrpo.bandit.finite_g_study import GridSettings, analyse_grid, run_grid

    settings = bandit_settings(bandit_cfg)
    section = merged(DEFAULTS["finite_g"], (bandit_cfg or {}).get("finite_g"), "bandit.finite_g")
    grid = GridSettings(rewards=tuple(float(r) for r in settings.rewards), beta=settings.beta,
                        **{k: (tuple(v) if isinstance(v, list) else v) for k, v in section.items()})
    calibration = load_calibration(calibration_json)
    report = analyse_grid(run_grid(grid, progress=True), grid, K_calibrated=calibration["stiffness"])
    rows = [{"G": pt.G, "var_fluctuation": pt.fluctuation.value, "var_fluctuation_se": pt.fluctuation.se,
             "var_about_p_star": pt.about_p_star.value, "stationary_mean": pt.fluctuation.mean,
             "D": pt.noise.D, "D_se": pt.noise.D_se, "sigma_adv": pt.noise.sigma_adv,
             "zero_spread": pt.noise.zero_spread, "K_local": pt.stiffness.value}
            for pt in sorted(report.points, key=lambda p: p.G)]
    write_csv(out_csv, pd.DataFrame(rows))
    write_text(out_md, finite_g_markdown(report))
    fig = finite_g_figure(report)
    save_figure(fig, out_pdf)
    save_figure(fig, out_png, dpi=150)
    close_figure(fig)
    return report
