"""``live.json`` and the one-page ``live.html`` of a run in progress (the live face of ``pgrpo diagnose``'s
verdicts, Section 5, and ``pgrpo forecast``'s plateau and t90, Section 4.4): built here as data and text, written
atomically by the caller (the callback, ``pgrpo replay``/``watch``)."""

from __future__ import annotations

import html
import math
from typing import Any, Mapping, Sequence

from pgrpo.diagnose.records import plain
from pgrpo.live.reads import LiveRead, LiveSettings
from pgrpo.tables.diagnosis import silent_line


def live_payload(read: LiveRead, settings: LiveSettings, reads: Sequence[LiveRead], theory: Mapping[str, Any],
                 stopped: Mapping[str, Any] | None, source: str, total_steps: float | None,
                 curve: Any = None, alerts: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``live.json``: the schema of ``pgrpo diagnose --json`` (the latest read's diagnosis) plus ``forecast`` (the
    latest forecast), ``theory`` (Theorem 7 and Prop. 9), ``live`` (settings, the reads so far, the stop, the alerts
    told so far and, where given, ``curve``: the logged reward as ``{"step": [...], "reward": [...]}``, which the
    page draws). A resumed run or a restarted watch reads ``live.alerts`` back (:func:`previous_alerts`) so that an
    alert is told once per run."""
    payload = dict(read.diagnosis)
    payload["forecast"] = read.forecast
    payload["theory"] = dict(theory)
    payload["live"] = {"source": source, "step": read.step, "total_steps": total_steps,
                       "settings": settings.to_dict(), "line": read.verdict_line(), "errors": read.errors,
                       "reads": [r.to_dict() for r in reads], "stopped": dict(stopped) if stopped else None,
                       "alerts": [dict(a) for a in alerts], "curve": reward_curve(curve)}
    return plain(payload)


def previous_alerts(payload: Mapping[str, Any] | None, up_to_step: float | None = None) -> list[dict[str, Any]]:
    """The alerts an earlier ``live.json`` (``payload``) recorded: none where it is missing or has none; only those
    read at or before ``up_to_step`` (a run resumed from an earlier checkpoint re-earns the alerts of the steps it
    repeats). Each record keeps its ``mode`` and ``read_step``."""
    live = (payload or {}).get("live") if isinstance(payload, Mapping) else None
    if not isinstance(live, Mapping):
        return []
    out = []
    for alert in live.get("alerts") or []:
        if not isinstance(alert, Mapping) or not isinstance(alert.get("mode"), str):
            continue
        step = alert.get("read_step")
        if up_to_step is not None and isinstance(step, (int, float)) and step > up_to_step:
            continue
        out.append(dict(alert))
    return out


def reward_curve(frame: Any) -> dict[str, list[float]] | None:
    """``{"step", "reward"}`` of a log frame's train rows (``step`` and ``reward`` finite), or None."""
    if frame is None or "step" not in frame or "reward" not in frame:
        return None
    import numpy as np

    step = np.asarray(frame["step"], float)
    reward = np.asarray(frame["reward"], float)
    keep = np.isfinite(step) & np.isfinite(reward)
    return {"step": step[keep].tolist(), "reward": reward[keep].tolist()} if keep.any() else None


#: the page's plot area, in SVG user units
PLOT_W, PLOT_H = 720.0, 220.0
#: the plateau forecast's colour (the forecast figures' blue)
FORECAST_COLOUR = "#1f77b4"
EPISODE_COLOURS = ("#e6550d", "#3182bd", "#31a354", "#756bb1", "#de2d26", "#636363", "#fd8d3c", "#9ecae1")


def episode_spans(payload: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(mode, start, end) of every flagged mode's episodes; an episode still on ends at the last logged step."""
    curve = (payload.get("live") or {}).get("curve") or {}
    last = max(curve.get("step") or [0.0])
    spans = []
    for mode, verdict in (payload.get("modes") or {}).items():
        if not verdict.get("flagged"):
            continue
        for episode in verdict.get("episodes") or []:
            if episode.get("start") is None:
                continue
            end = episode.get("end")
            spans.append((mode, float(episode["start"]), float(last if end is None else end)))
    return spans


def plateau_segments(reads: Sequence[Any], end: float) -> list[tuple[float, float, float, float, float]]:
    """(start, stop, mean, lo80, hi80) of the plateau forecast of each read that carries one, held from its read until
    the next read that forecast, the last one to ``end`` (not before its own read): what ``live.html`` and ``pgrpo
    replay --png`` (:func:`pgrpo.figures.live.replay_figure`) draw."""
    rows = []
    for read in reads:
        plateau = read.get("plateau") if isinstance(read, Mapping) else None
        if not isinstance(plateau, Mapping):
            continue
        try:
            row = (float(read["step"]), float(plateau["mean"]), float(plateau["lo80"]), float(plateau["hi80"]))
        except (KeyError, TypeError, ValueError):
            continue
        if all(math.isfinite(v) for v in row):
            rows.append(row)
    stops = [step for step, _, _, _ in rows[1:]] + ([max(float(end), rows[-1][0])] if rows else [])
    return [(step, stop, mean, lo, hi) for (step, mean, lo, hi), stop in zip(rows, stops)]


def curve_svg(payload: Mapping[str, Any]) -> str:
    """The reward curve with each flagged mode's episodes shaded and the plateau forecast of each read (its 80%
    interval held until the next read that forecast, the last to the latest step; Figure-style, inline SVG); ""
    without a curve. The vertical scale covers the reward and the band, an early band no more than half the
    reward's span beyond it (a first read's wide interval does not flatten the curve)."""
    curve = (payload.get("live") or {}).get("curve")
    if not curve or not curve.get("step"):
        return ""
    steps, rewards = curve["step"], curve["reward"]
    x0, x1 = min(steps), max(steps)
    r0, r1 = min(rewards), max(rewards)
    track = plateau_segments((payload.get("live") or {}).get("reads") or [], x1)
    span = (r1 - r0) or 1.0
    y0 = min([r0] + [max(lo, r0 - 0.5 * span) for _, _, _, lo, _ in track])
    y1 = max([r1] + [min(hi, r1 + 0.5 * span) for _, _, _, _, hi in track])
    xs = (lambda x: (x - x0) / (x1 - x0) * PLOT_W if x1 > x0 else PLOT_W / 2)
    ys = (lambda y: PLOT_H - ((min(max(y, y0), y1) - y0) / (y1 - y0) * PLOT_H if y1 > y0 else PLOT_H / 2))
    modes = list(dict.fromkeys(mode for mode, _, _ in episode_spans(payload)))
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{PLOT_W:g}' height='{PLOT_H + 20:g}' "
             f"viewBox='0 0 {PLOT_W:g} {PLOT_H + 20:g}' class='curve'>"]
    for mode, start, end in episode_spans(payload):
        colour = EPISODE_COLOURS[modes.index(mode) % len(EPISODE_COLOURS)]
        left, right = xs(max(start, x0)), xs(min(end, x1))
        parts.append(f"<rect class='episode' data-mode='{html.escape(mode)}' x='{left:.1f}' y='0' "
                     f"width='{max(right - left, 1.0):.1f}' height='{PLOT_H:g}' fill='{colour}' fill-opacity='0.18'>"
                     f"<title>{html.escape(mode)}: steps {start:g} to {end:g}</title></rect>")
    if track:  # each forecast held until the next read that forecast, the last one to the latest logged step
        upper = " ".join(f"{xs(a):.1f},{ys(hi):.1f} {xs(b):.1f},{ys(hi):.1f}" for a, b, _, _, hi in track)
        lower = " ".join(f"{xs(b):.1f},{ys(lo):.1f} {xs(a):.1f},{ys(lo):.1f}" for a, b, _, lo, _ in reversed(track))
        mean = " ".join(f"{xs(a):.1f},{ys(m):.1f} {xs(b):.1f},{ys(m):.1f}" for a, b, m, _, _ in track)
        parts.append(f"<polygon class='plateau-band' points='{upper} {lower}' fill='{FORECAST_COLOUR}' "
                     "fill-opacity='0.2' stroke='none'/>")
        parts.append(f"<polyline class='plateau' points='{mean}' fill='none' stroke='{FORECAST_COLOUR}' "
                     "stroke-width='1.4'/>")
    points = " ".join(f"{xs(x):.1f},{ys(y):.1f}" for x, y in zip(steps, rewards))
    parts.append(f"<polyline points='{points}' fill='none' stroke='#222' stroke-width='1.2'/>")
    parts.append(f"<text x='0' y='{PLOT_H + 15:g}' font-size='11'>step {x0:g}</text>"
                 f"<text x='{PLOT_W:g}' y='{PLOT_H + 15:g}' font-size='11' text-anchor='end'>step {x1:g}</text>")
    legend = ", ".join(f"<span style='color:{EPISODE_COLOURS[i % len(EPISODE_COLOURS)]}'>{html.escape(m)}</span>"
                       for i, m in enumerate(modes))
    parts.append("</svg>")
    caption = f"reward from {r0:.3g} to {r1:.3g}; " + (f"shaded: the episodes of {legend}" if modes else
                                                         "no failure episode")
    if track:
        caption += (f"; <span style='color:{FORECAST_COLOUR}'>blue</span>: the plateau forecast of each read with "
                    "its 80% interval")
    return "".join(parts) + f"<p>{caption}</p>"


def _number(value: Any, step: bool = False) -> str:
    """A forecast's number as the page prints it: 3 significant digits (no exponent from 1000 on), a ``step`` as a
    whole step; "n/a" where there is none."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(number):
        return "n/a"
    if step:
        return f"step {round(number):d}"
    return f"{number:.0f}" if abs(number) >= 1000 else f"{number:.3g}"


def live_html(payload: Mapping[str, Any]) -> str:
    """One page: the verdict line, the stop (if any), the modes table, the forecast and the theory lines."""
    live = payload.get("live") or {}
    esc = html.escape
    rows = []
    for mode, verdict in (payload.get("modes") or {}).items():
        state = {True: "FLAGGED", False: "clear", None: "could not run"}.get(verdict.get("flagged"), "?")
        rows.append(f"<tr><td>{esc(mode)}</td><td>{state}</td><td>{esc(str(verdict.get('onset_step')))}</td>"
                    f"<td>{esc(str(verdict.get('severity') or ''))}</td><td>{esc(str(verdict.get('verdict')))}</td>"
                    f"<td>{esc(str(verdict.get('reason') or ''))}</td></tr>")
    forecast = payload.get("forecast") or {}
    plateau, t90 = forecast.get("plateau") or {}, forecast.get("t90") or {}
    theory = payload.get("theory") or {}
    stopped = live.get("stopped")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>pgrpo live</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:90%}.stop{color:#b00;font-weight:bold}</style>",
        "</head><body>", f"<h1>Live diagnosis of {esc(str(live.get('source')))}</h1>",
        f"<p>{esc(str(live.get('line')))}</p>",
        *([f"<p>{esc(silent)}</p>"] if (silent := silent_line(payload.get("modes") or {})) else []),
    ]
    if stopped:
        parts.append(f"<p class='stop'>Stopped at step {esc(str(stopped.get('step')))}: "
                     f"{esc(str(stopped.get('reason')))}</p>")
    alerts = live.get("alerts") or []
    if alerts:
        parts.append("<h2>Alerts</h2><ul>" + "".join(
            f"<li class='alert'>step {esc(str(a.get('read_step')))}: {esc(str(a.get('mode')))}: "
            f"{esc(str(a.get('reason') or ''))}</li>" for a in alerts) + "</ul>")
    parts += ["<h2>Failure modes</h2><table><tr><th>mode</th><th>state</th><th>onset</th><th>severity</th>"
              "<th>verdict</th><th>reason</th></tr>", *rows, "</table>", "<h2>The reward</h2>", curve_svg(payload),
              "<h2>Forecast</h2>",
              f"<p>plateau {_number(plateau.get('mean'))} (80%: {_number(plateau.get('lo80'))} to "
              f"{_number(plateau.get('hi80'))}); t90 {_number(t90.get('mean'), step=True)}; "
              f"{esc(str(forecast.get('message') or ''))}</p>", "<h2>Theorem 7</h2><ul>"]
    for key in ("configuration", "measured"):
        line = (theory.get(key) or {}).get("line")
        if line:
            parts.append(f"<li>{esc(line)}</li>")
    parts += ["</ul>", f"<p>{len(live.get('reads') or [])} read(s), every "
              f"{esc(str((live.get('settings') or {}).get('every')))} logged steps.</p>", "</body></html>"]
    return "\n".join(parts) + "\n"
