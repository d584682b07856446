"""Figure 1 (Section 5.1): seed-averaged train/eval curves with their three-phase fits (Prop. 14) and in-panel
R^2; and the forecast figure (observed curve, cut, forecast and band).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from pgrpo.errors import InputError
from pgrpo.figures.style import BAND_ALPHA, COLUMN_LABELS, FIT_STYLE, color_for_G, label_panel, style


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


def forecast_figure(steps: np.ndarray, values: np.ndarray, forecast: Any, title: str = "") -> Any:
    """A run (grey), its early window (shaded), the law fitted there and extrapolated (solid, with a 90% parameter
    band), the full-run fit (dotted), the forecast plateau and t90."""
    from pgrpo.fit.forecast import forecast_band

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
