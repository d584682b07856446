"""``pgrpo aggregate``: the seeds' logs aligned by step (:mod:`pgrpo.stages.aggregate`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands


def add_commands(commands: Commands) -> None:
    p = commands.add("aggregate", WORKFLOW_STAGES, "align seeds' logs by step: mean and s.d. of every quantity",
                     _aggregate)
    p.add_argument("logs", nargs="+", help="log.csv of each seed")
    p.add_argument("--out", required=True)


def _aggregate(args):
    from pgrpo.stages import aggregate

    aggregate.run_aggregate(log_csvs=args.logs, out_csv=args.out)
