"""``pgrpo evaluate``, ``table1`` and ``passk-curves``: pass@k of the model variants and Table 1
(:mod:`pgrpo.stages.evaluate`)."""

from __future__ import annotations

from pgrpo.stages.commands import (
    WORKFLOW_STAGES,
    Commands,
    add_model_args,
    add_required,
    benchmark_spec,
    json_sections,
    model_and_config,
)


def add_commands(commands: Commands) -> None:
    p = commands.add("evaluate", WORKFLOW_STAGES, "pass@k of one model variant on one benchmark (Table 1)", _evaluate)
    add_model_args(p, "model spec as JSON {name, id, path}")
    p.add_argument("--variant-path", default="", help="merged model directory of a trained variant ('' = base)")
    p.add_argument("--benchmark", required=True, help="benchmark name")
    p.add_argument("--benchmark-json", help="the benchmark's spec as JSON (default: from --config)")
    p.add_argument("--evaluation-json", help="the evaluation section as JSON (default: from --config)")
    p.add_argument("--json", required=True)
    p.add_argument("--samples", help="write every completion as JSONL")
    p.add_argument("--prepared",
                   help="the benchmark's prepared file (rule prepare_benchmark); default: read the source")

    p = commands.add("table1", WORKFLOW_STAGES, "Table 1 from evaluation JSONs: pass@k per benchmark, base and each G",
                     _table1)
    p.add_argument("evals", nargs="+")
    add_required(p, "--csv", "--md", "--tex")
    p.add_argument("--html", help="the table as a standalone HTML page, coloured as in the paper")
    p.add_argument("--summary-csv", help="every cell: mean, s.d., n, base, delta, mark")

    p = commands.add("passk-curves", WORKFLOW_STAGES, "pass@k for k = 1..n of every evaluation JSON: CSV and figure",
                     _passk_curves)
    p.add_argument("evals", nargs="+")
    p.add_argument("--csv", required=True)
    p.add_argument("--pdf")
    p.add_argument("--png")


def _evaluate(args):
    model, config = model_and_config(args)
    benchmark, evaluation = (json_sections(args, "--benchmark-json", "--evaluation-json") if config is None
                             else (benchmark_spec(config, args.benchmark), config["evaluation"]))
    from pgrpo.stages import evaluate

    evaluate.run_evaluate(model=model, variant_path=args.variant_path or None, benchmark_name=args.benchmark,
                          benchmark=benchmark, evaluation=evaluation, out_json=args.json,
                          out_samples_jsonl=args.samples, seed=int(evaluation.get("seed", 0)),
                          prepared=args.prepared)


def _table1(args):
    from pgrpo.stages import evaluate

    evaluate.run_table1(eval_jsons=args.evals, out_csv=args.csv, out_md=args.md, out_tex=args.tex,
                        out_html=args.html, out_summary_csv=args.summary_csv)


def _passk_curves(args):
    from pgrpo.stages import evaluate

    evaluate.run_passk_curves(eval_jsons=args.evals, out_csv=args.csv, out_pdf=args.pdf, out_png=args.png)
