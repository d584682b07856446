"""The deep-network K_ref sweep the paper leaves to future work (Section 5.6, "Scope"; Section 6).

The same model is trained at several refresh intervals ``K_ref`` (TRL ``steps_per_generation x num_iterations``,
Eq. 3's ``theta_old = theta_{k - K_ref}``) and learning rates ``eta``. Each reward curve is read as the exact bandit
stage reads its trajectories (Figures 6-7), against the predictions of Theorem 7 with a stiffness measured once:

- **Two optimizer arms.** Theorem 7 describes the heavy-ball map (3): the primary arm trains with
  ``torch.optim.SGD`` (momentum ``mu``), whose ``eta`` is the learning rate. The Adam arm (``beta1 = mu``) is read
  against its effective heavy-ball step, ``(1 - beta1) lr`` over the root of Adam's second moment, measured from
  the optimizer state at every step (:mod:`pgrpo.grpo.effective_step`, ``log.csv``'s ``effective_learning_rate``;
  a run's ``eta`` is its median).
- **K from a stable baseline's early slope** (Section 5.6's protocol, Cor. 13): the single exponential of Eq. 14
  is fitted to the baseline's per-step train reward (its own run, ``K_ref = 1``); its rate
  ``lambda = K_eff / C_eff = eta K / ((1 - mu) - K eta K_ref)`` is inverted for ``K``, with the standard error of
  ``lambda`` carried to ``K``. The fit's R² is taken against the baseline's centred moving mean (the paper's R²
  of Figure 1 is against the seed-averaged curve): the share of the mean trajectory's variation Eq. 14 explains.
  ``K`` counts as measured when R² and K's relative standard error pass the configured bounds
  (:func:`stiffness_problem`); it is then held fixed.
- **A grid that brackets the prediction** (:func:`bracketing_grid`): with ``x = K eta K_ref`` and
  ``x* = 1 - mu``, learning-rate rows (:data:`GRID_ROWS`) on a ``K_ref`` ladder: ``baseline`` trains at the
  baseline's own learning rate (the one eta known to be stable at ``K_ref = 1``; its ``zeta = 1`` and threshold
  ``K_ref`` fall wherever the measured ``K`` puts them, and the baseline's own cell is not trained again),
  ``zeta1`` puts Eq. 10's ``zeta = 1`` between the ladder's first two ``K_ref`` (or ``x = span_lo x*`` at the
  smallest, the lower of the two), ``threshold`` puts Prop. 9's threshold between the ladder's last two, and ``top``
  reaches ``x = span_hi x*`` at the largest ``K_ref``. Every cell of a ``top`` row lies past the threshold once
  ``span_hi`` exceeds the ladder's ratio (then it adds no classifiable cell, only Prop. 9's collapse count).
- **Each run's regime**: the train reward is smoothed by a centred moving average of ``smoothing`` points; its
  target ``p*`` is the plateau of Eq. 14 fitted to the smoothed curve where that plateau lies inside the observed
  range (the fixed point, which a still-rising tail has not reached), else the mean of the run's last
  ``tail_fraction``; its start is the mean of the first ``smoothing`` points; and the labels are those of
  :func:`pgrpo.bandit.regimes.classify_regime` (monotone / overshoot / oscillatory) with the hysteresis tolerance
  set to ``noise_multiple`` standard errors of the smoothed curve (the per-point noise from the curve's first
  differences, :func:`pgrpo.fit.intervals.robust_noise_sd`, over sqrt(smoothing)) over the initial gap, at least the
  bandit stage's 1% (:data:`MIN_TOLERANCE`), so that sampling noise is not read as ringing. *collapsed*: the run
  ends below its start by more than that tolerance (learning undone), the deep-network face of a run that leaves its
  fixed point. A run whose rise is within the noise is *flat*: there is nothing to classify. A run that refreshes
  every ``K_ref`` steps logs its reward only on the steps that generate, so the window shrinks to keep four windows
  in the run.
- **The predictions** for each run (with its own ``eta``): the margin ``(1 - mu) - K eta K_ref`` of Prop. 9 (Eq. 11; negative:
  linearly unstable) and the damping ratio of Eq. 10 (``zeta < 1``: oscillatory onset). Agreement is counted
  between "monotone" and ``zeta >= 1`` with a positive margin, and between overshoot/oscillatory and the other
  side; a collapsed or flat run is outside what the linear model describes and is reported, not counted. Along
  each ``eta`` row the first non-monotone ``K_ref`` is set against Theorem 7's (the first ``K_ref`` of the ladder
  with ``zeta < 1`` or past the threshold), as the bandit's verdict reads its rows
  (:func:`pgrpo.bandit.verdict.row_frontier`).
  Beside each prediction, the overshoot of Eq. 8's step response from rest, ``exp(-pi zeta / sqrt(1 - zeta^2))`` of
  the gap for ``0 < zeta < 1`` (:func:`predicted_overshoot`), against the run's hysteresis tolerance: a predicted
  overshoot below the tolerance cannot be told from monotone in that run (reported, the count is not changed).

The importance-sampling ratio each run logged (``importance_sampling_ratio_max``, Figure 5 row 2) is summarised
beside it: the direct witness of the lag that erodes ``C_eff`` (Lemma 5).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from pgrpo import theory
from pgrpo.bandit.regimes import classify_regime
from pgrpo.fit.intervals import robust_noise_sd
from pgrpo.fit.laws import EXPONENTIAL
from pgrpo.fit.least_squares import fit_law
from pgrpo.fit.settings import smooth
from pgrpo.fit.theory_link import stiffness_from_saturation_rate

FLAT = "flat"
#: the smallest hysteresis tolerance, as a fraction of the initial gap: the bandit stage's default (Figure 7)
MIN_TOLERANCE = 0.01
#: the fewest logged reward values a run needs to be classified
MIN_POINTS = 8
COLLAPSED = "collapsed"


@dataclass(frozen=True)
class SweepRun:
    """One run of the sweep: its settings (from its ``meta.json``) and its logged curves."""

    name: str
    eta: float
    k_ref: float
    mu: float
    steps: np.ndarray
    reward: np.ndarray
    is_ratio_max: np.ndarray | None = None
    #: ``log.csv``'s ``effective_learning_rate`` (the map (3)'s eta the optimizer realised, per step)
    effective_eta: np.ndarray | None = None
    optimizer: str = "sgd"

    @property
    def map_eta(self) -> float:
        """The heavy-ball ``eta`` of the run: SGD's learning rate; Adam's median measured effective step (NaN when
        none was logged)."""
        if self.optimizer == "sgd":
            return self.eta
        logged = self.effective_eta[np.isfinite(self.effective_eta)] if self.effective_eta is not None else []
        return float(np.median(logged)) if len(logged) else float("nan")


@dataclass(frozen=True)
class StiffnessEstimate:
    """``K`` backed out of the baseline's saturation rate (Eq. 14); ``K`` is NaN with a ``message`` when the fit
    failed or the rate is not positive."""

    run: str
    K: float
    rate: float
    rate_se: float
    eta: float
    mu: float
    k_ref: float
    r0: float
    r_inf: float
    r2: float
    message: str
    K_se: float = float("nan")
    learning_rate: float = float("nan")  # the baseline's configured learning rate (eta is the map's)

    @property
    def relative_se(self) -> float:
        return self.K_se / self.K if self.K > 0 else float("nan")


@dataclass(frozen=True)
class RunRegime:
    """A run's observed regime beside the regime Theorem 7 predicts for it with the measured ``K``."""

    run: str
    eta: float
    k_ref: float
    label: str
    crossings: int
    overshoot: float
    start: float
    target: float
    noise_se: float
    tolerance: float
    k_eta_k_ref: float
    margin: float
    zeta: float
    predicted: str
    agrees: bool | None
    is_ratio_max_median: float
    is_ratio_max_max: float
    map_eta: float = float("nan")  # the heavy-ball eta the predictions use (SGD: eta; Adam: measured)
    predicted_overshoot: float = float("nan")  # Eq. 8's first overshoot from rest, a fraction of the gap

    @property
    def overshoot_resolvable(self) -> bool | None:
        """Whether Theorem 7's predicted overshoot exceeds this run's hysteresis tolerance (None: no tolerance,
        i.e. the run was not classified as rising)."""
        if not (math.isfinite(self.tolerance) and math.isfinite(self.predicted_overshoot)):
            return None
        return self.predicted_overshoot > self.tolerance

    def as_dict(self) -> dict[str, Any]:
        record = dict(asdict(self), overshoot_resolvable=self.overshoot_resolvable)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}


