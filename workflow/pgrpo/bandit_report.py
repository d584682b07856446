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
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pgrpo import bandit, theory
from pgrpo.atomic import save_figure, write_csv, write_json, write_text
from pgrpo.errors import InputError

# ----------------------------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------------------------
#: Binary verifiable rewards, two of eight completions correct, scaled so that the fixed point is p* = 1.35.
#: The dynamics see the rewards only through the standardised advantage, so r -> a r + b (a > 0) changes nothing
#: but the reward axis; the shape (2 of 8 correct) and beta = 1 give K = 0.123 over the default window.
DEFAULT_REWARDS: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.666, 1.666)

DEFAULTS: dict[str, Any] = {
    "rewards": list(DEFAULT_REWARDS),
    "beta": 1.0,
    "calibration": {
        "eta": 0.05,
        "steps": 20000,
        "window": [0.0, 0.5],
        "refresh": "sliding",
        "gradient": "importance_weighted",
        "report_windows": [[0.0, 0.1], [0.0, 0.25], [0.0, 0.5], [0.0, 0.75], [0.0, 0.9], [0.25, 0.75],
                           [0.5, 0.9], [0.9, 0.99]],
    },
    "classification": {"tolerance": 0.01, "collapse_tolerance": 0.05, "settle_fraction": 0.1},
    "sweep": {"eta": 0.30, "mu": 0.80, "k_refs": [1, 2, 4, 6, 8, 12, 16], "steps": 300, "settle_steps": 4000,
              "dense_k_ref_max": 40},
    "regime_map": {"etas": {"min": 0.03, "max": 0.6, "n": 40}, "k_refs": {"min": 1, "max": 80, "n": 40},
                   "mu": 0.80, "steps": 4000},
    "readings": [{"refresh": "sliding", "gradient": "importance_weighted"},
                 {"refresh": "sliding", "gradient": "stale"},
                 {"refresh": "periodic", "gradient": "importance_weighted"},
                 {"refresh": "periodic", "gradient": "stale"}],
    # the paper does not state its rewards: the same verdicts for other reward shapes, on a coarser grid
    "sensitivity": {"rewards": [[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1, 2], [0, 1, 4, 9, 16, 25, 36, 49]],
                    "etas_n": 20, "k_refs_n": 20, "steps": 3000},
}


@dataclass(frozen=True)
class Reading:
    """One reading of the map (3): the refresh rule and the reward gradient (see :mod:`pgrpo.bandit`)."""

    refresh: str
    gradient: str

    @property
    def name(self) -> str:
        return f"{self.refresh}/{self.gradient}"


@dataclass(frozen=True)
class CalibrationSettings:
    eta: float
    steps: int
    window: tuple[float, float]
    refresh: str
    gradient: str
    report_windows: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class ClassificationSettings:
    tolerance: float
    collapse_tolerance: float
    settle_fraction: float


@dataclass(frozen=True)
class SweepSettings:
    eta: float
    mu: float
    k_refs: tuple[int, ...]
    steps: int
    settle_steps: int
    dense_k_ref_max: int


@dataclass(frozen=True)
class RegimeMapSettings:
    etas: np.ndarray
    k_refs: np.ndarray
    mu: float
    steps: int


@dataclass(frozen=True)
class SensitivitySettings:
    rewards: tuple[tuple[float, ...], ...]
    etas_n: int
    k_refs_n: int
    steps: int


@dataclass(frozen=True)
class BanditSettings:
    rewards: np.ndarray
    beta: float
    calibration: CalibrationSettings
    classification: ClassificationSettings
    sweep: SweepSettings
    regime_map: RegimeMapSettings
    readings: tuple[Reading, ...]
    sensitivity: SensitivitySettings


