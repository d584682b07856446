"""``pgrpo <verb>``: every stage of the workflow, usable outside Snakemake.

Each verb parses its arguments, reads a config section (``--section-json`` as the Snakemake rules pass it, or
``--config FILE`` validated against config/schema.yaml, the embedded default when omitted), and calls one
``run_*`` function of the concept's module. A user's mistake prints one line naming the bad input and exits 2.
Heavy libraries (torch, TRL) are imported only by the verbs that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from pgrpo.errors import InputError

VERBS: dict[str, Callable[[argparse.Namespace], Any]] = {}


def verb(name: str):
    def register(func):
        VERBS[name] = func
        return func

    return register


def _section(args: argparse.Namespace, name: str) -> dict:
    """The config section ``name``: from --section-json if given, else from --config (validated)."""
    if getattr(args, "section_json", None):
        try:
            value = json.loads(args.section_json)
        except json.JSONDecodeError as error:
            raise InputError(f"--section-json is not valid JSON ({error.msg} at char {error.pos})") from None
        if not isinstance(value, dict):
            raise InputError("--section-json must be a JSON object")
        return value
    return _config(args)[name]


def _config(args: argparse.Namespace) -> dict:
    from pgrpo.config import DEFAULT_CONFIG_PATH, load_config

    return load_config(getattr(args, "config", None) or DEFAULT_CONFIG_PATH)


def _model_spec(config: dict, name: str | None) -> dict:
    """The spec {name, id, path, ...} of the config's model ``name`` (--model)."""
    if not name or name not in config["models"]:
        raise InputError(f"--model must name one of the config's models: {', '.join(config['models'])}")
    return {"name": name, **config["models"][name]}


