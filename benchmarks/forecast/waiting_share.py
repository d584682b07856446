"""How often, and how far, a reward function still waiting to rise at the cut goes on to rise (docs/forecast-history.md,
"A waiting function's expected rise, measured and not kept"; session 22, the real dev logs only, never the holdout).

For each real dev log whose reward functions add up to its reward, cut at f = 0.25 as the forecast benchmark cuts
it: the functions that wait to rise there (:attr:`pgrpo.fit.staged.StagedForecast.waiting`: not started, headroom
above their level) and, at the run's end, whether each rose (its mean over the last 10% of steps has left its start
by the test that says a function started, :func:`pgrpo.fit.headroom.has_started`, and by more than a tenth of its
headroom) and the share of its headroom it realised, ``min(max(rise, 0) / headroom, 1)``. Per run: did one of its
waiting functions rise (the summed forecast's band draws that with :data:`pgrpo.fit.headroom.RISE_PROBABILITY`).

Run: ``python benchmarks/forecast/waiting_share.py [dev]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.fit.benchmark import cut, staged_forecasts  # noqa: E402
from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402
from pgrpo.fit.headroom import has_started  # noqa: E402
from pgrpo.stages.forecast_benchmark import real_corpus  # noqa: E402

FRACTION = 0.25


def main(split: str = "dev") -> None:
    if split != "dev":
        raise SystemExit("dev only: the holdout is kept out of every choice")
    curves = [c for c in real_corpus(ROOT / "benchmarks/forecast/data")
              if c.split == split and c.column == "reward" and c.components]
    staged_of = staged_forecasts(ForecasterSettings())
    runs = runs_rose = 0
    shares, rose = [], []
    for curve in curves:
        early, held = cut(curve, FRACTION)
        staged = staged_of(curve, curve.steps[early], curve.steps[held])
        if staged.prediction is None or not staged.waiting:
            continue
        runs += 1
        any_rose = False
        for fn in staged.waiting:
            steps, values, _ = curve.components[fn]
            tail = values[steps >= 0.9 * steps[-1]]
            record = staged.per_function[fn]
            rise = float(np.mean(tail)) - record.level_at_cut
            started = has_started(np.r_[values[steps <= curve.steps[early][-1]], tail], float(np.mean(tail)))
            did = bool(started and rise > 0.1 * record.headroom)
            rose.append(did)
            shares.append(min(max(rise, 0.0) / record.headroom, 1.0))
            any_rose |= did
        runs_rose += any_rose
    print(f"{split}: {runs} runs with a reward function waiting to rise at f = {FRACTION}; in {runs_rose} of them "
          f"one rose by the end ({runs_rose / max(runs, 1):.2f})")
    print(f"{len(rose)} waiting functions: {sum(rose)} rose ({np.mean(rose):.2f}); the mean share of its headroom "
          f"a waiting function realised: {np.mean(shares):.3f} (median {np.median(shares):.3f})")


if __name__ == "__main__":
    main(*sys.argv[1:2])