def _merged(defaults: Mapping, given: Mapping | None, path: str) -> dict:
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise InputError(f"config key '{path}' must be a mapping, got {given!r}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise InputError(f"config key '{path}.{unknown[0]}' is not a known key (allowed here: "
                         f"{', '.join(sorted(defaults))})")
    out = dict(defaults)
    out.update(given)
    return out


def _number(value: Any, key: str, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False, integer: bool = False) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"config key '{key}' must be a finite number, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise InputError(f"config key '{key}' must be an integer, got {value!r}")
        value = int(value)
    if low is not None and (value <= low if low_open else value < low):
        raise InputError(f"config key '{key}' must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise InputError(f"config key '{key}' must be {'<' if high_open else '<='} {high}, got {value!r}")
    return value


def _window(value: Any, key: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InputError(f"config key '{key}' must be a pair [from, to] of completed fractions, got {value!r}")
    lo = _number(value[0], key, low=0.0, high=1.0, high_open=True)
    hi = _number(value[1], key, low=0.0, high=1.0, low_open=True, high_open=True)
    if not lo < hi:
        raise InputError(f"config key '{key}' must satisfy 0 <= from < to < 1, got {value!r}")
    return float(lo), float(hi)


def _choice(value: Any, key: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InputError(f"config key '{key}' must be one of {list(allowed)}, got {value!r}")
    return str(value)


def bandit_settings(bandit_cfg: Mapping | None) -> BanditSettings:
    """Validate the ``bandit:`` config section (defaults filled in); raise :class:`InputError` naming the key."""
    cfg = _merged(DEFAULTS, bandit_cfg, "bandit")
    rewards = _rewards(cfg["rewards"], "bandit.rewards")
    beta = float(_number(cfg["beta"], "bandit.beta", low=0.0, low_open=True))

    c = _merged(DEFAULTS["calibration"], cfg["calibration"], "bandit.calibration")
    windows = c["report_windows"]
    if not isinstance(windows, (list, tuple)) or not windows:
        raise InputError("config key 'bandit.calibration.report_windows' must be a non-empty list of [from, to]")
    calibration = CalibrationSettings(
        eta=float(_number(c["eta"], "bandit.calibration.eta", low=0.0, low_open=True)),
        steps=int(_number(c["steps"], "bandit.calibration.steps", low=10, integer=True)),
        window=_window(c["window"], "bandit.calibration.window"),
        refresh=_choice(c["refresh"], "bandit.calibration.refresh", bandit.REFRESHES),
        gradient=_choice(c["gradient"], "bandit.calibration.gradient", bandit.GRADIENTS),
        report_windows=tuple(_window(w, f"bandit.calibration.report_windows[{i}]") for i, w in enumerate(windows)),
    )

    k = _merged(DEFAULTS["classification"], cfg["classification"], "bandit.classification")
    classification = ClassificationSettings(
        tolerance=float(_number(k["tolerance"], "bandit.classification.tolerance", low=0.0, high=1.0,
                                low_open=True, high_open=True)),
        collapse_tolerance=float(_number(k["collapse_tolerance"], "bandit.classification.collapse_tolerance",
                                         low=0.0, high=1.0, low_open=True, high_open=True)),
        settle_fraction=float(_number(k["settle_fraction"], "bandit.classification.settle_fraction", low=0.0,
                                      high=1.0, low_open=True)),
    )

    s = _merged(DEFAULTS["sweep"], cfg["sweep"], "bandit.sweep")
    k_refs = s["k_refs"]
    if not isinstance(k_refs, (list, tuple)) or not k_refs:
        raise InputError("config key 'bandit.sweep.k_refs' must be a non-empty list of integers >= 1")
    sweep = SweepSettings(
        eta=float(_number(s["eta"], "bandit.sweep.eta", low=0.0, low_open=True)),
        mu=float(_number(s["mu"], "bandit.sweep.mu", low=0.0, high=1.0, high_open=True)),
        k_refs=tuple(int(_number(v, f"bandit.sweep.k_refs[{i}]", low=1, integer=True)) for i, v in enumerate(k_refs)),
        steps=int(_number(s["steps"], "bandit.sweep.steps", low=2, integer=True)),
        settle_steps=int(_number(s["settle_steps"], "bandit.sweep.settle_steps", low=10, integer=True)),
        dense_k_ref_max=int(_number(s["dense_k_ref_max"], "bandit.sweep.dense_k_ref_max", low=1, integer=True)),
    )

    m = _merged(DEFAULTS["regime_map"], cfg["regime_map"], "bandit.regime_map")
    e = _merged(DEFAULTS["regime_map"]["etas"], m["etas"], "bandit.regime_map.etas")
    kr = _merged(DEFAULTS["regime_map"]["k_refs"], m["k_refs"], "bandit.regime_map.k_refs")
    eta_min = _number(e["min"], "bandit.regime_map.etas.min", low=0.0, low_open=True)
    eta_max = _number(e["max"], "bandit.regime_map.etas.max", low=eta_min, low_open=True)
    eta_n = _number(e["n"], "bandit.regime_map.etas.n", low=2, integer=True)
    k_min = _number(kr["min"], "bandit.regime_map.k_refs.min", low=1, integer=True)
    k_max = _number(kr["max"], "bandit.regime_map.k_refs.max", low=k_min + 1, integer=True)
    k_n = _number(kr["n"], "bandit.regime_map.k_refs.n", low=2, integer=True)
    regime_map = RegimeMapSettings(
        etas=np.geomspace(eta_min, eta_max, eta_n),
        k_refs=np.unique(np.round(np.linspace(k_min, k_max, k_n)).astype(int)),
        mu=float(_number(m["mu"], "bandit.regime_map.mu", low=0.0, high=1.0, high_open=True)),
        steps=int(_number(m["steps"], "bandit.regime_map.steps", low=10, integer=True)),
    )

    readings = cfg["readings"]
    if not isinstance(readings, (list, tuple)) or not readings:
        raise InputError("config key 'bandit.readings' must be a non-empty list of {refresh, gradient}")
    parsed = []
    for i, item in enumerate(readings):
        item = _merged({"refresh": None, "gradient": None}, item, f"bandit.readings[{i}]")
        parsed.append(Reading(_choice(item["refresh"], f"bandit.readings[{i}].refresh", bandit.REFRESHES),
                              _choice(item["gradient"], f"bandit.readings[{i}].gradient", bandit.GRADIENTS)))
    if len(set(parsed)) != len(parsed):
        raise InputError("config key 'bandit.readings' lists the same reading twice")

    v = _merged(DEFAULTS["sensitivity"], cfg["sensitivity"], "bandit.sensitivity")
    shapes = v["rewards"]
    if not isinstance(shapes, (list, tuple)):
        raise InputError("config key 'bandit.sensitivity.rewards' must be a list of reward vectors (may be empty)")
    sensitivity = SensitivitySettings(
        rewards=tuple(tuple(_rewards(x, f"bandit.sensitivity.rewards[{i}]").tolist()) for i, x in enumerate(shapes)),
        etas_n=int(_number(v["etas_n"], "bandit.sensitivity.etas_n", low=2, integer=True)),
        k_refs_n=int(_number(v["k_refs_n"], "bandit.sensitivity.k_refs_n", low=2, integer=True)),
        steps=int(_number(v["steps"], "bandit.sensitivity.steps", low=10, integer=True)),
    )
    return BanditSettings(rewards=rewards, beta=beta, calibration=calibration, classification=classification,
                          sweep=sweep, regime_map=regime_map, readings=tuple(parsed), sensitivity=sensitivity)


def _rewards(value: Any, key: str) -> np.ndarray:
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        raise InputError(f"config key '{key}' must be a list of at least two numbers, got {value!r}")
    rewards = np.array([_number(x, f"{key}[{i}]") for i, x in enumerate(value)], dtype=float)
    if np.ptp(rewards) == 0:
        raise InputError(f"config key '{key}' must not be all equal (the advantage would be 0/0)")
    return rewards


# ----------------------------------------------------------------------------------------------------------------
# Calibration
# ----------------------------------------------------------------------------------------------------------------
def _require_file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{what} file '{path}' does not exist (run the step that writes it first)")
    return p


def load_calibration(path: str) -> dict:
    """Read a calibration JSON written by :func:`run_calibrate`; InputError names the file or the missing key."""
    data = json.loads(_require_file(path, "bandit calibration").read_text())
    for key in ("stiffness", "p_star", "p_ref", "rewards", "beta"):
        if key not in data:
            raise InputError(f"bandit calibration file '{path}' lacks key '{key}'")
    return data


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


def run_calibrate(bandit_cfg: Mapping | None, out_json: str) -> dict:
    """Measure ``K`` and ``p*`` as Section 5.6 says; write them (and the exact fixed points) to ``out_json``."""
    settings = bandit_settings(bandit_cfg)
    result = calibrate(settings, progress=True)
    write_json(out_json, result)
    return result


# ----------------------------------------------------------------------------------------------------------------
# Classification of runs
# ----------------------------------------------------------------------------------------------------------------
def _classify_run(result: bandit.BanditRun, calibration: dict, cls: ClassificationSettings) -> dict[str, np.ndarray]:
    labels, crossings, overshoot, settled, amplitude = bandit.classify_many(
        result.p, calibration["p_star"], tolerance=cls.tolerance, collapse_tolerance=cls.collapse_tolerance,
        p_max=calibration["reward_max"], settle_fraction=cls.settle_fraction)
    return {"label": labels, "crossings": crossings, "overshoot": overshoot, "settled": settled,
            "final_amplitude": amplitude, "theta_spread": result.theta_spread, "p_final": result.p[..., -1]}


# ----------------------------------------------------------------------------------------------------------------
# Figure 6
# ----------------------------------------------------------------------------------------------------------------
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


def _figure6(curves: pd.DataFrame, regimes: pd.DataFrame, settings: BanditSettings, calibration: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    readings = settings.readings
    ncols = min(2, len(readings))
    nrows = math.ceil(len(readings) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.8 * nrows), squeeze=False, sharey=True)
    k_refs = settings.sweep.k_refs
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, len(k_refs)))
    p_star, p_ref = calibration["p_star"], calibration["p_ref"]
    lo, hi = p_ref, calibration["reward_max"]
    pad = 0.06 * (hi - lo)
    for ax, reading in zip(axes.ravel(), readings):
        sel = curves[(curves.refresh == reading.refresh) & (curves.gradient == reading.gradient)]
        reg = regimes[(regimes.refresh == reading.refresh) & (regimes.gradient == reading.gradient)]
        for color, k in zip(colors, k_refs):
            c = sel[sel.k_ref == k]
            label = reg.loc[reg.k_ref == k, "label"].iloc[0]
            ax.plot(c.t, c.p_exact, color=color, lw=1.6, label=f"K_ref={k} ({label})")
            predicted = c.p_theorem7.to_numpy().copy()
            outside = np.nonzero((predicted < lo - pad) | (predicted > hi + pad))[0]
            if outside.size:  # the linear prediction leaves the plotted range [p_ref, max r]: stop it there
                predicted[outside[0]:] = np.nan
                ax.plot(c.t.iloc[outside[0] - 1], predicted[outside[0] - 1], marker="x", color=color, ms=4)
            ax.plot(c.t, predicted, color=color, lw=1.0, ls="--")
        ax.axhline(p_star, color="k", ls=":", lw=1.0)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(f"{reading.refresh} refresh, {reading.gradient.replace('_', '-')} gradient", fontsize=9)
        ax.set_xlabel("optimizer step t")
        ax.legend(fontsize=6.5, loc="lower right", ncol=2)
    for ax in axes[:, 0]:
        ax.set_ylabel("p(t) = E_pi[R]")
    for ax in axes.ravel()[len(readings):]:
        ax.axis("off")
    s = settings.sweep
    fig.suptitle(f"Figure 6: exact softmax bandit (solid), Theorem 7 with measured K={calibration['stiffness']:.3f}"
                 f" (dashed, x = leaves [p_ref, max r]), p*={p_star:.3f} (dotted)\n"
                 f"eta={s.eta}, mu={s.mu}, beta={settings.beta}; labels: regime of the exact run over "
                 f"{max(s.steps, s.settle_steps)} steps", fontsize=9)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.08, top=0.89, wspace=0.06, hspace=0.38)
    return fig


def run_sweep(bandit_cfg: Mapping | None, calibration_json: str, out_csv: str, out_regimes_csv: str, out_pdf: str,
              out_png: str) -> None:
    """Figure 6: write the curves (``out_csv``), the regime per ``K_ref`` (``out_regimes_csv``), PDF and PNG."""
    settings = bandit_settings(bandit_cfg)
    calibration = load_calibration(calibration_json)
    curves, regimes = sweep_frames(settings, calibration, progress=True)
    write_csv(out_csv, curves)
    write_csv(out_regimes_csv, regimes)
    fig = _figure6(curves, regimes, settings, calibration)
    save_figure(fig, out_pdf)
    save_figure(fig, out_png, dpi=150)
    import matplotlib.pyplot as plt

    plt.close(fig)


# ----------------------------------------------------------------------------------------------------------------
# Figure 7
# ----------------------------------------------------------------------------------------------------------------
REGIME_COLORS = {"monotone": "#3b6fb6", "overshoot": "#2a9d8f", "oscillatory": "#f2cc4d", "collapsed": "#8c2d2d"}


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


def _figure7(frame: pd.DataFrame, settings: BanditSettings, calibration: dict, reading: Reading):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    m = settings.regime_map
    stiffness = calibration["stiffness"]
    etas, k_refs = m.etas, m.k_refs
    codes = frame["label"].map({name: i for i, name in enumerate(bandit.REGIMES)}).to_numpy()
    grid = codes.reshape(etas.size, k_refs.size).T  # rows = K_ref, cols = eta
    ratio = np.sqrt(etas[1:] / etas[:-1])
    eta_edges = np.concatenate([[etas[0] / ratio[0]], etas[:-1] * ratio, [etas[-1] * ratio[-1]]])
    k_mid = (k_refs[1:] + k_refs[:-1]) / 2
    k_edges = np.concatenate([[k_refs[0] - (k_mid[0] - k_refs[0])], k_mid, [k_refs[-1] + (k_refs[-1] - k_mid[-1])]])
    fig, ax = plt.subplots(figsize=(6.0, 4.6))
    cmap = ListedColormap([REGIME_COLORS[name] for name in bandit.REGIMES])
    ax.pcolormesh(eta_edges, k_edges, grid, cmap=cmap, vmin=-0.5, vmax=len(bandit.REGIMES) - 0.5, shading="flat")
    unsettled = frame[(~frame["settled"].astype(bool)) & (frame["label"] != "collapsed")]
    if len(unsettled):
        ax.plot(unsettled["eta"], unsettled["k_ref"], "k.", ms=1.5, alpha=0.6)
    fine = np.geomspace(eta_edges[0], eta_edges[-1], 400)
    ax.plot(fine, theory.critical_refresh_interval(fine, m.mu, stiffness), "k-", lw=1.6)
    zeta1 = theory.critical_damping_refresh_interval(fine, m.mu, stiffness)
    ok = zeta1 > 0
    ax.plot(fine[ok], zeta1[ok], "k--", lw=1.4)
    ax.set_xscale("log")
    ax.set_xlim(eta_edges[0], eta_edges[-1])
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    ticks = [t for t in (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0) if eta_edges[0] <= t <= eta_edges[-1]]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(k_edges[0], k_edges[-1])
    ax.set_xlabel(r"learning rate $\eta$")
    ax.set_ylabel(r"refresh interval $K_{\mathrm{ref}}$")
    handles = [Patch(color=REGIME_COLORS[name], label=name) for name in bandit.REGIMES]
    handles += [Line2D([], [], color="k", lw=1.6, label=r"$K\eta K_{ref}=1-\mu$ (Prop. 9)"),
                Line2D([], [], color="k", lw=1.4, ls="--", label=r"$\zeta=1$ (Eq. 10)"),
                Line2D([], [], color="k", marker=".", ls="", ms=4, label="not settled at end")]
    ax.legend(handles=handles, fontsize=7, loc="upper right", framealpha=0.85)
    ax.set_title(f"Figure 7 ({reading.refresh} refresh, {reading.gradient.replace('_', '-')} gradient): "
                 f"$\\mu$={m.mu}, $\\beta$={settings.beta}, K={stiffness:.3f}", fontsize=9)
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.11, top=0.92)
    return fig


