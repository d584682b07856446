"""The text of ``pgrpo forecast --compare`` (beyond the paper; the decisions of :mod:`pgrpo.fit.decisions`): the runs
ranked by where they will end, P(each ends highest) and the stop rule's verdict, one line per run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}f}"


def compare_text(payload: Mapping[str, Any]) -> str:
    """A table in words: rank, run, plateau with its 80% band, level at the cut, P(highest), P(beats the best so
    far) and whether the stop rule stops it now."""
    best = payload.get("best_so_far") or {}
    lines = [f"{len(payload['runs'])} runs, {payload['column']} forecast to step {payload['horizon']:.0f}; best so "
             f"far {_num(best.get('level'))} ({Path(str(best.get('log'))).as_posix()}); stop rule: P(plateau > best "
             f"so far) < {payload['stop_threshold']:g}",
             f"{'rank':>4}  {'plateau (80%)':<24} {'now':>7} {'P(top)':>7} {'P(beat)':>8}  {'verdict':<9} run"]
    if payload.get("fraction") is None and str(payload.get("horizon_source", "")).startswith("the longest run's"):
        # runs read from everything they logged and forecast to the longest one's last step: "now" ranks nothing
        lines.insert(1, f"note: horizon = {payload['horizon_source']}")
    for run in payload["runs"]:
        p = run.get("plateau") or {}
        band = f"{_num(p.get('mean'))} ({_num(p.get('lo80'))}-{_num(p.get('hi80'))})"
        verdict = "stop" if run.get("stop_now") else "keep"
        lines.append(f"{run['rank']:>4}  {band:<24} {_num(run.get('level_at_cut')):>7} "
                     f"{_num(run.get('p_highest'), 2):>7} {_num(run.get('p_beats_best_so_far'), 2):>8}  "
                     f"{verdict:<9} {run['log']}")
        if run.get("target"):
            lines.append(f"      target: {run['target'].get('message')}")
        for note in run.get("notes") or []:
            lines.append(f"      note: {note}")
    lines.append(_leader_line(payload["runs"]))
    return "\n".join(lines)


def _leader_line(runs: list[Mapping[str, Any]]) -> str:
    """The leader's P(top) beside a draw's 1/n: how far the forecasts tell the runs apart (no threshold: the user
    reads the two numbers)."""
    chance = 1.0 / len(runs) if runs else float("nan")
    leader = runs[0] if runs else {}
    return (f"leader {leader.get('log')}: ends highest with P = {_num(leader.get('p_highest'), 2)} "
            f"(a blind pick among {len(runs)}: {_num(chance, 2)})")
