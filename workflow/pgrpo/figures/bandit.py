"""Figures 6 and 7 of Section 5.6: the K_ref sweep of the exact bandit against Theorem 7, and the (eta, K_ref) regime
map against the Prop. 9 threshold and the zeta = 1 onset of Eq. 10.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pgrpo import bandit, theory
from pgrpo.bandit.settings import BanditSettings, Reading


def figure6(curves: pd.DataFrame, regimes: pd.DataFrame, settings: BanditSettings, calibration: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    readings = settings.readings
    ncols = min(2, len(readings))
    nrows = math.ceil(len(readings) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False, sharey=True)
    k_refs = settings.sweep.k_refs
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, len(k_refs)))
    p_star, p_ref = calibration["p_star"], calibration["p_ref"]
    lo, hi = p_ref, calibration["reward_max"]
    pad = 0.06 * (hi - lo)
    for ax, reading in zip(axes.ravel(), readings):
        sel = curves[(curves.refresh == reading.refresh) & (curves.gradient == reading.gradient)]
        reg = regimes[(regimes.refresh == reading.refresh) & (regimes.gradient == reading.gradient)]
        for color, k in zip(colors, k_refs):
            c = sel[sel.k_ref == k]
            label = reg.loc[reg.k_ref == k, "label"].iloc[0]
            ax.plot(c.t, c.p_exact, color=color, lw=1.6, label=f"K_ref={k} ({label})")
            predicted = c.p_theorem7.to_numpy().copy()
            outside = np.nonzero((predicted < lo - pad) | (predicted > hi + pad))[0]
            if outside.size:  # the linear prediction leaves the plotted range [p_ref, max r]: stop it there
                predicted[outside[0]:] = np.nan
                ax.plot(c.t.iloc[outside[0] - 1], predicted[outside[0] - 1], marker="x", color=color, ms=4)
            ax.plot(c.t, predicted, color=color, lw=1.0, ls="--")
        ax.axhline(p_star, color="k", ls=":", lw=1.0)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(f"{reading.refresh} refresh, {reading.gradient.replace('_', '-')} gradient", fontsize=9)
        ax.set_xlabel("optimizer step t")
        ax.legend(fontsize=6.5, loc="lower right", ncol=2)
    for ax in axes[:, 0]:
        ax.set_ylabel("p(t) = E_pi[R]")
    for ax in axes.ravel()[len(readings):]:
        ax.axis("off")
    s = settings.sweep
    fig.suptitle(f"Figure 6: exact softmax bandit (solid), Theorem 7 with measured K={calibration['stiffness']:.3f}"
                 f" (dashed, x = leaves [p_ref, max r]), p*={p_star:.3f} (dotted)\n"
                 f"eta={s.eta}, mu={s.mu}, beta={settings.beta}; labels: regime of the exact run over "
                 f"{max(s.steps, s.settle_steps)} steps", fontsize=9)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.08, top=0.89, wspace=0.06, hspace=0.38)
    return fig


# Figure 7
REGIME_COLORS = {"monotone": "#3b6fb6", "overshoot": "#2a9d8f", "oscillatory": "#f2cc4d", "collapsed": "#8c2d2d"}


def figure7(frame: pd.DataFrame, settings: BanditSettings, calibration: dict, reading: Reading):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    m = settings.regime_map
    stiffness = calibration["stiffness"]
    etas, k_refs = m.etas, m.k_refs
    codes = frame["label"].map({name: i for i, name in enumerate(bandit.REGIMES)}).to_numpy()
    grid = codes.reshape(etas.size, k_refs.size).T  # rows = K_ref, cols = eta
    ratio = np.sqrt(etas[1:] / etas[:-1])
    eta_edges = np.concatenate([[etas[0] / ratio[0]], etas[:-1] * ratio, [etas[-1] * ratio[-1]]])
    k_mid = (k_refs[1:] + k_refs[:-1]) / 2
    k_edges = np.concatenate([[k_refs[0] - (k_mid[0] - k_refs[0])], k_mid, [k_refs[-1] + (k_refs[-1] - k_mid[-1])]])
    fig, ax = plt.subplots(figsize=(6.0, 4.6))
    cmap = ListedColormap([REGIME_COLORS[name] for name in bandit.REGIMES])
    ax.pcolormesh(eta_edges, k_edges, grid, cmap=cmap, vmin=-0.5, vmax=len(bandit.REGIMES) - 0.5, shading="flat")
    unsettled = frame[(~frame["settled"].astype(bool)) & (frame["label"] != "collapsed")]
    if len(unsettled):
        ax.plot(unsettled["eta"], unsettled["k_ref"], "k.", ms=1.5, alpha=0.6)
    fine = np.geomspace(eta_edges[0], eta_edges[-1], 400)
    ax.plot(fine, theory.critical_refresh_interval(fine, m.mu, stiffness), "k-", lw=1.6)
    zeta1 = theory.critical_damping_refresh_interval(fine, m.mu, stiffness)
    ok = zeta1 > 0
    ax.plot(fine[ok], zeta1[ok], "k--", lw=1.4)
    ax.set_xscale("log")
    ax.set_xlim(eta_edges[0], eta_edges[-1])
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    ticks = [t for t in (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0) if eta_edges[0] <= t <= eta_edges[-1]]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(k_edges[0], k_edges[-1])
    ax.set_xlabel(r"learning rate $\eta$")
    ax.set_ylabel(r"refresh interval $K_{\mathrm{ref}}$")
    handles = [Patch(color=REGIME_COLORS[name], label=name) for name in bandit.REGIMES]
    handles += [Line2D([], [], color="k", lw=1.6, label=r"$K\eta K_{ref}=1-\mu$ (Prop. 9)"),
                Line2D([], [], color="k", lw=1.4, ls="--", label=r"$\zeta=1$ (Eq. 10)"),
                Line2D([], [], color="k", marker=".", ls="", ms=4, label="not settled at end")]
    ax.legend(handles=handles, fontsize=7, loc="upper right", framealpha=0.85)
    ax.set_title(f"Figure 7 ({reading.refresh} refresh, {reading.gradient.replace('_', '-')} gradient): "
                 f"$\\mu$={m.mu}, $\\beta$={settings.beta}, K={stiffness:.3f}", fontsize=9)
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.11, top=0.92)
    return fig


def _log_g_panel(ax, ylabel: str, title: str) -> None:
    """A finite-G panel on log-log axes against G (base 2), with its legend and title."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("G")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=6)
    ax.set_title(title, fontsize=9)


