"""Model selection between the laws of Section 3.5 (AIC, AICc, BIC, Akaike weights) and the binomial noise ceiling
on R^2 of a binary-reward curve (what Section 5.1's R^2 >= 0.91 can reach at a given number of completions).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from pgrpo.fit.laws import LAWS, THREE_PHASE
from pgrpo.fit.least_squares import FitResult, finite_or_none


@dataclass
class ModelComparison:
    """Which law the data prefer: smallest AIC (and BIC), ΔAIC of each law, Akaike weights.

    Only successful fits on the same points take part; ``failed`` maps each other law to its message.
    """

    laws: list[str]
    best_aic: str | None
    best_bic: str | None
    best_aicc: str | None
    delta_aic: dict[str, float]
    delta_bic: dict[str, float]
    delta_aicc: dict[str, float]
    akaike_weights: dict[str, float]
    failed: dict[str, str]
    n: int | None

    def summary(self, subject: str = "this curve") -> str:
        """One or two sentences in words: the preferred law and by how much."""
        if self.best_aic is None:
            reasons = "; ".join(f"{law}: {msg}" for law, msg in self.failed.items())
            return f"No law could be fitted to {subject} ({reasons})."
        best = self.best_aic
        others = sorted((law for law in self.laws if law != best), key=lambda law: self.delta_aic[law])
        text = f"For {subject}, the data prefer the {LAWS[best].label} law by AIC"
        if others:
            runner = others[0]
            delta = self.delta_aic[runner]
            text += (
                f" (ΔAIC = {delta:.1f} to the next, {LAWS[runner].label}: {evidence_in_words(delta)}; "
                f"Akaike weight {self.akaike_weights[best]:.3f})"
            )
        if self.best_bic == best:
            text += "; BIC agrees."
        else:
            text += f"; BIC prefers the {LAWS[self.best_bic].label} law instead (ΔBIC = "
            text += f"{self.delta_bic[best]:.1f} for the AIC choice)."
        if THREE_PHASE in self.laws and best != THREE_PHASE:
            text += f" The three-phase law is at ΔAIC = {self.delta_aic[THREE_PHASE]:.1f}."
        if self.failed:
            text += " Not fitted: " + "; ".join(f"{law} ({msg})" for law, msg in self.failed.items()) + "."
        return text

    def to_dict(self) -> dict[str, Any]:
        return finite_or_none(dataclasses.asdict(self))


def evidence_in_words(delta_aic: float) -> str:
    """Burnham & Anderson's reading of a ΔAIC."""
    if delta_aic < 2:
        return "the two are indistinguishable"
    if delta_aic < 4:
        return "weak preference"
    if delta_aic < 10:
        return "clear preference"
    return "decisive preference"


def compare_laws(fits: Mapping[str, FitResult]) -> ModelComparison:
    """Rank the successful fits of ``fits`` (all on the same points) by AIC, AICc and BIC."""
    ok = {law: fit for law, fit in fits.items() if fit.success}
    failed = {law: fit.message for law, fit in fits.items() if not fit.success}
    if not ok:
        return ModelComparison([], None, None, None, {}, {}, {}, {}, failed, None)
    sizes = {fit.n for fit in ok.values()}
    if len(sizes) > 1:
        raise ValueError(f"fits on different numbers of points cannot be compared: {sorted(sizes)}")

    def deltas(attr: str) -> dict[str, float]:
        values = {law: getattr(fit, attr) for law, fit in ok.items()}
        finite = [v for v in values.values() if math.isfinite(v)]
        low = min(finite) if finite else float("nan")
        return {law: v - low for law, v in values.items()}

    delta_aic, delta_bic, delta_aicc = deltas("aic"), deltas("bic"), deltas("aicc")
    raw = {law: math.exp(-0.5 * d) for law, d in delta_aic.items()}
    total = sum(raw.values())
    weights = {law: v / total for law, v in raw.items()}
    order = sorted(ok, key=lambda law: delta_aic[law])
    best_aicc = min((law for law in ok if math.isfinite(delta_aicc[law])), key=lambda law: delta_aicc[law],
                    default=None)
    return ModelComparison(
        laws=order,
        best_aic=order[0],
        best_bic=min(ok, key=lambda law: delta_bic[law]),
        best_aicc=best_aicc,
        delta_aic=delta_aic,
        delta_bic=delta_bic,
        delta_aicc=delta_aicc,
        akaike_weights=weights,
        failed=failed,
        n=sizes.pop(),
    )


#: the paper's Section 5.1: the three-phase law fits every train-reward curve with R^2 >= 0.91
PAPER_R2 = 0.91


def binary_noise_ceiling(fitted: np.ndarray, observed: np.ndarray, completions_per_step: int,
                         n_seeds: float) -> dict[str, float]:
    """How well any smooth law can fit a seed-mean curve of a *binary* reward (Section 4.4's R^2, item 7).

    A step's reward is the mean of ``B`` binary rewards, so even a perfect law leaves the sampling noise
    ``Var = p(1-p) / (B n)`` on the mean of ``n`` seeds (independent completions; correlated completions of one
    prompt only add to it, so this is a floor on the noise and the ceiling is an upper bound). With ``p`` the fitted
    curve, the best attainable ``R^2 = 1 - mean(Var) / Var(observed)``.
    """
    p = np.clip(np.asarray(fitted, float), 0.0, 1.0)
    noise_var = p * (1.0 - p) / (float(completions_per_step) * float(n_seeds))
    total_var = float(np.var(np.asarray(observed, float)))
    ceiling = 1.0 - float(np.mean(noise_var)) / total_var if total_var > 0 else float("nan")
    return {"completions_per_step": int(completions_per_step), "n_seeds": float(n_seeds),
            "noise_sd": float(np.sqrt(np.mean(noise_var))), "rise": float(np.ptp(p)),
            "r2_ceiling": ceiling, "paper_r2": PAPER_R2}
