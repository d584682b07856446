"""The sympy machinery behind Appendix A: the paper's symbols, the claim records, derivations of Eq. 6, 7 and 9
(Lemmas 4-5, Theorem 7), numeric comparison at sample points, the Routh array (Prop. 9).

The claims themselves are in :mod:`pgrpo.theory.symbolic_claims`.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Iterable

import sympy as sp

PASS = "PASS"


FAIL = "FAIL"


# Symbols, with the paper's assumptions: eta, K, delta > 0; mu in [0, 1); tau, K_ref >= 0; D, G > 0.
eta = sp.Symbol("eta", positive=True)


K = sp.Symbol("K", positive=True)


delta = sp.Symbol("delta", positive=True)


mu = sp.Symbol("mu", nonnegative=True)


tau = sp.Symbol("tau", nonnegative=True)


k_ref = sp.Symbol("K_ref", nonnegative=True)


t = sp.Symbol("t", nonnegative=True)


D = sp.Symbol("D", positive=True)


G = sp.Symbol("G", positive=True)


# 1 - mu > 0, used where sympy must know that mu < 1 (it cannot be told so directly)
nu = sp.Symbol("nu", positive=True)


# per-step contraction eta*K, the small parameter of the truncation (Section 3.1)
eps = sp.Symbol("epsilon", positive=True)


# generic positive oscillator coefficients, natural frequency and damping ratio
M_ = sp.Symbol("M", positive=True)


C_ = sp.Symbol("C", positive=True)


omega = sp.Symbol("omega_n", positive=True)


zeta = sp.Symbol("zeta", positive=True)


R0 = sp.Symbol("R_0", real=True)


Rinf = sp.Symbol("R_inf", real=True)


e0 = sp.Symbol("e_0", real=True)


#: ranges from which numeric counterexamples are drawn (respecting the paper's assumptions)
SAMPLE_RANGES: dict[str, tuple[float, float]] = {
    "eta": (0.01, 0.5), "K": (0.1, 3.0), "delta": (0.2, 1.0), "mu": (0.0, 0.95), "tau": (0.0, 5.0),
    "K_ref": (0.0, 8.0), "t": (0.0, 10.0), "D": (0.1, 2.0), "G": (1.0, 32.0), "nu": (0.05, 1.0),
    "epsilon": (0.001, 0.05), "M": (0.1, 5.0), "C": (0.1, 5.0), "omega_n": (0.1, 3.0), "zeta": (1.0, 5.0),
    "R_0": (0.0, 0.5), "R_inf": (0.5, 1.0), "e_0": (-1.0, 1.0), "s": (-2.0, 2.0),
}


@dataclass(frozen=True)
class Check:
    """One step of a claim's verification: what was compared and whether it held."""

    name: str
    passed: bool
    note: str = ""