def measure_stiffness(run: SweepRun, smoothing: int = 1) -> StiffnessEstimate:
    """Fit Eq. 14 to the per-step train reward of ``run`` and invert its rate for ``K`` (standard error by the delta
    method); R² against the ``smoothing``-point centred mean of the reward (see the module docstring)."""
    ok = np.isfinite(run.reward)
    t, y = run.steps[ok].astype(float), run.reward[ok]
    eta = run.map_eta
    nan = float("nan")
    fit = fit_law(t - t[0] if t.size else t, y, EXPONENTIAL)
    if not fit.success:
        return StiffnessEstimate(run.name, nan, nan, nan, eta, run.mu, run.k_ref, nan, nan, nan,
                                 f"the exponential fit failed: {fit.message}", nan, run.eta)
    rate, rate_se = fit.params["lambda"], fit.stderr.get("lambda", nan)
    K = stiffness_from_saturation_rate(rate, eta, run.mu, run.k_ref)
    # dK/dlambda = K / (lambda (1 + lambda K_ref)): K's relative error is lambda's over (1 + lambda K_ref)
    K_se = K * rate_se / (rate * (1.0 + rate * run.k_ref)) if rate > 0 else nan
    mean_curve = smooth(y, smoothing)
    fitted = fit.params["R_inf"] - (fit.params["R_inf"] - fit.params["R0"]) * np.exp(-rate * (t - t[0]))
    total = float(np.sum((mean_curve - mean_curve.mean()) ** 2))
    r2 = 1.0 - float(np.sum((mean_curve - fitted) ** 2)) / total if total > 0 else nan
    message = "" if math.isfinite(K) and K > 0 else "the fitted rate gives no positive K"
    return StiffnessEstimate(run.name, K, rate, rate_se, eta, run.mu, run.k_ref, fit.params["R0"],
                             fit.params["R_inf"], r2, message, K_se, run.eta)


