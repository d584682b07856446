"""Runs like yours: would the corpus forecast a run's plateau better than the forecaster's laws
(docs/forecast-history.md, "Runs like yours, measured and not kept"; session 22, real dev logs only, never the
holdout)?

For each real dev reward curve cut at f = 0.25: its early window smoothed (a moving average of an eighth of its
points) and sampled at nine points from 20% to 100% of the cut, the level at the cut (persistence's forecast in
``results/forecast/benchmark.csv``) subtracted, divided by a scale (the window's noise s.d. from its first
differences, :func:`pgrpo.fit.intervals.robust_noise_sd`, or its span). The nearest dev curves by that shape (RMS
distance), other authors' only, each carry their own later rise in the same units (the denoised reference's plateau
minus their level at the cut); the median of ``k`` of them, scaled back, is the forecast. Scored as the benchmark
scores the plateau: the median over the curves whose truth moves of |forecast - true plateau| / |level at the cut -
true plateau|, beside the forecaster's own plateau and a blend of the two. Then the forecaster's change from the
level at the cut multiplied by one factor.

Run after the main job's forecast benchmark: ``python benchmarks/forecast/analogs.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.fit.intervals import robust_noise_sd  # noqa: E402
from pgrpo.stages.forecast_benchmark import real_corpus  # noqa: E402

FRACTION = 0.25


def early_shapes(benchmark_csv: Path, data_dir: Path) -> list[dict]:
    scores = pd.read_csv(benchmark_csv, low_memory=False)
    scores = scores[(scores.part == "real") & (scores.fraction.sub(FRACTION).abs() < 1e-9)]
    forecaster = scores[scores.method == "forecaster"].set_index("curve")
    persistence = scores[scores.method == "persistence"].set_index("curve")
    out = []
    for curve in real_corpus(data_dir):
        if curve.split != "dev" or curve.column != "reward" or curve.id not in forecaster.index:
            continue
        cut = FRACTION * curve.steps[-1]
        early = curve.steps <= cut
        steps, values = curve.steps[early], curve.values[early]
        if steps.size < 5:
            continue
        width = max(3, steps.size // 8)
        smooth = np.convolve(values, np.ones(width) / width, mode="valid")
        shape = np.interp(np.linspace(0.2, 1.0, 9) * cut, steps[width - 1:], smooth)
        out.append({"author": curve.id.split("_")[0], "level": persistence.loc[curve.id, "plateau_forecast"],
                    "true": forecaster.loc[curve.id, "plateau_true"],
                    "forecast": forecaster.loc[curve.id, "plateau_forecast"],
                    "moves": forecaster.loc[curve.id, "truth_moves"] > 0, "shape": shape,
                    "noise": max(robust_noise_sd(values), 1e-12),
                    "span": float(np.ptp(smooth)) + 1e-12})
    return out


def analog_scores(curves: list[dict], scale: str, k: int) -> tuple[float, float, float, int]:
    """Median plateau error over persistence's of the analogs, the forecaster and their mean."""
    analog, own, blend = [], [], []
    for c in curves:
        if not c["moves"]:
            continue
        query = (c["shape"] - c["level"]) / c[scale]
        near = sorted((float(np.sqrt(np.mean((query - (o["shape"] - o["level"]) / o[scale]) ** 2))),
                       (o["true"] - o["level"]) / o[scale]) for o in curves if o["author"] != c["author"])
        forecast = c["level"] + c[scale] * float(np.median([rise for _, rise in near[:k]]))
        base = abs(c["level"] - c["true"])
        analog.append(abs(forecast - c["true"]) / base)
        own.append(abs(c["forecast"] - c["true"]) / base)
        blend.append(abs(0.5 * (forecast + c["forecast"]) - c["true"]) / base)
    return float(np.median(analog)), float(np.median(own)), float(np.median(blend)), len(analog)


def main() -> None:
    curves = early_shapes(ROOT / "results/forecast/benchmark.csv", ROOT / "benchmarks/forecast/data")
    print("scale  k  analogs  forecaster  blend  curves")
    for scale in ("noise", "span"):
        for k in (3, 5, 10, 20):
            a, f, b, n = analog_scores(curves, scale, k)
            print(f"{scale:5s} {k:2d}  {a:7.3f}  {f:10.3f}  {b:5.3f}  {n}")
    moving = [c for c in curves if c["moves"]]
    for factor in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
        ratios = [abs(c["level"] + factor * (c["forecast"] - c["level"]) - c["true"]) / abs(c["level"] - c["true"])
                  for c in moving]
        print(f"the forecaster's change x{factor}: plateau error {np.median(ratios):.3f} of persistence's")


if __name__ == "__main__":
    main()
