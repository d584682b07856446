"""Figures, and the house plot style every figure of the workflow shares.

Paper: Figure 1 (Section 5.1): columns are models, rows are (train reward, eval reward, eval accuracy) x G, each
pair of rows G=4 above G=16; seed mean (solid) with a ± s.d. band, the three-phase fit of Prop. 14 (dotted), and the
in-panel R^2 measured against the seed-averaged curve. Also the forecast figure (beyond the paper): a run, the window
its forecast was fitted on, the extrapolated law with its parameter band, and the full-run fit.

Shared style for other stages' figures: :func:`style` (an rc context), :data:`G_COLORS` / :func:`color_for_G`,
:func:`label_panel`, :data:`COLUMN_LABELS` and :func:`save_pdf_png`.
"""

from __future__ import annotations

import math
import string
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from pgrpo.atomic import read_json  # noqa: E402
from pgrpo.errors import InputError  # noqa: E402

# ---------------------------------------------------------------------------------------------------------------------
# house style
# ---------------------------------------------------------------------------------------------------------------------

#: rcParams of every figure: small serif-free type, light grid, no top/right spines
RC_PARAMS: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.3,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,
}

#: one colour per group size (Figure 1 convention: G=4 and G=16 distinguishable in print)
G_COLORS: dict[int, str] = {2: "#8c564b", 4: "#1f77b4", 8: "#2ca02c", 16: "#d62728", 32: "#9467bd", 64: "#ff7f0e"}
_FALLBACK_COLORS = ["#17becf", "#bcbd22", "#e377c2", "#7f7f7f"]
FIT_STYLE: dict[str, Any] = {"color": "black", "linestyle": ":", "linewidth": 1.4}
BAND_ALPHA = 0.22

#: axis labels of the logged quantities
COLUMN_LABELS: dict[str, str] = {
    "reward": "train reward",
    "eval_reward": "eval reward",
    "eval_accuracy": "eval accuracy",
    "reward_std": "reward s.d. in group",
    "frac_reward_zero_std": "frac. zero-s.d. groups",
    "entropy": "entropy",
    "kl": "KL",
    "grad_norm": "gradient norm",
    "importance_sampling_ratio_max": "max IS ratio",
}


@contextmanager
def style() -> Iterator[None]:
    """The house rc context: ``with style(): fig = ...``."""
    with matplotlib.rc_context(RC_PARAMS):
        yield


def color_for_G(G: int) -> str:
    if G in G_COLORS:
        return G_COLORS[G]
    return _FALLBACK_COLORS[hash(int(G)) % len(_FALLBACK_COLORS)]


def label_panel(ax: Any, index: int) -> None:
    """The paper's panel letter ``(a)``, ``(b)``, ... (``(aa)`` after ``(z)``) in the upper left corner."""
    letters = string.ascii_lowercase
    name = letters[index] if index < 26 else letters[index // 26 - 1] + letters[index % 26]
    ax.text(0.02, 0.97, f"({name})", transform=ax.transAxes, va="top", ha="left", fontweight="bold", fontsize=8)


def save_pdf_png(fig: Any, out_pdf: str | None, out_png: str | None) -> None:
    """Save atomically as PDF and/or PNG, then close the figure."""
    from pgrpo.atomic import save_figure

    try:
        for target in (out_pdf, out_png):
            if target:
                save_figure(fig, target, dpi=RC_PARAMS["savefig.dpi"], bbox_inches="tight")
    finally:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------------
# Figure 1
# ---------------------------------------------------------------------------------------------------------------------


def _panel(ax: Any, frame: pd.DataFrame | None, column: str, G: int, fit: Any, r2: float | None) -> None:
    """One Figure 1 panel: seed mean, ± s.d. band, dotted three-phase fit, R^2 (or why there is none)."""
    color = color_for_G(G)
    mean_col, sd_col = f"{column}_mean", f"{column}_sd"
    if frame is None or mean_col not in frame.columns or not np.isfinite(frame[mean_col].to_numpy(float)).any():
        what = "no eval data" if column.startswith("eval") else f"no {COLUMN_LABELS.get(column, column)} data"
        ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center", color="0.4")
        ax.set_yticks([])
        return
    step = frame["step"].to_numpy(float)
    mean = frame[mean_col].to_numpy(float)
    sd = frame[sd_col].to_numpy(float) if sd_col in frame.columns else np.full(step.size, np.nan)
    keep = np.isfinite(step) & np.isfinite(mean)
    step, mean, sd = step[keep], mean[keep], sd[keep]
    sparse = keep.sum() < 0.5 * len(keep) or step.size <= 30  # eval columns: only on eval steps
    ax.plot(step, mean, color=color, marker="o" if sparse else None, markersize=2.5, label="seed mean")
    band = np.isfinite(sd)
    if band.any():
        ax.fill_between(step[band], (mean - sd)[band], (mean + sd)[band], color=color, alpha=BAND_ALPHA,
                        linewidth=0, label="± s.d.")
    if fit is not None and fit.success:
        grid = np.linspace(step.min(), step.max(), 400)
        ax.plot(grid, fit.predict(grid), label="three-phase fit", **FIT_STYLE)
        shown = r2 if r2 is not None and math.isfinite(r2) else fit.r2
        ax.text(0.97, 0.05, f"$R^2$ = {shown:.2f}", transform=ax.transAxes, ha="right", va="bottom",
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "0.8", "alpha": 0.85})
    else:
        reason = "no fit" if fit is None else fit.message.replace("no fit: ", "no fit: ", 1)
        reason = reason if len(reason) <= 48 else reason[:45] + "..."
        ax.text(0.97, 0.05, reason, transform=ax.transAxes, ha="right", va="bottom", fontsize=6, color="0.3")


