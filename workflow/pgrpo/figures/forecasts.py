"""Forecast figures (beyond the paper; the laws of Section 3.5, Eq. 14-16): one run's forecast (the observed log,
the cut, the forecast mean with its 80% and 95% bands for the logged value, the plateau band and t90), the runs of
``pgrpo forecast --compare`` side by side (each run's log and forecast mean curve, and its plateau's 80% interval
against the best level so far, the stop rule of Domhan et al. 2015 marked), and the forecast benchmark's summary
(held-out RMSE against persistence and 80% coverage per method and corpus part).
"""

from __future__ import annotations

import math
from pathlib import Path
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


#: the colour of a run the stop rule stops
_STOPPED = "0.6"


def run_label(log: str, width: int = 38) -> str:
    """A run's short name: its log file's stem, or its folder's name for a file named by its format
    (``trainer_state.json``, ``log.csv``) or a folder, the run's for a run of a W&B export (``FILE::RUN``); at most
    ``width`` characters (a longer one keeps its start and its end)."""
    if "::" in str(log):  # a run of a W&B export: its run's name
        name = str(log).rsplit("::", 1)[1]
    else:
        path = Path(str(log))
        name = path.stem if path.suffix.lower() in (".json", ".jsonl", ".csv", ".tsv", ".txt", ".log") else path.name
        if name in ("trainer_state", "log", "log_history", "metrics", "progress") and path.parent.name:
            name = path.parent.name
    if len(name) <= width:
        return name
    head = width // 3  # the start and the end: runs of one sweep differ at the end of their names
    return name[:head] + "…" + name[-(width - head - 1):]


def compare_figure(payload: Mapping[str, Any], curves: Mapping[str, Mapping[str, Any]]) -> Any:
    """``pgrpo forecast --compare``'s decision in one figure (``payload``: its JSON record, runs best first;
    ``curves``: per run's ``log``, its ``steps`` and ``values``, the ``cut`` and the ``path`` it is ranked by: the
    mean curve ``step, mean, lo, hi`` with its 80% band, None for a run at the horizon). Left: each run's log up to
    the cut (its points after the cut, where a finished run is replayed, faint), its forecast mean curve dashed
    with the band, the best level so far dotted. Right: each run's plateau with its 80% interval, best first, its
    level at the cut (open circle), P(ends highest) and the stop rule's verdict; a stopped run is grey."""
    runs = list(payload.get("runs") or [])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    best = _num((payload.get("best_so_far") or {}).get("level"))
    with style():
        fig, (ax, bars) = plt.subplots(1, 2, figsize=(8.4, max(2.8, 1.0 + 0.32 * len(runs))),
                                       gridspec_kw={"width_ratios": (1.5, 1.0)})
        for i, run in enumerate(runs):
            color = _STOPPED if run.get("stop_now") else colors[i % len(colors)]
            curve = curves.get(str(run["log"])) or {}
            t, y = np.asarray(curve.get("steps", []), float), np.asarray(curve.get("values", []), float)
            cut = _num(curve.get("cut"))
            seen = t <= cut if math.isfinite(cut) else np.ones(t.size, bool)
            ax.plot(t[seen], y[seen], color=color, linewidth=0.7, alpha=0.75)
            ax.plot(t[~seen], y[~seen], color=color, linewidth=0.5, alpha=0.2)
            path = curve.get("path")
            if path is not None:
                ax.fill_between(path["step"], path["lo"], path["hi"], color=color, alpha=0.1, linewidth=0)
                ax.plot(path["step"], path["mean"], color=color, linestyle="--", linewidth=1.1)
            plateau = run.get("plateau") or {}
            mean, lo, hi = (_num(plateau.get(k)) for k in ("mean", "lo80", "hi80"))
            bars.plot([lo, hi], [i, i], color=color, linewidth=2.2, solid_capstyle="butt")
            bars.plot([mean], [i], "o", color=color, markersize=4)
            bars.plot([_num(run.get("level_at_cut"))], [i], "o", markerfacecolor="none", markeredgecolor=color,
                      markersize=4)
            verdict = "stop" if run.get("stop_now") else "keep"
            bars.annotate(f"P(top) {_num(run.get('p_highest')):.2f} · {verdict}", (1.0, i),
                          xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points",
                          va="center", fontsize=6.5, color="0.2" if verdict == "keep" else _STOPPED)
        if math.isfinite(best):
            for axis in (ax, bars):
                (axis.axhline if axis is ax else axis.axvline)(best, color="0.3", linestyle=":", linewidth=0.9)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel(COLUMN_LABELS.get(payload.get("column", ""), payload.get("column", "")))
        ax.set_title(f"{len(runs)} runs forecast to step {_num(payload.get('horizon')):.0f} (dashed: the mean curve, "
                     "80% band)", fontsize=7.5)
        bars.set_yticks(range(len(runs)))
        bars.set_yticklabels([f"{run.get('rank', i + 1)}. {run_label(run['log'])}" for i, run in enumerate(runs)],
                             fontsize=6.5)
        bars.set_ylim(len(runs) - 0.5, -0.5)
        bars.set_xlabel("plateau (80% interval); o: now; dotted: best so far")
        bars.set_title(f"stop when P(beat the best so far) < {_num(payload.get('stop_threshold')):g}", fontsize=7.5)
        bars.grid(axis="y", visible=False)
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
