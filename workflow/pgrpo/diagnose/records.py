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
   reward's fitted ``omega_n`` through Eq. 9, ``pgrpo.fit.theory_link.stiffness_from_natural_frequency``), the ratio
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
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

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


X_FRACTION_CACHE: dict[float, float] = {}


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
        return plain(data)


@dataclass
class RunCurves:
    """One run's per-step curves: ``frame`` has ``step`` and, per quantity, its value column and optionally
    ``<q>_sd`` (the s.d. across seeds). ``meta``: the run's ``meta.json`` (eta, mu, k_ref, max_completion_length,
    ...) if known; ``non_finite``: per column, the steps the log recorded as NaN or infinite (``--allow-nan``)."""

    model: str
    G: int | None
    frame: pd.DataFrame
    source: str = ""
    meta: dict[str, Any] | None = None
    column_sources: dict[str, str] = field(default_factory=dict)
    non_finite: dict[str, list[float]] = field(default_factory=dict)  # column -> steps logged as NaN/inf

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


def plain(obj: Any) -> Any:
    """JSON-ready: numpy -> python, non-finite floats -> None, tuples -> lists."""
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [plain(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj
