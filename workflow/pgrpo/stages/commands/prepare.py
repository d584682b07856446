"""``pgrpo prepare-benchmark``: a benchmark read once, screened and subsampled for every evaluation job
(:mod:`pgrpo.stages.prepare`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, args_config, benchmark_spec, json_arg


def add_commands(commands: Commands) -> None:
    p = commands.add("prepare-benchmark", WORKFLOW_STAGES, "download (streaming a large split) or read a benchmark "
                     "once, screen and subsample it, write its problems for every evaluation job", _prepare_benchmark)
    p.add_argument("--config", help="config YAML (default: config/config.yaml)")
    p.add_argument("--benchmark", required=True, help="benchmark name")
    p.add_argument("--benchmark-json", help="the benchmark's spec as JSON (default: from --config)")
    p.add_argument("--seed", type=int, help="subsampling seed (default: evaluation.seed of --config, else 0)")
    p.add_argument("--out", required=True, help="output JSONL (a .meta.json is written beside it)")


def _prepare_benchmark(args):
    seed = args.seed
    if args.benchmark_json:
        benchmark = json_arg(args.benchmark_json, "--benchmark-json")
    else:
        config = args_config(args)
        benchmark = benchmark_spec(config, args.benchmark)
        seed = int(config["evaluation"].get("seed", 0)) if seed is None else seed
    from pgrpo.stages import prepare

    record = prepare.run_prepare_benchmark(args.benchmark, benchmark, args.out, seed=int(seed or 0))
    print(f"{args.benchmark}: {record['n_problems']} problems of {record['n_source']} rows read from "
          f"{record['source']} (skipped: {record['excluded'] or 'none'})")
