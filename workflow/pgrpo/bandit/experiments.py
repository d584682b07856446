"""Section 5.6 as a workflow stage: measure ``K`` and ``p*``, draw Figures 6 and 7, tabulate the threshold, judge.

Stage functions (called by the ``bandit`` Snakemake rules and the ``pgrpo bandit`` CLI):

* :func:`run_calibrate`: the paper's protocol for ``K`` and ``p*``: a stable baseline (``mu = 0``, ``K_ref = 1``,
  small ``eta``), ``p*`` read off its plateau, ``lambda`` the slope of ``-log(p* - p(t))`` over a window of the early
  relaxation, ``K = lambda / eta``; with the exact fixed points and the linearised stiffness beside them.
* :func:`run_sweep`: Figure 6, the ``K_ref`` sweep at ``(eta, mu, beta) = (0.30, 0.80, 1.00)``: exact ``p(t)``
  (solid), the Theorem 7 prediction with the measured ``K`` (dashed, Eq. 9 from rest, no per-trajectory fit),
  ``p*`` (dotted); one panel per reading; plus the regime of every ``K_ref`` up to a bound.
* :func:`run_regime_map`: Figure 7 for one ``(refresh, gradient)`` reading: every ``(eta, K_ref)`` cell classified
  monotone / overshoot / oscillatory / collapsed, with the Proposition 9 line ``K eta K_ref = 1 - mu`` (solid) and
  the ``zeta = 1`` curve of Eq. 10 (dashed), both drawn with the measured ``K``.
* :func:`run_verdict`: per ``eta``, the first ``K_ref`` that leaves the monotone regime against
  ``(1 - mu) / (K eta)`` (CSV, Markdown, LaTeX), and a verdict per claim of Section 5.6 and per reading, computed
  from the measured numbers with the thresholds stated in the Markdown.
* :func:`run_sensitivity`: the same verdicts for other reward shapes on a coarser grid (the paper does not state
  its rewards, and the verdicts depend on their shape; an affine change of the rewards changes nothing).

The dynamics themselves live in :mod:`pgrpo.bandit`.

"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from pgrpo import bandit, theory
from pgrpo.bandit.settings import BanditSettings, ClassificationSettings, Reading, RegimeMapSettings
from pgrpo.bandit.verdict import frontier_table, judge


def calibrate(settings: BanditSettings, progress: bool = False) -> dict:
    """The paper's read-out of ``K`` and ``p*`` from a stable baseline, with the exact fixed points beside it."""
    c = settings.calibration
    r, beta = settings.rewards, settings.beta
    baseline = bandit.run(r, c.eta, 0.0, beta, 1, c.steps, refresh=c.refresh, gradient=c.gradient,
                          progress=progress)
    p = baseline.p
    p_star_measured = float(p[-1])
    tail = max(1, c.steps // 10)
    plateau_drift = float(abs(p[-1] - p[-1 - tail]))
    points = bandit.fixed_points(r, beta)
    interior = next((fp for fp in points if fp.stable), None)
    fit = bandit.relaxation_rate(p, p_star_measured, c.eta, c.window)
    by_window = []
    for window in c.report_windows:
        try:
            f = bandit.relaxation_rate(p, p_star_measured, c.eta, window)
            by_window.append({"window": list(window), "stiffness": f.stiffness, "rate": f.rate,
                              "first_step": f.first_step, "last_step": f.last_step})
        except ValueError as err:  # a window the baseline never reaches
            by_window.append({"window": list(window), "stiffness": None, "error": str(err)})
    return {
        "paper_section": "5.6 (calibration of K and p*, Corollary 13)",
        "rewards": r.tolist(),
        "beta": beta,
        "baseline": {"eta": c.eta, "mu": 0.0, "k_ref": 1, "steps": c.steps, "refresh": c.refresh,
                     "gradient": c.gradient},
        "p_ref": float(p[0]),
        "p_star": p_star_measured,
        "p_star_measured": p_star_measured,
        "p_star_exact": interior.p if interior else None,
        "plateau_drift_last_10pct": plateau_drift,
        "window": list(c.window),
        "rate": fit.rate,
        "stiffness": fit.stiffness,
        "stiffness_corollary13": fit.rate / (c.eta * (1 + fit.rate)),
        "fit_steps": [fit.first_step, fit.last_step],
        "stiffness_by_window": by_window,
        "interior_fixed_point": interior is not None,
        "fixed_points": [{"inverse_temperature": fp.inverse_temperature, "p": fp.p, "stable": fp.stable,
                          "linearised_stiffness": fp.stiffness, "pi": fp.pi.tolist()} for fp in points],
        "linearised_stiffness": interior.stiffness if interior else None,
        "reward_max": float(r.max()),
        "reward_min": float(r.min()),
    }


# Classification of runs
def _classify_run(result: bandit.BanditRun, calibration: dict, cls: ClassificationSettings) -> dict[str, np.ndarray]:
    labels, crossings, overshoot, settled, amplitude = bandit.classify_many(
        result.p, calibration["p_star"], tolerance=cls.tolerance, collapse_tolerance=cls.collapse_tolerance,
        p_max=calibration["reward_max"], settle_fraction=cls.settle_fraction)
    return {"label": labels, "crossings": crossings, "overshoot": overshoot, "settled": settled,
            "final_amplitude": amplitude, "theta_spread": result.theta_spread, "p_final": result.p[..., -1]}


# Figure 6
def sweep_frames(settings: BanditSettings, calibration: dict, progress: bool = False
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Curves of Figure 6 (exact and Theorem 7, every reading) and the regime of every ``K_ref`` in the sweep."""
    s, r = settings.sweep, settings.rewards
    stiffness, p_star, p_ref = calibration["stiffness"], calibration["p_star"], calibration["p_ref"]
    k_all = np.array(sorted(set(s.k_refs) | set(range(1, s.dense_k_ref_max + 1))))
    steps = max(s.steps, s.settle_steps)
    curves, regimes = [], []
    for reading in settings.readings:
        result = bandit.run(r, s.eta, s.mu, settings.beta, k_all, steps, refresh=reading.refresh,
                            gradient=reading.gradient, progress=progress)
        cls = _classify_run(result, calibration, settings.classification)
        zeta = theory.damping_ratio(s.eta, s.mu, stiffness, k_all)
        regimes.append(pd.DataFrame({
            "refresh": reading.refresh, "gradient": reading.gradient, "eta": s.eta, "mu": s.mu, "k_ref": k_all,
            "K_eta_K_ref": stiffness * s.eta * k_all, "zeta_eq10": zeta, "plotted": np.isin(k_all, s.k_refs),
            **cls}))
        t = np.arange(s.steps + 1)
        for k in s.k_refs:
            row = int(np.nonzero(k_all == k)[0][0])
            curves.append(pd.DataFrame({
                "refresh": reading.refresh, "gradient": reading.gradient, "k_ref": k, "t": t,
                "p_exact": result.p[row, : s.steps + 1],
                "p_theorem7": theory.predicted_trajectory(p_ref, p_star, s.steps, s.eta, s.mu, stiffness, int(k))}))
    return pd.concat(curves, ignore_index=True), pd.concat(regimes, ignore_index=True)


def regime_map_frame(settings: BanditSettings, calibration: dict, reading: Reading, progress: bool = False
                     ) -> pd.DataFrame:
    """Classify every ``(eta, K_ref)`` cell of the grid for one reading (one vectorised pass)."""
    m = settings.regime_map
    stiffness = calibration["stiffness"]
    etas, k_refs = m.etas[:, None], m.k_refs[None, :]
    result = bandit.run(settings.rewards, etas, m.mu, settings.beta, k_refs, m.steps, refresh=reading.refresh,
                        gradient=reading.gradient, progress=progress)
    cls = _classify_run(result, calibration, settings.classification)
    eta_grid, k_grid = np.broadcast_arrays(etas, k_refs)
    frame = pd.DataFrame({
        "refresh": reading.refresh, "gradient": reading.gradient, "eta": eta_grid.ravel(), "k_ref": k_grid.ravel(),
        "mu": m.mu, "K_eta_K_ref": (stiffness * eta_grid * k_grid).ravel(),
        "zeta_eq10": theory.damping_ratio(eta_grid, m.mu, stiffness, k_grid).ravel(),
        **{key: np.asarray(value).ravel() for key, value in cls.items()}})
    return frame


MAP_COLUMNS = ("refresh", "gradient", "eta", "k_ref", "label", "settled", "theta_spread", "K_eta_K_ref", "mu")


SWEEP_COLUMNS = ("refresh", "gradient", "k_ref", "label", "settled", "overshoot")


# Sensitivity to the reward shape (the paper does not state its rewards)
SENSITIVITY_COLUMNS = ("shape", "rewards", "p_star_exact", "stiffness", "linearised_stiffness", "refresh",
                       "gradient", "claim", "verdict", "numbers")


CLAIM_KEYS = ("cascade", "frontier", "ringing", "onset")


def sensitivity_frame(settings: BanditSettings, progress: bool = False) -> pd.DataFrame:
    """The four verdicts per reading for the config rewards and each ``sensitivity.rewards`` shape, on a coarser
    grid spanning the same ranges (same beta, calibration protocol, classification and thresholds)."""
    import dataclasses

    sens, m = settings.sensitivity, settings.regime_map
    coarse = RegimeMapSettings(
        etas=np.geomspace(m.etas[0], m.etas[-1], sens.etas_n),
        k_refs=np.unique(np.round(np.linspace(m.k_refs[0], m.k_refs[-1], sens.k_refs_n)).astype(int)),
        mu=m.mu, steps=sens.steps)
    shapes = [("config", settings.rewards)] + [(f"shape{i + 1}", np.array(x)) for i, x in enumerate(sens.rewards)]
    rows = []
    for name, rewards in shapes:
        sub = dataclasses.replace(settings, rewards=rewards, regime_map=coarse)
        cal = calibrate(sub, progress=progress)
        _, sweep = sweep_frames(sub, cal, progress=progress)
        maps = {reading: regime_map_frame(sub, cal, reading, progress=progress) for reading in sub.readings}
        table = frontier_table(maps, cal["stiffness"], m.mu)
        for reading, frame in maps.items():
            for v in judge(reading, frame, sweep, table, cal["stiffness"], m.mu):
                rows.append({"shape": name, "rewards": json.dumps(rewards.tolist()),
                             "p_star_exact": cal["p_star_exact"], "stiffness": cal["stiffness"],
                             "linearised_stiffness": cal["linearised_stiffness"], "refresh": reading.refresh,
                             "gradient": reading.gradient, "claim": v.key, "verdict": v.verdict,
                             "numbers": v.numbers})
    return pd.DataFrame(rows)
