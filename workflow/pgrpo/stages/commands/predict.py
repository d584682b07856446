"""``pgrpo predict``: Theorem 7's coefficients, regime and trajectory of one configuration
(:mod:`pgrpo.stages.predict`)."""

from __future__ import annotations

from pgrpo.stages.commands import USER_TOOLS, Commands


def add_commands(commands: Commands) -> None:
    p = commands.add("predict", USER_TOOLS, "Theorem 7: coefficients, regime and mean trajectory of a configuration",
                     _predict)
    p.add_argument("--eta", type=float, required=True, help="learning rate eta")
    p.add_argument("--mu", type=float, required=True, help="momentum (Adam beta1) mu in [0, 1)")
    p.add_argument("--k-ref", type=int, required=True, help="refresh interval K_ref in optimizer steps")
    p.add_argument("--K", type=float, required=True, help="measured stiffness K")
    p.add_argument("--r0", type=float, help="initial reward R0 (prints the predicted trajectory)")
    p.add_argument("--r-inf", type=float, help="plateau R_inf (prints the predicted trajectory)")
    p.add_argument("--steps", type=int, default=None, help="trajectory horizon in steps")
    p.add_argument("--out", help="also write the report to this file")


def _predict(args):
    from pgrpo.stages import predict

    predict.run_predict(eta=args.eta, mu=args.mu, k_ref=args.k_ref, K=args.K, r0=args.r0, r_inf=args.r_inf,
                        steps=args.steps, out_path=args.out)