def stiffness_problem(estimate: StiffnessEstimate, min_r2: float = 0.8, max_relative_se: float = 0.25) -> str:
    """Why ``K`` does not count as measured (empty when it does): no fit, R² below ``min_r2``, or K's relative
    standard error above ``max_relative_se``."""
    if estimate.message:
        return estimate.message
    if not (estimate.r2 >= min_r2):
        return (f"the baseline's Eq. 14 fit explains R² = {estimate.r2:.3g} of its mean curve (< {min_r2:g}): its "
                "reward does not rise clearly enough to read K")
    if not (estimate.relative_se <= max_relative_se):
        return (f"K = {estimate.K:.4g} ± {estimate.K_se:.2g} has a relative standard error of "
                f"{estimate.relative_se:.0%} (> {max_relative_se:.0%})")
    return ""


@dataclass(frozen=True)
class KrefGrid:
    """The (eta, K_ref) cells chosen from a measured ``K`` (:func:`bracketing_grid`); ``learning_rates`` are the
    configured rates (``eta / eta_per_learning_rate``, three significant figures), one per ``etas`` row."""

    K: float
    mu: float
    etas: tuple[float, ...]
    learning_rates: tuple[float, ...]
    k_refs: tuple[int, ...]
    eta_per_learning_rate: float
    threshold_k_refs: tuple[float, ...]
    zeta1_k_refs: tuple[float, ...]
    #: the (learning rate, K_ref) of the baseline run itself: not trained again (None: every cell is)
    baseline_cell: tuple[float, int] | None = None

    @property
    def cells(self) -> list[tuple[float, int]]:
        return [(lr, k) for lr in self.learning_rates for k in self.k_refs if (lr, k) != self.baseline_cell]

    @property
    def span(self) -> tuple[float, float]:
        """The smallest and largest ``K eta K_ref`` of the trained cells, in units of ``1 - mu``."""
        per_lr = {lr: eta for lr, eta in zip(self.learning_rates, self.etas)}
        x = [self.K * per_lr[lr] * k / (1.0 - self.mu) for lr, k in self.cells]
        return min(x), max(x)


