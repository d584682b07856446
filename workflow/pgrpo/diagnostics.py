"""The four training diagnostics of Section 5 (Figures 2-5) as numbers and one-line verdicts; ``diagnose`` for any log.

Paper: Sections 5.2-5.5 and the captions of Figures 2-5; the fits they reuse are the three-phase law of Prop. 14
(Eq. 16-17, Section 4.4) and the threshold of Prop. 9 (Eq. 11). Each diagnostic reads one run's curves (the seed
mean of ``results/aggregate/{model}/G{G}.csv``, or a single log) against *training progress* ``x = step / last
step``, the paper's per-G normalisation. Early/late levels are means over the first/last ``early_fraction`` /
``late_fraction`` of the step range.

1. Reward hacking (Figure 2, Section 5.2). The three-phase fits of the train reward and of the eval reward give
   ``(R0, R_inf)`` each; the doubly normalised progress (Eq. 17) is ``u(t) = (R(t) - R0) / (R_inf - R0)``. The train
   reward (centred moving average over ``smoothing`` logged points) is interpolated at the eval steps, and the
   *deficit* is the mean vertical gap ``mean(u_train - u_eval)`` below the diagonal ``u_eval = u_train`` (positive:
   eval lags). The rolling coupling ratio is ``rho(t) = lambda_eval(t) / |lambda_train(t)|`` with ``lambda`` the
   least-squares slope of ``-log(R_inf - R(t))`` against the step in a window of ``window_fraction`` (45%) of the
   eval-step span centred on each eval step, regressed separately on the train and on the eval points (points with
   ``R_inf - R <= 0`` are dropped: the log is undefined there). On an exact exponential pair
   ``R = R_inf - A exp(-lambda t)`` this returns ``lambda_eval / lambda_train`` exactly; on two three-phase curves
   with one ``omega_n`` it returns 1. Summary: the median ``rho`` over windows centred in the interior
   (``interior``, 10-90%) of training, where ``lambda_train`` is bounded away from 0 (the late symlog spikes of
   Figure 2 are artefacts of train saturation). Verdict: *co-saturating* when median ``rho >= rho_min`` and deficit
   ``<= deficit_max``; *hacking signature* when both fail, or when the train reward rises and the eval reward does
   not rise at all; *inconclusive* when the two read-outs disagree, a fit failed, or a rise is within the noise.
2. Mode collapse (Figure 3, Section 5.3). ``s(t) = sigma_adv^2 / G`` with ``sigma_adv`` the logged ``reward_std``.
   Drift: slope of a least-squares line of ``s`` on progress, times the progress span, relative to the early
   plateau level: the fractional change over the run that the linear trend implies; *drifting down* below
   ``-drift_max``. ``frac_reward_zero_std``: early and late levels; *high* when the late level is
   ``>= frac_zero_std_max``, *climbing* when it rose by ``>= frac_zero_std_rise_max``. Across G: the ratio of the
   late ``sigma_adv^2`` between two group sizes. Lemma 6 and Prop. 10 treat ``sigma_adv`` as a G-independent
   constant, so they predict this ratio to be 1, i.e. a ratio ``G_j / G_i`` of the plotted ``sigma_adv^2 / G``
   curves (the Figure 3 caption's reading "the curves should track each other" would need ``sigma_adv^2 ∝ G``;
   both ratios are reported). *Separated* when the ``sigma_adv^2`` ratio is outside
   ``[1/separation_max, separation_max]``. Note that TRL's ``reward_std`` is the s.d. over the whole batch, not
   within groups.
3. Policy concentration (Figure 4, Section 5.4). Entropy: relative change from early to late level; *dropped* when
   it fell by ``>= entropy_drop_min`` of the early level. KL: *rising* when late minus early ``>= kl_rise_min``.
   *benign shift*: KL rising, entropy not dropped; *concentration*: entropy dropped (with rising KL, the paper's
   signature). Timing: the entropy-drop step is the first step at which the smoothed entropy is at or below
   ``(1 - entropy_drop_min)`` times the early level; reward saturation is the step ``t_sat`` at which the train
   reward's three-phase fit reaches ``saturation_fraction`` (90%) of its rise, ``omega_n t_sat = 3.8897`` for 90%
   (or later than the run when the fit says so). A drop before ``t_sat`` is the dangerous case.
4. Stability (Figure 5, Section 5.5). ``grad_norm`` over the last half of the steps: least-squares slope of
   ``log grad_norm`` (zeros dropped) and the growth factor ``exp(slope x half-span)`` it implies; *exponential
   growth* when that factor is ``>= growth_unstable`` with ``R^2 >= growth_min_r2``; spikes: steps whose
   grad_norm exceeds ``spike_factor`` times the median of the previous ``spike_window`` logged values.
   ``importance_sampling_ratio_max``: late median level and last-half growth factor; *diverging* at a late level
   ``>= is_ratio_high``, *rising* at a growth ``>= is_growth_warning``. Prop. 9 (Eq. 11): with ``(eta, mu, K_ref)``
   from ``meta.json`` and ``K`` (the ``stability.K`` config value, else the stiffness recovered from the train
   reward's fitted ``omega_n`` through Eq. 9, ``pgrpo.fitting.stiffness_from_natural_frequency``), the ratio
   ``K eta K_ref / (1 - mu)``: unstable at ``>= 1``, near the threshold at ``>= threshold_warning``. Verdict:
   *unstable* (exponential growth, ``>= spikes_unstable`` spikes, diverging IS ratio or ratio ``>= 1``),
   *approaching threshold* (growth ``>= growth_warning``, some spikes, rising IS ratio, or ratio
   ``>= threshold_warning``), else *stable regime*.

Every diagnostic that lacks a column it needs is reported as *not run* with the column named, never an error.
:func:`run_diagnostics` does all models' aggregates (JSON + Markdown + Figures 2-5); :func:`run_diagnose` and
:func:`diagnose_log` do one log: our ``log.csv``, a TRL/W&B CSV (``train/reward``, ``eval/reward``,
``train/sampling/importance_sampling_ratio/max``, ...), an aggregate CSV (``<col>_mean``), or a TRL
``trainer_state.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pgrpo.atomic import read_json
from pgrpo.errors import InputError

REWARD_HACKING = "reward_hacking"
MODE_COLLAPSE = "mode_collapse"
POLICY_CONCENTRATION = "policy_concentration"
STABILITY = "stability"
DIAGNOSTICS: tuple[str, ...] = (REWARD_HACKING, MODE_COLLAPSE, POLICY_CONCENTRATION, STABILITY)
TITLES: dict[str, str] = {
    REWARD_HACKING: "Reward hacking (Figure 2, Section 5.2)",
    MODE_COLLAPSE: "Mode collapse (Figure 3, Section 5.3)",
    POLICY_CONCENTRATION: "Policy concentration (Figure 4, Section 5.4)",
    STABILITY: "Training stability (Figure 5, Section 5.5)",
}

#: the logged quantities the diagnostics read (the workflow's names, Section 4.2)
KNOWN_COLUMNS: tuple[str, ...] = (
    "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm", "importance_sampling_ratio_max",
    "eval_reward", "eval_accuracy",
)
#: other spellings of those quantities, mapped after the ``train/`` / ``eval/`` prefixes are normalised
#: (``pgrpo.aggregate.normalize_column``); used only when the workflow's name is absent
COLUMN_ALIASES: dict[str, str] = {
    "sampling/importance_sampling_ratio/max": "importance_sampling_ratio_max",
    "eval_sampling/importance_sampling_ratio/max": "eval_importance_sampling_ratio_max",
    "rewards/accuracy_reward/mean": "reward",
    "eval_rewards/accuracy_reward/mean": "eval_accuracy",
}

NOT_RUN = "not run"
INCONCLUSIVE = "inconclusive"
CO_SATURATING = "co-saturating"
HACKING = "hacking signature"
HEALTHY = "healthy"
COLLAPSE = "collapse signature"
WARNING = "warning"
BENIGN_SHIFT = "benign shift"
NO_SHIFT = "no shift"
ENTROPY_STABLE = "entropy stable (KL not logged)"
CONCENTRATION_AFTER = "concentration after saturation"
CONCENTRATION_BEFORE = "concentration before saturation (dangerous)"
CONCENTRATION_UNTIMED = "concentration (saturation time unknown)"
STABLE = "stable regime"
APPROACHING = "approaching threshold"
UNSTABLE = "unstable"

_X_FRACTION_CACHE: dict[float, float] = {}


# ---------------------------------------------------------------------------------------------------------------------
# configuration (config section ``diagnostics:``)
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardHackingConfig:
    eval_columns: tuple[str, ...] = ("eval_reward", "eval_accuracy")  # first one present is used
    window_fraction: float = 0.45  # rolling window, fraction of the eval-step span (Figure 2)
    interior: tuple[float, float] = (0.1, 0.9)  # progress range whose windows the rho summary uses
    rho_min: float = 0.5  # median interior rho below this: hacking read-out
    deficit_max: float = 0.15  # mean u_train - u_eval above this: hacking read-out
    min_eval_points: int = 4  # fewer eval points: inconclusive (the fit has 3 parameters)
    min_window_points: int = 3  # points a window needs (each of train and eval) for a slope
    min_rise_over_noise: float = 2.0  # a fitted rise R_inf - R0 smaller than this x residual s.d. is unresolved


@dataclass(frozen=True)
class ModeCollapseConfig:
    drift_max: float = 0.3  # |linear-trend change over the run| / early level above this: drifting
    separation_max: float = 1.5  # late sigma_adv^2 ratio between two G outside [1/x, x]: separated
    frac_zero_std_max: float = 0.5  # late collapsed-prompt fraction at or above this: high
    frac_zero_std_rise_max: float = 0.2  # late minus early collapsed-prompt fraction at or above this: climbing


@dataclass(frozen=True)
class PolicyConcentrationConfig:
    entropy_drop_min: float = 0.2  # relative entropy fall (early -> late) at or above this: concentration
    kl_rise_min: float = 0.001  # KL late minus early (nats) at or above this: KL rising
    saturation_fraction: float = 0.9  # reward saturation = this fraction of the fitted rise


@dataclass(frozen=True)
class StabilityConfig:
    growth_unstable: float = 10.0  # last-half grad_norm growth factor (log-linear trend) for exponential growth
    growth_warning: float = 3.0  # ... for "approaching threshold"
    growth_min_r2: float = 0.5  # the log-linear trend must explain this much to count as exponential growth
    spike_factor: float = 10.0  # spike: grad_norm > this x median of the previous spike_window values
    spike_window: int = 10
    spikes_unstable: int = 3  # this many spikes or more: unstable (1 or 2: approaching threshold)
    is_ratio_high: float = 10.0  # late median IS-ratio max at or above this: diverging
    is_growth_warning: float = 2.0  # last-half IS-ratio max growth factor at or above this: rising
    threshold_warning: float = 0.5  # K eta K_ref / (1 - mu) at or above this: approaching threshold
    K: float | None = None  # measured stiffness; None: from the train reward's fitted omega_n (Eq. 9)


@dataclass(frozen=True)
class DiagnosticsConfig:
    early_fraction: float = 0.2
    late_fraction: float = 0.2
    min_points: int = 10  # fewest logged values a level/trend read-out needs (fewer: inconclusive)
    smoothing: int = 5  # centred moving average (logged points) for the train reward in u_train and the entropy
    reward_hacking: RewardHackingConfig = field(default_factory=RewardHackingConfig)
    mode_collapse: ModeCollapseConfig = field(default_factory=ModeCollapseConfig)
    policy_concentration: PolicyConcentrationConfig = field(default_factory=PolicyConcentrationConfig)
    stability: StabilityConfig = field(default_factory=StabilityConfig)


def default_config_dict() -> dict[str, Any]:
    """The ``diagnostics:`` section's defaults as plain data (what ``config.yaml`` may override)."""
    return _plain(dataclasses.asdict(DiagnosticsConfig()))


