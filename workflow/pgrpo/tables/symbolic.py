"""The Markdown view of the symbolic verification (Appendix A): one row per claim, PASS/FAIL, derived vs paper."""

from __future__ import annotations

import json

import sympy as sp

from pgrpo.tables.render import markdown_table
from pgrpo.theory.symbolic_algebra import PASS, Claim


def claims_markdown(claims: list[Claim]) -> str:
    """The verification report: a verdict table, then one section per claim (derived vs. paper)."""
    n_pass = sum(c.verdict == PASS for c in claims)
    lines = ["# Symbolic verification of Section 3 (Appendix A)", "",
             f"sympy {sp.__version__}: {n_pass} of {len(claims)} claims PASS, {len(claims) - n_pass} FAIL. "
             "Each claim is derived from its premises, then compared with the paper's expression "
             "(`simplify(derived - paper) == 0`).", "",
             markdown_table(["claim", "paper", "verdict"],
                            [[f"[{c.id}](#{c.id}) {c.title.replace('|', '/')}", c.paper_ref, f"**{c.verdict}**"]
                             for c in claims]).rstrip("\n")]
    for c in claims:
        lines += ["", f"## {c.id}", "", f"**{c.title}** ({c.paper_ref}) - **{c.verdict}**", "",
                  "Derived:", "", "```", c.derived, "```", "", "Paper:", "", "```", c.paper, "```", "", c.detail, ""]
        lines += [f"- {'PASS' if ch.passed else 'FAIL'}: {ch.name}" + (f" ({ch.note})" if ch.note else "")
                  for ch in c.checks]
        if c.counterexample is not None:
            lines += ["", "Counterexample:", "", "```json", json.dumps(c.counterexample, indent=2), "```"]
    return "\n".join(lines) + "\n"