def run_regime_map(bandit_cfg: Mapping | None, calibration_json: str, refresh: str, gradient: str, out_csv: str,
                   out_pdf: str, out_png: str) -> None:
    """Figure 7 for one reading: the classified ``(eta, K_ref)`` grid (``out_csv``) and the map (PDF, PNG)."""
    settings = bandit_settings(bandit_cfg)
    reading = Reading(_choice(refresh, "refresh", bandit.REFRESHES), _choice(gradient, "gradient", bandit.GRADIENTS))
    calibration = load_calibration(calibration_json)
    frame = regime_map_frame(settings, calibration, reading, progress=True)
    write_csv(out_csv, frame)
    fig = _figure7(frame, settings, calibration, reading)
    save_figure(fig, out_pdf)
    save_figure(fig, out_png, dpi=150)
    import matplotlib.pyplot as plt

    plt.close(fig)


# ----------------------------------------------------------------------------------------------------------------
# The table and the verdict
# ----------------------------------------------------------------------------------------------------------------
RANK = {"monotone": 0, "overshoot": 1, "oscillatory": 2, "collapsed": 3}

#: thresholds of the verdicts (stated in verdict.md)
CASCADE_MAP_REPRODUCED = 0.8   # fraction of eta rows that show the cascade (see _is_cascade)
CASCADE_MAP_PARTLY = 0.5
FRONTIER_REPRODUCED = (0.8, 1.25)  # median first-non-monotone K_ref / (1 - mu)/(K eta), small-eta corner
FRONTIER_PARTLY = (0.5, 2.0)
SMALL_ETA_FRACTION = 1 / 3     # the corner: the smallest third of the eta rows whose threshold lies in the grid
RINGING_COLLAPSE_REPRODUCED = 0.01  # collapsed fraction beyond the threshold
RINGING_PERSISTENT_REPRODUCED = 0.5  # persistent-ringing fraction beyond the threshold
RINGING_COLLAPSE_PARTLY = 0.25
ONSET_REPRODUCED = 0.8         # fraction of rows where the zeta=1 onset lies below the empirical onset
ONSET_PARTLY = 0.5
MAP_COLUMNS = ("refresh", "gradient", "eta", "k_ref", "label", "settled", "theta_spread", "K_eta_K_ref", "mu")
SWEEP_COLUMNS = ("refresh", "gradient", "k_ref", "label", "settled", "overshoot")


