"""Dynamical stability (Section 5.5, Figure 5): growth and spikes of the gradient norm, the importance-sampling
ratio, and the margin to the Prop. 9 threshold ``K eta K_ref = 1 - mu`` when the run's settings are known.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pgrpo.diagnose.numerics import fit_three_phase_curve, fmt, least_squares_line, window_mask
from pgrpo.diagnose.records import (
    APPROACHING,
    INCONCLUSIVE,
    NOT_RUN,
    STABILITY,
    STABLE,
    UNSTABLE,
    DiagnosticResult,
    RunCurves,
)
from pgrpo.diagnose.settings import DiagnosticsConfig


def log_growth(steps: np.ndarray, values: np.ndarray) -> tuple[float, float, float]:
    """Over the last half of the step range: (slope of log value per step, growth factor ``exp(slope x half-span)``,
    R^2 of the log-linear fit). Non-positive values are dropped."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    keep = np.isfinite(steps) & np.isfinite(values) & (values > 0)
    steps, values = steps[keep], values[keep]
    if steps.size < 3:
        return float("nan"), float("nan"), float("nan")
    half = steps >= steps.min() + 0.5 * np.ptp(steps)
    slope, _, r2 = least_squares_line(steps[half], np.log(values[half]))
    span = float(np.ptp(steps[half])) if half.sum() else float("nan")
    return slope, math.exp(slope * span) if math.isfinite(slope) else float("nan"), r2


