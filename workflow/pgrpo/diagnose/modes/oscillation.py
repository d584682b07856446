"""Oscillation: the reward rings, the failure Theorem 7 predicts at ``zeta < 1`` (Eq. 10; Prop. 9 at ``zeta <= 0``),
read as a periodic component beyond the noise and set beside the theorem's prediction where the run's settings are
known.

The test, on the train reward and on the eval reward (``reward_hacking.eval_columns``) where logged:

1. The trend: the three-phase law of Eq. 16 from rest, ``R_inf - (R_inf - R0)(1 + w t) e^{-w t}`` (a monotone
   approach: the overdamped and critical cases have no ringing), by least squares; a quadratic if it fails. Points
   are put on a regular grid of the median logging interval first (linear interpolation).
2. The periodogram of the residual ``r`` at the Fourier frequencies the log resolves: periods from
   ``oscillation.min_period_points`` logged points up to the span over ``min_cycles``.
3. The null is red noise, an AR(1) process: its lag-1 coefficient ``phi`` and innovation variance are estimated from
   the residual after the largest periodic component is taken out (an oscillation would otherwise inflate ``phi``),
   and the periodogram ordinate ``P_k`` over the AR(1) spectrum ``S_k = s_e^2 / (1 - 2 phi cos w_k + phi^2)`` is
   Exp(1) under the null; the largest of ``M`` ordinates has the false-alarm probability ``1 - (1 - e^{-x})^M``,
   flagged below ``significance``.
4. Its period, damping and amplitude: the trend and a damped cosine ``A e^{-g (t - t0)} cos(w (t - t0) + phi)`` fitted
   together (scipy ``curve_fit``, started at the peak); period ``2 pi / w``, damping ratio ``g / sqrt(g^2 + w^2)``
   (that of the pole pair ``-g +- i w``). The component must also be large enough to matter: ``A`` at least
   ``amplitude_over_noise`` x the per-point noise s.d. (a swing smaller than one logged point's batch noise is not
   what a reader of the curve calls ringing, even where a long run makes it significant), and visible (envelope above that level) for ``min_visible_cycles`` cycles. A plateau wobble within the noise
   fails the test or the amplitude; a regression (one fall) has no two cycles; a period within
   ``refresh_tolerance`` of a known periodic refresh (``meta`` ``ref_model_sync_steps``/``refresh_period``) is the
   refresh's sawtooth, reported and not flagged.

Theorem 7's prediction, where ``eta``, ``mu`` and ``k_ref`` are known (``meta.json``, a TRL ``trainer_state.json``'s
args, ``pgrpo diagnose --lr --beta1 --k-ref``) with a stiffness ``K`` (``diagnostics.stability.K``, ``meta`` ``K``,
else Figure 5's, from the reward's fitted ``omega_n``): ``zeta`` (Eq. 10), ``omega_d = omega_n sqrt(1 - zeta^2)``
and its period ``2 pi / omega_d``, the Prop. 9 margin ``K eta K_ref / (1 - mu)`` and the exact delayed map's
dominant-root period; they agree with the observation when the predicted regime rings and its period is within
``agreement`` of the observed one.

Episodes: from the first step where the fitted envelope is above the amplitude level to the step where it falls
below it (null while it is still above at the last step).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import curve_fit

from pgrpo.diagnose.modes.record import OSCILLATION, ModeVerdict, clear, episode, flagged, not_run
from pgrpo.diagnose.modes.signals import curve, missing_reason, noise_sd
from pgrpo.diagnose.numerics import fmt
from pgrpo.diagnose.records import DiagnosticResult, RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig


def _trend(t: np.ndarray, r0: float, r_inf: float, w: float) -> np.ndarray:
    return r_inf - (r_inf - r0) * (1 + w * t) * np.exp(-w * t)


def _ring(t: np.ndarray, a: float, g: float, w: float, phase: float) -> np.ndarray:
    return a * np.exp(-g * t) * np.cos(w * t + phase)


def fit_trend(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, str, np.ndarray]:
    """(trend values, which trend, its parameters): Eq. 16 from rest, else a quadratic."""
    span = max(float(t[-1]), 1e-12)
    head, tail = float(np.mean(y[: max(2, y.size // 10)])), float(np.mean(y[-max(2, y.size // 5):]))
    try:
        with np.errstate(all="ignore"):
            params, _ = curve_fit(_trend, t, y, p0=[head, tail, 5.0 / span],
                                  bounds=([-np.inf, -np.inf, 1e-3 / span], [np.inf, np.inf, 1e3 / span]),
                                  maxfev=4000)
        fitted = _trend(t, *params)
        if np.all(np.isfinite(fitted)):
            return fitted, "three-phase (Eq. 16)", params
    except (RuntimeError, ValueError):
        pass
    coef = np.polyfit(t, y, 2)
    return np.polyval(coef, t), "quadratic", coef


def ar1(residual: np.ndarray) -> tuple[float, float]:
    """(phi, innovation variance) of an AR(1) fitted by the lag-1 autocorrelation, phi in [0, 0.95]."""
    r = residual - residual.mean()
    var = float(np.mean(r ** 2))
    if var <= 0:
        return 0.0, 0.0
    phi = float(np.clip(np.mean(r[1:] * r[:-1]) / var, 0.0, 0.95))
    return phi, var * (1 - phi ** 2)


def spectral_test(residual: np.ndarray, k_lo: int, k_hi: int) -> dict[str, Any]:
    """The largest periodogram ordinate in ``k_lo..k_hi`` against the AR(1) null (module docstring, step 3)."""
    n = residual.size
    r = residual - residual.mean()
    power = np.abs(np.fft.rfft(r)) ** 2 / n
    ks = np.arange(k_lo, k_hi + 1)
    k_peak = int(ks[np.argmax(power[ks])])
    # the null from the residual without the peak's sinusoid
    t = np.arange(n)
    basis = np.c_[np.cos(2 * np.pi * k_peak * t / n), np.sin(2 * np.pi * k_peak * t / n)]
    coef, *_ = np.linalg.lstsq(basis, r, rcond=None)
    phi, s2 = ar1(r - basis @ coef)
    omega = 2 * np.pi * ks / n
    null = s2 / (1 - 2 * phi * np.cos(omega) + phi ** 2) if s2 > 0 else np.full(ks.size, 1e-300)
    ratio = power[ks] / null
    x = float(ratio[ks == k_peak][0])
    m = ks.size
    with np.errstate(divide="ignore"):
        p_value = float(-np.expm1(m * np.log1p(-math.exp(-x)))) if x < 700 else 0.0
    return {"k_peak": k_peak, "power_over_null": x, "p_value": p_value, "phi": phi, "n_frequencies": int(m),
            "period_points_peak": n / k_peak}


def _joint(t: np.ndarray, r0, r_inf, w_n, a, g, w, phase):
    return _trend(t, r0, r_inf, w_n) + _ring(t, a, g, w, phase)


def ring_fit(t: np.ndarray, y: np.ndarray, trend_kind: str, trend_params: np.ndarray, residual: np.ndarray,
             period0: float) -> dict[str, Any] | None:
    """Trend + damped cosine fitted together, started at the spectral peak (module docstring, step 4)."""
    w0 = 2 * np.pi / period0
    basis = np.c_[np.cos(w0 * t), np.sin(w0 * t)]
    (c, s), *_ = np.linalg.lstsq(basis, residual, rcond=None)
    a0, ph0 = float(math.hypot(c, s)), float(math.atan2(-s, c))
    span = float(t[-1]) or 1.0
    try:
        with np.errstate(all="ignore"):
            if trend_kind.startswith("three"):
                params, _ = curve_fit(_joint, t, y, p0=[*trend_params, a0, 0.0, w0, ph0], maxfev=20000,
                                      bounds=([-np.inf, -np.inf, 1e-3 / span, 0, -2.0 / span, 0.5 * w0, -np.inf],
                                              [np.inf, np.inf, 1e3 / span, np.inf, 10 * w0, 1.5 * w0, np.inf]))
                ring = params[3:]
            else:
                ring, _ = curve_fit(_ring, t, residual, p0=[a0, 0.0, w0, ph0], maxfev=20000,
                                    bounds=([0, -2.0 / span, 0.5 * w0, -np.inf], [np.inf, 10 * w0, 1.5 * w0, np.inf]))
    except (RuntimeError, ValueError):
        return None
    a, g, w, _ = (float(v) for v in ring)
    return {"amplitude": a, "decay_rate": g, "omega": w, "period": 2 * np.pi / w,
            "damping_ratio": g / math.hypot(g, w)}


def ringing(steps: np.ndarray, values: np.ndarray, config: DiagnosticsConfig) -> dict[str, Any]:
    """The oscillation read-out of one curve: the spectral test and, when it passes, the fitted component (steps)."""
    cfg = config.modes.oscillation
    dt = float(np.median(np.diff(steps)))
    grid = np.arange(steps[0], steps[-1] + dt / 2, dt)
    y = np.interp(grid, steps, values)
    n = grid.size
    t = grid - grid[0]
    k_lo, k_hi = max(1, int(math.ceil(cfg.min_cycles))), int(n // cfg.min_period_points)
    out: dict[str, Any] = {"n_points": int(n), "logging_interval": dt,
                           "periods_tested": [n * dt / max(k_hi, 1), n * dt / k_lo]}
    if k_hi < k_lo:
        out.update(ok=False, why=f"{n} points resolve no period of {cfg.min_period_points} points with "
                                 f"{cfg.min_cycles:g} cycles")
        return out
    trend, kind, params = fit_trend(t, y)
    residual = y - trend
    test = spectral_test(residual, k_lo, k_hi)
    out.update(ok=True, trend=kind, **test)
    out["significant"] = test["p_value"] < cfg.significance
    sd = noise_sd(values)
    out["noise_sd"] = sd
    if not out["significant"]:
        return out
    fit = ring_fit(t, y, kind, params, residual, test["period_points_peak"] * dt)
    if fit is None:
        out["significant"] = False
        out["why"] = "the damped cosine did not fit"
        return out
    out.update(fit)
    level = cfg.amplitude_over_noise * sd
    out["amplitude_threshold"] = level
    envelope = fit["amplitude"] * np.exp(-fit["decay_rate"] * t)
    above = np.flatnonzero(envelope >= level)
    if above.size:
        out["visible_from"] = float(grid[above[0]])
        out["visible_to"] = None if above[-1] == n - 1 else float(grid[above[-1]])
        out["cycles_visible"] = float((grid[above[-1]] - grid[above[0]]) / fit["period"])
    else:
        out["cycles_visible"] = 0.0
    out["margin"] = min(fit["amplitude"] / level if level > 0 else 10.0,
                        math.log(max(cfg.significance, 1e-300)) / math.log(max(test["p_value"], 1e-300))
                        if test["p_value"] > 0 else 10.0) if level > 0 else 10.0
    out["rings"] = bool(fit["amplitude"] >= level and out["cycles_visible"] >= cfg.min_visible_cycles)
    return out


def theorem7(curves: RunCurves, config: DiagnosticsConfig, figure5: DiagnosticResult | None) -> dict[str, Any] | None:
    """Theorem 7's prediction for the run's settings (module docstring), or None when they are not known."""
    from pgrpo.theory.closed_forms import coefficients

    meta = curves.meta or {}
    if not all(isinstance(meta.get(k), (int, float)) and not isinstance(meta.get(k), bool)
               for k in ("eta", "mu", "k_ref")):
        return None
    K, source = config.stability.K, "diagnostics.stability.K"
    if K is None and isinstance(meta.get("K"), (int, float)):
        K, source = float(meta["K"]), "meta K"
    if K is None and figure5 is not None and (figure5.numbers.get("prop9") or {}).get("K"):
        K, source = float(figure5.numbers["prop9"]["K"]), figure5.numbers["prop9"].get("K_source", "Figure 5")
    if K is None or not K > 0:
        return {"eta": meta["eta"], "mu": meta["mu"], "k_ref": meta["k_ref"], "K": None,
                "why": "no stiffness K (give diagnostics.stability.K or meta K)"}
    try:
        c = coefficients(float(meta["eta"]), float(meta["mu"]), K, int(meta["k_ref"]))
    except Exception as error:  # InputError: settings outside the paper's assumptions
        return {"eta": meta["eta"], "mu": meta["mu"], "k_ref": meta["k_ref"], "K": K, "why": str(error)}
    omega_d = c.omega_n * math.sqrt(1 - c.zeta ** 2) if abs(c.zeta) < 1 else float("nan")
    root = c.discrete.dominant_root
    angle = abs(math.atan2(root.imag, root.real))
    return {"eta": c.eta, "mu": c.mu, "k_ref": c.k_ref, "K": K, "K_source": source, "zeta": c.zeta,
            "omega_n": c.omega_n, "omega_d": omega_d, "period": 2 * math.pi / omega_d if omega_d > 0 else None,
            "regime": c.regime, "prop9_margin": K * c.eta * c.k_ref / (1 - c.mu),
            "exact_map_regime": c.discrete.regime, "exact_map_period": 2 * math.pi / angle if angle > 1e-12 else None}


def _refresh_period(curves: RunCurves) -> float | None:
    meta = curves.meta or {}
    for key in ("refresh_period", "ref_model_sync_steps"):
        value = meta.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            if key == "ref_model_sync_steps" and meta.get("sync_ref_model") is False:
                continue
            return float(value)
    return None


def oscillation(curves: RunCurves, config: DiagnosticsConfig, figure5: DiagnosticResult | None = None) -> ModeVerdict:
    cfg = config.modes.oscillation
    thresholds = {"significance": cfg.significance, "min_period_points": cfg.min_period_points,
                  "min_cycles": cfg.min_cycles, "min_visible_cycles": cfg.min_visible_cycles,
                  "amplitude_over_noise": cfg.amplitude_over_noise,
                  "refresh_tolerance": cfg.refresh_tolerance, "agreement": cfg.agreement}
    reward = curve(curves, "reward", config)
    if reward is None:
        why, missing = missing_reason(curves, "reward", config)
        return not_run(OSCILLATION, why, missing, thresholds=thresholds)
    reads = {"reward": ringing(reward.steps, reward.values, config)}
    for column in config.reward_hacking.eval_columns:
        held = curve(curves, column, config)
        if held is not None:
            reads[column] = ringing(held.steps, held.values, config)
            break
    numbers: dict[str, Any] = {"curves": reads}
    prediction = theorem7(curves, config, figure5)
    numbers["theorem7"] = prediction
    refresh = _refresh_period(curves)
    numbers["refresh_period"] = refresh
    hits = {k: r for k, r in reads.items() if r.get("ok") and r.get("significant") and r.get("rings")}
    text = "; ".join(_describe(k, r) for k, r in reads.items())
    if prediction and prediction.get("zeta") is not None:
        text += (f"; Theorem 7: zeta {fmt(prediction['zeta'])} ({prediction['regime']}), period "
                 f"{fmt(prediction['period'])}, exact map {prediction['exact_map_regime']} (period "
                 f"{fmt(prediction['exact_map_period'])}), Prop. 9 margin {fmt(prediction['prop9_margin'])}")
    if not hits:
        numbers["agreement"] = _agreement(prediction, None, cfg.agreement)
        verdict = "no periodic component beyond the red noise"
        if numbers["agreement"] == "theorem predicts ringing, none seen":
            verdict += " (Theorem 7 predicts ringing)"
        return clear(OSCILLATION, verdict, text, numbers, thresholds)
    column, best = max(hits.items(), key=lambda kv: kv[1]["margin"])
    numbers.update({"column": column, "period": best["period"], "damping_ratio": best["damping_ratio"],
                    "amplitude": best["amplitude"], "p_value": best["p_value"]})
    if refresh is not None and abs(best["period"] / refresh - 1) <= cfg.refresh_tolerance:
        numbers["agreement"] = None
        return clear(OSCILLATION, "sawtooth of the periodic refresh (not ringing)",
                     f"{text}; period {fmt(best['period'])} = the refresh period {fmt(refresh)}", numbers,
                     thresholds)
    numbers["agreement"] = _agreement(prediction, best, cfg.agreement)
    start, end = best["visible_from"], best["visible_to"]
    episodes = [episode(start, end, best["margin"], start, best["amplitude"])]
    which = "reward" if column == "reward" else f"eval reward ({column})"
    verdict = (f"{which} rings: period {fmt(best['period'])} steps, damping ratio {fmt(best['damping_ratio'])}")
    if isinstance(numbers["agreement"], str):
        verdict += f" ({numbers['agreement']})"
    return flagged(OSCILLATION, verdict, text, start, best["margin"], numbers, thresholds, episodes=episodes)


def _agreement(prediction: dict[str, Any] | None, seen: dict[str, Any] | None, tolerance: float) -> str | None:
    if not prediction or prediction.get("zeta") is None:
        return None
    rings = prediction["exact_map_regime"] != "monotone" or prediction["zeta"] < 1
    if seen is None:
        return "theorem predicts ringing, none seen" if rings else "agree: no ringing predicted, none seen"
    periods = [p for p in (prediction.get("exact_map_period"), prediction.get("period")) if p]
    close = any(abs(p / seen["period"] - 1) <= tolerance for p in periods)
    if rings and close:
        return "agrees with Theorem 7"
    if rings:
        return "Theorem 7 predicts ringing at another period"
    return "Theorem 7 predicts no ringing"


def _describe(column: str, r: dict[str, Any]) -> str:
    if not r.get("ok"):
        return f"{column}: {r.get('why', 'not tested')}"
    head = (f"{column}: largest peak at period {fmt(r['period_points_peak'] * r['logging_interval'])} steps, "
            f"{fmt(r['power_over_null'])}x the AR(1) null (phi {fmt(r['phi'], 2)}), false-alarm p "
            f"{fmt(r['p_value'])} over {r['n_frequencies']} frequencies")
    if "period" in r:
        head += (f"; fitted period {fmt(r['period'])}, damping ratio {fmt(r['damping_ratio'])}, amplitude "
                 f"{fmt(r['amplitude'])} (at least {fmt(r.get('amplitude_threshold'))}), "
                 f"{fmt(r.get('cycles_visible'))} cycles visible")
    return head