@dataclass(frozen=True)
class RowFrontier:
    """Along one ``eta`` row: the first ``K_ref`` that leaves the monotone regime (after the first monotone cell).

    ``status``: ``ok``; ``never_monotone`` (no monotone cell, ``exit_k_ref`` NaN); ``censored`` (monotone up to the
    last ``K_ref`` of the grid, ``exit_k_ref`` NaN)."""

    exit_k_ref: float
    first_oscillatory_k_ref: float
    status: str
    cascade: bool


def _is_cascade(labels: Sequence[str]) -> bool:
    """Along increasing K_ref: starts monotone, never steps back (monotone < overshoot < oscillatory < collapsed),
    and shows all of monotone, overshoot and oscillatory (a collapse may follow; the ringing claim judges it)."""
    ranks = np.array([RANK[x] for x in labels])
    return bool(len(ranks) and ranks[0] == 0 and np.all(np.diff(ranks) >= 0) and {0, 1, 2} <= set(ranks.tolist()))


def row_frontier(k_refs: np.ndarray, labels: Sequence[str]) -> RowFrontier:
    order = np.argsort(k_refs)
    k = np.asarray(k_refs)[order]
    lab = np.asarray(labels, dtype=object)[order]
    osc = np.nonzero(lab == "oscillatory")[0]
    first_osc = float(k[osc[0]]) if osc.size else float("nan")
    cascade = _is_cascade(lab)
    mono = np.nonzero(lab == "monotone")[0]
    if mono.size == 0:
        return RowFrontier(float("nan"), first_osc, "never_monotone", cascade)
    after = np.nonzero(lab[mono[0]:] != "monotone")[0]
    if after.size == 0:
        return RowFrontier(float("nan"), first_osc, "censored", cascade)
    return RowFrontier(float(k[mono[0] + after[0]]), first_osc, "ok", cascade)