def _eta_at_zeta1(K: float, mu: float, k_ref: float) -> float:
    """The ``eta`` at which Eq. 10 gives ``zeta = 1`` at ``k_ref``: with ``y = K eta`` and ``x = y k_ref``,
    ``x^2 + 2 (1 - mu) x - (1 - mu)^2 + 2 y (1 + mu) = 0`` (:func:`pgrpo.theory.critical_damping_refresh_interval`)
    is a quadratic in ``y``."""
    a, b, c = k_ref ** 2, 2.0 * (1.0 - mu) * k_ref + 2.0 * (1.0 + mu), -(1.0 - mu) ** 2
    return (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a) / K


def _three_figures(value: float) -> float:
    return float(f"{value:.3g}")


#: the learning-rate rows :func:`bracketing_grid` can place (see the module docstring)
GRID_ROWS: tuple[str, ...] = ("baseline", "zeta1", "threshold", "top")


def bracketing_grid(K: float, mu: float, k_refs: Sequence[int], span: tuple[float, float] = (0.1, 10.0),
                    rows: Sequence[str] = ("zeta1", "threshold", "top"), eta_per_learning_rate: float = 1.0,
                    baseline_learning_rate: float | None = None, baseline_k_ref: int = 1) -> KrefGrid:
    """Learning rates that bracket Theorem 7's predictions on the ``k_refs`` ladder, one per named row of
    :data:`GRID_ROWS` (see the module docstring); rows that round to the same learning rate are trained once.

    ``eta_per_learning_rate``: the map's eta per unit of configured learning rate (1 for SGD; Adam's measured
    effective step over its learning rate on the baseline). ``baseline_learning_rate`` (needed by the ``baseline``
    row) and ``baseline_k_ref``: the baseline run's, whose own cell is left out of :attr:`KrefGrid.cells`."""
    ladder = sorted({int(k) for k in k_refs})
    if not (K > 0 and math.isfinite(K)) or not ladder or ladder[0] < 1 or not (0 <= mu < 1):
        raise ValueError(f"bracketing_grid: needs K > 0, 0 <= mu < 1 and K_ref >= 1 (K={K}, mu={mu}, {ladder})")
    chosen = set(rows)
    if not chosen <= set(GRID_ROWS) or len(chosen) < 2 or len(ladder) < 2 or not (0 < span[0] < 1 < span[1]):
        raise ValueError(f"bracketing_grid: at least two rows of {GRID_ROWS} (got {list(rows)}), at least two "
                         "K_ref, span (lo < 1 < hi)")
    if "baseline" in chosen and not (baseline_learning_rate is not None and baseline_learning_rate > 0):
        raise ValueError("bracketing_grid: the baseline row needs the baseline's learning rate (> 0)")
    x_star = 1.0 - mu
    placed = {
        "zeta1": min(span[0] * x_star / (K * ladder[0]), _eta_at_zeta1(K, mu, math.sqrt(ladder[0] * ladder[1]))),
        "threshold": x_star / (K * math.sqrt(ladder[-2] * ladder[-1])),  # Prop. 9 between the last two K_ref
        "top": span[1] * x_star / (K * ladder[-1]),
    }
    rates = {_three_figures(placed[row] / eta_per_learning_rate) for row in chosen if row != "baseline"}
    if "baseline" in chosen:
        rates.add(float(baseline_learning_rate))
    rates = tuple(sorted(rates))
    etas_used = tuple(lr * eta_per_learning_rate for lr in rates)
    threshold = tuple(float(theory.critical_refresh_interval(e, mu, K)) for e in etas_used)
    zeta1 = tuple(float(theory.critical_damping_refresh_interval(e, mu, K)) for e in etas_used)
    skipped = (float(baseline_learning_rate), int(baseline_k_ref)) if baseline_learning_rate is not None else None
    return KrefGrid(K, mu, etas_used, rates, tuple(ladder), eta_per_learning_rate, threshold, zeta1, skipped)


