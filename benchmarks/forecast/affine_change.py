"""Regression to the mean in the forecast's change (docs/forecast-history.md, "An affine correction of the forecast
change, measured and not kept"; session 34, real dev only, never the holdout).

On the real dev curves at f = 0.25 the forecaster's errors run against its own forecast change (the plateau minus the
level at the cut, over the reward's range): where it forecasts a large rise the run rises less, where it forecasts
almost none many runs still rise by a fifth of their range. The textbook correction regresses the true change on the
forecast one, ``true ~ a * forecast + b``, here fitted leaving out each author's runs (so a run is never corrected by
its own study) and scored by the plateau error over persistence's, where the reference moves and over every curve.
The rule for keeping it, declared before it was run (the one of docs/forecast-history.md, "A waiting function's
expected rise"): both must fall.

The result (177 real dev curves, 122 whose reference moves): a = 0.42, b = 0.042 of the range; where the reference
moves the plateau error falls from 0.822 to 0.755 of persistence's, but over every curve it rises from 0.817 to 1.240:
the intercept moves every flat run away from its level. Not kept.

Run: ``python benchmarks/forecast/affine_change.py [--workers N]`` (about 10 minutes on one core).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backtest_choice import FRACTION, dev_curves  # noqa: E402

from pgrpo.fit.benchmark import baseline_method, cut, forecaster_method, run_protocol  # noqa: E402
from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402


def changes(curves, rows) -> list[dict]:
    """Per scored curve: its author, whether the reference moves, and the forecast and true changes from the level
    at the cut (persistence's level: the mean of the window's last 10%) over the reward's range."""
    by_id = {c.id: c for c in curves}
    out = []
    for row in rows:
        if row.get("method") != "forecaster" or not row.get("success") or "plateau_true" not in row:
            continue
        curve = by_id[row["curve"]]
        early, _ = cut(curve, FRACTION)
        y = curve.values[early]
        level = float(np.mean(y[-max(1, round(0.1 * y.size)):]))
        span = (float(np.diff(curve.context.reward_range)[0]) if curve.context.reward_range is not None
                else float(np.ptp(curve.values)) or 1.0)
        out.append({"author": curve.id.split("_")[0], "moves": bool(row["truth_moves"]),
                    "forecast": (row["plateau_forecast"] - level) / span, "true": (row["plateau_true"] - level) / span})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    curves = dev_curves("real")
    rows = run_protocol(curves, {"persistence": baseline_method("persistence"),
                                 "forecaster": forecaster_method(ForecasterSettings())},
                        fractions=(FRACTION,), workers=args.workers)
    table = changes(curves, rows)
    forecast = np.array([r["forecast"] for r in table])
    true = np.array([r["true"] for r in table])
    moves = np.array([r["moves"] for r in table])
    authors = np.array([r["author"] for r in table])
    corrected = np.empty_like(forecast)
    for i, author in enumerate(authors):
        others = authors != author
        (a, b), *_ = np.linalg.lstsq(np.c_[forecast[others], np.ones(others.sum())], true[others], rcond=None)
        corrected[i] = a * forecast[i] + b
    (a, b), *_ = np.linalg.lstsq(np.c_[forecast, np.ones(forecast.size)], true, rcond=None)
    persistence = np.abs(true)
    with np.errstate(divide="ignore", invalid="ignore"):
        ours, fixed = np.abs(forecast - true) / persistence, np.abs(corrected - true) / persistence
    print(f"{forecast.size} real dev curves at f = {FRACTION} ({moves.sum()} whose reference moves); "
          f"all of them: a = {a:.3f}, b = {b:.3f} of the range")
    print(f"plateau error / persistence's, where the reference moves: forecaster {np.median(ours[moves]):.3f}, "
          f"affine (leave an author out) {np.median(fixed[moves]):.3f}")
    print(f"plateau error / persistence's, every curve: forecaster {np.median(ours):.3f}, "
          f"affine (leave an author out) {np.median(fixed):.3f}")


if __name__ == "__main__":
    main()