def _read_csv(path: str, columns: Sequence[str], what: str) -> pd.DataFrame:
    frame = pd.read_csv(_require_file(path, what))
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{what} file '{path}' lacks column '{missing[0]}'")
    return frame


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim of Section 5.6 (``key``: cascade, frontier, ringing, onset), graded for one reading."""

    key: str
    claim: str
    reading: str
    verdict: str
    numbers: str


def frontier_table(maps: Mapping[Reading, pd.DataFrame], stiffness: float, mu: float) -> pd.DataFrame:
    """Per ``eta``: Prop. 9 threshold, ``zeta = 1`` onset, and per reading the first non-monotone ``K_ref``."""
    etas = np.unique(next(iter(maps.values()))["eta"].to_numpy())
    table = pd.DataFrame({"eta": etas, "threshold_k_ref": theory.critical_refresh_interval(etas, mu, stiffness),
                          "zeta1_k_ref": theory.critical_damping_refresh_interval(etas, mu, stiffness)})
    for reading, frame in maps.items():
        exits, oscs, statuses, cascades = [], [], [], []
        for eta in etas:
            row = frame[np.isclose(frame["eta"], eta)]
            f = row_frontier(row["k_ref"].to_numpy(), row["label"].to_list())
            exits.append(f.exit_k_ref)
            oscs.append(f.first_oscillatory_k_ref)
            statuses.append(f.status)
            cascades.append(f.cascade)
        key = f"{reading.refresh}_{reading.gradient}"
        table[f"exit_k_ref[{key}]"] = exits
        table[f"ratio[{key}]"] = np.array(exits) / table["threshold_k_ref"].to_numpy()
        table[f"first_oscillatory_k_ref[{key}]"] = oscs
        table[f"status[{key}]"] = statuses
        table[f"cascade[{key}]"] = cascades
    return table


def _grade(value: float, reproduced: tuple[float, float], partly: tuple[float, float]) -> str:
    if not np.isfinite(value):
        return "not"
    if reproduced[0] <= value <= reproduced[1]:
        return "reproduced"
    if partly[0] <= value <= partly[1]:
        return "partly"
    return "not"


def judge(reading: Reading, frame: pd.DataFrame, sweep: pd.DataFrame, table: pd.DataFrame, stiffness: float,
          mu: float) -> list[ClaimVerdict]:
    """The four claims of Section 5.6 for one reading, graded with the module's thresholds."""
    key = f"{reading.refresh}_{reading.gradient}"
    k_max = float(frame["k_ref"].max())
    verdicts = []

    # 1. cascade: the Figure 6 sweep and the rows of the map
    sw = sweep[(sweep.refresh == reading.refresh) & (sweep.gradient == reading.gradient)].sort_values("k_ref")
    labels = sw["label"].to_list()
    ranks = np.array([RANK[x] for x in labels])
    sweep_ordered = bool(np.all(np.diff(ranks) >= 0))
    sweep_all = {"monotone", "overshoot", "oscillatory"} <= set(labels)
    sweep_ok = _is_cascade(labels)
    map_fraction = float(np.mean(table[f"cascade[{key}]"].astype(bool)))
    if sweep_ok and map_fraction >= CASCADE_MAP_REPRODUCED:
        grade = "reproduced"
    elif sweep_ok or map_fraction >= CASCADE_MAP_PARTLY:
        grade = "partly"
    else:
        grade = "not"
    runs = _label_runs(sw["k_ref"].to_numpy(), labels)
    verdicts.append(ClaimVerdict(
        "cascade", "monotone -> overshoot -> oscillation cascade", reading.name, grade,
        f"Fig. 6 sweep (K_ref 1..{int(sw.k_ref.max())}): {runs}; ordered={sweep_ordered}, all three={sweep_all}; "
        f"map rows showing the cascade: {map_fraction:.0%}"))

    # 2. frontier on the threshold line at small eta
    inside = table[table["threshold_k_ref"] <= k_max].sort_values("eta")
    n_corner = max(1, int(math.ceil(SMALL_ETA_FRACTION * len(inside)))) if len(inside) else 0
    corner = inside.iloc[:n_corner]
    ratios = corner[f"ratio[{key}]"].to_numpy(dtype=float)
    censored = corner[f"status[{key}]"].to_numpy() == "censored"
    ratios = np.where(censored, k_max / corner["threshold_k_ref"].to_numpy(), ratios)  # lower bounds
    defined = np.isfinite(ratios)
    median = float(np.median(ratios[defined])) if defined.any() else float("nan")
    all_rows = table[f"ratio[{key}]"].to_numpy(dtype=float)
    ok_rows = np.isfinite(all_rows)
    slope = (float(np.polyfit(np.log(table["eta"][ok_rows]), np.log(table[f"exit_k_ref[{key}]"][ok_rows]), 1)[0])
             if ok_rows.sum() >= 3 else float("nan"))
    grade = _grade(median, FRONTIER_REPRODUCED, FRONTIER_PARTLY)
    beyond_line = frame["K_eta_K_ref"] > 1 - mu
    monotone_beyond = float(np.mean(frame.loc[beyond_line, "label"] == "monotone")) if beyond_line.any() else 0.0
    eta_range = (f"eta {corner['eta'].min():.3g}-{corner['eta'].max():.3g}" if len(corner) else "no eta row has "
                 "its threshold inside the grid")
    verdicts.append(ClaimVerdict(
        "frontier", "frontier on the threshold line K eta K_ref = 1 - mu at small eta", reading.name, grade,
        f"median first-non-monotone K_ref / threshold = {median:.2f} over {int(defined.sum())} rows ({eta_range}; "
        f"{int(censored.sum())} censored at K_ref={int(k_max)}, "
        f"{int((corner[f'status[{key}]'] == 'never_monotone').sum())} never monotone); "
        f"log-log slope of the frontier vs eta over all rows: {slope:.2f} (hyperbola: -1); "
        f"cells beyond the line that stay monotone: {monotone_beyond:.0%}"))

    # 3. bounded ringing, never divergence
    beyond = frame[frame["K_eta_K_ref"] > 1 - mu]
    if len(beyond):
        collapsed = float(np.mean(beyond["label"] == "collapsed"))
        ringing = float(np.mean((beyond["label"] == "oscillatory") & (~beyond["settled"].astype(bool))))
        settled = float(np.mean(beyond["settled"].astype(bool) & (beyond["label"] != "collapsed")))
        bounded = beyond[beyond["label"] != "collapsed"]
        spread = float(bounded["theta_spread"].max()) if len(bounded) else float("nan")
        if collapsed <= RINGING_COLLAPSE_REPRODUCED and ringing >= RINGING_PERSISTENT_REPRODUCED:
            grade = "reproduced"
        elif collapsed <= RINGING_COLLAPSE_PARTLY:
            grade = "partly"
        else:
            grade = "not"
        numbers = (f"{len(beyond)} cells beyond the line: collapsed (theta diverges, p -> max r) {collapsed:.0%}, "
                   f"still ringing at the end {ringing:.0%}, settled at p* {settled:.0%}; "
                   f"max theta spread of the non-collapsed cells {spread:.1f}")
    else:
        grade, numbers = "not", "no cell of the grid lies beyond the threshold line (untestable)"
    verdicts.append(ClaimVerdict("ringing", "bounded ringing, never divergence, beyond the threshold", reading.name,
                                 grade, numbers))

    # 4. the zeta = 1 onset lies below the empirical onset
    ok = table[f"status[{key}]"].isin(["ok", "censored"])
    rows = table[ok]
    if len(rows):
        exits = rows[f"exit_k_ref[{key}]"].to_numpy(dtype=float)
        exits = np.where(rows[f"status[{key}]"] == "censored", np.inf, exits)
        zeta1 = rows["zeta1_k_ref"].to_numpy()
        below = zeta1 < exits
        fraction = float(np.mean(below))
        grade = ("reproduced" if fraction >= ONSET_REPRODUCED else "partly" if fraction >= ONSET_PARTLY else "not")
        finite = (zeta1 > 0) & np.isfinite(exits)
        gap = f"{float(np.median(exits[finite] / zeta1[finite])):.2f}" if finite.any() else "n/a"
        numbers = (f"zeta=1 onset below the empirical onset in {int(below.sum())}/{len(rows)} eta rows "
                   f"({fraction:.0%}; in {int((zeta1 == 0).sum())} of them Eq. 10 has zeta < 1 at every K_ref); "
                   f"median empirical / zeta=1 onset where both are finite: {gap}; {int((~ok).sum())} rows never "
                   f"monotone (empirical onset <= K_ref={int(frame['k_ref'].min())}) left out")
    else:
        grade, numbers = "not", "no eta row has a monotone cell (untestable)"
    verdicts.append(ClaimVerdict("onset", "zeta = 1 onset (Eq. 10) below the empirical onset", reading.name,
                                 grade, numbers))
    return verdicts


