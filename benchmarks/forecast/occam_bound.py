"""The grid posterior's volume factor bounded by the amplitude prior (docs/forecast-history.md, "A bounded Occam
factor"; session 34, dev only, never the holdout).

Within a law, the forecaster draws its mean curves from the grid posterior: each grid point's profile likelihood
times the volume of its amplitudes' Gaussian, ``sqrt(det 2 pi C)`` (a Laplace approximation). Where the window cannot
tell the two amplitudes apart (a slow rate, a late take-off) that volume grows without bound, and such grid points
gain posterior weight beyond what a flat prior on the reward's range allows: their amplitudes are drawn from a
covariance wider than the range and clipped to it. ``ForecasterSettings(occam="bounded")`` caps the volume at the
prior's box, ``(hi - lo)^2``, where the range is known (declared, or the early window's span widened).

The rule for keeping it, declared before it was run: at f = 0.25, on the real dev curves the mean-curve error over
persistence's must fall both where the reference moves and over every curve, and the plateau error must not grow in
either; on the generated closed-form and the bandit dev curves none of the four may grow by more than 0.02; and no
dev part's 80% coverage of the held-out values may leave 70-90% where it is inside today.

The result: on the 178 real dev curves and the 16 generated closed-form dev curves every score is the same to
three decimals (real: mean-curve 0.810, plateau 0.817 of persistence's; closed-form: 0.967 and 0.974): with the
rates bounded by the window (``slowest_rate``), no grid point's volume reaches the box. Not kept (nothing to keep).

Run: ``python benchmarks/forecast/occam_bound.py real|closed|bandit [--workers N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backtest_choice import compare_variant  # noqa: E402  (beside this script)

from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402

if __name__ == "__main__":
    compare_variant("forecaster, bounded Occam", ForecasterSettings(occam="bounded"))
