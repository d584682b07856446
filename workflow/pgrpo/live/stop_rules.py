"""The stop rules of the live monitor (issue 20's item 3) over successive reads of :mod:`pgrpo.live.reads`: a mode of
``stop_on`` flagged with severity at least medium at two reads in a row stops the run, the forecast plateau's upper
80% bound below ``stop_if_plateau_below`` (Section 4.4's forecast) too, and the reward's level at a target ends a run
that has reached it; report-only alerts apply the same criterion without stopping.

Each gate on a stop was chosen on the live benchmark's planted and dev logs alone and tested once on a later blind
batch (``docs/live-history.md``): a phase mode waits until its phase has lasted a share of the planned run; a mode
that claims a level the reward will not reach (no_learning, regression: Section 5's failure modes read against the
forecast) waits while the forecast still expects it; a hacking flag read off a gold reward function (Figure 2's
held-out curve stood in for by the function that scores the task) waits until a share of the planned run has passed.

Pure: nothing here reads or writes a file or imports transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from pgrpo.diagnose.modes.record import MODES
from pgrpo.diagnose.records import plain
from pgrpo.live.reads import (
    FORECAST_GATED_MODES,
    LiveRead,
    LiveSettings,
    _finite,
    check_modes,
    forecast_allows_recovery,
    gold_still_early,
)

#: modes whose episodes are events that recur (instability: bursts of gradient or KL spikes, crashes the reward
#: recovers from): an episode that has ended still counts toward a stop; for the others (a stuck, truncated,
#: collapsing or concentrating phase) a flag whose last episode has ended, the run recovered, stops nothing
RECURRING_MODES = frozenset({"instability"})

#: modes whose failure is a phase that a post-hoc diagnosis flags only once it has lasted ``modes.min_episode_fraction``
#: of the run (a stuck phase, a phase at the length cap, a length collapse): live, a stop waits until the ongoing
#: phase has lasted that share of the planned run, so a slow start at the reward's floor is not stopped as a stuck run
PHASE_MODES = frozenset({"degeneracy", "truncation", "length_collapse"})


#: the pseudo-mode of the plateau stop rule in ``stop.json``
PLATEAU_RULE = "plateau_below"
#: the stop rule's name in ``stop.json`` when the reward has reached the target (``stop_if_reached``)
REACHED_RULE = "target_reached"


@dataclass
class StopDecision:
    """Why a run was stopped: the read's step, the mode (or :data:`PLATEAU_RULE`), its onset and severity, the
    reason in words and the forecast then."""

    step: float
    mode: str
    onset_step: float | None
    severity: str | None
    reason: str
    forecast: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return plain({"step": self.step, "mode": self.mode, "onset_step": self.onset_step, "severity": self.severity,
                      "reason": self.reason, "forecast": self.forecast})

    def record(self, step: float | None = None, brief: bool = False, **extra: Any) -> dict[str, Any]:
        """The record a stop or an alert is told with (``stop.json``, the callback's ``alerts`` and ``on_alert``,
        ``pgrpo watch``, ``pgrpo replay``'s JSON): the decision with ``read_step`` (the step of the read that
        decided) and ``step`` (where it took effect; default the read's), plus ``extra``; ``brief`` leaves out the
        forecast."""
        out = {**self.to_dict(), "read_step": float(self.step), "step": float(self.step if step is None else step),
               **extra}
        if brief:
            out.pop("forecast")
        return plain(out)


class StopRules:
    """The stop rules over successive reads: a mode of ``stop_on`` flagged with severity at least medium, the
    forecast plateau's upper 80% bound below ``stop_if_plateau_below``, or the reward's smoothed level at or above
    ``stop_if_reached`` (:data:`REACHED_RULE`: the target met), at :data:`CONSECUTIVE_READS` reads in a
    row (one noisy read never stops a run); for a mode of :data:`PHASE_MODES`, only reads at which its ongoing phase
    has lasted ``modes.min_episode_fraction`` of the planned run count (:meth:`phase_long_enough`); for a mode of
    :data:`FORECAST_GATED_MODES`, only reads whose forecast does not expect the rise or the recovery the flag rules
    out (:func:`forecast_allows_recovery`); for hacking read off a gold reward function, only reads after
    :data:`pgrpo.live.reads.GOLD_STAND_IN_SHARE` of the planned run (:func:`gold_still_early`). :meth:`update`
    returns the decision at the read that stops."""

    def __init__(self, settings: LiveSettings):
        self.settings = settings
        self.streak: dict[str, int] = {}
        #: the share of the planned run a phase must have lasted to count toward a stop (:meth:`phase_long_enough`)
        self.min_phase_fraction = float(settings.config().modes.min_episode_fraction)

    def phase_long_enough(self, read: LiveRead, verdict: Mapping[str, Any]) -> bool:
        """Whether the phase a mode of :data:`PHASE_MODES` is in at ``read`` (its last episode, from its start to
        the read) has lasted ``modes.min_episode_fraction`` of the planned run (``read.total_steps`` from the first
        logged step); True where the planned length or the episode is not known."""
        episodes = verdict.get("episodes") or []
        start = episodes[-1].get("start") if episodes and isinstance(episodes[-1], Mapping) else None
        start = start if isinstance(start, (int, float)) else verdict.get("onset_step")
        total, first = read.total_steps, read.first_step if read.first_step is not None else 0.0
        if not isinstance(start, (int, float)) or not total or total <= first:
            return True
        return read.step - float(start) >= self.min_phase_fraction * (float(total) - first)

    def update(self, read: LiveRead) -> StopDecision | None:
        modes = read.modes
        need = self.settings.consecutive_reads
        for mode in self.settings.stop_on:
            verdict = modes.get(mode) or {}
            # a failure that is over at this read (its last episode ended: the run recovered) stops nothing, but
            # for a mode whose episodes recur (instability's bursts)
            hit = (bool(verdict.get("flagged")) and verdict.get("severity") in self.settings.stop_severities
                   and (verdict.get("active") is not False or mode in RECURRING_MODES)
                   and (mode not in PHASE_MODES or self.phase_long_enough(read, verdict))
                   and (mode not in FORECAST_GATED_MODES or not forecast_allows_recovery(read, mode))
                   and not gold_still_early(read, mode))
            self.streak[mode] = self.streak.get(mode, 0) + 1 if hit else 0
        plateau = read.decision_plateau
        hi80 = plateau.get("hi80")
        limit = self.settings.stop_if_plateau_below
        if limit is not None and (read.fresh_forecast or read.forecast_step is None and read.forecast):
            # a forecast carried forward from an earlier read neither extends nor breaks the streak
            hit = isinstance(hi80, (int, float)) and hi80 < limit
            self.streak[PLATEAU_RULE] = self.streak.get(PLATEAU_RULE, 0) + 1 if hit else 0
        target = self.settings.stop_if_reached
        if target is not None:
            level = (read.level or {}).get("mean")
            hit = isinstance(level, (int, float)) and level >= target
            self.streak[REACHED_RULE] = self.streak.get(REACHED_RULE, 0) + 1 if hit else 0
        forecast = {"plateau": read.plateau, "t90": read.t90, "law": read.forecast.get("law"),
                    "message": read.forecast.get("message"),
                    **({"plateau_summed": read.summed_plateau} if read.summed_plateau else {})}
        for mode in self.settings.stop_on:
            if self.streak.get(mode, 0) >= need:
                verdict = modes[mode]
                reason = (f"{mode} flagged ({verdict.get('severity')}) at {need} consecutive read(s): "
                          f"{verdict.get('verdict')}")
                if mode in FORECAST_GATED_MODES and _finite(read.plateau.get("hi80")):
                    reason += (f"; the forecast agrees: plateau upper 80% bound {read.plateau['hi80']:.4g}, within "
                               "the mode's threshold")
                return StopDecision(read.step, mode, verdict.get("onset_step"), verdict.get("severity"), reason,
                                    forecast)
        if limit is not None and self.streak.get(PLATEAU_RULE, 0) >= need:
            whose = "the reward functions' summed plateau" if read.sum_decides else "forecast plateau"
            reason = (f"{whose} {plateau.get('mean'):.4g}, upper 80% bound {hi80:.4g} below the target "
                      f"{limit:g} at {need} consecutive forecast(s): the run cannot reach it")
            return StopDecision(read.step, PLATEAU_RULE, None, None, reason, forecast)
        if target is not None and self.streak.get(REACHED_RULE, 0) >= need:
            reason = (f"the reward's smoothed level {read.level['mean']:.4g} reached the target {target:g} at {need} "
                      "consecutive read(s): the rest of the run's budget is saved")
            return StopDecision(read.step, REACHED_RULE, None, None, reason, forecast)
        return None


class AlertRules:
    """Report-only alerts: the stop rules' criterion (:class:`StopRules`: severity at least medium at
    ``consecutive_reads`` reads in a row; a phase mode's phase long enough) for each mode of ``modes`` (None: every
    mode a read reports), applied without stopping, each mode alerted once. A mode alerts exactly where
    ``stop_on=[mode]`` would have stopped the run, so the live benchmark's false-stop rate per mode is the alert's
    false-alarm rate; the plateau rule is not an alert. :meth:`update` returns the decisions a read completes."""

    def __init__(self, settings: LiveSettings, modes: Sequence[str] | None = None):
        check_modes("alert_on", modes or ())
        self.settings = replace(settings, stop_on=(), stop_if_plateau_below=None)
        self.modes = tuple(modes) if modes else None
        self.rules: dict[str, StopRules] = {}
        self.alerted: list[StopDecision] = []
        #: modes alerted before these rules were made (a resumed run, a restarted watch): never alerted again
        self.restored: set[str] = set()

    def restore(self, modes: Sequence[str]) -> None:
        """Modes already alerted in this run by an earlier process (read back from its ``live.json``)."""
        self.restored |= {m for m in modes if isinstance(m, str)}

    def update(self, read: LiveRead) -> list[StopDecision]:
        done = {d.mode for d in self.alerted} | self.restored
        new = []
        for mode in self.modes or [m for m in MODES if m in read.modes]:
            if mode in done:
                continue
            rules = self.rules.setdefault(mode, StopRules(replace(self.settings, stop_on=(mode,))))
            decision = rules.update(read)
            if decision is not None:
                new.append(decision)
        self.alerted += new
        return new
