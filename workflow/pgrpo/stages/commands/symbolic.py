"""``pgrpo symbolic``: Appendix A's closed forms derived with sympy (:mod:`pgrpo.stages.symbolic`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands


def add_commands(commands: Commands) -> None:
    p = commands.add("symbolic", WORKFLOW_STAGES,
                     "Appendix A: derive every closed form with sympy and compare with the paper", _symbolic)
    p.add_argument("--json", required=True, help="output verification.json")
    p.add_argument("--md", required=True, help="output verification.md")


def _symbolic(args):
    from pgrpo.stages import symbolic

    claims = symbolic.run_verify_symbolic(json_path=args.json, md_path=args.md)
    for claim in claims:
        print(f"{claim.verdict:4s}  {claim.id}: {claim.title}")
