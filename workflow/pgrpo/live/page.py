"""``live.json`` and the one-page ``live.html`` of a run in progress (the live face of ``pgrpo diagnose``'s
verdicts, Section 5, and ``pgrpo forecast``'s plateau and t90, Section 4.4): built here as data and text, written
atomically by the caller (the callback, ``pgrpo replay``/``watch``)."""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from pgrpo.diagnose.records import plain
from pgrpo.live.reads import LiveRead, LiveSettings


def live_payload(read: LiveRead, settings: LiveSettings, reads: Sequence[LiveRead], theory: Mapping[str, Any],
                 stopped: Mapping[str, Any] | None, source: str, total_steps: float | None) -> dict[str, Any]:
    """``live.json``: the schema of ``pgrpo diagnose --json`` (the latest read's diagnosis) plus ``forecast`` (the
    latest forecast), ``theory`` (Theorem 7 and Prop. 9), ``live`` (settings, the reads so far, the stop)."""
    payload = dict(read.diagnosis)
    payload["forecast"] = read.forecast
    payload["theory"] = dict(theory)
    payload["live"] = {"source": source, "step": read.step, "total_steps": total_steps,
                       "settings": settings.to_dict(), "line": read.verdict_line(), "errors": read.errors,
                       "reads": [r.to_dict() for r in reads], "stopped": dict(stopped) if stopped else None}
    return plain(payload)


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
    ]
    if stopped:
        parts.append(f"<p class='stop'>Stopped at step {esc(str(stopped.get('step')))}: "
                     f"{esc(str(stopped.get('reason')))}</p>")
    parts += ["<h2>Failure modes</h2><table><tr><th>mode</th><th>state</th><th>onset</th><th>severity</th>"
              "<th>verdict</th><th>reason</th></tr>", *rows, "</table>", "<h2>Forecast</h2>",
              f"<p>plateau {esc(str(plateau.get('mean')))} (80%: {esc(str(plateau.get('lo80')))} to "
              f"{esc(str(plateau.get('hi80')))}); t90 {esc(str(t90.get('mean')))}; "
              f"{esc(str(forecast.get('message') or ''))}</p>", "<h2>Theorem 7</h2><ul>"]
    for key in ("configuration", "measured"):
        line = (theory.get(key) or {}).get("line")
        if line:
            parts.append(f"<li>{esc(line)}</li>")
    parts += ["</ul>", f"<p>{len(live.get('reads') or [])} read(s), every "
              f"{esc(str((live.get('settings') or {}).get('every')))} logged steps.</p>", "</body></html>"]
    return "\n".join(parts) + "\n"
