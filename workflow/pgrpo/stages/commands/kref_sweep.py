"""``pgrpo kref-grid`` and ``pgrpo kref-sweep``: the deep-network K_ref sweep's stiffness from each arm's baseline,
the grid chosen from it, and each run's regime (:mod:`pgrpo.stages.kref_sweep`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, add_required


def add_commands(commands: Commands) -> None:
    g = commands.add("kref-grid", WORKFLOW_STAGES,
                     "the deep-network K_ref sweep: K from an arm's baseline and the grid that brackets Theorem 7",
                     _kref_grid)
    add_required(g, "--arm", "--log", "--meta", "--out", "--kref-sweep-json")
    p = commands.add("kref-sweep", WORKFLOW_STAGES,
                     "the deep-network K_ref sweep: each arm's runs against Theorem 7, per arm and together",
                     _kref_sweep)
    p.add_argument("grids", nargs="+", help="grid.json of each arm (its runs lie beside it), the primary arm first")
    add_required(p, "--csv", "--md", "--json")
    p.add_argument("--png")
    p.add_argument("--pdf")
    p.add_argument("--benchmarks-dir", help="the sweep's Snakemake benchmark files ({arm}/{run}.tsv): its cost")
    p.add_argument("--smoothing", type=int, default=9, help="centred moving average of the reward (points)")
    p.add_argument("--noise-multiple", type=float, default=2.0, help="ringing below this many s.e. is ignored")


def _kref_grid(args):
    from pgrpo.stages.commands import json_arg
    from pgrpo.stages.kref_sweep import run_kref_grid

    grid = run_kref_grid(args.arm, args.log, args.meta, args.out, json_arg(args.kref_sweep_json, "--kref-sweep-json"))
    if grid["measured"]:
        print(f"{args.arm}: K = {grid['stiffness']['K']:.4g}; {len(grid['cells'])} cells, K eta K_ref / (1 - mu) "
              f"{grid['span'][0]:.2g} to {grid['span'][1]:.2g}")
    else:
        print(f"{args.arm}: K could not be measured: {grid['message']}; the arm's sweep stops at its baseline")


def _kref_sweep(args):
    from pgrpo.stages.kref_sweep import run_kref_sweep

    summary = run_kref_sweep(args.grids, args.csv, args.md, args.json, out_png=args.png, out_pdf=args.pdf,
                             smoothing=args.smoothing, noise_multiple=args.noise_multiple,
                             benchmarks_dir=args.benchmarks_dir)
    for arm, a in summary["arms"].items():
        print(f"{arm}: K = {a['stiffness']['K']}; {a['agreement']['agree']} of {a['agreement']['judged']} "
              "classifiable cells agree with Theorem 7")
