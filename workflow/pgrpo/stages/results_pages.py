"""The results pages of a run (``results.md`` "The paper, reproduced", ``benchmarks.md``) and the figures they show,
written beside the facts (rule readme_numbers: ``results/readme/``; ``pgrpo readme update``: ``docs/``).

:func:`reproducibility_facts` says of each section of the facts how far a rerun reproduces it (deterministic:
sympy, the exact bandit's numpy maps, seeded numpy draws -- bitwise on one machine and across machines up to BLAS;
seeded torch: CPU training and sampling -- bitwise on one machine with the same seeds and threads, another draw on
another CPU or thread count; wall clock: the job times). :func:`headline_facts` picks the summary's headline numbers
with their spread (the s.d. across the run's seeds, or for an accuracy sampled over N problems the binomial standard
error sqrt(p (1 - p) / N)); :func:`train_rise_facts` the seed spread of the training reward's rise.
:func:`figure_facts` names and hashes the figures; :func:`write_pages` writes the pages
(:mod:`pgrpo.tables.results_pages`) and copies the figures; :func:`pages_errors` says where pages or figures are not
those of the facts.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

from pgrpo.atomic import atomic_dir, write_json, write_text
from pgrpo.errors import InputError
from pgrpo.tables.readme import first_difference
from pgrpo.tables.render import finite_number
from pgrpo.tables.results_pages import PAGES

DETERMINISTIC = "deterministic"
SEEDED_TORCH = "seeded torch"
WALL_CLOCK = "wall clock"

#: what computes each section of the facts, and so how far a rerun reproduces it
SECTION_KINDS: dict[str, tuple[str, str]] = {
    "symbolic": (DETERMINISTIC, "sympy"),
    "bandit": (DETERMINISTIC, "the exact bandit's numpy maps"),
    "finite_g": (DETERMINISTIC, "the finite-G bandit's seeded numpy draws"),
    "models": (SEEDED_TORCH, "torch CPU warm start and sampling"),
    "train": (SEEDED_TORCH, "torch CPU GRPO training"),
    "table1": (SEEDED_TORCH, "torch CPU sampling of the base and trained models"),
    "fits": (SEEDED_TORCH, "scipy fits to the torch training curves"),
    "diagnostics": (SEEDED_TORCH, "read from the torch training curves"),
    "kref_sweep": (SEEDED_TORCH, "torch CPU training runs"),
    "forecast": (DETERMINISTIC, "scipy forecasts of the bandit curves and the public logs"),  # + forecast_workflow
    "diagnose_benchmark": (DETERMINISTIC, "the rules on the seeded planted logs and the public logs"),
    "timings": (WALL_CLOCK, "Snakemake's benchmark files"),
    "costs": (WALL_CLOCK, "the run's cost table (rule job_costs)"),
}
#: the forecast benchmark's part made from this run's torch training logs (and "overall" holds its curves)
TORCH_FORECAST_PART = "workflow"

#: verdict words in the order the summary counts them (others follow in order of appearance)
VERDICT_ORDER = ("reproduced", "partly", "not")
#: the forecast benchmark cell of the headline, first found (a split the forecaster was not tuned on)
FORECAST_HEADLINE_CELLS = (("real", "holdout"), ("overall", "holdout"), ("overall", "all"))
#: the diagnose benchmark split of the headline, first found
DIAGNOSE_HEADLINE_SPLITS = ("holdout", "dev", "planted")
#: the figures named after their folder (their own name says nothing)
GENERIC_FIGURE_NAMES = ("figure.png", "benchmark.png")
FACTS_NAME = "numbers.json"


def forecast_kind(part: str, parts: Sequence[str]) -> str:
    """A forecast benchmark part's kind: seeded torch where it holds curves of this run's training."""
    torch = part == TORCH_FORECAST_PART or (part == "overall" and TORCH_FORECAST_PART in parts)
    return SEEDED_TORCH if torch else DETERMINISTIC


def reproducibility_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Per section present in ``facts``: its kind and what computes it; the forecast benchmark per part, and its
    parts made from this run's curves as ``forecast_workflow``."""
    out: dict[str, Any] = {}
    for section, (kind, by) in SECTION_KINDS.items():
        if not facts.get(section):
            continue
        out[section] = {"kind": kind, "by": by}
        if section == "forecast":
            parts = [c["part"] for c in facts["forecast"]]
            out["forecast"]["parts"] = {part: forecast_kind(part, parts) for part in parts}
            torch = [part for part, kind in out["forecast"]["parts"].items() if kind == SEEDED_TORCH]
            if torch:
                out["forecast_workflow"] = {"kind": SEEDED_TORCH, "parts": torch,
                                            "by": "scipy forecasts of this run's torch training curves"}
    return out


