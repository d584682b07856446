"""Stage: the main job's per-job cost table (issue 24), from the DAG written when the run started and every job's
Snakemake benchmark file (``results/benchmarks/**/*.tsv``, column ``s``: wall-clock seconds).

:func:`write_job_graph` is called by the workflow's ``onstart`` hook (``workflow/rules/costs.smk``) with each job's
rule, benchmark file, inputs and outputs; :func:`run_job_costs` (``pgrpo job-costs``, rule ``job_costs``) reads it
back with the benchmark files and writes the table (:mod:`pgrpo.grpo.job_costs`, :mod:`pgrpo.tables.job_costs`).
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path
from typing import Iterable, Mapping

from pgrpo import atomic
from pgrpo.errors import InputError
from pgrpo.grpo.job_costs import CostTable, Job, RulePattern, cost_table, jobs_added_by_checkpoints

#: rules whose jobs are not counted: the target rule and the table's own
NOT_COUNTED = ("all", "job_costs")


def write_job_graph(jobs: Iterable[Mapping], path: str, cores: int | None = None,
                    started_at: float | None = None, rules: Iterable[Mapping] = ()) -> None:
    """The DAG's jobs (``rule``, ``benchmark``, ``inputs``, ``outputs``, ``needrun``: whether this run executes it)
    as JSON, atomically, with the time the run started (``started_at``, seconds since the epoch; default now), the
    cores it was given and the workflow's ``rules`` (``rule``, ``benchmark`` and ``outputs`` patterns,
    ``checkpoint``), from which :func:`load_jobs` finds the jobs a checkpoint adds once the run is under way."""
    records = [{"rule": str(j["rule"]), "benchmark": str(j["benchmark"]) if j.get("benchmark") else None,
                "inputs": sorted(str(f) for f in j.get("inputs") or ()),
                "outputs": sorted(str(f) for f in j.get("outputs") or ()),
                "needrun": bool(j.get("needrun", True))} for j in jobs]
    patterns = [{"rule": str(r["rule"]), "benchmark": str(r["benchmark"]) if r.get("benchmark") else None,
                 "outputs": [str(f) for f in r.get("outputs") or ()], "checkpoint": bool(r.get("checkpoint"))}
                for r in rules]
    atomic.write_json(path, {"started_at": time.time() if started_at is None else float(started_at),
                             "cores": int(cores) if cores else None,
                             "jobs": sorted(records, key=lambda r: (r["rule"], r["outputs"])),
                             "rules": sorted(patterns, key=lambda r: r["rule"])})


def workflow_cores(workflow) -> int | None:
    """The cores a Snakemake run was given (``--cores``), or None where it has no total (a cluster executor)."""
    try:
        cores = workflow.cores
    except Exception:  # noqa: BLE001 - snakemake raises WorkflowError when no total number of cores is defined
        return None
    return cores if isinstance(cores, int) and cores > 0 else None


def rule_patterns(rules: Iterable) -> list[dict]:
    """Each Snakemake rule's name, benchmark and output patterns (wildcard constraints kept) and whether it is a
    checkpoint, for :func:`write_job_graph`; a pattern Snakemake computes (a function) is left out."""
    out = []
    for rule in rules:
        bench = getattr(rule, "benchmark", None)
        outputs = [str(f) for f in getattr(rule, "output", ()) if not callable(f)]
        out.append({"rule": rule.name, "benchmark": None if bench is None or callable(bench) else str(bench),
                    "outputs": outputs, "checkpoint": bool(getattr(rule, "is_checkpoint", False))})
    return out


def run_started(graph_json: str) -> tuple[float | None, int | None]:
    """When the run that wrote ``graph_json`` started (epoch seconds) and on how many cores (None: not recorded)."""
    data = atomic.read_json(graph_json, "the job graph (written when the run started)")
    started, cores = data.get("started_at"), data.get("cores")
    return (float(started) if isinstance(started, (int, float)) else None,
            int(cores) if isinstance(cores, int) and cores > 0 else None)


def jobs_run(graph_json: str, benchmarks_dir: str, table: CostTable) -> int | None:
    """How many of the table's jobs the run that wrote ``graph_json`` executed itself (None: not recorded): those
    it planned to run, and those a checkpoint added whose benchmark file was written after the run started."""
    data = atomic.read_json(graph_json, "the job graph (written when the run started)")
    records = data.get("jobs") or []
    if not all("needrun" in r for r in records):
        return None
    counted, root = {j.name for j in table.jobs}, Path(benchmarks_dir)
    known = {_job_name(r, root) for r in records}
    started = data.get("started_at")
    added = [root / f"{name}.tsv" for name in counted - known]
    later = sum(1 for p in added if isinstance(started, (int, float)) and p.is_file() and p.stat().st_mtime >= started)
    return sum(1 for r in records if r["needrun"] and _job_name(r, root) in counted) + later


def benchmark_seconds(path: Path) -> float | None:
    """The mean wall-clock seconds (column ``s``) of a benchmark file's repeats; None when it is absent."""
    if not path.is_file():
        return None
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        if "s" not in (reader.fieldnames or []):
            raise InputError(f"benchmark file {path}: no column 's'")
        values = [float(row["s"]) for row in reader if row.get("s") not in (None, "", "NA")]
    return sum(values) / len(values) if values else None


