"""The per-job cost table of the main job (issue 24; :mod:`pgrpo.grpo.job_costs`) as Markdown and a frame."""

from __future__ import annotations

from pgrpo.grpo.job_costs import CostTable
from pgrpo.tables.render import markdown_table


def _s(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.1f}"


def job_rows(table: CostTable) -> list[dict]:
    """One record per measured job (the CSV)."""
    return [{"job": j.name, "rule": j.rule, "seconds": j.seconds, "share": j.share,
             "critical_path": j.on_critical_path, "planned_seconds": j.planned_seconds} for j in table.jobs]


def cost_summary(table: CostTable, cores: int, elapsed_seconds: float | None = None) -> dict:
    """The totals the README and the docs quote: jobs, job-seconds, the critical path, the least wall-clock on
    ``cores`` cores, this run's elapsed wall-clock (None: not recorded) and the costliest rules."""
    return {"jobs": len(table.jobs), "unmeasured": list(table.unmeasured), "job_seconds": table.total_seconds,
            "critical_path_seconds": table.critical_path_seconds, "critical_path_jobs": len(table.critical_path),
            "cores": cores, "wall_lower_bound_seconds": table.wall_lower_bound(cores),
            "elapsed_seconds": elapsed_seconds,
            "rules": [{"rule": r.rule, "jobs": r.jobs, "seconds": r.seconds, "share": r.share} for r in table.rules]}


def ran_words(jobs_run: int | None, jobs: int) -> str:
    """Which jobs an elapsed time covers: the run's own, of the table's."""
    return "" if jobs_run is None else f"; that run executed {jobs_run} of the {jobs} jobs (the others were done)"


def cost_markdown(table: CostTable, cores: int, elapsed_seconds: float | None = None,
                  jobs_run: int | None = None) -> str:
    """Totals, the critical path, then per rule and per job: seconds and share of the job-seconds."""
    lines = [
        "# Where the main job's time goes",
        "",
        *([f"- elapsed: **{elapsed_seconds:.0f} s** ({elapsed_seconds / 60:.1f} min) of wall-clock on {cores} "
           f"cores, from the start of the run that wrote this table to the table{ran_words(jobs_run, len(table.jobs))}"]
          if elapsed_seconds is not None else []),
        f"- job-seconds: **{table.total_seconds:.0f} s** over {len(table.jobs)} jobs "
        f"({table.total_seconds / 60:.1f} min of one core)",
        f"- critical path through the DAG: **{table.critical_path_seconds:.0f} s** over "
        f"{len(table.critical_path)} jobs (no number of cores runs the job in less)",
        f"- on {cores} cores at least **{table.wall_lower_bound(cores):.0f} s** "
        f"({table.wall_lower_bound(cores) / 60:.1f} min) of wall-clock: max(critical path, job-seconds / {cores})",
    ]
    if table.unmeasured:
        lines.append(f"- not measured (no benchmark file): {', '.join(table.unmeasured)}")
    lines += ["", "## Critical path", "", " -> ".join(f"`{name}`" for name in table.critical_path) or "(none)", "",
              "## Per rule", ""]
    lines.append(markdown_table(
        ["rule", "jobs", "job-seconds", "share", "slowest job (s)"],
        [[r.rule, str(r.jobs), _s(r.seconds), f"{100 * r.share:.1f}%", _s(r.max_seconds)] for r in table.rules],
        ["l", "r", "r", "r", "r"]))
    planned = any(j.planned_seconds is not None for j in table.jobs)
    headers = ["job", "rule", "seconds", "share", "critical path"] + (["planned (s)"] if planned else [])
    rows = [[f"`{j.name}`", j.rule, _s(j.seconds), f"{100 * j.share:.1f}%", "yes" if j.on_critical_path else ""]
            + ([_s(j.planned_seconds)] if planned else []) for j in table.jobs]
    lines += ["", "## Per job", "", markdown_table(headers, rows, ["l", "l", "r", "r", "l"] + (["r"] if planned else []))]
    return "\n".join(lines)
