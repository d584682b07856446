"""The README's results block ("What the embedded default shows"): every number the README quotes about a run, as
Markdown rendered from the *facts* a run's results hold (symbolic PASS/FAIL counts, the bandit's measured p* and
K with its verdicts, the warm start, each run's train-reward rise, Table 1, the three-phase fits of Section 4.4 /
Figure 1, the diagnostics of Figures 2-5, the forecast and the diagnose benchmarks, job times), between the markers
``<!-- results:begin -->`` and ``<!-- results:end -->``.

The block carries its facts as JSON in a comment, so that it cannot drift: :func:`block_errors` re-renders the
facts and the block must be exactly that text (a hand-edited number fails), and ``pgrpo readme check`` compares the
facts with those of a results folder (a stale block fails). :func:`render_block` is pure: facts in, text out.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from pgrpo.tables.diagnose_benchmark import summary_table
from pgrpo.tables.forecast_benchmark import TARGET_FRACTION, TARGET_PERSISTENCE
from pgrpo.tables.render import finite_number, markdown_table

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
FACTS_PREFIX = "<!-- results:facts "
FACTS_SUFFIX = " -->"
GENERATED_NOTE = ("<!-- generated from results/ by `pgrpo readme update` (rule readme_numbers writes "
                  "results/readme/summary.md): edit pgrpo/tables/readme.py, not this block -->")
NO_RESULTS = ("No results yet: run `make run`, then `pgrpo readme update README.md results/readme/summary.md` "
              "writes this block from them.")

#: the sections of a block, in order (each optional: a run without it leaves its line out)
SECTIONS = ("symbolic", "bandit", "models", "train", "table1", "fits", "diagnostics", "forecast",
            "diagnose_benchmark", "timings", "missing")


def _f(x: Any, spec: str) -> str:
    """A number by ``spec``, or ``n/a`` when it is missing or not finite."""
    return format(float(x), spec) if finite_number(x) else "n/a"


def _one_line(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip()


def _cell(text: Any) -> str:
    return _one_line(text).replace("|", "\\|")


def _indented(table: str) -> list[str]:
    """A Markdown table's lines indented under a list item."""
    return ["  " + t for t in table.rstrip("\n").split("\n")]


def _symbolic(s: Mapping[str, Any]) -> list[str]:
    lines = [f"- **Symbolic verification** (Appendix A, `results/symbolic/verification.md`): {s['n_claims']} claims, "
             f"{s['n_pass']} PASS, {s['n_fail']} FAIL."]
    for fail in s.get("fails") or []:
        why = _one_line(fail.get("counterexample") or fail.get("detail") or "no counterexample recorded")
        lines.append(f"  - FAIL *{_one_line(fail['title'])}* (`{fail['id']}`): {why}")
    return lines


def _bandit(b: Mapping[str, Any]) -> list[str]:
    rewards = ", ".join(_f(r, "g") for r in b.get("rewards") or [])
    window = b.get("window") or [None, None]
    line = (f"- **Softmax bandit** (Section 5.6, `results/bandit/verdict.md`): rewards `[{rewards}]`, beta = "
            f"{_f(b.get('beta'), 'g')}: measured p\\* = {_f(b.get('p_star'), '.3f')} and K = {_f(b.get('K'), '.3f')} "
            f"(window [{_f(window[0], 'g')}, {_f(window[1], 'g')}] of the relaxation")
    spread = b.get("K_windows")
    if spread:
        line += f"; K from {_f(spread[0], '.3f')} to {_f(spread[1], '.3f')} across the windows of `verdict.md`"
    lines = [line + ")."]
    verdicts = b.get("verdicts") or []
    if verdicts:
        claims = list(dict.fromkeys(v["claim"] for v in verdicts))
        readings = list(dict.fromkeys(v["reading"] for v in verdicts))
        by = {(v["claim"], v["reading"]): v["verdict"] for v in verdicts}
        rows = [[_cell(c)] + [_cell(by.get((c, r), "–")) for r in readings] for c in claims]
        table = markdown_table(["claim"] + [_cell(r) for r in readings], rows)
        lines += ["", "  Verdicts per reading (refresh/gradient):", ""]
        lines += _indented(table) + [""]
    return lines


