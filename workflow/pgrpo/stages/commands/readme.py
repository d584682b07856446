"""``pgrpo readme STEP``: the README's results block, from a run's results (:mod:`pgrpo.stages.readme`)."""

from __future__ import annotations

import sys

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands


def add_commands(commands: Commands) -> None:
    readme = commands.add_steps("readme", WORKFLOW_STAGES, "the README's results block, from a run's results",
                                _readme, dest="readme_verb")
    p = readme.add_parser("numbers", help="the facts of a run's results and the README block made from them")
    p.add_argument("--symbolic", help="results/symbolic/verification.json")
    p.add_argument("--calibration", help="results/bandit/calibration.json")
    p.add_argument("--bandit-verdict", help="results/bandit/verdict.md")
    p.add_argument("--models", nargs="*", default=[], help="built model directories (with warmstart.json)")
    p.add_argument("--logs", nargs="*", default=[], help="results/train/{model}/G{G}/seed{seed}/log.csv")
    p.add_argument("--evals", nargs="*", default=[], help="evaluation JSONs (for their job times)")
    p.add_argument("--table1-summary", help="results/tables/table1_summary.csv")
    p.add_argument("--fits", nargs="*", default=[], help="results/fit/{model}/fits.json")
    p.add_argument("--diagnostics", help="results/diagnostics/verdicts.json")
    p.add_argument("--forecast-benchmark", help="results/forecast/benchmark.csv")
    p.add_argument("--diagnose-benchmark", help="results/diagnose_benchmark/summary.csv")
    p.add_argument("--live-benchmark", help="results/live_benchmark/summary.json")
    p.add_argument("--finite-g", help="results/bandit/finite_g.md")
    p.add_argument("--kref-sweep", help="results/kref_sweep/summary.json")
    p.add_argument("--figures", nargs="*", default=[], help="the figures the results pages show (PNG)")
    p.add_argument("--benchmarks-dir", help="results/benchmarks (Snakemake's job times)")
    p.add_argument("--job-costs", help="results/costs/summary.json (the run's cost table: its totals)")
    p.add_argument("--md", required=True, help="the block, markers included (results/readme/summary.md)")
    p.add_argument("--json", required=True, help="the facts (results/readme/numbers.json)")
    p.add_argument("--results-md", help="the results page (default: results.md beside --md)")
    p.add_argument("--benchmarks-md", help="the benchmarks page (default: benchmarks.md beside --md)")
    p.add_argument("--figures-dir", help="the pages' figures (default: figures/ beside --md)")
    p = readme.add_parser("update", help="replace the README's results block by a summary's")
    p.add_argument("readme", help="README.md")
    p.add_argument("summary", nargs="?",
                   help="results/readme/summary.md (omitted: re-render the block from the facts it carries)")
    p = readme.add_parser("check", help="exit 1 unless the README's block is the generator's text (and the summary's)")
    p.add_argument("readme", help="README.md")
    p.add_argument("summary", nargs="?", help="results/readme/summary.md: also require the block to be this run's")


def _readme(args):
    from pgrpo.stages import readme

    if args.readme_verb == "numbers":
        facts = readme.run_readme_numbers(
            out_md=args.md, out_json=args.json, out_results_md=args.results_md,
            out_benchmarks_md=args.benchmarks_md, figures_dir=args.figures_dir, symbolic_json=args.symbolic,
            calibration_json=args.calibration, bandit_verdict_md=args.bandit_verdict, model_dirs=args.models,
            logs=args.logs, eval_jsons=args.evals, table1_summary_csv=args.table1_summary, fits_jsons=args.fits,
            diagnostics_json=args.diagnostics, benchmarks_dir=args.benchmarks_dir,
            forecast_benchmark_csv=args.forecast_benchmark, diagnose_benchmark_csv=args.diagnose_benchmark,
            finite_g_md=args.finite_g, kref_sweep_json=args.kref_sweep, figures=args.figures,
            live_benchmark_json=args.live_benchmark, job_costs_json=args.job_costs)
        for item in facts["missing"]:
            print(f"pgrpo readme numbers: not in the results: {item}", file=sys.stderr)
    elif args.readme_verb == "update":
        readme.run_readme_update(args.readme, args.summary)
        print(f"{args.readme}: results block written from {args.summary or 'its own facts'}")
    else:
        errors = readme.run_readme_check(args.readme, args.summary)
        for error in errors:
            print(f"pgrpo readme check: {error}", file=sys.stderr)
        if errors:
            return 1
        print(f"{args.readme}: the results block is sound"
              + (f" and is that of {args.summary}" if args.summary else ""))