def _check_value(key: str, default: Any, value: Any) -> Any:
    if key.endswith(".K"):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
            raise InputError(f"diagnostics.{key} must be a positive number or null, got {value!r}")
        return float(value)
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)) or (key.endswith("interior") and len(value) != 2):
            raise InputError(f"diagnostics.{key} must be a list like {list(default)}, got {value!r}")
        if key.endswith("interior"):
            lo, hi = (_check_value(f"{key}[]", 0.5, v) for v in value)
            if not 0 <= lo < hi <= 1:
                raise InputError(f"diagnostics.{key} must be [lo, hi] with 0 <= lo < hi <= 1, got {value!r}")
            return (lo, hi)
        if not value or not all(isinstance(v, str) and v for v in value):
            raise InputError(f"diagnostics.{key} must be a non-empty list of column names, got {value!r}")
        return tuple(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"diagnostics.{key} must be an integer >= 1, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"diagnostics.{key} must be a positive number, got {value!r}")
    fractions = ("early_fraction", "late_fraction", "window_fraction", "saturation_fraction", "entropy_drop_min",
                 "frac_zero_std_max", "interior[]")
    if key.split(".")[-1] in fractions and not value <= 1:
        raise InputError(f"diagnostics.{key} must be in (0, 1], got {value!r}")
    return float(value)


def _build(cls: type, section: Mapping[str, Any] | None, prefix: str) -> Any:
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise InputError(f"diagnostics{'.' + prefix if prefix else ''} must be a mapping, got {section!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(section) - set(fields))
    if unknown:
        where = f"diagnostics.{prefix + '.' if prefix else ''}{unknown[0]}"
        raise InputError(f"{where}: unknown key (known: {', '.join(fields)})")
    values = {}
    defaults = cls()
    for name, f in fields.items():
        key = f"{prefix + '.' if prefix else ''}{name}"
        default = getattr(defaults, name)
        if dataclasses.is_dataclass(default):
            values[name] = _build(type(default), section.get(name), key)
        elif name in section:
            values[name] = _check_value(key, default, section[name])
    return cls(**values)


def diagnostics_config(section: Mapping[str, Any] | None) -> DiagnosticsConfig:
    """The ``diagnostics`` config section, validated against the defaults; a bad key or value raises InputError."""
    return _build(DiagnosticsConfig, section, "")


# ---------------------------------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class DiagnosticResult:
    """One diagnostic of one run (``G`` set) or one model across its group sizes (``G`` None).

    ``verdict``: a short label (see the module docstring); ``reason``: one line with the numbers behind it;
    ``numbers``: the named quantities; ``series``: the curves the figure draws; ``missing``: the columns it lacked.
    """

    diagnostic: str
    model: str
    G: int | None
    verdict: str
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    across_G: bool = False

    @property
    def ran(self) -> bool:
        return self.verdict != NOT_RUN

    def line(self) -> str:
        """The Markdown line a user reads: who, verdict, numbers."""
        who = self.model + (f", G={self.G}" if self.G is not None else ", across G" if self.across_G else "")
        if self.verdict == INCONCLUSIVE or self.verdict == NOT_RUN:
            return f"- **{who}**: **{self.verdict}** ({self.reason})"
        return f"- **{who}**: **{self.verdict}**: {self.reason}"

    def to_dict(self, with_series: bool = True) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if not with_series:
            data.pop("series")
        return _plain(data)


@dataclass
class RunCurves:
    """One run's per-step curves: ``frame`` has ``step`` and, per quantity, its value column and optionally
    ``<q>_sd`` (the s.d. across seeds). ``meta``: the run's ``meta.json`` (eta, mu, k_ref, ...) if known."""

    model: str
    G: int | None
    frame: pd.DataFrame
    source: str = ""
    meta: dict[str, Any] | None = None
    column_sources: dict[str, str] = field(default_factory=dict)

    def has(self, column: str) -> bool:
        return column in self.frame.columns and bool(np.isfinite(self.frame[column].to_numpy(float)).any())

    @property
    def last_step(self) -> float:
        steps = self.frame["step"].to_numpy(float)
        return float(np.nanmax(steps)) if steps.size else float("nan")

    @property
    def first_step(self) -> float:
        steps = self.frame["step"].to_numpy(float)
        return float(np.nanmin(steps)) if steps.size else float("nan")

    def series(self, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, values, s.d.) where the value is finite, in step order; s.d. NaN where not known."""
        if column not in self.frame.columns:
            return np.array([]), np.array([]), np.array([])
        steps = self.frame["step"].to_numpy(float)
        values = self.frame[column].to_numpy(float)
        sd_column = f"{column}_sd"
        sd = self.frame[sd_column].to_numpy(float) if sd_column in self.frame.columns else np.full(steps.size, np.nan)
        keep = np.isfinite(steps) & np.isfinite(values)
        order = np.argsort(steps[keep], kind="stable")
        return steps[keep][order], values[keep][order], sd[keep][order]

    def progress(self, steps: np.ndarray) -> np.ndarray:
        """Training progress normalised per run: ``step / last step`` (Figures 2-5's x-axis)."""
        return np.asarray(steps, float) / self.last_step if self.last_step > 0 else np.asarray(steps, float)


# ---------------------------------------------------------------------------------------------------------------------
# small numerical helpers
# ---------------------------------------------------------------------------------------------------------------------


def _plain(obj: Any) -> Any:
    """JSON-ready: numpy -> python, non-finite floats -> None, tuples -> lists."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj


def least_squares_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """(slope, intercept, R^2) of the ordinary least-squares line of ``y`` on ``x``; NaNs with < 2 distinct x."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2 or np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    xm, ym = x.mean(), y.mean()
    sxx = float(np.sum((x - xm) ** 2))
    slope = float(np.sum((x - xm) * (y - ym)) / sxx)
    intercept = float(ym - slope * xm)
    tss = float(np.sum((y - ym) ** 2))
    rss = float(np.sum((y - intercept - slope * x) ** 2))
    r2 = 1.0 - rss / tss if tss > 0 else float("nan")
    return slope, intercept, r2


def _window_mask(steps: np.ndarray, fraction: float, late: bool) -> np.ndarray:
    """The first (``late=False``) or last ``fraction`` of the step range; never empty for non-empty ``steps``."""
    if steps.size == 0:
        return np.zeros(0, bool)
    lo, hi = float(steps.min()), float(steps.max())
    span = hi - lo
    mask = steps >= hi - fraction * span if late else steps <= lo + fraction * span
    if not mask.any():
        mask[-1 if late else 0] = True
    return mask


def early_late_levels(steps: np.ndarray, values: np.ndarray, early_fraction: float,
                      late_fraction: float) -> tuple[float, float]:
    """Mean of ``values`` over the first ``early_fraction`` and the last ``late_fraction`` of the step range."""
    if steps.size == 0:
        return float("nan"), float("nan")
    early = float(np.mean(values[_window_mask(steps, early_fraction, late=False)]))
    late = float(np.mean(values[_window_mask(steps, late_fraction, late=True)]))
    return early, late


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or values.size == 0:
        return np.asarray(values, float)
    return pd.Series(values).rolling(window, center=True, min_periods=1).mean().to_numpy()


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(value):
        return "n/a"
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 10 ** -(digits)):
        return f"{value:.{digits - 1}e}"
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0"


def _pct(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{100 * value:+.0f}%"


# ---------------------------------------------------------------------------------------------------------------------
# three-phase fits (Prop. 14, Section 4.4), reused from pgrpo.fitting
# ---------------------------------------------------------------------------------------------------------------------


def fit_three_phase_curve(steps: np.ndarray, values: np.ndarray) -> Any:
    """The three-phase fit of Eq. 16 (``pgrpo.fitting.fit_three_phase``): a FitResult with ``R0``, ``R_inf``,
    ``omega_n``, ``r2``, ``rss``, ``n``, ``success``, ``status``, ``message``."""
    from pgrpo.fitting import fit_three_phase

    return fit_three_phase(steps, values)


def _fit_summary(fit: Any) -> dict[str, Any]:
    if fit is None:
        return {"success": False, "message": "no fit"}
    return {"R0": fit.R0, "R_inf": fit.R_inf, "omega_n": fit.omega_n, "r2": fit.r2, "success": bool(fit.success),
            "status": getattr(fit, "status", ""), "message": fit.message}


def _fit_noise(fit: Any) -> float:
    """Residual s.d. of a fit, ``sqrt(RSS / n)``."""
    rss, n = getattr(fit, "rss", float("nan")), getattr(fit, "n", 0)
    return math.sqrt(rss / n) if n and math.isfinite(rss) and rss >= 0 else float("nan")


def saturation_step(fit: Any, fraction: float = 0.9) -> float:
    """Step at which the three-phase fit reaches ``fraction`` of its rise: ``(1 + w t) exp(-w t) = 1 - fraction``."""
    if fit is None or not fit.success or not (fit.omega_n > 0):
        return float("nan")
    if fraction not in _X_FRACTION_CACHE:
        from scipy.optimize import brentq

        _X_FRACTION_CACHE[fraction] = brentq(lambda x: (1 + x) * math.exp(-x) - (1 - fraction), 1e-12, 200.0)
    return _X_FRACTION_CACHE[fraction] / fit.omega_n


# ---------------------------------------------------------------------------------------------------------------------
# 1. reward hacking (Figure 2, Section 5.2)
# ---------------------------------------------------------------------------------------------------------------------


def normalized_progress(values: np.ndarray, r0: float, r_inf: float) -> np.ndarray:
    """Eq. 17: ``u = (R - R0) / (R_inf - R0)``."""
    return (np.asarray(values, float) - r0) / (r_inf - r0)


def local_relaxation_rate(steps: np.ndarray, values: np.ndarray, r_inf: float, min_points: int = 3) -> float:
    """Least-squares slope of ``-log(R_inf - R)`` on the step (Eq. 14: the relaxation rate ``lambda``); points with
    ``R_inf - R <= 0`` are dropped; NaN with fewer than ``min_points`` usable points or one distinct step."""
    steps = np.asarray(steps, float)
    gap = r_inf - np.asarray(values, float)
    keep = np.isfinite(steps) & np.isfinite(gap) & (gap > 0)
    if keep.sum() < max(min_points, 2):
        return float("nan")
    slope, _, _ = least_squares_line(steps[keep], -np.log(gap[keep]))
    return slope


@dataclass
class CouplingRatio:
    """``rho(t) = lambda_eval(t) / |lambda_train(t)|`` in windows centred on each eval step (Figure 2, row 2)."""

    centers: np.ndarray
    rho: np.ndarray
    lambda_train: np.ndarray
    lambda_eval: np.ndarray
    window_steps: float


def rolling_coupling_ratio(
    train_steps: Sequence[float], train_values: Sequence[float], train_r_inf: float,
    eval_steps: Sequence[float], eval_values: Sequence[float], eval_r_inf: float,
    window_fraction: float = 0.45, min_points: int = 3,
) -> CouplingRatio:
    """The rolling coupling ratio of Section 5.2: for each eval step ``c`` the window ``[c - w/2, c + w/2]`` with
    ``w = window_fraction x (last eval step - first eval step)``; ``lambda`` regressed separately on the train and the
    eval points inside it (:func:`local_relaxation_rate`); ``rho = lambda_eval / |lambda_train|`` (NaN where either
    slope is undefined or ``lambda_train = 0``)."""
    train_steps, train_values = np.asarray(train_steps, float), np.asarray(train_values, float)
    eval_steps, eval_values = np.asarray(eval_steps, float), np.asarray(eval_values, float)
    order = np.argsort(eval_steps, kind="stable")
    eval_steps, eval_values = eval_steps[order], eval_values[order]
    width = window_fraction * (float(np.ptp(eval_steps)) if eval_steps.size else 0.0)
    lam_train, lam_eval, rho = [], [], []
    for center in eval_steps:
        in_train = np.abs(train_steps - center) <= width / 2
        in_eval = np.abs(eval_steps - center) <= width / 2
        lt = local_relaxation_rate(train_steps[in_train], train_values[in_train], train_r_inf, min_points)
        le = local_relaxation_rate(eval_steps[in_eval], eval_values[in_eval], eval_r_inf, min_points)
        lam_train.append(lt)
        lam_eval.append(le)
        rho.append(le / abs(lt) if math.isfinite(lt) and math.isfinite(le) and lt != 0 else float("nan"))
    return CouplingRatio(eval_steps, np.array(rho), np.array(lam_train), np.array(lam_eval), width)


def _rise_problem(fit: Any, what: str, min_over_noise: float) -> str | None:
    """Why a fitted rise cannot be used (None when it can)."""
    if fit is None or not fit.success:
        return f"three-phase fit of the {what} failed: {getattr(fit, 'message', 'no fit')}"
    rise = fit.R_inf - fit.R0
    noise = _fit_noise(fit)
    if not rise > 0:
        return f"the {what} fit does not rise (R_inf - R0 = {_fmt(rise)})"
    if math.isfinite(noise) and rise < min_over_noise * noise:
        return (f"the {what} rise R_inf - R0 = {_fmt(rise)} is within {min_over_noise:g} x its residual s.d. "
                f"{_fmt(noise)}")
    return None


def reward_hacking(curves: RunCurves, config: DiagnosticsConfig | None = None,
                   fits: Mapping[str, Any] | None = None) -> DiagnosticResult:
    """Figure 2 for one run: doubly normalised parametric curve, deficit, rolling coupling ratio, verdict.

    ``fits``: precomputed three-phase fits by column (e.g. from the fitting stage); missing ones are fitted here.
    """
    config = config or DiagnosticsConfig()
    cfg = config.reward_hacking
    fits = dict(fits or {})

    def result(verdict: str, reason: str, **kw: Any) -> DiagnosticResult:
        return DiagnosticResult(REWARD_HACKING, curves.model, curves.G, verdict, reason, **kw)

    eval_column = next((c for c in cfg.eval_columns if curves.has(c)), None)
    missing = [c for c in ("reward",) if not curves.has(c)]
    if eval_column is None:
        missing.append(" or ".join(cfg.eval_columns))
    if missing:
        return result(NOT_RUN, f"column {' and '.join(repr(m) for m in missing)} missing", missing=missing)
    t_steps, t_values, _ = curves.series("reward")
    e_steps, e_values, _ = curves.series(eval_column)
    numbers: dict[str, Any] = {"eval_column": eval_column, "n_eval_points": int(e_steps.size),
                               "rho_min": cfg.rho_min, "deficit_max": cfg.deficit_max}
    if t_steps.size < config.min_points:
        return result(INCONCLUSIVE, f"only {t_steps.size} train reward point(s); need {config.min_points}",
                      numbers=numbers)
    if e_steps.size < cfg.min_eval_points:
        return result(INCONCLUSIVE, f"only {e_steps.size} {eval_column} point(s); need {cfg.min_eval_points}",
                      numbers=numbers)
    train_fit = fits.get("reward") or fit_three_phase_curve(t_steps, t_values)
    eval_fit = fits.get(eval_column) or fit_three_phase_curve(e_steps, e_values)
    numbers["train_fit"], numbers["eval_fit"] = _fit_summary(train_fit), _fit_summary(eval_fit)

    train_problem = _rise_problem(train_fit, "train reward", cfg.min_rise_over_noise)
    if train_problem:
        return result(INCONCLUSIVE, train_problem, numbers=numbers)
    if eval_fit is None or not eval_fit.success:
        status = getattr(eval_fit, "status", "")
        if status in ("flat", "decreasing"):
            return result(HACKING, f"the train reward rises (R0 {_fmt(train_fit.R0)} -> R_inf {_fmt(train_fit.R_inf)}) "
                                   f"but the {eval_column} does not ({getattr(eval_fit, 'message', '')})",
                          numbers=numbers)
        return result(INCONCLUSIVE, f"three-phase fit of {eval_column} failed: {getattr(eval_fit, 'message', '')}",
                      numbers=numbers)
    if not eval_fit.R_inf > eval_fit.R0:
        return result(HACKING, f"the train reward rises but the {eval_column} fit does not "
                               f"(R_inf - R0 = {_fmt(eval_fit.R_inf - eval_fit.R0)})", numbers=numbers)
    eval_problem = _rise_problem(eval_fit, eval_column, cfg.min_rise_over_noise)

    smoothed = _smooth(t_values, config.smoothing)
    u_train = normalized_progress(np.interp(e_steps, t_steps, smoothed), train_fit.R0, train_fit.R_inf)
    u_eval = normalized_progress(e_values, eval_fit.R0, eval_fit.R_inf)
    gap = u_train - u_eval
    deficit = float(np.nanmean(gap)) if np.isfinite(gap).any() else float("nan")
    coupling = rolling_coupling_ratio(t_steps, t_values, train_fit.R_inf, e_steps, e_values, eval_fit.R_inf,
                                      cfg.window_fraction, cfg.min_window_points)
    center_progress = curves.progress(coupling.centers)
    lo, hi = cfg.interior
    interior = (center_progress >= lo) & (center_progress <= hi) & np.isfinite(coupling.rho)
    rho_median = float(np.median(coupling.rho[interior])) if interior.any() else float("nan")
    numbers.update({
        "deficit": deficit, "max_gap": float(np.nanmax(gap)) if np.isfinite(gap).any() else float("nan"),
        "rho_interior_median": rho_median, "n_rho_interior": int(interior.sum()), "interior": list(cfg.interior),
        "window_steps": coupling.window_steps, "final_u_train": float(u_train[-1]), "final_u_eval": float(u_eval[-1]),
    })
    series = {
        "eval_steps": e_steps, "progress": curves.progress(e_steps), "u_train": u_train, "u_eval": u_eval,
        "rho_steps": coupling.centers, "rho_progress": center_progress, "rho": coupling.rho,
        "lambda_train": coupling.lambda_train, "lambda_eval": coupling.lambda_eval,
    }
    if eval_problem:
        return result(INCONCLUSIVE, f"{eval_problem}; deficit {_fmt(deficit)}, median interior rho {_fmt(rho_median)}",
                      numbers=numbers, series=series)

    rho_text = (f"median rho over {lo:.0%}-{hi:.0%} of training = {_fmt(rho_median)} "
                f"({int(interior.sum())} windows of {_fmt(coupling.window_steps)} steps; healthy >= {cfg.rho_min:g})")
    deficit_text = f"deficit = {_fmt(deficit)} (healthy <= {cfg.deficit_max:g})"
    fit_text = f"{eval_column}; fit R^2 train {_fmt(train_fit.r2, 2)}, eval {_fmt(eval_fit.r2, 2)}"
    deficit_ok = deficit <= cfg.deficit_max
    if not math.isfinite(rho_median):
        why = "no interior window with enough train and eval points below R_inf"
        verdict = CO_SATURATING if deficit_ok else HACKING
        return result(verdict, f"{deficit_text}; rho unavailable ({why}), deficit alone; {fit_text}",
                      numbers=numbers, series=series)
    rho_ok = rho_median >= cfg.rho_min
    if rho_ok and deficit_ok:
        return result(CO_SATURATING, f"{rho_text}; {deficit_text}; {fit_text}", numbers=numbers, series=series)
    if not rho_ok and not deficit_ok:
        return result(HACKING, f"{rho_text}; {deficit_text}; {fit_text}", numbers=numbers, series=series)
    which = "rho healthy, deficit not" if rho_ok else "deficit healthy, rho not"
    return result(INCONCLUSIVE, f"read-outs disagree, {which}: {rho_text}; {deficit_text}; {fit_text}",
                  numbers=numbers, series=series)


# ---------------------------------------------------------------------------------------------------------------------
# 2. mode collapse (Figure 3, Section 5.3)
# ---------------------------------------------------------------------------------------------------------------------


def relative_drift(progress: np.ndarray, values: np.ndarray, reference: float) -> float:
    """Fractional change over the run implied by the least-squares line of ``values`` on ``progress``:
    ``slope x (progress span) / reference``."""
    slope, _, _ = least_squares_line(progress, values)
    span = float(np.ptp(progress)) if np.size(progress) else float("nan")
    if not (reference > 0) or not math.isfinite(slope):
        return float("nan")
    return slope * span / reference


def mode_collapse(curves: RunCurves, config: DiagnosticsConfig | None = None) -> DiagnosticResult:
    """Figure 3 for one run: drift of ``sigma_adv^2 / G`` and the collapsed-prompt fraction's level and trend."""
    config = config or DiagnosticsConfig()
    cfg = config.mode_collapse
    missing = [c for c in ("reward_std", "frac_reward_zero_std") if not curves.has(c)]
    if len(missing) == 2:
        return DiagnosticResult(MODE_COLLAPSE, curves.model, curves.G, NOT_RUN,
                                "columns 'reward_std' and 'frac_reward_zero_std' missing", missing=missing)
    numbers: dict[str, Any] = {"G": curves.G}
    series: dict[str, Any] = {}
    issues, notes, fine = [], [], []
    sigma_state = frac_state = "missing"
    G = curves.G if curves.G else 1
    few = {c: curves.series(c)[0].size for c in ("reward_std", "frac_reward_zero_std")
           if curves.has(c) and curves.series(c)[0].size < config.min_points}
    for column, n in few.items():
        notes.append(f"'{column}' has only {n} point(s) (need {config.min_points})")
    if curves.has("reward_std") and "reward_std" not in few:
        steps, std, std_sd = curves.series("reward_std")
        progress = curves.progress(steps)
        s = std**2 / G
        early, late = early_late_levels(steps, s, config.early_fraction, config.late_fraction)
        drift = relative_drift(progress, s, early)
        numbers.update({"sigma2_over_G_early": early, "sigma2_over_G_late": late, "sigma2_over_G_drift": drift,
                        "sigma2_late": late * G, "drift_max": cfg.drift_max,
                        "G_used": curves.G})
        series.update({"sigma2_over_G_steps": steps, "sigma2_over_G_progress": progress, "sigma2_over_G": s,
                       "sigma2_over_G_low": np.clip(std - std_sd, 0, None) ** 2 / G,
                       "sigma2_over_G_high": (std + std_sd) ** 2 / G})
        text = (f"sigma^2/G early {_fmt(early)} -> late {_fmt(late)}, trend {_pct(drift)} of the early level "
                f"(flat within +/-{cfg.drift_max:.0%})")
        if not curves.G:
            text += " [G unknown: sigma^2 shown]"
        if not math.isfinite(drift):
            sigma_state = "no plateau"
            notes.append(f"sigma^2/G is {_fmt(early)} over the first {config.early_fraction:.0%} of training "
                         "(every group uniform): no early plateau to drift from")
        elif drift <= -cfg.drift_max:
            sigma_state = "drifting down"
            issues.append(text)
        elif drift >= cfg.drift_max:
            sigma_state = "drifting up"
            notes.append(text)
        else:
            sigma_state = "flat"
            fine.append(text)
    if curves.has("frac_reward_zero_std") and "frac_reward_zero_std" not in few:
        steps, frac, frac_sd = curves.series("frac_reward_zero_std")
        early, late = early_late_levels(steps, frac, config.early_fraction, config.late_fraction)
        slope, _, _ = least_squares_line(curves.progress(steps), frac)
        numbers.update({"frac_zero_std_early": early, "frac_zero_std_late": late, "frac_zero_std_rise": late - early,
                        "frac_zero_std_slope": slope, "frac_zero_std_max": cfg.frac_zero_std_max,
                        "frac_zero_std_rise_max": cfg.frac_zero_std_rise_max})
        series.update({"frac_steps": steps, "frac_progress": curves.progress(steps), "frac": frac,
                       "frac_sd": frac_sd})
        text = (f"collapsed-prompt fraction early {_fmt(early)} -> late {_fmt(late)} "
                f"(healthy: late < {cfg.frac_zero_std_max:g}, rise < {cfg.frac_zero_std_rise_max:g})")
        if late >= cfg.frac_zero_std_max:
            frac_state = "high"
            issues.append(text)
        elif late - early >= cfg.frac_zero_std_rise_max:
            frac_state = "climbing"
            issues.append(text)
        else:
            frac_state = "near zero" if late < cfg.frac_zero_std_max / 2 else "moderate"
            fine.append(text)
    numbers.update({"sigma_state": sigma_state, "frac_state": frac_state})
    missing_text = "; ".join(f"'{m}' missing" for m in missing)
    parts = issues + notes + fine + ([missing_text] if missing_text else [])
    if sigma_state == "drifting down" and frac_state in ("high", "climbing"):
        verdict = COLLAPSE
    elif issues:
        verdict = WARNING
    elif sigma_state in ("flat", "drifting up") or frac_state in ("near zero", "moderate"):
        verdict = HEALTHY  # an upward drift is not the collapse direction; it is named in the reason
    else:
        verdict = INCONCLUSIVE
    return DiagnosticResult(MODE_COLLAPSE, curves.model, curves.G, verdict, "; ".join(parts), numbers, series,
                            missing)


def mode_collapse_across_G(per_G: Sequence[DiagnosticResult],
                           config: DiagnosticsConfig | None = None) -> DiagnosticResult:
    """Figure 3 across group sizes: late ``sigma_adv^2`` ratios (Lemma 6: 1) and the model's overall verdict."""
    config = config or DiagnosticsConfig()
    cfg = config.mode_collapse
    model = per_G[0].model if per_G else ""
    late = {r.G: r.numbers.get("sigma2_late") for r in per_G
            if r.G and r.numbers.get("sigma2_late") is not None and r.numbers.get("G_used")}
    pairs = []
    separated = False
    Gs = sorted(late)
    for i, Gi in enumerate(Gs):
        for Gj in Gs[i + 1:]:
            ratio = late[Gi] / late[Gj] if late[Gj] > 0 else float("nan")
            is_separated = (not math.isfinite(ratio) or ratio <= 0
                            or max(ratio, 1 / ratio) > cfg.separation_max)
            pair = {"G_small": Gi, "G_large": Gj, "sigma2_ratio": ratio, "lemma6_sigma2_ratio": 1.0,
                    "sigma2_over_G_ratio": ratio * Gj / Gi, "lemma6_sigma2_over_G_ratio": Gj / Gi,
                    "separated": bool(is_separated)}
            separated |= pair["separated"]
            pairs.append(pair)
    verdicts = {r.G: r.verdict for r in per_G}
    numbers = {"pairs": pairs, "separation_max": cfg.separation_max, "per_G": verdicts}
    pair_text = "; ".join(
        f"late sigma^2 G={p['G_small']}/G={p['G_large']} = {_fmt(p['sigma2_ratio'])} (Lemma 6: 1, separated outside "
        f"x{cfg.separation_max:g}; sigma^2/G ratio {_fmt(p['sigma2_over_G_ratio'])} vs "
        f"{_fmt(p['lemma6_sigma2_over_G_ratio'])})"
        for p in pairs)
    per_G_text = ", ".join(f"G={G}: {v}" for G, v in sorted(verdicts.items(), key=lambda kv: kv[0] or 0))
    ran = [r for r in per_G if r.ran and r.verdict != INCONCLUSIVE]
    if not ran:
        return DiagnosticResult(MODE_COLLAPSE, model, None, INCONCLUSIVE if per_G else NOT_RUN,
                                f"no group size could be assessed ({per_G_text or 'no runs'})", numbers,
                                across_G=True)
    if any(r.verdict == COLLAPSE for r in per_G):
        verdict = COLLAPSE
    elif any(r.verdict == WARNING for r in per_G) or separated:
        verdict = WARNING
    else:
        verdict = HEALTHY
    if not pairs:
        pair_text = "G-separation not tested (needs two group sizes with reward_std and a known G)"
    elif separated:
        pair_text = "G-dependence of sigma_adv beyond Lemma 6: " + pair_text
    return DiagnosticResult(MODE_COLLAPSE, model, None, verdict, f"{per_G_text}; {pair_text}", numbers,
                            across_G=True)


# ---------------------------------------------------------------------------------------------------------------------
# 3. policy concentration (Figure 4, Section 5.4)
# ---------------------------------------------------------------------------------------------------------------------


def policy_concentration(curves: RunCurves, config: DiagnosticsConfig | None = None,
                         fits: Mapping[str, Any] | None = None) -> DiagnosticResult:
    """Figure 4 for one run: entropy change, KL rise, benign shift vs concentration, and the timing of the entropy
    drop against reward saturation (the step where the train reward's three-phase fit reaches 90% of its rise)."""
    config = config or DiagnosticsConfig()
    cfg = config.policy_concentration
    fits = dict(fits or {})

    def result(verdict: str, reason: str, **kw: Any) -> DiagnosticResult:
        return DiagnosticResult(POLICY_CONCENTRATION, curves.model, curves.G, verdict, reason, **kw)

    if not curves.has("entropy"):
        missing = ["entropy"] + ([] if curves.has("kl") else ["kl"])
        return result(NOT_RUN, "column 'entropy' missing" + (" (and 'kl')" if len(missing) == 2 else ""),
                      missing=missing)
    missing: list[str] = []
    steps, entropy, entropy_sd = curves.series("entropy")
    if steps.size < config.min_points:
        return result(INCONCLUSIVE, f"only {steps.size} entropy point(s); need {config.min_points}")
    early, late = early_late_levels(steps, entropy, config.early_fraction, config.late_fraction)
    change = (late - early) / early if early > 0 else float("nan")
    numbers: dict[str, Any] = {"entropy_early": early, "entropy_late": late, "entropy_change": change,
                               "entropy_drop_min": cfg.entropy_drop_min, "kl_rise_min": cfg.kl_rise_min}
    series: dict[str, Any] = {"entropy_steps": steps, "entropy_progress": curves.progress(steps),
                              "entropy": entropy, "entropy_sd": entropy_sd}
    if not math.isfinite(change):
        return result(INCONCLUSIVE, f"early entropy {_fmt(early)} is not positive", numbers=numbers, series=series)
    dropped = change <= -cfg.entropy_drop_min
    entropy_text = (f"entropy {_fmt(early)} -> {_fmt(late)} ({_pct(change)}; concentration at "
                    f"<= -{cfg.entropy_drop_min:.0%})")
    kl_rising = None
    kl_text = "KL not logged"
    if curves.has("kl"):
        k_steps, kl, kl_sd = curves.series("kl")
        kl_early, kl_late = early_late_levels(k_steps, kl, config.early_fraction, config.late_fraction)
        kl_rising = kl_late - kl_early >= cfg.kl_rise_min
        numbers.update({"kl_early": kl_early, "kl_late": kl_late, "kl_rise": kl_late - kl_early})
        series.update({"kl_steps": k_steps, "kl_progress": curves.progress(k_steps), "kl": kl, "kl_sd": kl_sd})
        trend = "rising" if kl_rising else "flat"
        kl_text = f"KL {_fmt(kl_early)} -> {_fmt(kl_late)} ({trend} at >= {cfg.kl_rise_min:g})"
    else:
        missing.append("kl")
    numbers["kl_rising"] = kl_rising
    if not dropped:
        verdict = {True: BENIGN_SHIFT, False: NO_SHIFT, None: ENTROPY_STABLE}[kl_rising]
        return result(verdict, f"{entropy_text}; {kl_text}", numbers=numbers, series=series, missing=missing)

    threshold = early * (1 - cfg.entropy_drop_min)
    below = np.nonzero(_smooth(entropy, config.smoothing) <= threshold)[0]
    drop_step = float(steps[below[0]]) if below.size else float(steps[-1])
    numbers.update({"entropy_drop_step": drop_step, "entropy_drop_progress": float(curves.progress(drop_step))})
    drop_text = (f"entropy reached -{cfg.entropy_drop_min:.0%} at step {_fmt(drop_step)} "
                 f"({curves.progress(drop_step):.0%})")
    if kl_rising is False:
        kl_text += ", entropy fell without a KL rise"
    fit = fits.get("reward")
    if fit is None and curves.has("reward"):
        fit = fit_three_phase_curve(*curves.series("reward")[:2])
    t_sat = saturation_step(fit, cfg.saturation_fraction)
    numbers.update({"saturation_step": t_sat, "saturation_progress": float(curves.progress(t_sat)),
                    "saturation_fraction": cfg.saturation_fraction, "reward_fit": _fit_summary(fit)})
    if not math.isfinite(t_sat):
        why = "'reward' missing" if not curves.has("reward") else f"reward fit: {getattr(fit, 'message', 'no fit')}"
        if not curves.has("reward"):
            missing.append("reward")
        return result(CONCENTRATION_UNTIMED, f"{entropy_text}; {kl_text}; {drop_text}; saturation unknown ({why})",
                      numbers=numbers, series=series, missing=missing)
    beyond = " (after the run's last step: the reward had not saturated)" if t_sat > curves.last_step else ""
    sat_text = f"reward reached {cfg.saturation_fraction:.0%} of its fitted rise at step {_fmt(t_sat)}{beyond}"
    verdict = CONCENTRATION_BEFORE if drop_step < t_sat else CONCENTRATION_AFTER
    numbers["drop_precedes_saturation"] = drop_step < t_sat
    return result(verdict, f"{entropy_text}; {kl_text}; {drop_text}; {sat_text}", numbers=numbers, series=series,
                  missing=missing)


# ---------------------------------------------------------------------------------------------------------------------
# 4. stability (Figure 5, Section 5.5; Prop. 9)
# ---------------------------------------------------------------------------------------------------------------------


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
                        "grad_late_median": float(np.median(grad[_window_mask(steps, 0.5, True)]))})
        series.update({"grad_steps": steps, "grad_progress": curves.progress(steps), "grad_norm": grad,
                       "grad_norm_sd": grad_sd})
        text = (f"grad_norm x{_fmt(growth)} over the last half (log-linear R^2 {_fmt(r2, 2)}; exponential at "
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
        late = float(np.median(ratio[_window_mask(steps, 0.5, True)]))
        _, growth, _ = log_growth(steps, ratio)
        numbers.update({"is_max_late_median": late, "is_max_growth_last_half": growth})
        series.update({"is_steps": steps, "is_progress": curves.progress(steps), "is_max": ratio,
                       "is_max_sd": ratio_sd})
        source = curves.column_sources.get("importance_sampling_ratio_max")
        src = f" [{source}]" if source and source != "importance_sampling_ratio_max" else ""
        text = (f"IS-ratio max late median {_fmt(late)}{src}, x{_fmt(growth)} over the last half "
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
            from pgrpo.fitting import stiffness_from_natural_frequency

            fit = fits.get("reward")
            if fit is None and curves.has("reward"):
                fit = fit_three_phase_curve(*curves.series("reward")[:2])
            if fit is not None and fit.success and getattr(fit, "n", config.min_points) >= config.min_points:
                K = stiffness_from_natural_frequency(fit.omega_n, float(meta["eta"]), float(meta["mu"]),
                                                     float(meta["k_ref"]))
                K_source = f"from the train reward's omega_n = {_fmt(fit.omega_n)} (Eq. 9)"
        if K is not None and math.isfinite(K):
            prop9 = stability_threshold(K, float(meta["eta"]), float(meta["mu"]), float(meta["k_ref"]))
            prop9["K_source"] = K_source
            numbers["prop9"] = prop9
            text = (f"Prop. 9: K eta K_ref = {_fmt(prop9['K_eta_Kref'])} vs 1 - mu = {_fmt(prop9['one_minus_mu'])} "
                    f"(ratio {_fmt(prop9['threshold_ratio'])}; K = {_fmt(K)} {K_source})")
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


# ---------------------------------------------------------------------------------------------------------------------
# reading inputs
# ---------------------------------------------------------------------------------------------------------------------


def _frame_from_aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    """``<col>_mean`` -> ``<col>``, ``<col>_sd`` kept, ``<col>_n`` dropped."""
    out = {"step": pd.to_numeric(frame["step"], errors="coerce")}
    for column in frame.columns:
        if column.endswith("_mean"):
            out[column[: -len("_mean")]] = pd.to_numeric(frame[column], errors="coerce")
        elif column.endswith("_sd"):
            out[column] = pd.to_numeric(frame[column], errors="coerce")
    return pd.DataFrame(out)


def read_aggregate(path: str, model: str | None = None, G: int | None = None,
                   meta: dict[str, Any] | None = None) -> RunCurves:
    """One ``results/aggregate/{model}/G{G}.csv`` as RunCurves (model and G from the path unless given)."""
    from pgrpo.fitting import parse_aggregate_path

    if model is None or G is None:
        parsed_model, parsed_G = parse_aggregate_path(path)
        model, G = model or parsed_model, G or parsed_G
    if not Path(path).is_file():
        raise InputError(f"aggregate file not found: {path}")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise InputError(f"aggregate file {path} is not a readable CSV: {str(error).splitlines()[0]}") from None
    if "step" not in frame.columns:
        raise InputError(f"aggregate file {path} has no 'step' column")
    return RunCurves(model, int(G), _frame_from_aggregate(frame), str(path), meta)


def apply_aliases(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """Map other spellings (:data:`COLUMN_ALIASES`) onto the workflow's names where those are absent; an aggregate
    CSV's ``<col>_mean`` becomes ``<col>``. Returns the frame and ``{name: source column}``."""
    sources = {c: c for c in frame.columns}
    if "reward" not in frame.columns and "reward_mean" in frame.columns:
        frame = _frame_from_aggregate(frame)
        sources = {c: f"{c}_mean" for c in frame.columns}
    renames = {}
    for alias, name in COLUMN_ALIASES.items():
        if alias in frame.columns and name not in frame.columns and name not in renames.values():
            renames[alias] = name
            sources[name] = alias
    return frame.rename(columns=renames), sources


def read_log(path: str) -> RunCurves:
    """Any run's log as RunCurves: our ``log.csv``, a TRL/W&B CSV (``train/...``, ``eval/...``), an aggregate CSV,
    or a TRL ``trainer_state.json`` (``log_history``). InputError for an unreadable file or no known column."""
    from pgrpo.aggregate import load_log

    file = Path(path)
    if not file.is_file():
        raise InputError(f"log not found: {path}")
    try:
        frame = load_log(path)
    except InputError:
        raise
    except (UnicodeDecodeError, ValueError, OSError) as error:
        raise InputError(f"log {path} is not a readable CSV or trainer_state.json: "
                         f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    frame, sources = apply_aliases(frame)
    known = [c for c in KNOWN_COLUMNS if c in frame.columns and np.isfinite(frame[c].to_numpy(float)).any()]
    if not known:
        found = [c for c in frame.columns if c != "step"]
        shown = ", ".join(found[:25]) + (f", ... ({len(found)} in all)" if len(found) > 25 else "")
        raise InputError(f"log {path} has no recognisable column (looked for {', '.join(KNOWN_COLUMNS)} with or "
                         f"without a train/ or eval/ prefix; found: {shown or 'none'})")
    model = file.parent.name if file.name in ("trainer_state.json", "log.csv") else file.stem
    match = re.search(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed\d+/[^/]+$", file.resolve().as_posix())
    G = int(match["G"]) if match else None
    if match:
        model = match["model"]
    return RunCurves(model, G, frame, str(path), None, {c: sources.get(c, c) for c in known})


def read_metas(meta_jsons: Sequence[str] | None) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (model, G): the first seed's ``meta.json`` (eta, mu, k_ref, ...); model/G from the file, else its path
    ``.../{model}/G{G}/seed{seed}/meta.json``."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for path in meta_jsons or []:
        meta = read_json(path, "run metadata")
        match = re.search(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed\d+/[^/]+$", Path(path).resolve().as_posix())
        model = meta.get("model") or (match["model"] if match else None)
        G = meta.get("G") or (int(match["G"]) if match else None)
        if model is None or G is None:
            raise InputError(f"run metadata {path} names no model/G and is not under <model>/G<G>/seed<seed>/")
        for key in ("eta", "mu", "k_ref"):
            if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], (int, float))):
                raise InputError(f"run metadata {path}: '{key}' must be a number, got {meta[key]!r}")
        out.setdefault((str(model), int(G)), meta)
        if match:
            out.setdefault((match["model"], int(match["G"])), meta)
    return out


def read_fits(fit_jsons: Sequence[str] | None) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (model, G): ``{column: FitResult}`` of the three-phase law from ``pgrpo.fitting.run_fit``'s JSON."""
    from pgrpo.fitting import THREE_PHASE, FitResult

    out: dict[tuple[str, int], dict[str, Any]] = {}
    for path in fit_jsons or []:
        payload = read_json(path, "fit JSON")
        if "model" not in payload or not isinstance(payload.get("groups"), dict):
            raise InputError(f"fit JSON {path} has no 'model'/'groups' (expected the output of pgrpo fit)")
        for G, group in payload["groups"].items():
            for column, record in (group.get("columns") or {}).items():
                data = (record.get("fits") or {}).get(THREE_PHASE)
                if data:
                    out.setdefault((str(payload["model"]), int(G)), {})[column] = FitResult.from_dict(data)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# running all four
# ---------------------------------------------------------------------------------------------------------------------


def _run_fits(curves: RunCurves, config: DiagnosticsConfig, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The three-phase fits the diagnostics share: train reward and the eval column (given ones win)."""
    fits = dict(given or {})
    eval_column = next((c for c in config.reward_hacking.eval_columns if curves.has(c)), None)
    for column in ("reward", eval_column):
        if column is not None and column not in fits and curves.has(column):
            steps, values, _ = curves.series(column)
            fits[column] = fit_three_phase_curve(steps, values)
    return fits


def diagnose_run(curves: RunCurves, config: DiagnosticsConfig | None = None,
                 fits: Mapping[str, Any] | None = None) -> list[DiagnosticResult]:
    """The four diagnostics of one run, in the paper's order."""
    config = config or DiagnosticsConfig()
    fits = _run_fits(curves, config, fits)
    return [
        reward_hacking(curves, config, fits),
        mode_collapse(curves, config),
        policy_concentration(curves, config, fits),
        stability(curves, config, fits),
    ]


@dataclass
class DiagnosticsReport:
    """All diagnostics of all runs: ``results`` per (model, G) and, for mode collapse, per model across G."""

    results: list[DiagnosticResult]
    models: list[str]
    group_sizes: dict[str, list[int]]
    config: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)

    def of(self, diagnostic: str, model: str | None = None, G: int | None | str = "any") -> list[DiagnosticResult]:
        return [r for r in self.results if r.diagnostic == diagnostic and (model is None or r.model == model)
                and (G == "any" or r.G == G)]

    def get(self, diagnostic: str, model: str, G: int | None) -> DiagnosticResult | None:
        found = [r for r in self.of(diagnostic, model, G) if not r.across_G]
        return found[0] if found else None

    def to_dict(self, with_series: bool = True) -> dict[str, Any]:
        """Everything; ``series`` only for the derived curves of Figure 2 (u, rho): the other figures plot the
        aggregate columns themselves, which are in the aggregate CSVs already."""
        return _plain({
            "models": self.models, "group_sizes": self.group_sizes, "inputs": self.inputs, "config": self.config,
            "diagnostics": {name: [r.to_dict(with_series and name == REWARD_HACKING) for r in self.of(name)]
                            for name in DIAGNOSTICS},
        })

    def to_markdown(self, title: str = "GRPO training diagnostics (Figures 2-5)") -> str:
        lines = [f"# {title}", ""]
        if self.inputs:
            for key, value in self.inputs.items():
                shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
                lines.append(f"- {key}: {shown or 'none'}")
            lines.append("")
        lines += ["Progress is `step / last step` of each run; early/late = first/last "
                  f"{self.config.get('early_fraction', 0.2):.0%}/{self.config.get('late_fraction', 0.2):.0%} of the "
                  "steps. Thresholds are the `diagnostics:` config section (listed at the end).", ""]
        for index, name in enumerate(DIAGNOSTICS, 1):
            lines += [f"## {index}. {TITLES[name]}", "", READING[name], ""]
            results = self.of(name)
            lines += [r.line() for r in results] or ["- no runs"]
            lines.append("")
        lines += ["## Thresholds", "", "```json", json.dumps(self.config, indent=1), "```", ""]
        return "\n".join(lines)


READING: dict[str, str] = {
    REWARD_HACKING: ("Healthy: train and eval co-saturate, `u_eval ≈ u_train` (deficit ≈ 0) and the coupling ratio "
                     "`rho = lambda_eval/|lambda_train|` ≈ 1 in the interior of training. Hacking: eval progress lags "
                     "(deficit > 0) and `rho -> 0`."),
    MODE_COLLAPSE: ("Healthy: `sigma_adv^2/G` on a flat plateau and a collapsed-prompt fraction "
                    "(`frac_reward_zero_std`) near zero. A downward drift together with a climbing fraction is "
                    "the collapse signature; a late `sigma_adv^2` ratio between group sizes far from 1 is a "
                    "G-dependence Lemma 6 does not predict."),
    POLICY_CONCENTRATION: ("Benign shift: KL rises while entropy stays put. Concentration: entropy falls by more than "
                           "the threshold (with KL rising). Dangerous when the entropy drop comes before the reward "
                           "has saturated (90% of its fitted rise): Assumption 1 then fails while the reward still "
                           "moves."),
    STABILITY: ("Stable: bounded grad_norm (no exponential growth over the last half, no spikes) and a bounded "
                "IS-ratio max; Prop. 9 predicts instability when `K eta K_ref > 1 - mu`."),
}


def diagnose_runs(runs: Sequence[RunCurves], config: DiagnosticsConfig | None = None,
                  fits: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
                  progress_bar: bool = True) -> DiagnosticsReport:
    """The four diagnostics for every run, plus mode collapse across G per model."""
    from tqdm.auto import tqdm

    config = config or DiagnosticsConfig()
    fits = fits or {}
    per_run: list[DiagnosticResult] = []
    models: list[str] = []
    group_sizes: dict[str, list[int]] = {}
    for curves in tqdm(runs, desc="diagnose", leave=False, disable=None if progress_bar else True):
        if curves.model not in models:
            models.append(curves.model)
        if curves.G is not None:
            group_sizes.setdefault(curves.model, []).append(curves.G)
        per_run += diagnose_run(curves, config, fits.get((curves.model, curves.G)))
    results = []
    for name in DIAGNOSTICS:
        for model in models:
            mine = [r for r in per_run if r.diagnostic == name and r.model == model]
            results += sorted(mine, key=lambda r: r.G or 0)
            if name == MODE_COLLAPSE:
                results.append(mode_collapse_across_G(sorted(mine, key=lambda r: r.G or 0), config))
    return DiagnosticsReport(results, models, {m: sorted(g) for m, g in group_sizes.items()},
                             _plain(dataclasses.asdict(config)))


def run_diagnostics(
    aggregate_csvs: Sequence[str],
    out_json: str,
    out_md: str,
    out_dir_figures: str | None = None,
    meta_jsons: Sequence[str] | None = None,
    fit_jsons: Sequence[str] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
) -> DiagnosticsReport:
    """Figures 2-5 for every model: ``aggregate_csvs`` are ``results/aggregate/{model}/G{G}.csv`` (any models, any
    G); ``meta_jsons`` the runs' ``meta.json`` (for Prop. 9); ``fit_jsons`` the fitting stage's JSONs (their
    three-phase fits are reused; anything missing is fitted here); ``diagnostics`` the config section.

    Writes ``out_json`` (every number, verdict and plotted series), ``out_md`` (one section per diagnostic, one line
    per (model, G)), and, if ``out_dir_figures`` is given, ``figure2..figure5`` as ``.pdf`` and ``.png`` there.
    """
    from pgrpo.atomic import write_json, write_text

    config = diagnostics_config(diagnostics)
    if not aggregate_csvs:
        raise InputError("no aggregate CSV given to diagnose")
    if len(set(map(str, aggregate_csvs))) != len(aggregate_csvs):
        raise InputError("an aggregate CSV is listed twice")
    metas = read_metas(meta_jsons)
    fits = read_fits(fit_jsons)
    runs: list[RunCurves] = []
    for path in aggregate_csvs:
        curves = read_aggregate(str(path))
        twin = next((r for r in runs if (r.model, r.G) == (curves.model, curves.G)), None)
        if twin is not None:
            raise InputError(f"two aggregate files for {curves.model} G={curves.G}: {twin.source} and {path}")
        curves.meta = metas.get((curves.model, curves.G))
        runs.append(curves)
    report = diagnose_runs(runs, config, fits)
    report.inputs = {"aggregates": [str(p) for p in aggregate_csvs], "meta": [str(p) for p in meta_jsons or []],
                     "fits": [str(p) for p in fit_jsons or []]}
    if out_dir_figures:
        from pgrpo.diagnostic_plots import write_figures

        write_figures(report, runs, out_dir_figures)
    write_json(out_json, report.to_dict())
    write_text(out_md, report.to_markdown())
    return report


# ---------------------------------------------------------------------------------------------------------------------
# diagnose any TRL log
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class DiagnosisReport:
    """The diagnostics one log allows: ``results`` (one per diagnostic; ``verdict == "not run"`` with the missing
    column named in ``reason`` where it could not run), the columns found and where each came from."""

    source: str
    model: str
    G: int | None
    n_steps: int
    columns_found: dict[str, str]
    columns_ignored: list[str]
    results: list[DiagnosticResult]
    config: dict[str, Any]

    @property
    def not_run(self) -> dict[str, str]:
        return {r.diagnostic: r.reason for r in self.results if not r.ran}

    def result(self, diagnostic: str) -> DiagnosticResult:
        return next(r for r in self.results if r.diagnostic == diagnostic)

    def to_dict(self, with_series: bool = False) -> dict[str, Any]:
        return _plain({"source": self.source, "model": self.model, "G": self.G, "n_steps": self.n_steps,
                       "columns_found": self.columns_found, "columns_ignored": self.columns_ignored,
                       "not_run": self.not_run, "config": self.config,
                       "diagnostics": {r.diagnostic: r.to_dict(with_series) for r in self.results}})

    def to_markdown(self) -> str:
        found = ", ".join(f"`{k}`" + (f" (from `{v}`)" if v != k else "") for k, v in self.columns_found.items())
        lines = [f"# Diagnosis of {self.source}", "",
                 f"- run: {self.model}" + (f", G={self.G}" if self.G else ", G unknown (sigma^2 not divided by G)"),
                 f"- steps: {self.n_steps}; columns used: {found}", ""]
        for index, r in enumerate(self.results, 1):
            lines += [f"## {index}. {TITLES[r.diagnostic]}", "", READING[r.diagnostic], "", r.line(), ""]
        if self.not_run:
            lines += ["## Could not run", ""] + [f"- {TITLES[k]}: {v}" for k, v in self.not_run.items()] + [""]
        return "\n".join(lines)


def _log_curves(path: str, meta: Mapping[str, Any] | None, G: int | None) -> RunCurves:
    curves = read_log(path)
    if meta:
        curves.meta = dict(meta)
        if meta.get("G") and curves.G is None:
            curves.G = int(meta["G"])
        if meta.get("model"):
            curves.model = str(meta["model"])
    if G is not None:
        curves.G = int(G)
    return curves


def _diagnose_curves(curves: RunCurves, config: DiagnosticsConfig) -> DiagnosisReport:
    results = diagnose_run(curves, config)
    ignored = [c for c in curves.frame.columns if c != "step" and c not in curves.column_sources
               and not c.endswith("_sd")]
    return DiagnosisReport(curves.source, curves.model, curves.G, int(curves.frame["step"].nunique()),
                           dict(curves.column_sources), ignored, results, _plain(dataclasses.asdict(config)))


def diagnose_log(path: str, meta: Mapping[str, Any] | None = None, config: DiagnosticsConfig | None = None,
                 G: int | None = None) -> DiagnosisReport:
    """The four diagnostics for one run's log (any of the formats :func:`read_log` reads). ``meta``: the run's
    ``meta.json`` content (model, G, eta, mu, k_ref) if known; ``G`` overrides. The across-G part of mode collapse
    needs several runs and is not part of a single log's diagnosis."""
    return _diagnose_curves(_log_curves(path, meta, G), config or DiagnosticsConfig())


def run_diagnose(
    log_path: str,
    out_json: str | None = None,
    out_md: str | None = None,
    meta_json: str | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    G: int | None = None,
    out_dir_figures: str | None = None,
) -> DiagnosisReport:
    """``pgrpo diagnose LOG``: :func:`diagnose_log` with the config section validated and ``meta_json`` read first;
    writes ``out_json`` (numbers and verdicts), ``out_md`` (the verdicts in words) and ``figure2..5`` (.pdf, .png)
    in ``out_dir_figures``, each only when given. Returns the report (its ``to_markdown()`` is what to print)."""
    from pgrpo.atomic import write_json, write_text

    config = diagnostics_config(diagnostics)
    if G is not None and (isinstance(G, bool) or not isinstance(G, int) or G < 1):
        raise InputError(f"G must be an integer >= 1, got {G!r}")
    meta = read_json(meta_json, "run metadata") if meta_json else None
    curves = _log_curves(log_path, meta, G)
    report = _diagnose_curves(curves, config)
    if out_dir_figures:
        from pgrpo.diagnostic_plots import write_figures

        write_figures(DiagnosticsReport(report.results, [report.model],
                                        {report.model: [report.G] if report.G else []}, report.config),
                      [curves], out_dir_figures)
    if out_json:
        write_json(out_json, report.to_dict())
    if out_md:
        write_text(out_md, report.to_markdown())
    return report