def _label_runs(k_refs: np.ndarray, labels: Sequence[str]) -> str:
    """``monotone 1-3, overshoot 4-6, ...``: the labels along K_ref as contiguous runs."""
    parts = []
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            a, b = int(k_refs[start]), int(k_refs[i - 1])
            parts.append(f"{labels[start]} {a}" + (f"-{b}" if b != a else ""))
            start = i
    return ", ".join(parts)


def _markdown_table(frame: pd.DataFrame, floatfmt: str = "{:.3g}") -> str:
    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "" if not np.isfinite(v) else floatfmt.format(v)
        return str(v)

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


def _latex_table(frame: pd.DataFrame, caption: str) -> str:
    def esc(s: str) -> str:
        return s.replace("_", r"\_").replace("%", r"\%")

    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return "--" if not np.isfinite(v) else f"{v:.3g}"
        return esc(str(v))

    cols = "l" * len(frame.columns)
    lines = [r"\begin{table}[t]", r"\centering", r"\scriptsize", rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
             " & ".join(esc(str(c)) for c in frame.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(fmt(v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{esc(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _view_table(table: pd.DataFrame, readings: Sequence[Reading]) -> pd.DataFrame:
    """The human-facing columns: eta, threshold, zeta=1, and per reading the exit K_ref and its ratio."""
    view = table[["eta", "threshold_k_ref", "zeta1_k_ref"]].copy()
    view.columns = ["eta", "(1-mu)/(K eta)", "zeta=1 K_ref"]
    for reading in readings:
        key = f"{reading.refresh}_{reading.gradient}"
        exits = table[f"exit_k_ref[{key}]"].astype(float)
        status = table[f"status[{key}]"]
        shown = [(f"{e:.0f}" if s == "ok" else "never mono." if s == "never_monotone" else "> max")
                 for e, s in zip(exits, status)]
        view[f"exit {reading.refresh[:4]}/{'IW' if reading.gradient == 'importance_weighted' else 'stale'}"] = shown
        view[f"ratio {reading.refresh[:4]}/{'IW' if reading.gradient == 'importance_weighted' else 'stale'}"] = \
            table[f"ratio[{key}]"]
    return view


def run_verdict(bandit_cfg: Mapping | None, calibration_json: str, sweep_regimes_csv: str,
                map_csvs: Sequence[str] | Mapping[Any, str], out_md: str, out_table_csv: str, out_table_md: str,
                out_table_tex: str, sensitivity_csv: str | None = None) -> list[ClaimVerdict]:
    """The threshold table (CSV, Markdown, LaTeX) and ``verdict.md``: one verdict per claim and reading.

    ``map_csvs``: the regime-map CSVs of :func:`run_regime_map` (a list, or a mapping whose values are paths);
    each names its reading in its ``refresh``/``gradient`` columns. ``sensitivity_csv`` (optional): the output of
    :func:`run_sensitivity`, summarised in a final section.
    """
    settings = bandit_settings(bandit_cfg)
    calibration = load_calibration(calibration_json)
    paths = list(map_csvs.values()) if isinstance(map_csvs, Mapping) else list(map_csvs)
    if not paths:
        raise InputError("run_verdict needs at least one regime-map CSV (map_csvs is empty)")
    sensitivity = (_read_csv(sensitivity_csv, SENSITIVITY_COLUMNS, "bandit sensitivity")
                   if sensitivity_csv else None)
    sweep = _read_csv(sweep_regimes_csv, SWEEP_COLUMNS, "bandit sweep regimes")
    maps: dict[Reading, pd.DataFrame] = {}
    for path in paths:
        frame = _read_csv(path, MAP_COLUMNS, "bandit regime map")
        for (refresh, gradient), part in frame.groupby(["refresh", "gradient"], sort=False):
            maps[Reading(str(refresh), str(gradient))] = part.reset_index(drop=True)
    stiffness = float(calibration["stiffness"])
    mu = float(next(iter(maps.values()))["mu"].iloc[0])
    table = frontier_table(maps, stiffness, mu)
    verdicts = []
    for reading, frame in maps.items():
        verdicts += judge(reading, frame, sweep, table, stiffness, mu)
    write_csv(out_table_csv, table)
    view = _view_table(table, list(maps))
    caption = (f"First K_ref leaving the monotone regime per eta (mu={mu}, beta={settings.beta}) against the "
               f"Proposition 9 threshold (1-mu)/(K eta) with the measured K={stiffness:.4f}")
    write_text(out_table_md, f"{caption}\n\n" + _markdown_table(view))
    write_text(out_table_tex, _latex_table(view, caption))
    text = verdict_markdown(settings, calibration, sweep, table, view, verdicts, mu)
    if sensitivity is not None:
        text += "\n" + sensitivity_markdown(sensitivity)
    write_text(out_md, text)
    return verdicts


def verdict_markdown(settings: BanditSettings, calibration: dict, sweep: pd.DataFrame, table: pd.DataFrame,
                     view: pd.DataFrame, verdicts: Sequence[ClaimVerdict], mu: float) -> str:
    """The text of ``results/bandit/verdict.md`` (every number in it is computed here)."""
    cal = calibration
    k = cal["stiffness"]
    s = settings.sweep
    lines = ["# Section 5.6 in the exact softmax bandit: what the dynamics do", ""]
    lines += ["## Setup and calibration", ""]
    lines.append(f"- Rewards ({len(cal['rewards'])} completions): `{cal['rewards']}`, beta = {cal['beta']}, "
                 f"p_ref = {cal['p_ref']:.4f}.")
    lines.append("- The rewards enter only through the standardised advantage, so for a > 0 the change r -> a r + b "
                 "leaves theta(t) unchanged exactly (the KL term depends on theta alone): p(t), p* and p_ref map to "
                 "a p + b while lambda, K, the fixed-point policy and every regime label are unchanged. p* = 1.35 "
                 "therefore only fixes the reward axis (a, b); K depends on the reward *shape* and beta. a < 0 is "
                 "not a symmetry.")
    points = cal["fixed_points"]
    if cal["interior_fixed_point"]:
        stable = [fp for fp in points if fp["stable"]][0]
        unstable = [fp for fp in points if not fp["stable"]]
        lines.append(f"- Interior fixed point: yes. pi* ∝ exp(b r) with b beta Std_b[r] = 1, b = "
                     f"{stable['inverse_temperature']:.6f}, exact p* = {stable['p']:.6f} (stable; linearised "
                     f"stiffness K_lin = {stable['linearised_stiffness']:.4f} per unit eta).")
        for fp in unstable:
            lines.append(f"- Second (unstable) interior fixed point at b = {fp['inverse_temperature']:.6f}, p = "
                         f"{fp['p']:.6f}: beyond it the policy collapses onto the best completions (theta grows "
                         f"without bound while p -> max r = {cal['reward_max']:.4g} stays bounded).")
    else:
        lines.append("- Interior fixed point: **none** for these rewards and beta (b beta Std_b[r] < 1 for every b): "
                     "the policy collapses onto the best completions, theta grows without bound and p -> max r.")
    lines.append(f"- Baseline (mu = 0, K_ref = 1, {cal['baseline']['refresh']} refresh, "
                 f"{cal['baseline']['gradient']} gradient, eta = {cal['baseline']['eta']}, "
                 f"{cal['baseline']['steps']} steps): measured p* = {cal['p_star_measured']:.6f} (plateau drift over "
                 f"the last 10% {cal['plateau_drift_last_10pct']:.1e}).")
    lines.append(f"- **Measured K = {k:.4f}** (lambda = {cal['rate']:.5f} per step, window "
                 f"{cal['window']} of the completed relaxation = steps {cal['fit_steps'][0]}-{cal['fit_steps'][1]}; "
                 f"inverting Corollary 13 with the K_ref = 1 lag instead gives {cal['stiffness_corollary13']:.4f}). "
                 f"The relaxation is not a single exponential; K by window:")
    lines.append("")
    lines.append("| window (fraction completed) | steps | K = lambda/eta |")
    lines.append("|---|---|---|")
    for w in cal["stiffness_by_window"]:
        if w.get("stiffness") is None:
            lines.append(f"| {w['window']} | - | not reached |")
        else:
            lines.append(f"| {w['window']} | {w['first_step']}-{w['last_step']} | {w['stiffness']:.4f} |")
    if cal.get("linearised_stiffness") is not None:
        lines.append(f"| asymptotic (linearisation at p*) | - | {cal['linearised_stiffness']:.4f} |")
    lines.append("")

    lines += ["## Figure 6: the K_ref sweep", ""]
    zetas = ", ".join(f"{kr}: {theory.damping_ratio(s.eta, s.mu, k, kr):.2f}" for kr in s.k_refs)
    lines.append(f"At (eta, mu, beta) = ({s.eta}, {s.mu}, {settings.beta}) Eq. 10 with the measured K gives zeta = "
                 f"{theory.damping_ratio(s.eta, s.mu, k, 0):.2f} at K_ref = 0 and, per plotted K_ref, {zetas}; Proposition 9 puts "
                 f"the threshold at K_ref = {(1 - s.mu) / (k * s.eta):.2f}. Classification (K_ref 1.."
                 f"{int(sweep.k_ref.max())}, {s.settle_steps} steps):")
    lines.append("")
    for (refresh, gradient), part in sweep.groupby(["refresh", "gradient"], sort=False):
        part = part.sort_values("k_ref")
        lines.append(f"- {refresh}/{gradient}: {_label_runs(part.k_ref.to_numpy(), part.label.to_list())}")
    lines.append("")

    lines += ["## Verdicts", ""]
    if not cal["interior_fixed_point"]:
        lines += ["**Warning: no interior fixed point for these rewards and beta.** Every run ends collapsed onto the "
                  "best completions; the labels below compare approaches to the measured plateau (max r), which is not "
                  "the setting of Section 5.6.", ""]
    lines += ["| claim | reading | verdict | numbers |", "|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| {v.claim} | {v.reading} | **{v.verdict}** | {v.numbers} |")
    lines.append("")
    lines += ["## How the verdicts are graded", ""]
    m = settings.regime_map
    c = settings.classification
    lines += [
        f"- Grid: {m.etas.size} eta values log-spaced in [{m.etas[0]:.3g}, {m.etas[-1]:.3g}] x {m.k_refs.size} "
        f"K_ref values in [{m.k_refs[0]}, {m.k_refs[-1]}], mu = {m.mu}, beta = {settings.beta}, {m.steps} steps.",
        f"- Classification of a trajectory, with u = (p - p*)/(p* - p_ref): a crossing is counted (hysteresis) each "
        f"time u passes from below -{c.tolerance} to above +{c.tolerance} or back; 0 crossings = monotone, 1 = "
        f"overshoot, >= 2 = oscillatory; collapsed = the last p lies within {c.collapse_tolerance} x |p* - p_ref| "
        f"of max r. Settled = |u| <= {c.tolerance} over the last {c.settle_fraction:.0%} of the run.",
        f"- Cascade: a sequence of labels along increasing K_ref is a cascade if it starts monotone, never steps "
        f"back (monotone < overshoot < oscillatory < collapsed) and shows all of monotone, overshoot and oscillatory "
        f"(a collapse may follow; the ringing claim judges it). Reproduced if the Fig. 6 sweep is a cascade AND >= "
        f"{CASCADE_MAP_REPRODUCED:.0%} of the map's eta rows are; partly if one of the two holds or >= "
        f"{CASCADE_MAP_PARTLY:.0%} of the rows are; otherwise not.",
        f"- Frontier: per eta row, the first K_ref that is not monotone after the first monotone cell, divided by "
        f"(1 - mu)/(K eta); the median over the smallest {SMALL_ETA_FRACTION:.0%} of the eta rows whose threshold "
        f"lies inside the grid (rows monotone throughout count with the lower bound K_ref_max/threshold). "
        f"Reproduced if in [{FRONTIER_REPRODUCED[0]}, {FRONTIER_REPRODUCED[1]}], partly if in "
        f"[{FRONTIER_PARTLY[0]}, {FRONTIER_PARTLY[1]}], otherwise not.",
        f"- Ringing: over the cells with K eta K_ref > 1 - mu; reproduced if <= {RINGING_COLLAPSE_REPRODUCED:.0%} "
        f"collapse and >= {RINGING_PERSISTENT_REPRODUCED:.0%} still ring at the end; partly if <= "
        f"{RINGING_COLLAPSE_PARTLY:.0%} collapse; otherwise not. (p itself is bounded by construction; collapse "
        f"is the divergence of theta.)",
        f"- Onset: over the eta rows that have a monotone cell, the fraction in which the zeta = 1 K_ref of Eq. 10 "
        f"(0 where zeta < 1 at every K_ref) is below the empirical first non-monotone K_ref; reproduced if >= "
        f"{ONSET_REPRODUCED:.0%}, partly if >= {ONSET_PARTLY:.0%}, otherwise not.",
        "",
    ]
    lines += ["## First K_ref leaving the monotone regime", "",
              f"K = {k:.4f}, mu = {mu}. 'never mono.': no monotone cell in the row; '> max': monotone throughout.",
              "", _markdown_table(view)]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# Sensitivity to the reward shape (the paper does not state its rewards)
# ----------------------------------------------------------------------------------------------------------------
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


def sensitivity_markdown(frame: pd.DataFrame) -> str:
    """A compact view: one row per (shape, reading), one column per claim."""
    lines = ["## Robustness to the unstated reward shape", "",
             "The same protocol (beta, calibration window, classification, thresholds) on a coarser grid for other "
             "reward shapes; shapes that differ by r -> a r + b (a > 0) give identical verdicts, so only the shape "
             "matters. Exact p* is in each shape's own units.", ""]
    lines += ["| shape | rewards | p* (exact) | K (window) | K_lin | reading | " + " | ".join(CLAIM_KEYS) + " |",
              "|" + "---|" * (6 + len(CLAIM_KEYS))]
    for (shape, refresh, gradient), part in frame.groupby(["shape", "refresh", "gradient"], sort=False):
        first = part.iloc[0]
        grades = {row.claim: row.verdict for row in part.itertuples()}
        p_star = "none" if pd.isna(first.p_star_exact) else f"{first.p_star_exact:.4g}"
        k_lin = "-" if pd.isna(first.linearised_stiffness) else f"{first.linearised_stiffness:.3f}"
        lines.append(f"| {shape} | `{first.rewards}` | {p_star} | {first.stiffness:.3f} | {k_lin} | "
                     f"{refresh}/{gradient} | " + " | ".join(grades.get(c, "") for c in CLAIM_KEYS) + " |")
    return "\n".join(lines) + "\n"


def run_sensitivity(bandit_cfg: Mapping | None, out_csv: str, out_md: str) -> pd.DataFrame:
    """The verdicts for each reward shape of ``bandit.sensitivity.rewards`` (and the config rewards): CSV + MD."""
    settings = bandit_settings(bandit_cfg)
    frame = sensitivity_frame(settings, progress=True)
    write_csv(out_csv, frame)
    write_text(out_md, sensitivity_markdown(frame))
    return frame
