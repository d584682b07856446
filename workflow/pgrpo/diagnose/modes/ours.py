"""Our rule set: the failure modes of :mod:`pgrpo.diagnose.modes` on one run, from its curves and the four
diagnostics of Figures 2-5 (:func:`pgrpo.diagnose.readouts.report.diagnose_run`), as a :class:`RunVerdicts`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pgrpo.diagnose.modes.concentration import concentration
from pgrpo.diagnose.modes.degeneracy import degeneracy
from pgrpo.diagnose.modes.hacking import hacking
from pgrpo.diagnose.modes.instability import instability
from pgrpo.diagnose.modes.length import length_collapse, length_hacking
from pgrpo.diagnose.modes.no_learning import no_learning
from pgrpo.diagnose.modes.oscillation import oscillation
from pgrpo.diagnose.modes.record import RunVerdicts
from pgrpo.diagnose.modes.regression import regression
from pgrpo.diagnose.modes.truncation import truncation
from pgrpo.diagnose.records import REWARD_HACKING, STABILITY, DiagnosticResult, RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig

NAME = "ours"


def identity(curves: RunCurves, rule_set: str, modes: dict) -> RunVerdicts:
    steps = curves.frame["step"].to_numpy(float) if "step" in curves.frame else []
    return RunVerdicts(rule_set, modes, curves.model, curves.G, curves.source,
                       float(min(steps)) if len(steps) else None, float(max(steps)) if len(steps) else None,
                       len(steps))


def our_verdicts(curves: RunCurves, config: DiagnosticsConfig, results: Sequence[DiagnosticResult],
                 fits: Mapping[str, Any] | None = None) -> RunVerdicts:
    """All modes; ``results``: the run's Figures 2-5 diagnostics (hacking, instability and oscillation build on
    them; regression on the oscillation)."""
    by_name = {r.diagnostic: r for r in results}
    modes = {}
    ringing = oscillation(curves, config, by_name.get(STABILITY))
    for verdict in (hacking(curves, config, by_name[REWARD_HACKING]), degeneracy(curves, config),
                    concentration(curves, config), instability(curves, config, by_name.get(STABILITY)),
                    no_learning(curves, config, fits, ringing), regression(curves, config, ringing), truncation(curves, config),
                    ringing, length_collapse(curves, config), length_hacking(curves, config)):
        modes[verdict.mode] = verdict
    return identity(curves, NAME, modes)
