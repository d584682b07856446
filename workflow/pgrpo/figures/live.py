"""The live monitor's replay in one figure (beyond the paper: ``pgrpo replay --png``): what the callback
(:class:`pgrpo.live.DynamicsCallback`) would have told, read by read, on a saved run.

Top: the logged reward (grey), the plateau forecast at each read that forecast (the mixture of the laws of
Section 3.5, Eq. 14-16, made from what had been logged by then) with its 80% interval, so that a reader sees the
forecast settle or move as the run goes on; where a stop rule fired, the step it stopped at. Bottom: one row per
failure mode of ``pgrpo diagnose`` (Section 5's diagnostics and the modes beyond them) flagged at any read, a mark
at every read that flagged it, coloured by severity (a circle where the read held the mode's stop: the forecast
still allows a recovery, or the run is too young); a mode in ``--stop-on`` is named in bold.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from pgrpo.figures.forecasts import run_label
from pgrpo.figures.style import BAND_ALPHA, style
from pgrpo.live.page import plateau_segments

_FORECAST = "#1f77b4"
_STOP = "#d62728"
#: a flag's mark by its severity (a stop needs at least ``medium`` by default: ``LiveSettings.stop_severities``)
SEVERITY_COLOURS = {"low": "#fdd0a2", "medium": "#fd8d3c", "high": "#a63603"}


def flagged_reads(reads: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, str, bool]]]:
    """Mode -> (step, severity, held) of each read that flagged it, modes in the order they were first flagged;
    ``held``: the read held the mode's stop (the forecast still allows a recovery, or too early in the run)."""
    out: dict[str, list[tuple[float, str, bool]]] = {}
    for read in reads:
        held = set(read.get("held_by_forecast") or ()) | set(read.get("held_early") or ())
        for mode, verdict in (read.get("modes") or {}).items():
            if isinstance(verdict, Mapping) and verdict.get("flagged"):
                out.setdefault(mode, []).append((float(read["step"]), str(verdict.get("severity") or "medium"),
                                                 mode in held))
    return out


def replay_figure(steps: np.ndarray, rewards: np.ndarray, replay: Mapping[str, Any], title: str = "") -> Any:
    """``pgrpo replay``'s record (``replay``: its JSON) over the run's logged reward (``steps``, ``rewards``)."""
    steps, rewards = np.asarray(steps, float), np.asarray(rewards, float)
    reads = list(replay.get("reads") or [])
    stopped = replay.get("stopped") or None
    stop_on = set(((replay.get("settings") or {}).get("stop_on")) or ())
    flags = flagged_reads(reads)
    with style():
        fig, (ax, strip) = plt.subplots(2, 1, figsize=(6.2, 3.2 + 0.22 * max(len(flags), 1)), sharex=True,
                                        gridspec_kw={"height_ratios": (3.0, 0.45 + 0.28 * max(len(flags), 1))})
        ax.plot(steps, rewards, color="0.6", linewidth=0.6, label="logged reward")
        end = float(stopped["step"]) if stopped else (float(steps.max()) if steps.size else float("-inf"))
        segments = plateau_segments(reads, end)  # each read's forecast held until the next, the last to the end
        if segments:  # drawn as steps: each segment from its start, and the last one's stop at its level
            starts, _, means, los, his = (list(column) for column in zip(*segments))
            track_step = np.array(starts + [segments[-1][1]])
            mean, lo, hi = (np.array(column + column[-1:]) for column in (means, los, his))
            ax.fill_between(track_step, lo, hi, step="post", color=_FORECAST, alpha=BAND_ALPHA, linewidth=0,
                            label="plateau forecast, 80% interval")
            ax.step(track_step, mean, where="post", color=_FORECAST, linewidth=1.1, label="plateau forecast")
        if stopped:
            ax.axvline(float(stopped["step"]), color=_STOP, linewidth=1.0, linestyle="--",
                       label=f"stopped at step {float(stopped['step']):g} ({stopped.get('mode')})")
            strip.axvline(float(stopped["step"]), color=_STOP, linewidth=1.0, linestyle="--")
        ax.set_ylabel("train reward")
        ax.legend(loc="best", frameon=False, fontsize=6)
        every = replay.get("every")
        ax.set_title(f"{title}: a read every {every} logged steps" if title else f"a read every {every} logged steps")
        for row, (mode, marks) in enumerate(flags.items()):
            for severity, colour in SEVERITY_COLOURS.items():
                for held in (False, True):
                    at = [step for step, sev, h in marks if sev == severity and h == held]
                    if at:
                        strip.plot(at, [row] * len(at), linestyle="none", marker="o" if held else "|",
                                   markersize=3.5 if held else 7, markerfacecolor="none", color=colour)
        strip.set_yticks(range(len(flags)))
        strip.set_yticklabels(list(flags), fontsize=6.5)
        for label in strip.get_yticklabels():
            if label.get_text() in stop_on:
                label.set_fontweight("bold")
        strip.set_ylim(-0.7, max(len(flags), 1) - 0.3)
        if not flags:
            strip.text(0.5, 0.5, "no mode flagged at any read", transform=strip.transAxes, ha="center",
                       va="center", fontsize=6.5, color="0.4")
            strip.set_yticks([])
        if flags:
            strip.set_title("flagged at a read, by severity: low (light), medium, high (dark); a circle: its stop "
                            "held", fontsize=6, loc="left", color="0.35")
        strip.grid(False, axis="y")
        strip.set_xlabel("optimizer step")
        fig.tight_layout()
    return fig


def replay_title(log: str) -> str:
    """The figure's title: the run's short name (:func:`pgrpo.figures.forecasts.run_label`)."""
    return run_label(log, width=48)