def spike_steps(steps: np.ndarray, values: np.ndarray, factor: float = 10.0, window: int = 10) -> np.ndarray:
    """Steps whose value exceeds ``factor`` x the median of the previous ``window`` logged values (at least 3)."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    previous = pd.Series(values).rolling(window, min_periods=min(3, window)).median().shift(1).to_numpy()
    hit = np.isfinite(previous) & (previous > 0) & (values > factor * previous)
    return steps[hit]


def stability_threshold(K: float, eta: float, mu: float, k_ref: float) -> dict[str, float]:
    """Prop. 9 (Eq. 11): ``K eta K_ref`` against ``1 - mu``; unstable iff the product exceeds it."""
    product = K * eta * k_ref
    return {"K": K, "eta": eta, "mu": mu, "k_ref": k_ref, "K_eta_Kref": product, "one_minus_mu": 1 - mu,
            "threshold_ratio": product / (1 - mu) if mu < 1 else float("inf")}


def stability(curves: RunCurves, config: DiagnosticsConfig | None = None,
              fits: Mapping[str, Any] | None = None) -> DiagnosticResult:
    """Figure 5 for one run: grad-norm growth and spikes, IS-ratio max plateau, and Prop. 9's margin."""
    config = config or DiagnosticsConfig()
    cfg = config.stability
    fits = dict(fits or {})
    missing = [c for c in ("grad_norm", "importance_sampling_ratio_max") if not curves.has(c)]
    meta = curves.meta or {}
    have_meta = all(isinstance(meta.get(k), (int, float)) for k in ("eta", "mu", "k_ref"))
    if len(missing) == 2 and not have_meta:
        return DiagnosticResult(STABILITY, curves.model, curves.G, NOT_RUN,
                                "columns 'grad_norm' and 'importance_sampling_ratio_max' missing and no meta.json "
                                "(eta, mu, k_ref)", missing=missing)
    numbers: dict[str, Any] = {"growth_unstable": cfg.growth_unstable, "growth_warning": cfg.growth_warning,
                               "spike_factor": cfg.spike_factor, "is_ratio_high": cfg.is_ratio_high}
    series: dict[str, Any] = {}
    unstable, warnings, fine = [], [], []
    too_few = []
    for column in ("grad_norm", "importance_sampling_ratio_max"):
        n = curves.series(column)[0].size
        if 0 < n < config.min_points:
            too_few.append(f"'{column}' has only {n} point(s) (need {config.min_points})")
    if curves.has("grad_norm") and curves.series("grad_norm")[0].size >= config.min_points:
        steps, grad, grad_sd = curves.series("grad_norm")
        slope, growth, r2 = log_growth(steps, grad)
        spikes = spike_steps(steps, grad, cfg.spike_factor, cfg.spike_window)
        numbers.update({"grad_log_slope": slope, "grad_growth_last_half": growth, "grad_log_r2": r2,
                        "n_spikes": int(spikes.size), "spike_steps": spikes[:20],
                        "grad_late_median": float(np.median(grad[window_mask(steps, 0.5, True)]))})
        series.update({"grad_steps": steps, "grad_progress": curves.progress(steps), "grad_norm": grad,
                       "grad_norm_sd": grad_sd})
        text = (f"grad_norm x{fmt(growth)} over the last half (log-linear R^2 {fmt(r2, 2)}; exponential at "
                f">= x{cfg.growth_unstable:g}), {spikes.size} spike(s) > {cfg.spike_factor:g}x rolling median")
        exponential = math.isfinite(growth) and growth >= cfg.growth_unstable and r2 >= cfg.growth_min_r2
        if exponential or spikes.size >= cfg.spikes_unstable:
            unstable.append(text)
        elif (math.isfinite(growth) and growth >= cfg.growth_warning) or spikes.size > 0:
            warnings.append(text)
        else:
            fine.append(text)
    if curves.has("importance_sampling_ratio_max") and \
            curves.series("importance_sampling_ratio_max")[0].size >= config.min_points:
        steps, ratio, ratio_sd = curves.series("importance_sampling_ratio_max")
        late = float(np.median(ratio[window_mask(steps, 0.5, True)]))
        _, growth, _ = log_growth(steps, ratio)
        numbers.update({"is_max_late_median": late, "is_max_growth_last_half": growth})
        series.update({"is_steps": steps, "is_progress": curves.progress(steps), "is_max": ratio,
                       "is_max_sd": ratio_sd})
        source = curves.column_sources.get("importance_sampling_ratio_max")
        src = f" [{source}]" if source and source != "importance_sampling_ratio_max" else ""
        text = (f"IS-ratio max late median {fmt(late)}{src}, x{fmt(growth)} over the last half "
                f"(diverging at >= {cfg.is_ratio_high:g}, rising at >= x{cfg.is_growth_warning:g})")
        if late >= cfg.is_ratio_high:
            unstable.append(text)
        elif math.isfinite(growth) and growth >= cfg.is_growth_warning:
            warnings.append(text)
        else:
            fine.append(text)
    if have_meta:
        K, K_source = cfg.K, "diagnostics.stability.K"
        if K is None and isinstance(meta.get("K"), (int, float)):
            K, K_source = float(meta["K"]), "meta.json K"
        if K is None:
            from pgrpo.fit.theory_link import stiffness_from_natural_frequency

            fit = fits.get("reward")
            if fit is None and curves.has("reward"):
                fit = fit_three_phase_curve(*curves.series("reward")[:2])
            if fit is not None and fit.success and getattr(fit, "n", config.min_points) >= config.min_points:
                K = stiffness_from_natural_frequency(fit.omega_n, float(meta["eta"]), float(meta["mu"]),
                                                     float(meta["k_ref"]))
                K_source = f"from the train reward's omega_n = {fmt(fit.omega_n)} (Eq. 9)"
        if K is not None and math.isfinite(K):
            prop9 = stability_threshold(K, float(meta["eta"]), float(meta["mu"]), float(meta["k_ref"]))
            prop9["K_source"] = K_source
            numbers["prop9"] = prop9
            text = (f"Prop. 9: K eta K_ref = {fmt(prop9['K_eta_Kref'])} vs 1 - mu = {fmt(prop9['one_minus_mu'])} "
                    f"(ratio {fmt(prop9['threshold_ratio'])}; K = {fmt(K)} {K_source})")
            if prop9["threshold_ratio"] >= 1:
                unstable.append(text)
            elif prop9["threshold_ratio"] >= cfg.threshold_warning:
                warnings.append(text)
            else:
                fine.append(text)
        else:
            fine.append("Prop. 9 not evaluated (no K: give diagnostics.stability.K, or a train reward the "
                        "three-phase law fits)")
    missing_text = [f"'{m}' missing" for m in missing]
    if not have_meta:
        missing_text.append("Prop. 9 not evaluated (no meta.json with eta, mu, k_ref)")
    parts = unstable + warnings + fine + too_few + missing_text
    verdict = UNSTABLE if unstable else APPROACHING if warnings else STABLE
    if "grad_growth_last_half" not in numbers and "is_max_late_median" not in numbers and "prop9" not in numbers:
        verdict = INCONCLUSIVE
    return DiagnosticResult(STABILITY, curves.model, curves.G, verdict, "; ".join(parts), numbers, series, missing)