def _json_arg(text: str, flag: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{flag} is not valid JSON ({error.msg} at char {error.pos})") from None
    if not isinstance(value, dict):
        raise InputError(f"{flag} must be a JSON object")
    return value


def _add_section_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="config YAML (default: config/config.yaml); validated against the schema")
    parser.add_argument("--section-json", help="the config section as JSON (how the Snakemake rules call it)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgrpo",
        description="Predictable GRPO: closed-form dynamics, exact bandit, GRPO training, fits, forecasts.",
    )
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = sub.add_parser("validate", help="validate a config file against config/schema.yaml")
    p.add_argument("config", help="config YAML file")

    p = sub.add_parser("predict", help="Theorem 7: coefficients, regime and mean trajectory of a configuration")
    p.add_argument("--eta", type=float, required=True, help="learning rate eta")
    p.add_argument("--mu", type=float, required=True, help="momentum (Adam beta1) mu in [0, 1)")
    p.add_argument("--k-ref", type=int, required=True, help="refresh interval K_ref in optimizer steps")
    p.add_argument("--K", type=float, required=True, help="measured stiffness K")
    p.add_argument("--r0", type=float, help="initial reward R0 (prints the predicted trajectory)")
    p.add_argument("--r-inf", type=float, help="plateau R_inf (prints the predicted trajectory)")
    p.add_argument("--steps", type=int, default=None, help="trajectory horizon in steps")
    p.add_argument("--out", help="also write the report to this file")

    p = sub.add_parser("symbolic", help="Appendix A: derive every closed form with sympy and compare with the paper")
    p.add_argument("--json", required=True, help="output verification.json")
    p.add_argument("--md", required=True, help="output verification.md")

    bandit = sub.add_parser("bandit", help="Section 5.6: the exact softmax-bandit reduction").add_subparsers(
        dest="bandit_verb", required=True, metavar="STEP"
    )
    p = bandit.add_parser("calibrate", help="measure K and p* on the stable baseline")
    _add_section_args(p)
    p.add_argument("--out", required=True, help="output calibration.json")
    p = bandit.add_parser("sweep", help="Figure 6: the K_ref sweep")
    _add_section_args(p)
    p.add_argument("--calibration", required=True)
    p.add_argument("--csv", required=True, help="the curves of Figure 6")
    p.add_argument("--regimes-csv", required=True, help="the regime of every K_ref of the sweep")
    p.add_argument("--pdf", required=True)
    p.add_argument("--png", required=True)
    p = bandit.add_parser("regime-map", help="Figure 7: the (eta, K_ref) regime map of one reading")
    _add_section_args(p)
    p.add_argument("--calibration", required=True)
    p.add_argument("--refresh", choices=["sliding", "periodic"], required=True)
    p.add_argument("--gradient", choices=["importance_weighted", "stale"], required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--pdf", required=True)
    p.add_argument("--png", required=True)
    p = bandit.add_parser("verdict", help="threshold table and a verdict on each claim of Section 5.6")
    _add_section_args(p)
    p.add_argument("--calibration", required=True)
    p.add_argument("--sweep-regimes", required=True, help="the sweep's regimes CSV")
    p.add_argument("--sensitivity", help="sensitivity CSV (verdicts for other reward shapes)")
    p.add_argument("--maps", nargs="+", required=True, help="regime_map_{refresh}_{gradient}.csv files")
    p.add_argument("--md", required=True)
    p.add_argument("--table-csv", required=True)
    p.add_argument("--table-md", required=True)
    p.add_argument("--table-tex", required=True)
    p = bandit.add_parser("finite-g", help="real groups of G samples against Prop. 10's 1/G law (beyond the paper)")
    _add_section_args(p)
    p.add_argument("--calibration", required=True, help="calibration.json (the measured K)")
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--pdf", required=True)
    p = bandit.add_parser("sensitivity", help="the verdicts again for other reward shapes (the paper gives none)")
    _add_section_args(p)
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)

    data = sub.add_parser("data", help="datasets").add_subparsers(dest="data_verb", required=True, metavar="STEP")
    p = data.add_parser("synthetic", help="write the synthetic GSM8K-style sft/train/test sets")
    _add_section_args(p)
    p.add_argument("--out-dir", required=True)
    p = data.add_parser("suite", help="write the graded synthetic benchmarks of synthetic.suite")
    _add_section_args(p)
    p.add_argument("--data-dir", required=True, help="the splits written by 'pgrpo data synthetic'")
    p.add_argument("--out-dir", required=True)

    p = sub.add_parser("build-tiny", help="build and warm-start the embedded tiny model and tokenizer")
    _add_section_args(p)
    p.add_argument("--data-dir", required=True, help="directory with sft.jsonl and test.jsonl")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=None, help="overrides tiny.seed")

    p = sub.add_parser("train", help="GRPO (TRL + LoRA) for one (model, G, seed), logged at every step")
    p.add_argument("--config", help="config YAML (default: config/config.yaml)")
    p.add_argument("--model", help="model name in the config (with --config)")
    p.add_argument("--model-json", help="model spec as JSON {name, id, path} (how the rule calls it)")
    p.add_argument("--data-json", help="the data section as JSON")
    p.add_argument("--training-json", help="the training section as JSON")
    p.add_argument("--G", type=int, required=True, help="group size (completions per prompt)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--kref-sweep-json", help="the kref_sweep section as JSON: train one run of the K_ref sweep")
    p.add_argument("--eta", type=float, help="with --kref-sweep-json: the run's learning rate")
    p.add_argument("--k-ref", type=int, help="with --kref-sweep-json: the run's refresh interval K_ref")

    p = sub.add_parser("kref-sweep", help="the deep-network K_ref sweep: K from the baseline, each run's regime")
    p.add_argument("logs", nargs="+", help="log.csv of each sweep run")
    p.add_argument("--metas", nargs="+", required=True, help="meta.json of each run, in the same order")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--png")
    p.add_argument("--pdf")
    p.add_argument("--smoothing", type=int, default=9, help="centred moving average of the reward (points)")
    p.add_argument("--noise-multiple", type=float, default=2.0, help="ringing below this many s.e. is ignored")

    p = sub.add_parser("aggregate", help="align seeds' logs by step: mean and s.d. of every quantity")
    p.add_argument("logs", nargs="+", help="log.csv of each seed")
    p.add_argument("--out", required=True)

    p = sub.add_parser("fit", help="three-phase law and rivals on the seed means of one model (all G)")
    _add_section_args(p)
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--metas", nargs="*", default=[])
    p.add_argument("--json", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--tex", required=True)

    p = sub.add_parser("figure1", help="Figure 1: models x (train reward, eval reward, eval accuracy) x G")
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--fits", nargs="+", required=True)
    p.add_argument("--pdf", required=True)
    p.add_argument("--png", required=True)

    p = sub.add_parser("forecast", help="forecast the rest of any run's reward curve from its first steps, with "
                                        "intervals, plateau and time to 90%%")
    _add_section_args(p)
    p.add_argument("log", help="log.csv, a TRL trainer_state.json, a bare log_history list (JSON), a TRL output "
                               "folder, or a CSV with TRL / W&B names")
    p.add_argument("--meta", help="meta.json of the run (reward range [0, 1], batch, Eq. 9 link)")
    p.add_argument("--fraction", type=float, help="fraction of steps to fit on (default: fitting.forecast_fraction)")
    p.add_argument("--column", default="reward")
    p.add_argument("--reward-range", type=float, nargs=2, metavar=("LO", "HI"), help="the reward's declared range")
    p.add_argument("--batch", type=float, help="completions per optimizer step (binomial noise floor)")
    p.add_argument("--total-steps", type=float, help="the run's planned length (default: meta max_steps, else "
                                                     "the last logged step)")
    p.add_argument("--json", help="output JSON (default: print a summary only)")
    p.add_argument("--png", help="output figure")

    p = sub.add_parser("evaluate", help="pass@k of one model variant on one benchmark (Table 1)")
    p.add_argument("--config", help="config YAML (default: config/config.yaml)")
    p.add_argument("--model", help="model name in the config (with --config)")
    p.add_argument("--model-json", help="model spec as JSON {name, id, path}")
    p.add_argument("--variant-path", default="", help="merged model directory of a trained variant ('' = base)")
    p.add_argument("--benchmark", required=True, help="benchmark name")
    p.add_argument("--benchmark-json", help="the benchmark's spec as JSON (default: from --config)")
    p.add_argument("--evaluation-json", help="the evaluation section as JSON (default: from --config)")
    p.add_argument("--json", required=True)
    p.add_argument("--samples", help="write every completion as JSONL")
    p.add_argument("--prepared", help="the benchmark's prepared file (rule prepare_benchmark); default: read the source")

    p = sub.add_parser("prepare-benchmark", help="download (streaming a large split) or read a benchmark once, screen "
                                                 "and subsample it, write its problems for every evaluation job")
    p.add_argument("--config", help="config YAML (default: config/config.yaml)")
    p.add_argument("--benchmark", required=True, help="benchmark name")
    p.add_argument("--benchmark-json", help="the benchmark's spec as JSON (default: from --config)")
    p.add_argument("--seed", type=int, help="subsampling seed (default: evaluation.seed of --config, else 0)")
    p.add_argument("--out", required=True, help="output JSONL (a .meta.json is written beside it)")

    p = sub.add_parser("plan", help="price a grid before submission: steps, tokens, GPU-hours, runtime per job")
    p.add_argument("--config", help="config YAML (default: config/config.yaml)")
    p.add_argument("--md", help="also write the plan to this Markdown file")

    p = sub.add_parser("table1", help="Table 1 from evaluation JSONs: pass@k per benchmark, base and each G")
    p.add_argument("evals", nargs="+")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--tex", required=True)
    p.add_argument("--html", help="the table as a standalone HTML page, coloured as in the paper")
    p.add_argument("--summary-csv", help="every cell: mean, s.d., n, base, delta, mark")

    p = sub.add_parser("passk-curves", help="pass@k for k = 1..n of every evaluation JSON: CSV and figure")
    p.add_argument("evals", nargs="+")
    p.add_argument("--csv", required=True)
    p.add_argument("--pdf")
    p.add_argument("--png")

    p = sub.add_parser("diagnostics", help="Figures 2-5: the four diagnostics with verdicts, per model and G")
    _add_section_args(p)
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--metas", nargs="*", default=[])
    p.add_argument("--fits", nargs="*", default=[])
    p.add_argument("--json", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--figures", required=True, help="directory for figure2..figure5 .pdf/.png")

    p = sub.add_parser("diagnose", help="diagnose any TRL run's log: seven failure modes, each flagged or not with "
                                        "the step where it began, and the Figures 2-5 read-outs")
    _add_section_args(p)
    p.add_argument("log", help="trainer_state.json, a bare log_history JSON list, a TRL output folder (its latest "
                               "checkpoint), log.csv, or a W&B/TRL CSV (train/ eval/ names)")
    p.add_argument("--out", help="directory for verdicts.json, summary.md, summary.html and the figures")
    p.add_argument("--rules", choices=["ours", "toolkit"], help="rule set for the modes (default: ours; toolkit: the "
                                                                 "post-training toolkit's GRPO rules)")
    p.add_argument("--max-completion-length", type=int, help="the run's completion cap (for truncation)")
    p.add_argument("--reward-range", type=float, nargs=2, metavar=("LO", "HI"),
                   help="the reward's range, if known (tells a solved task from a stuck one)")
    p.add_argument("--allow-nan", action="store_true", help="read NaN/infinite values as a divergence instead of "
                                                            "refusing the log")
    p.add_argument("--fail-on-flag", action="store_true", help="exit with status 1 when any mode is flagged")
    p.add_argument("--meta", help="meta.json with eta, mu, k_ref, G, max_completion_length (for Prop. 9, truncation)")
    p.add_argument("--G", type=int, help="group size, if neither the path nor --meta says")
    p.add_argument("--json", help="write the diagnosis as JSON")
    p.add_argument("--md", help="write the one-page summary as Markdown (default: print it)")
    p.add_argument("--figures", help="directory for figures")

    p = sub.add_parser("forecast-summary", help="forecast errors and their spread across seeds")
    p.add_argument("forecasts", nargs="+")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)

    p = sub.add_parser("forecast-benchmark", help="the forecaster against persistence and fitted-curve baselines on "
                                                  "the workflow's runs, the bandit and public TRL logs")
    _add_section_args(p)
    p.add_argument("--logs", nargs="*", default=[], help="the workflow's log.csv files (part a)")
    p.add_argument("--data-dir", help="public TRL logs (default: forecast_benchmark.data_dir)")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--png", required=True)

    p = sub.add_parser("diagnose-benchmark", help="pgrpo diagnose (ours vs the post-training toolkit's rules) on the "
                                                  "planted and the labelled public logs")
    p.add_argument("--data-dir", default="benchmarks/forecast/data", help="labelled public TRL logs (labels.json)")
    p.add_argument("--out", required=True, help="folder for table.md, table.csv, summary.csv, verdicts/")

    readme = sub.add_parser("readme", help="the README's results block, from a run's results").add_subparsers(
        dest="readme_verb", required=True, metavar="STEP"
    )
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
    p.add_argument("--benchmarks-dir", help="results/benchmarks (Snakemake's job times)")
    p.add_argument("--md", required=True, help="the block, markers included (results/readme/summary.md)")
    p.add_argument("--json", required=True, help="the facts (results/readme/numbers.json)")
    p = readme.add_parser("update", help="replace the README's results block by a summary's")
    p.add_argument("readme", help="README.md")
    p.add_argument("summary", nargs="?",
                   help="results/readme/summary.md (omitted: re-render the block from the facts it carries)")
    p = readme.add_parser("check", help="exit 1 unless the README's block is the generator's text (and the summary's)")
    p.add_argument("readme", help="README.md")
    p.add_argument("summary", nargs="?", help="results/readme/summary.md: also require the block to be this run's")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = VERBS.get(args.verb)
    try:
        result = handler(args)
    except InputError as error:
        print(f"pgrpo {args.verb}: error: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:
        print(f"pgrpo {args.verb}: error: file not found: {error.filename or error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(result or 0)


# ---------------------------------------------------------------------------------------------------- verbs


@verb("validate")
def _validate(args):
    from pgrpo.config import chat_template_warnings, load_config

    config = load_config(args.config)
    for warning in chat_template_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{args.config}: valid")


@verb("predict")
def _predict(args):
    from pgrpo.stages import predict

    predict.run_predict(eta=args.eta, mu=args.mu, k_ref=args.k_ref, K=args.K, r0=args.r0, r_inf=args.r_inf,
                       steps=args.steps, out_path=args.out)


@verb("symbolic")
def _symbolic(args):
    from pgrpo.stages import symbolic

    claims = symbolic.run_verify_symbolic(json_path=args.json, md_path=args.md)
    for claim in claims:
        print(f"{claim.verdict:4s}  {claim.id}: {claim.title}")


@verb("bandit")
def _bandit(args):
    from pgrpo.stages import bandit as bandit_stage

    section = _section(args, "bandit")
    if args.bandit_verb == "calibrate":
        bandit_stage.run_calibrate(section, args.out)
    elif args.bandit_verb == "sweep":
        bandit_stage.run_sweep(section, args.calibration, args.csv, args.regimes_csv, args.pdf, args.png)
    elif args.bandit_verb == "regime-map":
        bandit_stage.run_regime_map(section, args.calibration, args.refresh, args.gradient, args.csv, args.pdf,
                                     args.png)
    elif args.bandit_verb == "verdict":
        bandit_stage.run_verdict(section, args.calibration, args.sweep_regimes, args.maps, args.md, args.table_csv,
                                  args.table_md, args.table_tex, sensitivity_csv=args.sensitivity)
    elif args.bandit_verb == "sensitivity":
        bandit_stage.run_sensitivity(section, args.csv, args.md)
    elif args.bandit_verb == "finite-g":
        report = bandit_stage.run_finite_g(section, args.calibration, args.md, args.csv, args.png, args.pdf)
        for v in report.verdicts:
            print(f"{v.verdict:10s} {v.claim}")


@verb("data")
def _data(args):
    from pgrpo.stages import model

    if args.data_verb == "suite":
        counts = model.run_make_suite(data_dir=args.data_dir, out_dir=args.out_dir, cfg=_section(args, "synthetic"))
        print(", ".join(f"{name}: {n}" for name, n in counts.items()) or "synthetic.suite is empty")
        return
    model.run_make_synthetic(out_dir=args.out_dir, cfg=_section(args, "synthetic"))


@verb("build-tiny")
def _build_tiny(args):
    from pgrpo.stages import model

    model.run_build_tiny(data_dir=args.data_dir, out_dir=args.out_dir, cfg=_section(args, "tiny"), seed=args.seed)


@verb("train")
def _train(args):
    if args.model_json:
        model = _json_arg(args.model_json, "--model-json")
        data = _json_arg(args.data_json or "{}", "--data-json")
        training = _json_arg(args.training_json or "{}", "--training-json")
    else:
        config = _config(args)
        model = _model_spec(config, args.model)
        data, training = config["data"], config["training"]
    from pgrpo.stages import train

    if args.kref_sweep_json:
        from pgrpo.stages.kref_sweep import sweep_training

        if args.eta is None or args.k_ref is None:
            raise InputError("--kref-sweep-json needs --eta and --k-ref")
        training = sweep_training(training, _json_arg(args.kref_sweep_json, "--kref-sweep-json"), args.eta,
                                  args.k_ref)
    train.run_train(model=model, data=data, training=training, G=args.G, seed=args.seed, out_dir=args.out_dir)


@verb("kref-sweep")
def _kref_sweep(args):
    from pgrpo.stages.kref_sweep import run_kref_sweep

    summary = run_kref_sweep(args.logs, args.metas, args.csv, args.md, args.json, out_png=args.png,
                             out_pdf=args.pdf, smoothing=args.smoothing, noise_multiple=args.noise_multiple)
    agree = summary["agreement"]
    print(f"K = {summary['stiffness']['K']:.4g}; {agree['agree']} of {agree['judged']} runs agree with Theorem 7")


@verb("aggregate")
def _aggregate(args):
    from pgrpo.stages import aggregate

    aggregate.run_aggregate(log_csvs=args.logs, out_csv=args.out)


@verb("fit")
def _fit(args):
    from pgrpo.stages import fit

    fit.run_fit(aggregate_csvs=args.aggregates, meta_jsons=args.metas, out_json=args.json, out_csv=args.csv,
                    out_md=args.md, out_tex=args.tex, cfg=_section(args, "fitting"))


@verb("figure1")
def _figure1(args):
    from pgrpo.stages import fit

    fit.run_figure1(aggregate_csvs=args.aggregates, fit_jsons=args.fits, out_pdf=args.pdf, out_png=args.png)


@verb("forecast")
def _forecast(args):
    from pgrpo.stages import fit

    section = _section(args, "fitting")
    fraction = args.fraction if args.fraction is not None else section.get("forecast_fraction", 0.25)
    fit.run_forecast(log_csv=args.log, out_json=args.json, fraction=fraction, column=args.column,
                     meta_json=args.meta, out_png=args.png, law=section.get("forecast_law", "three_phase"),
                     reward_range=args.reward_range, batch=args.batch, total_steps=args.total_steps)


@verb("evaluate")
def _evaluate(args):
    if args.model_json:
        model = _json_arg(args.model_json, "--model-json")
        benchmark = _json_arg(args.benchmark_json or "{}", "--benchmark-json")
        evaluation = _json_arg(args.evaluation_json or "{}", "--evaluation-json")
    else:
        config = _config(args)
        model = _model_spec(config, args.model)
        if args.benchmark not in config["benchmarks"]:
            raise InputError(f"--benchmark must name one of the config's benchmarks: {', '.join(config['benchmarks'])}")
        benchmark, evaluation = config["benchmarks"][args.benchmark], config["evaluation"]
    from pgrpo.stages import evaluate

    evaluate.run_evaluate(model=model, variant_path=args.variant_path or None, benchmark_name=args.benchmark,
                          benchmark=benchmark, evaluation=evaluation, out_json=args.json,
                          out_samples_jsonl=args.samples, seed=int(evaluation.get("seed", 0)),
                          prepared=args.prepared)


@verb("prepare-benchmark")
def _prepare_benchmark(args):
    seed = args.seed
    if args.benchmark_json:
        benchmark = _json_arg(args.benchmark_json, "--benchmark-json")
    else:
        config = _config(args)
        if args.benchmark not in config["benchmarks"]:
            raise InputError(f"--benchmark must name one of the config's benchmarks: {', '.join(config['benchmarks'])}")
        benchmark = config["benchmarks"][args.benchmark]
        seed = int(config["evaluation"].get("seed", 0)) if seed is None else seed
    from pgrpo.stages import prepare

    record = prepare.run_prepare_benchmark(args.benchmark, benchmark, args.out, seed=int(seed or 0))
    print(f"{args.benchmark}: {record['n_problems']} problems of {record['n_source']} rows read from "
          f"{record['source']} (skipped: {record['excluded'] or 'none'})")


@verb("plan")
def _plan(args):
    from pgrpo.stages import plan

    plan.run_plan(_config(args), out_md=args.md)


@verb("table1")
def _table1(args):
    from pgrpo.stages import evaluate

    evaluate.run_table1(eval_jsons=args.evals, out_csv=args.csv, out_md=args.md, out_tex=args.tex,
                        out_html=args.html, out_summary_csv=args.summary_csv)


@verb("passk-curves")
def _passk_curves(args):
    from pgrpo.stages import evaluate

    evaluate.run_passk_curves(eval_jsons=args.evals, out_csv=args.csv, out_pdf=args.pdf, out_png=args.png)


@verb("diagnostics")
def _diagnostics(args):
    from pgrpo.stages import diagnose

    diagnose.run_diagnostics(aggregate_csvs=args.aggregates, out_json=args.json, out_md=args.md,
                                out_dir_figures=args.figures, meta_jsons=args.metas, fit_jsons=args.fits,
                                diagnostics=_section(args, "diagnostics"))


@verb("diagnose")
def _diagnose(args):
    from pgrpo.stages import diagnose

    section = _section(args, "diagnostics") if (args.section_json or args.config) else None
    report = diagnose.run_diagnose(log_path=args.log, out_json=args.json, out_md=args.md, meta_json=args.meta,
                                      diagnostics=section, G=args.G, out_dir_figures=args.figures,
                                      out_dir=args.out, rules=args.rules,
                                      max_completion_length=args.max_completion_length,
                                      reward_range=args.reward_range, allow_non_finite=args.allow_nan)
    if not args.md:
        print(diagnose.summary_text(report))
    if args.fail_on_flag and report.verdicts is not None and report.verdicts.flagged_modes():
        return 1


@verb("forecast-summary")
def _forecast_summary(args):
    from pgrpo.stages import fit

    fit.run_forecast_summary(forecast_jsons=args.forecasts, out_csv=args.csv, out_md=args.md)


@verb("forecast-benchmark")
def _forecast_benchmark(args):
    from pgrpo.stages import forecast_benchmark

    forecast_benchmark.run_forecast_benchmark_all(_section(args, "forecast_benchmark"), args.logs, args.csv, args.md,
                                                  args.png, data_dir=args.data_dir)


@verb("diagnose-benchmark")
def _diagnose_benchmark(args):
    from tqdm import tqdm

    from pgrpo.stages import diagnose_benchmark

    with tqdm(desc="diagnose benchmark", unit="log", file=sys.stderr) as bar:
        result = diagnose_benchmark.run_diagnose_benchmark(args.out, args.data_dir, progress=lambda _: bar.update())
    print(f"pgrpo diagnose-benchmark: {sum(result['logs_per_split'].values())} logs -> {args.out}/table.md")


@verb("readme")
def _readme(args):
    from pgrpo.stages import readme

    if args.readme_verb == "numbers":
        facts = readme.run_readme_numbers(
            out_md=args.md, out_json=args.json, symbolic_json=args.symbolic, calibration_json=args.calibration,
            bandit_verdict_md=args.bandit_verdict, model_dirs=args.models, logs=args.logs, eval_jsons=args.evals,
            table1_summary_csv=args.table1_summary, fits_jsons=args.fits, diagnostics_json=args.diagnostics,
            benchmarks_dir=args.benchmarks_dir, forecast_benchmark_csv=args.forecast_benchmark,
            diagnose_benchmark_csv=args.diagnose_benchmark)
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
        print(f"{args.readme}: the results block is sound" + (f" and is that of {args.summary}" if args.summary else ""))


if __name__ == "__main__":
    sys.exit(main())
