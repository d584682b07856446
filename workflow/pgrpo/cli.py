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
    p = bandit.add_parser("sensitivity", help="the verdicts again for other reward shapes (the paper gives none)")
    _add_section_args(p)
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)

    data = sub.add_parser("data", help="datasets").add_subparsers(dest="data_verb", required=True, metavar="STEP")
    p = data.add_parser("synthetic", help="write the synthetic GSM8K-style sft/train/test sets")
    _add_section_args(p)
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

    p = sub.add_parser("forecast", help="forecast plateau and time-to-plateau of any run's log from its first steps")
    _add_section_args(p)
    p.add_argument("log", help="log.csv (or a TRL trainer_state.json / CSV with train/ names)")
    p.add_argument("--meta", help="meta.json of the run (for the link to theory)")
    p.add_argument("--fraction", type=float, help="fraction of steps to fit on (default: fitting.forecast_fraction)")
    p.add_argument("--column", default="reward")
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

    p = sub.add_parser("table1", help="Table 1 from evaluation JSONs: pass@k per benchmark, base and each G")
    p.add_argument("evals", nargs="+")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--tex", required=True)

    p = sub.add_parser("diagnostics", help="Figures 2-5: the four diagnostics with verdicts, per model and G")
    _add_section_args(p)
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--metas", nargs="*", default=[])
    p.add_argument("--fits", nargs="*", default=[])
    p.add_argument("--json", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--figures", required=True, help="directory for figure2..figure5 .pdf/.png")

    p = sub.add_parser("diagnose", help="diagnose any TRL run's log (CSV or trainer_state.json) with verdicts")
    _add_section_args(p)
    p.add_argument("log", help="log.csv, a CSV with train/ eval/ names, or a trainer_state.json")
    p.add_argument("--meta", help="meta.json with eta, mu, k_ref, G (for the stability threshold)")
    p.add_argument("--G", type=int, help="group size, if neither the path nor --meta says")
    p.add_argument("--json", help="write the diagnosis as JSON")
    p.add_argument("--md", help="write the diagnosis as Markdown (default: print it)")
    p.add_argument("--figures", help="directory for figures")

    p = sub.add_parser("forecast-summary", help="forecast errors and their spread across seeds")
    p.add_argument("forecasts", nargs="+")
    p.add_argument("--csv", required=True)
    p.add_argument("--md", required=True)
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
    from pgrpo.config import load_config

    load_config(args.config)
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


@verb("data")
def _data(args):
    from pgrpo.stages import model

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

    train.run_train(model=model, data=data, training=training, G=args.G, seed=args.seed, out_dir=args.out_dir)


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
                         meta_json=args.meta, out_png=args.png, law=section.get("forecast_law", "three_phase"))


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
                          out_samples_jsonl=args.samples, seed=int(evaluation.get("seed", 0)))


@verb("table1")
def _table1(args):
    from pgrpo.stages import evaluate

    evaluate.run_table1(eval_jsons=args.evals, out_csv=args.csv, out_md=args.md, out_tex=args.tex)


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
                                      diagnostics=section, G=args.G, out_dir_figures=args.figures)
    if not args.md:
        print(report.to_markdown())


@verb("forecast-summary")
def _forecast_summary(args):
    from pgrpo.stages import fit

    fit.run_forecast_summary(forecast_jsons=args.forecasts, out_csv=args.csv, out_md=args.md)


if __name__ == "__main__":
    sys.exit(main())
