"""Forecast figures (beyond the paper; the laws of Section 3.5, Eq. 14-16): one run's forecast (the observed log,
the cut, the forecast mean with its 80% and 95% bands for the logged value, the plateau band and t90), and the
forecast benchmark's summary (held-out RMSE against persistence and 80% coverage per method and corpus part).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pgrpo.figures.style import COLUMN_LABELS, style

_FORECAST = "#1f77b4"


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def run_forecast_figure(steps: np.ndarray, values: np.ndarray, payload: Mapping[str, Any], title: str = "") -> Any:
    """The log (grey), the fit window (shaded up to the cut), the forecast mean (blue) with its 80% and 95% bands,
    the plateau's 80% band over the run's last 10% of steps and t90 (dashed)."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    keep = np.isfinite(steps) & np.isfinite(values)
    cut = _num(payload.get("cutoff_step"))
    with style():
        fig, ax = plt.subplots(figsize=(5.4, 3.3))
        ax.plot(steps[keep], values[keep], color="0.55", linewidth=0.8, marker="o" if keep.sum() <= 40 else None,
                markersize=2.5, label="logged")
        if math.isfinite(cut):
            ax.axvspan(min(0.0, float(steps[keep].min())) if keep.any() else 0.0, cut, color=_FORECAST, alpha=0.06,
                       label=f"fit window (first {payload.get('fraction', 0):.0%})")
            ax.axvline(cut, color="0.3", linewidth=0.7)
        forecast = payload.get("forecast") or {}
        if payload.get("success") and forecast.get("step"):
            t = np.asarray(forecast["step"], float)
            for lo, hi, alpha, label in (("lo95", "hi95", 0.12, "95% interval"), ("lo80", "hi80", 0.22,
                                                                                   "80% interval")):
                ax.fill_between(t, np.asarray(forecast[lo], float), np.asarray(forecast[hi], float), color=_FORECAST,
                                alpha=alpha, linewidth=0, label=label)
            ax.plot(t, np.asarray(forecast["mean"], float), color=_FORECAST, label="forecast")
            plateau = payload.get("plateau") or {}
            lo, hi = _num(plateau.get("lo80")), _num(plateau.get("hi80"))
            if math.isfinite(lo) and math.isfinite(hi):
                tail = t[-max(1, int(round(0.1 * (t.size + payload.get("n_early", 0))))):]
                ax.fill_between([tail[0], tail[-1]], [lo, lo], [hi, hi], color="#ff7f0e", alpha=0.3, linewidth=0,
                                label="plateau 80%")
            t90 = _num((payload.get("t90") or {}).get("mean"))
            if math.isfinite(t90):
                ax.axvline(t90, color=_FORECAST, linestyle="--", linewidth=0.8, label=f"t90 = {t90:.0f}")
        else:
            ax.text(0.5, 0.5, payload.get("message", "no forecast"), transform=ax.transAxes, ha="center",
                    va="center", fontsize=6.5, wrap=True)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(COLUMN_LABELS.get(payload.get("column", ""), payload.get("column", "")))
        if title:
            ax.set_title(f"{title}\n{payload.get('law', '')}", fontsize=7)
        ax.legend(loc="best", frameon=False, fontsize=6)
        fig.tight_layout()
    return fig


def benchmark_figure(summary: Sequence[Mapping[str, Any]], fraction: float = 0.25) -> Any:
    """Per corpus part (columns): the median held-out RMSE over persistence's (top), the mean curve's RMSE against
    the truth (or the denoised reference) over persistence's (middle, issue 21's 0.6 target dashed) and the 80%
    interval's coverage (bottom, the 70-90% target shaded) of every method at ``fraction``; dev and holdout side by
    side."""
    rows = [r for r in summary if abs(r["fraction"] - fraction) < 1e-9 and r["split"] in ("dev", "holdout")]
    parts = [p for p in ("workflow", "bandit", "bandit sweep", "real", "closed-form", "overall")
             if any(r["part"] == p for r in rows)]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    panels = (("rmse_ratio", "RMSE / persistence"), ("mean_rmse_ratio", "mean-curve RMSE / pers."),
              ("coverage80", "80% coverage"))
    with style():
        fig, axes = plt.subplots(3, max(1, len(parts)), figsize=(3.0 * max(1, len(parts)), 6.6), squeeze=False)
        for j, part in enumerate(parts):
            for i, (key, label) in enumerate(panels):
                ax = axes[i, j]
                x = np.arange(len(methods))
                for k, (split, shift) in enumerate((("dev", -0.2), ("holdout", 0.2))):
                    vals = [next((r.get(key, np.nan) for r in rows if r["part"] == part and r["split"] == split
                                  and r["method"] == m), np.nan) for m in methods]
                    ax.bar(x + shift, vals, width=0.38, color=("#1f77b4", "#ff7f0e")[k], label=split)
                if key in ("rmse_ratio", "mean_rmse_ratio"):
                    ax.axhline(1.0, color="0.3", linewidth=0.7)
                    ax.axhline(0.85 if key == "rmse_ratio" else 0.6, color="#2ca02c", linewidth=0.7, linestyle="--")
                    ax.set_ylim(0, 2.0)
                    if key == "rmse_ratio":
                        ax.set_title(part)
                else:
                    ax.axhspan(0.7, 0.9, color="#2ca02c", alpha=0.12, linewidth=0)
                    ax.set_ylim(0, 1)
                ax.set_xticks(x)
                ax.set_xticklabels(methods, rotation=60, ha="right", fontsize=6)
                if j == 0:
                    ax.set_ylabel(label)
        axes[0, 0].legend(frameon=False, fontsize=6)
        fig.suptitle(f"forecast benchmark: fit on the first {fraction:.0%} of steps, scored on the rest", fontsize=8)
        fig.tight_layout()
    return fig
