"""Benchmark: cell-steps per second of the vectorised bandit grid against a per-cell loop (Section 5.6 maps).

Runs the same ``(eta, K_ref)`` grid twice with :func:`pgrpo.bandit.simulate`: once as one vectorised call (the
whole grid in one pass) and once cell by cell (a Python loop of scalar calls of the same function), checks that
both give the same trajectories, and prints cell-steps per second and the speed-up. Then the finite-G simulator
(:func:`pgrpo.bandit.finite_g.simulate_finite_g`, Prop. 10's real groups of ``G`` samples) on the same map: its
replica-steps per second beside the exact map's cell-steps per second (a replica-step is a cell-step plus the
sampling of its ``G`` completions, the extra cost). Not a test: timings on shared cores are noisy.

    python benchmarks/bench_bandit.py                      # 40 x 40 grid, 500 steps, both gradient readings
    python benchmarks/bench_bandit.py --n-eta 20 --n-kref 20 --steps 2000 --repeats 3
    python benchmarks/bench_bandit.py --groups 8 64 --replicas 2000     # the finite-G rows
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from pgrpo import bandit  # noqa: E402
from pgrpo.bandit.finite_g import simulate_finite_g  # noqa: E402
from pgrpo.bandit.settings import DEFAULT_REWARDS  # noqa: E402
from timing import best_of  # noqa: E402  (benchmarks/timing.py, beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-eta", type=int, default=40)
    parser.add_argument("--n-kref", type=int, default=40)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--mu", type=float, default=0.8)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5, help="best-of repeats for the vectorised runs")
    parser.add_argument("--refresh", default="sliding", choices=bandit.REFRESHES)
    parser.add_argument("--groups", type=int, nargs="*", default=[8, 64],
                        help="group sizes G for the finite-G rows (none: skip them)")
    parser.add_argument("--replicas", type=int, default=2000, help="finite-G replicas per run")
    args = parser.parse_args()

    rewards = np.array(DEFAULT_REWARDS)
    etas = np.geomspace(0.03, 0.6, args.n_eta)
    k_refs = np.unique(np.round(np.linspace(1, 80, args.n_kref)).astype(int))
    cells = etas.size * k_refs.size
    cell_steps = cells * args.steps
    print(f"grid {etas.size} x {k_refs.size} = {cells} cells, {args.steps} steps, |O| = {rewards.size}, "
          f"refresh = {args.refresh}")
    exact_rate = {}
    for gradient in bandit.GRADIENTS:
        vec_time, vec = best_of(args.repeats, lambda: bandit.simulate(
            rewards, etas[:, None], args.mu, args.beta, k_refs[None, :], args.steps, refresh=args.refresh,
            gradient=gradient))

        def loop():
            out = np.empty((etas.size, k_refs.size, args.steps + 1))
            for i, eta in enumerate(etas):
                for j, k_ref in enumerate(k_refs):
                    out[i, j] = bandit.simulate(rewards, float(eta), args.mu, args.beta, int(k_ref), args.steps,
                                                refresh=args.refresh, gradient=gradient)
            return out

        loop_time, looped = best_of(1, loop)
        max_diff = float(np.max(np.abs(vec - looped)))
        exact_rate[gradient] = cell_steps / vec_time
        print(f"{gradient:>20s}: vectorised {cell_steps / vec_time:12.3e} cell-steps/s ({vec_time:6.2f} s) | "
              f"per-cell loop {cell_steps / loop_time:12.3e} cell-steps/s ({loop_time:6.2f} s) | "
              f"speed-up {loop_time / vec_time:6.1f}x | max |difference| {max_diff:.1e}")

    if not args.groups:
        return
    eta, k_ref = float(etas[etas.size // 2]), int(k_refs[0])
    print(f"finite-G simulator at eta = {eta:.3f}, mu = {args.mu}, K_ref = {k_ref}, {args.replicas} replicas, "
          f"{args.steps} steps, against the exact map's grid above")
    for gradient in bandit.GRADIENTS:
        for group in args.groups:
            fg_time, _ = best_of(args.repeats, lambda: simulate_finite_g(
                rewards, eta, args.mu, args.beta, k_ref, args.steps, group, args.replicas, seed=1,
                refresh=args.refresh, gradient=gradient))
            rate = args.replicas * args.steps / fg_time
            print(f"{gradient:>20s}: G = {group:4d} finite-G {rate:12.3e} replica-steps/s ({fg_time:6.2f} s) | "
                  f"exact map {exact_rate[gradient]:12.3e} cell-steps/s | sampling costs "
                  f"{exact_rate[gradient] / rate:5.1f}x")


if __name__ == "__main__":
    main()
