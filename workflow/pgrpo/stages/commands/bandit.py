"""``pgrpo bandit STEP``: Section 5.6's exact softmax-bandit reduction (:mod:`pgrpo.stages.bandit`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, add_required, add_section_args, config_section


def add_commands(commands: Commands) -> None:
    bandit = commands.add_steps("bandit", WORKFLOW_STAGES, "Section 5.6: the exact softmax-bandit reduction", _bandit,
                                dest="bandit_verb")
    p = bandit.add_parser("calibrate", help="measure K and p* on the stable baseline")
    add_section_args(p)
    p.add_argument("--out", required=True, help="output calibration.json")
    p = bandit.add_parser("sweep", help="Figure 6: the K_ref sweep")
    add_section_args(p)
    p.add_argument("--calibration", required=True)
    p.add_argument("--csv", required=True, help="the curves of Figure 6")
    p.add_argument("--regimes-csv", required=True, help="the regime of every K_ref of the sweep")
    add_required(p, "--pdf", "--png")
    p = bandit.add_parser("regime-map", help="Figure 7: the (eta, K_ref) regime map of one reading")
    add_section_args(p)
    p.add_argument("--calibration", required=True)
    p.add_argument("--refresh", choices=["sliding", "periodic"], required=True)
    p.add_argument("--gradient", choices=["importance_weighted", "stale"], required=True)
    add_required(p, "--csv", "--pdf", "--png")
    p = bandit.add_parser("verdict", help="threshold table and a verdict on each claim of Section 5.6")
    add_section_args(p)
    p.add_argument("--calibration", required=True)
    p.add_argument("--sweep-regimes", required=True, help="the sweep's regimes CSV")
    p.add_argument("--sensitivity", help="sensitivity CSV (verdicts for other reward shapes)")
    p.add_argument("--maps", nargs="+", required=True, help="regime_map_{refresh}_{gradient}.csv files")
    add_required(p, "--md", "--table-csv", "--table-md", "--table-tex")
    p = bandit.add_parser("finite-g", help="real groups of G samples against Prop. 10's 1/G law (beyond the paper)")
    add_section_args(p)
    p.add_argument("--calibration", required=True, help="calibration.json (the measured K)")
    add_required(p, "--md", "--csv", "--png", "--pdf")
    p = bandit.add_parser("sensitivity", help="the verdicts again for other reward shapes (the paper gives none)")
    add_section_args(p)
    add_required(p, "--csv", "--md")


def _bandit(args):
    from pgrpo.stages import bandit as bandit_stage

    section = config_section(args, "bandit")
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
