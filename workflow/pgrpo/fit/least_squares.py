"""The three-phase law (Prop. 14, Eq. 16) and its rivals, fitted to reward curves; forecasts from a run's first steps.

Paper: Section 3.5 (Eq. 13-17), Section 4.4 (curve-fitting methodology), Section 5.1 and Figure 1.

All laws describe a rise from ``R0`` at rest to a plateau ``R_inf`` as ``R(t) = R_inf - (R_inf - R0) d(t)`` with a
*deficit* ``d(0) = 1``, ``d(inf) = 0``:

- ``three_phase``  (Prop. 14, Eq. 16, critically damped, zeta = 1): ``d = (1 + omega_n t) exp(-omega_n t)``;
- ``exponential``  (Corollary 13, Eq. 14, the overdamped limit):   ``d = exp(-lambda t)``;
- ``overdamped``   (Prop. 14, general two-pole response, zeta >= 1, poles ``-omega_n (zeta -+ sqrt(zeta^2 - 1))``):
  ``d = (b exp(-a t) - a exp(-b t)) / (b - a)`` with slow pole ``a`` and fast pole ``b``;
- ``underdamped``  (step response of Eq. 8 from rest, 0 < zeta <= 1):
  ``d = exp(-zeta omega_n t) [cos(omega_d t) + zeta omega_n / omega_d sin(omega_d t)]``, ``omega_d = omega_n sqrt(1 - zeta^2)``.

``overdamped`` and ``underdamped`` both contain ``three_phase`` at zeta = 1, and ``overdamped`` tends to
``exponential`` as zeta -> inf, so the four laws are nested and compared by information criteria.

Fits are unweighted nonlinear least squares (``scipy.optimize.curve_fit``, trust-region reflective with bounds) on
the curve given (the seed-averaged curve, Section 4.4), started from the best points of a coarse grid over the
shape parameters in which the two amplitudes are solved linearly (variable projection). Time and reward are
rescaled internally, so any reward scale and any number of steps work. Positive rates are fitted on a log scale;
reported parameters and their standard errors (from the Jacobian covariance, scaled by the residual variance, and
carried to the reported parameters by the delta method) are in the data's own units.

Information criteria for Gaussian least squares, counting the noise variance as a parameter (``p = k + 1`` for a
law with ``k`` curve parameters; Burnham & Anderson 2002):
``AIC = n ln(RSS/n) + 2p``, ``AICc = AIC + 2p(p+1)/(n-p-1)``, ``BIC = n ln(RSS/n) + p ln n``. The preferred law is
the one with the smallest AIC; Akaike weights ``w_i ∝ exp(-ΔAIC_i / 2)``.

Failures (no finite data, fewer points than parameters, a flat or decreasing curve, a fit that does not converge)
come back as a :class:`FitResult` with ``success=False``, a ``status`` code and a ``message`` that says why, in the
manner of ``scipy.optimize.OptimizeResult``; nothing deep in the pipeline raises for bad data.

The link to theory (Eq. 9, 14): the fitted natural frequency gives the stiffness through
``omega_n^2 = K_eff / M_eff = 2 eta K / ((1 + mu) + K eta K_ref^2)``, i.e.
``K = omega_n^2 (1 + mu) / (eta (2 - omega_n^2 K_ref^2))`` (only for ``omega_n < sqrt(2) / K_ref``), and the fitted
saturation rate gives it through ``lambda = K_eff / C_eff = eta K / ((1 - mu) - K eta K_ref)``, i.e.
``K = lambda (1 - mu) / (eta (1 + lambda K_ref))``. Time is the optimizer step (delta = 1 in Eq. 9).

"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from pgrpo.fit.laws import (
    ALL_LAWS,
    EXPONENTIAL,
    LAWS,
    OVERDAMPED,
    THREE_PHASE,
    UNDERDAMPED,
    Law,
    get_law,
    overdamped_poles,
    time_to_fraction,
)

# status codes of a FitResult
OK = "ok"


NO_DATA = "no_data"


TOO_FEW_POINTS = "too_few_points"


FLAT = "flat"


DECREASING = "decreasing"


NOT_CONVERGED = "not_converged"


def finite_or_none(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def none_to_nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


@dataclass
class FitResult:
    """One law fitted to one curve (cf. ``scipy.optimize.OptimizeResult``).

    ``params``/``stderr`` in the data's units (rates per step); ``r2 = 1 - RSS/TSS`` on the points fitted;
    ``aic``/``aicc``/``bic`` as in the module docstring; ``covariance`` of ``params`` in ``param_names`` order;
    ``derived``: ``t90`` (time to 90% of the rise) with ``t90_se``, and per law ``t_inflection`` (three-phase) or
    the poles (overdamped). ``success=False`` comes with a ``status`` and a ``message`` that says why.
    """

    law: str
    params: dict[str, float]
    stderr: dict[str, float]
    r2: float
    aic: float
    aicc: float
    bic: float
    n: int
    k: int
    rss: float
    success: bool
    status: str
    message: str
    n_dropped: int = 0
    covariance: list[list[float]] | None = None
    derived: dict[str, float] = field(default_factory=dict)
    t_range: tuple[float, float] | None = None

    # the three-phase parameters by name, as the paper writes them
    @property
    def R0(self) -> float:
        return self.params.get("R0", float("nan"))

    @property
    def R_inf(self) -> float:
        return self.params.get("R_inf", float("nan"))

    @property
    def omega_n(self) -> float:
        return self.params.get("omega_n", float("nan"))

    @property
    def param_names(self) -> tuple[str, ...]:
        return LAWS[self.law].param_names

    def predict(self, t: Iterable[float] | float) -> np.ndarray:
        """The fitted curve at ``t`` (NaN everywhere for a failed fit)."""
        t = np.asarray(t, dtype=float)
        if not self.success:
            return np.full(t.shape, np.nan)
        return LAWS[self.law].curve(t, self.params)

    def progress(self, t: Iterable[float] | float) -> np.ndarray:
        """``u(t) = (R(t) - R0) / (R_inf - R0)``, the doubly normalised progress of Eq. 17."""
        t = np.asarray(t, dtype=float)
        if not self.success:
            return np.full(t.shape, np.nan)
        law = LAWS[self.law]
        return 1.0 - law.deficit(t, *[self.params[name] for name in law.shape_names])

    def to_dict(self) -> dict[str, Any]:
        return finite_or_none(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FitResult":
        data = dict(data)
        for key in ("r2", "aic", "aicc", "bic", "rss"):
            data[key] = none_to_nan(data.get(key))
        data["params"] = {k: none_to_nan(v) for k, v in (data.get("params") or {}).items()}
        data["stderr"] = {k: none_to_nan(v) for k, v in (data.get("stderr") or {}).items()}
        data["derived"] = {k: none_to_nan(v) for k, v in (data.get("derived") or {}).items()}
        if data.get("covariance") is not None:
            data["covariance"] = [[none_to_nan(x) for x in row] for row in data["covariance"]]
        if data.get("t_range") is not None:
            data["t_range"] = tuple(none_to_nan(x) for x in data["t_range"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _failure(law: Law, status: str, message: str, n: int, n_dropped: int = 0) -> FitResult:
    nan = float("nan")
    return FitResult(
        law=law.name,
        params={name: nan for name in law.param_names},
        stderr={name: nan for name in law.param_names},
        r2=nan,
        aic=nan,
        aicc=nan,
        bic=nan,
        n=int(n),
        k=law.n_params,
        rss=nan,
        success=False,
        status=status,
        message=message,
        n_dropped=int(n_dropped),
    )


def r_squared(y: np.ndarray, y_hat: np.ndarray) -> float:
    """``1 - sum (y - y_hat)^2 / sum (y - mean y)^2`` (NaN for a constant ``y``)."""
    y = np.asarray(y, float)
    rss = float(np.sum((y - np.asarray(y_hat, float)) ** 2))
    tss = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - rss / tss if tss > 0 else float("nan")


def information_criteria(rss: float, n: int, k: int) -> tuple[float, float, float]:
    """(AIC, AICc, BIC) for Gaussian least squares with ``k`` curve parameters plus the noise variance."""
    p = k + 1
    log_likelihood_term = n * math.log(max(rss, 1e-300) / n)
    aic = log_likelihood_term + 2 * p
    aicc = aic + 2 * p * (p + 1) / (n - p - 1) if n - p - 1 > 0 else float("nan")
    bic = log_likelihood_term + p * math.log(n)
    return aic, aicc, bic


def _amplitudes(deficit: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Linear least squares for (R0, R_inf) given the deficit: ``y = R_inf (1 - d) + R0 d``. Returns (R0, R_inf, rss)."""
    design = np.column_stack([deficit, 1.0 - deficit])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    rss = float(np.sum((design @ coef - y) ** 2))
    return float(coef[0]), float(coef[1]), rss


