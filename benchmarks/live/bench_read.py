"""What one live read costs by itself (issue 20: "a read costs under 1% of a tiny-model step at every=10"):
:func:`pgrpo.live.reads.read_curves`, the function the callback's worker, ``pgrpo replay`` and ``pgrpo watch`` call,
on planted healthy logs (:func:`pgrpo.diagnose.planted.simulate`, a three-phase rise, one row per step) of
``--rows`` rows, planned to ``--total`` steps, in this process on one thread: the median over ``--repeats`` reads
of a read that only diagnoses and of one that also forecasts, their mean at the callback's default cadence (the
forecast at every ``forecast_every``-th read) and that mean as a share of ``every`` training steps of
``--step-seconds`` (default 0.9 s: the tiny model's plain TRL step, from ``benchmarks/bench_train.py``).

    python benchmarks/live/bench_read.py [--rows 100 300 1000] [--total 1200] [--repeats 9] [--step-seconds 0.9]

Timings on shared cores are noisy (other jobs run): this prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
os.environ.setdefault("OMP_NUM_THREADS", "1")


def median_seconds(read, repeats: int) -> float:
    read()  # the first read of a kind pays its imports
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        read()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--total", type=float, default=1200.0, help="the run's planned length (the forecast's horizon)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--step-seconds", type=float, default=0.9)
    args = parser.parse_args(argv)

    import numpy as np

    from pgrpo.diagnose.planted import SEED, simulate, three_phase
    from pgrpo.live.reads import LiveSettings, curves_from_history, read_curves

    settings = LiveSettings()
    every, cadence = settings.every, max(settings.forecast_every, 1)
    print(f"one live read, one thread; planned length {args.total:.0f} steps; every={every}, forecast at every "
          f"{cadence} reads; a training step of {1000 * args.step_seconds:.0f} ms")
    print(f"{'rows':>6} {'diagnose':>10} {'+forecast':>10} {'mean/read':>10} {'share of every steps':>21}")
    for rows in args.rows:
        rng = np.random.default_rng(SEED)
        history = simulate(rng, rows, lambda t: three_phase(t, 0.1, 0.8, 3.0 / rows), entropy=lambda t: 0 * t + 1.0)
        curves = curves_from_history(history)
        diagnose = median_seconds(lambda: read_curves(curves, settings, args.total, forecast=False), args.repeats)
        both = median_seconds(lambda: read_curves(curves, settings, args.total, forecast=True), args.repeats)
        mean = ((cadence - 1) * diagnose + both) / cadence
        share = mean / (every * args.step_seconds)
        print(f"{rows:>6} {1000 * diagnose:>8.0f}ms {1000 * both:>8.0f}ms {1000 * mean:>8.0f}ms {100 * share:>20.2f}%")


if __name__ == "__main__":
    main()
