"""The text report of ``pgrpo predict``: Theorem 7's coefficients (Eq. 9), the damping ratio (Eq. 10), the regime and
the stability threshold (Prop. 9) of one configuration, beside the exact delayed map (Lemma 4-5).
"""

from __future__ import annotations

import math

import numpy as np

from pgrpo.errors import InputError
from pgrpo.theory.closed_forms import (
    Coefficients,
    coefficients,
    discrete_critical_k_ref,
    discrete_trajectory,
    predicted_trajectory,
)


def _fmt_complex(z: complex) -> str:
    if abs(z.imag) == 0.0:
        return f"{z.real:.6g}"
    return f"{z.real:.6g}{'+' if z.imag >= 0 else '-'}{abs(z.imag):.6g}i"


def prediction_report(eta: float, mu: float, K: float, k_ref: int, r0: float | None = None,
                      r_inf: float | None = None, steps: int | None = None, delta: float = 1.0) -> str:
    """The text ``pgrpo predict`` prints: coefficients, both regimes, critical K_ref, and a trajectory table."""
    co = coefficients(eta, mu, K, k_ref, delta)
    if (r0 is None) != (r_inf is None):
        raise InputError("r0 and r_inf must be given together (initial and plateau reward)")
    d = co.discrete
    side = "below" if co.k_ref < co.critical_k_ref else "at or above"
    crit_map = discrete_critical_k_ref(co.eta, co.mu, co.K) if co.critical_k_ref <= 500 else None
    crit_map_text = (f"{crit_map}" if crit_map is not None
                     else "not searched (> 500)" if co.critical_k_ref > 500 else "> 1000")
    lines = [
        "Predictable GRPO: closed-form prediction (Theorem 7, Eq. 9-17)",
        f"inputs: eta={co.eta:g}  mu={co.mu:g}  K={co.K:g}  K_ref={co.k_ref}  delta={co.delta:g}  "
        f"(eta*K = {co.eta * co.K:.6g}, tau = K_ref*delta = {co.k_ref * co.delta:g})",
        "",
        "second-order ODE (O(delta^2, tau^2) truncation, Eq. 9):",
        f"  M_eff = {co.m_eff:.6g}   C_eff = {co.c_eff:.6g}   K_eff = {co.k_eff:.6g}",
        f"  zeta = {co.zeta:.6g} (Eq. 10)   omega_n = {co.omega_n:.6g} per step",
        f"  poles = {_fmt_complex(co.poles[0])}, {_fmt_complex(co.poles[1])}",
        f"  regime: {co.regime}",
        f"  time constant C_eff/K_eff = {co.time_constant:.6g} steps (Cor. 13); "
        f"slowest decay time = {co.slowest_decay_time:.6g} steps",
        f"  critical refresh interval (1-mu)/(K eta) = {co.critical_k_ref:.6g} (Prop. 9): K_ref={co.k_ref} is {side}",
        "",
        f"exact delayed heavy-ball map (characteristic polynomial of degree {len(d.roots)}):",
        f"  spectral radius = {d.spectral_radius:.6g}   dominant root = {_fmt_complex(d.dominant_root)}   "
        f"complex roots: {'yes' if d.has_complex_roots else 'no'}",
        f"  regime: {d.regime}",
        f"  smallest unstable K_ref of the exact map: {crit_map_text}",
    ]
    if r0 is not None:
        n = int(steps) if steps is not None else _default_steps(co)
        ode = predicted_trajectory(r0, r_inf, n, co.eta, co.mu, co.K, co.k_ref, co.delta)
        exact = discrete_trajectory(r0, r_inf, n, co.eta, co.mu, co.K, co.k_ref)
        picks = sorted(set(np.unique(np.linspace(0, n, 11).round().astype(int)).tolist()))
        lines += ["", f"mean reward from rest, R0={float(r0):g}, R_inf={float(r_inf):g}:",
                  f"  {'step':>8}  {'ODE (Thm 7)':>14}  {'exact map':>14}"]
        lines += [f"  {k:>8d}  {ode[k]:>14.6g}  {exact[k]:>14.6g}" for k in picks]
    return "\n".join(lines) + "\n"


def _default_steps(co: Coefficients) -> int:
    """About five slowest decay times, between 10 and 10000 steps."""
    horizon = 5.0 * co.slowest_decay_time / co.delta if math.isfinite(co.slowest_decay_time) else 100.0
    return int(min(max(math.ceil(horizon), 10), 10000))
