"""Table 1 (Section 5.7): pass@1 and pass@5 per benchmark, Base | G columns per model (G descending, as the paper),
mean ± s.d. over seeds; green above base, bold green the best per model, red below base. Views: Markdown (the change
against base in parentheses, bold the best), LaTeX (xcolor), HTML (the colours, as in the paper) and the cells as a
data frame (:func:`table1_summary`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from pgrpo.grpo.pass_at_k import PASS_AT_K_KEY
from pgrpo.tables.render import html_page, html_table, latex_escape, markdown_table

_GREEN, _RED = r"\textcolor{green!50!black}", r"\textcolor{red}"

#: CSS of a trained cell by its mark (:meth:`Table1.mark`)
HTML_STYLES = {"best": "color:#1a7f37;font-weight:bold", "better": "color:#1a7f37", "worse": "color:#cf222e"}

#: a trained mean within this many percentage points of the base is neither green nor red (it prints equal)
EQUAL_TOLERANCE = 0.005


@dataclass(frozen=True)
class Cell:
    """One Table 1 entry in percent: mean and sample s.d. (ddof 1; NaN with one seed) over ``n`` values."""

    mean: float
    sd: float
    n: int


def summarize(values: Sequence[float]) -> Cell:
    """Mean and sample s.d. (ddof = 1) of fractions, in percent."""
    xs = [100.0 * float(v) for v in values]
    n = len(xs)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else float("nan")
    return Cell(mean, sd, n)


@dataclass(frozen=True)
class Table1:
    """Table 1 as numbers: ``cells[(benchmark, metric, model, column)]`` with column ``Base`` or ``G=<G>``."""

    benchmarks: list[str]
    sizes: dict[str, int]
    metrics: list[str]
    models: list[str]
    columns: dict[str, list[str]]
    cells: dict[tuple[str, str, str, str], Cell]

    def base(self, benchmark: str, metric: str, model: str) -> Cell | None:
        return self.cells.get((benchmark, metric, model, "Base"))

    def best_column(self, benchmark: str, metric: str, model: str) -> set[str]:
        """The trained columns with the highest mean, if that mean beats the base (Table 1's bold green)."""
        base = self.base(benchmark, metric, model)
        trained = {c: self.cells[(benchmark, metric, model, c)] for c in self.columns[model]
                   if c != "Base" and (benchmark, metric, model, c) in self.cells}
        if base is None or not trained:
            return set()
        top = max(cell.mean for cell in trained.values())
        if not top > base.mean + 1e-12:
            return set()
        return {c for c, cell in trained.items() if abs(cell.mean - top) <= 1e-9}

    def mark(self, benchmark: str, metric: str, model: str, column: str) -> str:
        """``"base"``, ``"missing"``, or how a trained cell compares with the base: ``"best"`` (bold green),
        ``"better"`` (green), ``"worse"`` (red), ``"equal"`` (within :data:`EQUAL_TOLERANCE`) or ``"no base"``."""
        cell = self.cells.get((benchmark, metric, model, column))
        if cell is None:
            return "missing"
        if column == "Base":
            return "base"
        base = self.base(benchmark, metric, model)
        if base is None:
            return "no base"
        if abs(cell.mean - base.mean) < EQUAL_TOLERANCE:
            return "equal"
        if cell.mean < base.mean:
            return "worse"
        return "best" if column in self.best_column(benchmark, metric, model) else "better"


def build_table1(frame) -> Table1:
    """Group the long data into Table 1: benchmarks and models in order of first appearance, G descending."""
    benchmarks = list(dict.fromkeys(frame["benchmark"]))
    models = list(dict.fromkeys(frame["model"]))
    metrics = sorted(set(frame["metric"]), key=lambda m: int(PASS_AT_K_KEY.match(m).group(1)))
    sizes = {b: int(frame.loc[frame["benchmark"] == b, "n_problems"].max()) for b in benchmarks}
    columns, cells = {}, {}
    for model in models:
        sub = frame[frame["model"] == model]
        Gs = sorted({int(g) for g in sub["G"].dropna()}, reverse=True)
        has_base = bool((sub["variant"] == "base").any())
        columns[model] = (["Base"] if has_base else []) + [f"G={g}" for g in Gs]
        for (benchmark, metric), group in sub.groupby(["benchmark", "metric"], sort=False):
            base = group[group["variant"] == "base"]
            if len(base):
                cells[(benchmark, metric, model, "Base")] = summarize(base["value"].tolist())
            for g in Gs:
                trained = group[group["G"] == g]
                if len(trained):
                    cells[(benchmark, metric, model, f"G={g}")] = summarize(trained["value"].tolist())
    return Table1(benchmarks, sizes, metrics, models, columns, cells)


def _number(cell: Cell, with_sd: bool) -> str:
    if not with_sd:
        return f"{cell.mean:.2f}"
    sd = "n/a" if math.isnan(cell.sd) else f"{cell.sd:.2f}"
    return f"{cell.mean:.2f} ± {sd}"


def _markdown_cell(table: Table1, benchmark: str, metric: str, model: str, column: str) -> str:
    cell = table.cells.get((benchmark, metric, model, column))
    if cell is None:
        return "–"
    if column == "Base":
        return _number(cell, with_sd=False)
    text = _number(cell, with_sd=True)
    base = table.base(benchmark, metric, model)
    if base is not None:
        delta = cell.mean - base.mean
        text += f" ({delta:+.2f})" if abs(delta) >= 0.005 else " (=)"
    if column in table.best_column(benchmark, metric, model):
        text = f"**{text}**"
    return text


def table1_markdown(table: Table1) -> str:
    """Markdown view: a ``(+x)``/``(-x)`` change of the mean vs base per trained cell, bold for the best G per model."""
    header = ["Benchmark", "Metric"] + [f"{m} {c}" for m in table.models for c in table.columns[m]]
    rows = [[f"{benchmark} ({table.sizes[benchmark]})" if i == 0 else "", metric]
            + [_markdown_cell(table, benchmark, metric, m, c) for m in table.models for c in table.columns[m]]
            for benchmark in table.benchmarks for i, metric in enumerate(table.metrics)]
    lines = [markdown_table(header, rows, align=["l", "l"] + ["r"] * (len(header) - 2)).rstrip("\n")]
    lines += ["", "pass@k in %; trained columns: mean ± s.d. over seeds (sample s.d.; n/a with one seed). "
              "(+x)/(-x): change of the mean vs the model's base; bold: the best G of a model where it beats base."]
    return "\n".join(lines) + "\n"


def _latex_cell(table: Table1, benchmark: str, metric: str, model: str, column: str) -> str:
    cell = table.cells.get((benchmark, metric, model, column))
    if cell is None:
        return "--"
    if column == "Base":
        return f"{cell.mean:.2f}"
    sd = "n/a" if math.isnan(cell.sd) else f"{cell.sd:.2f}"
    text = f"{cell.mean:.2f}$\\pm${sd}"
    mark = table.mark(benchmark, metric, model, column)
    if mark == "best":
        return f"{_GREEN}{{\\textbf{{{text}}}}}"
    if mark == "better":
        return f"{_GREEN}{{{text}}}"
    if mark == "worse":
        return f"{_RED}{{{text}}}"
    return text


def table1_latex(table: Table1) -> str:
    """LaTeX view as in the paper: green = better than base, bold green = best per model, red = worse
    (needs ``\\usepackage{booktabs,xcolor}``)."""
    spec = "ll" + "".join("|" + "r" * len(table.columns[m]) for m in table.models)
    group = " & ".join(f"\\multicolumn{{{len(table.columns[m])}}}{{c}}{{{latex_escape(m)}}}" for m in table.models)
    rules, start = [], 3
    for m in table.models:
        end = start + len(table.columns[m]) - 1
        rules.append(f"\\cmidrule(lr){{{start}-{end}}}")
        start = end + 1
    header = " & ".join(["Benchmark", "Metric"] + [latex_escape(c) for m in table.models for c in table.columns[m]])
    lines = [
        "% Table 1 (Section 5.7); needs \\usepackage{booktabs,xcolor}",
        r"\begin{table}[t]", r"\centering", r"\scriptsize", f"\\begin{{tabular}}{{{spec}}}", r"\toprule",
        f" & & {group} \\\\", "".join(rules), f"{header} \\\\", r"\midrule",
    ]
    for b_i, benchmark in enumerate(table.benchmarks):
        for i, metric in enumerate(table.metrics):
            label = f"{latex_escape(benchmark)} ({table.sizes[benchmark]})" if i == 0 else ""
            cells = [_latex_cell(table, benchmark, metric, m, c) for m in table.models for c in table.columns[m]]
            lines.append(" & ".join([label, latex_escape(metric)] + cells) + r" \\")
        if b_i < len(table.benchmarks) - 1:
            lines.append(r"\midrule")
    lines += [
        r"\bottomrule", r"\end{tabular}",
        r"\caption{Out-of-distribution evaluation using pass@$k$ (\%): base model, and mean $\pm$ s.d. over seeds "
        r"for each group size $G$. Green: better than base; bold green: best configuration per model; red: worse "
        r"than base.}",
        r"\label{tab:ood}", r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


TABLE1_NOTE = ("pass@k in %. Base: the untrained model; G = 16, G = 4: mean ± s.d. over seeds (sample s.d.; n/a with "
               "one seed). Green: better than the model's base; bold green: the model's best configuration; red: worse "
               "than base.")


def table1_html(table: Table1, title: str = "Table 1: out-of-distribution evaluation, pass@k (%)") -> str:
    """HTML view as in the paper: per model a Base | G=16 | G=4 group, green/bold green/red against the base, a rule
    between benchmarks; a standalone page (the Snakemake report shows it)."""
    header = ["Benchmark", "Metric"] + [c for m in table.models for c in table.columns[m]]
    groups = [("", 2)] + [(m, len(table.columns[m])) for m in table.models]
    rows, styles = [], {}
    for benchmark in table.benchmarks:
        for i, metric in enumerate(table.metrics):
            r = len(rows)
            row = [f"{benchmark} ({table.sizes[benchmark]})" if i == 0 else "", metric]
            j = 2
            for m in table.models:
                for c in table.columns[m]:
                    cell = table.cells.get((benchmark, metric, m, c))
                    row.append("–" if cell is None else _number(cell, with_sd=c != "Base"))
                    css = HTML_STYLES.get(table.mark(benchmark, metric, m, c))
                    if css:
                        styles[(r, j)] = css
                    j += 1
            if i == 0 and r:
                for col in range(len(row)):
                    extra = f";{styles[(r, col)]}" if (r, col) in styles else ""
                    styles[(r, col)] = "border-top:1px solid #ccc" + extra
            rows.append(row)
    return html_page(title, html_table(header, rows, styles=styles, header_rows=2, extra_header=groups,
                                       notes=TABLE1_NOTE))


SUMMARY_COLUMNS = ["benchmark", "n_problems", "metric", "model", "column", "mean", "sd", "n", "base", "delta", "mark"]


def table1_summary(table: Table1):
    """Every cell of Table 1 as a row (percent): benchmark, n_problems, metric, model, column (Base, G=16, ...), mean,
    sd (NaN with one seed), n (seeds), the model's base mean, delta = mean - base, and the cell's mark."""
    import pandas as pd

    rows = []
    for benchmark in table.benchmarks:
        for metric in table.metrics:
            for m in table.models:
                base = table.base(benchmark, metric, m)
                for c in table.columns[m]:
                    cell = table.cells.get((benchmark, metric, m, c))
                    if cell is None:
                        continue
                    rows.append({"benchmark": benchmark, "n_problems": table.sizes[benchmark], "metric": metric,
                                 "model": m, "column": c, "mean": cell.mean, "sd": cell.sd, "n": cell.n,
                                 "base": base.mean if base else float("nan"),
                                 "delta": cell.mean - base.mean if base else float("nan"),
                                 "mark": table.mark(benchmark, metric, m, c)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
