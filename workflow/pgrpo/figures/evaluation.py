"""The pass@k curves of Table 1's evaluations (Section 4.3, 5.7): pass@k against k = 1..n (the unbiased estimator
of Chen et al., 2021) per benchmark, one line per model and Table 1 column (Base, G=16, G=4), mean ± s.d. over
seeds. Section 4.3's argument that gains are real rather than a shift of the sampling temperature reads off the
curves: a trained column above the base at every k, not only at k = 1.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pgrpo.errors import InputError
from pgrpo.figures.style import BAND_ALPHA, color_for_G, label_panel, style

BASE_COLOR = "0.35"
MODEL_LINESTYLES = ["-", "--", ":", "-."]


def _column_order(columns: list[str]) -> list[str]:
    """Base first, then G descending (Table 1's order)."""
    trained = sorted((c for c in columns if c != "Base"), key=lambda c: -int(c.split("=")[1]))
    return (["Base"] if "Base" in columns else []) + trained


def passk_figure(frame: Any) -> Any:
    """One panel per benchmark (in the frame's order): pass@k in % against k, per (model, column) the mean over
    seeds with a ± s.d. band where there are several. ``frame``: :func:`pgrpo.stages.evaluate.passk_curves_frame`."""
    if frame is None or not len(frame):
        raise InputError("pass@k figure: no curves to draw")
    benchmarks = list(dict.fromkeys(frame["benchmark"]))
    models = list(dict.fromkeys(frame["model"]))
    ncols = len(benchmarks) if len(benchmarks) <= 5 else 4
    nrows = -(-len(benchmarks) // ncols)
    with style():
        fig, axes = plt.subplots(nrows, ncols, figsize=(2.3 * ncols + 0.4, 2.1 * nrows + 0.5), squeeze=False,
                                 sharey=False)
        for index, benchmark in enumerate(benchmarks):
            ax = axes[index // ncols][index % ncols]
            sub = frame[frame["benchmark"] == benchmark]
            for m_i, model in enumerate(models):
                per_model = sub[sub["model"] == model]
                for column in _column_order(list(dict.fromkeys(per_model["column"]))):
                    curves = per_model[per_model["column"] == column]
                    grouped = curves.groupby("k")["value"]
                    k = np.asarray(grouped.mean().index, dtype=float)
                    mean = 100.0 * grouped.mean().to_numpy(float)
                    sd = 100.0 * grouped.std(ddof=1).to_numpy(float)
                    color = BASE_COLOR if column == "Base" else color_for_G(int(column.split("=")[1]))
                    label = column if len(models) == 1 else f"{model} {column}"
                    ax.plot(k, mean, color=color, linestyle=MODEL_LINESTYLES[m_i % len(MODEL_LINESTYLES)],
                            marker="o", markersize=2.5, label=label)
                    band = np.isfinite(sd)
                    if band.any():
                        ax.fill_between(k[band], (mean - sd)[band], (mean + sd)[band], color=color, alpha=BAND_ALPHA,
                                        linewidth=0)
            n_problems = int(sub["n_problems"].max())
            ax.set_title(f"{benchmark} ({n_problems})")
            ax.set_xlabel("k")
            ks = sorted(set(sub["k"]))
            ax.set_xticks(ks if len(ks) <= 10 else ks[:: max(1, len(ks) // 8)])
            if index % ncols == 0:
                ax.set_ylabel("pass@k (%)")
            label_panel(ax, index)
        for extra in range(len(benchmarks), nrows * ncols):
            axes[extra // ncols][extra % ncols].set_visible(False)
        axes[0][0].legend(loc="lower right", frameon=False)
        fig.suptitle("pass@k against k (unbiased estimator; mean ± s.d. over seeds)", fontsize=8.5)
        fig.tight_layout()
    return fig
