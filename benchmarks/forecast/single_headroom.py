"""A lone reward's headroom in the band (docs/forecast-history.md, "A lone reward's headroom, measured and not
kept"; session 23, dev only, never the holdout).

The staged forecast (:mod:`pgrpo.fit.staged`) gives a reward function that has not started to rise by the cut its
headroom, up to its declared top, in half of the band's draws. Would the same help a reward logged as one curve with
a declared range (no reward functions), where the issue-21 coverage misses are (a sigmoid that has not taken off by
the cut)? Each such dev curve is forecast twice at f = 0.25: by the forecaster, and as a one-function staged sum
(``components = {"reward": (steps, values, its range)}``, so the benchmark's forecaster takes the staged path where
the curve waits). Curves: the generated closed-form dev families without reward functions (``closed``) or the real dev
logs with a declared range and no reward functions (``real``).

Run: ``python benchmarks/forecast/single_headroom.py closed|real``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.fit.benchmark import baseline_method, forecaster_method, run_protocol, summarize  # noqa: E402
from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402
from pgrpo.stages.forecast_benchmark import closed_form_corpus, real_corpus  # noqa: E402

FRACTION = 0.25
KEYS = ("mean_rmse_ratio", "moving_mean_rmse_ratio", "plateau_error_ratio", "moving_plateau_error_ratio",
        "coverage80", "plateau_covered80", "crps_ratio")


def dev_curves(part: str) -> list:
    if part == "closed":
        return [c for c in closed_form_corpus() if c.split == "dev" and not c.components]
    return [c for c in real_corpus(ROOT / "benchmarks/forecast/data") if c.split == "dev" and c.column == "reward"
            and not c.components and c.context.reward_range is not None]


def as_one_function(curve):
    """The curve as a staged sum of one function: itself, in its declared range."""
    return dataclasses.replace(curve, components={"reward": (curve.steps, curve.values,
                                                             tuple(curve.context.reward_range))})


def main(part: str) -> None:
    curves = dev_curves(part)
    settings = ForecasterSettings()
    persistence = baseline_method("persistence")
    rows = run_protocol(curves, {"persistence": persistence, "forecaster": forecaster_method(settings)},
                        fractions=(FRACTION,))
    rows += [r for r in run_protocol([as_one_function(c) for c in curves],
                                     {"persistence": persistence, "lone headroom": forecaster_method(settings)},
                                     fractions=(FRACTION,)) if r.get("method") != "persistence"]
    print(f"{len(curves)} {part} dev curves at f = {FRACTION}")
    for r in summarize([r for r in rows if r.get("success")], baselines=("persistence",)):
        if r["part"] == "overall" and r["split"] == "dev" and r["method"] in ("forecaster", "lone headroom"):
            print(r["method"].ljust(14), " ".join(f"{k} {r.get(k, np.nan):.3f}" for k in KEYS))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "real")