def binomial_se(p: float, n: int) -> float:
    """The standard error of an accuracy ``p`` sampled over ``n`` problems: sqrt(p (1 - p) / n)."""
    return math.sqrt(p * (1 - p) / n)


def seed_spread(values: Sequence[float]) -> tuple[float, float | None, int]:
    """Mean, s.d. across seeds (n - 1 in the denominator; None for one seed) and n."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return mean, sd, n


def _value(label: str, value: Any, spread: float | None = None, spread_kind: str | None = None,
           n: int | None = None, of: int | None = None, **extra: Any) -> dict[str, Any]:
    """One number of a headline with its spread (``seed_sd``: across n seeds; ``binomial_se``: over n problems)."""
    return {"label": label, "value": value, "spread": spread, "spread_kind": spread_kind, "n": n, "of": of, **extra}


def _counts(words: Sequence[str]) -> list[dict[str, Any]]:
    found = list(dict.fromkeys(words))
    order = [w for w in VERDICT_ORDER if w in found] + [w for w in found if w not in VERDICT_ORDER]
    return [_value(w, sum(1 for x in words if x == w), of=len(words)) for w in order]


def _percent_se(percent: float, n: int) -> float | None:
    return 100 * binomial_se(percent / 100, n) if finite_number(percent) and 0 <= percent <= 100 and n else None


def _table1_headline(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Table 1's first benchmark and metric (the nearest to the training data): base with its binomial s.e., each
    trained column with its s.d. across seeds (the binomial s.e. of one evaluation beside it)."""
    first = cells[0]
    values = []
    for c in cells:
        if (c["benchmark"], c["metric"], c["model"]) != (first["benchmark"], first["metric"], first["model"]):
            continue
        sampling = _percent_se(c["mean"], c["n_problems"])
        if c["n"] > 1 and finite_number(c.get("sd")):
            values.append(_value(c["column"], c["mean"], c["sd"], "seed_sd", c["n"], sampling_se=sampling))
        else:
            values.append(_value(c["column"], c["mean"], sampling, "binomial_se", c["n_problems"]))
    return {"id": "table1", "benchmark": first["benchmark"], "metric": first["metric"], "model": first["model"],
            "values": values}


