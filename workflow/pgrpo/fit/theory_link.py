"""The link from a fitted law to Theorem 7: the stiffness ``K`` backed out of the fitted natural frequency
(``omega_n^2 = K_eff / M_eff``, Eq. 9, 16) or saturation rate (``lambda = K_eff / C_eff``, Eq. 14), and the
coefficients and damping ratio (Eq. 9-10) it implies.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from pgrpo.fit.laws import EXPONENTIAL
from pgrpo.fit.least_squares import FitResult, finite_or_none


def stiffness_from_natural_frequency(omega_n: float, eta: float, mu: float, k_ref: float) -> float:
    """Invert Eq. 9, ``omega_n^2 = 2 eta K / ((1 + mu) + K eta K_ref^2)``, for ``K``; NaN where no ``K > 0`` exists
    (``omega_n^2 K_ref^2 >= 2``: the lag mass ``K K_ref^2 / 2`` caps ``omega_n`` below ``sqrt(2)/K_ref``)."""
    denominator = eta * (2.0 - omega_n**2 * k_ref**2)
    if not (omega_n > 0 and eta > 0 and denominator > 0):
        return float("nan")
    return omega_n**2 * (1.0 + mu) / denominator


def stiffness_from_natural_frequency_se(omega_n: float, omega_se: float, eta: float, mu: float, k_ref: float) -> float:
    """Delta-method s.e. of :func:`stiffness_from_natural_frequency`: ``dK/domega = 4 omega (1+mu) / (eta (2 - omega^2
    K_ref^2)^2)``."""
    gap = 2.0 - omega_n**2 * k_ref**2
    if not (gap > 0 and eta > 0 and math.isfinite(omega_se)):
        return float("nan")
    return abs(4.0 * omega_n * (1.0 + mu) / (eta * gap**2)) * omega_se


def stiffness_from_saturation_rate(lam: float, eta: float, mu: float, k_ref: float) -> float:
    """Invert Eq. 14, ``lambda = K_eff / C_eff = eta K / ((1 - mu) - K eta K_ref)``, for ``K``."""
    if not (lam > 0 and eta > 0):
        return float("nan")
    return lam * (1.0 - mu) / (eta * (1.0 + lam * k_ref))


def _theory_coefficients(eta: float, mu: float, K: float, k_ref: float) -> tuple[dict[str, Any] | None, str]:
    """``pgrpo.theory.coefficients`` as a plain dict, or (None, why not)."""
    try:
        from pgrpo.theory import coefficients
    except ImportError as error:
        return None, f"pgrpo.theory is not available ({error}); K reported without a predicted regime"
    try:
        result = coefficients(eta=eta, mu=mu, K=K, k_ref=k_ref)
    except Exception as error:  # noqa: BLE001 - report, do not stop the workflow
        return None, f"pgrpo.theory.coefficients failed: {type(error).__name__}: {error}"
    return _plain(result), "regime from pgrpo.theory.coefficients"


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if hasattr(obj, "_asdict"):
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (bool, str)) or obj is None:
        return obj
    if isinstance(obj, (int, float, np.integer, np.floating)):
        return finite_or_none(float(obj)) if isinstance(obj, (float, np.floating)) else int(obj)
    if hasattr(obj, "value"):  # enums
        return _plain(obj.value)
    if hasattr(obj, "__dict__"):
        return {k: _plain(v) for k, v in vars(obj).items() if not k.startswith("_")}
    return str(obj)


@dataclass
class TheoryLink:
    """The stiffness ``K`` backed out of a fitted curve through Eq. 9 (or Eq. 14) and the regime theory predicts."""

    source: str
    eta: float
    mu: float
    k_ref: float
    rate: float
    rate_se: float
    K: float
    K_se: float
    valid: bool
    message: str
    coefficients: dict[str, Any] | None = None
    regime: Any = None
    zeta_predicted: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return finite_or_none(dataclasses.asdict(self))


def link_to_theory(fit: FitResult, eta: float, mu: float, k_ref: float) -> TheoryLink:
    """Back out ``K`` from a fit: ``omega_n`` through Eq. 9 (three-phase, overdamped, underdamped) or ``lambda``
    through Eq. 14 (exponential); then ask ``pgrpo.theory.coefficients`` for the regime at that ``K``."""
    nan = float("nan")
    uses_lambda = fit.law == EXPONENTIAL
    source = f"{fit.law}: {'lambda via Eq. 14' if uses_lambda else 'omega_n via Eq. 9'}"
    rate_name = "lambda" if uses_lambda else "omega_n"
    rate, rate_se = fit.params.get(rate_name, nan), fit.stderr.get(rate_name, nan)
    if not fit.success:
        return TheoryLink(source, eta, mu, k_ref, rate, rate_se, nan, nan, False, f"no K: {fit.message}")
    if uses_lambda:
        K = stiffness_from_saturation_rate(rate, eta, mu, k_ref)
        dK = (1.0 - mu) / (eta * (1.0 + rate * k_ref) ** 2) if eta > 0 else nan
        K_se = abs(dK) * rate_se
    else:
        K = stiffness_from_natural_frequency(rate, eta, mu, k_ref)
        K_se = stiffness_from_natural_frequency_se(rate, rate_se, eta, mu, k_ref)
    if not math.isfinite(K):
        ceiling = math.sqrt(2.0) / k_ref if k_ref > 0 else float("inf")
        why = (
            f"no K > 0 solves Eq. 9: omega_n = {rate:.4g} /step is above the ceiling sqrt(2)/K_ref = {ceiling:.4g}"
            if eta > 0 and not uses_lambda
            else f"no K: eta = {eta} must be > 0"
        )
        return TheoryLink(source, eta, mu, k_ref, rate, rate_se, nan, nan, False, why)
    coefficients, note = _theory_coefficients(eta, mu, K, k_ref)
    regime = zeta = None
    if coefficients is not None:
        regime = coefficients.get("regime")
        zeta_value = coefficients.get("zeta")
        zeta = float(zeta_value) if isinstance(zeta_value, (int, float)) else None
    return TheoryLink(source, eta, mu, k_ref, rate, rate_se, K, K_se, True, note, coefficients, regime, zeta)
