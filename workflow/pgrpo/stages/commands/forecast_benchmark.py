"""``pgrpo forecast-benchmark``: the forecaster against its baselines (:mod:`pgrpo.stages.forecast_benchmark`)."""

from __future__ import annotations

from pgrpo.stages.commands import (
    BENCHMARKS,
    Commands,
    add_required,
    add_section_args,
    add_workers_arg,
    config_section,
)


def add_commands(commands: Commands) -> None:
    p = commands.add("forecast-benchmark", BENCHMARKS, "the forecaster against persistence and fitted-curve baselines "
                     "on the workflow's runs, the bandit and public TRL logs", _forecast_benchmark)
    add_section_args(p)
    p.add_argument("--logs", nargs="*", default=[], help="the workflow's log.csv files (part a)")
    p.add_argument("--kref-logs", nargs="*", default=[], help="the K_ref sweep's grid runs' log.csv files (part e: "
                                                              "a sweep per arm)")
    p.add_argument("--data-dir", help="public TRL logs (default: forecast_benchmark.data_dir)")
    add_workers_arg(p)
    add_required(p, "--csv", "--md", "--png")


def _forecast_benchmark(args):
    import sys

    from tqdm import tqdm

    from pgrpo.stages import forecast_benchmark

    with tqdm(desc="forecast benchmark", unit="curve", file=sys.stderr) as bar:
        forecast_benchmark.run_forecast_benchmark_all(config_section(args, "forecast_benchmark"), args.logs,
                                                      args.csv, args.md, args.png, data_dir=args.data_dir,
                                                      kref_logs=args.kref_logs, workers=args.workers,
                                                      progress=lambda _: bar.update())