def finite_g_figure(report):
    """The finite-G bandit against Prop. 10 (Eq. 12): (a) the mean trajectory per G and the G -> infinity one,
    (b) the stationary variance against G with the fitted power law and the 1/G slope, (c) the measured variance
    against Eq. 12 with D measured per step, (d) sigma_adv and the zero-spread fraction against G (Section 5.3)."""
    import matplotlib.pyplot as plt

    from pgrpo.figures.style import color_for_G, style

    points = sorted(report.points, key=lambda pt: pt.G)
    gs = np.array([pt.G for pt in points], float)
    with style():
        fig, axes = plt.subplots(1, 4, figsize=(16.0, 3.8))
        ax = axes[0]
        for pt in points:
            ax.plot(pt.trajectory.mean, color=color_for_G(pt.G), lw=1.0, label=f"G={pt.G}")
        ax.axhline(report.p_star, color="k", ls=":", lw=1.0)
        ax.set_xlabel("step")
        ax.set_ylabel("replica mean of p(t)")
        ax.legend(fontsize=6, ncol=2)
        ax.set_title("(a) mean trajectory against G (dotted: p*)", fontsize=9)

        ax = axes[1]
        fl = np.array([pt.fluctuation.value for pt in points])
        fl_se = np.array([pt.fluctuation.se for pt in points])
        star = np.array([pt.about_p_star.value for pt in points])
        ax.errorbar(gs, fl, yerr=fl_se, fmt="o", color="#1f77b4", label="Var(p) about its own mean")
        ax.plot(gs, star, "s", color="#d62728", label="<(p - p*)^2>")
        fit = report.exponent_fluctuation
        ax.plot(gs, fit.prefactor * gs ** fit.exponent, "-", color="#1f77b4",
                label=f"fit: G^{fit.exponent:.2f} [{fit.ci[0]:.2f}, {fit.ci[1]:.2f}]")
        ax.plot(gs, fl[0] * (gs / gs[0]) ** -1.0, "k--", lw=1.0, label="1/G (Prop. 10)")
        _log_g_panel(ax, "stationary variance", "(b) the 1/G law")

        ax = axes[2]
        for name, marker in (("calibrated", "o"), ("linearised", "s"), ("local", "^")):
            checks = report.prefactor.get(name, ())
            ax.plot([c.G for c in checks], [c.ratio for c in checks], marker, label=f"K {name}")
        ax.axhline(1.0, color="k", lw=1.0)
        _log_g_panel(ax, "measured / D/(2 G C_eff K_eff)", "(c) Eq. 12 with D measured per step")

        ax = axes[3]
        sig = np.array([pt.noise.sigma_adv for pt in points])
        zero = np.array([pt.noise.zero_spread for pt in points])
        ax.plot(gs, sig, "o-", color="#2ca02c", label="sigma_adv (sample s.d. of a group)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("G")
        ax.set_ylabel("sigma_adv")
        twin = ax.twinx()
        twin.plot(gs, zero, "s--", color="#8c564b", label="zero-spread fraction")
        twin.set_ylabel("zero-spread fraction")
        lines = ax.get_legend_handles_labels()
        lines2 = twin.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=6, loc="center right")
        ax.set_title("(d) the residual G-dependence (Section 5.3)", fontsize=9)
        fig.tight_layout()
    return fig
