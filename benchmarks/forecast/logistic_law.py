"""A logistic law among the forecaster's laws (docs/forecast-history.md, "A logistic law"; session 34, dev only,
never the holdout).

Under Adam the parameters move at a roughly constant speed whatever the gradient's size, so the logit of a success
rate moves at a constant speed and the rate itself follows a logistic in the step, with a take-off (its midpoint)
that may come after the cut. The forecaster's laws all rise fastest at the start or at a time their rate ties to it
(the three-phase law); :data:`pgrpo.fit.shape_grid.LOGISTIC` adds ``d(t) = (1 + e^{-r m}) / (1 + e^{r (t - m)})``
with its midpoint ``m`` at 0.2 to 1.25 times the cut (a take-off the window sees bend: a later one leaves the plateau
unidentified, and a first version with midpoints up to 3 times the cut drew its plateaus from that singular
covariance), averaged with the others by AICc.

The rule for keeping it, declared before it was run: at f = 0.25, on the real dev curves the mean-curve error over
persistence's must fall both where the reference moves and over every curve, and the plateau error must not grow in
either; on the generated closed-form and the bandit dev curves none of the four may grow by more than 0.02; and no
dev part's 80% coverage of the held-out values may leave 70-90% where it is inside today.

The result (178 real dev curves): the mean-curve error 0.810 -> 0.976 of persistence's (0.925 where the reference
moves), the plateau's 0.817 -> 0.972 (0.905): not kept, the first condition failing (the other parts were not run).

Run: ``python benchmarks/forecast/logistic_law.py real|closed|bandit [--workers N]`` (real: about 10 minutes on one
core).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backtest_choice import compare_variant  # noqa: E402  (beside this script)

from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402
from pgrpo.fit.shape_grid import LOGISTIC  # noqa: E402

if __name__ == "__main__":
    compare_variant("forecaster + logistic", ForecasterSettings(laws=(*ForecasterSettings().laws, LOGISTIC)))
