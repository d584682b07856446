"""The damped trend, the forecasting competitions' standard, measured against the forecaster on the dev curves
(docs/forecast-history.md, "A damped trend, measured"; session 37, dev only, never the holdout).

Every choice so far that reached past the forecaster's laws (the corpus's analogs, a backtest inside the window,
combinations of the panel, an affine correction, a logistic law) failed on the real dev logs the same way: the
fitted curves extrapolate an early rise too far, while the real runs bend over sooner. The forecasting
competitions' standard answer to a trend that must not be extrapolated is the additive damped trend (Gardner and
McKenzie 1985; one of the strongest single methods of the M3 and M4 competitions): exponential smoothing of a level
and a slope whose slope decays by a factor ``phi < 1`` per step ahead, so the forecast rises by at most
``b phi / (1 - phi)`` from the level it has smoothed, anchored on the recent window rather than a global law.
Here it is statsmodels' ``ETSModel(error="add", trend="add", damped_trend=True)``, fitted by maximum likelihood to
the early window's points (its index taken as the time, the held-out steps mapped to index units by the median
logging interval), its mean clipped to a declared reward range, its mean-curve s.d. the forecast variance less the
one-step noise variance (ETS(A,Ad,N)'s ``sigma^2 sum c_j^2``).

Scored with the benchmark's own protocol at f = 0.25 (:func:`backtest_choice.score_on_dev`): the forecaster, the
damped trend alone, and the two combined with equal weights (:func:`backtest_choice.mixture`).

The rule for keeping one as the forecaster's, declared before it was run (the one of "A backtest inside the
window"): on the real dev curves at f = 0.25 the mean-curve error over persistence's must fall both where the
reference moves and over every curve, and the plateau error must not grow in either; on the generated closed-form
and bandit dev curves neither may grow by more than 0.02. A damped trend that fails the rule but beats the
benchmark's best baseline on the real dev curves joins the benchmark's baselines, since the forecaster should be
judged against the strongest standard there is.

The result (session 37): not kept, nor added to the baselines. On the 179 real dev curves the damped trend's
mean-curve error is 0.944 of persistence's (0.964 where the reference moves; the forecaster 0.810 and 0.822, the
Domhan ensemble 0.937 and 0.964), its plateau error 0.965 (0.959; the forecaster 0.813 and 0.817, Domhan 0.941 and
0.967), its 80% interval covers 68% of the held-out values and 20% of the true plateaus; the equal-weight combination
0.872 (0.861) and 0.904 (0.895). On the 16 closed-form dev curves: 0.741 over every curve but 0.968 where the truth
moves (the forecaster 0.967 and 0.988), the true plateau inside its band on none; on the 65 bandit dev curves 0.796
and 0.803 where the truth moves (the forecaster 0.582 and 0.469). It does not beat the Domhan
ensemble, the benchmark's best baseline on the real dev curves, on both columns.

Run: ``python benchmarks/forecast/damped_trend.py real|closed|bandit [--workers N]`` (statsmodels, which the package
does not depend on: ``pip install statsmodels``).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backtest_choice import mixture, score_on_dev  # noqa: E402

from pgrpo.fit.baselines import _failed, _gaussian_predictive  # noqa: E402
from pgrpo.fit.benchmark import baseline_method, forecaster_method  # noqa: E402
from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402

#: the fewest early points a damped trend is fitted to
MIN_POINTS = 8


def damped_trend(t: np.ndarray, y: np.ndarray, steps: np.ndarray, reward_range=None, draws: int = 400,
                 seed: int = 0):
    """ETS(A,Ad,N) fitted to the early window ``(t, y)``, forecast at ``steps`` (a Predictive)."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    if y.size < MIN_POINTS:
        return _failed("damped trend", steps, f"damped trend: fewer than {MIN_POINTS} early points")
    dt = float(np.median(np.diff(t))) or 1.0
    ahead = np.maximum(np.rint((steps - t[-1]) / dt).astype(int), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = ETSModel(pd.Series(y), error="add", trend="add", damped_trend=True).fit(disp=False)
        prediction = fit.get_prediction(start=y.size, end=y.size + int(ahead.max()) - 1)
    mean = np.asarray(prediction.predicted_mean, float)[ahead - 1]
    variance = np.asarray(prediction.forecast_variance, float)[ahead - 1]
    noise = math.sqrt(max(float(fit.mse), 0.0))
    sd_mean = np.sqrt(np.maximum(variance - noise**2, 0.0))
    if reward_range is not None:
        mean = np.clip(mean, *reward_range)
    fitted = np.asarray(fit.fittedvalues, float)
    params = dict(zip(fit.param_names, map(float, fit.params)))
    return _gaussian_predictive("damped trend", steps, mean, sd_mean, noise, fitted, params, draws, seed)


def damped_method():
    def run(curve, t, y, steps, context):
        return damped_trend(t, y, steps, context.reward_range)

    return run


def combined_method(settings: ForecasterSettings):
    forecaster, damped = forecaster_method(settings), damped_method()

    def run(curve, t, y, steps, context):
        ours, theirs = forecaster(curve, t, y, steps, context), damped(curve, t, y, steps, context)
        if not theirs.success:
            return ours
        return mixture("forecaster + damped trend", [(0.5, ours), (0.5, theirs)])

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("part", nargs="?", default="real")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    settings = ForecasterSettings()
    score_on_dev(args.part, {"forecaster": forecaster_method(settings), "domhan": baseline_method("domhan"),
                             "damped trend": damped_method(),
                             "forecaster + damped trend": combined_method(settings)}, args.workers)


if __name__ == "__main__":
    main()