@dataclass(frozen=True)
class Claim:
    """The verdict on one statement of the paper, with the derived and the printed expressions."""

    id: str
    title: str
    paper_ref: str
    verdict: str  # "PASS" | "FAIL"
    derived: str
    paper: str
    detail: str
    counterexample: dict | None = None
    checks: tuple[Check, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# helpers
def text(expr) -> str:
    """Readable one-line text of an expression (sympy's ``sstr``; never ``srepr``)."""
    return sp.sstr(expr)


def _sample_points(symbols: Iterable[sp.Symbol], n: int, seed: int = 20240601) -> list[dict]:
    rng = random.Random(seed)
    symbols = sorted(symbols, key=lambda s: s.name)
    points = []
    for _ in range(n):
        point = {}
        for sym in symbols:
            lo, hi = SAMPLE_RANGES.get(sym.name, (0.1, 2.0))
            point[sym] = sp.Float(rng.uniform(lo, hi), 15)
        points.append(point)
    return points


def _numeric(expr, point: dict) -> complex:
    return complex(sp.N(expr.subs(point), 15))


def compare(derived, paper, n_points: int = 6) -> tuple[bool, dict | None]:
    """``simplify(derived - paper) == 0``; otherwise a numeric counterexample where they differ.

    If sympy cannot reduce the difference to zero but no sampled point separates the two expressions, the
    comparison still fails (unproved) and the counterexample says so.
    """
    diff = sp.simplify(sp.expand(derived - paper))
    if diff == 0:
        return True, None
    free = (sp.sympify(derived).free_symbols | sp.sympify(paper).free_symbols)
    for point in _sample_points(free, n_points):
        d_val, p_val = _numeric(derived, point), _numeric(paper, point)
        if abs(d_val - p_val) > 1e-9 * (1.0 + abs(p_val)):
            cex = {sym.name: float(val) for sym, val in point.items()}
            cex.update(derived=num_json(d_val), paper=num_json(p_val))
            return False, cex
    return False, {"note": "sympy could not reduce derived - paper to 0; equal at every sampled point (unproved)"}


def num_json(value: complex) -> float | list[float]:
    return float(value.real) if abs(value.imag) < 1e-12 else [float(value.real), float(value.imag)]


def make_claim(id: str, title: str, paper_ref: str, derived: str, paper: str, detail: str,
           checks: list[Check], counterexample: dict | None = None) -> Claim:
    verdict = PASS if all(c.passed for c in checks) else FAIL
    return Claim(id=id, title=title, paper_ref=paper_ref, verdict=verdict, derived=derived, paper=paper,
                 detail=detail, counterexample=None if verdict == PASS else counterexample, checks=tuple(checks))


def compare_check(name: str, derived, paper, cexs: list) -> Check:
    ok, cex = compare(derived, paper)
    if not ok:
        cexs.append({"check": name, **(cex or {})})
    return Check(name, ok, f"derived {text(derived)}  vs  paper {text(paper)}")


def first_cex(cexs: list) -> dict | None:
    return cexs[0] if cexs else None


def series_coeffs(expr, x: sp.Symbol, order: int) -> list:
    """Taylor coefficients of ``expr`` in ``x`` up to and including ``x**order``."""
    ser = sp.expand(sp.series(expr, x, 0, order + 1).removeO())
    return [sp.simplify(ser.coeff(x, n)) for n in range(order + 1)]


# derivations shared by several claims
_e = sp.Function("e")


_tt = sp.Symbol("t", real=True)  # the time argument of e(t)


def _dn(n: int):
    return _e(_tt) if n == 0 else sp.Derivative(_e(_tt), (_tt, n))


def derivative_text(expr) -> str:
    """Text of an expression in e(t) and its derivatives, written e, e', e'', e'''."""
    names = {_dn(n): sp.Symbol("e" + "'" * n) for n in range(5, -1, -1)}
    return text(sp.factor(sp.expand(expr).subs(names)))


def derive_eq6(order: int = 3) -> dict:
    """Insert ``e_{k+-1} = e(t +- delta)`` (Taylor to ``delta**(order-1)``) into the heavy-ball map.

    Returns the coefficients of ``e''``, ``e'``, ``e`` divided by ``eta`` (m_mu, c_mu, K of Eq. 6), the
    left-over residual (must be 0) and the first neglected term (order ``delta**order``).
    """
    def shifted(h, n):
        return _e(_tt + h).series(h, 0, n).removeO().doit()

    def residual(n):
        e_next, e_prev, e_now = shifted(delta, n), shifted(-delta, n), _e(_tt)
        return sp.expand(e_next - e_now + eta * K * e_now - mu * (e_now - e_prev))

    res = residual(order)
    coeffs = {n: sp.simplify(res.coeff(_dn(n))) for n in (2, 1)}
    coeffs[0] = sp.simplify(res.subs({_dn(2): 0, _dn(1): 0}).coeff(_e(_tt)))
    left = sp.simplify(res - sum(coeffs[n] * _dn(n) for n in (2, 1, 0)))
    neglected = sp.simplify(residual(order + 1) - res)
    return {"m": sp.simplify(coeffs[2] / eta), "c": sp.simplify(coeffs[1] / eta), "k": sp.simplify(coeffs[0] / eta),
            "left_over": left, "neglected": neglected}


def derive_eq7(m, c) -> dict:
    """Expand ``e(t - tau)`` to third order in ``m e'' + c e' + K e(t - tau)`` and collect by derivative."""
    delayed = _e(_tt - tau).series(tau, 0, 4).removeO().doit()
    res = sp.expand(m * _dn(2) + c * _dn(1) + K * delayed)
    out = {name: sp.simplify(res.coeff(_dn(n))) for name, n in (("M", 2), ("C", 1), ("third", 3))}
    out["K"] = sp.simplify(res.subs({_dn(3): 0, _dn(2): 0, _dn(1): 0}).coeff(_e(_tt)))
    return out


def derive_eq9() -> dict:
    """Substitute (6) into (7) with ``tau = K_ref delta`` and set ``delta = 1`` (Theorem 7)."""
    eq6 = derive_eq6()
    eq7 = derive_eq7(eq6["m"], eq6["c"])
    return {name: sp.simplify(eq7[name].subs(delta, 1)) for name in ("M", "C", "K")}


# the paper's printed expressions
PAPER_M_MU = (1 + mu) * delta**2 / (2 * eta)


PAPER_C_MU = (1 - mu) * delta / eta


PAPER_M_EFF = ((1 + mu) + K * eta * tau**2) / (2 * eta)


PAPER_C_EFF = ((1 - mu) - K * eta * tau) / eta


PAPER_ZETA = ((1 - mu) - K * eta * tau) / sp.sqrt(2 * K * eta * ((1 + mu) + K * eta * tau**2))


def mode_pairs():
    """Map roots and ODE modes as functions of eps = eta K and nu = 1 - mu (delta drops out, x = s delta)."""
    z, x = sp.Symbol("z"), sp.Symbol("x")
    mu_nu = 1 - nu
    map_roots = sp.solve(z**2 - (1 + mu_nu - eps) * z + mu_nu, z)
    # eta * (m_mu s^2 + c_mu s + K) with s = x / delta and K = eps / eta: delta and eta drop out
    ode_in_x = sp.expand(sp.simplify((eta * (PAPER_M_MU * (x / delta)**2 + PAPER_C_MU * (x / delta) + K))
                                     .subs(K, eps / eta).subs(mu, mu_nu)))
    ode_roots = sp.solve(ode_in_x, x)
    slow_map = next(r for r in map_roots if sp.simplify(r.subs(eps, 0) - 1) == 0)
    fast_map = next(r for r in map_roots if r is not slow_map)
    slow_x = next(r for r in ode_roots if sp.simplify(r.subs(eps, 0)) == 0)
    fast_x = next(r for r in ode_roots if r is not slow_x)
    return slow_map, fast_map, slow_x, fast_x, ode_in_x


# Proposition 9
def routh_first_column(coeffs: list) -> list:
    """First column of the Routh array of ``coeffs[0] s^n + coeffs[1] s^(n-1) + ... + coeffs[n]``.

    With a positive leading coefficient, its number of sign changes is the number of right-half-plane roots.
    """
    n = len(coeffs) - 1
    width = n // 2 + 1
    rows = [list(coeffs[0::2]) + [0] * (width - len(coeffs[0::2])),
            list(coeffs[1::2]) + [0] * (width - len(coeffs[1::2]))]
    for _ in range(n - 1):
        a, b = rows[-2], rows[-1]
        if b[0] == 0:
            raise ValueError("zero in the Routh array's first column: the epsilon special case is not handled")
        new = [sp.simplify((b[0] * a[j + 1] - a[0] * b[j + 1]) / b[0]) for j in range(width - 1)] + [0]
        rows.append(new)
    return [r[0] for r in rows[: n + 1]]


def sign_changes(column: list) -> int | None:
    signs = []
    for entry in column:
        if entry.is_positive:
            signs.append(1)
        elif entry.is_negative:
            signs.append(-1)
        else:
            return None
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


# Corollary 13
def from_rest_two_exponential():
    """e(t) = A1 exp(s1 t) + A2 exp(s2 t) solving M e'' + C e' + K e = 0, e(0) = e0, e'(0) = 0 (distinct poles)."""
    s = sp.Symbol("s")
    s1, s2 = sp.solve(M_ * s**2 + C_ * s + K, s)
    if sp.limit(s1, M_, 0, "+") == -sp.oo:
        s1, s2 = s2, s1  # s1 the slow pole
    A1, A2 = sp.symbols("A1 A2")
    amps = sp.solve([A1 + A2 - e0, A1 * s1 + A2 * s2], [A1, A2], dict=True)[0]
    return s1, s2, sp.simplify(amps[A1]), sp.simplify(amps[A2])
