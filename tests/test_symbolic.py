"""pgrpo.symbolic: every claim's verdict, the written report, and the machinery that produces FAIL verdicts."""

from __future__ import annotations

import json

import pytest
import sympy as sp
from pgrpo.stages.symbolic import run_verify_symbolic
from pgrpo.theory import symbolic_algebra as symbolic_algebra_module  # noqa: E402
from pgrpo.theory.symbolic_algebra import (
    FAIL,
    PAPER_C_EFF,  # noqa: E402
    PASS,
    compare,
    routh_first_column,
)

# Expected verdicts, worked out by hand (see the report for the derivations):
# - the fast root of the map tends to mu as eta K -> 0, the ODE's fast mode to exp(-2(1-mu)/(1+mu)): not equal;
# - Eq. 14 has R'(0) = lambda (R_inf - R0) != 0, so it is not the from-rest trajectory at zeta = 1 (that is Eq. 17).
EXPECTED = {
    "lemma4_taylor": PASS,
    "lemma4_characteristic": PASS,
    "lemma4_slow_root": PASS,
    "lemma4_fast_root": FAIL,
    "lemma5_delay": PASS,
    "theorem7_delta1": PASS,
    "prop8_damping_ratio": PASS,
    "prop8_pole_separation": PASS,
    "prop9_threshold": PASS,
    "prop10_lyapunov": PASS,
    "cor13_timescale": PASS,
    "cor13_overdamped_limit": PASS,
    "cor13_exact_for_zeta_ge_1": FAIL,
    "prop14_critical": PASS,
    "prop14_overdamped_poles": PASS,
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("symbolic")
    json_path, md_path = out / "verification.json", out / "verification.md"
    claims = run_verify_symbolic(str(json_path), str(md_path))
    return claims, json_path, md_path


def test_every_claim_verdict(written):
    claims, _, _ = written
    assert {c.id: c.verdict for c in claims} == EXPECTED


def test_fail_claims_carry_counterexamples_and_pass_claims_none(written):
    claims, _, _ = written
    for c in claims:
        if c.verdict == FAIL:
            assert c.counterexample, c.id
            assert any(not ch.passed for ch in c.checks)
        else:
            assert c.counterexample is None
            assert all(ch.passed for ch in c.checks) and c.checks


def test_fast_root_counterexample_numbers(written):
    claims, _, _ = written
    fast = next(c for c in claims if c.id == "lemma4_fast_root")
    case = fast.counterexample["cases"][0]  # mu = 0, eta K = 0.01
    # map: z^2 - (1 - 0.01) z = 0 -> fast root 0; ODE: x^2/2 + x + 0.01 = 0 -> x = -1 - sqrt(0.98)
    assert case["map_fast_root"] == pytest.approx(0.0, abs=1e-12)
    assert case["ode_fast_mode_exp_s_delta"] == pytest.approx(2.718281828459045 ** (-1 - 0.98**0.5))


def test_slow_root_first_difference_at_third_order(written):
    claims, _, _ = written
    slow = next(c for c in claims if c.id == "lemma4_slow_root")
    # hand series: map slow root 1 - e/(1-mu) - mu e^2/(1-mu)^3 - ..., same for exp(s); gap e^3 / (6 (1-mu)^3)
    assert "first differing order 3" in slow.derived
    assert "-1/(6*(mu - 1)**3)" in slow.detail


def test_cor13_counterexample_numbers(written):
    claims, _, _ = written
    c = next(c for c in claims if c.id == "cor13_exact_for_zeta_ge_1")
    import math

    assert c.counterexample["exact_R(1)"] == pytest.approx(1 - 2 / math.e)
    assert c.counterexample["eq14_R(1)"] == pytest.approx(1 - math.exp(-0.5))


def test_files_written(written):
    claims, json_path, md_path = written
    data = json.loads(json_path.read_text())
    assert data["n_claims"] == len(EXPECTED)
    assert data["n_pass"] == sum(v == PASS for v in EXPECTED.values())
    assert [c["id"] for c in data["claims"]] == list(EXPECTED)
    for c in data["claims"]:
        assert {"id", "title", "paper_ref", "verdict", "derived", "paper", "detail", "counterexample"} <= set(c)
        assert "Symbol(" not in c["derived"]  # pretty text, never srepr
    md = md_path.read_text()
    assert "| claim | paper | verdict |" in md
    for cid, verdict in EXPECTED.items():
        assert f"## {cid}" in md
        assert f"[{cid}](#{cid})" in md and f"**{verdict}**" in md


def test_compare_finds_a_counterexample_for_a_wrong_expression():
    eta, K, mu, tau = symbolic_algebra_module.eta, symbolic_algebra_module.K, symbolic_algebra_module.mu, symbolic_algebra_module.tau
    wrong = ((1 - mu) - K * eta * tau / 2) / eta  # half the lag's damping cost
    ok, cex = compare(PAPER_C_EFF, wrong)
    assert not ok
    assert cex["derived"] != pytest.approx(cex["paper"])
    ok, cex = compare(PAPER_C_EFF, (1 - mu) / eta - K * tau)
    assert ok and cex is None


def test_routh_first_column_counts_rhp_roots():
    s = sp.Symbol("s")
    cases = [((-1, -2, -3), 0), ((-1, -3, 2), 1), ((1, 2, -4), 2), ((-1, -2, 3, 4), 2), ((-1, -3, 2, 5), 2),
             ((-2, -1, -0.5, 3), 1)]
    for roots, n_rhp in cases:
        poly = sp.Poly(sp.prod([s - r for r in roots]), s)
        column = routh_first_column(poly.all_coeffs())
        signs = [1 if x > 0 else -1 for x in column]
        assert sum(a != b for a, b in zip(signs, signs[1:])) == n_rhp