def _models(models: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for m in models:
        params = _f(m["parameters"] / 1e6, ".2f") + "M" if finite_number(m.get("parameters")) else "n/a"
        lines.append(f"- **Model `{m['name']}`** (`results/model/{m['name']}/warmstart.json`): {params} parameters; "
                     f"after the warm start {_f(100 * m['sampled'] if finite_number(m.get('sampled')) else None, '.1f')}% "
                     f"held-out accuracy sampled at T = {_f(m.get('temperature'), 'g')}, "
                     f"{_f(100 * m['greedy'] if finite_number(m.get('greedy')) else None, '.1f')}% greedy "
                     f"({m.get('n', 'n/a')} problems).")
    return lines


def _train(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["- **GRPO training reward** (`results/train/`): the mean over the last tenth of each run's steps "
             "against the first tenth:"]
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["model"], int(r["G"])), []).append(r)
    for (model, G), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        parts = [f"seed {r['seed']} {_f(r['first'], '.3f')} -> {_f(r['last'], '.3f')} ({_f(r['rise'], '+.3f')})"
                 for r in sorted(rs, key=lambda r: r["seed"])]
        steps = sorted({int(r["steps"]) for r in rs})
        lines.append(f"  - `{model}` G={G} ({'/'.join(map(str, steps))} steps): " + "; ".join(parts))
    return lines


