"""Figures 2-5 of the paper (Sections 5.2-5.5): the four training diagnostics as grids.

Columns are models; rows as in the paper's figure; group sizes overlaid in the house colours
(:func:`pgrpo.figures.style.color_for_G`); seed mean with a ± s.d. band where the aggregate has one; x is training progress
``step / last step`` per run so the G's overlay.

- Figure 2 (reward hacking): row 1 the parametric ``u_eval`` against ``u_train`` (Eq. 17) with the diagonal ``y = x``
  and a star at the last eval step; row 2 the rolling coupling ratio ``rho(t)`` on a symmetric-log axis
  (``linthresh = 1``) with the healthy level 1 and the ``rho_min`` threshold; the interior range is shaded.
- Figure 3 (mode collapse): row 1 ``sigma_adv^2 / G``; row 2 ``frac_reward_zero_std``.
- Figure 4 (policy concentration): row 1 entropy (a triangle where it crossed the drop threshold, a dotted line
  at reward saturation); row 2 KL.
- Figure 5 (stability): row 1 ``grad_norm`` on a log axis (crosses at spikes); row 2 the IS-ratio max.

A panel whose column is missing (or whose diagnostic could not run) says so in words instead of a curve.
The numbers and verdicts come from :mod:`pgrpo.diagnose`; this module only draws.

"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from pgrpo.diagnose.records import (
    MODE_COLLAPSE,
    POLICY_CONCENTRATION,
    REWARD_HACKING,
    STABILITY,
    DiagnosticResult,
    RunCurves,
)
from pgrpo.diagnose.readouts.report import DiagnosticsReport
from pgrpo.figures.style import BAND_ALPHA, label_panel, save_pdf_png, style
from pgrpo.figures.style import color_for_G as _house_color

FIGURE_NAMES: dict[str, str] = {REWARD_HACKING: "figure2", MODE_COLLAPSE: "figure3",
                                POLICY_CONCENTRATION: "figure4", STABILITY: "figure5"}


_MISSING_STYLE = {"ha": "center", "va": "center", "color": "0.35", "fontsize": 6}


def color_for(G: int | None) -> str:
    return _house_color(int(G)) if G else "0.2"


def _label_for(G: int | None) -> str:
    return f"G={G}" if G else "run"


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _say(ax: Any, lines: Sequence[str]) -> None:
    ax.text(0.5, 0.5, "\n".join(_short(line) for line in lines), transform=ax.transAxes, **_MISSING_STYLE)


def _band(ax: Any, x: np.ndarray, mean: np.ndarray, low: np.ndarray, high: np.ndarray, color: str) -> None:
    ok = np.isfinite(low) & np.isfinite(high)
    if ok.any():
        ax.fill_between(x[ok], low[ok], high[ok], color=color, alpha=BAND_ALPHA, linewidth=0)


def _curve_panel(ax: Any, runs: Sequence[RunCurves], column: str, label: str,
                 transform: Callable[[RunCurves, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
                 | None = None, log: bool = False, clip: tuple[float, float] | None = None) -> bool:
    """Seed mean ± s.d. of ``column`` per run (G) against progress; says which runs lack it. True if drawn."""
    missing = []
    drawn = False
    for curves in runs:
        if not curves.has(column):
            missing.append(f"{_label_for(curves.G)}: '{column}' missing")
            continue
        steps, mean, sd = curves.series(column)
        if transform is not None:
            mean, low, high = transform(curves, mean, sd)
        else:
            low, high = mean - sd, mean + sd
        if clip is not None:
            low, high = np.clip(low, *clip), np.clip(high, *clip)
        if log:
            positive = mean > 0
            steps, mean, low, high = steps[positive], mean[positive], low[positive], high[positive]
            floor = float(mean.min()) / 10 if mean.size else 1e-12
            low = np.where(low > 0, low, floor)
        x = curves.progress(steps)
        color = color_for(curves.G)
        sparse = steps.size <= 30
        ax.plot(x, mean, color=color, marker="o" if sparse else None, markersize=2.5, label=_label_for(curves.G))
        _band(ax, x, mean, low, high, color)
        drawn = True
    if log and drawn:
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        if high / low < 10:  # less than a decade: plain numbers instead of 1.02 x 10^0
            plain = FuncFormatter(lambda value, _: f"{value:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
    if missing:
        if drawn:
            ax.text(0.98, 0.02, "; ".join(missing), transform=ax.transAxes, ha="right", va="bottom", fontsize=6,
                    color="0.35")
        else:
            _say(ax, [f"no {label} data"] + missing)
    ax.set_ylabel(label)
    return drawn


def _result(report: DiagnosticsReport, diagnostic: str, model: str, G: int | None) -> DiagnosticResult | None:
    return report.get(diagnostic, model, G)


def _grid(models: Sequence[str], n_rows: int) -> tuple[Any, np.ndarray]:
    n_cols = max(1, len(models))
    return plt.subplots(n_rows, n_cols, figsize=(2.9 * n_cols + 0.6, 2.1 * n_rows + 0.5), squeeze=False)


def _finish(fig: Any, axes: np.ndarray, models: Sequence[str], runs_by_model: dict[str, list[RunCurves]],
            extra_handles: Sequence[Any] = ()) -> None:
    n_rows, n_cols = axes.shape
    for c, model in enumerate(models):
        axes[0, c].set_title(model)
        axes[-1, c].set_xlabel("training progress (step / last step)")
    for r in range(n_rows):
        for c in range(n_cols):
            label_panel(axes[r, c], r * n_cols + c)
    seen = sorted({curves.G or 0 for runs in runs_by_model.values() for curves in runs})
    handles = [plt.Line2D([], [], color=color_for(G), label=_label_for(G)) for G in seen]
    handles += [Patch(color="0.3", alpha=BAND_ALPHA, label="± s.d. across seeds")] + list(extra_handles)
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, 1.0 + 0.05 / n_rows))
    fig.tight_layout()


def figure2(report: DiagnosticsReport, runs_by_model: dict[str, list[RunCurves]]) -> Any:
    """Reward hacking: parametric ``u_eval(u_train)`` and the rolling coupling ratio (symlog)."""
    models = list(runs_by_model)
    with style():
        fig, axes = _grid(models, 2)
        for c, model in enumerate(models):
            top, bottom = axes[0, c], axes[1, c]
            top.plot([0, 1], [0, 1], color="black", linestyle=":", linewidth=1.0)
            bottom.axhline(1.0, color="black", linestyle=":", linewidth=1.0)
            said_top, said_bottom = [], []
            rho_min, interior = None, None
            for curves in runs_by_model[model]:
                result = _result(report, REWARD_HACKING, model, curves.G)
                color, name = color_for(curves.G), _label_for(curves.G)
                series = result.series if result else {}
                if not series or "u_train" not in series:
                    why = result.reason if result else "no result"
                    said_top.append(f"{name}: {result.verdict if result else ''} ({why})")
                    said_bottom.append(f"{name}: no rho")
                    continue
                u_t, u_e = np.asarray(series["u_train"], float), np.asarray(series["u_eval"], float)
                top.plot(u_t, u_e, color=color, marker="o", markersize=2.5, label=name)
                top.plot(u_t[-1:], u_e[-1:], color=color, marker="*", markersize=9, markeredgecolor="black",
                         markeredgewidth=0.4, linestyle="none")
                rho = np.asarray(series["rho"], float)
                if np.isfinite(rho).any():
                    bottom.plot(np.asarray(series["rho_progress"], float), rho, color=color, marker="o",
                                markersize=2.5, label=name)
                else:
                    said_bottom.append(f"{name}: rho undefined (too few points per window)")
                rho_min = result.numbers.get("rho_min", rho_min)
                interior = result.numbers.get("interior", interior)
            top.set_xlabel("train progress $u_{train}$")
            top.set_ylabel("eval progress $u_{eval}$")
            bottom.set_yscale("symlog", linthresh=1.0)
            bottom.set_ylabel(r"$\rho = \lambda_{eval}/|\lambda_{train}|$")
            if rho_min is not None:
                bottom.axhline(rho_min, color="0.5", linestyle="--", linewidth=0.8)
            if interior:
                bottom.axvspan(interior[0], interior[1], color="0.92", zorder=0)
            if said_top:
                top.text(0.98, 0.02, "\n".join(_short(s, 55) for s in said_top), transform=top.transAxes,
                         ha="right", va="bottom", fontsize=5.5, color="0.35")
            if said_bottom:
                bottom.text(0.5, 0.5, "\n".join(_short(s, 55) for s in said_bottom), transform=bottom.transAxes,
                            **_MISSING_STYLE)
        extra = [plt.Line2D([], [], color="black", linestyle=":", label="healthy: y = x, rho = 1"),
                 plt.Line2D([], [], color="0.5", linestyle="--", label="rho threshold"),
                 plt.Line2D([], [], color="0.3", marker="*", linestyle="none", label="final step")]
        _finish(fig, axes, models, runs_by_model, extra)
    return fig


def _sigma2_over_G(curves: RunCurves, std: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    G = curves.G or 1
    return std**2 / G, np.clip(std - sd, 0, None) ** 2 / G, (std + sd) ** 2 / G


def figure3(report: DiagnosticsReport, runs_by_model: dict[str, list[RunCurves]]) -> Any:
    """Mode collapse: ``sigma_adv^2 / G`` and the collapsed-prompt fraction."""
    models = list(runs_by_model)
    with style():
        fig, axes = _grid(models, 2)
        for c, model in enumerate(models):
            runs = runs_by_model[model]
            label = r"$\sigma_{adv}^2/G$" if all(r.G for r in runs) else r"$\sigma_{adv}^2$ (G unknown)"
            _curve_panel(axes[0, c], runs, "reward_std", label, transform=_sigma2_over_G)
            _curve_panel(axes[1, c], runs, "frac_reward_zero_std", "frac. zero-s.d. prompts", clip=(0.0, 1.0))
        _finish(fig, axes, models, runs_by_model)
    return fig


def figure4(report: DiagnosticsReport, runs_by_model: dict[str, list[RunCurves]]) -> Any:
    """Policy concentration: entropy (drop and saturation marked) and KL."""
    models = list(runs_by_model)
    with style():
        fig, axes = _grid(models, 2)
        for c, model in enumerate(models):
            runs = runs_by_model[model]
            drawn = _curve_panel(axes[0, c], runs, "entropy", "token entropy")
            _curve_panel(axes[1, c], runs, "kl", r"KL($\pi_\theta \| \pi_{ref}$)")
            if not drawn:
                continue
            for curves in runs:
                result = _result(report, POLICY_CONCENTRATION, model, curves.G)
                if result is None:
                    continue
                color = color_for(curves.G)
                sat = result.numbers.get("saturation_progress")
                if sat is not None and math.isfinite(sat) and sat <= 1.05:
                    axes[0, c].axvline(sat, color=color, linestyle=":", linewidth=1.0)
                drop_step = result.numbers.get("entropy_drop_step")
                if drop_step is not None:
                    steps, entropy, _ = curves.series("entropy")
                    level = float(np.interp(drop_step, steps, entropy))
                    axes[0, c].plot([curves.progress(drop_step)], [level], marker="v", color=color,
                                    markeredgecolor="black", markeredgewidth=0.4, markersize=6)
        extra = [plt.Line2D([], [], color="0.3", linestyle=":", label="reward at 90% of its rise"),
                 plt.Line2D([], [], color="0.3", marker="v", linestyle="none", label="entropy drop")]
        _finish(fig, axes, models, runs_by_model, extra)
    return fig


def figure5(report: DiagnosticsReport, runs_by_model: dict[str, list[RunCurves]]) -> Any:
    """Stability: grad_norm on a log axis (spikes marked) and the IS-ratio max."""
    models = list(runs_by_model)
    with style():
        fig, axes = _grid(models, 2)
        for c, model in enumerate(models):
            runs = runs_by_model[model]
            drawn = _curve_panel(axes[0, c], runs, "grad_norm", "gradient norm", log=True)
            _curve_panel(axes[1, c], runs, "importance_sampling_ratio_max", "max IS ratio")
            if drawn:
                for curves in runs:
                    result = _result(report, STABILITY, model, curves.G)
                    spikes = result.numbers.get("spike_steps") if result else None
                    if spikes is not None and len(spikes):
                        steps, grad, _ = curves.series("grad_norm")
                        values = np.interp(spikes, steps, grad)
                        axes[0, c].plot(curves.progress(np.asarray(spikes, float)), values, "x",
                                        color=color_for(curves.G), markersize=5)
        extra = [plt.Line2D([], [], color="0.3", marker="x", linestyle="none", label="spike")]
        _finish(fig, axes, models, runs_by_model, extra)
    return fig


FIGURES: dict[str, Callable[[DiagnosticsReport, dict[str, list[RunCurves]]], Any]] = {
    REWARD_HACKING: figure2, MODE_COLLAPSE: figure3, POLICY_CONCENTRATION: figure4, STABILITY: figure5,
}


def write_figures(report: DiagnosticsReport, runs: Sequence[RunCurves], out_dir: str) -> list[str]:
    """Figures 2-5 as ``figure{2..5}.pdf`` and ``.png`` in ``out_dir``; returns the paths written."""
    runs_by_model: dict[str, list[RunCurves]] = {}
    for curves in runs:
        runs_by_model.setdefault(curves.model, []).append(curves)
    for model in runs_by_model:
        runs_by_model[model].sort(key=lambda r: r.G or 0)
    written = []
    for diagnostic, draw in FIGURES.items():
        fig = draw(report, runs_by_model)
        base = os.path.join(out_dir, FIGURE_NAMES[diagnostic])
        save_pdf_png(fig, base + ".pdf", base + ".png")
        written += [base + ".pdf", base + ".png"]
    return written