def figure1(
    aggregates: Mapping[str, Mapping[int, pd.DataFrame]],
    fits: Mapping[str, Mapping[int, Mapping[str, tuple[Any, float | None]]]],
    columns: Sequence[str] = ("reward", "eval_reward", "eval_accuracy"),
    group_sizes: Sequence[int] | None = None,
) -> Any:
    """Figure 1 as a matplotlib figure.

    ``aggregates[model][G]``: the aggregate frame (``step``, ``<col>_mean``, ``<col>_sd``); ``fits[model][G][col]``:
    (three-phase FitResult or None, R^2 on the seed mean or None). Models are columns in the mapping's order; rows are
    each column x each G (ascending), panel letters row by row as in the paper.
    """
    models = list(aggregates)
    if group_sizes is None:
        group_sizes = sorted({int(G) for per_model in aggregates.values() for G in per_model})
    if not models or not group_sizes:
        raise InputError("Figure 1 needs at least one model and one group size")
    n_rows, n_cols = len(columns) * len(group_sizes), len(models)
    with style():
        fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.9 * n_cols + 0.6, 1.55 * n_rows + 0.6), squeeze=False,
                                 sharex="col")
        for r, (column, G) in enumerate((c, G) for c in columns for G in group_sizes):
            for c, model in enumerate(models):
                ax = axes[r, c]
                frame = aggregates[model].get(G)
                fit, r2 = fits.get(model, {}).get(G, {}).get(column, (None, None))
                _panel(ax, frame, column, G, fit, r2)
                label_panel(ax, r * n_cols + c)
                if r == 0:
                    ax.set_title(model)
                if c == 0:
                    ax.set_ylabel(f"{COLUMN_LABELS.get(column, column)}\nG={G}")
                if r == n_rows - 1:
                    ax.set_xlabel("optimizer step")
        handles = [
            plt.Line2D([], [], color="0.3", label="seed mean"),
            Patch(color="0.3", alpha=BAND_ALPHA, label="± s.d. across seeds"),
            plt.Line2D([], [], label="three-phase fit (Eq. 16)", **FIT_STYLE),
        ] + [plt.Line2D([], [], color=color_for_G(G), label=f"G={G}") for G in group_sizes]
        fig.legend(handles=handles, loc="upper center", ncol=len(handles) if n_cols > 1 else 3, frameon=False,
                   bbox_to_anchor=(0.5, 1.0 + (0.12 if n_cols > 1 else 0.3) / n_rows))
        fig.tight_layout()
    return fig


def _fits_from_json(path: str) -> tuple[str, dict[int, dict[str, tuple[Any, float | None]]], list[str]]:
    from pgrpo.fitting import THREE_PHASE, FitResult

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
    ``fit_jsons`` the outputs of :func:`pgrpo.fitting.run_fit` (one per model). ``columns`` default: the fitted
    columns (else train reward, eval reward, eval accuracy). A missing fit or column gives a panel that says so."""
    from pgrpo.fitting import FIT_COLUMNS, parse_aggregate_path

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


# ---------------------------------------------------------------------------------------------------------------------
# forecast figure
# ---------------------------------------------------------------------------------------------------------------------


def forecast_figure(steps: np.ndarray, values: np.ndarray, forecast: Any, title: str = "") -> Any:
    """A run (grey), its early window (shaded), the law fitted there and extrapolated (solid, with a 90% parameter
    band), the full-run fit (dotted), the forecast plateau and t90."""
    from pgrpo.fitting import forecast_band

    steps, values = np.asarray(steps, float), np.asarray(values, float)
    keep = np.isfinite(steps) & np.isfinite(values)
    with style():
        fig, ax = plt.subplots(figsize=(5.2, 3.2))
        ax.plot(steps[keep], values[keep], color="0.55", linewidth=0.9, marker="o" if keep.sum() <= 30 else None,
                markersize=2.5, label="observed")
        ax.axvspan(min(0.0, steps[keep].min()) if keep.any() else 0.0, forecast.cutoff_step, color="#1f77b4",
                   alpha=0.08, label=f"fit window (first {forecast.fraction:.0%})")
        if keep.any():
            grid = np.linspace(0.0, max(steps[keep].max(), forecast.total_steps), 400)
        else:
            grid = np.linspace(0.0, forecast.total_steps, 400)
        if forecast.early.success:
            band = forecast_band(forecast.early, grid)
            if np.isfinite(band).all():
                ax.fill_between(grid, band[0], band[1], color="#1f77b4", alpha=0.18, linewidth=0, label="90% band")
            ax.plot(grid, forecast.early.predict(grid), color="#1f77b4", label=f"forecast ({forecast.law})")
            ax.axhline(forecast.plateau_forecast, color="#1f77b4", linestyle="--", linewidth=0.8)
            if math.isfinite(forecast.t90_forecast) and forecast.t90_forecast <= grid[-1]:
                ax.axvline(forecast.t90_forecast, color="#1f77b4", linestyle="--", linewidth=0.8)
        else:
            ax.text(0.5, 0.5, forecast.message, transform=ax.transAxes, ha="center", va="center", fontsize=6.5,
                    wrap=True)
        if forecast.full.success:
            ax.plot(grid, forecast.full.predict(grid), label="full-run fit", **FIT_STYLE)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(COLUMN_LABELS.get(forecast.column, forecast.column))
        if title:
            ax.set_title(title)
        ax.legend(loc="lower right", frameon=False)
        fig.tight_layout()
    return fig


def run_forecast_figure(
    steps: np.ndarray, values: np.ndarray, forecast: Any, out_png: str | None = None, out_pdf: str | None = None,
    title: str = "",
) -> None:
    save_pdf_png(forecast_figure(steps, values, forecast, title), out_pdf, out_png)