def _table1(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    models = list(dict.fromkeys(c["model"] for c in cells))
    columns = {m: list(dict.fromkeys(c["column"] for c in cells if c["model"] == m)) for m in models}
    benchmarks = list(dict.fromkeys(c["benchmark"] for c in cells))
    metrics = list(dict.fromkeys(c["metric"] for c in cells))
    by = {(c["benchmark"], c["metric"], c["model"], c["column"]): c for c in cells}
    sizes = {c["benchmark"]: c["n_problems"] for c in cells}
    multi = len(models) > 1
    header = ["benchmark", "metric"] + [f"{m} {col}" if multi else col for m in models for col in columns[m]]
    rows = []
    for b in benchmarks:
        for i, metric in enumerate(metrics):
            row = [f"{_cell(b)} ({sizes[b]})" if i == 0 else "", metric]
            for m in models:
                for col in columns[m]:
                    c = by.get((b, metric, m, col))
                    if c is None:
                        row.append("–")
                    elif col == "Base":
                        row.append(_f(c["mean"], ".2f"))
                    else:
                        text = f"{_f(c['mean'], '.2f')} ± {_f(c['sd'], '.2f')}"
                        row.append(f"**{text}**" if c.get("mark") == "best" else text)
            rows.append(row)
    table = markdown_table(header, rows, align=["l", "l"] + ["r"] * (len(header) - 2))
    lines = ["- **Table 1** (`results/tables/table1.html`): pass@k in %, benchmarks in increasing distance from the "
             "training data; trained columns: mean ± s.d. over seeds, bold: the model's best where it beats base.", ""]
    return lines + _indented(table) + [""]


def _fits(fits: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["- **Three-phase fit** (Section 4.4, Figure 1; `results/fit/{model}/fits.md`), R^2 against the seed "
             "mean:"]
    for f in fits:
        line = (f"  - `{f['model']}` {f['column']} G={f['G']}: {f['n_points']} points, three-phase R^2 = "
                f"{_f(f.get('r2'), '.2f')}")
        ceiling = f.get("ceiling")
        if ceiling:
            line += (f" (binomial noise alone caps R^2 at {_f(ceiling.get('r2_ceiling'), '.2f')}: "
                     f"{ceiling.get('completions_per_step')} completions per step, {_f(ceiling.get('n_seeds'), 'g')} "
                     f"seeds, noise s.d. {_f(ceiling.get('noise_sd'), '.3f')} against a rise of "
                     f"{_f(ceiling.get('rise'), '.3f')})")
        summary = _one_line(f.get("summary"))
        lines.append(line + (f". {summary}" if summary else "."))
    return lines


def _diagnostics(diagnostics: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["- **Diagnostics** (Figures 2-5, `results/diagnostics/verdicts.md`):"]
    for d in diagnostics:
        who = f"`{d['model']}`" + (f", G={d['G']}" if d.get("G") is not None else ", across G")
        reason = _one_line(d.get("reason"))
        lines.append(f"  - {str(d['diagnostic']).replace('_', ' ')} ({who}): **{_one_line(d['verdict'])}**"
                     + (f": {reason}" if reason else ""))
    return lines


def _forecast(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    fraction = cells[0].get("fraction", TARGET_FRACTION) if cells else TARGET_FRACTION
    header = ["part", "split", "curves", "forecaster / persistence", "noise floor", "best baseline (its ratio)",
              "forecaster / best baseline", "80% covers", "95% covers", "oracle: the tail's own mean",
              "oracle: a cubic fitted to the tail",
              "CRPS / persistence", "plateau error: forecaster · persistence · best baseline"]
    rows = []
    for c in cells:
        best = c.get("best_baseline")
        best_text = "persistence" if best == "persistence" else f"{best} ({_f(c.get('best_baseline_ratio'), '.3f')})"
        ratio = _f(c.get("rmse_ratio"), ".3f")
        met = finite_number(c.get("rmse_ratio")) and c["rmse_ratio"] <= TARGET_PERSISTENCE
        rows.append([c["part"] + (" (parts equal)" if c["part"] == "overall" else ""), c["split"], str(c["curves"]),
                     f"**{ratio}**" if met else ratio, _f(c.get("noise_floor_ratio"), ".3f"), best_text,
                     _f(c.get("ratio_to_best_baseline"), ".3f"), _pct0(c.get("coverage80")),
                     _pct0(c.get("coverage95")), _f(c.get("oracle_ratio"), ".3f"),
                     _f(c.get("hindsight_ratio"), ".3f"), _f(c.get("crps_ratio"), ".3f"),
                     " · ".join(_f(c.get(k), ".2f") for k in ("plateau_error", "persistence_plateau_error",
                                                              "best_baseline_plateau_error"))])
    table = markdown_table(header, rows, align=["l", "l"] + ["r"] * (len(header) - 2))
    lines = [f"- **Forecast benchmark** (`results/forecast/benchmark.md`): cut at f = {_f(fraction, 'g')} of each "
             f"curve's steps, median held-out RMSE over persistence's (bold: at or below {TARGET_PERSISTENCE}), the "
             "noise floor (the held-out values' own noise s.d. over persistence's RMSE: no forecast's expected RMSE "
             "is below it), the best baseline of the cell, the mean coverage of the forecaster's intervals, two "
             "oracles that see the held-out values (their own mean, and a cubic in the step least-squares fitted to "
             "them: the best smooth curve through the answer), the forecaster's CRPS "
             "(the whole predictive distribution) over persistence's, and the median error of the forecast plateau "
             "(the mean of the run's last 10%) in units of the early window's noise s.d.:", ""]
    return lines + _indented(table) + [""]


def _diagnose_benchmark(records: Sequence[Mapping[str, Any]]) -> list[str]:
    logs = {r["split"]: r["logs"] for r in records if r["mode"] == "all"}
    table = summary_table(records)
    lines = ["- **Diagnose benchmark** (`results/diagnose_benchmark/table.md`, per log and mode in `table.csv`): "
             "`pgrpo diagnose` with our rules and with the post-training toolkit's, on "
             + ", ".join(f"{n} {split} logs" for split, n in logs.items())
             + " (labelled ones per mode); per mode found/labelled yes · false flags (n/a: no rule for the mode); "
             "onset within max(10% of the step span, 2 logging intervals) of the label:", ""]
    return lines + _indented(table) + [""]


def _pct0(x: Any) -> str:
    return f"{100 * x:.0f}%" if finite_number(x) else "n/a"


def _timings(timings: Sequence[Mapping[str, Any]]) -> list[str]:
    parts = []
    for t in timings:
        span = (_f(t["min_s"], ".0f") if t["jobs"] == 1 or _f(t["min_s"], ".0f") == _f(t["max_s"], ".0f")
                else f"{_f(t['min_s'], '.0f')}-{_f(t['max_s'], '.0f')}")
        parts.append(f"{t['stage']} {t['jobs']} x {span} s ({_f(t['total_s'], '.0f')} s in all)")
    return ["- **Job times** (`results/benchmarks/`, wall-clock seconds per job): " + "; ".join(parts) + "."]


def _missing(missing: Sequence[str]) -> list[str]:
    return ["- Not in the results (left out above): " + "; ".join(_one_line(m) for m in missing) + "."]


#: each section's renderer (facts of that section -> Markdown lines)
RENDERERS = {"symbolic": _symbolic, "bandit": _bandit, "models": _models, "train": _train, "table1": _table1,
             "fits": _fits, "diagnostics": _diagnostics, "forecast": _forecast,
             "diagnose_benchmark": _diagnose_benchmark, "timings": _timings, "missing": _missing}


def render_sections(facts: Mapping[str, Any]) -> list[str]:
    """The block's Markdown lines (without markers) from ``facts``; sections in :data:`SECTIONS` order, each left
    out where its facts are empty."""
    lines: list[str] = []
    for section in SECTIONS:
        if facts.get(section):
            lines += RENDERERS[section](facts[section])
    while lines and lines[-1] == "":
        lines.pop()
    return lines or [NO_RESULTS]


def facts_comment(facts: Mapping[str, Any]) -> str:
    """The facts as one JSON line inside an HTML comment (``>`` and ``--`` escaped, so the comment cannot end early)."""
    text = json.dumps(facts, sort_keys=True, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return FACTS_PREFIX + text.replace(">", "\\u003e").replace("--", "-\\u002d") + FACTS_SUFFIX


def render_block(facts: Mapping[str, Any]) -> str:
    """The whole block, markers included: the generated note, the Markdown, the facts comment."""
    return "\n".join([BEGIN, GENERATED_NOTE, "", *render_sections(facts), "", facts_comment(facts), END]) + "\n"


def find_block(text: str) -> tuple[int, int]:
    """Start and end offsets of the one block in ``text`` (the end marker's line included); ValueError otherwise."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"expected exactly one {BEGIN} and one {END}, found {text.count(BEGIN)} and "
                         f"{text.count(END)}")
    start, end = text.index(BEGIN), text.index(END)
    if end < start:
        raise ValueError(f"{END} comes before {BEGIN}")
    end += len(END)
    if text[end:end + 1] == "\n":
        end += 1
    return start, end


def facts_of_block(block: str) -> dict[str, Any]:
    """The facts a block carries; ValueError if its facts comment is missing or not JSON."""
    found = [line for line in block.splitlines() if line.startswith(FACTS_PREFIX) and line.endswith(FACTS_SUFFIX)]
    if len(found) != 1:
        raise ValueError(f"expected one facts comment ({FACTS_PREFIX}...{FACTS_SUFFIX.strip()}), found {len(found)}")
    try:
        facts = json.loads(found[0][len(FACTS_PREFIX):-len(FACTS_SUFFIX)])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the facts comment is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(facts, dict):
        raise ValueError("the facts comment is not a JSON object")
    return facts


def block_errors(text: str) -> list[str]:
    """What is wrong with the results block of a README's ``text``: markers, facts, and whether the block is exactly
    what :func:`render_block` writes for its facts (the first differing line is named). Empty: the block is sound."""
    try:
        start, end = find_block(text)
        block = text[start:end]
        facts = facts_of_block(block)
        expected = render_block(facts)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return [f"results block: {exc}"]
    if block.rstrip("\n") == expected.rstrip("\n"):
        return []
    got, want = block.rstrip("\n").split("\n"), expected.rstrip("\n").split("\n")
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return [f"results block line {i + 1} is not what the generator writes for the block's facts: "
                    f"{a[:160]!r} (expected {b[:160]!r})"]
    return [f"results block has {len(got)} lines, the generator writes {len(want)} for its facts"]


def replace_block(text: str, block: str) -> str:
    """``text`` with its results block replaced by ``block``."""
    start, end = find_block(text)
    return text[:start] + block + text[end:]