def _fit_headline(fits: Sequence[Mapping[str, Any]], train: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    columns = list(dict.fromkeys(f["column"] for f in fits))
    column = "reward" if "reward" in columns else columns[0]
    model = fits[0]["model"]
    seeds = {G: len({r["seed"] for r in train if r["model"] == model and r["G"] == G}) for G in {f["G"] for f in fits}}
    values = [_value(f"G={f['G']}", f.get("r2"), n=seeds.get(f["G"]) or None,
                     ceiling=(f.get("ceiling") or {}).get("r2_ceiling"))
              for f in fits if f["column"] == column and f["model"] == model]
    return {"id": "fit", "model": model, "column": column, "values": values}


def _forecast_headline(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    by = {(c["part"], c["split"]): c for c in cells}
    cell = next((by[k] for k in FORECAST_HEADLINE_CELLS if k in by), cells[0])
    kind = forecast_kind(cell["part"], [c["part"] for c in cells])
    return {"id": "forecast", "part": cell["part"], "split": cell["split"], "fraction": cell.get("fraction"),
            "kind": kind, "values": [_value("forecaster / persistence", cell["rmse_ratio"], n=cell["curves"])]}


def _diagnose_headline(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    totals = {(r["split"], r["rule_set"]): r for r in records if r["mode"] == "all"}
    split = next((s for s in DIAGNOSE_HEADLINE_SPLITS if any(k[0] == s for k in totals)), None)
    if split is None:
        return None
    values = [_value(rule_set, r["tp"], of=r["tp"] + r["fn"], false_flags=r["fp"])
              for (s, rule_set), r in totals.items() if s == split]
    return {"id": "diagnose_benchmark", "split": split, "values": values}


def _timing_headline(timings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    longest = max(timings, key=lambda t: t["total_s"])
    return {"id": "job_time", "values": [_value("in all", sum(t["total_s"] for t in timings),
                                                of=sum(t["jobs"] for t in timings))],
            "longest": {k: longest[k] for k in ("stage", "jobs", "min_s", "max_s", "total_s")}}


def _cost_headline(costs: Mapping[str, Any]) -> dict[str, Any]:
    """The main job's time from its own cost table: elapsed on its cores, job-seconds, the critical path, and the
    least wall-clock a whole run on those cores can take (the table's ``wall_lower_bound_seconds``)."""
    return {"id": "main_job", "values": [_value("elapsed", costs.get("elapsed_seconds")),
                                         _value("job-seconds", costs["job_seconds"], of=costs["jobs"]),
                                         _value("critical path", costs["critical_path_seconds"],
                                                of=costs["critical_path_jobs"])],
            "cores": costs["cores"], "wall_lower_bound": costs["wall_lower_bound_seconds"],
            "jobs_run": costs.get("jobs_run"),
            "costliest": (costs.get("rules") or [None])[0]}


def headline_facts(facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The summary's rows, in order, each present where its section is: ``id``, what it is about, ``values`` (each
    ``label``, ``value``, ``spread``, ``spread_kind``, ``n``, ``of``) and ``kind`` (how far a rerun reproduces it)."""
    rows: list[dict[str, Any]] = []
    kinds = {s: k for s, (k, _) in SECTION_KINDS.items()}
    s = facts.get("symbolic")
    if s:
        rows.append({"id": "symbolic", "kind": DETERMINISTIC, "values": [
            _value("PASS", s["n_pass"], of=s["n_claims"]), _value("FAIL", s["n_fail"], of=s["n_claims"])]})
    b = facts.get("bandit")
    if b:
        rows.append({"id": "bandit", "kind": DETERMINISTIC, "values": [_value("K", b.get("K"))],
                     "verdicts": _counts([v["verdict"] for v in b.get("verdicts") or []])})
    models = [m for m in facts.get("models") or [] if finite_number(m.get("sampled")) and m.get("n")]
    if models:
        m = models[0]
        rows.append({"id": "warm_start", "kind": kinds["models"], "model": m["name"], "temperature": m["temperature"],
                     "values": [_value("sampled", 100 * m["sampled"], 100 * binomial_se(m["sampled"], m["n"]),
                                       "binomial_se", m["n"])]})
    if facts.get("table1"):
        rows.append({"kind": kinds["table1"], **_table1_headline(facts["table1"])})
    if facts.get("fits"):
        rows.append({"kind": kinds["fits"], **_fit_headline(facts["fits"], facts.get("train") or [])})
    if facts.get("diagnostics"):
        rows.append({"id": "diagnostics", "kind": kinds["diagnostics"],
                     "values": _counts([d["verdict"] for d in facts["diagnostics"]])})
    if facts.get("forecast"):
        rows.append(_forecast_headline(facts["forecast"]))
    if facts.get("diagnose_benchmark") and (row := _diagnose_headline(facts["diagnose_benchmark"])):
        rows.append({"kind": kinds["diagnose_benchmark"], **row})
    if facts.get("costs"):  # the run's own cost table (every job), else the stages' benchmark files
        rows.append({"kind": WALL_CLOCK, **_cost_headline(facts["costs"])})
    elif facts.get("timings"):
        rows.append({"kind": WALL_CLOCK, **_timing_headline(facts["timings"])})
    return rows


def train_rise_facts(train: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, G): the mean rise of the train reward across its seeds, its s.d. across seeds and n."""
    groups: dict[tuple[str, int], list[float]] = {}
    for r in train:
        if finite_number(r.get("rise")):
            groups.setdefault((r["model"], int(r["G"])), []).append(float(r["rise"]))
    out = []
    for (model, G), rises in sorted(groups.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
        mean, sd, n = seed_spread(rises)
        out.append({"model": model, "G": G, "mean": mean, "sd": sd, "n": n})
    return out


def figure_name(source: str) -> str:
    """The name of a figure's copy: its own name, or ``{folder}_{name}`` where its own name is generic."""
    path = Path(source)
    return f"{path.parent.name}_{path.name}" if path.name in GENERIC_FIGURE_NAMES else path.name


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def figure_facts(sources: Sequence[str], missing: list[str]) -> list[dict[str, Any]]:
    """Each figure that exists: the name of its copy, its source and the SHA-256 of its bytes; a missing one is named
    under ``missing``; two sources of one name are an InputError."""
    out, names = [], {}
    for source in sources:
        name = figure_name(source)
        if name in names:
            raise InputError(f"figures {names[name]} and {source} would both be copied as {name}")
        names[name] = source
        path = Path(source)
        if not path.is_file():
            missing.append(f"figure {source} (no such file)")
            continue
        out.append({"name": name, "source": Path(source).as_posix(), "sha256": _sha256(path)})
    return out


def write_figures(figures: Sequence[Mapping[str, Any]], folder: str, sources: Mapping[str, str] | None = None,
                  facts: Mapping[str, Any] | None = None) -> None:
    """Replace ``folder`` by the figures (copied from ``sources[name]``, else from their recorded source), and by the
    facts as ``numbers.json`` if given. A copy whose bytes are not the recorded ones is an InputError."""
    with atomic_dir(folder) as tmp:
        for figure in figures:
            source = Path((sources or {}).get(figure["name"], figure["source"]))
            if not source.is_file():
                raise InputError(f"figure {figure['name']}: {source}: no such file")
            shutil.copyfile(source, tmp / figure["name"])
            if _sha256(tmp / figure["name"]) != figure["sha256"]:
                raise InputError(f"figure {figure['name']}: {source} is not the figure the facts were read with "
                                 "(its bytes changed since)")
        if facts is not None:
            write_json(tmp / FACTS_NAME, facts)


def page_texts(facts: Mapping[str, Any], pages: Mapping[str, str], figures: str) -> dict[str, str]:
    """Each page's path (``pages``: ``results`` and ``benchmarks``) -> its text for ``facts``, with the figures of
    the folder ``figures`` linked relative to the page."""
    return {path: PAGES[name](facts, Path(os.path.relpath(figures, Path(path).parent)).as_posix())
            for name, path in pages.items()}


def write_pages(facts: Mapping[str, Any], pages: Mapping[str, str], figures: str,
                sources: Mapping[str, str] | None = None, with_facts: bool = False) -> None:
    """The pages (``pages``: ``results`` and ``benchmarks`` -> path), the figures into the folder ``figures`` (from
    ``sources``, name -> path, or from where the facts read them), the facts beside them if ``with_facts``."""
    write_figures(facts.get("figures") or [], figures, sources, facts if with_facts else None)
    for path, text in page_texts(facts, pages, figures).items():
        write_text(path, text)


def pages_errors(facts: Mapping[str, Any], pages: Mapping[str, str], figures: str) -> list[str]:
    """Where a page is not the generator's text for ``facts``, or a figure in the folder ``figures`` is missing or
    not the one the facts record."""
    errors = []
    for path, text in page_texts(facts, pages, figures).items():
        page = Path(path)
        if not page.is_file():
            errors.append(f"{page}: no such file; run `pgrpo readme update`")
        elif page.read_text() != text:
            errors.append(f"{page} is not the generator's text for the facts: "
                          f"{first_difference(page.read_text(), text)}")
    for figure in facts.get("figures") or []:
        path = Path(figures) / figure["name"]
        if not path.is_file():
            errors.append(f"{path}: no such file (a figure of the facts)")
        elif _sha256(path) != figure["sha256"]:
            errors.append(f"{path} is not the figure of the facts (its SHA-256 differs)")
    return errors
