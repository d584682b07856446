"""Stage ``verify_symbolic`` (Appendix A): verify every claim with sympy and write ``verification.{json,md}``."""

from __future__ import annotations

import sympy as sp

from pgrpo.atomic import write_json, write_text
from pgrpo.tables.symbolic import claims_markdown
from pgrpo.theory.symbolic_algebra import PASS, Claim
from pgrpo.theory.symbolic_claims import verify_all


def run_verify_symbolic(json_path: str, md_path: str) -> list[Claim]:
    """Verify every claim and write ``json_path`` (records) and ``md_path`` (report), atomically."""
    claims = verify_all()
    n_pass = sum(c.verdict == PASS for c in claims)
    write_json(json_path, {"sympy_version": sp.__version__, "n_claims": len(claims), "n_pass": n_pass,
                           "n_fail": len(claims) - n_pass, "claims": [c.to_dict() for c in claims]})
    write_text(md_path, claims_markdown(claims))
    return claims