def _internal_to_public(law: Law, theta: np.ndarray, t_scale: float, y_mean: float, y_scale: float) -> np.ndarray:
    shape = law.to_shape(theta[2:])
    public = [y_mean + y_scale * theta[0], y_mean + y_scale * theta[1]]
    for name, value in zip(law.shape_names, shape):
        public.append(value / t_scale if name in law.rate_names else value)
    return np.array(public, dtype=float)


def _numerical_jacobian(func: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    f0 = func(x)
    jac = np.empty((f0.size, x.size))
    for j in range(x.size):
        h = 1e-6 * max(1.0, abs(x[j]))
        up, down = x.copy(), x.copy()
        up[j] += h
        down[j] -= h
        jac[:, j] = (func(up) - func(down)) / (2 * h)
    return jac


def prepare(t: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray, int]:
    t = np.asarray(t, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if t.shape != y.shape:
        raise ValueError(f"t and y differ in length ({t.size} vs {y.size})")
    keep = np.isfinite(t) & np.isfinite(y)
    order = np.argsort(t[keep], kind="stable")
    return t[keep][order], y[keep][order], int((~keep).sum())


def _data_problem(law: Law, t: np.ndarray, y: np.ndarray, n_dropped: int, require_increase: bool) -> FitResult | None:
    n, k = t.size, law.n_params
    if n == 0:
        return _failure(law, NO_DATA, f"no fit: no finite data points ({n_dropped} non-finite)", 0, n_dropped)
    if n <= k:
        return _failure(
            law, TOO_FEW_POINTS, f"no fit: {n} finite point(s) for {k} parameters (need at least {k + 1})", n, n_dropped
        )
    if np.unique(t).size <= k:
        return _failure(law, TOO_FEW_POINTS, f"no fit: only {np.unique(t).size} distinct times for {k} parameters", n,
                        n_dropped)
    spread = float(np.ptp(y))
    if spread <= 1e-12 * max(1.0, float(np.max(np.abs(y)))):
        return _failure(law, FLAT, f"no fit: flat curve (every value is {y[0]:.6g}), nothing rises", n, n_dropped)
    if require_increase:
        q = max(1, n // 4)
        first, last = float(np.mean(y[:q])), float(np.mean(y[-q:]))
        if last < first:
            return _failure(
                law,
                DECREASING,
                f"no fit: decreasing curve (mean of the last quarter {last:.4g} < first quarter {first:.4g}); "
                "the saturation laws describe a rise",
                n,
                n_dropped,
            )
    return None


def resolvable_rate(t: np.ndarray) -> float:
    """The fastest rate (rad or 1 per step) points at ``t`` resolve: ``pi / (2 Delta)`` for the median spacing
    ``Delta`` of the distinct times (at least four points per period; Nyquist is ``pi / Delta``)."""
    distinct = np.unique(np.asarray(t, float))
    if distinct.size < 2:
        return float("inf")
    spacing = float(np.median(np.diff(distinct)))
    return math.pi / (2.0 * spacing) if spacing > 0 else float("inf")


def fit_law(
    t: Sequence[float],
    y: Sequence[float],
    law: str = THREE_PHASE,
    *,
    require_increase: bool = True,
    max_nfev: int = 2000,
    n_polish: int = 3,
    reward_range: tuple[float, float] | None = None,
    max_rate: float | str | None = "auto",
) -> FitResult:
    """Fit one law to the points ``(t, y)`` (non-finite pairs are dropped and counted in ``n_dropped``).

    ``require_increase``: treat a curve whose last quarter lies below its first quarter, or a fitted
    ``R_inf < R0``, as "no fit" (the laws describe a rise). ``max_nfev``: evaluation budget per local fit;
    ``n_polish``: how many of the best grid points are refined. What the data can show bounds the fit:
    ``reward_range``: ``R0`` and ``R_inf`` stay inside the reward's range; ``max_rate``: no rate (``omega_n``,
    ``lambda``, the slow pole) above it, so no oscillation or rise faster than the logging interval resolves
    (``"auto"``: :func:`resolvable_rate` of ``t``; None: no bound). A time scale longer than the data's span is
    said in the message.
    """
    spec = get_law(law)
    t_arr, y_arr, n_dropped = prepare(t, y)
    problem = _data_problem(spec, t_arr, y_arr, n_dropped, require_increase)
    if problem is not None:
        return problem
    n, k = t_arr.size, spec.n_params

    # rescale: time to [0, 1] of the data's span from t = 0, reward to zero mean and unit s.d.
    t_scale = float(np.max(np.abs(t_arr))) or 1.0
    y_mean, y_scale = float(np.mean(y_arr)), float(np.std(y_arr))
    ts, ys = t_arr / t_scale, (y_arr - y_mean) / y_scale
    rate_cap = resolvable_rate(t_arr) if max_rate == "auto" else max_rate

    # variable projection on a grid of shape parameters: the amplitudes are linear
    candidates: list[tuple[float, np.ndarray]] = []
    for shape_internal in spec.grid():
        deficit = spec.deficit(ts, *spec.to_shape(shape_internal))
        if not np.all(np.isfinite(deficit)):
            continue
        r0, rinf, rss = _amplitudes(deficit, ys)
        candidates.append((rss, np.concatenate([[r0, rinf], shape_internal])))
    candidates.sort(key=lambda c: c[0])

    def model(tt: np.ndarray, *theta: float) -> np.ndarray:
        theta_arr = np.asarray(theta)
        return theta_arr[1] - (theta_arr[1] - theta_arr[0]) * spec.deficit(tt, *spec.to_shape(theta_arr[2:]))

    lower = [-np.inf, -np.inf] + [b[0] for b in spec.internal_bounds]
    upper = [np.inf, np.inf] + [b[1] for b in spec.internal_bounds]
    if reward_range is not None:
        lo, hi = (float(v) for v in reward_range)
        lower[0] = lower[1] = (lo - y_mean) / y_scale
        upper[0] = upper[1] = (hi - y_mean) / y_scale
    if rate_cap is not None and math.isfinite(rate_cap) and rate_cap > 0:
        upper[2] = max(min(upper[2], math.log(rate_cap * t_scale)), lower[2] + 1e-6)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    last_error = "no start point"
    tried: list[np.ndarray] = []
    for _, start in candidates:
        if len(tried) >= n_polish:
            break
        start = np.clip(start, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
        if any(np.allclose(start[2:], other[2:], atol=0.3) for other in tried):
            continue  # keep the starts distinct
        tried.append(start)
        p0 = start
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                warnings.simplefilter("ignore", RuntimeWarning)
                theta, pcov = curve_fit(model, ts, ys, p0=p0, bounds=(lower, upper), method="trf", max_nfev=max_nfev,
                                        x_scale="jac")
        except (RuntimeError, ValueError, np.linalg.LinAlgError) as error:
            last_error = str(error).splitlines()[0]
            continue
        rss_scaled = float(np.sum((model(ts, *theta) - ys) ** 2))
        if not math.isfinite(rss_scaled):
            continue
        if best is None or rss_scaled < best[0]:
            best = (rss_scaled, theta, pcov)
    if best is None:
        return _failure(spec, NOT_CONVERGED, f"no fit: the least-squares fit did not converge ({last_error})", n,
                        n_dropped)
    _, theta, pcov = best

    public = _internal_to_public(spec, theta, t_scale, y_mean, y_scale)
    params = {name: float(v) for name, v in zip(spec.param_names, public)}
    notes: list[str] = []
    if np.all(np.isfinite(pcov)):
        jac = _numerical_jacobian(lambda th: _internal_to_public(spec, th, t_scale, y_mean, y_scale), theta)
        cov = jac @ pcov @ jac.T
        stderr = {name: float(math.sqrt(max(cov[i, i], 0.0))) for i, name in enumerate(spec.param_names)}
        covariance = cov.tolist()
    else:
        stderr = {name: float("nan") for name in spec.param_names}
        covariance = None
        notes.append("parameter covariance could not be estimated (parameters not identifiable from these points)")
    for lo, hi, value, name in zip(lower[2:], upper[2:], theta[2:], _internal_names(spec)):
        if abs(value - lo) < 1e-6 * max(1.0, abs(lo)) or abs(value - hi) < 1e-6 * max(1.0, abs(hi)):
            meaning = _bound_meaning(spec, name, value, lo, hi)
            if name in ("omega_n", "lambda", "slow pole") and abs(value - hi) <= abs(value - lo) and rate_cap:
                meaning = f"the fastest rate the logging interval resolves, {rate_cap:.3g} per step"
            notes.append(f"{name} at its bound ({meaning}); its s.e. is unreliable")
    if reward_range is not None:
        for index, name in ((0, "R0"), (1, "R_inf")):
            if min(abs(theta[index] - lower[index]), abs(theta[index] - upper[index])) < 1e-6:
                notes.append(f"{name} at the reward's range bound {list(reward_range)}")

    y_hat = spec.curve(t_arr, params)
    rss = float(np.sum((y_arr - y_hat) ** 2))
    aic, aicc, bic = information_criteria(rss, n, k)
    derived = _derived(spec, params, covariance)
    if require_increase and not params["R_inf"] > params["R0"]:
        failed = _failure(
            spec, DECREASING, f"no fit: fitted R_inf = {params['R_inf']:.4g} is not above R0 = {params['R0']:.4g}",
            n, n_dropped,
        )
        return failed
    slowest = spec.slowest_rate(params)
    if slowest > 0 and 1.0 / slowest > float(t_arr[-1] - min(t_arr[0], 0.0)):
        notes.append(f"time scale 1/rate = {1.0 / slowest:.3g} steps is longer than the data's span "
                     f"({float(t_arr[-1]):.3g} steps): the plateau is an extrapolation")
    message = f"fitted on {n} points" + (f" ({n_dropped} non-finite dropped)" if n_dropped else "")
    if notes:
        message += "; " + "; ".join(notes)
    return FitResult(
        law=spec.name,
        params=params,
        stderr=stderr,
        r2=r_squared(y_arr, y_hat),
        aic=aic,
        aicc=aicc,
        bic=bic,
        n=n,
        k=k,
        rss=rss,
        success=True,
        status=OK,
        message=message,
        n_dropped=n_dropped,
        covariance=covariance,
        derived=derived,
        t_range=(float(t_arr[0]), float(t_arr[-1])),
    )


def _internal_names(law: Law) -> tuple[str, ...]:
    return {
        THREE_PHASE: ("omega_n",),
        EXPONENTIAL: ("lambda",),
        OVERDAMPED: ("slow pole", "pole ratio"),
        UNDERDAMPED: ("omega_n", "zeta"),
    }[law.name]


def _bound_meaning(law: Law, name: str, value: float, lo: float, hi: float) -> str:
    at_low = abs(value - lo) <= abs(value - hi)
    if name == "pole ratio":
        return "zeta = 1: the critically damped law" if at_low else "zeta at its maximum: the exponential limit"
    if name == "zeta":
        return "zeta = 1: the critically damped law" if not at_low else "zeta near 0: undamped"
    return "rise much slower than the data span" if at_low else "rise much faster than the data spacing"


def _derived(law: Law, params: Mapping[str, float], covariance: list[list[float]] | None) -> dict[str, float]:
    derived: dict[str, float] = {"t90": time_to_fraction(law.name, params, 0.9)}
    shape_index = [law.param_names.index(name) for name in law.shape_names]
    if covariance is not None and math.isfinite(derived["t90"]):
        cov = np.asarray(covariance)[np.ix_(shape_index, shape_index)]

        def t90_of(shape: np.ndarray) -> np.ndarray:
            trial = dict(params)
            trial.update(zip(law.shape_names, shape))
            return np.array([time_to_fraction(law.name, trial, 0.9)])

        x = np.array([params[name] for name in law.shape_names])
        grad = _numerical_jacobian(t90_of, x)
        derived["t90_se"] = float(math.sqrt(max((grad @ cov @ grad.T)[0, 0], 0.0)))
    else:
        derived["t90_se"] = float("nan")
    if law.name == THREE_PHASE:
        derived["t_inflection"] = 1.0 / params["omega_n"]  # Prop. 14
    if law.name == EXPONENTIAL:
        derived["time_constant"] = 1.0 / params["lambda"]
    if law.name == OVERDAMPED:
        slow, fast = overdamped_poles(params["omega_n"], params["zeta"])
        derived["slow_pole"], derived["fast_pole"] = slow, fast
    if law.name == UNDERDAMPED:
        derived["omega_d"] = params["omega_n"] * math.sqrt(max(1 - params["zeta"] ** 2, 0.0))
    return derived


def fit_three_phase(t: Sequence[float], y: Sequence[float], **kwargs: Any) -> FitResult:
    """The critically damped three-phase law of Prop. 14 (Eq. 16): ``R0``, ``R_inf``, ``omega_n``, ``r2``."""
    return fit_law(t, y, THREE_PHASE, **kwargs)


def fit_all_laws(
    t: Sequence[float], y: Sequence[float], laws: Sequence[str] = ALL_LAWS, **kwargs: Any
) -> dict[str, FitResult]:
    """Every law in ``laws`` fitted to the same points."""
    return {name: fit_law(t, y, name, **kwargs) for name in laws}
