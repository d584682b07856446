"""The machine-readable verdict of a run: one :class:`ModeVerdict` per failure mode (``flagged`` true, false, or null
with the reason it could not run; ``onset_step``; ``severity``; the numbers behind it and the thresholds used) and
the run's summary (healthy or not, the first step to look at), as ``verdicts.json`` holds them.

The ten modes, in the order a summary lists them: ``hacking`` (Section 5.2, Figure 2), ``degeneracy`` (Section 5.3,
Figure 3, told apart from saturation), ``concentration`` (Section 5.4, Figure 4, entropy collapse and explosion),
``instability`` (Section 5.5, Figure 5, Prop. 9), three the paper does not name but every practitioner checks:
``no_learning``, ``regression``, ``truncation``; ``oscillation`` (the ringing Theorem 7 predicts at ``zeta < 1``,
Eq. 10), and the two length failures ``length_collapse`` and ``length_hacking``.

Episodes. A failure can come and go: every verdict lists its ``episodes`` (``{start, end, severity, peak,
peak_value}``: the first and last logged step of the episode, ``end`` null while it lasts at the last logged step,
its severity, and the step and value of its strongest evidence), ``onset_step`` is the first episode's start and
``active`` says whether the failure is still on at the last logged step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pgrpo.diagnose.records import plain

HACKING = "hacking"
DEGENERACY = "degeneracy"
CONCENTRATION = "concentration"
INSTABILITY = "instability"
NO_LEARNING = "no_learning"
REGRESSION = "regression"
TRUNCATION = "truncation"
OSCILLATION = "oscillation"
LENGTH_COLLAPSE = "length_collapse"
LENGTH_HACKING = "length_hacking"

MODES: tuple[str, ...] = (HACKING, DEGENERACY, CONCENTRATION, INSTABILITY, NO_LEARNING, REGRESSION, TRUNCATION,
                          OSCILLATION, LENGTH_COLLAPSE, LENGTH_HACKING)

TITLES: dict[str, str] = {
    HACKING: "reward hacking: train reward rises, held-out reward does not follow (Fig. 2)",
    DEGENERACY: "advantage degeneracy: zero-spread groups while the reward is not at its top (Fig. 3)",
    CONCENTRATION: "policy concentration: entropy collapse, or explosion (Fig. 4)",
    INSTABILITY: "instability: grad-norm/KL spikes or growth, IS ratio, vanishing updates, Prop. 9 (Fig. 5)",
    NO_LEARNING: "no learning: the reward never rises beyond its noise",
    REGRESSION: "regression: the reward falls after a peak and stays down",
    TRUNCATION: "truncation: completions cut at the length cap",
    OSCILLATION: "oscillation: the reward rings beyond its red noise (Theorem 7 at zeta < 1, Eq. 10)",
    LENGTH_COLLAPSE: "length collapse: completions shrink while the reward does not rise",
    LENGTH_HACKING: "length hacking: the reward rises because the completions get longer",
}

#: severity from the margin (the evidence over its threshold, >= 1 when flagged)
SEVERITY_CUTS: tuple[tuple[float, str], ...] = ((3.0, "high"), (1.5, "medium"), (0.0, "low"))


def severity_of(margin: float) -> str:
    """``high`` at >= 3x the threshold, ``medium`` at >= 1.5x, else ``low``."""
    if not math.isfinite(margin):
        return "high"
    return next(name for cut, name in SEVERITY_CUTS if margin >= cut)


@dataclass
class ModeVerdict:
    """One failure mode of one run. ``flagged``: True (the failure is there), False (checked, not there), None
    (could not run: ``reason`` says why, ``missing`` the columns). ``onset_step``: the logged step where it began
    (None when not flagged); ``severity``: ``low``/``medium``/``high`` when flagged; ``verdict``: a short label;
    ``numbers``: the read-outs behind it; ``thresholds``: the config values used."""

    mode: str
    flagged: bool | None
    verdict: str
    reason: str
    onset_step: float | None = None
    severity: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    active: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"flagged": self.flagged, "onset_step": self.onset_step, "severity": self.severity,
               "verdict": self.verdict, "reason": self.reason, "numbers": self.numbers,
               "thresholds": self.thresholds, "missing": self.missing, "episodes": self.episodes,
               "active": self.active}
        return plain(out)


def episode(start: float, end: float | None, margin: float, peak: float | None = None,
            peak_value: float | None = None) -> dict[str, Any]:
    """One episode of a failure: ``end`` None while it lasts at the last logged step."""
    return {"start": float(start), "end": None if end is None else float(end), "severity": severity_of(margin),
            "peak": float(start if peak is None else peak), "peak_value": peak_value}


def flagged(mode: str, verdict: str, reason: str, onset: float | None, margin: float, numbers: dict[str, Any],
            thresholds: dict[str, Any], severity: str | None = None,
            episodes: list[dict[str, Any]] | None = None) -> ModeVerdict:
    """A flagged verdict. ``episodes``: when the mode measured them; else one episode from ``onset`` that lasts
    (the failure read on the late window is on at the last step). ``onset_step`` is the first episode's start."""
    numbers = dict(numbers, margin=margin)
    sev = severity or severity_of(margin)
    if not episodes:
        episodes = [] if onset is None else [dict(episode(onset, None, margin), severity=sev)]
    episodes = sorted(episodes, key=lambda e: e["start"])
    if episodes:
        onset = episodes[0]["start"]
    active = (not episodes) or episodes[-1]["end"] is None
    return ModeVerdict(mode, True, verdict, reason, None if onset is None else float(onset), sev, numbers,
                       thresholds, episodes=episodes, active=bool(active))


