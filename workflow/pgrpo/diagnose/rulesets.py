"""The selectable rule sets that fill a run's ``modes``: ``ours`` (:mod:`pgrpo.diagnose.modes`, built on the
read-outs of Figures 2-5) and ``toolkit`` (the post-training toolkit's GRPO rules, :mod:`pgrpo.diagnose.toolkit`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pgrpo.diagnose.modes.ours import our_verdicts
from pgrpo.diagnose.modes.record import RunVerdicts
from pgrpo.diagnose.records import DiagnosticResult, RunCurves
from pgrpo.diagnose.settings import RULE_SETS, DiagnosticsConfig
from pgrpo.diagnose.toolkit import toolkit_verdicts
from pgrpo.errors import InputError


def run_rule_set(name: str, curves: RunCurves, config: DiagnosticsConfig, results: Sequence[DiagnosticResult],
                 fits: Mapping[str, Any] | None = None) -> RunVerdicts:
    """The ``modes`` of one run under rule set ``name`` (``results``: its Figures 2-5 diagnostics)."""
    if name == "ours":
        return our_verdicts(curves, config, results, fits)
    if name == "toolkit":
        return toolkit_verdicts(curves, config)
    raise InputError(f"unknown rule set {name!r} (known: {', '.join(RULE_SETS)})")
