"""``pgrpo kref-sweep``: the deep-network K_ref sweep's stiffness and each run's regime
(:mod:`pgrpo.stages.kref_sweep`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, add_required


def add_commands(commands: Commands) -> None:
    p = commands.add("kref-sweep", WORKFLOW_STAGES,
                     "the deep-network K_ref sweep: K from the baseline, each run's regime", _kref_sweep)
    p.add_argument("logs", nargs="+", help="log.csv of each sweep run")
    p.add_argument("--metas", nargs="+", required=True, help="meta.json of each run, in the same order")
    add_required(p, "--csv", "--md", "--json")
    p.add_argument("--png")
    p.add_argument("--pdf")
    p.add_argument("--smoothing", type=int, default=9, help="centred moving average of the reward (points)")
    p.add_argument("--noise-multiple", type=float, default=2.0, help="ringing below this many s.e. is ignored")


def _kref_sweep(args):
    from pgrpo.stages.kref_sweep import run_kref_sweep

    summary = run_kref_sweep(args.logs, args.metas, args.csv, args.md, args.json, out_png=args.png,
                             out_pdf=args.pdf, smoothing=args.smoothing, noise_multiple=args.noise_multiple)
    agree = summary["agreement"]
    print(f"K = {summary['stiffness']['K']:.4g}; {agree['agree']} of {agree['judged']} runs agree with Theorem 7")
