"""The one table writer every stage uses: Markdown (GitHub pipes), LaTeX (booktabs) and HTML tables from headers and
rows of cell text, the escaping each needs, and :func:`frame_cells` to turn a data frame into such rows. CSV, the
data behind every table, is written from a data frame by :func:`pgrpo.atomic.write_csv`.
"""

from __future__ import annotations

import html
import math
from typing import Any, Mapping, Sequence


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool, not None, not NaN or infinite)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table; ``align`` per column: ``"l"`` (default) or ``"r"``."""
    rules = ["---:" if a == "r" else "---" for a in (align or ["l"] * len(headers))]
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "|".join(rules) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    """Plain text with LaTeX's special characters escaped."""
    replacements = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(replacements.get(ch, ch) for ch in str(text))


def latex_table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "", label: str = "",
                size: str = "small", column_spec: str | None = None) -> str:
    """A booktabs ``table`` environment; cells are taken as LaTeX (escape plain text with :func:`latex_escape`)."""
    spec = column_spec or "l" * len(headers)
    lines = [r"\begin{table}[t]", r"\centering", rf"\{size}", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(headers) + r" \\", r"\midrule"]
    lines += [" & ".join(row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{caption}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "",
               styles: Mapping[tuple[int, int], str] | None = None, header_rows: int = 1,
               extra_header: Sequence[tuple[str, int]] | None = None, notes: str = "") -> str:
    """A self-contained HTML ``<table>``; cell text is escaped, ``styles[(row, col)]`` is a CSS declaration for a body
    cell (e.g. ``"color:#1a7f37;font-weight:bold"``), ``extra_header`` an optional first header row of
    ``(text, colspan)`` groups, ``notes`` an optional footnote row under the body. The first ``header_rows`` columns
    are left-aligned, the rest right-aligned.
    """
    styles = styles or {}
    out = ['<table style="border-collapse:collapse;font-family:sans-serif;font-size:90%">']
    if caption:
        out.append(f"<caption style=\"caption-side:top;text-align:left;padding:4px\">{html.escape(caption)}</caption>")
    cell = 'style="border-bottom:1px solid #999;padding:3px 8px;text-align:{align}"'
    out.append("<thead>")
    if extra_header:
        out.append("<tr>" + "".join(f'<th colspan="{span}" {cell.format(align="center")}>{html.escape(str(t))}</th>'
                                    for t, span in extra_header) + "</tr>")
    out.append("<tr>" + "".join(f'<th {cell.format(align="left")}>{html.escape(str(h))}</th>' for h in headers)
               + "</tr>")
    out.append("</thead><tbody>")
    for i, row in enumerate(rows):
        tds = []
        for j, value in enumerate(row):
            style = f"padding:3px 8px;text-align:{'left' if j < header_rows else 'right'}"
            if (i, j) in styles:
                style += ";" + styles[(i, j)]
            tds.append(f'<td style="{style}">{html.escape(str(value))}</td>')
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</tbody>")
    if notes:
        out.append(f'<tfoot><tr><td colspan="{len(headers)}" style="padding:6px 8px;font-size:90%;color:#444">'
                   f"{html.escape(notes)}</td></tr></tfoot>")
    out.append("</table>")
    return "\n".join(out) + "\n"


def html_page(title: str, body: str) -> str:
    """A minimal standalone HTML page (UTF-8, a heading) around ``body``, e.g. one or more :func:`html_table`."""
    name = html.escape(title)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>{name}</title></head>\n'
            f'<body style="font-family:sans-serif">\n<h3>{name}</h3>\n{body}</body>\n</html>\n')


def frame_cells(frame: Any, floatfmt: str = "{:.3g}", missing: str = "", escape=None) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of cell text from a data frame: floats by ``floatfmt``, non-finite floats as ``missing``,
    every other cell (and header) as ``str``, passed through ``escape`` when given.
    """
    esc = escape or (lambda s: s)

    def fmt(value: Any) -> str:
        if isinstance(value, float) or type(value).__module__ == "numpy" and hasattr(value, "dtype") \
                and value.dtype.kind == "f":
            return missing if not math.isfinite(float(value)) else floatfmt.format(value)
        return esc(str(value))

    headers = [esc(str(c)) for c in frame.columns]
    rows = [[fmt(v) for v in row] for row in frame.itertuples(index=False)]
    return headers, rows
