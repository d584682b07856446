"""The failure-modes figure of one run (``modes.pdf/png`` of ``pgrpo diagnose LOG --out DIR``): the curves each mode
of :mod:`pgrpo.diagnose.modes` reads, against the logged step, with a dashed line at the onset of every flagged mode
and its episodes as shaded spans (an episode that lasts runs to the last logged step).

Panels: (a) train reward (and each reward function, thin), where no_learning and regression look; (b) the
zero-spread share ``frac_reward_zero_std`` (degeneracy, Figure 3 row 2); (c) entropy and KL (concentration, Figure 4);
(d) grad_norm, on a log axis unless more than a fifth of it is 0 (instability, Figure 5); (e) the clipped ratio or the mean completion length
(truncation). A panel whose column the log lacks says so. The title is the run's summary line.
"""

from __future__ import annotations

from typing import Any, Mapping

import matplotlib.pyplot as plt

from pgrpo.diagnose.modes.record import MODES
from pgrpo.grpo.run_log import REWARD_FUNCTION_MEAN
from pgrpo.diagnose.records import RunCurves
from pgrpo.figures.style import label_panel, save_pdf_png, style

PANELS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("reward", ("reward",), ("no_learning", "regression", "hacking", "oscillation")),
    ("zero-spread share", ("frac_reward_zero_std",), ("degeneracy",)),
    ("entropy / KL", ("entropy", "kl"), ("concentration",)),
    ("grad_norm", ("grad_norm",), ("instability",)),
    ("completions", ("completions/clipped_ratio", "completions/mean_length"),
     ("truncation", "length_collapse", "length_hacking")),
)

MODE_COLORS = dict(zip(MODES, ("#9467bd", "#8c564b", "#ff7f0e", "#d62728", "#7f7f7f", "#e377c2", "#17becf",
                               "#bcbd22", "#1f77b4", "#2ca02c")))


def modes_figure(curves: RunCurves, report: Mapping[str, Any]) -> Any:
    """The figure for ``curves`` and its diagnosis ``report`` (``DiagnosisReport.to_dict()``)."""
    modes = report.get("modes") or {}
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(7.0, 1.55 * len(PANELS)), sharex=True)
    for index, (ax, (title, columns, panel_modes)) in enumerate(zip(axes, PANELS)):
        drawn = []
        for k, column in enumerate(columns):
            if not curves.has(column):
                continue
            if title == "completions" and drawn:
                break  # the clipped ratio is enough (the length modes read the mean length: drawn when no ratio)
            steps, values, _ = curves.series(column)
            target = ax.twinx() if k == 1 and title == "entropy / KL" else ax
            if title == "grad_norm" and (values > 0).any() and (values <= 0).mean() <= 0.2:
                keep = values > 0  # a log axis: the few zeros are left out
                steps, values = steps[keep], values[keep]
                ax.set_yscale("log")
            target.plot(steps, values, lw=1.0, color="C0" if target is ax else "C1", label=column)
            if target is not ax:
                target.set_ylabel("KL", fontsize=7)
            drawn.append(column)
        if title == "reward":
            for column in curves.frame.columns:
                if REWARD_FUNCTION_MEAN.match(str(column)) and curves.has(column):
                    steps, values, _ = curves.series(column)
                    ax.plot(steps, values, lw=0.6, alpha=0.6, label=column.split("/")[1])
        if not drawn:
            ax.text(0.5, 0.5, f"{' and '.join(repr(c) for c in columns)} not logged", transform=ax.transAxes,
                    ha="center", va="center", color="0.4", fontsize=7)
        for mode in panel_modes:
            verdict = modes.get(mode) or {}
            if verdict.get("flagged") and verdict.get("onset_step") is not None:
                ax.axvline(verdict["onset_step"], color=MODE_COLORS[mode], ls="--", lw=1.1,
                           label=f"{mode} onset ({verdict['onset_step']:g})")
            if verdict.get("flagged"):
                last = report.get("last_step")
                for e in verdict.get("episodes") or []:
                    end = e["end"] if e.get("end") is not None else last
                    if end is not None:
                        ax.axvspan(e["start"], max(end, e["start"]), color=MODE_COLORS[mode], alpha=0.15, lw=0)
        ax.set_ylabel(title if title != "completions" else (drawn[0].split("/")[-1] if drawn else title), fontsize=7)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, fontsize=5.5, loc="best", ncol=2, frameon=False)
        label_panel(ax, index)
    axes[-1].set_xlabel("step")
    summary = (report.get("summary") or {}).get("line", "")
    fig.suptitle(summary if len(summary) < 110 else summary[:107] + "...", fontsize=7.5)
    fig.tight_layout()
    return fig


def write_modes_figure(curves: RunCurves, report: Mapping[str, Any], base: str) -> list[str]:
    """``base.pdf`` and ``base.png``; returns the paths."""
    with style():
        fig = modes_figure(curves, report)
        save_pdf_png(fig, base + ".pdf", base + ".png")
    plt.close(fig)
    return [base + ".pdf", base + ".png"]
