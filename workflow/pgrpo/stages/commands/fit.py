"""``pgrpo fit``, ``figure1``, ``forecast`` and ``forecast-summary``: the three-phase law fitted to the runs, and
forecasts of a run's reward curve (:mod:`pgrpo.stages.fit`)."""

from __future__ import annotations

from pgrpo.stages.commands import (
    USER_TOOLS, WORKFLOW_STAGES, Commands, add_required, add_section_args, config_section, parse_component_ranges)


def add_commands(commands: Commands) -> None:
    p = commands.add("fit", WORKFLOW_STAGES, "three-phase law and rivals on the seed means of one model (all G)", _fit)
    add_section_args(p)
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--metas", nargs="*", default=[])
    add_required(p, "--json", "--csv", "--md", "--tex")

    p = commands.add("figure1", WORKFLOW_STAGES, "Figure 1: models x (train reward, eval reward, eval accuracy) x G",
                     _figure1)
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--fits", nargs="+", required=True)
    add_required(p, "--pdf", "--png")

    p = commands.add("forecast", USER_TOOLS, "forecast the rest of any run's reward curve from its first steps, with "
                                             "intervals, plateau and time to 90%%", _forecast)
    add_section_args(p)
    p.add_argument("log", nargs="*", metavar="LOG", help="log.csv, a TRL trainer_state.json, a bare log_history list "
                                                         "(JSON), a TRL output folder, a CSV with TRL / W&B names, or a "
                                                         "TRL or verl job's console output; "
                                                         "one, or with --compare any number")
    p.add_argument("--meta", help="meta.json of the run (reward range [0, 1], batch, Eq. 9 link)")
    p.add_argument("--fraction", type=float, help="fraction of steps to fit on (default: fitting.forecast_fraction)")
    p.add_argument("--column", default="reward")
    p.add_argument("--reward-range", type=float, nargs=2, metavar=("LO", "HI"), help="the reward's declared range")
    p.add_argument("--batch", type=float, help="completions per optimizer step (binomial noise floor)")
    p.add_argument("--total-steps", type=float, help="the run's planned length (default: meta max_steps, else "
                                                     "the last logged step)")
    p.add_argument("--target", type=float, help="a reward level: P(plateau >= X) and the step the run reaches it")
    p.add_argument("--compare", nargs="+", metavar="LOG", help="rank these runs (and LOG, if given) by where they "
                                                               "will end, with P(each ends highest) and the runs the "
                                                               "stop rule would stop now")
    p.add_argument("--stop-threshold", type=float, default=0.05, help="--compare: stop a run when P(its plateau "
                                                                      "beats the best so far) is below this")
    p.add_argument("--component-range", nargs=3, action="append", metavar=("FN", "LO", "HI"), default=[],
                   help="declared range of the reward function FN (rewards/FN/mean), repeatable; with "
                        "--compare, of every run's FN")
    p.add_argument("--json", help="output JSON (default: print a summary only)")
    p.add_argument("--png", help="output figure (with --compare: every run's forecast and plateau side by side)")

    p = commands.add("forecast-summary", WORKFLOW_STAGES, "forecast errors and their spread across seeds",
                     _forecast_summary)
    p.add_argument("forecasts", nargs="+")
    add_required(p, "--csv", "--md")


def _fit(args):
    from pgrpo.stages import fit

    fit.run_fit(aggregate_csvs=args.aggregates, meta_jsons=args.metas, out_json=args.json, out_csv=args.csv,
                out_md=args.md, out_tex=args.tex, cfg=config_section(args, "fitting"))


def _figure1(args):
    from pgrpo.stages import fit

    fit.run_figure1(aggregate_csvs=args.aggregates, fit_jsons=args.fits, out_pdf=args.pdf, out_png=args.png)


def _forecast(args):
    from pgrpo.errors import InputError
    from pgrpo.stages import fit

    section = config_section(args, "fitting")
    ranges = parse_component_ranges(args.component_range)
    if args.compare:
        from pgrpo.stages.forecast_compare import compare_paths, run_forecast_compare

        if args.meta:
            raise InputError("--meta applies to one log, not to --compare (a meta.json beside each log is read)")

        run_forecast_compare(compare_paths(args.log, args.compare), out_json=args.json, fraction=args.fraction,
                             column=args.column, reward_range=args.reward_range, batch=args.batch,
                             total_steps=args.total_steps, threshold=args.stop_threshold, target=args.target,
                             component_ranges=ranges or None, out_png=args.png)
        return
    if not args.log:
        raise InputError("pgrpo forecast needs a LOG (or --compare LOG LOG ...)")
    if len(args.log) > 1:
        raise InputError(f"one LOG at a time ({len(args.log)} given); to rank several runs by where they will end, "
                         "give them to --compare: pgrpo forecast --compare LOG LOG ...")
    (log,) = args.log
    fraction = args.fraction if args.fraction is not None else section.get("forecast_fraction", 0.25)
    fit.run_forecast(log_csv=log, out_json=args.json, fraction=fraction, column=args.column,
                     meta_json=args.meta, out_png=args.png, law=section.get("forecast_law", "three_phase"),
                     reward_range=args.reward_range, batch=args.batch, total_steps=args.total_steps,
                     target=args.target, component_ranges=ranges or None)


def _forecast_summary(args):
    from pgrpo.stages import fit

    fit.run_forecast_summary(forecast_jsons=args.forecasts, out_csv=args.csv, out_md=args.md)
