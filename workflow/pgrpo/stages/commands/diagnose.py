"""``pgrpo diagnostics`` (Figures 2-5 of the workflow's runs) and ``pgrpo diagnose`` (any TRL run's log): failure
modes and read-outs (:mod:`pgrpo.stages.diagnose`)."""

from __future__ import annotations

from pgrpo.stages.commands import USER_TOOLS, WORKFLOW_STAGES, Commands, add_required, add_section_args, config_section


def add_commands(commands: Commands) -> None:
    p = commands.add("diagnostics", WORKFLOW_STAGES, "Figures 2-5: the four diagnostics with verdicts, per model and G",
                     _diagnostics)
    add_section_args(p)
    p.add_argument("--aggregates", nargs="+", required=True)
    p.add_argument("--metas", nargs="*", default=[])
    p.add_argument("--fits", nargs="*", default=[])
    add_required(p, "--json", "--md")
    p.add_argument("--figures", required=True, help="directory for figure2..figure5 .pdf/.png")

    p = commands.add("diagnose", USER_TOOLS, "diagnose any TRL run's log: ten failure modes, each flagged or not "
                                             "with its episodes, and the Figures 2-5 read-outs", _diagnose)
    add_section_args(p)
    p.add_argument("log", help="trainer_state.json, a bare log_history JSON list, a TRL output folder (its latest "
                               "checkpoint), log.csv, a W&B/TRL CSV (train/ eval/ names), or a TRL or verl job's "
                               "console output (slurm-<id>.out, train.log)")
    p.add_argument("--out", help="directory for verdicts.json, summary.md, summary.html and the figures")
    p.add_argument("--rules", choices=["ours", "toolkit"], help="rule set for the modes (default: ours; toolkit: the "
                                                                 "post-training toolkit's GRPO rules)")
    p.add_argument("--max-completion-length", type=int, help="the run's completion cap (for truncation)")
    p.add_argument("--reward-range", type=float, nargs=2, metavar=("LO", "HI"),
                   help="the reward's range, if known (tells a solved task from a stuck one)")
    p.add_argument("--gold-reward", metavar="FN", help="the reward function that scores the task: read as the "
                                                       "held-out curve for hacking when no eval column is logged "
                                                       "(default: the one named correct/accuracy/exact/gold/verif)")
    p.add_argument("--allow-nan", action="store_true", help="read NaN/infinite values as a divergence instead of "
                                                            "refusing the log")
    p.add_argument("--fail-on-flag", action="store_true", help="exit with status 1 when any mode is flagged")
    p.add_argument("--meta", help="meta.json with eta, mu, k_ref, G, max_completion_length (for Prop. 9, truncation)")
    p.add_argument("--G", type=int, help="group size, if neither the path nor --meta says")
    p.add_argument("--lr", type=float, help="the run's learning rate eta (Theorem 7's prediction; overrides --meta)")
    p.add_argument("--beta1", type=float, help="the optimizer's momentum mu (Adam beta1)")
    p.add_argument("--k-ref", type=int, help="the refresh interval K_ref of pi_old, in optimizer steps")
    p.add_argument("--json", help="write the diagnosis as JSON")
    p.add_argument("--md", help="write the one-page summary as Markdown (default: print it)")
    p.add_argument("--figures", help="directory for figures")


def _diagnostics(args):
    from pgrpo.stages import diagnose

    diagnose.run_diagnostics(aggregate_csvs=args.aggregates, out_json=args.json, out_md=args.md,
                             out_dir_figures=args.figures, meta_jsons=args.metas, fit_jsons=args.fits,
                             diagnostics=config_section(args, "diagnostics"))


def _diagnose(args):
    from pgrpo.stages import diagnose

    section = config_section(args, "diagnostics") if (args.section_json or args.config) else None
    report = diagnose.run_diagnose(log_path=args.log, out_json=args.json, out_md=args.md, meta_json=args.meta,
                                   diagnostics=section, G=args.G, out_dir_figures=args.figures,
                                   out_dir=args.out, rules=args.rules,
                                   max_completion_length=args.max_completion_length,
                                   reward_range=args.reward_range, allow_non_finite=args.allow_nan,
                                   gold_reward=args.gold_reward,
                                   settings={k: v for k, v in (("eta", args.lr), ("mu", args.beta1),
                                                               ("k_ref", args.k_ref)) if v is not None})
    if not args.md:
        print(diagnose.summary_text(report))
    if args.fail_on_flag and report.verdicts is not None and report.verdicts.flagged_modes():
        return 1
