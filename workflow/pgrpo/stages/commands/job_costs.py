"""The verb of the main job's cost table: ``pgrpo job-costs`` (:mod:`pgrpo.stages.job_costs`, issue 24)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, add_required


def add_commands(commands: Commands) -> None:
    p = commands.add("job-costs", WORKFLOW_STAGES,
                     "where the main job's time goes: job-seconds per job and rule, shares, the critical path",
                     _job_costs)
    p.add_argument("--benchmarks-dir", default="results/benchmarks", help="Snakemake's benchmark files")
    p.add_argument("--cores", type=int, default=None,
                   help="cores of the run, for the wall-clock lower bound (default: the run's own, else 2)")
    p.add_argument("--json", help="the totals as JSON (what the README and the docs quote)")
    p.add_argument("--config", help="config YAML: add pgrpo plan's seconds per job where it prices them")
    add_required(p, "--graph", "--md", "--csv")


def _job_costs(args):
    from pgrpo.stages import job_costs
    from pgrpo.stages.commands import args_config

    config = args_config(args) if args.config else None
    job_costs.run_job_costs(args.graph, args.benchmarks_dir, args.md, args.csv, cores=args.cores, config=config,
                           out_json=args.json)
