"""The failure modes of a run as tables and pages (views of ``verdicts.json``, :mod:`pgrpo.diagnose.modes`): the
modes table (mode, flagged, onset, episodes, severity, verdict, why), the section the workflow's ``verdicts.md`` opens with,
and the one-page summary of ``pgrpo diagnose LOG --out DIR`` in Markdown and HTML.
"""

from __future__ import annotations

import html
import math
import os
from typing import Any, Mapping, Sequence

from pgrpo.tables.render import html_table, markdown_table

HEADERS = ["mode", "flagged", "onset step", "episodes", "severity", "verdict", "why"]

FLAG_TEXT = {True: "**yes**", False: "no", None: "n/a"}

FLAG_STYLE = {True: "color:#b42318;font-weight:bold", False: "color:#1a7f37", None: "color:#777"}


def _step(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _cell(text: str, width: int) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= width else text[: width - 3] + "..."


def episodes_text(mode: Mapping[str, Any]) -> str:
    """A flagged mode's episodes, ``a-b`` (ended) or ``a-`` (still on at the last step)."""
    if not mode.get("flagged"):
        return ""
    parts = [f"{_step(e.get('start'))}-{_step(e.get('end')) if e.get('end') is not None else ''}"
             for e in (mode.get("episodes") or [])]
    text = ", ".join(parts[:4]) + (f" (+{len(parts) - 4})" if len(parts) > 4 else "")
    return text + ("" if mode.get("active") is not False else " (resolved)")


def modes_rows(modes: Mapping[str, Mapping[str, Any]], width: int = 160, markdown: bool = True) -> list[list[str]]:
    """One row per mode of a ``modes`` mapping (``verdicts.json``)."""
    rows = []
    for name, mode in modes.items():
        flag = mode.get("flagged")
        shown = FLAG_TEXT[flag] if markdown else {True: "yes", False: "no", None: "n/a"}[flag]
        rows.append([name, shown, _step(mode.get("onset_step")), episodes_text(mode), mode.get("severity") or "",
                     _cell(mode.get("verdict", ""), 60), _cell(mode.get("reason", ""), width)])
    return rows


def modes_section(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """The failure modes of every run of the workflow (``verdicts.json`` ``modes``), for ``verdicts.md``; no ``##``
    heading, so the file keeps one section per diagnostic."""
    lines = ["**Failure modes** (`modes` in verdicts.json; rule set: "
             f"{verdicts[0].get('rule_set', 'ours') if verdicts else 'ours'}):", ""]
    for run in verdicts:
        who = run.get("model", "") + (f", G={run['G']}" if run.get("G") else "")
        lines += [f"*{who}*: {run['summary']['line']}", "", markdown_table(HEADERS, modes_rows(run["modes"], 110))]
    return "\n".join(lines) + "\n"


def silent_line(modes: Mapping[str, Any]) -> str:
    """The reward functions that scored every completion alike at every logged step (``degeneracy``'s
    ``numbers.silent_functions``), in words; empty where there is none."""
    silent = ((modes.get("degeneracy") or {}).get("numbers") or {}).get("silent_functions") or []
    if not silent:
        return ""
    each = ", ".join(f"{s['function']} ({s['value']:.4g} at all {s['points']} logged steps)" for s in silent)
    return (f"silent reward function{'s' if len(silent) > 1 else ''}: {each}: every completion scored alike, so "
            f"{'they add' if len(silent) > 1 else 'it adds'} nothing to any group's advantage (check that "
            f"{'they' if len(silent) > 1 else 'it'} can pay at all)")


def summary_markdown(report: Mapping[str, Any], figures: Sequence[str] = (), body: str = "") -> str:
    """The one-page summary of one log's diagnosis (``report``: :meth:`DiagnosisReport.to_dict`): the verdict, the
    modes table, the figures, then ``body`` (the Figures 2-5 read-outs in words)."""
    summary = report.get("summary") or {}
    run = f"{report.get('model', '')}" + (f", G={report['G']}" if report.get("G") else ", G unknown")
    steps = f"steps {_step(report.get('first_step'))}-{_step(report.get('last_step'))} ({report.get('n_steps')} logged)"
    lines = [f"# Diagnosis of {report.get('source', '')}", "",
             f"**{summary.get('line', 'no modes computed')}**", "",
             f"- run: {run}; {steps}; rule set: {report.get('rule_set')}",
             f"- first step to look at: {_step(summary.get('first_step_to_look_at')) or 'none'}",
             f"- ongoing at the last step: {', '.join(summary.get('ongoing') or []) or 'none'}; resolved: "
             + (", ".join(f"{m} (by step {_step(s)})" for m, s in (summary.get("resolved") or {}).items()) or "none"),
             *([f"- {silent}"] if (silent := silent_line(report.get("modes") or {})) else []),
             "",
             markdown_table(HEADERS, modes_rows(report.get("modes") or {})), ""]
    if figures:
        lines += ["Figures: " + ", ".join(f"[{os.path.basename(f)}]({os.path.basename(f)})" for f in figures), ""]
    if body:
        lines += [body.rstrip(), ""]
    return "\n".join(lines)


def summary_html(report: Mapping[str, Any], figures: Sequence[str] = (), body: str = "") -> str:
    """The same page as :func:`summary_markdown` as one self-contained HTML file (figures by relative path)."""
    summary = report.get("summary") or {}
    modes = report.get("modes") or {}
    rows = modes_rows(modes, width=400, markdown=False)
    styles = {(i, 1): FLAG_STYLE[m.get("flagged")] for i, m in enumerate(modes.values())}
    run = f"{report.get('model', '')}" + (f", G={report['G']}" if report.get("G") else ", G unknown")
    parts = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
             f"<title>Diagnosis of {html.escape(str(report.get('source', '')))}</title></head>",
             "<body style=\"font-family:sans-serif;max-width:1200px;margin:auto\">",
             f"<h1>Diagnosis of {html.escape(str(report.get('source', '')))}</h1>",
             f"<p><b>{html.escape(str(summary.get('line', '')))}</b></p>",
             f"<p>run: {html.escape(run)}; steps {_step(report.get('first_step'))}-{_step(report.get('last_step'))}; "
             f"rule set: {html.escape(str(report.get('rule_set')))}</p>",
             *([f"<p>{html.escape(silent)}</p>"] if (silent := silent_line(modes)) else []),
             html_table(HEADERS, rows, styles=styles, header_rows=len(HEADERS))]
    for figure in figures:
        if figure.endswith(".png"):
            name = html.escape(os.path.basename(figure))
            parts.append(f"<p><img src=\"{name}\" alt=\"{name}\" style=\"max-width:100%\"></p>")
    if body:
        parts.append("<pre style=\"white-space:pre-wrap\">" + html.escape(body) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
