"""Benchmark: replica-steps per second of the vectorised finite-G bandit against the per-replica reference loop.

Runs the same configuration with :func:`pgrpo.finite_g_bandit.simulate_finite_g` (all replicas in one numpy pass
per step, one ``multinomial`` call for all groups), with :func:`~pgrpo.finite_g_bandit.run_finite_g` (the same plus
the per-step diagnostics: ``sigma_adv``, zero-spread fraction, forcing) and with
:func:`~pgrpo.finite_g_bandit.simulate_finite_g_loop` (a Python loop over replicas, Eq. 1-2 written per sample).
The loop draws the same random stream, so the script also prints the largest difference between the two
trajectories. Then it times the default study grid of :class:`~pgrpo.finite_g_bandit.GridSettings` unless
``--skip-grid``. Not a test: timings on shared cores are noisy.

    python benchmarks/bench_finite_g.py                                  # G in 2, 16, 128; 2000 replicas
    python benchmarks/bench_finite_g.py --groups 4 64 --replicas 500 --steps 500 --skip-grid
"""

from __future__ import annotations

import argparse
import functools
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from pgrpo.bandit.finite_g import DEFAULT_REWARDS, run_finite_g, simulate_finite_g, simulate_finite_g_loop  # noqa: E402
from pgrpo.bandit.finite_g_study import GridSettings, analyse_grid, run_grid  # noqa: E402
from timing import best_of  # noqa: E402  (benchmarks/timing.py, beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[2, 16, 128])
    parser.add_argument("--replicas", type=int, default=2000)
    parser.add_argument("--loop-replicas", type=int, default=20, help="replicas for the (slow) reference loop")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eta", type=float, default=0.2)
    parser.add_argument("--mu", type=float, default=0.5)
    parser.add_argument("--k-ref", type=int, default=1)
    parser.add_argument("--refresh", default="sliding", choices=("sliding", "periodic"))
    parser.add_argument("--gradient", default="importance_weighted", choices=("importance_weighted", "stale"))
    parser.add_argument("--repeats", type=int, default=2, help="best-of repeats for the vectorised runs")
    parser.add_argument("--skip-grid", action="store_true", help="do not time the default study grid")
    args = parser.parse_args()

    rewards = np.array(DEFAULT_REWARDS)
    common = {"refresh": args.refresh, "gradient": args.gradient}
    cfg = (rewards, args.eta, args.mu, 1.0, args.k_ref, args.steps)
    print(f"|O| = {rewards.size}, eta = {args.eta}, mu = {args.mu}, K_ref = {args.k_ref}, {args.refresh}/"
          f"{args.gradient}, {args.steps} steps; replica-steps per second (best of {args.repeats})")
    print(f"{'G':>5} | {'vectorised':>12} | {'+diagnostics':>12} | {'loop':>12} | {'speed-up':>8} | "
          f"{'max|vec - loop|':>15}")
    for G in args.groups:
        work = args.replicas * args.steps
        vec = functools.partial(simulate_finite_g, *cfg, G, args.replicas, seed=1, **common)
        diag = functools.partial(run_finite_g, *cfg, G, args.replicas, seed=1, **common)
        loop = functools.partial(simulate_finite_g_loop, *cfg, G, args.loop_replicas, seed=1, **common)
        (t_vec, _), (t_diag, _), (t_loop, looped) = best_of(args.repeats, vec), best_of(args.repeats, diag), \
            best_of(1, loop)
        same = simulate_finite_g(*cfg, G, args.loop_replicas, seed=1, **common)
        loop_rate = args.loop_replicas * args.steps / t_loop
        print(f"{G:5d} | {work / t_vec:12.3e} | {work / t_diag:12.3e} | {loop_rate:12.3e} | "
              f"{work / t_vec / loop_rate:7.0f}x | {np.abs(same - looped).max():15.1e}")

    if not args.skip_grid:
        settings = GridSettings()
        start = time.perf_counter()
        points = run_grid(settings)
        t_grid = time.perf_counter() - start
        start = time.perf_counter()
        analyse_grid(points, settings)
        t_analysis = time.perf_counter() - start
        n = len(settings.group_sizes) * settings.replicas * settings.steps
        print(f"default grid G = {settings.group_sizes} x {settings.replicas} replicas x {settings.steps} steps: "
              f"{t_grid:.1f} s ({n / t_grid:.3e} replica-steps/s), analysis {t_analysis:.1f} s")


if __name__ == "__main__":
    main()