def clear(mode: str, verdict: str, reason: str, numbers: dict[str, Any], thresholds: dict[str, Any]) -> ModeVerdict:
    return ModeVerdict(mode, False, verdict, reason, None, None, numbers, thresholds, active=False)


def not_run(mode: str, reason: str, missing: list[str] | None = None, numbers: dict[str, Any] | None = None,
            thresholds: dict[str, Any] | None = None) -> ModeVerdict:
    return ModeVerdict(mode, None, "could not run", reason, None, None, dict(numbers or {}), dict(thresholds or {}),
                       list(missing or []))


@dataclass
class RunVerdicts:
    """All modes of one run under one rule set (``ours`` or ``toolkit``), with the run's identity."""

    rule_set: str
    modes: dict[str, ModeVerdict]
    model: str = ""
    G: int | None = None
    source: str = ""
    first_step: float | None = None
    last_step: float | None = None
    n_points: int = 0

    def flagged_modes(self) -> list[str]:
        return [m for m in MODES if m in self.modes and self.modes[m].flagged]

    def summary(self) -> dict[str, Any]:
        """``healthy`` (no mode flagged), ``flagged`` (in the order of their onset), ``first_step_to_look_at`` (the
        earliest onset among them), ``ongoing`` (the flagged modes still on at the last step), ``resolved`` (mode ->
        the step its last episode ended), ``not_checked`` (mode -> why it could not run)."""
        hits = self.flagged_modes()
        onsets = {m: self.modes[m].onset_step for m in hits}
        ordered = sorted(hits, key=lambda m: (onsets[m] is None, onsets[m] if onsets[m] is not None else 0.0))
        timed = [onsets[m] for m in ordered if onsets[m] is not None]
        unchecked = {m: v.reason for m, v in self.modes.items() if v.flagged is None}
        first = min(timed) if timed else (self.first_step if hits else None)
        ongoing = [m for m in ordered if self.modes[m].active is not False]
        resolved = {m: self.modes[m].episodes[-1]["end"] for m in ordered
                    if self.modes[m].active is False and self.modes[m].episodes}
        if hits:
            head = ordered[0]
            line = (f"not healthy: {', '.join(ordered)} flagged; look first at step "
                    f"{_step_text(first)} ({head}: {self.modes[head].verdict})")
            if resolved:
                line += ("; ongoing: " + (", ".join(ongoing) or "none") + "; resolved: "
                         + ", ".join(f"{m} (by step {_step_text(end)})" for m, end in resolved.items()))
        else:
            line = "healthy: no failure mode flagged" + (f" ({len(unchecked)} could not run: "
                                                         f"{', '.join(unchecked)})" if unchecked else "")
        return plain({"healthy": not hits, "flagged": ordered, "first_step_to_look_at": first, "line": line,
                       "ongoing": ongoing, "resolved": resolved, "not_checked": unchecked, "rule_set": self.rule_set})

    def to_dict(self) -> dict[str, Any]:
        return plain({"rule_set": self.rule_set, "model": self.model, "G": self.G, "source": self.source,
                       "first_step": self.first_step, "last_step": self.last_step, "n_points": self.n_points,
                       "summary": self.summary(), "modes": {m: self.modes[m].to_dict() for m in MODES
                                                            if m in self.modes}})


def _step_text(step: float | None) -> str:
    if step is None or not math.isfinite(step):
        return "n/a"
    return str(int(step)) if float(step).is_integer() else f"{step:g}"
