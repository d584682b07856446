"""The deep-network counterpart of Figure 7 (one row per optimizer arm: heavy-ball SGD, Adam) (Section 5.6, "Scope"): each (eta, K_ref) run of the sweep placed by
its observed regime, against the Prop. 9 threshold ``K eta K_ref = 1 - mu`` (Eq. 11) and the ``zeta = 1`` onset of
Eq. 10 drawn with the K measured on the baseline; beside it every run's reward curve and the importance-sampling
ratio each run logged (Figure 5, row 2) against ``K eta K_ref``.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from pgrpo import theory
from pgrpo.figures.bandit import REGIME_COLORS
from pgrpo.figures.style import style
from pgrpo.fit.kref_sweep import COLLAPSED, FLAT, RunRegime, SweepRun

_COLORS = {**REGIME_COLORS, COLLAPSED: REGIME_COLORS.get("collapsed", "#7f7f7f"), FLAT: "#bbbbbb",
           "too short": "#ffffff"}


def kref_sweep_figure(runs: Sequence[SweepRun], regimes: Sequence[RunRegime], K: float, mu: float, smoothing: int):
    """Three panels: the regime map, the smoothed reward curves, the IS-ratio maximum against ``K eta K_ref``."""
    with style():
        fig, axes = plt.subplots(1, 3, figsize=(14.0, 4.2))
        _draw_arm(axes, runs, regimes, K, mu, smoothing, "")
        fig.tight_layout()
    return fig


def kref_sweep_arms_figure(arms: Sequence[tuple], smoothing: int):
    """One row of the three panels per optimizer arm: ``arms`` holds ``(name, runs, regimes, K, mu)``."""
    with style():
        fig, axes = plt.subplots(max(1, len(arms)), 3, figsize=(14.0, 4.2 * max(1, len(arms))), squeeze=False)
        for row, (name, runs, regimes, K, mu) in zip(axes, arms):
            if runs:
                _draw_arm(row, runs, regimes, K, mu, smoothing, f"[{name}] ")
            else:
                for ax in row:
                    ax.axis("off")
                row[1].text(0.5, 0.5, f"[{name}] K not measured: no grid trained", ha="center",
                            transform=row[1].transAxes)
        fig.tight_layout()
    return fig


def _draw_arm(axes, runs, regimes, K, mu, smoothing, prefix):
    """The map: x = the configured learning rate; K eta K_ref uses each run's map eta (Adam: measured)."""
    ax_map, ax_curves, ax_ratio = axes
    etas = np.array([r.eta for r in regimes])
    k_refs = np.array([r.k_ref for r in regimes])
    for r in regimes:
        ax_map.scatter(r.eta, r.k_ref, s=140, color=_COLORS.get(r.label, "#333333"), edgecolor="k", zorder=3)
        if r.agrees is False:
            ax_map.scatter(r.eta, r.k_ref, s=30, marker="x", color="k", zorder=4)
    if np.isfinite(K) and K > 0 and etas.size:
        per_lr = float(np.nanmedian([r.map_eta / r.eta for r in regimes]))  # map eta per learning rate
        fine = np.geomspace(etas.min() / 2, etas.max() * 2, 300)
        ax_map.plot(fine, theory.critical_refresh_interval(fine * per_lr, mu, K), "k-", lw=1.4)
        zeta1 = theory.critical_damping_refresh_interval(fine * per_lr, mu, K)
        ok = zeta1 > 0
        ax_map.plot(fine[ok], zeta1[ok], "k--", lw=1.2)
        ax_map.set_xlim(fine[0], fine[-1])
    ax_map.set_xscale("log")
    ax_map.set_yscale("log", base=2)
    if k_refs.size:
        ax_map.set_ylim(k_refs.min() / 1.6, k_refs.max() * 1.6)
    ax_map.set_xlabel(r"learning rate (configured)")
    ax_map.set_ylabel(r"refresh interval $K_{\mathrm{ref}}$")
    labels = sorted({r.label for r in regimes})
    handles = [Line2D([], [], marker="o", ls="", markersize=8, markerfacecolor=_COLORS.get(lab, "#333333"),
                      markeredgecolor="k", label=lab) for lab in labels]
    handles += [Line2D([], [], color="k", lw=1.4, label=r"$K\eta K_{ref}=1-\mu$ (Prop. 9)"),
                Line2D([], [], color="k", lw=1.2, ls="--", label=r"$\zeta=1$ (Eq. 10)"),
                Line2D([], [], color="k", marker="x", ls="", label="disagrees with Theorem 7")]
    ax_map.legend(handles=handles, fontsize=7, loc="best", framealpha=0.85)
    ax_map.set_title(f"{prefix}(a) regime of each run; K={K:.3g} (baseline), $\\mu$={mu}", fontsize=9)

    by_name = {r.run: r for r in regimes}
    cmap = plt.cm.viridis
    k_values = sorted({run.k_ref for run in runs})
    for run in runs:
        ok = np.isfinite(run.reward)
        if not ok.any():
            continue
        window = max(1, min(smoothing, int(ok.sum()) // 4))  # as the classification (sparse logging)
        smoothed = np.convolve(run.reward[ok], np.ones(window) / window, mode="valid")
        steps = run.steps[ok][window - 1:]
        color = cmap(k_values.index(run.k_ref) / max(1, len(k_values) - 1) * 0.9)
        etas_sorted = sorted({x.eta for x in runs})
        ls = ["-", "--", ":", "-."][etas_sorted.index(run.eta) % 4]
        ax_curves.plot(steps, smoothed, color=color, ls=ls, lw=1.2,
                       label=f"$\\eta$={run.eta:g}, K_ref={run.k_ref:g} ({by_name[run.name].label})")
    ax_curves.set_xlabel("optimizer step")
    ax_curves.set_ylabel(f"train reward ({smoothing}-step mean)")
    ax_curves.legend(fontsize=5.5, ncol=2, loc="best")
    ax_curves.set_title(f"{prefix}(b) reward curves", fontsize=9)

    x = np.array([r.k_eta_k_ref for r in regimes])
    y = np.array([r.is_ratio_max_max for r in regimes])
    med = np.array([r.is_ratio_max_median for r in regimes])
    colors = [_COLORS.get(r.label, "#333333") for r in regimes]
    ax_ratio.scatter(x, y, c=colors, edgecolor="k", s=60, label="max over the run", zorder=3)
    ax_ratio.scatter(x, med, c=colors, edgecolor="k", s=25, marker="s", label="median", zorder=3)
    ax_ratio.axvline(1 - mu, color="k", lw=1.2)
    shown = np.isfinite(x) & (x > 0) & np.isfinite(y) & (y > 0)
    if shown.any():  # no K measured (or no ratio logged): nothing to place on log axes
        ax_ratio.set_xscale("log")
        ax_ratio.set_yscale("log")
    else:
        ax_ratio.text(0.5, 0.5, "K not measured or no ratio logged", transform=ax_ratio.transAxes,
                      ha="center", fontsize=8)
    ax_ratio.set_xlabel(r"$K\eta K_{\mathrm{ref}}$ (threshold $1-\mu$: vertical line)")
    ax_ratio.set_ylabel("importance-sampling ratio max")
    ax_ratio.legend(fontsize=7)
    ax_ratio.set_title(f"{prefix}(c) the lag's witness (Figure 5, row 2)", fontsize=9)