def predicted_overshoot(zeta: float) -> float:
    """The first overshoot of Eq. 8's step response from rest, as a fraction of the gap: ``exp(-pi zeta /
    sqrt(1 - zeta^2))`` for ``0 < zeta < 1``; 0 when ``zeta >= 1`` (no overshoot); 1 when ``zeta <= 0`` (the
    linear response does not decay); NaN when ``zeta`` is unknown."""
    if not math.isfinite(zeta):
        return float("nan")
    if zeta >= 1:
        return 0.0
    if zeta <= 0:
        return 1.0
    return math.exp(-math.pi * zeta / math.sqrt(1.0 - zeta * zeta))


def predicted_regime(zeta: float, margin: float) -> str:
    """Theorem 7's reading: unstable past Prop. 9's threshold, oscillatory below zeta = 1, else monotone."""
    if not (math.isfinite(zeta) and math.isfinite(margin)):
        return "unknown"
    if margin < 0:
        return "unstable"
    return "monotone" if zeta >= 1 else "oscillatory"


def classify_run(run: SweepRun, K: float, smoothing: int = 9, tail_fraction: float = 0.2,
                 noise_multiple: float = 2.0) -> RunRegime:
    """The observed regime of one run and Theorem 7's prediction for it (see the module docstring)."""
    ok = np.isfinite(run.reward)
    raw = run.reward[ok]
    nan = float("nan")
    # a run that refreshes every K_ref steps logs its reward only on the steps that generate: fewer points, so the
    # window shrinks to keep at least four windows in the run
    window = max(1, min(int(smoothing), raw.size // 4))
    if raw.size < MIN_POINTS:
        label, crossings, overshoot, start, target, noise_se, tol = "too short", 0, nan, nan, nan, nan, nan
    else:
        smoothed = smooth(raw, window)
        noise_se = robust_noise_sd(raw, ddof=1) / math.sqrt(window)
        start = float(np.mean(raw[:window]))
        tail = max(window, int(round(tail_fraction * raw.size)))
        target = float(np.mean(raw[-tail:]))
        gap = target - start
        band = max(noise_multiple * noise_se, MIN_TOLERANCE * abs(gap))
        if gap < -band:
            label, crossings, overshoot, tol = COLLAPSED, 0, 0.0, band / abs(gap)
        elif abs(gap) <= band:
            label, crossings, overshoot, tol = FLAT, 0, 0.0, nan
        else:
            steps = run.steps[ok].astype(float)
            plateau = fit_law(steps - steps[0], smoothed, EXPONENTIAL)
            if plateau.success and target <= plateau.params["R_inf"] <= max(raw):
                target = float(plateau.params["R_inf"])  # the fixed point p*, not a still-rising tail's mean
                gap = target - start
            tol = max(band / gap, MIN_TOLERANCE)
            regime = classify_regime(np.concatenate([[start], smoothed[window:]]), target, tolerance=tol)
            label, crossings, overshoot = regime.label, regime.crossings, regime.overshoot
    eta = run.map_eta
    x = K * eta * run.k_ref
    margin = (1.0 - run.mu) - x
    known = K > 0 and math.isfinite(K) and eta > 0
    zeta = float(theory.damping_ratio(eta, run.mu, K, run.k_ref)) if known else nan
    predicted = predicted_regime(zeta, margin)
    if predicted == "unknown" or label not in ("monotone", "overshoot", "oscillatory"):
        agrees: bool | None = None  # flat, too short, or collapsed: outside what the linear model describes
    else:
        agrees = (label == "monotone") == (predicted == "monotone")
    ratio = run.is_ratio_max[np.isfinite(run.is_ratio_max)] if run.is_ratio_max is not None else np.array([])
    return RunRegime(run.name, run.eta, run.k_ref, label, int(crossings), float(overshoot), start, target, noise_se,
                     float(tol), x, margin, zeta, predicted, agrees,
                     float(np.median(ratio)) if ratio.size else nan, float(np.max(ratio)) if ratio.size else nan, eta,
                     predicted_overshoot(zeta))


def baseline_of(runs: Sequence[SweepRun]) -> SweepRun:
    """The stable baseline of Section 5.6's protocol: the smallest ``eta``, then the smallest ``K_ref``."""
    if not runs:
        raise ValueError("no runs in the sweep")
    return min(runs, key=lambda r: (r.eta, r.k_ref))


def agreement(regimes: Sequence[RunRegime]) -> tuple[int, int]:
    """(runs whose label agrees with Theorem 7's prediction, runs where both could be read)."""
    judged = [r for r in regimes if r.agrees is not None]
    return sum(bool(r.agrees) for r in judged), len(judged)


@dataclass(frozen=True)
class EtaFrontier:
    """Along one learning-rate row: the first non-monotone ``K_ref`` observed (over its classifiable cells, after the
    first monotone one: :func:`pgrpo.bandit.verdict.row_frontier`) and the first Theorem 7 predicts on the ladder
    (``zeta < 1`` or past Prop. 9), beside the continuous ``zeta = 1`` and threshold ``K_ref``."""

    learning_rate: float
    eta: float
    observed_k_ref: float
    status: str
    predicted_k_ref: float
    zeta1_k_ref: float
    threshold_k_ref: float
    agrees: bool | None


def eta_frontiers(regimes: Sequence[RunRegime], K: float, mu: float) -> list[EtaFrontier]:
    """Per learning rate: the observed and predicted first non-monotone ``K_ref`` (``agrees`` None when the row has
    no monotone cell to leave, or K is unknown)."""
    from pgrpo.bandit.verdict import RANK, row_frontier

    out = []
    for lr in sorted({r.eta for r in regimes}):
        row = sorted((r for r in regimes if r.eta == lr), key=lambda r: r.k_ref)
        eta = float(np.median([r.map_eta for r in row]))
        read = [r for r in row if r.label in RANK]
        frontier = row_frontier(np.array([r.k_ref for r in read]), [r.label for r in read]) if read else None
        observed = frontier.exit_k_ref if frontier else float("nan")
        status = frontier.status if frontier else "no classifiable cell"
        predicted = next((r.k_ref for r in row if r.predicted not in ("monotone", "unknown")), float("nan"))
        known = K > 0 and math.isfinite(K) and eta > 0
        zeta1 = float(theory.critical_damping_refresh_interval(eta, mu, K)) if known else float("nan")
        threshold = float(theory.critical_refresh_interval(eta, mu, K)) if known else float("nan")
        if not known or status in ("never_monotone", "no classifiable cell"):
            agrees = None
        elif status == "censored":  # monotone to the end of the ladder: agrees when nothing non-monotone predicted
            agrees = not math.isfinite(predicted) or predicted > max(r.k_ref for r in read)
        else:
            agrees = observed == predicted
        out.append(EtaFrontier(lr, eta, observed, status, predicted, zeta1, threshold, agrees))
    return out


def beyond_threshold(regimes: Sequence[RunRegime]) -> tuple[int, int]:
    """(cells past Prop. 9's threshold that collapsed, cells past it): the linear model's divergence as the
    bounded deep network realises it."""
    past = [r for r in regimes if math.isfinite(r.margin) and r.margin < 0]
    return sum(r.label == COLLAPSED for r in past), len(past)