def _job_name(record: Mapping, root: Path) -> str:
    bench = record.get("benchmark")
    if bench:
        try:
            return str(Path(bench).relative_to(root).with_suffix(""))
        except ValueError:
            return str(Path(bench).with_suffix(""))
    outputs = record.get("outputs") or []
    return f"{record['rule']}:{outputs[0]}" if outputs else str(record["rule"])


def load_jobs(graph_json: str, benchmarks_dir: str) -> list[Job]:
    """The jobs of ``graph_json`` with the seconds of their benchmark files, and the jobs a checkpoint added after
    the graph was written (:func:`pgrpo.grpo.job_costs.jobs_added_by_checkpoints`: the benchmark files under
    ``benchmarks_dir`` that no job claims, matched to the graph's rule patterns)."""
    data = atomic.read_json(graph_json, "the job graph (written when the run started)")
    if not isinstance(data.get("jobs"), list):
        raise InputError(f"{graph_json}: no 'jobs' list")
    root = Path(benchmarks_dir)
    jobs = []
    for record in data["jobs"]:
        for key in ("rule", "inputs", "outputs"):
            if key not in record:
                raise InputError(f"{graph_json}: a job without '{key}'")
        bench = record.get("benchmark")
        jobs.append(Job(name=_job_name(record, root), rule=record["rule"],
                        seconds=benchmark_seconds(Path(bench)) if bench else None,
                        inputs=tuple(record["inputs"]), outputs=tuple(record["outputs"])))
    rules = [RulePattern(str(r["rule"]), r.get("benchmark"), tuple(r.get("outputs") or ()), bool(r.get("checkpoint")))
             for r in data.get("rules") or ()]
    if not rules or not root.is_dir():
        return jobs
    claimed = {os.path.normpath(r["benchmark"]) for r in data["jobs"] if r.get("benchmark")}
    files = {str(p): benchmark_seconds(p) for p in sorted(root.rglob("*.tsv")) if os.path.normpath(p) not in claimed}
    checkpoint_outputs = [o for j in jobs if j.rule in {r.rule for r in rules if r.checkpoint} for o in j.outputs]
    written = {p: os.path.getmtime(p) for p in [*files, *checkpoint_outputs] if os.path.exists(p)}
    jobs, added = jobs_added_by_checkpoints(jobs, rules, files, written,
                                            name_of=lambda p: _job_name({"benchmark": p}, root))
    return jobs + added


def planned_seconds(jobs: list[Job], config: dict | None) -> list[Job]:
    """Each job with ``pgrpo plan``'s seconds for it where the plan prices it (read-only use of the plan)."""
    if config is None:
        return jobs
    import dataclasses

    try:  # the plan reads model configs through the training stack, which the analysis env need not have
        from pgrpo.stages.plan import build_plan
    except ImportError as err:
        print(f"job-costs: no planned seconds ({err})")
        return jobs
    try:
        plan = build_plan(config, benchmarks_dir=None)
    except (InputError, KeyError, ValueError) as err:  # a config the plan cannot price: no planned column
        print(f"job-costs: no planned seconds ({err})")
        return jobs
    out = []
    for job in jobs:
        try:
            out.append(dataclasses.replace(job, planned_seconds=plan.job(job.name).hours * 3600.0))
        except KeyError:
            out.append(job)
    return out


def run_job_costs(graph_json: str, benchmarks_dir: str, out_md: str, out_csv: str, cores: int | None = None,
                  config: dict | None = None, out_json: str | None = None, now: float | None = None) -> CostTable:
    """Write the cost table (Markdown, CSV and the totals as JSON) of the jobs in ``graph_json``; print the totals.
    ``cores``: default the run's own (recorded when it started), else 2. The elapsed wall-clock is this run's, from
    its start to this table (``now``, default the present)."""
    import pandas as pd

    from pgrpo.tables.job_costs import cost_markdown, cost_summary, job_rows

    started, run_cores = run_started(graph_json)
    cores = cores or run_cores or 2
    elapsed = None if started is None else max(0.0, (time.time() if now is None else now) - started)
    table = cost_table(planned_seconds(load_jobs(graph_json, benchmarks_dir), config), exclude_rules=NOT_COUNTED)
    ran = jobs_run(graph_json, benchmarks_dir, table)
    atomic.write_text(out_md, cost_markdown(table, cores, elapsed, ran) + "\n")
    columns = ["job", "rule", "seconds", "share", "critical_path", "planned_seconds"]
    atomic.write_csv(out_csv, pd.DataFrame(job_rows(table), columns=columns))
    if out_json:
        atomic.write_json(out_json, {**cost_summary(table, cores, elapsed), "jobs_run": ran})
    print(f"job-seconds {table.total_seconds:.0f} s over {len(table.jobs)} jobs; critical path "
          f"{table.critical_path_seconds:.0f} s; on {cores} cores >= {table.wall_lower_bound(cores):.0f} s")
    return table
