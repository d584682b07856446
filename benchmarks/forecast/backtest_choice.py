"""Choosing the forecast by a backtest inside the early window (docs/forecast-history.md, "A backtest inside the window,
measured and not kept"; session 34, dev only, never the holdout).

The best of the benchmark's forecasts chosen per curve in hindsight (:data:`pgrpo.fit.benchmark.PANEL`) reaches
about 0.55 of persistence's mean-curve error on the real dev logs, the forecaster 0.81. Can the early window itself
say which forecast to trust? The textbook way (rolling-origin evaluation): cut the early window again at ``INNER``
of its steps, forecast its last part from its first with each forecast of the panel (the baselines and the
forecaster), and trust each forecast by how well it did there:

- ``backtest: best``: the forecast with the least inner RMSE, fitted again to the whole window;
- ``backtest: weights``: every forecast, its draws mixed in proportion to ``exp(-n (MSE - MSE_min) / (2 s^2))`` over
  the ``n`` inner held-out points (``s``: the window's noise s.d.; a Gaussian likelihood of those points relative to
  the best forecast's), its mean the mixture's.

The rule for keeping one, declared before it was run: on the real dev curves at f = 0.25, the mean-curve error over
persistence's must fall both where the reference moves and over every curve, and the plateau error must not grow in
either; and on the generated closed-form and bandit dev curves neither may grow by more than 0.02. The result (178
real dev curves): the mean-curve error 1.000 of persistence's for both (the forecaster's 0.810), the plateau's 1.000
and 1.009 (0.817): not kept, the first condition failing. With ``--combinations``, the same rule for three
equal-weight combinations (the forecasting competitions' remedy for estimated weights): the pointwise median of the
panel 0.928 and 0.950, the mean of the forecaster, exponential, sigmoid and Domhan 0.963 and 0.963, the forecaster
and Domhan 0.910 and 0.904: not kept either.

Run: ``python benchmarks/forecast/backtest_choice.py real|closed|bandit [--limit N] [--combinations] [--workers N]``
(the real dev curves: about 10 minutes on one core).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.fit.baselines import BASELINES, Predictive  # noqa: E402
from pgrpo.fit.benchmark import baseline_method, forecaster_method, run_protocol, summarize  # noqa: E402
from pgrpo.fit.forecaster import ForecasterSettings  # noqa: E402
from pgrpo.fit.intervals import rmse, robust_noise_sd  # noqa: E402

FRACTION = 0.25
#: the inner cut: the share of the early window's steps the backtest fits on
INNER = 0.5
#: the fewest early points a backtest is tried on (else the forecaster alone)
MIN_INNER = 6
KEYS = ("mean_rmse_ratio", "moving_mean_rmse_ratio", "plateau_error_ratio", "moving_plateau_error_ratio",
        "coverage80", "plateau_covered80", "crps_ratio")


def dev_curves(part: str) -> list:
    from pgrpo.stages.forecast_benchmark import bandit_corpus, closed_form_corpus, real_corpus

    if part == "closed":
        return [c for c in closed_form_corpus() if c.split == "dev"]
    if part == "bandit":
        return [c for c in bandit_corpus()[0] if c.split == "dev"]
    return [c for c in real_corpus(ROOT / "benchmarks/forecast/data") if c.split == "dev"]


def score_on_dev(part: str, methods: dict, workers: int = 1, limit: int | None = None) -> list[dict]:
    """Persistence and ``methods`` (name -> method) on the ``part``'s dev curves (the first ``limit``) at
    :data:`FRACTION`: prints one line of :data:`KEYS` per method (the summary's overall dev row, persistence as
    baseline) and returns the rows."""
    curves = dev_curves(part)[:limit]
    rows = run_protocol(curves, {"persistence": baseline_method("persistence"), **methods}, fractions=(FRACTION,),
                        workers=workers)
    print(f"{len(curves)} {part} dev curves at f = {FRACTION}")
    for r in summarize([r for r in rows if r.get("success")], baselines=("persistence",)):
        if r["part"] == "overall" and r["split"] == "dev" and r["method"] in methods:
            print(r["method"].ljust(26), " ".join(f"{k} {r.get(k, np.nan):.3f}" for k in KEYS))
    return rows


def compare_variant(name: str, variant: ForecasterSettings) -> None:
    """The command line of a script that compares one variant of the forecaster's settings with today's:
    ``PART [--workers N]`` (part ``real``, ``closed`` or ``bandit``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("part", nargs="?", default="real")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    score_on_dev(args.part, {"forecaster": forecaster_method(ForecasterSettings()),
                             name: forecaster_method(variant)}, args.workers)


def panel_methods(settings: ForecasterSettings) -> dict:
    """The forecasts the benchmark's hindsight panel chooses among, but the staged sum: the baselines and the
    forecaster."""
    return {name: baseline_method(name) for name in BASELINES} | {"forecaster": forecaster_method(settings)}


def mixture(method: str, parts: list[tuple[float, Predictive]], seed: int = 0) -> Predictive:
    """The draws of ``parts`` mixed in proportion to their weights; the mean the weighted mean of their means."""
    rng = np.random.default_rng(seed)
    weights = np.array([w for w, _ in parts], float)
    weights = weights / weights.sum()
    n = min(p.mean_draws.shape[0] for _, p in parts)
    counts = rng.multinomial(n, weights)
    mean_draws = np.concatenate([p.mean_draws[:k] for k, (_, p) in zip(counts, parts) if k])
    value_draws = np.concatenate([p.value_draws[:k] for k, (_, p) in zip(counts, parts) if k])
    mean = sum(w * p.mean for w, (_, p) in zip(weights, parts))
    intervals = {f"lo{lv}": np.quantile(value_draws, (1 - lv / 100) / 2, axis=0) for lv in (80, 95)}
    intervals |= {f"hi{lv}": np.quantile(value_draws, 1 - (1 - lv / 100) / 2, axis=0) for lv in (80, 95)}
    fitted = sum(w * p.fitted for w, (_, p) in zip(weights, parts))
    noise = float(sum(w * p.noise_sd for w, (_, p) in zip(weights, parts)))
    return Predictive(method, parts[0][1].steps, mean, intervals, mean_draws, value_draws, fitted, noise,
                      details={"weights": {p.method: float(w) for w, (_, p) in zip(weights, parts)}})


def backtest_method(settings: ForecasterSettings, how: str):
    panel = panel_methods(settings)

    def run(curve, t, y, steps, context):
        inner = t <= t[0] + INNER * (t[-1] - t[0])
        if inner.sum() < MIN_INNER or (~inner).sum() < 3:
            return panel["forecaster"](curve, t, y, steps, context)
        ev = context.eval_series
        inner_eval = None
        if ev is not None:
            keep = np.asarray(ev[0]) <= t[inner][-1]
            inner_eval = (np.asarray(ev[0])[keep], np.asarray(ev[1])[keep]) if keep.any() else None
        inner_context = dataclasses.replace(context, eval_series=inner_eval)
        errors = {}
        for name, method in panel.items():
            try:
                p = method(curve, t[inner], y[inner], t[~inner], inner_context)
                errors[name] = rmse(y[~inner], p.mean) if p.success else math.inf
            except Exception:  # a method that cannot fit the inner window is not trusted
                errors[name] = math.inf
        if how == "best":
            name = min(errors, key=errors.get)
            chosen = panel[name](curve, t, y, steps, context)
            return dataclasses.replace(chosen, method=f"backtest: {how}", details={"weights": {name: 1.0}})
        noise = robust_noise_sd(y)
        s2 = noise ** 2 if math.isfinite(noise) and noise > 0 else float(np.var(y)) or 1.0
        finite = {k: v for k, v in errors.items() if math.isfinite(v)}
        best = min(finite.values())
        n_inner = int((~inner).sum())
        parts = []
        for name, err in finite.items():
            w = math.exp(-n_inner * (err ** 2 - best ** 2) / (2 * s2))
            if w > 1e-3:
                p = panel[name](curve, t, y, steps, context)
                if p.success:
                    parts.append((w, dataclasses.replace(p, method=name)))
        return mixture(f"backtest: {how}", parts)

    return run


def combination_method(settings: ForecasterSettings, how: str, members: tuple[str, ...]):
    """The forecasts of ``members`` combined with equal weights: their draws mixed equally, the point forecast their
    pointwise mean (``how = "mean"``) or median (``"median"``: robust to one law's runaway extrapolation)."""
    panel = panel_methods(settings)

    def run(curve, t, y, steps, context):
        parts = []
        for name in members:
            p = panel[name](curve, t, y, steps, context)
            if p.success and np.all(np.isfinite(p.mean)):
                parts.append((1.0, dataclasses.replace(p, method=name)))
        mixed = mixture(f"combination: {how}", parts)
        if how == "median":
            mixed.mean = np.median(np.stack([p.mean for _, p in parts]), axis=0)
        return mixed

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("part", nargs="?", default="real")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--combinations", action="store_true", help="the equal-weight combinations instead")
    args = parser.parse_args()
    settings = ForecasterSettings()
    methods = {"forecaster": forecaster_method(settings), "backtest: best": backtest_method(settings, "best"),
               "backtest: weights": backtest_method(settings, "weights")}
    if args.combinations:
        methods = {"forecaster": methods["forecaster"],
                   "combination: median of all": combination_method(settings, "median", (*BASELINES, "forecaster")),
                   "combination: mean of fitted": combination_method(
                       settings, "mean", ("forecaster", "exponential", "sigmoid", "domhan")),
                   "combination: forecaster + domhan": combination_method(settings, "mean", ("forecaster", "domhan"))}
    rows = score_on_dev(args.part, methods, args.workers, args.limit)
    from collections import Counter

    chosen = Counter(r.get("mixture") for r in rows if r.get("method") == "backtest: best")
    if chosen:
        print("backtest: best chose", dict(chosen.most_common()))


if __name__ == "__main__":
    main()
