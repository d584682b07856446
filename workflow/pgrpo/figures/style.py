"""Figures, and the house plot style every figure of the workflow shares.

Paper: Figure 1 (Section 5.1): columns are models, rows are (train reward, eval reward, eval accuracy) x G, each
pair of rows G=4 above G=16; seed mean (solid) with a ± s.d. band, the three-phase fit of Prop. 14 (dotted), and the
in-panel R^2 measured against the seed-averaged curve. Also the forecast figure (beyond the paper): a run, the window
its forecast was fitted on, the extrapolated law with its parameter band, and the full-run fit.

Shared style for other stages' figures: :func:`style` (an rc context), :data:`G_COLORS` / :func:`color_for_G`,
:func:`label_panel`, :data:`COLUMN_LABELS` and :func:`save_pdf_png`.

"""

from __future__ import annotations

import string
from contextlib import contextmanager
from typing import Any, Iterator

import matplotlib
import matplotlib.pyplot as plt  # noqa: E402

from pgrpo.atomic import save_figure

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


def close_figure(fig: Any) -> None:
    """Release a figure's memory once it is saved."""
    plt.close(fig)


def save_pdf_png(fig: Any, out_pdf: str | None, out_png: str | None) -> None:
    """Save atomically as PDF and/or PNG, then close the figure."""
    try:
        for target in (out_pdf, out_png):
            if target:
                save_figure(fig, target, dpi=RC_PARAMS["savefig.dpi"], bbox_inches="tight")
    finally:
        plt.close(fig)
